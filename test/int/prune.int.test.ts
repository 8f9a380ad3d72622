/**
 * `loops prune` on real run folders (runNow, runWorkflow, a workflow loop) and a SimulatedClock:
 *  - the cutoff and keep-last (per loop, per workflow) select exactly the finished runs expected;
 *  - a run still running, and a finished run whose lease is live, are never pruned;
 *  - a dry run deletes and records nothing;
 *  - each removal is an event on `retention:output`, projected as `output_pruned_at` on the run rows
 *    (a workflow loop's run too), replayable, and rebuilt identically from the log;
 *  - a prune that stopped between recording and removing is finished by the next one, with no
 *    second fact; a second prune finds nothing; concurrent prunes never record a run twice.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { firstValueFrom, filter } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/events/errors.js';
import type { StoredEvent } from '../../src/events/types.js';
import { OUTPUT_RETENTION_STREAM } from '../../src/machines/retention.js';
import { parseKeepLast, parseOlderThan, planPrune, prune, type PruneOptions } from '../../src/runtime/admin/prune.js';
import { replayStream } from '../../src/runtime/admin/replay.js';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { createCommandLoop, createWorkflowLoop } from '../../src/runtime/loops/commands.js';
import { runDir } from '../../src/runtime/paths.js';
import { runStats } from '../../src/runtime/admin/stats.js';
import { explainSlot } from '../../src/runtime/admin/why.js';
import { tick } from '../../src/runtime/daemon/pass.js';
import { render as renderStats } from '../../src/cli/commands/stats.js';
import { findLoop, findRun, listRuns } from '../../src/runtime/queries/loops.js';
import { findWorkflowRun } from '../../src/runtime/queries/workflows.js';
import type { Runtime } from '../../src/runtime/runtime.js';
import { runWorkflow } from '../../src/runtime/workflows/runner.js';
import { createWorkflow } from '../../src/runtime/workflows/specs.js';
import { expectInvariants, expectLogConsistent } from '../helpers/invariants.js';
import { tempDir, useRuntime } from '../helpers/tmp.js';

const DAY = 86_400_000;
const manual = { manual: true, tz: 'UTC' } as const;

function nextEvent(runtime: Runtime, type: string): Promise<StoredEvent> {
  return firstValueFrom(runtime.log.events$.pipe(filter((e) => e.type === type)));
}

function specFile(text: string): string {
  const file = join(tempDir(), 'wf.yaml');
  writeFileSync(file, text);
  return file;
}

const retentionEvents = async (runtime: Runtime) =>
  (await runtime.log.streamInfo(OUTPUT_RETENTION_STREAM)) ? await runtime.log.readStream(OUTPUT_RETENTION_STREAM) : [];

/**
 * Day 0..3: loop `a` runs once a day (4 runs), loop `b` on days 0 and 3, workflow `flow` by hand on
 * day 1 and through the workflow loop `wf` on day 2. Now is day 3 + 1 h.
 */
async function history() {
  const clock = new SimulatedClock('2026-05-01T00:00:00.000Z');
  const runtime = await useRuntime({ clock });
  await createCommandLoop(runtime, { name: 'a', command: 'echo "a $LOOPS_RUN_ID"; echo err >&2', schedule: manual });
  await createCommandLoop(runtime, { name: 'b', command: 'echo b', schedule: manual });
  await createWorkflow(runtime, specFile('name: flow\nsteps:\n  - id: build\n    run: echo built\n  - id: test\n    needs: build\n    run: echo tested\n'));
  await createWorkflowLoop(runtime, { name: 'wf', workflow: 'flow', schedule: manual });
  const a: string[] = [];
  const b: string[] = [];
  let wfByHand = '';
  let wfLoopRun = '';
  for (let day = 0; day < 4; day++) {
    a.push((await runNow(runtime, 'a')).id);
    if (day === 0 || day === 3) b.push((await runNow(runtime, 'b')).id);
    if (day === 1) wfByHand = (await runWorkflow(runtime, 'flow')).run.id;
    if (day === 2) wfLoopRun = (await runNow(runtime, 'wf')).id;
    clock.advance(day < 3 ? DAY : 3_600_000);
  }
  const wfOfLoop = runtime.db.prepare<[string], { id: string }>('SELECT id FROM workflow_runs WHERE id <> ?').get(wfByHand)!.id;
  return { clock, runtime, a, b, wfByHand, wfLoopRun, wfOfLoop };
}

const at = (clock: SimulatedClock, msAgo: number) => new Date(clock.now() - msAgo).toISOString();

describe('prune: selection', () => {
  it('--older-than: the finished runs finished before the cutoff, loop runs and workflow runs, oldest first; a dry run changes nothing', async () => {
    const { clock, runtime, a, b, wfByHand, wfOfLoop } = await history();
    const head = await runtime.log.headPosition();
    // Finished more than 1.5 days ago: a[0], a[1], b[0] (day 0, 1) and the hand-run workflow (day 1).
    const options: PruneOptions = { cutoff: at(clock, 1.5 * DAY), keepLast: null };
    const plan = await planPrune(runtime, options, clock.now());
    expect(plan.runs.map((r) => r.id).sort()).toEqual([a[0], a[1], b[0], wfByHand].sort());
    expect(plan.runs.map((r) => r.finishedAt)).toEqual([...plan.runs.map((r) => r.finishedAt)].sort());
    expect(plan.runs.find((r) => r.id === wfByHand)).toMatchObject({ kind: 'workflow', ownerName: 'flow', loopRunId: null });
    expect(plan.runs.find((r) => r.id === a[0])).toMatchObject({ kind: 'run', ownerName: 'a', status: 'succeeded', files: 3 }); // stdout.log, stderr.log, exit-status;
    expect(plan.bytes).toBe(plan.runs.reduce((n, r) => n + r.bytes, 0));
    expect(plan.bytes).toBeGreaterThan(0);
    // Dry run: nothing removed, nothing recorded.
    for (const r of plan.runs) expect(existsSync(r.path)).toBe(true);
    expect(await runtime.log.headPosition()).toBe(head);

    const report = await prune(runtime, options);
    expect(report.runs.map((r) => r.id)).toEqual(plan.runs.map((r) => r.id));
    expect(report).toMatchObject({ dryRun: false, pruned: 4, bytes: plan.bytes, failed: [], completed: [] });
    for (const r of plan.runs) expect(existsSync(r.path)).toBe(false);
    for (const id of [a[2], a[3], b[1], wfOfLoop]) expect(existsSync(runDir(runtime.dataDir, id!))).toBe(true);

    // The facts: one event per run on retention:output, projected onto the run rows.
    const events = await retentionEvents(runtime);
    expect(events.map((e) => [e.type, (e.data as { runId?: string; wfRunId?: string }).runId ?? (e.data as { wfRunId: string }).wfRunId])).toEqual(
      plan.runs.map((r) => [r.kind === 'run' ? 'run.output_pruned' : 'wfrun.output_pruned', r.id]),
    );
    expect(events[0]!.data).toMatchObject({ cutoff: options.cutoff, keepLast: null });
    expect(events.every((e) => e.state === 'keeping')).toBe(true);
    const now = new Date(clock.now()).toISOString();
    expect(findRun(runtime.db, a[0]!).outputPrunedAt).toBe(now);
    expect(findRun(runtime.db, a[2]!).outputPrunedAt).toBeNull();
    expect(findWorkflowRun(runtime.db, wfByHand).outputPrunedAt).toBe(now);
    expect(findWorkflowRun(runtime.db, wfOfLoop).outputPrunedAt).toBeNull();
    // The retention stream replays; every invariant holds; the tables rebuild from the log.
    const replay = await replayStream(runtime.log, OUTPUT_RETENTION_STREAM);
    expect(replay.ok).toBe(true);
    expect(replay.steps.at(-1)!.stateAfter).toBe('keeping');
    expectInvariants(runtime);
    expectLogConsistent(runtime);

    // Again: nothing left to prune, nothing recorded.
    const again = await prune(runtime, options);
    expect(again).toMatchObject({ pruned: 0, bytes: 0, runs: [], completed: [] });
    expect(await retentionEvents(runtime)).toHaveLength(4);
  });

  it('--keep-last N keeps the N newest finished runs of each loop and of each workflow, whatever their age; a workflow loop\'s run is marked with its workflow run', async () => {
    const { clock, runtime, a, b, wfByHand, wfLoopRun, wfOfLoop } = await history();
    const report = await prune(runtime, { cutoff: null, keepLast: 1 });
    // a keeps a[3]; b keeps b[1]; flow keeps its newest run (the loop's, day 2).
    expect(report.runs.map((r) => r.id).sort()).toEqual([a[0], a[1], a[2], b[0], wfByHand].sort());
    expect(existsSync(runDir(runtime.dataDir, wfOfLoop))).toBe(true);
    // keep-last 0 with a cutoff a day and a half ago: what is left and older goes (nothing: a[2] went already).
    expect((await prune(runtime, { cutoff: at(clock, 1.5 * DAY), keepLast: 0 })).pruned).toBe(0);
    // Everything finished by now: the newest runs too, and the workflow loop's workflow run.
    const all = await prune(runtime, { cutoff: at(clock, 0), keepLast: null });
    expect(all.runs.map((r) => r.id).sort()).toEqual([a[3], b[1], wfOfLoop].sort());
    expect(findRun(runtime.db, wfLoopRun).outputPrunedAt).toBe(new Date(clock.now()).toISOString());
    expect(listRuns(runtime.db).every((r) => r.outputPrunedAt !== null)).toBe(true);
    expectInvariants(runtime);
    expectLogConsistent(runtime);
  });

  it('never prunes a run that is still running, nor a finished run whose lease is live', async () => {
    const { clock, runtime, a } = await history();
    await createCommandLoop(runtime, { name: 'slow', command: 'echo started; sleep 30', schedule: manual });
    const spawned = nextEvent(runtime, 'process.spawned');
    const controller = new AbortController();
    const running = runNow(runtime, 'slow', { signal: controller.signal });
    const slowRun = (await spawned).streamId.slice('run:'.length);
    expect(findRun(runtime.db, slowRun).status).toBe('running');
    // A finished run whose lease someone still holds (not released: its runner is finishing up).
    runtime.db
      .prepare('INSERT INTO leases (name, holder, token, expires_at) VALUES (?, ?, ?, ?)')
      .run(`run:${a[1]}`, 'someone', 7, new Date(clock.now() + 60_000).toISOString());

    const report = await prune(runtime, { cutoff: at(clock, 0), keepLast: null });
    const ids = report.runs.map((r) => r.id);
    expect(ids).not.toContain(slowRun);
    expect(ids).not.toContain(a[1]);
    expect(ids).toContain(a[0]);
    expect(existsSync(runDir(runtime.dataDir, slowRun))).toBe(true);
    expect(existsSync(runDir(runtime.dataDir, a[1]!))).toBe(true);

    // Once the lease has expired, the finished run goes; the running one still not.
    clock.advance(61_000);
    const later = await prune(runtime, { cutoff: at(clock, 0), keepLast: null });
    expect(later.runs.map((r) => r.id)).toEqual([a[1]]);
    controller.abort();
    expect((await running).status).toBe('cancelled');
    runtime.db.prepare('DELETE FROM leases WHERE name = ?').run(`run:${a[1]}`);
    expectInvariants(runtime);
  });

  it('finishes a prune that stopped between the record and the removal, without a second fact', async () => {
    const { clock, runtime, a } = await history();
    await prune(runtime, { cutoff: at(clock, 2.5 * DAY), keepLast: null });
    expect(await retentionEvents(runtime)).toHaveLength(2); // a[0], b[0]
    // As if the folder had not been removed (a crash right after the commit).
    const dir = runDir(runtime.dataDir, a[0]!);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'stdout.log'), 'left behind\n');
    const plan = await planPrune(runtime, { cutoff: at(clock, 2.5 * DAY), keepLast: null }, clock.now());
    expect(plan).toMatchObject({ runs: [], completed: [{ kind: 'run', id: a[0], path: dir, bytes: 12 }], bytes: 12 });
    const report = await prune(runtime, { cutoff: at(clock, 2.5 * DAY), keepLast: null });
    expect(report).toMatchObject({ pruned: 0, completed: [{ id: a[0] }], bytes: 12 });
    expect(existsSync(dir)).toBe(false);
    expect(await retentionEvents(runtime)).toHaveLength(2);
    expectInvariants(runtime);
  });

  it('two prunes at once record each run once: the one that loses the race on the stream selects again', async () => {
    const { clock, runtime, a, b, wfByHand } = await history();
    const { openRuntime } = await import('../../src/runtime/runtime.js');
    const other = await openRuntime({ dataDir: runtime.dataDir, clock, runnerId: 'other:2:runner' });
    try {
      // The other prune selects, then — just before its append — this one prunes the oldest runs.
      const append = other.log.append.bind(other.log);
      let raced = false;
      other.log.append = async (streamId, events, options) => {
        if (!raced) {
          raced = true;
          await prune(runtime, { cutoff: at(clock, 2.5 * DAY), keepLast: null });
        }
        return append(streamId, events, options);
      };
      const report = await prune(other, { cutoff: at(clock, 1.5 * DAY), keepLast: null });
      expect(raced).toBe(true);
      // What the first pruned (a[0], b[0]) is not pruned again.
      expect(report.runs.map((r) => r.id).sort()).toEqual([a[1], wfByHand].sort());
      const recorded = (await retentionEvents(runtime)).map((e) => (e.data as { runId?: string; wfRunId?: string }).runId ?? (e.data as { wfRunId: string }).wfRunId);
      expect(recorded.sort()).toEqual([a[0], a[1], b[0], wfByHand].sort());
    } finally {
      other.close();
    }
    expectInvariants(runtime);
  });
});

describe('prune: what the other commands say of a pruned run', () => {
  it('stats counts the pruned runs and says their output is gone; why tells a slot whose run\'s output was pruned', async () => {
    const T0 = Date.parse('2026-03-01T00:00:00.000Z');
    const clock = new SimulatedClock(T0);
    const runtime = await useRuntime({ clock });
    const loop = await createCommandLoop(runtime, { name: 'hourly', command: 'echo hi', schedule: { every: '1h', tz: 'UTC' } });
    for (let hour = 1; hour <= 2; hour++) {
      clock.jumpWall(T0 + hour * 3_600_000 - clock.now());
      expect((await tick(runtime)).runs.map((r) => r.status)).toEqual(['succeeded']);
    }
    const report = await prune(runtime, { cutoff: null, keepLast: 1 });
    expect(report.pruned).toBe(1);

    const stats = runStats(runtime.db, {});
    expect(stats.total).toMatchObject({ runs: 2, succeeded: 2, outputPruned: 1 });
    expect(stats.loops[0]).toMatchObject({ name: 'hourly', outputPruned: 1 });
    expect(renderStats(stats, { now: clock.now(), color: false })).toContain(
      'The output of 1 run of these was removed by loops prune; its outcome is counted above.',
    );

    const view = findLoop(runtime.db, loop.id);
    const pruned = explainSlot(runtime.db, view, T0 + 3_600_000, clock.now()).explanation;
    expect(pruned).toMatch(/^the slot 2026-03-01T01:00:00\.000Z fired as run run_\S+; the run succeeded \(decided [^)]+\) \(its output was removed by loops prune at 2026-03-01T02:00:00\.000Z\)$/);
    expect(explainSlot(runtime.db, view, T0 + 2 * 3_600_000, clock.now()).explanation).not.toContain('loops prune');
    expectInvariants(runtime, { settledAt: clock.now() });
  });
});

describe('prune: options', () => {
  const now = Date.parse('2026-05-10T12:00:00.000Z');
  it('--older-than takes a duration (0s = now) or an ISO time, never one in the future', async () => {
    expect(await parseOlderThan('30d', now)).toBe('2026-04-10T12:00:00.000Z');
    expect(await parseOlderThan('1h30m', now)).toBe('2026-05-10T10:30:00.000Z');
    expect(await parseOlderThan('0s', now)).toBe('2026-05-10T12:00:00.000Z');
    expect(await parseOlderThan('0', now)).toBe('2026-05-10T12:00:00.000Z');
    expect(await parseOlderThan('2026-05-01T00:00:00Z', now)).toBe('2026-05-01T00:00:00.000Z');
    await expect(parseOlderThan('soon', now)).rejects.toThrow(/--older-than: "soon" is neither a duration nor a time/);
    await expect(parseOlderThan('30', now)).rejects.toBeInstanceOf(UsageError);
    await expect(parseOlderThan('2026-06-01T00:00:00Z', now)).rejects.toThrow(/is in the future/);
  });

  it('--keep-last takes a whole number, 0 included', () => {
    expect(parseKeepLast('10')).toBe(10);
    expect(parseKeepLast('0')).toBe(0);
    expect(() => parseKeepLast('-1')).toThrow(/--keep-last must be a whole number of runs, got "-1"/);
    expect(() => parseKeepLast('ten')).toThrow(UsageError);
  });
});
