/**
 * The `loops` and `loop_runs` projections on a real in-memory SQLite (test/helpers/projection-spec.ts):
 * streams stored as the log stores them, with the state each machine records.
 */
import { describe, expect, it } from 'vitest';
import { accountsProjection } from '../../src/projections/accounts.js';
import { loopsProjection } from '../../src/projections/loops.js';
import { inlineHandler, projections, findProjection } from '../../src/projections/registry.js';
import { runsProjection } from '../../src/projections/runs.js';
import { stateName } from '../../src/projections/types.js';
import { findLoop } from '../../src/runtime/queries/loops.js';
import { accountEv, at, loopEv, retentionEv, runEv, slotEv } from '../helpers/events.js';
import { runQueueProjection } from '../../src/projections/slots.js';
import { fold } from '../../src/machines/fold.js';
import { runMachine } from '../../src/machines/run.js';
import { given, projectionSpec, type GivenEvent, type ProjectionSpec } from '../helpers/projection-spec.js';

const handler = inlineHandler();

/** The two projections a loop's page reads: its row and its runs. */
const loopsAndRuns = () => projectionSpec(loopsProjection, runsProjection);

// The loop with its run count and last run, as readers get it (computed from loop_runs by src/runtime/queries/loops.ts).
const loopRow = (spec: ProjectionSpec, id = 'loop_1') => {
  const loop = findLoop(spec.db, id);
  return { run_count: loop.runCount, last_run_id: loop.lastRun?.id ?? null, lastRunStatus: loop.lastRun?.status ?? null, last_run_at: loop.lastRun?.at ?? null };
};

describe('loops projection', () => {
  it('loop.created inserts the loop with its state, schedule, target and due time', () => {
    const row = projectionSpec(loopsProjection).given('loop:loop_1', loopEv.created({ description: 'nightly' })).row('loops', { id: 'loop_1' });
    expect(row).toMatchObject({
      id: 'loop_1',
      name: 'backup',
      description: 'nightly',
      status: 'active',
      next_run_at: at(60_000),
      reason: null,
      created_at: at(0),
      updated_at: at(0),
      scheduled_runs: 0,
    });
    // Run counts and last runs are not copied into loops: readers compute them from loop_runs.
    expect(row).not.toHaveProperty('run_count');
    expect(JSON.parse(row.schedule as string)).toEqual(loopEv.created().data.schedule);
    expect(JSON.parse(row.target as string)).toEqual(loopEv.created().data.target);
    expect(JSON.parse(row.policies as string)).toEqual(loopEv.created().data.policies);
  });

  it('pause, resume, stop, archive and remove update status, reason and due time', () => {
    const created = loopEv.created();
    const loop = (...events: GivenEvent[]) => projectionSpec(loopsProjection).given('loop:loop_1', created, ...events);
    loop(loopEv.paused('maint', at(1000))).expectRow('loops', { id: 'loop_1' }, { status: 'paused', reason: 'maint', next_run_at: null, updated_at: at(1000) });
    loop(loopEv.paused('maint'), loopEv.resumed(at(120_000), null, at(2000))).expectRow(
      'loops',
      { id: 'loop_1' },
      { status: 'active', reason: null, next_run_at: at(120_000), updated_at: at(2000) },
    );
    loop(loopEv.stopped('s'), loopEv.archived('a', at(4000))).expectRow(
      'loops',
      { id: 'loop_1' },
      { status: 'archived', reason: 'a', next_run_at: null, updated_at: at(4000) },
    );
    loop(loopEv.removed('r')).expectRow('loops', { id: 'loop_1' }, { status: 'removed', reason: 'r' });
  });

  it('names are unique among live loops; a removed loop frees its name but keeps its row', () => {
    const live = projectionSpec(loopsProjection).given('loop:loop_1', loopEv.created());
    expect(() => live.given('loop:loop_2', loopEv.created({ loopId: 'loop_2' }))).toThrow(/UNIQUE constraint failed: loops.live_name/);
    const removed = projectionSpec(loopsProjection)
      .given('loop:loop_1', loopEv.created(), loopEv.removed())
      .given('loop:loop_2', loopEv.created({ loopId: 'loop_2' }));
    expect(removed.rows('loops', {}, { columns: ['id', 'name', 'status'] })).toEqual([
      { id: 'loop_1', name: 'backup', status: 'removed' },
      { id: 'loop_2', name: 'backup', status: 'active' },
    ]);
  });

  it('a run counts on its loop and mirrors its latest status in the summary', () => {
    const spec = loopsAndRuns().given('loop:loop_1', loopEv.created()).given('run:run_1', runEv.claimed({}, at(100)));
    expect(loopRow(spec)).toMatchObject({ run_count: 1, last_run_id: 'run_1', lastRunStatus: 'claimed', last_run_at: at(100) });
  });

  it('the loop summary follows a run to its end: succeeded, failed, cancelled', () => {
    const spec = loopsAndRuns()
      .given('loop:loop_1', loopEv.created())
      .given('run:run_1', runEv.claimed(), runEv.spawnRequested(), runEv.spawned(), runEv.exited());
    expect(loopRow(spec)).toMatchObject({ run_count: 1, last_run_id: 'run_1', lastRunStatus: 'succeeded' });
    spec.given('run:run_2', runEv.claimed({ runId: 'run_2', slot: 'manual:run_2' }), runEv.spawnRequested(), runEv.spawnFailed());
    expect(loopRow(spec)).toMatchObject({ run_count: 2, last_run_id: 'run_2', lastRunStatus: 'failed' });
    spec.given('run:run_3', runEv.claimed({ runId: 'run_3', slot: 'manual:run_3' }), runEv.cancelRequested());
    expect(loopRow(spec)).toMatchObject({ run_count: 3, last_run_id: 'run_3', lastRunStatus: 'cancelled' });
  });

  it('the loop summary shows a run that is executing as running, not claimed', () => {
    const spawning = loopsAndRuns().given('loop:loop_1', loopEv.created()).given('run:run_1', runEv.claimed(), runEv.spawnRequested());
    expect(loopRow(spawning).lastRunStatus).toBe('spawning');
    const running = spawning.given('run:run_1', runEv.spawned());
    expect(loopRow(running).lastRunStatus).toBe('running');
    running.expectRow('loop_runs', { id: 'run_1' }, { status: 'running' });
  });

  it('an older run ending does not overwrite the summary of a newer run', () => {
    const spec = loopsAndRuns()
      .given('loop:loop_1', loopEv.created())
      .given('run:run_1', runEv.claimed(), runEv.spawnRequested(), runEv.spawned())
      .given('run:run_2', runEv.claimed({ runId: 'run_2', slot: 'manual:run_2' }))
      .given('run:run_1', runEv.exited());
    expect(spec.last).toMatchObject({ streamId: 'run:run_1', version: 4, state: 'succeeded' });
    expect(loopRow(spec)).toMatchObject({ run_count: 2, last_run_id: 'run_2', lastRunStatus: 'claimed' });
  });
});

describe('stream.archived (loops prune --archive)', () => {
  const three = () => projectionSpec(loopsProjection, runsProjection, runQueueProjection);
  const loopFired = (spec: ProjectionSpec) => spec.given('loop:loop_1', loopEv.created(), slotEv.fired({ runId: 'run_1', slot: at(60_000) }));
  const ran = [runEv.claimed({ slot: at(60_000), trigger: 'schedule' }), runEv.spawnRequested(), runEv.spawned(), runEv.exited()];

  it('a rebuild without the history gets the run row from the tombstone, and the queue drops the run; live, the row is slimmed and marked', () => {
    const live = loopFired(three()).given('run:run_1', ...ran);
    const row = live.row('loop_runs', { id: 'run_1' });
    expect(row.stdout).not.toBe('');
    const state = fold(runMachine, live.stream('run:run_1')).snapshot;
    // As archive.ts makes it: the row without its output tails.
    const slim = { ...row, stdout: '', stderr: '' } as Record<string, string | number | null>;
    const tombstone = retentionEv.archived({ state: state.value, rows: { loop_runs: [slim] } });
    live.given('run:run_1', tombstone);
    expect(live.row('loop_runs', { id: 'run_1' })).toEqual({ ...slim, archived_at: tombstone.at });
    expect(findLoop(live.db, 'loop_1')).toMatchObject({ runCount: 1, lastRun: { id: 'run_1', status: 'succeeded' } });

    // The log after the archive: the loop's stream as it was, the run's stream only its tombstone.
    const rebuilt = loopFired(three());
    expect(rebuilt.rows('run_queue')).toHaveLength(1);
    rebuilt.given('run:run_1', tombstone);
    expect(rebuilt.rows('run_queue')).toEqual([]);
    expect(rebuilt.rows('loop_runs')).toEqual(live.rows('loop_runs'));
    expect(findLoop(rebuilt.db, 'loop_1')).toEqual(findLoop(live.db, 'loop_1'));
  });

  it('a tombstone whose row names a column that is not a plain identifier is refused, not turned into SQL', () => {
    const spec = loopFired(three());
    const bad = retentionEv.archived({ rows: { loop_runs: [{ 'id) VALUES (1); DROP TABLE loops; --': 'x' }] } });
    expect(() => spec.given('run:run_1', bad)).toThrow(/bad column/);
    expect(spec.rows('loops')).toHaveLength(1);
  });
});

describe('loop_runs projection', () => {
  /** A loop, then the run stream `run:run_1` with `events`. */
  const run = (...events: GivenEvent[]) => loopsAndRuns().given('loop:loop_1', loopEv.created()).given('run:run_1', ...events);
  const runRow = (spec: ProjectionSpec) => spec.row('loop_runs', { id: 'run_1' });

  it('process.adopted: the runner that took the run over is the run\'s runner from then on', () => {
    const spec = run(runEv.claimed(), runEv.spawnRequested(), runEv.spawned(), runEv.adopted({ runnerId: 'host:2:daemon' }, at(1500)));
    expect(runRow(spec)).toMatchObject({ status: 'running', runner_id: 'host:2:daemon', updated_at: at(1500) });
  });

  it('run.claimed inserts the run with its slot, trigger, target and global position', () => {
    const spec = run(runEv.claimed({}, at(5)));
    expect(runRow(spec)).toMatchObject({
      id: 'run_1',
      loop_id: 'loop_1',
      loop_name: 'backup',
      slot: 'manual:run_1',
      scheduled_for: at(0),
      attempt: 1,
      trigger: 'manual',
      status: 'claimed',
      runner_id: 'host:1:abc',
      claimed_at: at(5),
      claimed_position: spec.stream('run:run_1')[0]!.position,
      started_at: null,
      finished_at: null,
      pid: null,
      stdout: '',
      timed_out: 0,
    });
    expect(runRow(spec).claimed_position).toBe(2);
  });

  it('a run through spawn to exit records start, pid and the process outcome', () => {
    expect(runRow(run(runEv.claimed(), runEv.spawnRequested({}, at(10))))).toMatchObject({ status: 'spawning', started_at: at(10) });
    const spec = run(
      runEv.claimed(),
      runEv.spawnRequested({}, at(10)),
      runEv.spawned({ pid: 999 }, at(20)),
      runEv.exited({ exitCode: 3, error: 'exited with code 3', stdout: 'out', stderr: 'err', stdoutBytes: 3000, stderrBytes: 7, durationMs: 1234 }, at(1300)),
    );
    expect(runRow(spec)).toMatchObject({
      status: 'failed',
      pid: 999,
      exit_code: 3,
      signal: null,
      timed_out: 0,
      error: 'exited with code 3',
      stdout: 'out',
      stderr: 'err',
      stdout_bytes: 3000,
      stderr_bytes: 7,
      started_at: at(10),
      finished_at: at(1300),
      duration_ms: 1234,
      updated_at: at(1300),
    });
  });

  it('a timeout is recorded as timed_out with the timed_out flag', () => {
    const spec = run(
      runEv.claimed(),
      runEv.spawnRequested(),
      runEv.spawned(),
      runEv.exited({ exitCode: null, signal: 'SIGTERM', timedOut: true, error: 'timed out after 1s' }),
    );
    expect(runRow(spec)).toMatchObject({ status: 'timed_out', timed_out: 1, signal: 'SIGTERM', exit_code: null, error: 'timed out after 1s' });
  });

  it('spawn_failed ends the run with the error and a duration measured from the intent', () => {
    const spec = run(runEv.claimed(), runEv.spawnRequested({}, at(10)), runEv.spawnFailed('command not found: x', 'ENOENT', at(260)));
    expect(runRow(spec)).toMatchObject({ status: 'failed', error: 'command not found: x', finished_at: at(260), duration_ms: 250, pid: null });
  });

  it('cancel before spawn ends the run at once with duration 0', () => {
    const spec = run(runEv.claimed(), runEv.cancelRequested('no longer needed', at(40)));
    expect(runRow(spec)).toMatchObject({ status: 'cancelled', error: 'cancelled: no longer needed', finished_at: at(40), duration_ms: 0, started_at: null });
  });

  it('cancel while running keeps the run open until the exit, whose error wins if it has one', () => {
    const spec = run(runEv.claimed(), runEv.spawnRequested(), runEv.spawned(), runEv.cancelRequested('stop', at(500)));
    expect(runRow(spec)).toMatchObject({ status: 'running', error: 'cancelled: stop', finished_at: null, duration_ms: null });
    spec.given('run:run_1', runEv.exited({ exitCode: null, signal: 'SIGTERM', cancelled: true, error: null, durationMs: 600 }, at(620)));
    expect(runRow(spec)).toMatchObject({ status: 'cancelled', error: 'cancelled: stop', signal: 'SIGTERM', finished_at: at(620), duration_ms: 600 });
  });

  it('abandoned ends the run with the reason', () => {
    const spec = run(runEv.claimed(), runEv.spawnRequested({}, at(10)), runEv.spawned(), runEv.abandoned('runner lost', at(1010)));
    expect(runRow(spec)).toMatchObject({ status: 'abandoned', error: 'runner lost', finished_at: at(1010), duration_ms: 1000 });
  });

  it('one run per (loop, slot, attempt)', () => {
    const spec = run(runEv.claimed());
    expect(() => spec.given('run:run_2', runEv.claimed({ runId: 'run_2' }))).toThrow(/UNIQUE constraint failed/);
  });
});

describe('accounts projection', () => {
  it('account.added inserts the profile, active; account.removed keeps its row and frees its name', () => {
    const spec = projectionSpec(accountsProjection).given('account:acct_1', accountEv.added({}, at(0)));
    spec.expectRows('accounts', [
      { id: 'acct_1', name: 'work', live_name: 'work', tool: 'claude', dir: '/home/u/.claude-work', status: 'active', created_at: at(0), updated_at: at(0) },
    ]);
    expect(() => spec.given('account:acct_2', accountEv.added({ accountId: 'acct_2' }))).toThrow(/UNIQUE constraint failed: accounts.live_name/);
    spec.given('account:acct_1', accountEv.removed('gone', at(1000))).given('account:acct_2', accountEv.added({ accountId: 'acct_2' }, at(2000)));
    spec.expectRows('accounts', [
      { id: 'acct_1', name: 'work', live_name: null, status: 'removed', created_at: at(0), updated_at: at(1000) },
      { id: 'acct_2', name: 'work', live_name: 'work', status: 'active', created_at: at(2000) },
    ]);
  });
});

describe('projection definitions', () => {
  it('evolve is pure: the same event gives the same statements', () => {
    const { events } = given('loop:loop_1', loopEv.created(), loopEv.paused(), loopEv.resumed())
      .given('run:run_1', runEv.claimed(), runEv.spawnRequested(), runEv.spawned(), runEv.exited());
    expect(events).toHaveLength(7);
    for (const event of events) {
      expect(handler(event)).toEqual(handler(structuredClone(event)));
    }
  });

  it('each projection handles exactly the events it has a case for', () => {
    const unrelated = projectionSpec(loopsProjection).given('loop:loop_1', loopEv.created()).last;
    expect(runsProjection.handles.has(unrelated.type)).toBe(false);
    expect(runsProjection.evolve(unrelated)).toEqual([]);
    expect(loopsProjection.handles.has('loop.created')).toBe(true);
    expect(findProjection('loop_runs')).toBe(runsProjection);
    expect(findProjection('loops')).toBe(loopsProjection);
    expect(findProjection('nope')).toBeUndefined();
  });

  it('stateName turns the recorded state into a status string', () => {
    const base = { position: 1, streamId: 's', version: 1, type: 't', v: 1, data: {}, meta: {}, at: at(0) };
    expect(stateName({ ...base, state: 'running' })).toBe('running');
    expect(stateName({ ...base, state: null })).toBeNull();
    expect(stateName({ ...base, state: { a: 'b' } })).toBe('{"a":"b"}');
  });

  it('the DDL can run twice (IF NOT EXISTS)', () => {
    const { db } = projectionSpec();
    for (const p of projections) for (const ddl of p.ddl) db.exec(ddl);
    expect(db.prepare("SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table'").get()).toEqual({ n: projections.flatMap((p) => p.tables).length });
  });
});

describe('projection versions (src/projections/versions.ts)', () => {
  it('name every projection of the registry, in the order they are applied, with its version', async () => {
    const { projections } = await import('../../src/projections/registry.js');
    const { PROJECTION_VERSIONS } = await import('../../src/projections/versions.js');
    expect(projections.map((p) => [p.name, p.version])).toEqual(Object.entries(PROJECTION_VERSIONS));
  });
});
