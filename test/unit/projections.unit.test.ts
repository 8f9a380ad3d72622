import Database from 'better-sqlite3';
import { beforeEach, describe, expect, it } from 'vitest';
import type { StoredEvent } from '../../src/events/types.js';
import { loopMachine } from '../../src/machines/loop.js';
import { runMachine } from '../../src/machines/run.js';
import { loopsProjection } from '../../src/projections/loops.js';
import { inlineHandler, projections, findProjection } from '../../src/projections/registry.js';
import { runsProjection } from '../../src/projections/runs.js';
import { stateName } from '../../src/projections/types.js';
import { at, loopEv, runEv } from '../helpers/events.js';
import { Positions, storedStream } from '../helpers/stored.js';
import type { MachineInput } from '../helpers/machine.js';

type Db = Database.Database;
let db: Db;
let positions: Positions;
const handler = inlineHandler();

function apply(events: StoredEvent[]): void {
  for (const event of events) {
    for (const s of handler(event)) db.prepare(s.sql).run(...s.params);
  }
}
// The loop's row with its last run's status, joined the way readers do (src/runtime/queries/loops.ts).
const loopRow = (id = 'loop_1') =>
  db
    .prepare('SELECT l.*, r.status AS lastRunStatus FROM loops l LEFT JOIN loop_runs r ON r.id = l.last_run_id WHERE l.id = ?')
    .get(id) as Record<string, unknown>;
const lastRunStatus = () => loopRow().lastRunStatus;
const runRow = (id = 'run_1') => db.prepare('SELECT * FROM loop_runs WHERE id = ?').get(id) as Record<string, unknown>;

/** Applies a loop stream and a run stream (interleaved: loop first). */
function loop(events: MachineInput[], id = 'loop_1'): StoredEvent[] {
  const stored = storedStream(loopMachine, `loop:${id}`, events, positions);
  apply(stored);
  return stored;
}
function run(events: MachineInput[], id = 'run_1'): StoredEvent[] {
  const stored = storedStream(runMachine, `run:${id}`, events, positions);
  apply(stored);
  return stored;
}

beforeEach(() => {
  db = new Database(':memory:');
  for (const p of projections) for (const ddl of p.ddl) db.exec(ddl);
  positions = new Positions();
});

describe('loops projection', () => {
  it('loop.created inserts the loop with its state, schedule, target and due time', () => {
    loop([loopEv.created({ description: 'nightly' })]);
    const row = loopRow();
    expect(row).toMatchObject({
      id: 'loop_1',
      name: 'backup',
      description: 'nightly',
      status: 'active',
      next_run_at: at(60_000),
      reason: null,
      created_at: at(0),
      updated_at: at(0),
      run_count: 0,
      last_run_id: null,
    });
    expect(JSON.parse(row.schedule as string)).toEqual(loopEv.created().data.schedule);
    expect(JSON.parse(row.target as string)).toEqual(loopEv.created().data.target);
    expect(JSON.parse(row.policies as string)).toEqual(loopEv.created().data.policies);
  });

  it('pause, resume, stop, archive and remove update status, reason and due time', () => {
    const created = loopEv.created();
    loop([created, loopEv.paused('maint', at(1000))]);
    expect(loopRow()).toMatchObject({ status: 'paused', reason: 'maint', next_run_at: null, updated_at: at(1000) });

    db.exec('DELETE FROM loops');
    positions = new Positions();
    loop([created, loopEv.paused('maint'), loopEv.resumed(at(120_000), null, at(2000))]);
    expect(loopRow()).toMatchObject({ status: 'active', reason: null, next_run_at: at(120_000), updated_at: at(2000) });

    db.exec('DELETE FROM loops');
    loop([created, loopEv.stopped('s'), loopEv.archived('a', at(4000))]);
    expect(loopRow()).toMatchObject({ status: 'archived', reason: 'a', next_run_at: null, updated_at: at(4000) });

    db.exec('DELETE FROM loops');
    loop([created, loopEv.removed('r')]);
    expect(loopRow()).toMatchObject({ status: 'removed', reason: 'r' });
  });

  it('names are unique among live loops; a removed loop frees its name but keeps its row', () => {
    loop([loopEv.created()], 'loop_1');
    expect(() => loop([loopEv.created({ loopId: 'loop_2' })], 'loop_2')).toThrow(/UNIQUE constraint failed: loops.live_name/);
    db.exec('DELETE FROM loops');
    loop([loopEv.created(), loopEv.removed()], 'loop_1');
    loop([loopEv.created({ loopId: 'loop_2' })], 'loop_2');
    const rows = db.prepare('SELECT id, name, status FROM loops ORDER BY id').all();
    expect(rows).toEqual([
      { id: 'loop_1', name: 'backup', status: 'removed' },
      { id: 'loop_2', name: 'backup', status: 'active' },
    ]);
  });

  it('a run counts on its loop and mirrors its latest status in the summary', () => {
    loop([loopEv.created()]);
    run([runEv.claimed({}, at(100))]);
    expect(loopRow()).toMatchObject({ run_count: 1, last_run_id: 'run_1', lastRunStatus: 'claimed', last_run_at: at(100) });
  });

  it('the loop summary follows a run to its end: succeeded, failed, cancelled', () => {
    loop([loopEv.created()]);
    run([runEv.claimed(), runEv.spawnRequested(), runEv.spawned(), runEv.exited()], 'run_1');
    expect(loopRow()).toMatchObject({ run_count: 1, last_run_id: 'run_1', lastRunStatus: 'succeeded' });
    run([runEv.claimed({ runId: 'run_2', slot: 'manual:run_2' }), runEv.spawnRequested(), runEv.spawnFailed()], 'run_2');
    expect(loopRow()).toMatchObject({ run_count: 2, last_run_id: 'run_2', lastRunStatus: 'failed' });
    run([runEv.claimed({ runId: 'run_3', slot: 'manual:run_3' }), runEv.cancelRequested()], 'run_3');
    expect(loopRow()).toMatchObject({ run_count: 3, last_run_id: 'run_3', lastRunStatus: 'cancelled' });
  });

  it('the loop summary shows a run that is executing as running, not claimed', () => {
    loop([loopEv.created()]);
    run([runEv.claimed(), runEv.spawnRequested()]);
    expect(lastRunStatus()).toBe('spawning');
    db.exec('DELETE FROM loop_runs');
    db.exec('UPDATE loops SET run_count = 0, last_run_id = NULL');
    positions = new Positions();
    run([runEv.claimed(), runEv.spawnRequested(), runEv.spawned()]);
    expect(lastRunStatus()).toBe('running');
    expect(runRow().status).toBe('running');
  });

  it('an older run ending does not overwrite the summary of a newer run', () => {
    loop([loopEv.created()]);
    const first = storedStream(runMachine, 'run:run_1', [runEv.claimed(), runEv.spawnRequested(), runEv.spawned(), runEv.exited()], positions);
    const second = storedStream(runMachine, 'run:run_2', [runEv.claimed({ runId: 'run_2', slot: 'manual:run_2' })], positions);
    apply(first.slice(0, 3));
    apply(second);
    apply(first.slice(3));
    expect(loopRow()).toMatchObject({ run_count: 2, last_run_id: 'run_2', lastRunStatus: 'claimed' });
  });
});

describe('loop_runs projection', () => {
  beforeEach(() => {
    loop([loopEv.created()]);
  });

  it('run.claimed inserts the run with its slot, trigger, target and global position', () => {
    const [claimed] = run([runEv.claimed({}, at(5))]);
    expect(runRow()).toMatchObject({
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
      claimed_position: claimed!.position,
      started_at: null,
      finished_at: null,
      pid: null,
      stdout: '',
      timed_out: 0,
    });
  });

  it('a run through spawn to exit records start, pid and the process outcome', () => {
    run([runEv.claimed(), runEv.spawnRequested({}, at(10))]);
    expect(runRow()).toMatchObject({ status: 'spawning', started_at: at(10) });
    positions = new Positions();
    db.exec('DELETE FROM loop_runs');
    run([
      runEv.claimed(),
      runEv.spawnRequested({}, at(10)),
      runEv.spawned({ pid: 999 }, at(20)),
      runEv.exited({ exitCode: 3, error: 'exited with code 3', stdout: 'out', stderr: 'err', stdoutBytes: 3000, stderrBytes: 7, durationMs: 1234 }, at(1300)),
    ]);
    expect(runRow()).toMatchObject({
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
    run([
      runEv.claimed(),
      runEv.spawnRequested(),
      runEv.spawned(),
      runEv.exited({ exitCode: null, signal: 'SIGTERM', timedOut: true, error: 'timed out after 1s' }),
    ]);
    expect(runRow()).toMatchObject({ status: 'timed_out', timed_out: 1, signal: 'SIGTERM', exit_code: null, error: 'timed out after 1s' });
  });

  it('spawn_failed ends the run with the error and a duration measured from the intent', () => {
    run([runEv.claimed(), runEv.spawnRequested({}, at(10)), runEv.spawnFailed('command not found: x', 'ENOENT', at(260))]);
    expect(runRow()).toMatchObject({ status: 'failed', error: 'command not found: x', finished_at: at(260), duration_ms: 250, pid: null });
  });

  it('cancel before spawn ends the run at once with duration 0', () => {
    run([runEv.claimed(), runEv.cancelRequested('no longer needed', at(40))]);
    expect(runRow()).toMatchObject({ status: 'cancelled', error: 'cancelled: no longer needed', finished_at: at(40), duration_ms: 0, started_at: null });
  });

  it('cancel while running keeps the run open until the exit, whose error wins if it has one', () => {
    run([runEv.claimed(), runEv.spawnRequested(), runEv.spawned(), runEv.cancelRequested('stop', at(500))]);
    expect(runRow()).toMatchObject({ status: 'running', error: 'cancelled: stop', finished_at: null, duration_ms: null });
    positions = new Positions();
    db.exec('DELETE FROM loop_runs');
    run([
      runEv.claimed(),
      runEv.spawnRequested(),
      runEv.spawned(),
      runEv.cancelRequested('stop', at(500)),
      runEv.exited({ exitCode: null, signal: 'SIGTERM', cancelled: true, error: null, durationMs: 600 }, at(620)),
    ]);
    expect(runRow()).toMatchObject({ status: 'cancelled', error: 'cancelled: stop', signal: 'SIGTERM', finished_at: at(620), duration_ms: 600 });
  });

  it('abandoned ends the run with the reason', () => {
    run([runEv.claimed(), runEv.spawnRequested({}, at(10)), runEv.spawned(), runEv.abandoned('runner lost', at(1010))]);
    expect(runRow()).toMatchObject({ status: 'abandoned', error: 'runner lost', finished_at: at(1010), duration_ms: 1000 });
  });

  it('one run per (loop, slot, attempt)', () => {
    run([runEv.claimed()], 'run_1');
    expect(() => run([runEv.claimed({ runId: 'run_2' })], 'run_2')).toThrow(/UNIQUE constraint failed/);
  });
});

describe('projection definitions', () => {
  it('evolve is pure: the same event gives the same statements', () => {
    const events = [
      ...storedStream(loopMachine, 'loop:loop_1', [loopEv.created(), loopEv.paused(), loopEv.resumed()], positions),
      ...storedStream(runMachine, 'run:run_1', [runEv.claimed(), runEv.spawnRequested(), runEv.spawned(), runEv.exited()], positions),
    ];
    for (const event of events) {
      expect(handler(event)).toEqual(handler(structuredClone(event)));
    }
  });

  it('each projection handles exactly the events it has a case for', () => {
    const unrelated = storedStream(loopMachine, 'loop:loop_1', [loopEv.created()], positions)[0]!;
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
    for (const p of projections) for (const ddl of p.ddl) db.exec(ddl);
    expect(db.prepare("SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table'").get()).toEqual({ n: projections.flatMap((p) => p.tables).length });
  });
});
