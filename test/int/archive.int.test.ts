/**
 * `loops prune --archive` on real runs and a SimulatedClock:
 *  - it selects finished loop runs like the output prune (cutoff, keep-last, never a running run);
 *  - a dry run writes nothing;
 *  - the archive file (0600, its sha256 recorded) holds each stream's events; each stream keeps one
 *    `stream.archived` tombstone at toVersion + 1, and every table reads as before (run rows, run
 *    counts, last runs) — live and after a rebuild from the log alone;
 *  - the invariants hold, every stream replays, and `replayArchived` replays the moved history from
 *    the file, refusing a changed file;
 *  - nothing archived is ever run again (the run queue, a later tick), and a second archive finds nothing;
 *  - the log format goes to 2 only when something is archived.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DeterminismError, NotFoundError } from '../../src/events/errors.js';
import { archive, planArchive } from '../../src/runtime/admin/archive.js';
import type { PruneOptions } from '../../src/runtime/admin/prune.js';
import { replayArchived, replayStream } from '../../src/runtime/admin/replay.js';
import { DurableActor } from '../../src/runtime/actor.js';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { createCommandLoop } from '../../src/runtime/loops/commands.js';
import { tick } from '../../src/runtime/daemon/pass.js';
import { findLoop, listRuns } from '../../src/runtime/queries/loops.js';
import { explainSlot } from '../../src/runtime/admin/why.js';
import { findWorkflow, listWorkflowRuns, workflowRunSteps } from '../../src/runtime/queries/workflows.js';
import { skipReasons } from '../../src/runtime/workflows/explain.js';
import { runWorkflow } from '../../src/runtime/workflows/runner.js';
import { createWorkflow } from '../../src/runtime/workflows/specs.js';
import { createWorkflowLoop } from '../../src/runtime/loops/commands.js';
import { openTestRuntime, tempDir } from '../helpers/tmp.js';
import Database from 'better-sqlite3';
import { expectInvariants, expectLogConsistent } from '../helpers/invariants.js';
import { useRuntime } from '../helpers/tmp.js';

const DAY = 86_400_000;
const manual = { manual: true, tz: 'UTC' } as const;

/**
 * Loop `a` runs by hand once a day on days 0..3, loop `b` (failing) on days 0 and 3; loop `c`
 * (scheduled daily, failing, 2 attempts a minute apart) runs through `tick` on days 1..3 — its
 * slots and retries pass through the run queue. Now is day 3 + 1 h.
 */
async function history() {
  const clock = new SimulatedClock('2026-05-01T00:00:00.000Z');
  const runtime = await useRuntime({ clock });
  await createCommandLoop(runtime, { name: 'a', command: 'echo "a $LOOPS_RUN_ID"', schedule: manual });
  await createCommandLoop(runtime, { name: 'b', command: 'echo b; exit 3', schedule: manual });
  await createCommandLoop(runtime, { name: 'c', command: 'exit 1', schedule: { every: '1d', tz: 'UTC' }, attempts: 2, retryDelay: '1m' });
  const a: string[] = [];
  const b: string[] = [];
  const c: string[] = [];
  for (let day = 0; day < 4; day++) {
    a.push((await runNow(runtime, 'a')).id);
    if (day === 0 || day === 3) b.push((await runNow(runtime, 'b')).id);
    if (day > 0) {
      c.push(...(await tick(runtime)).runs.map((r) => r.id));
      clock.advance(120_000);
      c.push(...(await tick(runtime)).runs.map((r) => r.id));
    }
    clock.advance(day < 3 ? DAY - (day > 0 ? 120_000 : 0) : 3_600_000);
  }
  expect(c).toHaveLength(6);
  return { clock, runtime, a, b, c };
}

const cutoff = (clock: SimulatedClock, msAgo: number): PruneOptions => ({ cutoff: new Date(clock.now() - msAgo).toISOString(), keepLast: null });
const eventCount = (runtime: { db: import('../../src/events/db.js').Db }) => (runtime.db.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number }).n;
const runRows = (runtime: { db: import('../../src/events/db.js').Db }) =>
  runtime.db.prepare('SELECT * FROM loop_runs ORDER BY claimed_position').all() as Array<Record<string, unknown>>;

describe('archive: selection and dry run', () => {
  it('selects finished runs before the cutoff beyond keep-last, and a dry run writes nothing', async () => {
    const { clock, runtime, a, b, c } = await history();
    // Finished more than 2 days ago: a[0], a[1], b[0], and c's two attempts of day 1.
    let plan = await planArchive(runtime, cutoff(clock, 2 * DAY));
    expect(plan.streams.map((s) => s.runId).sort()).toEqual([a[0], a[1], b[0], c[0], c[1]].sort());
    expect(plan.events).toBeGreaterThan(5 * 3);
    // keep-last 3 of each loop, any age: a[0], c[0..2] (b has 2 runs).
    plan = await planArchive(runtime, { cutoff: null, keepLast: 3 });
    expect(plan.streams.map((s) => s.runId).sort()).toEqual([a[0], c[0], c[1], c[2]].sort());
    const before = eventCount(runtime);
    expect(existsSync(join(runtime.dataDir, 'archive'))).toBe(false);
    expect(eventCount(runtime)).toBe(before);
    expect(runtime.db.pragma('user_version', { simple: true })).toBe(1);
  });
});

describe('archive: the file, the tombstones, the tables', () => {
  it('moves the history to a 0600 file, leaves one tombstone per stream, and every table reads as before', async () => {
    const { clock, runtime, a, b, c } = await history();
    const rowsBefore = runRows(runtime);
    const loopA = findLoop(runtime.db, 'a');
    const loopB = findLoop(runtime.db, 'b');
    const loopC = findLoop(runtime.db, 'c');
    const runsBefore = listRuns(runtime.db, { limit: 100 });
    const eventsBefore = eventCount(runtime);

    const report = await archive(runtime, cutoff(clock, 2 * DAY));
    expect(report.skipped).toEqual([]);
    expect(report.streams.map((s) => s.runId).sort()).toEqual([a[0], a[1], b[0], c[0], c[1]].sort());
    expect(report.file).toMatch(/^archive\/runs-\d{8}T\d{6}Z-[0-9a-z]{12}\.jsonl$/);
    const path = join(runtime.dataDir, report.file!);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(runtime.dataDir, 'archive')).mode & 0o777).toBe(0o700);
    const lines = readFileSync(path, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, any>);
    expect(lines[0]).toEqual({ loopsArchive: 1, createdAt: new Date(clock.now()).toISOString(), streams: 5, events: report.events });
    expect(lines.filter((l) => l.event).length).toBe(report.events);
    expect(report.bytes).toBe(statSync(path).size);

    // The log: the moved events are gone, one tombstone per stream took their place.
    expect(eventCount(runtime)).toBe(eventsBefore - report.events + 5);
    for (const s of report.streams) {
      const events = await runtime.log.readStream(s.streamId);
      expect(events.map((e) => e.type)).toEqual(['stream.archived']);
      expect(events[0]!.version).toBe(s.events + 1);
      expect(events[0]!.data).toMatchObject({ file: report.file, sha256: report.sha256, fromVersion: 1, toVersion: s.events, events: s.events });
      expect((await runtime.log.streamInfo(s.streamId))!.version).toBe(s.events + 1);
    }
    expect(runtime.db.pragma('user_version', { simple: true })).toBe(2);

    // The tables: the same rows — the archived ones marked, their output tails left to the archive
    // file (their sizes stay) — the same counts and last runs.
    const rowsAfter = runRows(runtime);
    const archived = new Set(report.streams.map((s) => s.runId));
    const slim = (row: Record<string, unknown>) => (archived.has(row.id as string) ? { ...row, stdout: '', stderr: '' } : row);
    expect(rowsAfter.map(({ archived_at, ...row }) => row)).toEqual(rowsBefore.map(({ archived_at, ...row }) => slim(row)));
    expect(rowsBefore.filter((r) => archived.has(r.id as string)).some((r) => r.stdout !== '')).toBe(true);
    for (const row of rowsAfter) expect(row.archived_at !== null).toBe(archived.has(row.id as string));
    expect(findLoop(runtime.db, 'a')).toEqual(loopA);
    expect(findLoop(runtime.db, 'b')).toEqual(loopB);
    expect(findLoop(runtime.db, 'c')).toEqual(loopC);
    expect(listRuns(runtime.db, { limit: 100 }).map(({ archivedAt, ...run }) => [run, archivedAt !== null])).toEqual(
      runsBefore.map(({ archivedAt: _a, ...run }) => [archived.has(run.id) ? { ...run, stdout: '', stderr: '' } : run, archived.has(run.id)]),
    );

    // `why` tells the story of an archived run's slot, and where its events went.
    const why = explainSlot(runtime.db, findLoop(runtime.db, 'c'), Date.parse('2026-05-02T00:00:00.000Z'), clock.now());
    expect(why.explanation).toMatch(/^the slot 2026-05-02T00:00:00\.000Z fired as run run_\S+; the run failed .*its events were archived by loops prune --archive at /);
    expect(why.explanation).toMatch(/retried — .*ran as run_\S+ and failed \(its events were archived by loops prune --archive at /);

    // Live and rebuilt from the log alone (the deleted events are gone): identical.
    expectInvariants(runtime);
    expectLogConsistent(runtime);

    // The archived stream loads to its final state; a replay says it starts from the archive.
    const actor = await DurableActor.load(runtime, `run:${a[0]}`);
    expect(actor.snapshot.status).toBe('done');
    expect(actor.state).toBe('succeeded');
    const replay = await replayStream(runtime.log, `run:${a[0]}`);
    expect(replay.ok).toBe(true);
    expect(replay.steps.map((s) => s.type)).toEqual(['stream.archived']);
  });

  it('replays the archived history from the file, and refuses a changed file', async () => {
    const { clock, runtime, a } = await history();
    const whole = await replayStream(runtime.log, `run:${a[0]}`);
    const report = await archive(runtime, cutoff(clock, 2 * DAY));
    const again = await replayArchived(runtime.log, runtime.dataDir, `run:${a[0]}`);
    expect(again.ok).toBe(true);
    // The history as it was, then the tombstone (checked against the state the history folds to).
    expect(again.steps.slice(0, -1).map(({ position: _p, ...s }) => s)).toEqual(whole.steps.map(({ position: _p, ...s }) => s));
    expect(again.steps.at(-1)).toMatchObject({ type: 'stream.archived', accepted: true, matches: true, stateBefore: 'succeeded', stateAfter: 'succeeded' });

    await expect(replayArchived(runtime.log, runtime.dataDir, `run:${a[3]}`)).rejects.toThrow(NotFoundError);
    const path = join(runtime.dataDir, report.file!);
    writeFileSync(path, readFileSync(path, 'utf8').replace('"succeeded"', '"failed"'));
    await expect(replayArchived(runtime.log, runtime.dataDir, `run:${a[0]}`)).rejects.toThrow(DeterminismError);
    await expect(replayArchived(runtime.log, runtime.dataDir, `run:${a[0]}`, join(runtime.dataDir, 'nowhere.jsonl'))).rejects.toThrow(/cannot read the archive/);
  });
});

describe('archive: safety', () => {
  it('never archives a running run, never runs an archived one again, and a second archive finds nothing', async () => {
    const { clock, runtime, a } = await history();
    const report = await archive(runtime, { cutoff: null, keepLast: 0 });
    expect(report.streams.length).toBe(12);
    expect(readdirSync(join(runtime.dataDir, 'archive')).length).toBe(1);
    // Nothing left, so nothing written.
    const second = await archive(runtime, { cutoff: null, keepLast: 0 });
    expect(second).toMatchObject({ file: null, streams: [], events: 0 });
    expect(readdirSync(join(runtime.dataDir, 'archive')).length).toBe(1);
    // A tick finds nothing to claim: no archived run is queued again.
    expect(runtime.db.prepare('SELECT COUNT(*) AS n FROM run_queue').get()).toEqual({ n: 0 });
    const runs = runRows(runtime).length;
    await tick(runtime);
    expect(runRows(runtime).length).toBe(runs);
    // The next day, only c's new slot runs (attempt 1 of a slot no archived run had).
    clock.advance(DAY);
    const next = await tick(runtime);
    expect(next.runs.map((r) => [r.loopName, r.attempt])).toEqual([['c', 1]]);
    expect(runRows(runtime).filter((r) => r.slot === next.runs[0]!.slot)).toHaveLength(1);
    // The loop still counts every run, and runs on.
    expect(findLoop(runtime.db, 'a').runCount).toBe(4);
    const byHand = await runNow(runtime, 'a');
    expect(findLoop(runtime.db, 'a')).toMatchObject({ runCount: 5, lastRun: { id: byHand.id, status: 'succeeded' } });
    expect(a).toHaveLength(4);
    expectInvariants(runtime);
    expectLogConsistent(runtime);
  });
});

describe('archive: workflow runs', () => {
  it('moves a workflow run\'s stream (steps, skips, attempts) and its loop run\'s; the workflow, its runs and steps read as before', async () => {
    const clock = new SimulatedClock('2026-05-01T00:00:00.000Z');
    const runtime = await useRuntime({ clock });
    const file = join(tempDir(), 'flow.yaml');
    writeFileSync(
      file,
      'name: flow\nsteps:\n  - id: build\n    run: echo built\n  - id: test\n    needs: build\n    run: exit 1\n  - id: ship\n    needs: test\n    run: echo shipped\n',
    );
    await createWorkflow(runtime, file);
    await createWorkflowLoop(runtime, { name: 'wf', workflow: 'flow', schedule: manual });
    const byHand = (await runWorkflow(runtime, 'flow')).run.id;
    clock.advance(DAY);
    const loopRun = (await runNow(runtime, 'wf')).id;
    clock.advance(DAY);
    const last = (await runWorkflow(runtime, 'flow')).run.id;
    const ofLoop = listWorkflowRuns(runtime.db, { limit: 10 }).find((r) => r.id !== byHand && r.id !== last)!.id;

    const workflowBefore = findWorkflow(runtime.db, 'flow');
    const runsBefore = listWorkflowRuns(runtime.db, { limit: 10 });
    const stepsBefore = workflowRunSteps(runtime.db, byHand);
    expect(skipReasons(runtime.db, byHand)).toEqual({ ship: expect.stringContaining('test') });

    const report = await archive(runtime, { cutoff: null, keepLast: 1 });
    expect(report.skipped).toEqual([]);
    expect(report.streams.map((s) => [s.kind, s.streamId]).sort()).toEqual(
      [
        ['workflow', `wfrun:${byHand}`],
        ['workflow', `wfrun:${ofLoop}`],
      ].sort(),
    );
    // keep-last 1 of loop `wf` keeps its only run; with keep-last 0 it goes too.
    expect((await archive(runtime, { cutoff: null, keepLast: 0 })).streams.map((s) => s.streamId).sort()).toEqual([`run:${loopRun}`, `wfrun:${last}`].sort());

    for (const id of [byHand, ofLoop, last]) expect((await runtime.log.readStream(`wfrun:${id}`)).map((e) => e.type)).toEqual(['stream.archived']);
    expect(findWorkflow(runtime.db, 'flow')).toEqual(workflowBefore);
    expect(listWorkflowRuns(runtime.db, { limit: 10 }).map(({ archivedAt, ...r }) => [r, archivedAt !== null])).toEqual(
      runsBefore.map(({ archivedAt: _a, ...r }) => [r, true]),
    );
    expect(workflowRunSteps(runtime.db, byHand)).toEqual(stepsBefore.map((s) => ({ ...s, stdout: '', stderr: '' })));
    expect(stepsBefore.some((s) => s.stdout !== '')).toBe(true);
    expect(skipReasons(runtime.db, byHand)).toEqual({ ship: expect.stringContaining('test') });
    expectInvariants(runtime);
    expectLogConsistent(runtime);
    const again = await replayArchived(runtime.log, runtime.dataDir, `wfrun:${byHand}`);
    expect(again.ok).toBe(true);
    expect(again.steps.length).toBeGreaterThan(5);
  });
});

describe('archive: the space the events held', () => {
  /** A loop whose runs print 200 KB each (their tails are recorded with their exits and rows), run 6 times. */
  async function chatty(runtime: Awaited<ReturnType<typeof openTestRuntime>>) {
    await createCommandLoop(runtime, { name: 'chatty', command: 'head -c 200000 /dev/zero | tr "\\0" x', schedule: manual });
    for (let i = 0; i < 6; i++) await runNow(runtime, 'chatty');
  }
  const fileSize = (runtime: { db: import('../../src/events/db.js').Db; dataDir: string }) => {
    runtime.db.pragma('wal_checkpoint(TRUNCATE)');
    return statSync(join(runtime.dataDir, 'loops.db')).size;
  };

  it('a database created by this loops gives the pages back to the disk as the archive ends', async () => {
    const runtime = await useRuntime({ clock: new SimulatedClock('2026-05-01T00:00:00.000Z') });
    expect(runtime.db.pragma('auto_vacuum', { simple: true })).toBe(2);
    await chatty(runtime);
    const before = fileSize(runtime);
    const report = await archive(runtime, { cutoff: null, keepLast: 1 });
    expect(report.space).toMatchObject({ incremental: true, freeBytes: 0 });
    expect(report.space!.freedBytes).toBeGreaterThan(5 * 64 * 1024);
    expect(fileSize(runtime)).toBeLessThan(before - 5 * 64 * 1024);
    expectLogConsistent(runtime);
  });

  it('an older database only reuses them, until one full vacuum switches it over', async () => {
    const root = tempDir();
    // A loops.db as an older loops created it: without incremental auto-vacuum.
    mkdirSync(join(root, 'data'), { recursive: true, mode: 0o700 });
    const old = new Database(join(root, 'data', 'loops.db'));
    old.pragma('auto_vacuum = NONE');
    old.exec('CREATE TABLE t (x); DROP TABLE t');
    old.close();
    const runtime = await openTestRuntime({ root, clock: new SimulatedClock('2026-05-01T00:00:00.000Z') });
    try {
      expect(runtime.db.pragma('auto_vacuum', { simple: true })).toBe(0);
      await chatty(runtime);
      const report = await archive(runtime, { cutoff: null, keepLast: 1 });
      expect(report.space).toMatchObject({ incremental: false, freedBytes: 0 });
      expect(report.space!.freeBytes).toBeGreaterThan(5 * 64 * 1024);
      const before = fileSize(runtime);
      const full = await runtime.log.reclaimSpace({ full: true });
      expect(full.incremental).toBe(true);
      expect(full.freedBytes).toBeGreaterThan(5 * 64 * 1024);
      expect(fileSize(runtime)).toBeLessThan(before - 5 * 64 * 1024);
      expect(runtime.db.pragma('auto_vacuum', { simple: true })).toBe(2);
      expectLogConsistent(runtime);
    } finally {
      runtime.close();
    }
  });
});
