/**
 * `runStats` (loops stats) on a real SQLite runtime:
 *  - real runs through runNow — command loops that succeed, fail and time out, and agent loops
 *    against the fake CLIs in test/fixtures/agents (first on PATH) — summed as the runs report them
 *    (the sums agree with the runs' own RunViews; a CLI that reports no cost does not count as 0);
 *  - runs written the way a runner writes them on a SimulatedClock, for exact numbers: the --since
 *    window, still-running, cancelled and abandoned runs, medians, removed loops, the total row;
 *  - workflow loops whose agent steps report tokens and cost: real runs (the sums agree with the
 *    step attempts' own views; a workflow run started by hand belongs to no loop), exact numbers on
 *    a SimulatedClock (retries, abandoned attempts, the window on the workflow run's start), and
 *    the workflow tables rebuilt from the log — also from a database of the previous projection
 *    version, without the agent columns — give the same tables and the same stats.
 */
import { writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { EventData } from '../../src/events/catalog.js';
import { AmbiguousError, NotFoundError, UsageError } from '../../src/events/errors.js';
import { currentMachines } from '../../src/machines/registry.js';
import { DurableActor } from '../../src/runtime/actor.js';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { newId } from '../../src/runtime/ids.js';
import { changeLoopState, createAgentLoop, createCommandLoop, createWorkflowLoop } from '../../src/runtime/loops/commands.js';
import { rebuildProjections } from '../../src/runtime/admin/projections.js';
import { listRuns, type LoopView, type RunView } from '../../src/runtime/queries/loops.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import type { Runtime } from '../../src/runtime/runtime.js';
import { parseSince, runStats, type LoopStats } from '../../src/runtime/admin/stats.js';
import { openReader, staleProjections } from '../../src/runtime/store.js';
import { listWorkflowRuns, workflowRunSteps, workflowVersion } from '../../src/runtime/queries/workflows.js';
import { runWorkflow } from '../../src/runtime/workflows/runner.js';
import { createWorkflow } from '../../src/runtime/workflows/specs.js';
import { workflowRunsProjection } from '../../src/projections/workflows.js';
import { fixture } from '../helpers/fixtures.js';
import { expectLogConsistent } from '../helpers/invariants.js';
import { tempDir, useRuntime } from '../helpers/tmp.js';
import { agentReport } from '../helpers/agent-report.js';
import { decisionEffects } from '../helpers/workflow-run.js';

/** Puts the fake agent CLIs first on PATH (and sets extra variables) for the current test. */
function withEnv(vars: Record<string, string>): void {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
  onTestFinished(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });
}
const fakesFirst = () => ({ PATH: `${fixture('agents')}${delimiter}${process.env.PATH ?? ''}` });

function byName(loops: LoopStats[], name: string): LoopStats {
  const found = loops.find((l) => l.name === name);
  expect(found, `loop ${name} in the stats`).toBeDefined();
  return found!;
}

const sum = (values: Array<number | null | undefined>) =>
  values.some((v) => v !== null && v !== undefined) ? values.reduce<number>((a, v) => a + (v ?? 0), 0) : null;

function median(values: number[]): number | null {
  if (values.length === 0) return null;
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return Math.round(s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2);
}

describe('runStats over real runs', () => {
  it('sums command and agent runs as they were recorded; a CLI without a cost is not counted as $0', async () => {
    withEnv(fakesFirst());
    const runtime = await useRuntime();
    const manual = { manual: true, tz: 'UTC' };
    await createCommandLoop(runtime, { name: 'ok', command: 'echo hi', schedule: manual });
    await createCommandLoop(runtime, { name: 'bad', command: 'echo oops >&2; exit 3', schedule: manual });
    await createCommandLoop(runtime, { name: 'slow', command: 'sleep 10', schedule: manual, timeout: '300ms', killGrace: '200ms' });
    await createAgentLoop(runtime, { name: 'review', provider: 'claude', prompt: 'review the diff', schedule: manual });
    await createAgentLoop(runtime, { name: 'fix', provider: 'codex', prompt: 'fix the tests', schedule: manual, model: 'gpt-5-codex' });
    await createCommandLoop(runtime, { name: 'idle', command: 'true', schedule: manual });

    for (let i = 0; i < 3; i++) expect((await runNow(runtime, 'ok')).status).toBe('succeeded');
    expect((await runNow(runtime, 'bad')).status).toBe('failed');
    expect((await runNow(runtime, 'slow')).status).toBe('timed_out');
    expect((await runNow(runtime, 'review')).status).toBe('succeeded');
    expect((await runNow(runtime, 'review')).status).toBe('succeeded');
    expect((await runNow(runtime, 'fix')).status).toBe('succeeded');
    // A CLI that fails without JSON: an agent run with a report of nulls (no cost, no tokens).
    withEnv({ FAKE_AGENT_MODE: 'nojson' });
    expect((await runNow(runtime, 'review')).status).toBe('failed');

    const report = runStats(runtime.db);
    expect(report.since).toBeNull();
    // Every loop not removed, in name order, runs or not.
    expect(report.loops.map((l) => l.name)).toEqual(['bad', 'fix', 'idle', 'ok', 'review', 'slow']);

    const runs = listRuns(runtime.db, { limit: 1000 });
    const of = (name: string) => runs.filter((r) => r.loopName === name);
    // Each loop's numbers agree with its runs' own views.
    for (const l of report.loops) {
      const mine = of(l.name);
      expect(l.runs).toBe(mine.length);
      expect(l.totalDurationMs).toBe(sum(mine.map((r) => r.durationMs)));
      expect(l.medianDurationMs).toBe(median(mine.map((r) => r.durationMs!)));
    }
    expect(byName(report.loops, 'ok')).toMatchObject({ runs: 3, succeeded: 3, failed: 0, running: 0, successRate: 1 });
    expect(byName(report.loops, 'bad')).toMatchObject({ runs: 1, succeeded: 0, failed: 1, successRate: 0 });
    expect(byName(report.loops, 'slow')).toMatchObject({ runs: 1, timedOut: 1, successRate: 0 });
    expect(byName(report.loops, 'idle')).toMatchObject({
      runs: 0,
      successRate: null,
      totalDurationMs: null,
      medianDurationMs: null,
      agent: { runs: 0, turns: null, costUsd: null, costRuns: 0, providers: [], models: [], seen: [] },
    });
    expect(byName(report.loops, 'ok').agent).toMatchObject({ runs: 0, turns: null, tokens: { input: null }, costUsd: null });

    // The agent numbers are the sums of what each run's CLI reported.
    const agentSums = (list: RunView[]) => ({
      turns: sum(list.map((r) => r.agent?.turns)),
      tokens: {
        input: sum(list.map((r) => r.agent?.tokens.input)),
        output: sum(list.map((r) => r.agent?.tokens.output)),
        cacheRead: sum(list.map((r) => r.agent?.tokens.cacheRead)),
        cacheWrite: sum(list.map((r) => r.agent?.tokens.cacheWrite)),
      },
    });
    const review = byName(report.loops, 'review');
    const reviewRuns = of('review');
    expect(reviewRuns.filter((r) => r.agent?.costUsd !== null && r.agent?.costUsd !== undefined)).toHaveLength(2);
    expect(review).toMatchObject({ runs: 3, succeeded: 2, failed: 1, successRate: 2 / 3 });
    expect(review.agent).toMatchObject({
      runs: 3,
      ...agentSums(reviewRuns),
      costRuns: 2,
      providers: ['claude'],
      models: ['claude-sonnet-4-5-20250929'],
      // The run without JSON named no model, nor did the loop.
      seen: [
        { provider: 'claude', model: null },
        { provider: 'claude', model: 'claude-sonnet-4-5-20250929' },
      ],
    });
    expect(review.agent.costUsd).toBeCloseTo(sum(reviewRuns.map((r) => r.agent?.costUsd))!, 9);
    expect(review.agent.costUsd).toBeCloseTo(2 * 0.0421335, 9);
    expect(review.agent.turns).toBeGreaterThan(0);

    // codex reports tokens but no cost: the cost is unknown (null), not $0.
    const fix = byName(report.loops, 'fix');
    expect(fix.agent).toMatchObject({ runs: 1, ...agentSums(of('fix')), costUsd: null, costRuns: 0, providers: ['codex'] });
    expect(fix.agent.tokens.input).toBeGreaterThan(0);
    // The model the CLI reported, else the one the loop asked for.
    expect(fix.agent.models).toEqual([of('fix')[0]!.agent!.model ?? 'gpt-5-codex']);

    // The total: over all runs; the cost over the runs that had one.
    expect(report.total).toMatchObject({
      loops: 6,
      runs: 9,
      succeeded: 6,
      failed: 2,
      timedOut: 1,
      cancelled: 0,
      abandoned: 0,
      running: 0,
      successRate: 6 / 9,
      totalDurationMs: sum(runs.map((r) => r.durationMs)),
      medianDurationMs: median(runs.map((r) => r.durationMs!)),
      agent: { runs: 4, costRuns: 2, ...agentSums(runs), providers: ['claude', 'codex'] },
    });
    expect(report.total.agent.costUsd).toBeCloseTo(review.agent.costUsd!, 9);

    // One loop by name, id or id prefix.
    const one = runStats(runtime.db, { loop: 'review' });
    expect(one.loops).toHaveLength(1);
    expect(one.loops[0]).toEqual(review);
    expect(one.total).toMatchObject({ loops: 1, runs: 3, agent: { costRuns: 2 } });
    expect(runStats(runtime.db, { loop: review.loopId }).loops[0]).toEqual(review);
    expect(runStats(runtime.db, { loop: review.loopId.slice(0, 20) }).loops[0]).toEqual(review);
    expect(() => runStats(runtime.db, { loop: 'nope' })).toThrow(NotFoundError);
    expect(() => runStats(runtime.db, { loop: 'loop_' })).toThrow(AmbiguousError);
    expectLogConsistent(runtime);
  });
});

// ── Exact numbers: runs written the way a runner writes them, on a simulated clock ─────────────

const T0 = Date.parse('2026-03-01T12:00:00.000Z');
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

type Outcome =
  | { end: 'exit'; exitCode: number; durationMs: number; timedOut?: boolean; agent?: Partial<EventData<'run.agent_reported'>> }
  | { end: 'running' }
  | { end: 'abandoned'; afterMs: number }
  | { end: 'cancelled-before-start' };

const report = agentReport;

/** A run of `loop` claimed now, ended as told (the clock moves by the run's duration). */
async function recordRun(runtime: Runtime, clock: SimulatedClock, loop: LoopView, outcome: Outcome): Promise<string> {
  const runId = newId('run', clock.now());
  const actor = DurableActor.create(runtime, `run:${runId}`, 'run', currentMachines.run);
  await actor.record('run.claimed', {
    runId,
    loopId: loop.id,
    loopName: loop.name,
    slot: `manual:${runId}`,
    scheduledFor: new Date(clock.now()).toISOString(),
    attempt: 1,
    trigger: 'manual',
    target: loop.target,
    policies: loop.policies,
    runnerId: runtime.runnerId,
    leaseToken: 1,
  });
  if (outcome.end === 'cancelled-before-start') {
    await actor.record('run.cancel_requested', { reason: 'not now' });
    return runId;
  }
  await actor.record('process.spawn_requested', { command: 'x', args: [], shell: true, cwd: null, envKeys: [], timeoutAt: null });
  await actor.record('process.spawned', { pid: 4242, pgid: 4242, startTime: null, bootId: null });
  if (outcome.end === 'running') return runId;
  if (outcome.end === 'abandoned') {
    clock.advance(outcome.afterMs);
    await actor.record('run.abandoned', { reason: 'runner gone' });
    return runId;
  }
  clock.advance(outcome.durationMs);
  const exited = {
    exitCode: outcome.timedOut ? null : outcome.exitCode,
    signal: outcome.timedOut ? 'SIGTERM' : null,
    timedOut: outcome.timedOut ?? false,
    cancelled: false,
    stdout: '',
    stderr: '',
    stdoutBytes: 0,
    stderrBytes: 0,
    durationMs: outcome.durationMs,
    error: outcome.exitCode === 0 ? null : 'exited',
  };
  await actor.recordAll([
    ...(outcome.agent ? [{ type: 'run.agent_reported', data: report(outcome.agent) }] : []),
    { type: 'process.exited', data: exited },
  ]);
  return runId;
}

describe('runStats: windows and outcomes (simulated clock)', () => {
  async function setup() {
    withEnv(fakesFirst());
    const clock = new SimulatedClock(T0);
    const runtime = await useRuntime({ clock });
    const manual = { manual: true, tz: 'UTC' };
    const job = await createCommandLoop(runtime, { name: 'job', command: 'true', schedule: manual });
    const agent = await createAgentLoop(runtime, { name: 'agent', provider: 'claude', prompt: 'x', schedule: manual, model: 'claude-opus-4-1' });
    const gone = await createCommandLoop(runtime, { name: 'gone', command: 'true', schedule: manual });
    return { clock, runtime, job, agent, gone };
  }

  it('counts every outcome, takes medians of ended runs, and cuts the window at --since', async () => {
    const { clock, runtime, job, agent, gone } = await setup();
    // Day 0: an old run of `gone`, which is then removed, and two old job runs.
    await recordRun(runtime, clock, gone, { end: 'exit', exitCode: 0, durationMs: 5000 });
    await changeLoopState(runtime, 'gone', 'remove');
    await recordRun(runtime, clock, job, { end: 'exit', exitCode: 0, durationMs: 100_000 });
    await recordRun(runtime, clock, job, { end: 'exit', exitCode: 1, durationMs: 100_000 });
    clock.advance(2 * DAY);
    const cut = clock.now();
    // Day 2 on: the window.
    await recordRun(runtime, clock, job, { end: 'exit', exitCode: 0, durationMs: 100 });
    await recordRun(runtime, clock, job, { end: 'exit', exitCode: 0, durationMs: 300 });
    await recordRun(runtime, clock, job, { end: 'exit', exitCode: 2, durationMs: 200 });
    await recordRun(runtime, clock, job, { end: 'exit', exitCode: 0, durationMs: 1000, timedOut: true });
    await recordRun(runtime, clock, job, { end: 'abandoned', afterMs: 400 });
    await recordRun(runtime, clock, job, { end: 'cancelled-before-start' });
    await recordRun(runtime, clock, job, { end: 'running' });
    const full = { input: 1000, output: 200, cacheRead: 5000, cacheWrite: 300 };
    await recordRun(runtime, clock, agent, { end: 'exit', exitCode: 0, durationMs: 60_000, agent: { model: 'claude-opus-4-1', turns: 4, tokens: full, costUsd: 0.1 } });
    await recordRun(runtime, clock, agent, { end: 'exit', exitCode: 0, durationMs: 30_000, agent: { model: 'claude-opus-4-1', turns: 2, tokens: full, costUsd: 0.2 } });
    await recordRun(runtime, clock, agent, {
      end: 'exit',
      exitCode: 0,
      durationMs: 90_000,
      agent: { model: 'claude-sonnet-4-5', turns: 3, tokens: { ...full, cacheWrite: null }, costUsd: null },
    });
    await recordRun(runtime, clock, agent, { end: 'exit', exitCode: 1, durationMs: 10_000, agent: {} }); // no JSON: all null
    await recordRun(runtime, clock, agent, { end: 'running' }); // no report yet

    const all = runStats(runtime.db);
    expect(all.loops.map((l) => [l.name, l.status, l.runs])).toEqual([
      ['agent', 'active', 5],
      ['gone', 'removed', 1],
      ['job', 'active', 9],
    ]);

    const since = new Date(cut).toISOString();
    const win = runStats(runtime.db, { since });
    expect(win.since).toBe(since);
    // The removed loop has no run in the window: not listed.
    expect(win.loops.map((l) => l.name)).toEqual(['agent', 'job']);
    const job2 = byName(win.loops, 'job');
    expect(job2).toEqual({
      loopId: job.id,
      name: 'job',
      status: 'active',
      runs: 7,
      succeeded: 2,
      failed: 1,
      timedOut: 1,
      cancelled: 1,
      abandoned: 1,
      running: 1,
      outputPruned: 0,
      successRate: 2 / 6,
      // 100 + 300 + 200 + 1000 + 400 (abandoned after 400 ms) + 0 (cancelled before it started)
      totalDurationMs: 2000,
      // sorted 0, 100, 200, 300, 400, 1000 → (200 + 300) / 2
      medianDurationMs: 250,
      agent: { runs: 0, steps: 0, turns: null, tokens: { input: null, output: null, cacheRead: null, cacheWrite: null }, costUsd: null, costRuns: 0, providers: [], models: [], seen: [] },
    });
    const agent2 = byName(win.loops, 'agent');
    expect(agent2).toMatchObject({ runs: 5, succeeded: 3, failed: 1, running: 1, successRate: 3 / 4, totalDurationMs: 190_000, medianDurationMs: 45_000 });
    expect(agent2.agent).toEqual({
      runs: 5,
      steps: 0,
      turns: 9,
      tokens: { input: 3000, output: 600, cacheRead: 15000, cacheWrite: 600 },
      costUsd: 0.3, // exactly: the sum is rounded to nano-dollars (0.1 + 0.2)
      costRuns: 2,
      providers: ['claude'],
      // The running run (no report) counts the loop's model; the all-null report too.
      models: ['claude-opus-4-1', 'claude-sonnet-4-5'],
      seen: [
        { provider: 'claude', model: 'claude-opus-4-1' },
        { provider: 'claude', model: 'claude-sonnet-4-5' },
      ],
    });
    expect(win.total).toMatchObject({
      loops: 2,
      runs: 12,
      succeeded: 5,
      failed: 2,
      timedOut: 1,
      cancelled: 1,
      abandoned: 1,
      running: 2,
      successRate: 5 / 10,
      totalDurationMs: 192_000,
      // 0 100 200 300 400 1000 10000 30000 60000 90000 → (400 + 1000) / 2
      medianDurationMs: 700,
      agent: { runs: 5, turns: 9, costUsd: 0.3, costRuns: 2 },
    });

    // The boundary is inclusive; a moment later the first run in the window drops out.
    expect(runStats(runtime.db, { since: new Date(cut + 1).toISOString() }).total.runs).toBe(11);
    // A removed loop, named, is shown — even with no run in the window.
    expect(runStats(runtime.db, { loop: gone.id }).loops).toMatchObject([{ name: 'gone', status: 'removed', runs: 1, succeeded: 1 }]);
    expect(runStats(runtime.db, { loop: gone.id, since }).loops).toMatchObject([{ name: 'gone', status: 'removed', runs: 0 }]);
    expect(runStats(runtime.db, { loop: gone.id, since }).total).toMatchObject({ loops: 1, runs: 0, successRate: null });
    // A window with no runs at all: the live loops with zeros.
    const empty = runStats(runtime.db, { since: new Date(clock.now() + 1).toISOString() });
    expect(empty.loops.map((l) => [l.name, l.runs])).toEqual([
      ['agent', 0],
      ['job', 0],
    ]);
    expect(empty.total).toMatchObject({ runs: 0, successRate: null, totalDurationMs: null, medianDurationMs: null, agent: { runs: 0, costUsd: null } });
    expectLogConsistent(runtime);
  });

  it('a run started after --since counts even when it was claimed before it', async () => {
    const { clock, runtime, job } = await setup();
    const runId = newId('run', clock.now());
    const actor = DurableActor.create(runtime, `run:${runId}`, 'run', currentMachines.run);
    await actor.record('run.claimed', {
      runId,
      loopId: job.id,
      loopName: job.name,
      slot: `manual:${runId}`,
      scheduledFor: new Date(clock.now()).toISOString(),
      attempt: 1,
      trigger: 'manual',
      target: job.target,
      policies: job.policies,
      runnerId: runtime.runnerId,
      leaseToken: 1,
    });
    clock.advance(1000);
    const since = new Date(clock.now()).toISOString();
    expect(runStats(runtime.db, { since }).total.runs).toBe(0); // claimed before, not started yet
    await actor.record('process.spawn_requested', { command: 'x', args: [], shell: true, cwd: null, envKeys: [], timeoutAt: null });
    expect(runStats(runtime.db, { since }).total).toMatchObject({ runs: 1, running: 1 });
  });
});

// ── Workflow loops: agent steps ─────────────────────────────────────────────────────────────

/** A workflow spec file in a fresh temp directory. */
function specFile(text: string): string {
  const file = join(tempDir(), 'wf.yaml');
  writeFileSync(file, text);
  return file;
}

type Report = EventData<'run.agent_reported'>;

/** The workflow tables, every row in key order. */
function workflowTables(db: Runtime['db']): Record<string, unknown[]> {
  return Object.fromEntries(workflowRunsProjection.tables.map((t) => [t.name, db.prepare(`SELECT * FROM ${t.name} ORDER BY ${t.orderBy}`).all()]));
}

/**
 * Dropping the workflow tables and rebuilding them from the log gives the same rows and the same
 * stats; so does opening a database whose tables were built by the previous projection version
 * (no agent columns): openReader notices the version and rebuilds.
 */
async function expectWorkflowTablesRebuild(runtime: Runtime): Promise<void> {
  const before = workflowTables(runtime.db);
  const stats = runStats(runtime.db);
  expect(before.workflow_step_attempts!.some((r) => (r as { agent: string | null }).agent !== null)).toBe(true);
  runtime.db.exec('DROP TABLE workflow_step_attempts; DROP TABLE workflow_steps; DROP TABLE workflow_runs');
  expect(rebuildProjections(runtime.db, ['workflow_runs']).projections).toEqual(['workflow_runs']);
  expect(workflowTables(runtime.db)).toEqual(before);
  expect(runStats(runtime.db)).toEqual(stats);

  // The v1 shape: no agent, provider or model columns, no loop index; recorded as version 1.
  runtime.db.exec(`
    DROP INDEX workflow_runs_loop;
    ALTER TABLE workflow_step_attempts DROP COLUMN agent;
    ALTER TABLE workflow_steps DROP COLUMN agent;
    ALTER TABLE workflow_steps DROP COLUMN provider;
    ALTER TABLE workflow_steps DROP COLUMN model;
    UPDATE projections SET version = 1 WHERE name = 'workflow_runs';`);
  expect(staleProjections(runtime.db)).toEqual(['workflow_runs']);
  expect(() => runStats(runtime.db)).toThrow(/no such column/);
  const reader = await openReader(runtime.dataDir);
  try {
    expect(staleProjections(reader.db)).toEqual([]);
    expect(workflowTables(reader.db)).toEqual(before);
    expect(runStats(reader.db)).toEqual(stats);
  } finally {
    reader.close();
  }
}

describe('runStats: workflow loops with agent steps (real runs)', () => {
  it('a workflow loop sums the reports of its agent step attempts; its runs stay runs; a workflow run by hand counts nowhere', async () => {
    withEnv(fakesFirst());
    const runtime = await useRuntime();
    const manual = { manual: true, tz: 'UTC' };
    await createWorkflow(
      runtime,
      specFile(`name: review-flow
steps:
  - id: build
    run: echo built
  - id: review
    needs: build
    agent: { provider: claude, prompt: review the build }
  - id: fix
    needs: build
    agent: { provider: codex, prompt: fix the build, model: gpt-5-codex }
`),
    );
    await createWorkflowLoop(runtime, { name: 'flow', workflow: 'review-flow', schedule: manual });
    await createAgentLoop(runtime, { name: 'solo', provider: 'claude', prompt: 'x', schedule: manual });
    await createCommandLoop(runtime, { name: 'plain', command: 'true', schedule: manual });

    expect((await runNow(runtime, 'flow')).status).toBe('succeeded');
    expect((await runNow(runtime, 'flow')).status).toBe('succeeded');
    expect((await runNow(runtime, 'solo')).status).toBe('succeeded');
    expect((await runNow(runtime, 'plain')).status).toBe('succeeded');
    // By hand, outside any loop: not in any loop's stats.
    expect((await runWorkflow(runtime, 'review-flow')).run.status).toBe('succeeded');
    // Both CLIs fail without JSON: two more ended agent attempts, with reports of nulls.
    withEnv({ FAKE_AGENT_MODE: 'nojson' });
    expect((await runNow(runtime, 'flow')).status).toBe('failed');

    const report = runStats(runtime.db);
    const flow = byName(report.loops, 'flow');
    // The loop's runs are its runs: one per workflow run, not one per step.
    expect(flow).toMatchObject({ runs: 3, succeeded: 2, failed: 1, successRate: 2 / 3 });

    // The oracle: the step attempts of the loop's workflow runs, as the workflow views show them.
    const loopRuns = listWorkflowRuns(runtime.db, { limit: 100 }).filter((r) => r.loopId === flow.loopId);
    expect(loopRuns).toHaveLength(3);
    const attempts = loopRuns.flatMap((r) => workflowRunSteps(runtime.db, r.id).filter((s) => s.targetType === 'agent').flatMap((s) => s.attempts));
    expect(attempts).toHaveLength(6);
    const reports = attempts.map((a) => a.agent);
    expect(reports.every((r) => r !== null)).toBe(true);
    const sums = (list: Array<Report | null>) => ({
      turns: sum(list.map((r) => r?.turns)),
      tokens: {
        input: sum(list.map((r) => r?.tokens.input)),
        output: sum(list.map((r) => r?.tokens.output)),
        cacheRead: sum(list.map((r) => r?.tokens.cacheRead)),
        cacheWrite: sum(list.map((r) => r?.tokens.cacheWrite)),
      },
    });
    const codexModel = reports.find((r) => r?.provider === 'codex' && r.model !== null)?.model ?? 'gpt-5-codex';
    expect(flow.agent).toMatchObject({
      runs: 0,
      steps: 6,
      ...sums(reports),
      // Only the claude step reports a cost, and not without JSON.
      costRuns: 2,
      providers: ['claude', 'codex'],
    });
    expect(flow.agent.tokens.input).toBeGreaterThan(0);
    expect(flow.agent.costUsd).toBeCloseTo(2 * 0.0421335, 9);
    // The model the CLI reported, else the one the step asked for (none, for the claude step).
    expect(flow.agent.seen).toEqual(
      [
        { provider: 'claude', model: null },
        { provider: 'claude', model: 'claude-sonnet-4-5-20250929' },
        ...[...new Set([codexModel, 'gpt-5-codex'])].sort().map((model) => ({ provider: 'codex', model })),
      ].sort((a, b) => a.provider.localeCompare(b.provider) || (a.model ?? '').localeCompare(b.model ?? '')),
    );

    const solo = byName(report.loops, 'solo');
    expect(solo.agent).toMatchObject({ runs: 1, steps: 0, costRuns: 1 });
    expect(byName(report.loops, 'plain').agent).toMatchObject({ runs: 0, steps: 0, turns: null, costUsd: null });

    // The total adds the agent runs and the agent step attempts (the run by hand is not in it).
    const soloRuns = listRuns(runtime.db, { limit: 100 }).filter((r) => r.loopName === 'solo');
    expect(report.total).toMatchObject({
      loops: 3,
      runs: 5,
      agent: { runs: 1, steps: 6, costRuns: 3, ...sums([...reports, ...soloRuns.map((r) => r.agent)]), providers: ['claude', 'codex'] },
    });
    expect(report.total.agent.costUsd).toBeCloseTo(3 * 0.0421335, 9);

    // One loop: the same numbers.
    const one = runStats(runtime.db, { loop: 'flow' });
    expect(one.loops).toEqual([flow]);
    expect(one.total).toMatchObject({ loops: 1, runs: 3, agent: { runs: 0, steps: 6, costRuns: 2 } });

    expectLogConsistent(runtime);
    await expectWorkflowTablesRebuild(runtime);
  });
});

/**
 * A workflow run of `loop` written the way its runner writes it (wfrun stream only), the clock
 * moving as it goes: `build` (a command) runs first, then each attempt of `review` (an agent step)
 * as told — `null` when it is still running.
 */
async function recordWorkflowRun(
  runtime: Runtime,
  clock: SimulatedClock,
  pinned: { workflowId: string; workflowName: string; version: number; spec: EventData<'wfrun.started'>['spec'] },
  loopId: string | null,
  review: Array<{ report: Report | null; exitCode: number } | 'abandoned' | null>,
): Promise<string> {
  const wfRunId = newId('wfrun', clock.now());
  // The runner records each retry decision with the attempt's end (the intents are recorded below).
  const actor = DurableActor.create(runtime, `wfrun:${wfRunId}`, 'wfrun', currentMachines.workflowRun, decisionEffects);
  await actor.record('wfrun.started', {
    wfRunId,
    ...pinned,
    inputs: {},
    trigger: loopId ? 'schedule' : 'manual',
    loopId,
    slot: loopId ? new Date(clock.now()).toISOString() : null,
    attempt: 1,
    idempotencyKey: `k:${wfRunId}`,
    runnerId: runtime.runnerId,
    leaseToken: 1,
    decisions: 'recorded',
  });
  const attempt = async (stepId: string, n: number, end: { report: Report | null; exitCode: number } | 'abandoned' | null) => {
    if (n > 1) await actor.record('step.retry_due', { stepId, attempt: n });
    await actor.record('step.spawn_requested', { stepId, attempt: n, command: 'x', args: [], shell: false, cwd: null, envKeys: [], timeoutAt: null });
    await actor.record('step.spawned', { stepId, attempt: n, pid: 4242, pgid: 4242, startTime: null, bootId: null });
    clock.advance(60_000);
    if (end === null) return;
    if (end === 'abandoned') {
      await actor.record('step.abandoned', { stepId, attempt: n, reason: 'runner gone' });
      return;
    }
    await actor.record('step.exited', {
      stepId,
      attempt: n,
      exitCode: end.exitCode,
      signal: null,
      timedOut: false,
      cancelled: false,
      stdout: '',
      stderr: '',
      stdoutBytes: 0,
      stderrBytes: 0,
      durationMs: 60_000,
      error: end.exitCode === 0 ? null : `exited with code ${end.exitCode}`,
      outputs: {},
      ...(end.report ? { agent: end.report } : {}),
    });
  };
  await attempt('build', 1, { report: null, exitCode: 0 });
  for (const [i, end] of review.entries()) await attempt('review', i + 1, end);
  return wfRunId;
}

describe('runStats: workflow loops with agent steps (simulated clock)', () => {
  it('counts every ended agent attempt (retries, abandoned, no JSON) in the window of its workflow run\'s start', async () => {
    withEnv(fakesFirst());
    const clock = new SimulatedClock(T0);
    const runtime = await useRuntime({ clock });
    const { workflow } = await createWorkflow(
      runtime,
      specFile(`name: reviewed
steps:
  - id: build
    run: make
  - id: review
    needs: build
    retries: 2
    agent: { provider: claude, model: claude-opus-4-1, prompt: review }
`),
    );
    const pinned = { workflowId: workflow.id, workflowName: workflow.name, version: 1, spec: workflowVersion(runtime.db, workflow.id, 1).spec };
    const loop = await createWorkflowLoop(runtime, { name: 'reviewed', workflow: 'reviewed', schedule: { manual: true, tz: 'UTC' } });
    const full = { input: 1000, output: 200, cacheRead: 5000, cacheWrite: 300 };

    // Day 0: a failed attempt and its retry — both reported, both count.
    await recordWorkflowRun(runtime, clock, pinned, loop.id, [
      { report: report({ model: 'claude-opus-4-1', turns: 4, tokens: full, costUsd: 0.1 }), exitCode: 1 },
      { report: report({ model: 'claude-sonnet-4-5', turns: 2, tokens: full, costUsd: 0.2 }), exitCode: 0 },
    ]);
    clock.advance(2 * DAY);
    // Started a moment before the window, its agent attempt (a minute later) inside it: out of the window with its run.
    const early = clock.now();
    await recordWorkflowRun(runtime, clock, pinned, loop.id, [{ report: report({ turns: 1, tokens: full, costUsd: 0.4 }), exitCode: 0 }]);
    const cut = early + 1;
    // In the window: an abandoned attempt (no report), then one whose CLI printed no JSON (all null).
    await recordWorkflowRun(runtime, clock, pinned, loop.id, ['abandoned', { report: report({}), exitCode: 1 }]);
    // Still running: not counted. By hand (no loop): not counted.
    await recordWorkflowRun(runtime, clock, pinned, loop.id, [null]);
    await recordWorkflowRun(runtime, clock, pinned, null, [{ report: report({ turns: 9, tokens: full, costUsd: 1 }), exitCode: 0 }]);

    const all = runStats(runtime.db);
    expect(all.loops.map((l) => l.name)).toEqual(['reviewed']);
    expect(all.loops[0]!.agent).toEqual({
      runs: 0,
      steps: 5,
      turns: 7,
      tokens: { input: 3000, output: 600, cacheRead: 15000, cacheWrite: 900 },
      costUsd: 0.7,
      costRuns: 3,
      providers: ['claude'],
      // The model the CLI reported, else the step's (the abandoned attempt, the all-null report, the third run).
      models: ['claude-opus-4-1', 'claude-sonnet-4-5'],
      seen: [
        { provider: 'claude', model: 'claude-opus-4-1' },
        { provider: 'claude', model: 'claude-sonnet-4-5' },
      ],
    });
    // No loop runs were written here: the loop's run counts are its own (loop_runs), untouched.
    expect(all.total).toMatchObject({ runs: 0, agent: { runs: 0, steps: 5, costRuns: 3, costUsd: 0.7 } });

    const win = runStats(runtime.db, { since: new Date(cut).toISOString() });
    expect(win.loops[0]!.agent).toEqual({
      runs: 0,
      steps: 2,
      turns: null,
      tokens: { input: null, output: null, cacheRead: null, cacheWrite: null },
      costUsd: null,
      costRuns: 0,
      providers: ['claude'],
      models: ['claude-opus-4-1'],
      seen: [{ provider: 'claude', model: 'claude-opus-4-1' }],
    });
    // From that run's start on (the boundary is inclusive), it is in.
    expect(runStats(runtime.db, { since: new Date(early).toISOString() }).total.agent).toMatchObject({ steps: 3, costUsd: 0.4, costRuns: 1, turns: 1 });
    expect(runStats(runtime.db, { loop: loop.id, since: new Date(cut).toISOString() }).loops).toEqual(win.loops);

    expectLogConsistent(runtime);
    await expectWorkflowTablesRebuild(runtime);
  });
});

describe('parseSince', () => {
  const now = Date.parse('2026-05-08T10:00:00.000Z');
  it('takes a duration as that long ago, and an ISO time', async () => {
    expect(await parseSince('7d', now)).toBe('2026-05-01T10:00:00.000Z');
    expect(await parseSince('24h', now)).toBe('2026-05-07T10:00:00.000Z');
    expect(await parseSince('1h30m', now)).toBe('2026-05-08T08:30:00.000Z');
    expect(await parseSince('2026-05-01T07:00Z', now)).toBe('2026-05-01T07:00:00.000Z');
    expect(await parseSince('2026-05-01T09:00+02:00', now)).toBe('2026-05-01T07:00:00.000Z');
    expect(await parseSince('2026-05-08T10:00:00.000Z', now)).toBe('2026-05-08T10:00:00.000Z');
    // Without an offset: the system time zone (like --at).
    const local = await parseSince('2026-05-01', now);
    expect(Math.abs(Date.parse(local) - Date.parse('2026-05-01T00:00:00Z'))).toBeLessThanOrEqual(14 * HOUR);
  });

  it('refuses what is neither, an impossible date, and the future', async () => {
    await expect(parseSince('bogus', now)).rejects.toThrow(UsageError);
    await expect(parseSince('bogus', now)).rejects.toThrow(/--since: "bogus" is neither a time nor a duration/);
    await expect(parseSince('7', now)).rejects.toThrow(/neither a time nor a duration/);
    await expect(parseSince('', now)).rejects.toThrow(UsageError);
    await expect(parseSince('2026-02-31', now)).rejects.toThrow(/--since: "2026-02-31" is not a valid date and time/);
    await expect(parseSince('2026-05-09T00:00Z', now)).rejects.toThrow(/--since: 2026-05-09T00:00:00.000Z is in the future/);
    await expect(parseSince('100000w', now)).rejects.toThrow(/too far back/);
  });
});

describe('stats formatting (for people)', () => {
  it('costs in dollars to a hundredth of a cent, tokens with separators, rates that never round to 100% or 0%', async () => {
    const { num, percent, usd } = await import('../../src/cli/commands/stats.js');
    expect(usd(0.0421335)).toBe('$0.0421');
    expect(usd(0)).toBe('$0.0000');
    expect(usd(1234.5)).toBe('$1,234.5000');
    expect(usd(0.00001)).toBe('<$0.0001');
    expect(num(1234567)).toBe('1,234,567');
    expect(num(null)).toBe('-');
    expect(percent(1)).toBe('100%');
    expect(percent(0.75)).toBe('75%');
    expect(percent(2 / 3)).toBe('66.7%');
    expect(percent(0.9996)).toBe('99.9%');
    expect(percent(0.0001)).toBe('0.1%');
    expect(percent(0)).toBe('0%');
  });
});
