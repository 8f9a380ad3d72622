/**
 * The machines' `input` and `output`: a host app creates the run and workflow-run machines with
 * input (no hand-made run.claimed / wfrun.started), invokes them as children and branches on
 * `onDone`'s `event.output`. Without input they start exactly as the runtime creates them (the
 * golden-log and replay tests check recorded history; here: the initial snapshot is unchanged).
 * Process effects are the host's own actions here (pure: nothing is spawned).
 */
import { describe, expect, it } from 'vitest';
import { assign, createActor, setup, toPromise, type AnyActorRef } from 'xstate';
import type { CommandTarget } from '../../src/events/catalog.js';
import { initialSnapshot } from '../../src/machines/fold.js';
import { runMachine, runOutputOf, type RunOutput } from '../../src/machines/run.js';
import { foldAs, machineEvent } from '../../src/machines/typed.js';
import { workflowRunMachine, workflowRunOutputOf, type WorkflowRunOutput } from '../../src/machines/workflow-run.js';
import { normalizeWorkflowSpec } from '../../src/workflow/spec.js';

const AT = '2026-01-01T00:00:00.000Z';
const target: CommandTarget = { kind: 'command', command: 'true', args: [], shell: false, cwd: null, env: {} };

/** The run machine with a simulated process that exits with `code`. */
function simulatedRun(code: number) {
  return runMachine.provide({
    actions: {
      requestSpawn: ({ self }) =>
        (self as AnyActorRef).send(machineEvent('process.spawn_requested', AT, { command: 'true', args: [], shell: false, cwd: null, envKeys: [], timeoutAt: null })),
      spawn: ({ self }) => {
        const me = self as AnyActorRef;
        me.send(machineEvent('process.spawned', AT, { pid: 42, pgid: 42, startTime: '1', bootId: null }));
        me.send(
          machineEvent('process.exited', AT, {
            exitCode: code, signal: null, timedOut: false, cancelled: false, stdout: 'hi\n', stderr: '', stdoutBytes: 3, stderrBytes: 0, durationMs: 5,
            error: code === 0 ? null : `exited with code ${code}`,
          }),
        );
      },
    },
  });
}

describe('run machine input and output', () => {
  it('starts claimed from input with the defaults run.claimed would carry, and asks to spawn', () => {
    const actions: string[] = [];
    const actor = createActor(runMachine.provide({ actions: { requestSpawn: () => void actions.push('requestSpawn') } }), {
      input: { target, runId: 'run_x', policies: { timeoutMs: 1000 } },
    });
    actor.start();
    const snapshot = actor.getSnapshot();
    expect(snapshot.value).toBe('claimed');
    expect(snapshot.context).toMatchObject({ runId: 'run_x', loopName: 'embedded', slot: 'manual:run_x', attempt: 1, trigger: 'manual', target });
    expect(snapshot.context.policies).toMatchObject({ timeoutMs: 1000, killGraceMs: 5000, attempts: 1, overlap: 'skip' });
    expect(actions).toEqual(['requestSpawn']);
  });

  it('without input starts new, as the runtime creates it (nothing asked for)', () => {
    const snapshot = initialSnapshot(runMachine);
    expect(snapshot.value).toBe('new');
    expect(snapshot.context.runId).toBeNull();
    const actions: string[] = [];
    createActor(runMachine.provide({ actions: { requestSpawn: () => void actions.push('requestSpawn') } })).start();
    expect(actions).toEqual([]);
  });

  it('a parent invokes a run and branches on its output', async () => {
    const parent = (code: number) =>
      setup({
        types: { context: {} as { output: RunOutput | null } },
        actors: { child: simulatedRun(code) },
      }).createMachine({
        context: { output: null },
        initial: 'working',
        states: {
          working: {
            invoke: {
              src: 'child',
              input: { target },
              onDone: [
                { guard: ({ event }) => event.output.status === 'succeeded', target: 'good', actions: assign({ output: ({ event }) => event.output }) },
                { target: 'bad', actions: assign({ output: ({ event }) => event.output }) },
              ],
            },
          },
          good: { type: 'final' },
          bad: { type: 'final' },
        },
      });
    const ok = createActor(parent(0)).start();
    await toPromise(ok);
    expect(ok.getSnapshot().value).toBe('good');
    expect(ok.getSnapshot().context.output).toMatchObject({ status: 'succeeded', exitCode: 0, signal: null, error: null, agent: null });
    const bad = createActor(parent(3)).start();
    await toPromise(bad);
    expect(bad.getSnapshot().value).toBe('bad');
    expect(bad.getSnapshot().context.output).toMatchObject({ status: 'failed', exitCode: 3, error: 'exited with code 3' });
  });

  it('a stream folded from the log has the same output, typed (foldAs)', () => {
    const claimed = machineEvent('run.claimed', AT, {
      runId: 'run_1', loopId: 'l', loopName: 'l', slot: 'manual:run_1', scheduledFor: AT, attempt: 1, trigger: 'manual', target,
      policies: { timeoutMs: null, killGraceMs: 5000, overlap: 'skip', catchUp: 'latest', catchUpWindowMs: null, catchUpLimit: null, attempts: 1, retryDelayMs: 0, backoff: 2, maxRetryDelayMs: null, leaseMs: 30000 },
      runnerId: 'r', leaseToken: 1,
    });
    const snapshot = foldAs(runMachine, [
      claimed,
      machineEvent('process.spawn_requested', AT, { command: 'true', args: [], shell: false, cwd: null, envKeys: [], timeoutAt: null }),
      machineEvent('process.spawned', AT, { pid: 1, pgid: 1, startTime: '1', bootId: null }),
      machineEvent('process.exited', AT, { exitCode: null, signal: 'SIGKILL', timedOut: true, cancelled: false, stdout: '', stderr: '', stdoutBytes: 0, stderrBytes: 0, durationMs: 5, error: 'timed out' }),
    ]);
    expect(snapshot.status).toBe('done');
    const output: RunOutput = snapshot.output!;
    expect(output).toMatchObject({ runId: 'run_1', status: 'timed_out', signal: 'SIGKILL', error: 'timed out' });
    // From a restored { value, context } (a persisted snapshot keeps no output): the same.
    expect(runOutputOf({ value: snapshot.value, context: snapshot.context })).toEqual(output);
    expect(runOutputOf({ value: 'running', context: snapshot.context })).toBeNull();
  });
});

describe('workflow-run machine input and output', () => {
  const spec = normalizeWorkflowSpec({
    name: 'pair',
    steps: [{ id: 'a', run: 'echo a' }, { id: 'b', run: 'echo b', needs: ['a'] }, { id: 'c', run: 'echo c', needs: ['b'] }],
  }).spec;

  /** The machine with simulated steps: `code` per step (default 0), each writing outputs { step: id }. */
  function simulatedWorkflow(codes: Record<string, number> = {}) {
    return workflowRunMachine.provide({
      actions: {
        recordDecisions: ({ self }, params) => {
          const me = self as AnyActorRef;
          for (const s of params.skips) me.send(machineEvent('step.skipped', AT, s));
          for (const s of params.starts) {
            me.send(machineEvent('step.spawn_requested', AT, { ...s, command: 'echo', args: [], shell: true, cwd: null, envKeys: [], timeoutAt: null }));
          }
        },
        spawnStep: ({ self }, params) => {
          const me = self as AnyActorRef;
          const code = codes[params.stepId] ?? 0;
          me.send(machineEvent('step.spawned', AT, { stepId: params.stepId, attempt: params.attempt, pid: 7, pgid: 7, startTime: '1', bootId: null }));
          me.send(
            machineEvent('step.exited', AT, {
              stepId: params.stepId, attempt: params.attempt, exitCode: code, signal: null, timedOut: false, cancelled: false,
              stdout: '', stderr: '', stdoutBytes: 0, stderrBytes: 0, durationMs: 1, error: code ? `exited with code ${code}` : null, outputs: { step: params.stepId },
            }),
          );
        },
      },
    });
  }

  it('starts running from input, its first step asked for', () => {
    const asked: unknown[] = [];
    const actor = createActor(workflowRunMachine.provide({ actions: { recordDecisions: (_, params) => void asked.push(params) } }), {
      input: { spec, wfRunId: 'wfrun_x', startedAt: AT },
    });
    actor.start();
    expect(actor.getSnapshot().value).toBe('running');
    expect(actor.getSnapshot().context).toMatchObject({ decisions: 'recorded', wfRunId: 'wfrun_x', workflowName: 'pair', startedAt: AT });
    expect(asked).toEqual([{ retries: [], skips: [], starts: [{ stepId: 'a', attempt: 1 }] }]);
    expect(initialSnapshot(workflowRunMachine).value).toBe('new');
  });

  it('a parent invokes a workflow run and branches on its output (status, each step, error)', async () => {
    const parent = (codes: Record<string, number>) =>
      setup({
        types: { context: {} as { output: WorkflowRunOutput | null } },
        actors: { wf: simulatedWorkflow(codes) },
      }).createMachine({
        context: { output: null },
        initial: 'working',
        states: {
          working: {
            invoke: {
              src: 'wf',
              input: { spec, startedAt: AT },
              onDone: [
                { guard: ({ event }) => event.output.status === 'succeeded', target: 'shipped', actions: assign({ output: ({ event }) => event.output }) },
                { target: 'rolledBack', actions: assign({ output: ({ event }) => event.output }) },
              ],
            },
          },
          shipped: { type: 'final' },
          rolledBack: { type: 'final' },
        },
      });
    const ok = createActor(parent({})).start();
    await toPromise(ok);
    expect(ok.getSnapshot().value).toBe('shipped');
    const out = ok.getSnapshot().context.output!;
    expect(out.status).toBe('succeeded');
    expect(out.error).toBeNull();
    expect(out.steps.b).toEqual({ status: 'succeeded', attempts: 1, exitCode: 0, signal: null, error: null, outputs: { step: 'b' } });

    const bad = createActor(parent({ b: 2 })).start();
    await toPromise(bad);
    expect(bad.getSnapshot().value).toBe('rolledBack');
    const failed = bad.getSnapshot().context.output!;
    expect(failed.status).toBe('failed');
    expect(failed.error).toBe('failed step: b');
    expect(failed.steps.b!.status).toBe('failed');
    expect(failed.steps.c!.status).toBe('skipped');
    expect(workflowRunOutputOf({ value: 'running', context: failed as never })).toBeNull();
  });
});
