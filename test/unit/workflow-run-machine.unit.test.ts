/**
 * The workflow-run machine, pure: a diamond a → {b, c} → d plus an independent e. Which steps start
 * together, what a failure skips, continue-on-error, failure() / always() conditions, retries,
 * cancel, and the run's final status — folded from events exactly as the log replays them, for a
 * run that records its decisions (step.skipped, step.retry_scheduled, recorded after the event that
 * caused them as the runner does: test/helpers/workflow-run.ts) and for one started before they were
 * recorded (derived: wfrun.started v1), which must behave exactly as version 1 of the machine did.
 */
import { describe, expect, it } from 'vitest';
import { upcast } from '../../src/events/catalog.js';
import { normalizeWorkflowSpec, type WorkflowSpec } from '../../src/workflow/spec.js';
import { fold } from '../../src/machines/fold.js';
import { getMachine } from '../../src/machines/registry.js';
import { WORKFLOW_RUN_MACHINE_ID, WORKFLOW_RUN_MACHINE_VERSION, workflowRunMachine, type WorkflowRunContext, stepsById } from '../../src/machines/workflow-run.js';
import { recordDecisions } from '../helpers/workflow-run.js';

const T = Date.parse('2026-01-01T00:00:00.000Z');
const at = (s: number) => new Date(T + s * 1000).toISOString();

function spec(overrides: Record<string, Record<string, unknown>> = {}, top: Record<string, unknown> = {}): WorkflowSpec {
  const step = (id: string, needs: string[]) => ({ id, run: `echo ${id}`, ...(needs.length ? { needs } : {}), ...overrides[id] });
  return normalizeWorkflowSpec({
    name: 'diamond',
    ...top,
    steps: [step('a', []), step('b', ['a']), step('c', ['a']), step('d', ['b', 'c']), step('e', []), ...(overrides.f ? [step('f', ['d'])] : [])],
  }).spec;
}

type Mode = 'recorded' | 'derived';
type Ev = { type: string; at: string; data: unknown };
/** The start of a run; a derived one as a v1 event is read (upcast). */
const started = (s: WorkflowSpec, mode: Mode = 'recorded'): Ev => {
  const v1 = {
    wfRunId: 'wfrun_1', workflowId: 'wf_1', workflowName: s.name, version: 1, spec: s, inputs: {}, trigger: 'manual',
    loopId: null, slot: null, attempt: 1, idempotencyKey: 'manual:wfrun_1', runnerId: 'r', leaseToken: 1,
  };
  return { type: 'wfrun.started', at: at(0), data: mode === 'derived' ? upcast('wfrun.started', 1, v1) : { ...v1, decisions: 'recorded' } };
};
const exited = (stepId: string, code: number | null, t: number, n = 1, extra: Record<string, unknown> = {}): Ev => ({
  type: 'step.exited', at: at(t),
  data: { stepId, attempt: n, exitCode: code, signal: null, timedOut: false, cancelled: false, stdout: '', stderr: '', stdoutBytes: 0, stderrBytes: 0, durationMs: 1000, error: code ? `exited with code ${code}` : null, outputs: {}, ...extra },
});
/** A step's whole attempt: intent, spawn, exit with `code` (and outputs). */
function attempt(stepId: string, code: number, t: number, n = 1, outputs: Record<string, string> = {}): Ev[] {
  return [
    { type: 'step.spawn_requested', at: at(t), data: { stepId, attempt: n, command: 'x', args: [], shell: true, cwd: null, envKeys: [], timeoutAt: null } },
    { type: 'step.spawned', at: at(t), data: { stepId, attempt: n, pid: 100, pgid: 100, startTime: '1', bootId: null } },
    exited(stepId, code, t + 1, n, { outputs }),
  ];
}
const cancelled = (reason: string, t: number): Ev => ({ type: 'wfrun.cancel_requested', at: at(t), data: { reason } });
const skipped = (stepId: string, reason: string, t: number): Ev => ({ type: 'step.skipped', at: at(t), data: { stepId, reason } });
const retryScheduled = (stepId: string, n: number, dueAt: string, t: number, reason = `attempt ${n - 1} failed: exited with code 1`): Ev => ({
  type: 'step.retry_scheduled', at: at(t), data: { stepId, attempt: n, dueAt, reason },
});
const retryDue = (stepId: string, n: number, t: number): Ev => ({ type: 'step.retry_due', at: at(t), data: { stepId, attempt: n } });

/** The steps the run asked to start, per event: startSteps (derived) or the starts of recordDecisions (recorded). */
function startsOf(actions: ReadonlyArray<{ type: string; params?: unknown }>): string[] {
  return actions.flatMap((a) =>
    a.type === 'startSteps'
      ? (a.params as { steps: Array<{ stepId: string }> }).steps.map((x) => x.stepId)
      : a.type === 'recordDecisions'
        ? (a.params as { starts: Array<{ stepId: string }> }).starts.map((x) => x.stepId)
        : [],
  );
}

/** Folds `events` — with the decisions a recorded run records after each (none for a derived run). */
function run(events: Ev[]) {
  const { events: all } = recordDecisions(events);
  const { snapshot, steps } = fold(workflowRunMachine, all);
  for (const s of steps) expect(s.accepted, `${s.event.type} ${JSON.stringify(s.event.data).slice(0, 60)}`).toBe(true);
  const c = snapshot.context as WorkflowRunContext;
  const statuses = Object.fromEntries(Object.entries(stepsById(c)).map(([id, s]) => [id, s.status]));
  const starts = steps.map((s) => startsOf(s.actions));
  return { state: snapshot.value, c, statuses, starts, events: all, steps };
}

const named = (actions: ReadonlyArray<{ type: string }>) => actions.map((a) => a.type).filter((t) => !t.startsWith('xstate.'));

describe.each<Mode>(['recorded', 'derived'])('workflow-run machine (%s decisions): the diamond', (mode) => {
  it('a and e start first; b and c start together when a succeeds; d after both; the run succeeds', () => {
    const s = spec();
    const r = run([started(s, mode), ...attempt('a', 0, 1), ...attempt('e', 0, 1), ...attempt('b', 0, 3), ...attempt('c', 0, 3), ...attempt('d', 0, 5)]);
    expect(r.starts[0]).toEqual(['a', 'e']);
    expect(r.starts.flat()).toEqual(['a', 'e', 'b', 'c', 'd']);
    expect(r.state).toBe('succeeded');
    expect(r.c.finishedAt).toBe(at(6));
  });

  it('c fails: d is skipped (it needs c), e still succeeds, the run is failed', () => {
    const s = spec();
    const r = run([started(s, mode), ...attempt('a', 0, 1), ...attempt('e', 0, 1), ...attempt('b', 0, 3), ...attempt('c', 2, 3)]);
    expect(r.statuses).toEqual({ a: 'succeeded', b: 'succeeded', c: 'failed', d: 'skipped', e: 'succeeded' });
    expect(stepsById(r.c).d!.reason).toBe('needs c which failed');
    expect(r.state).toBe('failed');
  });

  it('with continue-on-error on c, d runs after c fails and the run succeeds', () => {
    const s = spec({ c: { 'continue-on-error': true } });
    const r = run([started(s, mode), ...attempt('a', 0, 1), ...attempt('e', 0, 1), ...attempt('b', 0, 3), ...attempt('c', 2, 3), ...attempt('d', 0, 5)]);
    expect(r.statuses.c).toBe('failed');
    expect(r.statuses.d).toBe('succeeded');
    expect(r.state).toBe('succeeded');
  });

  it('an if: failure() step runs only when something before it failed', () => {
    const s = spec({ f: { if: 'failure()' } });
    const ok = run([started(s, mode), ...attempt('a', 0, 1), ...attempt('e', 0, 1), ...attempt('b', 0, 3), ...attempt('c', 0, 3), ...attempt('d', 0, 5)]);
    expect(ok.statuses.f).toBe('skipped');
    expect(ok.state).toBe('succeeded');
    const bad = run([started(s, mode), ...attempt('a', 0, 1), ...attempt('e', 0, 1), ...attempt('b', 1, 3), ...attempt('c', 0, 3), ...attempt('f', 0, 5)]);
    expect(bad.statuses).toMatchObject({ d: 'skipped', f: 'succeeded' });
    expect(bad.state).toBe('failed');
  });

  it('cancel: running steps are asked to stop, pending ones are skipped, an always() step still runs; the run is cancelled', () => {
    const s = spec({ f: { if: 'always()' } });
    const events: Ev[] = [started(s, mode), ...attempt('a', 0, 1), ...attempt('e', 0, 1), ...attempt('b', 0, 3).slice(0, 2), ...attempt('c', 0, 3).slice(0, 2)];
    const cancel = cancelled('enough', 4);
    const { steps } = fold(workflowRunMachine, recordDecisions([...events, cancel]).events);
    const kill = steps.find((x) => x.event.type === 'wfrun.cancel_requested')!.actions.find((a) => a.type === 'killSteps')!;
    expect(kill.params).toEqual({ stepIds: ['b', 'c'], reason: 'enough' });
    const killed = (id: string): Ev => ({
      type: 'step.exited', at: at(5),
      data: { stepId: id, attempt: 1, exitCode: null, signal: 'SIGTERM', timedOut: false, cancelled: true, stdout: '', stderr: '', stdoutBytes: 0, stderrBytes: 0, durationMs: 2000, error: 'cancelled: enough', outputs: {} },
    });
    const r = run([...events, cancel, killed('b'), killed('c'), ...attempt('f', 0, 6)]);
    expect(r.statuses).toEqual({ a: 'succeeded', b: 'cancelled', c: 'cancelled', d: 'skipped', e: 'succeeded', f: 'succeeded' });
    expect(stepsById(r.c).d!.reason).toBe('the workflow was cancelled');
    expect(r.state).toBe('cancelled');
  });

  it('retries: a failed attempt waits for its delay (armRetry), the retry is attempt 2, and its success counts', () => {
    const s = spec({ a: { retries: { limit: 1, delay: '5s' } } });
    const first = [started(s, mode), ...attempt('a', 1, 1)];
    const { steps } = fold(workflowRunMachine, recordDecisions(first).events);
    // The timer is armed once the retry is recorded (recorded) or at once (derived).
    expect(steps.at(-1)!.actions.find((x) => x.type === 'armRetry')!.params).toEqual({ retries: [{ stepId: 'a', attempt: 2, dueAt: at(7) }] });
    expect(steps.at(-1)!.event.type).toBe(mode === 'recorded' ? 'step.retry_scheduled' : 'step.exited');
    const r = run([...first, retryDue('a', 2, 7), ...attempt('a', 0, 7, 2), ...attempt('e', 0, 1)]);
    expect(stepsById(r.c).a).toMatchObject({ status: 'succeeded', attempt: 2 });
    // retry_due itself asks for the step to start again (attempt 2).
    expect(r.starts.flat().filter((x) => x === 'a')).toEqual(['a', 'a']);
    expect(r.starts.flat().filter((x) => x === 'b' || x === 'c')).toEqual(['b', 'c']);
  });

  it('concurrency 1: one step at a time, in file order among the ready ones', () => {
    const s = spec({}, { concurrency: 1 });
    const r = run([started(s, mode), ...attempt('a', 0, 1), ...attempt('b', 0, 2), ...attempt('c', 0, 3), ...attempt('d', 0, 4), ...attempt('e', 0, 5)]);
    expect(r.starts.filter((x) => x.length)).toEqual([['a'], ['b'], ['c'], ['d'], ['e']]);
    expect(r.state).toBe('succeeded');
  });

  it('events for a step that is not in that state are refused (a stale attempt, an unknown step)', () => {
    const s = spec();
    const { steps } = fold(workflowRunMachine, recordDecisions([started(s, mode), ...attempt('a', 0, 1)]).events.concat(attempt('a', 0, 2)));
    expect(steps.slice(-3).map((x) => x.accepted)).toEqual([false, false, false]);
  });
});

describe('workflow-run machine: decisions are recorded facts', () => {
  it('a failed need: the step is skipping (not ended) until its step.skipped, which ends it with the reason — and can end the run', () => {
    const s = spec();
    const events = [started(s), ...attempt('a', 0, 1), ...attempt('e', 0, 1), ...attempt('b', 0, 3), ...attempt('c', 2, 3)];
    const { snapshot, steps } = fold(workflowRunMachine, events);
    // c's exit asks for d's skip, recorded inline; nothing is skipped yet, the run goes on.
    const exit = steps.at(-1)!;
    expect(named(exit.actions)).toEqual(['recordDecisions']);
    expect(exit.actions[0]!.params).toEqual({ retries: [], skips: [{ stepId: 'd', reason: 'needs c which failed' }], starts: [] });
    const c = snapshot.context as WorkflowRunContext;
    expect(stepsById(c).d).toMatchObject({ status: 'skipping', reason: 'needs c which failed', endedAt: null });
    expect(snapshot.value).toBe('running');

    const after = fold(workflowRunMachine, [...events, skipped('d', 'needs c which failed', 4)]);
    expect(after.steps.at(-1)!.accepted).toBe(true);
    expect(stepsById((after.snapshot.context as WorkflowRunContext)).d).toMatchObject({ status: 'skipped', reason: 'needs c which failed', endedAt: at(4) });
    // The skip is what ends the run: its event carries the final state.
    expect(after.snapshot.value).toBe('failed');
    expect(named(after.steps.at(-1)!.actions)).toContain('finalize');
  });

  it('the recorded reason is the one applied; a skip for a step not being skipped is refused', () => {
    const s = spec();
    const events = [started(s), ...attempt('a', 0, 1), ...attempt('e', 0, 1), ...attempt('b', 0, 3), ...attempt('c', 2, 3)];
    const { snapshot, steps } = fold(workflowRunMachine, [...events, skipped('e', 'nope', 4), skipped('d', 'as the log says', 4), skipped('d', 'twice', 4)]);
    expect(steps.slice(-3).map((x) => x.accepted)).toEqual([false, true, false]);
    expect(stepsById((snapshot.context as WorkflowRunContext)).d!.reason).toBe('as the log says');
  });

  it('a skip makes its dependants ready after its step.skipped: their decisions follow it in order (a cascade, then an always() step)', () => {
    const s = spec({ f: { if: 'always()' } });
    // a fails: b and c are skipped; d (needs b, c) then; f (always(), needs d) runs.
    const r = run([started(s), ...attempt('a', 1, 1)]);
    expect(r.events.slice(4).map((e) => [e.type, (e.data as { stepId: string }).stepId, (e.data as { reason?: string }).reason])).toEqual([
      ['step.skipped', 'b', 'needs a which failed'],
      ['step.skipped', 'c', 'needs a which failed'],
      ['step.skipped', 'd', 'needs b which was skipped'],
    ]);
    // The decisions share the instant of the exit that caused them.
    expect(new Set(r.events.slice(3).map((e) => e.at))).toEqual(new Set([at(2)]));
    expect(r.statuses).toMatchObject({ a: 'failed', b: 'skipped', c: 'skipped', d: 'skipped', f: 'starting' });
    // f is started by the decisions of d's skip.
    expect(r.starts.at(-1)).toEqual(['f']);
  });

  it('a retry: decided at the exit (retrying, no retryAt, no timer), scheduled by step.retry_scheduled (retryAt, armRetry), due by step.retry_due', () => {
    const s = spec({ a: { retries: { limit: 2, delay: '5s' } } });
    const first = [started(s), ...attempt('a', 1, 1)];
    const { snapshot, steps } = fold(workflowRunMachine, first);
    expect(named(steps.at(-1)!.actions)).toEqual(['recordDecisions']);
    expect(steps.at(-1)!.actions[0]!.params).toEqual({
      retries: [{ stepId: 'a', attempt: 2, dueAt: at(7), reason: 'attempt 1 failed: exited with code 1' }],
      skips: [],
      starts: [],
    });
    expect(stepsById((snapshot.context as WorkflowRunContext)).a).toMatchObject({
      status: 'retrying',
      retryAt: null,
      pendingRetry: { attempt: 2, dueAt: at(7), reason: 'attempt 1 failed: exited with code 1' },
    });
    // Not due before it is scheduled; scheduled for the next attempt only.
    const early = fold(workflowRunMachine, [...first, retryDue('a', 2, 7)]);
    expect(early.steps.at(-1)!.accepted).toBe(false);
    const wrong = fold(workflowRunMachine, [...first, retryScheduled('a', 3, at(7), 2)]);
    expect(wrong.steps.at(-1)!.accepted).toBe(false);

    const scheduled = fold(workflowRunMachine, [...first, retryScheduled('a', 2, at(9), 2)]);
    const last = scheduled.steps.at(-1)!;
    expect(last.accepted).toBe(true);
    // The recorded dueAt is the one that counts, and arms the timer.
    expect(last.actions.map((a) => [a.type, a.params])).toEqual([['armRetry', { retries: [{ stepId: 'a', attempt: 2, dueAt: at(9) }] }]]);
    expect(stepsById((scheduled.snapshot.context as WorkflowRunContext)).a).toMatchObject({ status: 'retrying', retryAt: at(9), pendingRetry: null });
    expect(fold(workflowRunMachine, [...first, retryScheduled('a', 2, at(9), 2), retryScheduled('a', 2, at(9), 2)]).steps.at(-1)!.accepted).toBe(false);

    const due = fold(workflowRunMachine, [...first, retryScheduled('a', 2, at(9), 2), retryDue('a', 2, 9)]);
    expect(due.steps.at(-1)!.actions.map((a) => [a.type, a.params])).toEqual([['recordDecisions', { retries: [], skips: [], starts: [{ stepId: 'a', attempt: 2 }] }]]);
    expect(stepsById((due.snapshot.context as WorkflowRunContext)).a).toMatchObject({ status: 'starting', attempt: 2, retryAt: null });
  });

  it('retry reasons name the attempt and how it ended: a timeout, a spawn failure, an abandoned process', () => {
    const s = spec({ a: { retries: { limit: 3, delay: '1s' } } });
    const r = run([
      started(s),
      ...attempt('a', 0, 1).slice(0, 2),
      exited('a', null, 2, 1, { timedOut: true, signal: 'SIGTERM', error: 'timed out after 1s' }),
      retryDue('a', 2, 3),
      { type: 'step.spawn_requested', at: at(3), data: { stepId: 'a', attempt: 2, command: 'x', args: [], shell: true, cwd: null, envKeys: [], timeoutAt: null } },
      { type: 'step.spawn_failed', at: at(3), data: { stepId: 'a', attempt: 2, error: 'command not found: x', code: 'ENOENT' } },
      retryDue('a', 3, 5),
      ...attempt('a', 0, 5, 3).slice(0, 2),
      { type: 'step.abandoned', at: at(6), data: { stepId: 'a', attempt: 3, reason: 'its runner stopped' } },
    ]);
    expect(r.events.filter((e) => e.type === 'step.retry_scheduled').map((e) => e.data)).toEqual([
      { stepId: 'a', attempt: 2, dueAt: at(3), reason: 'attempt 1 timed out: timed out after 1s' },
      { stepId: 'a', attempt: 3, dueAt: at(5), reason: 'attempt 2 failed: command not found: x' },
      { stepId: 'a', attempt: 4, dueAt: at(10), reason: 'attempt 3 was abandoned: its runner stopped' },
    ]);
  });

  it('a cancel appended without the runner (another process): the pending steps are skipping until the runner records them; the run ends then', () => {
    const s = spec({ f: { if: 'failure()' } });
    const events = recordDecisions([started(s), ...attempt('a', 0, 1), ...attempt('e', 0, 1), ...attempt('b', 0, 3)]).events;
    // c runs; the cancel comes from `loops workflows cancel` (its decisions are not recorded with it).
    const head = [...events, ...attempt('c', 0, 3).slice(0, 2), cancelled('enough', 4), exited('c', null, 5, 1, { cancelled: true, signal: 'SIGTERM' })];
    const { snapshot } = fold(workflowRunMachine, head);
    expect(stepsById((snapshot.context as WorkflowRunContext)).d).toMatchObject({ status: 'skipping', reason: 'the workflow was cancelled' });
    expect(snapshot.value).toBe('running');
    // The runner records d's skip (it caught up with the cancel); f, ready then, is decided after it.
    const tail = fold(workflowRunMachine, [...head, skipped('d', 'the workflow was cancelled', 6)]);
    expect(tail.steps.at(-1)!.actions.map((a) => [a.type, a.params])).toEqual([
      ['recordDecisions', { retries: [], skips: [{ stepId: 'f', reason: 'if: failure() was false' }], starts: [] }],
    ]);
    expect(tail.snapshot.value).toBe('running');
    const end = fold(workflowRunMachine, [...head, skipped('d', 'the workflow was cancelled', 6), skipped('f', 'if: failure() was false', 6)]);
    expect(end.snapshot.value).toBe('cancelled');
  });

  it('a derived run (started before decisions were recorded) refuses the new events and decides as version 1 did', () => {
    const s = spec({ a: { retries: { limit: 1, delay: '5s' } } });
    const { snapshot, steps } = fold(workflowRunMachine, [started(s, 'derived'), ...attempt('a', 1, 1)]);
    expect(named(steps.at(-1)!.actions)).toEqual(['armRetry', 'startSteps']);
    expect(stepsById((snapshot.context as WorkflowRunContext)).a).toMatchObject({ status: 'retrying', retryAt: at(7), pendingRetry: null });
    expect(fold(workflowRunMachine, [started(s, 'derived'), ...attempt('a', 1, 1), retryScheduled('a', 2, at(7), 2)]).steps.at(-1)!.accepted).toBe(false);
    const failed = fold(workflowRunMachine, [started(spec(), 'derived'), ...attempt('a', 2, 1)]);
    // Skipped at once, nothing asked to record: b, c, d skipped, only e left.
    expect(Object.fromEntries(Object.entries(stepsById((failed.snapshot.context as WorkflowRunContext))).map(([id, x]) => [id, x.status]))).toEqual({
      a: 'failed', b: 'skipped', c: 'skipped', d: 'skipped', e: 'starting',
    });
    expect(fold(workflowRunMachine, [started(spec(), 'derived'), ...attempt('a', 2, 1), skipped('b', 'x', 3)]).steps.at(-1)!.accepted).toBe(false);
  });

  it('version 2; streams of version 1 fold on the same definition (their start says how)', () => {
    expect(WORKFLOW_RUN_MACHINE_VERSION).toBe(2);
    expect(getMachine({ id: WORKFLOW_RUN_MACHINE_ID, version: 1 })).toBe(workflowRunMachine);
    expect(getMachine({ id: WORKFLOW_RUN_MACHINE_ID, version: 2 })).toBe(workflowRunMachine);
    expect((started(spec(), 'derived').data as { decisions: string }).decisions).toBe('derived');
  });
});

/**
 * execution: sequential — the predecessor's semantics, as its CLI was seen to run the same file
 * (seed.sh workflows run, 0.3.1): the steps in depth-first order over dependsOn (c, x, b, d, e),
 * one at a time; b fails under continueOnFailure and the run goes on; d fails and e is skipped.
 */
describe.each<Mode>(['recorded', 'derived'])('workflow-run machine (%s decisions): execution sequential', (mode) => {
  const predecessor = (extra: Record<string, unknown> = {}) =>
    normalizeWorkflowSpec({
      name: 'order',
      steps: [
        { id: 'x', dependsOn: ['c'], target: { type: 'command', command: 'true' } },
        { id: 'b', continueOnFailure: true, target: { type: 'command', command: 'false' } },
        { id: 'c', target: { type: 'command', command: 'true' } },
        { id: 'd', target: { type: 'command', command: 'false' } },
        { id: 'e', target: { type: 'command', command: 'true' }, ...extra },
      ],
    }).spec;

  it('a predecessor-shape spec is sequential: one step at a time in depth-first order; the first failure skips the rest; the run fails', () => {
    const s = predecessor();
    expect(s.execution).toBe('sequential');
    const r = run([started(s, mode), ...attempt('c', 0, 1), ...attempt('x', 0, 2), ...attempt('b', 1, 3), ...attempt('d', 4, 4)]);
    expect(r.starts.filter((x) => x.length)).toEqual([['c'], ['x'], ['b'], ['d']]);
    expect(r.statuses).toEqual({ x: 'succeeded', b: 'failed', c: 'succeeded', d: 'failed', e: 'skipped' });
    expect(stepsById(r.c).e!.reason).toBe('step d failed (execution: sequential stops at the first failure)');
    expect(r.state).toBe('failed');
  });

  it('independent steps never run together, whatever the concurrency; a continue-on-error failure lets the run succeed', () => {
    const s = predecessor();
    const r = run([started(s, mode), ...attempt('c', 0, 1), ...attempt('x', 0, 2), ...attempt('b', 1, 3), ...attempt('d', 0, 4), ...attempt('e', 0, 5)]);
    for (const starts of r.starts) expect(starts.length).toBeLessThanOrEqual(1);
    expect(r.state).toBe('succeeded');
  });

  it('the same graph without execution: sequential (absent, as in every spec stored before) runs independent steps together and keeps going', () => {
    const s = { ...predecessor() };
    delete s.execution;
    s.concurrency = 4;
    const r = run([started(s, mode), ...attempt('b', 1, 1), ...attempt('c', 0, 1), ...attempt('d', 4, 1), ...attempt('e', 0, 1), ...attempt('x', 0, 2)]);
    expect(r.starts[0]).toEqual(['b', 'c', 'd', 'e']);
    expect(r.statuses).toEqual({ x: 'succeeded', b: 'failed', c: 'succeeded', d: 'failed', e: 'succeeded' });
  });

  it('cancel: the running step is asked to stop, every later step is skipped one after the other, the run is cancelled', () => {
    const s = predecessor();
    const events: Ev[] = [started(s, mode), ...attempt('c', 0, 1), ...attempt('x', 0, 2).slice(0, 2)];
    const cancel = cancelled('enough', 3);
    const { steps } = fold(workflowRunMachine, recordDecisions([...events, cancel]).events);
    expect(steps.find((x) => x.event.type === 'wfrun.cancel_requested')!.actions.find((a) => a.type === 'killSteps')!.params).toEqual({ stepIds: ['x'], reason: 'enough' });
    const killed: Ev = {
      type: 'step.exited', at: at(4),
      data: { stepId: 'x', attempt: 1, exitCode: null, signal: 'SIGTERM', timedOut: false, cancelled: true, stdout: '', stderr: '', stdoutBytes: 0, stderrBytes: 0, durationMs: 2000, error: 'cancelled: enough', outputs: {} },
    };
    const r = run([...events, cancel, killed]);
    expect(r.statuses).toEqual({ x: 'cancelled', b: 'skipped', c: 'succeeded', d: 'skipped', e: 'skipped' });
    expect(stepsById(r.c).e!.reason).toBe('the workflow was cancelled');
    expect(r.state).toBe('cancelled');
  });

  it('an if: always() step still runs after the first failure, and failure() is true from then on', () => {
    const s = predecessor();
    const withCleanup: WorkflowSpec = { ...s, steps: s.steps.map((step) => (step.id === 'e' ? { ...step, if: 'failure()' } : step)) };
    const r = run([started(withCleanup, mode), ...attempt('c', 0, 1), ...attempt('x', 0, 2), ...attempt('b', 0, 3), ...attempt('d', 4, 4), ...attempt('e', 0, 5)]);
    expect(r.statuses.e).toBe('succeeded');
    expect(r.state).toBe('failed');
  });
});
