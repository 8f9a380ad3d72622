/**
 * Durable children (src/runtime/durable.ts): a host XState machine invokes a loops workflow run or
 * loop run, real processes through a real runtime, and branches on `onDone`'s output. The host's
 * snapshot is persisted mid-run, the host actor stopped and restored from it: the child re-attaches
 * to the run its snapshot names instead of starting another — the steps' processes append a line
 * to a counter file each time they start, so a second start would show.
 */
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { filter, firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { assign, createActor, setup, toPromise, type Snapshot } from 'xstate';
import type { RunOutput } from '../../src/machines/run.js';
import type { WorkflowRunOutput } from '../../src/machines/workflow-run.js';
import { durableRun, durableWorkflowRun } from '../../src/runtime/durable.js';
import { createCommandLoop } from '../../src/runtime/loops/commands.js';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { createWorkflow } from '../../src/runtime/workflows/specs.js';
import { tempDir, useRuntime } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';

/** A host that invokes `child` and ends `shipped` on success, `rolledBack` otherwise, keeping the output. */
function hostOf<L extends ReturnType<typeof durableWorkflowRun> | ReturnType<typeof durableRun>>(child: L, input: unknown) {
  return setup({
    types: { context: {} as { output: WorkflowRunOutput | RunOutput | null; error: string | null } },
    actors: { child: child as ReturnType<typeof durableWorkflowRun> },
  }).createMachine({
    context: { output: null, error: null },
    initial: 'deploying',
    states: {
      deploying: {
        invoke: {
          src: 'child',
          input: input as never,
          onDone: [
            { guard: ({ event }) => event.output.status === 'succeeded', target: 'shipped', actions: assign({ output: ({ event }) => event.output }) },
            { target: 'rolledBack', actions: assign({ output: ({ event }) => event.output }) },
          ],
          onError: { target: 'broken', actions: assign({ error: ({ event }) => String((event.error as Error).message) }) },
        },
      },
      shipped: { type: 'final' },
      rolledBack: { type: 'final' },
      broken: { type: 'final' },
    },
  });
}

/** The stream the host's (one) durable child is keyed by, as its persisted snapshot holds it. */
function childStream(persisted: unknown): string {
  const children = (persisted as { children: Record<string, { snapshot: { streamId: string } }> }).children;
  return Object.values(children)[0]!.snapshot.streamId;
}

function lines(file: string): number {
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).length : 0;
}

/** A workflow whose first step counts its starts and waits for `go`; the second reports an output. */
async function gatedWorkflow(runtime: Runtime, dir: string, exit = 0): Promise<{ counter: string; go: string }> {
  const counter = join(dir, 'counter');
  const go = join(dir, 'go');
  const spec = join(dir, 'wf.yaml');
  writeFileSync(
    spec,
    [
      'name: gated',
      'steps:',
      '  - id: wait',
      `    run: "echo started >> ${counter}; while [ ! -e ${go} ]; do sleep 0.05; done"`,
      '  - id: report',
      '    needs: [wait]',
      `    run: "echo version=7 >> $LOOPS_OUTPUT; exit ${exit}"`,
      '',
    ].join('\n'),
  );
  await createWorkflow(runtime, spec);
  return { counter, go };
}

describe('durableWorkflowRun', () => {
  it('restored mid-run, re-attaches to the same run: one start, and onDone gets its output', async () => {
    const runtime = await useRuntime();
    const dir = tempDir();
    const { counter, go } = await gatedWorkflow(runtime, dir);
    const machine = hostOf(durableWorkflowRun(runtime), { workflow: 'gated' });

    const spawned = firstValueFrom(runtime.log.events$.pipe(filter((e) => e.type === 'step.spawned')));
    const host = createActor(machine).start();
    await spawned;
    const persisted = JSON.parse(JSON.stringify(host.getPersistedSnapshot())) as Snapshot<unknown>;
    host.stop();
    // The process writes its line after it is recorded spawned (a file: polling is the way to see it).
    await waitFor(() => lines(counter) === 1, 10_000, 'the first start');

    const restored = createActor(machine, { snapshot: persisted }).start();
    writeFileSync(go, '');
    await toPromise(restored);
    expect(restored.getSnapshot().value).toBe('shipped');
    const output = restored.getSnapshot().context.output as WorkflowRunOutput;
    expect(output.status).toBe('succeeded');
    expect(output.steps.report).toMatchObject({ status: 'succeeded', exitCode: 0, outputs: { version: '7' } });
    // The run its snapshot named: one workflow run, its first step started once.
    expect(lines(counter)).toBe(1);
    const runs = runtime.db.prepare('SELECT id FROM workflow_runs').all() as Array<{ id: string }>;
    expect(runs.map((r) => `wfrun:${r.id}`)).toEqual([childStream(persisted)]);
  });

  it('restored after the run ended (in another runtime on the same data): done at once with the recorded output', async () => {
    const runtime = await useRuntime();
    const dir = tempDir();
    const { counter, go } = await gatedWorkflow(runtime, dir, 5);
    const machine = hostOf(durableWorkflowRun(runtime), { workflow: 'gated', wfRunId: 'wfrun_fixed' });
    const spawned = firstValueFrom(runtime.log.events$.pipe(filter((e) => e.type === 'step.spawned')));
    const host = createActor(machine).start();
    await spawned;
    const persisted = host.getPersistedSnapshot();
    host.stop();
    // The run goes on without its host and ends (the step exits 5).
    const ended = firstValueFrom(runtime.log.events$.pipe(filter((e) => e.streamId === 'wfrun:wfrun_fixed' && (e.state === 'failed' || e.state === 'succeeded'))));
    writeFileSync(go, '');
    await ended;

    const other = await openRuntime({ dataDir: runtime.dataDir, runnerId: 'other-host:2:r' });
    try {
      const restored = createActor(hostOf(durableWorkflowRun(other), { workflow: 'gated' }), { snapshot: persisted }).start();
      await toPromise(restored);
      expect(restored.getSnapshot().value).toBe('rolledBack');
      const output = restored.getSnapshot().context.output as WorkflowRunOutput;
      expect(output).toMatchObject({ wfRunId: 'wfrun_fixed', status: 'failed', error: 'failed step: report' });
      expect(output.steps.report).toMatchObject({ status: 'failed', exitCode: 5 });
    } finally {
      other.close();
    }
    expect(lines(counter)).toBe(1);
  });

  it('restored in another runtime while the run goes on in the first: waits for its end, reading the log', async () => {
    const runtime = await useRuntime();
    const dir = tempDir();
    const { counter, go } = await gatedWorkflow(runtime, dir);
    const spawned = firstValueFrom(runtime.log.events$.pipe(filter((e) => e.type === 'step.spawned')));
    const host = createActor(hostOf(durableWorkflowRun(runtime), { workflow: 'gated' })).start();
    await spawned;
    const persisted = host.getPersistedSnapshot();
    host.stop();
    const other = await openRuntime({ dataDir: runtime.dataDir, runnerId: 'other-host:2:r' });
    try {
      const restored = createActor(hostOf(durableWorkflowRun(other, { pollMs: 50 }), { workflow: 'gated' }), { snapshot: persisted }).start();
      writeFileSync(go, '');
      await toPromise(restored);
      expect(restored.getSnapshot().value).toBe('shipped');
      expect((restored.getSnapshot().context.output as WorkflowRunOutput).wfRunId).toBe(childStream(persisted).slice('wfrun:'.length));
    } finally {
      other.close();
    }
    expect(lines(counter)).toBe(1);
  });

  it('a workflow that does not exist is the child error (onError), with loops\' message', async () => {
    const runtime = await useRuntime();
    const host = createActor(hostOf(durableWorkflowRun(runtime), { workflow: 'nope' })).start();
    await toPromise(host);
    expect(host.getSnapshot().value).toBe('broken');
    expect(host.getSnapshot().context.error).toMatch(/nope/);
  });
});

describe('durableRun', () => {
  it("runs a loop's command, restored mid-run re-attaches, and onDone gets the exit", async () => {
    const runtime = await useRuntime();
    const dir = tempDir();
    const counter = join(dir, 'counter');
    const go = join(dir, 'go');
    await createCommandLoop(runtime, {
      name: 'count',
      command: `echo started >> ${counter}; while [ ! -e ${go} ]; do sleep 0.05; done; exit 3`,
      schedule: { manual: true, tz: 'UTC' },
    });
    const machine = hostOf(durableRun(runtime), { loop: 'count' });
    const spawned = firstValueFrom(runtime.log.events$.pipe(filter((e) => e.type === 'process.spawned')));
    const host = createActor(machine).start();
    await spawned;
    const persisted = host.getPersistedSnapshot();
    host.stop();
    const restored = createActor(machine, { snapshot: persisted }).start();
    appendFileSync(go, '');
    await toPromise(restored);
    expect(restored.getSnapshot().value).toBe('rolledBack');
    expect(restored.getSnapshot().context.output).toMatchObject({ status: 'failed', exitCode: 3, signal: null, error: 'exited with code 3' });
    expect(lines(counter)).toBe(1);
  });
});
