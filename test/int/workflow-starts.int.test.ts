/**
 * The steps one decision starts are started together: a workflow run does not wait for one step's
 * start to be answered before it asks for the next (issue 14: `concurrency: 8` had one start in
 * flight at a time, each waiting for the spawner helper's reply). Read from the requests the
 * runner's real spawner helper receives. And the window that opens: a cancel recorded while a step
 * is still starting stops that step as soon as it has started.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { Spawned, SpawnerRequest } from '../../src/runtime/execution/spawner.js';
import { useSpawnerHelper } from '../../src/runtime/runtime.js';
import { runWorkflow } from '../../src/runtime/workflows/runner.js';
import { createWorkflow } from '../../src/runtime/workflows/specs.js';
import { expectInvariants } from '../helpers/invariants.js';
import { killGroupIfAlive } from '../helpers/proc.js';
import { tempDir, useRuntime } from '../helpers/tmp.js';

type Runtime = Awaited<ReturnType<typeof useRuntime>>;

/** Every spawn request the runtime's helper gets goes through `around` first. */
function wrapSpawns(runtime: Runtime, around: (request: SpawnerRequest, start: () => Promise<Spawned>) => Promise<Spawned>): void {
  const spawner = useSpawnerHelper(runtime);
  const spawn = spawner.spawn.bind(spawner);
  spawner.spawn = (request) => around(request, () => spawn(request));
}

async function define(runtime: Runtime, lines: string[]): Promise<void> {
  const file = join(tempDir(), 'spec.yaml');
  writeFileSync(file, `${lines.join('\n')}\n`);
  await createWorkflow(runtime, file);
}

describe('starting the steps of a workflow run', () => {
  it('the steps one decision starts are all asked of the spawner helper before the first is answered', async () => {
    const runtime = await useRuntime();
    await define(runtime, ['name: wide', 'concurrency: 4', 'steps:', ...['a', 'b', 'c', 'd', 'e'].flatMap((id) => [`  - id: ${id}`, '    run: "true"'])]);
    let waiting = 0;
    const mostWaiting: number[] = [];
    wrapSpawns(runtime, async (_request, start) => {
      waiting += 1;
      mostWaiting.push(waiting);
      try {
        return await start();
      } finally {
        waiting -= 1;
      }
    });

    const { run } = await runWorkflow(runtime, 'wide');
    expect(run.status).toBe('succeeded');
    // Four started by the first decision, together; the fifth once one of them ended.
    expect(mostWaiting).toHaveLength(5);
    expect(mostWaiting.slice(0, 4)).toEqual([1, 2, 3, 4]);
    expectInvariants(runtime);
  });

  it('a cancel recorded while a step is starting stops it once it has started (the run ends cancelled, not after the step)', async () => {
    const runtime = await useRuntime();
    await define(runtime, ['name: slow-start', 'steps:', '  - id: long', '    run: sleep 60']);
    const abort = new AbortController();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let asked!: () => void;
    const askedFor = new Promise<void>((resolve) => (asked = resolve));
    // The helper starts the process at once; its answer reaches the runner only after the cancel.
    wrapSpawns(runtime, async (_request, start) => {
      const spawned = start();
      // Not left running should an assertion below fail.
      void spawned.then((s) => onTestFinished(() => killGroupIfAlive(s.pid)), () => undefined);
      asked();
      await released;
      return spawned;
    });

    const done = runWorkflow(runtime, 'slow-start', { signal: abort.signal });
    await askedFor;
    const cancelled = new Promise<void>((resolve) => {
      const sub = runtime.log.events$.subscribe((e) => {
        if (e.type === 'wfrun.cancel_requested') {
          sub.unsubscribe();
          resolve();
        }
      });
    });
    abort.abort('enough');
    await cancelled;
    release();

    const { run } = await done;
    expect(run.status).toBe('cancelled');
    const wfRunId = (runtime.db.prepare('SELECT id FROM workflow_runs').get() as { id: string }).id;
    const exited = (await runtime.log.readStream(`wfrun:${wfRunId}`)).find((e) => e.type === 'step.exited')!;
    expect(exited.data).toMatchObject({ stepId: 'long', cancelled: true, signal: 'SIGTERM' });
    expectInvariants(runtime);
  });
});
