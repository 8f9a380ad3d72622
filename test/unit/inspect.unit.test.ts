/**
 * `RuntimeOptions.inspect` (src/runtime/inspection.ts): a recording inspector — a function, or an
 * observer as `@statelyai/inspect` gives — is told `@xstate.actor` for each stream actor, then for
 * every recorded event `@xstate.event` and `@xstate.snapshot` with the state the log records for it,
 * in the log's order. Offline: a real runtime on a temp dir, a real process (`true`), no inspector
 * server. An inspector that throws changes nothing.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { InspectionEvent } from 'xstate';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { createCommandLoop } from '../../src/runtime/loops/commands.js';
import { openRuntime } from '../../src/runtime/runtime.js';
import { tempDir } from '../helpers/tmp.js';

const manual = { manual: true, tz: 'UTC' };

async function withRuntime(inspect: ((e: InspectionEvent) => void) | { next: (e: InspectionEvent) => void }) {
  const runtime = await openRuntime({ dataDir: join(tempDir(), 'data'), runnerId: 'test-host:1:runner', inspect });
  return runtime;
}

describe('inspect', () => {
  it("tells a function inspector of each stream actor, and each recorded event with the state it led to, in the log's order", async () => {
    const seen: InspectionEvent[] = [];
    const runtime = await withRuntime((e) => seen.push(e));
    try {
      await createCommandLoop(runtime, { name: 'ok', command: 'true', schedule: manual });
      const run = await runNow(runtime, 'ok');
      expect(run.status).toBe('succeeded');
      const stream = `run:${run.id}`;
      const mine = seen.filter((e) => e.actorRef.sessionId === stream);
      expect(mine[0]!.type).toBe('@xstate.actor');
      const log = await runtime.log.readStream(stream);
      // Each event: @xstate.event, then @xstate.snapshot whose value is the state the log recorded.
      const told = mine.filter((e) => e.type === '@xstate.event').map((e) => (e as { event: { type: string } }).event.type);
      expect(told).toEqual(log.map((e) => e.type));
      const states = mine.filter((e) => e.type === '@xstate.snapshot').map((e) => (e as unknown as { snapshot: { value: unknown } }).snapshot.value);
      expect(states).toEqual(log.map((e) => e.state));
      const pairs = mine.slice(1).map((e) => e.type);
      expect(pairs).toEqual(log.flatMap(() => ['@xstate.event', '@xstate.snapshot']));
      // The ref: its machine (for a definition) and its snapshot now; it takes no events.
      const ref = mine[0]!.actorRef as unknown as { id: string; logic: { id: string }; getSnapshot(): { value: unknown }; send(e: unknown): void };
      expect(ref.id).toBe(stream);
      expect(ref.logic.id).toBe('loops.run');
      expect(ref.getSnapshot().value).toBe('succeeded');
      expect(() => ref.send({ type: 'x' })).toThrow(/log/);
      // The loop's own stream is inspected too.
      expect(seen.some((e) => e.type === '@xstate.actor' && e.actorRef.sessionId.startsWith('loop:'))).toBe(true);
    } finally {
      runtime.close();
    }
  });

  it('takes an observer, and an inspector that throws changes nothing', async () => {
    const types: string[] = [];
    const runtime = await withRuntime({
      next: (e) => {
        types.push(e.type);
        throw new Error('inspector bug');
      },
    });
    try {
      await createCommandLoop(runtime, { name: 'ok', command: 'true', schedule: manual });
      const run = await runNow(runtime, 'ok');
      expect(run.status).toBe('succeeded');
      expect(types).toContain('@xstate.actor');
      expect(types).toContain('@xstate.snapshot');
    } finally {
      runtime.close();
    }
  });
});
