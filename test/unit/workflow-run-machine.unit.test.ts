/**
 * The workflow-run machine, pure: a diamond a → {b, c} → d plus an independent e. Which steps start
 * together, what a failure skips, continue-on-error, failure() / always() conditions, retries,
 * cancel, and the run's final status — folded from events exactly as the log replays them.
 */
import { describe, expect, it } from 'vitest';
import { normalizeWorkflowSpec, type WorkflowSpec } from '../../src/workflow/spec.js';
import { fold } from '../../src/machines/fold.js';
import { workflowRunMachine, type WorkflowRunContext } from '../../src/machines/workflow-run.js';

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

type Ev = { type: string; at: string; data: unknown };
const started = (s: WorkflowSpec): Ev => ({
  type: 'wfrun.started',
  at: at(0),
  data: {
    wfRunId: 'wfrun_1', workflowId: 'wf_1', workflowName: s.name, version: 1, spec: s, inputs: {}, trigger: 'manual',
    loopId: null, slot: null, attempt: 1, idempotencyKey: 'manual:wfrun_1', runnerId: 'r', leaseToken: 1,
  },
});
/** A step's whole attempt: intent, spawn, exit with `code` (and outputs). */
function attempt(stepId: string, code: number, t: number, n = 1, outputs: Record<string, string> = {}): Ev[] {
  return [
    { type: 'step.spawn_requested', at: at(t), data: { stepId, attempt: n, command: 'x', args: [], shell: true, cwd: null, envKeys: [], timeoutAt: null } },
    { type: 'step.spawned', at: at(t), data: { stepId, attempt: n, pid: 100, pgid: 100, startTime: '1', bootId: null } },
    {
      type: 'step.exited', at: at(t + 1),
      data: { stepId, attempt: n, exitCode: code, signal: null, timedOut: false, cancelled: false, stdout: '', stderr: '', stdoutBytes: 0, stderrBytes: 0, durationMs: 1000, error: code ? `exited with code ${code}` : null, outputs },
    },
  ];
}

function run(events: Ev[]) {
  const { snapshot, steps } = fold(workflowRunMachine, events);
  for (const s of steps) expect(s.accepted, `${s.event.type} ${JSON.stringify(s.event.data).slice(0, 60)}`).toBe(true);
  const c = snapshot.context as WorkflowRunContext;
  const statuses = Object.fromEntries(Object.entries(c.steps).map(([id, s]) => [id, s.status]));
  const starts = steps.map((s) => s.actions.filter((a) => a.type === 'startSteps').flatMap((a) => (a.params as { steps: Array<{ stepId: string }> }).steps.map((x) => x.stepId)));
  return { state: snapshot.value, c, statuses, starts };
}

describe('workflow-run machine: the diamond', () => {
  it('a and e start first; b and c start together when a succeeds; d after both; the run succeeds', () => {
    const s = spec();
    const r = run([started(s), ...attempt('a', 0, 1), ...attempt('e', 0, 1), ...attempt('b', 0, 3), ...attempt('c', 0, 3), ...attempt('d', 0, 5)]);
    expect(r.starts[0]).toEqual(['a', 'e']);
    expect(r.starts.flat()).toEqual(['a', 'e', 'b', 'c', 'd']);
    expect(r.state).toBe('succeeded');
    expect(r.c.finishedAt).toBe(at(6));
  });

  it('c fails: d is skipped (it needs c), e still succeeds, the run is failed', () => {
    const s = spec();
    const r = run([started(s), ...attempt('a', 0, 1), ...attempt('e', 0, 1), ...attempt('b', 0, 3), ...attempt('c', 2, 3)]);
    expect(r.statuses).toEqual({ a: 'succeeded', b: 'succeeded', c: 'failed', d: 'skipped', e: 'succeeded' });
    expect(r.c.steps.d!.reason).toBe('needs c which failed');
    expect(r.state).toBe('failed');
  });

  it('with continue-on-error on c, d runs after c fails and the run succeeds', () => {
    const s = spec({ c: { 'continue-on-error': true } });
    const r = run([started(s), ...attempt('a', 0, 1), ...attempt('e', 0, 1), ...attempt('b', 0, 3), ...attempt('c', 2, 3), ...attempt('d', 0, 5)]);
    expect(r.statuses.c).toBe('failed');
    expect(r.statuses.d).toBe('succeeded');
    expect(r.state).toBe('succeeded');
  });

  it('an if: failure() step runs only when something before it failed', () => {
    const s = spec({ f: { if: 'failure()' } });
    const ok = run([started(s), ...attempt('a', 0, 1), ...attempt('e', 0, 1), ...attempt('b', 0, 3), ...attempt('c', 0, 3), ...attempt('d', 0, 5)]);
    expect(ok.statuses.f).toBe('skipped');
    expect(ok.state).toBe('succeeded');
    const bad = run([started(s), ...attempt('a', 0, 1), ...attempt('e', 0, 1), ...attempt('b', 1, 3), ...attempt('c', 0, 3), ...attempt('f', 0, 5)]);
    expect(bad.statuses).toMatchObject({ d: 'skipped', f: 'succeeded' });
    expect(bad.state).toBe('failed');
  });

  it('cancel: running steps are asked to stop, pending ones are skipped, an always() step still runs; the run is cancelled', () => {
    const s = spec({ f: { if: 'always()' } });
    const events: Ev[] = [started(s), ...attempt('a', 0, 1), ...attempt('e', 0, 1), ...attempt('b', 0, 3).slice(0, 2), ...attempt('c', 0, 3).slice(0, 2)];
    const cancel: Ev = { type: 'wfrun.cancel_requested', at: at(4), data: { reason: 'enough' } };
    const { steps } = fold(workflowRunMachine, [...events, cancel]);
    const kill = steps.at(-1)!.actions.find((a) => a.type === 'killSteps')!;
    expect(kill.params).toEqual({ stepIds: ['b', 'c'], reason: 'enough' });
    const killed = (id: string): Ev => ({
      type: 'step.exited', at: at(5),
      data: { stepId: id, attempt: 1, exitCode: null, signal: 'SIGTERM', timedOut: false, cancelled: true, stdout: '', stderr: '', stdoutBytes: 0, stderrBytes: 0, durationMs: 2000, error: 'cancelled: enough', outputs: {} },
    });
    const r = run([...events, cancel, killed('b'), killed('c'), ...attempt('f', 0, 6)]);
    expect(r.statuses).toEqual({ a: 'succeeded', b: 'cancelled', c: 'cancelled', d: 'skipped', e: 'succeeded', f: 'succeeded' });
    expect(r.c.steps.d!.reason).toBe('the workflow was cancelled');
    expect(r.state).toBe('cancelled');
  });

  it('retries: a failed attempt waits for its delay (armRetry), the retry is attempt 2, and its success counts', () => {
    const s = spec({ a: { retries: { limit: 1, delay: '5s' } } });
    const first = [started(s), ...attempt('a', 1, 1)];
    const { steps } = fold(workflowRunMachine, first);
    expect(steps.at(-1)!.actions.find((x) => x.type === 'armRetry')!.params).toEqual({ retries: [{ stepId: 'a', attempt: 2, dueAt: at(7) }] });
    const r = run([...first, { type: 'step.retry_due', at: at(7), data: { stepId: 'a', attempt: 2 } }, ...attempt('a', 0, 7, 2), ...attempt('e', 0, 1)]);
    expect(r.c.steps.a).toMatchObject({ status: 'succeeded', attempt: 2 });
    // retry_due itself asks for the step to start again (attempt 2).
    expect(r.starts.flat().filter((x) => x === 'a')).toEqual(['a', 'a']);
    expect(r.starts.flat().filter((x) => x === 'b' || x === 'c')).toEqual(['b', 'c']);
  });

  it('concurrency 1: one step at a time, in file order among the ready ones', () => {
    const s = spec({}, { concurrency: 1 });
    const r = run([started(s), ...attempt('a', 0, 1), ...attempt('b', 0, 2), ...attempt('c', 0, 3), ...attempt('d', 0, 4), ...attempt('e', 0, 5)]);
    expect(r.starts.filter((x) => x.length)).toEqual([['a'], ['b'], ['c'], ['d'], ['e']]);
    expect(r.state).toBe('succeeded');
  });

  it('events for a step that is not in that state are refused (a stale attempt, an unknown step)', () => {
    const s = spec();
    const { steps } = fold(workflowRunMachine, [started(s), ...attempt('a', 0, 1), ...attempt('a', 0, 2)]);
    expect(steps.slice(-3).map((x) => x.accepted)).toEqual([false, false, false]);
  });
});
