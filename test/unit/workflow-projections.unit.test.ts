/**
 * Workflow projections on a real in-memory SQLite (test/helpers/projection-spec.ts): `workflows` and
 * `workflow_versions` from the spec stream; `workflow_runs`, `workflow_steps` and
 * `workflow_step_attempts` from run streams built through the real workflow-run machine (each event
 * must be accepted, and its recorded state is the machine's). Runs record their decisions
 * (`step.skipped`, `step.retry_scheduled`, given after the event that caused them, as the runner
 * appends them); runs from before they were recorded (`decisions: 'derived'`) are projected as they
 * always were. Step statuses in the tables are checked against the machine's own step states for
 * both kinds, and a rebuild from the log equals the live tables.
 */
import fc from 'fast-check';
import { beforeEach, describe, expect, it } from 'vitest';
import { upcast, type EventData } from '../../src/events/catalog.js';
import { openDatabase } from '../../src/events/db.js';
import { SqliteEventLog } from '../../src/events/sqlite-log.js';
import type { StepSpec, WorkflowSpec } from '../../src/workflow/spec.js';
import { fold, stateOf } from '../../src/machines/fold.js';
import { workflowMachine } from '../../src/machines/workflow.js';
import { workflowRunMachine, type WorkflowRunContext, stepsById } from '../../src/machines/workflow-run.js';
import { findProjection, inlineHandler, projections } from '../../src/projections/registry.js';
import { workflowRunsProjection, workflowsProjection, workflowVersionsProjection } from '../../src/projections/workflows.js';
import { rebuildProjections, verifyProjections } from '../../src/runtime/admin/projections.js';
import {
  findWorkflow,
  findWorkflowRun,
  listWorkflowRuns,
  listWorkflows,
  runAgentTotals,
  stepAgentTotals,
  workflowRunSteps,
  workflowVersion,
} from '../../src/runtime/queries/workflows.js';
import { at, wfrunEv, wfSpec, wfStep, workflowEv } from '../helpers/events.js';
import type { MachineInput } from '../helpers/machine.js';
import { projectionSpec, type ProjectionSpec, type Row } from '../helpers/projection-spec.js';
import { recordDecisions } from '../helpers/workflow-run.js';
import { agentReport } from '../helpers/agent-report.js';

/** Every registered projection on a fresh database (each test starts with one). */
let tables: ProjectionSpec;

/** Stores `events` on `workflow:<id>` (each must be accepted by the workflow machine). */
const workflow = (events: MachineInput[], id = 'wf_1') => tables.store(`workflow:${id}`, ...events);

/** Stores `events` on `wfrun:<id>`, after what it holds (each must be accepted by the workflow-run machine). */
const wfrun = (events: MachineInput[], id = 'wfrun_1') => tables.store(`wfrun:${id}`, ...events);

function errorOf(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected an error');
}

const runRow = (id = 'wfrun_1') => tables.row('workflow_runs', { id });
const stepRows = (id = 'wfrun_1') => tables.rows('workflow_steps', { wfrun_id: id }, { orderBy: 'ord' });
const statuses = (id = 'wfrun_1') => Object.fromEntries(stepRows(id).map((r) => [r.step_id, r.status]));
const attemptRows = (id = 'wfrun_1') => tables.rows('workflow_step_attempts', { wfrun_id: id });

/** The machine's own step statuses after `events`. */
function machineStatuses(events: MachineInput[]): Record<string, string> {
  const context = fold(workflowRunMachine, events).snapshot.context as WorkflowRunContext;
  return Object.fromEntries(Object.entries(stepsById(context)).map(([id, s]) => [id, s.status]));
}

/** Runs step `id` (attempt n) to its exit, `t` ms after T0. */
function runStep(id: string, t: number, exit: Partial<Parameters<typeof wfrunEv.exited>[3]> = {}, attempt = 1, durationMs = 1000): MachineInput[] {
  return [
    wfrunEv.spawnRequested(id, attempt, at(t)),
    wfrunEv.spawned(id, attempt, at(t + 10), { pid: 1000 + t }),
    wfrunEv.exited(id, attempt, at(t + 10 + durationMs), { durationMs, ...exit }),
  ];
}

beforeEach(() => {
  tables = projectionSpec();
});

describe('registration', () => {
  it('registers workflows, workflow_versions and workflow_runs (owning the step tables) after the loop projections', () => {
    expect(projections.map((p) => p.name).slice(-6, -3)).toEqual(['workflows', 'workflow_versions', 'workflow_runs']);
    expect(findProjection('workflows')).toBe(workflowsProjection);
    expect(findProjection('workflow_versions')).toBe(workflowVersionsProjection);
    expect(findProjection('workflow_steps')).toBe(workflowRunsProjection);
    expect(findProjection('workflow_step_attempts')).toBe(workflowRunsProjection);
    expect(workflowRunsProjection.tables.map((t) => t.name)).toEqual(['workflow_runs', 'workflow_steps', 'workflow_step_attempts']);
  });
});

describe('workflows and workflow_versions', () => {
  it('created inserts the workflow and version 1; updated moves it to the next version and keeps both', () => {
    const v2 = wfSpec({ description: 'now with e', steps: [...wfSpec().steps, wfStep('e', { needs: ['d'] })] });
    workflow([workflowEv.created({}, at(0)), workflowEv.updated({ version: 2, spec: v2, sha256: 'cd'.repeat(32) }, at(1000))]);
    const row = tables.row('workflows');
    expect(row).toMatchObject({
      id: 'wf_1',
      name: 'diamond',
      live_name: 'diamond',
      description: 'now with e',
      version: 2,
      status: 'active',
      source_file: '/work/diamond.yaml',
      sha256: 'cd'.repeat(32),
      created_at: at(0),
      updated_at: at(1000),
    });
    expect(findWorkflow(tables.db, 'diamond')).toMatchObject({ runCount: 0, lastRun: null });
    expect(JSON.parse(row.spec as string)).toEqual(v2);
    const versions = tables.rows('workflow_versions');
    expect(versions.map((v) => [v.workflow_id, v.version, v.created_at, v.sha256])).toEqual([
      ['wf_1', 1, at(0), 'ab'.repeat(32)],
      ['wf_1', 2, at(1000), 'cd'.repeat(32)],
    ]);
    expect(JSON.parse(versions[0]!.spec as string)).toEqual(wfSpec());

    expect(findWorkflow(tables.db, 'diamond')).toMatchObject({ id: 'wf_1', version: 2, spec: v2, description: 'now with e', lastRun: null });
    expect(workflowVersion(tables.db, 'wf_1', 1)).toEqual({
      workflowId: 'wf_1',
      version: 1,
      spec: wfSpec(),
      sourceFile: '/work/diamond.yaml',
      sha256: 'ab'.repeat(32),
      createdAt: at(0),
    });
    expect(() => workflowVersion(tables.db, 'wf_1', 3)).toThrow(/has no version 3/);
  });

  it('names are unique among live workflows; an archived one frees its name and keeps its row and versions', () => {
    workflow([workflowEv.created()], 'wf_1');
    expect(() => workflow([workflowEv.created({ workflowId: 'wf_2' })], 'wf_2')).toThrow(/UNIQUE constraint failed: workflows.live_name/);
    tables = projectionSpec();
    workflow([workflowEv.created(), workflowEv.archived('replaced', at(2000))], 'wf_1');
    workflow([workflowEv.created({ workflowId: 'wf_2' }, at(3000))], 'wf_2');
    expect(tables.rows('workflows', {}, { columns: ['id', 'name', 'live_name', 'status', 'reason'] })).toEqual([
      { id: 'wf_1', name: 'diamond', live_name: null, status: 'archived', reason: 'replaced' },
      { id: 'wf_2', name: 'diamond', live_name: 'diamond', status: 'active', reason: null },
    ]);
    expect(findWorkflow(tables.db, 'diamond').id).toBe('wf_2');
    expect(listWorkflows(tables.db).map((w) => w.id)).toEqual(['wf_2']);
    expect(listWorkflows(tables.db, { all: true }).map((w) => w.id)).toEqual(['wf_1', 'wf_2']);
    expect(() => findWorkflow(tables.db, 'wf_1')).toThrow(/is archived/);
    expect(findWorkflow(tables.db, 'wf_1', { includeArchived: true }).status).toBe('archived');
  });

  it('a run counts on its workflow; the summary joins the run for its current status', () => {
    workflow([workflowEv.created()]);
    wfrun([wfrunEv.started({}, at(100))]);
    // Counted from workflow_runs by the read side (the workflows row holds no counter).
    expect(findWorkflow(tables.db, 'wf_1').runCount).toBe(1);
    expect(findWorkflow(tables.db, 'wf_1').lastRun).toEqual({ id: 'wfrun_1', status: 'running', at: at(100) });
  });
});

describe('workflow_runs and workflow_steps', () => {
  it('wfrun.started inserts the run and one pending row per step, in spec order', () => {
    const spec = wfSpec({ steps: [wfStep('a', { name: 'Build' }), wfStep('b', { needs: ['a'], if: 'always()', continueOnError: true, retries: { attempts: 3, delayMs: 1000, backoff: 2, maxDelayMs: null } })] });
    const [started] = wfrun([
      wfrunEv.started({ spec, inputs: { branch: 'main' }, trigger: 'schedule', loopId: 'loop_1', slot: at(0), attempt: 2, idempotencyKey: 'loop_1:slot' }, at(5)),
    ]);
    expect(runRow()).toEqual({
      claimed_position: started!.position,
      id: 'wfrun_1',
      workflow_id: 'wf_1',
      workflow_name: 'diamond',
      version: 1,
      status: 'running',
      trigger: 'schedule',
      loop_id: 'loop_1',
      slot: at(0),
      attempt: 2,
      idempotency_key: 'loop_1:slot',
      runner_id: 'host:1:abc',
      inputs: '{"branch":"main"}',
      step_count: 2,
      cancel_requested: 0,
      timed_out: 0,
      error: null,
      started_at: at(5),
      finished_at: null,
      duration_ms: null,
      updated_at: at(5),
      output_pruned_at: null,
      decisions: 'recorded',
      archived_at: null,
      forked_from: null,
    });
    expect(stepRows().map((r) => [r.step_id, r.ord, r.name, r.needs, r.if_cond, r.continue_on_error, r.max_attempts, r.target_type, r.status, r.attempts])).toEqual([
      ['a', 0, 'Build', '[]', null, 0, 1, 'command', 'pending', 0],
      ['b', 1, null, '["a"]', 'always()', 1, 3, 'command', 'pending', 0],
    ]);
  });

  it('a diamond with a failed step: its dependant is skipped, with the reason, once its needs ended; the run names the failed step', () => {
    const events: MachineInput[] = [
      wfrunEv.started({}, at(0)),
      ...runStep('a', 10),
      wfrunEv.spawnRequested('b', 1, at(1100)),
      wfrunEv.spawnRequested('c', 1, at(1101)),
      wfrunEv.spawned('b', 1, at(1110), { pid: 2001 }),
      wfrunEv.spawned('c', 1, at(1111), { pid: 2002 }),
      wfrunEv.exited('b', 1, at(1500), { exitCode: 1, stderr: 'boom\n', stderrBytes: 5, durationMs: 390, error: 'exited with code 1' }),
    ];
    wfrun(events);
    // b failed; d waits for c.
    expect(machineStatuses(events)).toEqual({ a: 'succeeded', b: 'failed', c: 'running', d: 'pending' });
    expect(statuses()).toEqual({ a: 'succeeded', b: 'failed', c: 'running', d: 'pending' });
    expect(runRow()).toMatchObject({ status: 'running', finished_at: null, updated_at: at(1500) });

    // c's exit makes d ready: its skip is recorded with it (the runner's one transaction), and ends the run.
    const end = [wfrunEv.exited('c', 1, at(2111), { durationMs: 1000, outputs: { version: '1.2.3' } }), wfrunEv.skipped('d', 'needs b which failed', at(2111))];
    const [exit, last] = wfrun(end);
    expect(exit!.state).toBe('running');
    expect(last!.state).toBe('failed');

    expect(statuses()).toEqual(machineStatuses([...events, ...end]));
    expect(statuses()).toEqual({ a: 'succeeded', b: 'failed', c: 'succeeded', d: 'skipped' });
    expect(runRow()).toMatchObject({ status: 'failed', finished_at: at(2111), duration_ms: 2111, error: 'failed step: b' });
    const b = stepRows().find((r) => r.step_id === 'b')!;
    expect(b).toMatchObject({ attempts: 1, exit_code: 1, error: 'exited with code 1', stderr: 'boom\n', stderr_bytes: 5, pid: 2001, started_at: at(1100), finished_at: at(1500), duration_ms: 390 });
    const c = stepRows().find((r) => r.step_id === 'c')!;
    expect(JSON.parse(c.outputs as string)).toEqual({ version: '1.2.3' });
    const d = stepRows().find((r) => r.step_id === 'd')!;
    expect(d).toMatchObject({ status: 'skipped', skip_reason: 'needs b which failed', attempts: 0, started_at: null, finished_at: null, duration_ms: null });
    expect(attemptRows().map((r) => [r.step_id, r.attempt, r.status, r.exit_code, r.pid])).toEqual([
      ['a', 1, 'succeeded', 0, 1010],
      ['b', 1, 'failed', 1, 2001],
      ['c', 1, 'succeeded', 0, 2002],
    ]);

    // The read side.
    const run = findWorkflowRun(tables.db, 'wfrun_1');
    expect(run).toMatchObject({ status: 'failed', inputs: {}, cancelRequested: false, timedOut: false, durationMs: 2111, stepCount: 4 });
    const steps = workflowRunSteps(tables.db, 'wfrun_1');
    expect(steps.map((s) => [s.stepId, s.status, s.attempt, s.attempts.length])).toEqual([
      ['a', 'succeeded', 1, 1],
      ['b', 'failed', 1, 1],
      ['c', 'succeeded', 1, 1],
      ['d', 'skipped', 0, 0],
    ]);
    expect(steps[3]!.needs).toEqual(['b', 'c']);
    expect(steps[2]!.outputs).toEqual({ version: '1.2.3' });
    expect(steps[1]!.attempts[0]).toEqual({
      attempt: 1,
      status: 'failed',
      exitCode: 1,
      signal: null,
      error: 'exited with code 1',
      pid: 2001,
      startedAt: at(1100),
      finishedAt: at(1500),
      durationMs: 390,
      agent: null,
    });
    // Command steps: no agent provider, model or report.
    expect(steps.map((s) => [s.provider, s.model, s.agent])).toEqual(Array(4).fill([null, null, null]));
    expect(runAgentTotals(steps)).toBeNull();
  });

  it('while the run goes on, a step whose need failed is skipped at once, with its reason (step.skipped, with the failure)', () => {
    const spec = wfSpec({ steps: [wfStep('a'), wfStep('b', { needs: ['a'] }), wfStep('c')] });
    // a fails: b's skip is recorded with a's exit; c is still spawning, so the run goes on.
    const events: MachineInput[] = [
      wfrunEv.started({ spec }),
      wfrunEv.spawnRequested('a', 1, at(10)),
      wfrunEv.spawnRequested('c', 1, at(11)),
      wfrunEv.spawned('a', 1, at(20)),
      wfrunEv.exited('a', 1, at(1020), { exitCode: 1 }),
      wfrunEv.skipped('b', 'needs a which failed', at(1020)),
    ];
    wfrun(events);
    expect(machineStatuses(events)).toEqual({ a: 'failed', b: 'skipped', c: 'spawning' });
    expect(statuses()).toEqual({ a: 'failed', b: 'skipped', c: 'spawning' });
    expect(stepRows()[1]).toMatchObject({ status: 'skipped', skip_reason: 'needs a which failed', attempts: 0, finished_at: null });
    expect(runRow()).toMatchObject({ status: 'running', updated_at: at(1020) });
    expect(workflowRunSteps(tables.db, 'wfrun_1').map((x) => [x.stepId, x.status])).toEqual([
      ['a', 'failed'],
      ['b', 'skipped'],
      ['c', 'spawning'],
    ]);
    wfrun([wfrunEv.spawned('c', 1, at(1030)), wfrunEv.exited('c', 1, at(2030))]);
    expect(statuses()).toEqual({ a: 'failed', b: 'skipped', c: 'succeeded' });
    expect(runRow()).toMatchObject({ status: 'failed', error: 'failed step: a' });
  });

  it('continue-on-error: a failed step does not fail the run nor skip its dependants', () => {
    const spec = wfSpec({ steps: [wfStep('a', { continueOnError: true }), wfStep('b', { needs: ['a'] })] });
    const events = [wfrunEv.started({ spec }), ...runStep('a', 10, { exitCode: 2 }), ...runStep('b', 2000)];
    wfrun(events);
    expect(statuses()).toEqual({ a: 'failed', b: 'succeeded' });
    expect(runRow()).toMatchObject({ status: 'succeeded', error: null });
  });

  it('a retry: the step is retrying until its recorded retry_at, every attempt keeps its row, durations add up', () => {
    const spec = wfSpec({
      steps: [wfStep('a'), wfStep('b', { needs: ['a'], retries: { attempts: 3, delayMs: 5000, backoff: 2, maxDelayMs: null } })],
    });
    const head: MachineInput[] = [
      wfrunEv.started({ spec }),
      ...runStep('a', 10),
      ...runStep('b', 1100, { exitCode: 1, error: 'exited with code 1', stdout: 'try 1\n', outputs: { k: '1' } }, 1, 400),
      wfrunEv.retryScheduled('b', 2, at(6510), 'attempt 1 failed: exited with code 1', at(1510)),
    ];
    wfrun(head);
    expect(machineStatuses(head)).toMatchObject({ b: 'retrying' });
    expect(statuses()).toEqual({ a: 'succeeded', b: 'retrying' });
    expect(stepRows()[1]).toMatchObject({ attempts: 1, exit_code: 1, finished_at: at(1510), duration_ms: 400, retry_at: at(6510) });

    const rest: MachineInput[] = [
      wfrunEv.retryDue('b', 2, at(6510)),
      wfrunEv.spawnRequested('b', 2, at(6520)),
    ];
    const all = [...head, ...rest];
    wfrun(rest);
    expect(statuses()).toEqual({ a: 'succeeded', b: 'spawning' });
    // A new attempt: the end, pid and due time are cleared; the last outcome stays until the next one.
    expect(stepRows()[1]).toMatchObject({ attempts: 2, finished_at: null, pid: null, exit_code: 1, started_at: at(1100), retry_at: null });

    const tail: MachineInput[] = [
      wfrunEv.spawned('b', 2, at(6530), { pid: 7777 }),
      wfrunEv.exited('b', 2, at(7530), { durationMs: 1000, stdout: 'try 2\n', outputs: { k: '2' } }),
    ];
    const full = [...all, ...tail];
    wfrun(tail);

    expect(statuses()).toEqual(machineStatuses(full));
    expect(runRow()).toMatchObject({ status: 'succeeded', finished_at: at(7530) });
    expect(stepRows()[1]).toMatchObject({
      status: 'succeeded',
      attempts: 2,
      exit_code: 0,
      error: null,
      stdout: 'try 2\n',
      outputs: '{"k":"2"}',
      pid: 7777,
      started_at: at(1100),
      finished_at: at(7530),
      duration_ms: 1400,
    });
    expect(attemptRows().filter((r) => r.step_id === 'b')).toEqual([
      { wfrun_id: 'wfrun_1', step_id: 'b', attempt: 1, status: 'failed', exit_code: 1, signal: null, error: 'exited with code 1', pid: 2100, started_at: at(1100), finished_at: at(1510), duration_ms: 400, agent: null },
      { wfrun_id: 'wfrun_1', step_id: 'b', attempt: 2, status: 'succeeded', exit_code: 0, signal: null, error: null, pid: 7777, started_at: at(6520), finished_at: at(7530), duration_ms: 1000, agent: null },
    ]);
    expect(workflowRunSteps(tables.db, 'wfrun_1')[1]!.attempts.map((a) => [a.attempt, a.status])).toEqual([
      [1, 'failed'],
      [2, 'succeeded'],
    ]);
  });

  it('spawn failures and abandoned attempts are attempts too (measured from their request), and retried', () => {
    const spec = wfSpec({ steps: [wfStep('a', { retries: { attempts: 3, delayMs: 0, backoff: 1, maxDelayMs: null } })] });
    const events: MachineInput[] = [
      wfrunEv.started({ spec }),
      wfrunEv.spawnRequested('a', 1, at(10)),
      wfrunEv.spawnFailed('a', 1, at(30)),
      wfrunEv.retryScheduled('a', 2, at(30), 'attempt 1 failed: command not found: nope', at(30)),
      wfrunEv.retryDue('a', 2, at(40)),
      wfrunEv.spawnRequested('a', 2, at(50)),
      wfrunEv.spawned('a', 2, at(60)),
      wfrunEv.abandoned('a', 2, at(1050)),
      wfrunEv.retryScheduled('a', 3, at(1050), 'attempt 2 was abandoned: runner lost the process', at(1050)),
      wfrunEv.retryDue('a', 3, at(1060)),
      wfrunEv.spawnRequested('a', 3, at(1070)),
      wfrunEv.spawnFailed('a', 3, at(1075), 'EACCES', 'EACCES'),
    ];
    wfrun(events);
    expect(statuses()).toEqual(machineStatuses(events));
    expect(statuses()).toEqual({ a: 'failed' });
    expect(attemptRows().map((r) => [r.attempt, r.status, r.error, r.duration_ms])).toEqual([
      [1, 'failed', 'command not found: nope', 20],
      [2, 'abandoned', 'runner lost the process', 1000],
      [3, 'failed', 'EACCES', 5],
    ]);
    expect(stepRows()[0]).toMatchObject({ attempts: 3, duration_ms: 1025, error: 'EACCES', exit_code: null });
    expect(runRow()).toMatchObject({ status: 'failed', error: 'failed step: a' });
  });

  it('a cancelled run: the killed step is cancelled, the one waiting for a retry too, the rest skipped', () => {
    const spec = wfSpec({
      steps: [
        wfStep('a'),
        wfStep('b', { retries: { attempts: 2, delayMs: 60_000, backoff: 1, maxDelayMs: null } }),
        wfStep('c', { needs: ['a', 'b'] }),
        wfStep('cleanup', { needs: ['c'], if: 'always()' }),
      ],
    });
    const events: MachineInput[] = [
      wfrunEv.started({ spec }),
      wfrunEv.spawnRequested('a', 1, at(10)),
      wfrunEv.spawnRequested('b', 1, at(11)),
      wfrunEv.spawned('a', 1, at(20)),
      wfrunEv.spawned('b', 1, at(21)),
      wfrunEv.exited('b', 1, at(500), { exitCode: 1, durationMs: 479 }),
      wfrunEv.retryScheduled('b', 2, at(60_500), 'attempt 1 failed: exited with code 1', at(500)),
      wfrunEv.cancelRequested('deploy window closed', at(600)),
    ];
    wfrun(events);
    expect(statuses()).toEqual({ a: 'running', b: 'cancelled', c: 'pending', cleanup: 'pending' });
    expect(stepRows().find((r) => r.step_id === 'b')).toMatchObject({ retry_at: null });
    expect(runRow()).toMatchObject({ status: 'running', cancel_requested: 1, error: 'cancelled: deploy window closed' });
    // a is killed: SIGTERM, no exit code; the cleanup step (if: always()) runs after the cancel.
    const rest: MachineInput[] = [
      wfrunEv.exited('a', 1, at(700), { exitCode: null, signal: 'SIGTERM', cancelled: true, durationMs: 680, error: 'killed by SIGTERM' }),
      wfrunEv.skipped('c', 'the workflow was cancelled', at(700)),
      ...runStep('cleanup', 800),
    ];
    const all = [...events, ...rest];
    const stored = wfrun(rest);
    expect(stored.at(-1)!.state).toBe('cancelled');
    expect(statuses()).toEqual(machineStatuses(all));
    expect(statuses()).toEqual({ a: 'cancelled', b: 'cancelled', c: 'skipped', cleanup: 'succeeded' });
    expect(stepRows().find((r) => r.step_id === 'c')).toMatchObject({ skip_reason: 'the workflow was cancelled' });
    expect(runRow()).toMatchObject({ status: 'cancelled', finished_at: at(1810), error: 'cancelled: deploy window closed' });
    expect(stepRows().find((r) => r.step_id === 'a')).toMatchObject({ signal: 'SIGTERM', exit_code: null, error: 'killed by SIGTERM' });
    expect(stepRows().find((r) => r.step_id === 'b')).toMatchObject({ finished_at: at(600), attempts: 1 });
  });

  it('the workflow timeout: running steps end timed out (no retry), the run ends timed_out', () => {
    const spec = wfSpec({ timeoutMs: 60_000, steps: [wfStep('a', { retries: { attempts: 5, delayMs: 1, backoff: 1, maxDelayMs: null } }), wfStep('b', { needs: ['a'] })] });
    const events: MachineInput[] = [
      wfrunEv.started({ spec }),
      wfrunEv.spawnRequested('a', 1, at(10)),
      wfrunEv.spawned('a', 1, at(20)),
      wfrunEv.timedOut(60_000, at(60_000)),
      wfrunEv.exited('a', 1, at(60_100), { exitCode: 143, signal: null, durationMs: 60_080 }),
      wfrunEv.skipped('b', 'the workflow timed out', at(60_100)),
    ];
    wfrun(events);
    expect(statuses()).toEqual(machineStatuses(events));
    expect(statuses()).toEqual({ a: 'failed', b: 'skipped' });
    expect(runRow()).toMatchObject({ status: 'timed_out', timed_out: 1, error: 'the workflow timed out after 1m' });
  });

  it('a run whose steps are all skipped at the start ends in the transaction of its first event, with the last skip', () => {
    const spec = wfSpec({ steps: [wfStep('a', { if: 'false' }), wfStep('b', { needs: ['a'] })] });
    const stored = wfrun([
      wfrunEv.started({ spec }, at(0)),
      wfrunEv.skipped('a', 'if: false was false', at(0)),
      wfrunEv.skipped('b', 'needs a which was skipped', at(0)),
    ]);
    expect(stored.map((e) => e.state)).toEqual(['running', 'running', 'succeeded']);
    expect(statuses()).toEqual({ a: 'skipped', b: 'skipped' });
    expect(stepRows().map((r) => r.skip_reason)).toEqual(['if: false was false', 'needs a which was skipped']);
    expect(runRow()).toMatchObject({ status: 'succeeded', finished_at: at(0), duration_ms: 0 });
  });
});

describe('workflow_steps of runs started before decisions were recorded (derived: wfrun.started v1, upcast)', () => {
  /** A v1 start as it is read back (upcast: decisions 'derived'). */
  const startedV1 = (data: Parameters<typeof wfrunEv.started>[0] = {}, when = at(0)) => {
    const { decisions: _recorded, ...v1 } = wfrunEv.started(data, when).data;
    return { type: 'wfrun.started', at: when, data: upcast('wfrun.started', 1, v1) as EventData<'wfrun.started'> };
  };

  it('the run is marked derived; a skipped step stays pending while the run goes on and is skipped (no reason) when it ends', () => {
    const spec = wfSpec({ steps: [wfStep('a'), wfStep('b', { needs: ['a'] }), wfStep('c')] });
    const events: MachineInput[] = [
      startedV1({ spec }),
      wfrunEv.spawnRequested('a', 1, at(10)),
      wfrunEv.spawnRequested('c', 1, at(11)),
      wfrunEv.spawned('a', 1, at(20)),
      wfrunEv.exited('a', 1, at(1020), { exitCode: 1 }),
    ];
    wfrun(events);
    expect(runRow()).toMatchObject({ decisions: 'derived' });
    // The machine skipped b at once, without an event: the table cannot know it yet.
    expect(machineStatuses(events)).toEqual({ a: 'failed', b: 'skipped', c: 'spawning' });
    expect(statuses()).toEqual({ a: 'failed', b: 'pending', c: 'spawning' });
    wfrun([wfrunEv.spawned('c', 1, at(1030)), wfrunEv.exited('c', 1, at(2030))]);
    expect(statuses()).toEqual({ a: 'failed', b: 'skipped', c: 'succeeded' });
    expect(stepRows()[1]).toMatchObject({ skip_reason: null });
    expect(runRow()).toMatchObject({ status: 'failed', error: 'failed step: a' });
  });

  it('a failed attempt with attempts left is retrying (derived from the attempts and the run), without retry_at', () => {
    const spec = wfSpec({ steps: [wfStep('a', { retries: { attempts: 2, delayMs: 5000, backoff: 1, maxDelayMs: null } }), wfStep('b')] });
    const events: MachineInput[] = [startedV1({ spec }), ...runStep('a', 10, { exitCode: 1 }), wfrunEv.spawnRequested('b', 1, at(20))];
    wfrun(events);
    expect(statuses()).toEqual(machineStatuses(events));
    expect(stepRows()[0]).toMatchObject({ status: 'retrying', retry_at: null });
    // The cancel ends it (and b, never spawned, is killed by the runner: here it just never exits).
    wfrun([wfrunEv.cancelRequested(null, at(2000))]);
    expect(stepRows()[0]).toMatchObject({ status: 'cancelled', finished_at: at(2000) });
    // Recorded decisions are refused on such a run.
    expect(() => wfrun([wfrunEv.skipped('b', 'x', at(2001))])).toThrow(/rejected/);
  });
});

/** An agent step asking for `provider` (and `model`). */
const agentStep = (id: string, provider: string, model: string | null, overrides: Partial<StepSpec> = {}): StepSpec =>
  wfStep(id, {
    target: {
      type: 'agent',
      provider,
      prompt: `do ${id}`,
      promptFile: null,
      model,
      agent: null,
      cwd: null,
      env: {},
      permissionMode: null,
      extraArgs: [],
      configIsolation: 'safe',
      account: null,
      maxTurns: null,
      maxCostUsd: null,
      idleTimeoutMs: null,
    },
    ...overrides,
  });

const report = agentReport;

describe('agent steps: what the CLI reported', () => {
  it('each attempt keeps its report, the step its last ended attempt\'s (none after an abandoned one); the views sum them', () => {
    const spec = wfSpec({
      steps: [
        wfStep('build'),
        agentStep('review', 'claude', 'claude-opus-4-1', { needs: ['build'], retries: { attempts: 3, delayMs: 0, backoff: 1, maxDelayMs: null } }),
        agentStep('fix', 'codex', null, { needs: ['build'] }),
      ],
    });
    const r1 = report({ model: 'claude-opus-4-1', sessionId: 's-1', turns: 3, tokens: { input: 100, output: 20, cacheRead: 5000, cacheWrite: null }, costUsd: 0.1 });
    const r3 = report({ model: 'claude-opus-4-1', sessionId: 's-3', turns: 2, tokens: { input: 50, output: 10, cacheRead: 1000, cacheWrite: 7 }, costUsd: 0.2 });
    const codex = report({ provider: 'codex', model: 'gpt-5-codex', turns: 1, tokens: { input: 30, output: 5, cacheRead: null, cacheWrite: null } });
    const head: MachineInput[] = [
      wfrunEv.started({ spec }, at(0)),
      ...runStep('build', 10),
      ...runStep('review', 2000, { exitCode: 1, error: 'exited with code 1', agent: r1 }, 1, 500),
      wfrunEv.retryScheduled('review', 2, at(2510), 'attempt 1 failed: exited with code 1', at(2510)),
      ...runStep('fix', 2100, { agent: codex }, 1, 300),
      wfrunEv.retryDue('review', 2, at(3000)),
      wfrunEv.spawnRequested('review', 2, at(3010)),
      wfrunEv.spawned('review', 2, at(3020)),
      wfrunEv.abandoned('review', 2, at(4000)),
      wfrunEv.retryScheduled('review', 3, at(4000), 'attempt 2 was abandoned: runner lost the process', at(4000)),
    ];
    wfrun(head);
    expect(statuses()).toEqual(machineStatuses(head));
    const review = () => stepRows().find((r) => r.step_id === 'review')!;
    // The spec's provider and model on agent steps only.
    expect(stepRows().map((r) => [r.step_id, r.target_type, r.provider, r.model])).toEqual([
      ['build', 'command', null, null],
      ['review', 'agent', 'claude', 'claude-opus-4-1'],
      ['fix', 'agent', 'codex', null],
    ]);
    // The abandoned attempt said nothing: the step's last report is none; attempt 1 keeps its own.
    expect(review()).toMatchObject({ status: 'retrying', attempts: 2, agent: null });
    expect(attemptRows().map((r) => [r.step_id, r.attempt, r.status, r.agent === null ? null : JSON.parse(r.agent as string)])).toEqual([
      ['build', 1, 'succeeded', null],
      ['fix', 1, 'succeeded', codex],
      ['review', 1, 'failed', r1],
      ['review', 2, 'abandoned', null],
    ]);

    const tail: MachineInput[] = [wfrunEv.retryDue('review', 3, at(4100)), ...runStep('review', 4200, { agent: r3 }, 3, 700)];
    const [last] = wfrun(tail).slice(-1);
    expect(last!.state).toBe('succeeded');
    expect(JSON.parse(review().agent as string)).toEqual(r3);
    expect(JSON.parse(stepRows().find((r) => r.step_id === 'fix')!.agent as string)).toEqual(codex);
    expect(stepRows().find((r) => r.step_id === 'build')!.agent).toBeNull();

    // The read side: the report per step (last) and per attempt, and the sums.
    const steps = workflowRunSteps(tables.db, 'wfrun_1');
    const [build, fix, rev] = [steps[0]!, steps[2]!, steps[1]!];
    expect(rev).toMatchObject({ provider: 'claude', model: 'claude-opus-4-1', agent: r3 });
    expect(rev.attempts.map((a) => a.agent)).toEqual([r1, null, r3]);
    expect(fix).toMatchObject({ provider: 'codex', model: null, agent: codex });
    expect(build.agent).toBeNull();
    expect(stepAgentTotals(build)).toBeNull();
    // Every attempt that reported counts: retries cost too.
    expect(stepAgentTotals(rev)).toEqual({
      reports: 2,
      turns: 5,
      tokens: { input: 150, output: 30, cacheRead: 6000, cacheWrite: 7 },
      costUsd: 0.3, // rounded to nano-dollars: no 0.30000000000000004
      costReports: 2,
    });
    // codex reported no cost: null, not 0; the run's cost is over the reports that had one.
    expect(stepAgentTotals(fix)).toMatchObject({ reports: 1, costUsd: null, costReports: 0, tokens: { input: 30, cacheRead: null } });
    expect(runAgentTotals(steps)).toEqual({
      reports: 3,
      turns: 6,
      tokens: { input: 180, output: 35, cacheRead: 6000, cacheWrite: 7 },
      costUsd: 0.3,
      costReports: 2,
    });
  });
});

describe('workflow run queries', () => {
  it('lists runs newest first, by workflow and status; finds a run by a unique id prefix', () => {
    workflow([workflowEv.created()], 'wf_1');
    workflow([workflowEv.created({ workflowId: 'wf_2', name: 'other' })], 'wf_2');
    const one = wfSpec({ steps: [wfStep('a')] });
    wfrun([wfrunEv.started({ wfRunId: 'wfrun_aaa1', spec: one, idempotencyKey: 'k1' }), ...runStep('a', 10)], 'wfrun_aaa1');
    wfrun([wfrunEv.started({ wfRunId: 'wfrun_aab2', spec: one, idempotencyKey: 'k2' }, at(5000)), ...runStep('a', 5010, { exitCode: 1 })], 'wfrun_aab2');
    wfrun(
      [wfrunEv.started({ wfRunId: 'wfrun_bbb3', workflowId: 'wf_2', workflowName: 'other', spec: one, idempotencyKey: 'k3' }, at(9000))],
      'wfrun_bbb3',
    );
    expect(listWorkflowRuns(tables.db).map((r) => r.id)).toEqual(['wfrun_bbb3', 'wfrun_aab2', 'wfrun_aaa1']);
    expect(listWorkflowRuns(tables.db, { workflowId: 'wf_1' }).map((r) => r.id)).toEqual(['wfrun_aab2', 'wfrun_aaa1']);
    expect(listWorkflowRuns(tables.db, { status: 'failed' }).map((r) => r.id)).toEqual(['wfrun_aab2']);
    expect(listWorkflowRuns(tables.db, { limit: 1 }).map((r) => r.id)).toEqual(['wfrun_bbb3']);
    expect(findWorkflowRun(tables.db, 'wfrun_b').id).toBe('wfrun_bbb3');
    expect(() => findWorkflowRun(tables.db, 'wfrun_aa')).toThrow(/matches 2 workflow runs/);
    expect(() => findWorkflowRun(tables.db, 'wfrun_zzz')).toThrow(/no workflow run/);
    expect(findWorkflow(tables.db, 'other').lastRun).toEqual({ id: 'wfrun_bbb3', status: 'running', at: at(9000) });
    expect(() => workflowRunSteps(tables.db, 'nope')).not.toThrow();
  });

  it('findWorkflow: by id, name or id prefix; ambiguity lists the candidates; unknown names suggest similar ones', () => {
    workflow([workflowEv.created({ workflowId: 'wf_abc1', name: 'nightly' })], 'wf_abc1');
    workflow([workflowEv.created({ workflowId: 'wf_abc2', name: 'nightly-e2e' })], 'wf_abc2');
    expect(findWorkflow(tables.db, 'wf_abc1').name).toBe('nightly');
    expect(findWorkflow(tables.db, 'nightly-e2e').id).toBe('wf_abc2');
    expect(findWorkflow(tables.db, 'wf_abc2'.slice(0, 7)).id).toBe('wf_abc2');
    expect(errorOf(() => findWorkflow(tables.db, 'wf_ab'))).toMatchObject({
      code: 'ambiguous',
      details: { candidates: [{ id: 'wf_abc1', name: 'nightly', status: 'active' }, { id: 'wf_abc2', name: 'nightly-e2e', status: 'active' }] },
    });
    expect(errorOf(() => findWorkflow(tables.db, 'nightlyy'))).toMatchObject({ code: 'not_found', hint: expect.stringMatching(/did you mean nightly/) });
  });
});

// ── the machine as the oracle: random runs ──────────────────────────────────

type Choice = { kind: 'step'; pick: number; exit: number; how: number } | { kind: 'cancel' } | { kind: 'timeout' };

/**
 * Drives the workflow-run machine like a runtime would, with random outcomes: the next event for a
 * step the machine wants started, spawning, running or retrying, or a cancel / workflow timeout.
 * Returns one group per transaction: the event and, for a run that records its decisions, the
 * step.retry_scheduled / step.skipped events recorded with it (test/helpers/workflow-run.ts).
 */
function simulate(spec: WorkflowSpec, choices: Choice[], decisions: 'recorded' | 'derived'): MachineInput[][] {
  const start = wfrunEv.started({ spec }, at(0));
  const first = decisions === 'derived' ? { ...start, data: { ...start.data, decisions } } : start;
  let { snapshot, groups } = recordDecisions([first]);
  let t = 0;
  for (const choice of choices) {
    if (snapshot.status === 'done') break;
    const context = snapshot.context as WorkflowRunContext;
    t += 100;
    let event: MachineInput | null = null;
    if (choice.kind === 'cancel') event = wfrunEv.cancelRequested('random', at(t));
    else if (choice.kind === 'timeout') event = wfrunEv.timedOut(1000, at(t));
    else {
      const live = Object.entries(stepsById(context)).filter(([, s]) => ['starting', 'spawning', 'running', 'retrying'].includes(s.status));
      if (live.length === 0) continue;
      const [id, s] = live[choice.pick % live.length]!;
      switch (s.status) {
        case 'starting':
          event = wfrunEv.spawnRequested(id, s.attempt, at(t));
          break;
        case 'spawning':
          event = choice.how === 0 ? wfrunEv.spawnFailed(id, s.attempt, at(t)) : wfrunEv.spawned(id, s.attempt, at(t), { pid: 100 + choice.pick });
          break;
        case 'running':
          event =
            choice.how === 0
              ? wfrunEv.abandoned(id, s.attempt, at(t))
              : wfrunEv.exited(id, s.attempt, at(t), {
                  exitCode: choice.exit,
                  durationMs: 50 + choice.pick,
                  cancelled: choice.how === 1 && context.cancelRequested,
                  timedOut: choice.how === 2,
                  outputs: { n: String(choice.pick) },
                  // Some exits carry an agent report (the projection keeps it whatever the target).
                  ...(choice.pick % 2 === 0 ? { agent: report({ turns: choice.pick, costUsd: choice.pick / 100 }) } : {}),
                });
          break;
        default:
          event = wfrunEv.retryDue(id, s.attempt + 1, at(t));
      }
    }
    const next = recordDecisions([event], { from: snapshot, skipRefused: true });
    if (next.groups.length === 0) continue;
    groups = [...groups, ...next.groups];
    snapshot = next.snapshot;
  }
  return groups;
}

const randomSpec = fc
  .array(
    fc.record({
      needs: fc.array(fc.nat(7), { maxLength: 3 }),
      attempts: fc.integer({ min: 1, max: 3 }),
      continueOnError: fc.boolean(),
      cond: fc.constantFrom(null, 'always()', 'failure()', 'false', 'cancelled()'),
    }),
    { minLength: 1, maxLength: 6 },
  )
  .map((raw): WorkflowSpec =>
    wfSpec({
      concurrency: 2,
      steps: raw.map((r, i) =>
        wfStep(`s${i}`, {
          // Only earlier steps: a DAG.
          needs: [...new Set(r.needs.filter((n) => n < i).map((n) => `s${n}`))],
          if: r.cond,
          continueOnError: r.continueOnError,
          retries: { attempts: r.attempts, delayMs: 100, backoff: 1, maxDelayMs: null },
        }),
      ),
    }),
  );

const choiceArb: fc.Arbitrary<Choice> = fc.oneof(
  { weight: 20, arbitrary: fc.record({ kind: fc.constant('step' as const), pick: fc.nat(5), exit: fc.constantFrom(0, 0, 1), how: fc.nat(4) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'cancel' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'timeout' as const }) },
);

describe('against the machine (property)', () => {
  it.each(['recorded', 'derived'] as const)(
    '%s decisions: after every transaction the step rows agree with the machine; at the end exactly; rebuild from the log equals the live tables',
    (decisions) => {
      fc.assert(
        fc.property(randomSpec, fc.array(choiceArb, { minLength: 5, maxLength: 80 }), (spec, choices) => {
          const groups = simulate(spec, choices, decisions);
          const log = openDatabase(':memory:');
          try {
            for (const p of projections) for (const ddl of p.ddl) log.exec(ddl);
            const eventLog = new SqliteEventLog(log, { handlers: [inlineHandler()] });
            const { steps } = fold(workflowRunMachine, groups.flat());
            let version = 0;
            for (const group of groups) {
              // One append per transaction of the runner: the event and the decisions recorded with it.
              eventLog.appendSync(
                'wfrun:wfrun_1',
                group.map((event, i) => ({ type: event.type, at: event.at, data: event.data, state: stateOf(steps[version + i]!.after) })),
                { expectedVersion: version, kind: 'wfrun' },
              );
              version += group.length;
              const after = steps[version - 1]!.after;
              const machine = stepsById(after.context as WorkflowRunContext);
              const rows = log.prepare('SELECT step_id, status, attempts, skip_reason, retry_at FROM workflow_steps ORDER BY ord').all() as Row[];
              const done = after.status === 'done';
              const what = `after ${group.map((e) => e.type).join(' + ')}`;
              for (const row of rows) {
                const m = machine[row.step_id as string]!;
                if (done) expect(row.status, `${row.step_id} at the end`).toBe(m.status);
                else if (row.status === 'pending') {
                  // A recorded run's skips are in the table as soon as they are decided; a derived run's only at its end.
                  expect(decisions === 'derived' ? ['pending', 'skipped', 'starting'] : ['pending', 'starting'], `${row.step_id} ${what}`).toContain(m.status);
                } else expect(row.status, `${row.step_id} ${what}`).toBe(m.status);
                expect(row.attempts).toBe(m.status === 'starting' && row.status !== 'pending' ? m.attempt - 1 : m.status === 'starting' ? 0 : m.attempt);
                if (decisions === 'recorded') {
                  // Never a decision the table has not got: no skip pending, every retry with its due time.
                  expect(m.status, `${row.step_id} ${what}`).not.toBe('skipping');
                  expect(row.skip_reason, `${row.step_id} ${what}`).toBe(m.status === 'skipped' ? m.reason : null);
                  expect(row.retry_at, `${row.step_id} ${what}`).toBe(m.status === 'retrying' ? m.retryAt : null);
                } else expect([row.skip_reason, row.retry_at]).toEqual([null, null]);
              }
              const run = log.prepare('SELECT status, decisions FROM workflow_runs').get() as Row;
              expect(run).toEqual({ status: done ? stateOf(after) : 'running', decisions });
            }
            const verify = verifyProjections(log);
            expect(verify.tables.flatMap((t) => t.differences)).toEqual([]);
            expect(verify.ok).toBe(true);
            const dump = () =>
              Object.fromEntries(
                workflowRunsProjection.tables.map((t) => [t.name, log.prepare(`SELECT * FROM ${t.name} ORDER BY ${t.orderBy}`).all()]),
              );
            const live = dump();
            rebuildProjections(log);
            expect(dump()).toEqual(live);
          } finally {
            log.close();
          }
        }),
        { numRuns: 150 },
      );
    },
  );

  it('the spec stream and runs rebuild identically through the log', () => {
    const log = openDatabase(':memory:');
    try {
      for (const p of projections) for (const ddl of p.ddl) log.exec(ddl);
      const eventLog = new SqliteEventLog(log, { handlers: [inlineHandler()] });
      const specEvents = [workflowEv.created(), workflowEv.updated(), workflowEv.archived('done', at(5000))];
      const { steps } = fold(workflowMachine, specEvents);
      specEvents.forEach((e, i) =>
        eventLog.appendSync('workflow:wf_1', [{ ...e, state: stateOf(steps[i]!.after) }], { expectedVersion: i, kind: 'workflow' }),
      );
      // a fails: b, c and then d are skipped, each recorded after the event that decided it.
      const runEvents = recordDecisions([wfrunEv.started({}, at(100)), ...runStep('a', 110, { exitCode: 1 })]).events;
      const folded = fold(workflowRunMachine, runEvents).steps;
      runEvents.forEach((e, i) =>
        eventLog.appendSync('wfrun:wfrun_1', [{ ...e, state: stateOf(folded[i]!.after) }], { expectedVersion: i, kind: 'wfrun' }),
      );
      const verify = verifyProjections(log);
      expect(verify.ok).toBe(true);
      expect(verify.tables.filter((t) => t.table.startsWith('workflow')).map((t) => [t.table, t.liveRows])).toEqual([
        ['workflows', 1],
        ['workflow_versions', 2],
        ['workflow_runs', 1],
        ['workflow_steps', 4],
        ['workflow_step_attempts', 1],
      ]);
      // A live row changed behind the log's back is caught, by its composite key.
      log.prepare("UPDATE workflow_steps SET status = 'succeeded' WHERE step_id = 'd'").run();
      const broken = verifyProjections(log);
      expect(broken.ok).toBe(false);
      expect(broken.tables.find((t) => t.table === 'workflow_steps')!.differences).toEqual([
        'workflow_steps wfrun_id, step_id=wfrun_1/d: status is "succeeded" live, "skipped" rebuilt from the log',
      ]);
      const rebuilt = rebuildProjections(log, ['workflow_steps']);
      expect(rebuilt.projections).toEqual(['workflow_runs']);
      expect(verifyProjections(log).ok).toBe(true);
    } finally {
      log.close();
    }
  });
});
