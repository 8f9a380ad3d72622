/**
 * `loops store copy` (src/runtime/admin/store-copy.ts): a SQLite log with real history — loops
 * created and run by the runtime on a SimulatedClock, a failed run, a pause, leases — and
 * every golden log (archived streams, old schema versions, workflows) copied into PostgreSQL and
 * back, each time with
 *  - the events identical, row for row (positions, ids, versions, types, schema versions, the
 *    JSON text, times, states), the streams' rows and the lease table too;
 *  - the projections on the destination equal to the source's tables, and verified;
 *  - `replay` of every run stream giving the same result on both stores;
 *  - a runtime on the copy (after --switch) running a copied loop, its events after the copied head;
 * and the refusals: a destination that holds a log, a malformed URL or schema name (no schema made,
 * no password shown), a daemon on the data directory or on the source fleet, a source with no
 * log; a copy that fails part-way (a damaged source) writes nothing.
 *
 * PostgreSQL comes from LOOPS_TEST_PG_URL (default postgres://postgres@127.0.0.1:5432/test); not
 * answering, these tests are skipped loudly (a failure under CI). Every test's schemas are its
 * own (loops_test_<random>), dropped when it ends.
 */
import Database from 'better-sqlite3';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { openDatabase, type Db } from '../../src/events/db.js';
import { LoopsError } from '../../src/events/errors.js';
import { openPgStore, type PgStore } from '../../src/events/pg/index.js';
import { SqliteLeaseStore } from '../../src/events/sqlite-leases.js';
import { SqliteEventLog, type EventRow, type StreamRow } from '../../src/events/sqlite-log.js';
import { inlineHandler, projections } from '../../src/projections/registry.js';
import { rebuildProjections, verifyProjections } from '../../src/runtime/admin/projections.js';
import { replayStream } from '../../src/runtime/admin/replay.js';
import { copyStore, type StoreCopyReport } from '../../src/runtime/admin/store-copy.js';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { pidFile } from '../../src/runtime/daemon/daemon-info.js';
import { tick } from '../../src/runtime/daemon/pass.js';
import { bootId, processStartTime } from '../../src/runtime/execution/process-info.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { changeLoopState, createCommandLoop } from '../../src/runtime/loops/commands.js';
import { databaseFile } from '../../src/runtime/paths.js';
import { openRuntime } from '../../src/runtime/runtime.js';
import { goldenScenarios, loadGolden, type Golden } from '../helpers/golden.js';
import { DEFAULT_PG_URL, PG_URL, adminClient, dropSchemas, pgReachable, tableRows, testSchemaName } from '../helpers/pg.js';
import { requirePrerequisite } from '../helpers/prerequisite.js';
import { tempDir } from '../helpers/tmp.js';

const pgVerdict = await pgReachable();
const havePg = requirePrerequisite(`PostgreSQL for loops store copy (LOOPS_TEST_PG_URL, default ${DEFAULT_PG_URL})`, () => pgVerdict);

/** Schemas made by this file's run; each is dropped when its test ends, and any left over at the end. */
const schemas: string[] = [];
afterAll(async () => {
  if (havePg) await dropSchemas(schemas);
});

const MIN = 60_000;
const HOUR = 3_600_000;
const T0 = Date.parse('2026-01-01T00:00:00.000Z');

type Row = Record<string, unknown>;

/** A PostgreSQL store URL on a schema of the test's own (dropped when it ends). */
function pgTarget(password = ''): { schema: string; url: string } {
  const schema = testSchemaName();
  schemas.push(schema);
  onTestFinished(() => dropSchemas([schema]));
  const url = password ? PG_URL.replace('postgres://postgres@', `postgres://postgres:${password}@`) : PG_URL;
  return { schema, url: `${url}?schema=${schema}` };
}

/**
 * A data directory whose SQLite log has real history: an hourly loop run by three passes, a loop
 * whose run fails, a loop paused, and two lease rows (one taken twice: token 2). Returns the data directory and the time it ends at.
 */
async function sqliteHistory(): Promise<{ dataDir: string; nowMs: number }> {
  const dataDir = join(tempDir('loops-copy-'), 'data');
  const clock = new SimulatedClock(T0);
  const runtime = await openRuntime({ dataDir, clock, runnerId: 'test-host:1:runner', store: { kind: 'sqlite' } });
  try {
    await createCommandLoop(runtime, { name: 'hourly', command: 'true', schedule: { every: '1h', tz: 'UTC' } });
    await createCommandLoop(runtime, { name: 'flaky', command: 'echo failing; exit 3', schedule: { manual: true, tz: 'UTC' } });
    await createCommandLoop(runtime, { name: 'idle', command: 'true', schedule: { every: '1d', tz: 'UTC' } });
    for (let i = 0; i < 3; i++) {
      clock.advance(HOUR);
      await tick(runtime);
    }
    expect((await runNow(runtime, 'flaky')).status).toBe('failed');
    await changeLoopState(runtime, 'idle', 'pause', { reason: 'before the move' });
    await runtime.leases.take('notice:copy-test', 'test-host:1:runner', MIN, clock.now());
    await runtime.leases.take('notice:copy-test', 'test-host:2:other', MIN, clock.now() + 2 * MIN);
    await runtime.leases.take('runner:copy-test', 'test-host:1:runner', HOUR, clock.now());
    await runtime.log.settled();
  } finally {
    runtime.close();
  }
  return { dataDir, nowMs: clock.now() + 10 * MIN };
}

/** A data directory whose loops.db holds a golden log, loaded verbatim, its tables rebuilt. */
function goldenDataDir(golden: Golden): string {
  const dataDir = join(tempDir('loops-copy-golden-'), 'data');
  const db = openDatabase(databaseFile(dataDir));
  try {
    const insertEvent = db.prepare('INSERT INTO events (position, stream_id, version, type, v, data, meta, at, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)');
    const insertStream = db.prepare('INSERT INTO streams (stream_id, kind, version, machine_id, machine_version, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)');
    db.transaction(() => {
      for (const e of golden.events) {
        insertEvent.run(e.position, e.stream_id, e.version, e.type, e.v, JSON.stringify(e.data), JSON.stringify(e.meta), e.at, e.state === null ? null : JSON.stringify(e.state));
      }
      for (const s of golden.streams) insertStream.run(s.stream_id, s.kind, s.version, s.machine_id, s.machine_version, s.created_at, s.updated_at);
      if (golden.events.some((e) => e.type === 'stream.archived')) db.pragma('user_version = 2');
    })();
    rebuildProjections(db);
  } finally {
    db.close();
  }
  return dataDir;
}

/** A SQLite file's log, streams, leases (expiry in epoch ms), format and projection tables. */
function sqliteContents(file: string): { events: Row[]; streams: Row[]; leases: Row[]; format: number; tables: Record<string, Row[]> } {
  const db = new Database(file, { readonly: true });
  try {
    const tables: Record<string, Row[]> = {};
    for (const p of projections) for (const t of p.tables) tables[t.name] = db.prepare(`SELECT * FROM ${t.name} ORDER BY ${t.orderBy}`).all() as Row[];
    return {
      events: db.prepare('SELECT * FROM events ORDER BY position').all() as Row[],
      streams: db.prepare('SELECT * FROM streams ORDER BY stream_id').all() as Row[],
      leases: (db.prepare('SELECT * FROM leases ORDER BY name').all() as Array<Row & { expires_at: string }>).map((l) => ({ ...l, expires_at: Date.parse(l.expires_at) })),
      format: db.pragma('user_version', { simple: true }) as number,
      tables,
    };
  } finally {
    db.close();
  }
}

/** The same of a PostgreSQL schema, with its log head. */
async function pgContents(schema: string): Promise<{ events: Row[]; streams: Row[]; leases: Row[]; format: number; head: number; tables: Record<string, Row[]> }> {
  const client = await adminClient();
  try {
    const tables: Record<string, Row[]> = {};
    for (const p of projections) for (const t of p.tables) tables[t.name] = await tableRows(client, schema, t.name, t.orderBy);
    const head = (await client.query<{ position: number; format: number }>(`SELECT position, format FROM "${schema}".log_head`)).rows[0]!;
    return {
      events: await tableRows(client, schema, 'events', 'position'),
      streams: await tableRows(client, schema, 'streams', 'stream_id'),
      leases: await tableRows(client, schema, 'leases', 'name'),
      format: head.format,
      head: head.position,
      tables,
    };
  } finally {
    await client.end();
  }
}

/** A store on a test schema, ended when the test ends. */
async function openStore(schema: string): Promise<PgStore> {
  const store = await openPgStore({ url: PG_URL, schema, projections, follow: false });
  onTestFinished(() => store.end());
  return store;
}

/** The run streams of a log. */
function runStreams(file: string): string[] {
  const db = new Database(file, { readonly: true });
  try {
    return (db.prepare("SELECT stream_id FROM streams WHERE kind = 'run' ORDER BY stream_id").all() as Array<{ stream_id: string }>).map((r) => r.stream_id);
  } finally {
    db.close();
  }
}

/** `replay` of each stream on the SQLite file and on the PostgreSQL schema: the same result, and ok. */
async function expectSameReplays(file: string, store: PgStore, streams: string[]): Promise<void> {
  const db = openDatabase(file, { readonly: true });
  const log = new SqliteEventLog(db, { validate: false });
  try {
    for (const streamId of streams) {
      const sqlite = await replayStream(log, streamId);
      const postgres = await replayStream(store.events, streamId);
      expect(postgres, `replay of ${streamId}`).toEqual(sqlite);
      expect(sqlite.ok, `replay of ${streamId} matches its log`).toBe(true);
    }
  } finally {
    log.close();
    db.close();
  }
}

async function expectUsage(promise: Promise<unknown>, pattern: RegExp): Promise<LoopsError> {
  const e = await copyError(promise);
  expect(e.message).toMatch(pattern);
  expect(['usage', 'validation']).toContain(e.code);
  return e;
}

/** The error a copy failed with (the test fails if it did not). */
async function copyError(promise: Promise<unknown>): Promise<LoopsError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error, 'the copy failed').toBeInstanceOf(LoopsError);
  return error as LoopsError;
}

function expectVerified(report: StoreCopyReport): void {
  expect(report.verified).toEqual({ events: true, streams: true, projections: true });
  expect(report.ok).toBe(true);
  expect(report.projections.tables.filter((t) => t.differences.length > 0)).toEqual([]);
}

describe.skipIf(!havePg)('loops store copy', () => {
  it('copies a SQLite log with real history into PostgreSQL verbatim: events, streams, leases, projections, replays', async () => {
    const { dataDir, nowMs } = await sqliteHistory();
    const { schema, url } = pgTarget();
    const before = sqliteContents(databaseFile(dataDir));
    expect(before.events.length).toBeGreaterThan(20);

    const report = await copyStore(dataDir, { to: url, nowMs, pageSize: 7 });
    expectVerified(report);
    expect(report).toMatchObject({
      from: { kind: 'sqlite', store: databaseFile(dataDir) },
      to: { kind: 'postgres', store: url },
      events: before.events.length,
      streams: before.streams.length,
      leases: 2,
      head: before.events.at(-1)!.position,
      switched: false,
    });
    expect(report.source.sha256).toBe(report.destination.sha256);

    const after = await pgContents(schema);
    expect(after.events).toStrictEqual(before.events);
    expect(after.streams).toStrictEqual(before.streams);
    expect(after.leases).toStrictEqual(before.leases);
    expect(after.leases.find((l) => l.name === 'notice:copy-test')).toMatchObject({ holder: 'test-host:2:other', token: 2 });
    expect(after.head).toBe(report.head);
    expect(after.format).toBe(1);
    for (const table of Object.keys(before.tables)) {
      expect(after.tables[table], `table ${table}: the copy's rows differ from the source's`).toStrictEqual(before.tables[table]);
    }
    expect(before.tables.loop_runs!.map((r) => r.status).sort()).toEqual(['failed', 'succeeded', 'succeeded', 'succeeded']);
    expect(before.tables.loops!.map((r) => [r.name, r.status])).toEqual(expect.arrayContaining([['idle', 'paused'], ['hourly', 'active']]));
    // The source is untouched.
    expect(sqliteContents(databaseFile(dataDir))).toStrictEqual(before);

    const store = await openStore(schema);
    expect((await store.verifyProjections()).ok).toBe(true);
    await expectSameReplays(databaseFile(dataDir), store, runStreams(databaseFile(dataDir)));
  });

  it('--switch: the data directory then runs on the copy — a copied loop runs, after the copied head', async () => {
    const { dataDir, nowMs } = await sqliteHistory();
    const { schema, url } = pgTarget('s3cret-pw');
    const report = await copyStore(dataDir, { to: url, nowMs, switch: true });
    expectVerified(report);
    expect(report.switched).toBe(true);
    expect(JSON.stringify(report)).not.toContain('s3cret-pw');
    const remembered = JSON.parse(readFileSync(join(dataDir, 'store.json'), 'utf8')) as { store: string };
    expect(remembered.store).toBe(`${PG_URL}?schema=${schema}`);
    // The replica was made by the switch.
    expect(existsSync(join(dataDir, `pg-${schema}.db`))).toBe(true);

    const runtime = await openRuntime({ dataDir, clock: new SimulatedClock(nowMs), runnerId: 'test-host:3:after' });
    try {
      expect(runtime.fleet?.schema).toBe(schema);
      const run = await runNow(runtime, 'hourly');
      expect(run.status).toBe('succeeded');
      const events = await runtime.log.readStream(`run:${run.id}`);
      expect(events[0]!.position).toBe(report.head + 1);
      const runs = runtime.db.prepare("SELECT count(*) AS n FROM loop_runs WHERE loop_id = (SELECT id FROM loops WHERE name = 'hourly')").get() as { n: number };
      expect(runs.n).toBe(4);
    } finally {
      runtime.close();
    }
  });

  it('copies PostgreSQL back into a new SQLite file, identical to both; and into an empty data directory', async () => {
    const { dataDir, nowMs } = await sqliteHistory();
    const { schema, url } = pgTarget();
    expectVerified(await copyStore(dataDir, { to: url, nowMs }));
    const original = sqliteContents(databaseFile(dataDir));

    const back = join(tempDir('loops-copy-back-'), 'back.db');
    const report = await copyStore(dataDir, { from: url, to: `sqlite:${back}`, nowMs, pageSize: 5 });
    expectVerified(report);
    expect(report).toMatchObject({ from: { kind: 'postgres', store: url }, to: { kind: 'sqlite', store: back }, events: original.events.length, leases: 2 });
    expect(sqliteContents(back)).toStrictEqual(original);

    // Into another data directory's own loops.db (it does not exist yet), made its store.
    const other = join(tempDir('loops-copy-dir-'), 'data');
    const intoDir = await copyStore(other, { from: url, to: 'sqlite', nowMs, switch: true });
    expectVerified(intoDir);
    expect(intoDir.to.store).toBe(databaseFile(other));
    expect(sqliteContents(databaseFile(other))).toStrictEqual(original);
    const store = await openStore(schema);
    await expectSameReplays(back, store, runStreams(back));
    const db = openDatabase(back);
    try {
      expect(verifyProjections(db).ok).toBe(true);
    } finally {
      db.close();
    }
  });

  it.each(goldenScenarios())('golden %s: into PostgreSQL and back, verbatim (archived streams, old schema versions)', async (name) => {
    const golden = loadGolden(name);
    const dataDir = goldenDataDir(golden);
    const { schema, url } = pgTarget();
    const original = sqliteContents(databaseFile(dataDir));
    expectVerified(await copyStore(dataDir, { to: url, pageSize: 4 }));
    const copied = await pgContents(schema);
    expect(copied.events).toStrictEqual(original.events);
    expect(copied.streams).toStrictEqual(original.streams);
    expect(copied.format).toBe(original.format);
    for (const table of Object.keys(original.tables)) expect(copied.tables[table], `table ${table}`).toStrictEqual(original.tables[table]);

    const back = join(tempDir('loops-copy-back-'), 'back.db');
    expectVerified(await copyStore(dataDir, { from: url, to: `sqlite:${back}`, pageSize: 3 }));
    expect(sqliteContents(back)).toStrictEqual(original);
    const store = await openStore(schema);
    await expectSameReplays(back, store, golden.streams.filter((s) => s.machine_id !== null).map((s) => s.stream_id));
  });

  it('refuses a destination that holds a log, and leaves it as it was', async () => {
    const { dataDir, nowMs } = await sqliteHistory();
    const { schema, url } = pgTarget();
    expectVerified(await copyStore(dataDir, { to: url, nowMs }));
    const before = await pgContents(schema);
    const error = await expectUsage(copyStore(dataDir, { to: url, nowMs }), /already holds a log \(up to position \d+\)/);
    expect(error.hint).toMatch(/\?schema=<new name>.*DROP SCHEMA/);
    expect(await pgContents(schema)).toStrictEqual(before);

    // A SQLite destination with events: refused too, untouched.
    const back = join(tempDir('loops-copy-back-'), 'back.db');
    expectVerified(await copyStore(dataDir, { from: url, to: `sqlite:${back}`, nowMs }));
    const file = sqliteContents(back);
    await expectUsage(copyStore(dataDir, { from: url, to: `sqlite:${back}`, nowMs }), /already holds a log \(\d+ events\)/);
    expect(sqliteContents(back)).toStrictEqual(file);
    // The data directory's own loops.db, when it is the destination and holds a log.
    await expectUsage(copyStore(dataDir, { from: url, to: 'sqlite', nowMs }), /loops\.db already holds a log/);
  });

  it('refuses a malformed URL or schema name before anything is made, never showing the password', async () => {
    const { dataDir, nowMs } = await sqliteHistory();
    const bad = [
      ['postgres://postgres:hunter2@[oops/test?schema=a', /--to: not a valid URL: "postgres:\/\/postgres:\*\*\*@\[oops/],
      ['mysql://root:hunter2@db/loops', /--to: "mysql:\/\/root:\*\*\*@db\/loops" is not a store loops knows/],
      [`${PG_URL.replace('postgres@', 'postgres:hunter2@')}?schema=Not-Valid`, /schema name "Not-Valid" is not valid/],
      ['sqlite:', /names no file/],
    ] as const;
    for (const [to, pattern] of bad) {
      const error = await expectUsage(copyStore(dataDir, { to, nowMs }), pattern);
      expect(`${error.message} ${error.hint}`).not.toContain('hunter2');
    }
    const client = await adminClient();
    try {
      expect((await client.query("SELECT 1 FROM pg_namespace WHERE nspname = 'Not-Valid'")).rowCount).toBe(0);
    } finally {
      await client.end();
    }
    // A source schema that holds no log is not made either.
    const { schema, url } = pgTarget();
    const missing = await copyError(copyStore(dataDir, { from: url, to: `sqlite:${join(tempDir(), 'x.db')}`, nowMs }));
    expect(missing.message).toMatch(new RegExp(`schema ${schema} holds no loops log`));
    expect(missing.code).toBe('not_found');
    const probe = await adminClient();
    try {
      expect((await probe.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema])).rowCount).toBe(0);
    } finally {
      await probe.end();
    }
    // Same store at both ends; two SQLite ends; --switch to a file that is not this data directory's.
    await expectUsage(copyStore(dataDir, { to: 'sqlite', nowMs }), /the same store/);
    await expectUsage(copyStore(dataDir, { to: `sqlite:${join(tempDir(), 'y.db')}`, nowMs }), /both ends are SQLite/);
    await expectUsage(copyStore(dataDir, { from: url, to: `sqlite:${join(tempDir(), 'y.db')}`, switch: true, nowMs }), /--switch makes this data directory use the destination/);
    // A data directory with no log.
    await expectUsage(copyStore(join(tempDir(), 'empty'), { to: pgTarget().url, nowMs }), /there is no log to copy/);
  });

  it('refuses while a daemon runs on the data directory, or on the source fleet', async () => {
    const { dataDir, nowMs } = await sqliteHistory();
    const { schema, url } = pgTarget();
    // This process as the data directory's daemon (its pid file checked by identity).
    writeFileSync(pidFile(dataDir), JSON.stringify({ pid: process.pid, startTime: processStartTime(process.pid), bootId: bootId(), runnerId: 'test-host:1:daemon', version: 'test', startedAt: new Date(nowMs).toISOString(), dataDir }));
    const error = await expectUsage(copyStore(dataDir, { to: url, nowMs }), new RegExp(`a daemon \\(pid ${process.pid}\\) is running on .*writing to the source`));
    expect(error.hint).toMatch(/loops daemon stop/);
    rmSync(pidFile(dataDir));
    expectVerified(await copyStore(dataDir, { to: url, nowMs }));

    // A fleet whose daemon holds its lease: a PostgreSQL source being written is refused.
    const store = await openStore(schema);
    await store.leases.take('daemon:host-b', 'host-b:123:abc', HOUR, nowMs);
    await expectUsage(copyStore(dataDir, { from: url, to: `sqlite:${join(tempDir(), 'z.db')}`, nowMs }), /a daemon is running on .*daemon:host-b \(host-b:123:abc/);
    // Once it expired, the copy goes ahead.
    expectVerified(await copyStore(dataDir, { from: url, to: `sqlite:${join(tempDir(), 'z.db')}`, nowMs: nowMs + 2 * HOUR }));
  });

  it('a copy that fails part-way writes nothing: PostgreSQL keeps an empty log, a new SQLite file is deleted', async () => {
    const { dataDir, nowMs } = await sqliteHistory();
    const { schema, url } = pgTarget();
    // A damaged source: one event gone from the middle of a stream (its versions skip one).
    const file = databaseFile(dataDir);
    const db = new Database(file);
    const victim = db.prepare("SELECT position FROM events WHERE stream_id LIKE 'run:%' AND version = 2 ORDER BY position DESC LIMIT 1").get() as { position: number };
    db.prepare('DELETE FROM events WHERE position = ?').run(victim.position);
    db.close();
    const error = await copyError(copyStore(dataDir, { to: url, nowMs, pageSize: 3 }));
    expect(error.message).toMatch(/failed and was rolled back, nothing was written/);
    expect(error.hint).toMatch(/the source changed while it was read .* or its log is damaged/);
    const after = await pgContents(schema);
    expect([after.events, after.streams, after.leases, after.head]).toEqual([[], [], [], 0]);
    for (const rows of Object.values(after.tables)) expect(rows).toEqual([]);

    // PostgreSQL → a new SQLite file, the PostgreSQL source damaged the same way: the file is not left behind.
    const good = await sqliteHistory();
    const source = pgTarget();
    expectVerified(await copyStore(good.dataDir, { to: source.url, nowMs: good.nowMs }));
    const client = await adminClient();
    try {
      await client.query(`DELETE FROM "${source.schema}".events WHERE position = (SELECT max(position) FROM "${source.schema}".events WHERE stream_id LIKE 'run:%' AND version = 2)`);
    } finally {
      await client.end();
    }
    const back = join(tempDir('loops-copy-back-'), 'back.db');
    const failed = await copyError(copyStore(good.dataDir, { from: source.url, to: `sqlite:${back}`, nowMs: good.nowMs, pageSize: 3 }));
    expect(failed.message).toMatch(new RegExp(`copying into ${back} failed and was rolled back, nothing was written \\(${back} was deleted\\)`));
    expect(existsSync(back)).toBe(false);
  });

  it('appendStored on both stores refuses a log whose head is not the one expected, writing nothing', async () => {
    const { dataDir } = await sqliteHistory();
    const db = openDatabase(databaseFile(dataDir), { readonly: true });
    const source = new SqliteEventLog(db, { validate: false });
    let page;
    try {
      page = source.replicaPageSync(0, 3);
    } finally {
      source.close();
      db.close();
    }
    const streams = new Map<string, StreamRow>(page.streams.map((s) => [s.stream_id, s]));
    const rows: EventRow[] = page.events;
    const { schema } = pgTarget();
    const store = await openStore(schema);
    await expect(store.events.appendStored(rows, streams, { expectedHead: 5 })).rejects.toThrow(/the log is at position 0, not 5: another process wrote to it/);
    expect(await store.events.headPosition()).toBe(0);
    expect((await store.events.appendStored(rows, streams, { expectedHead: 0 })).map((e) => e.position)).toEqual(rows.map((r) => r.position));
    expect(await store.events.headPosition()).toBe(rows.at(-1)!.position);

    const file = join(tempDir(), 'plain.db');
    const target: Db = openDatabase(file);
    const log = new SqliteEventLog(target, { handlers: [inlineHandler()], validate: false });
    try {
      rebuildProjections(target);
      expect(() => log.appendStored(rows, streams, { expectedHead: 1 })).toThrow(/the log is at position 0, not 1/);
      expect(log.headPositionSync()).toBe(0);
      log.appendStored(rows, streams, { expectedHead: 0 });
      expect(log.headPositionSync()).toBe(rows.at(-1)!.position);
      expect(await new SqliteLeaseStore(target).all()).toEqual([]);
    } finally {
      log.close();
      target.close();
    }
  });
});
