/**
 * Bounded polling, for the one case where polling is legitimate: observing OS state that sends no
 * event (a pid vanishing, a file a child process wrote). Never use it to wait for our own code —
 * await its promise or its events$ instead.
 */
export async function waitFor(cond: () => boolean, timeoutMs: number, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (cond()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
