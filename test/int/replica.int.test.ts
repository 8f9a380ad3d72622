/**
 * The local SQLite replica of a PostgreSQL log (issue 15, option (c) of docs/design/postgres.md;
 * src/runtime/replica.ts): appends made through a PostgreSQL store reach the replica, whose
 * `events`, `streams` and projection tables are then exactly those of a plain SqliteEventLog that
 * made the same appends; other processes' appends arrive through `events$` alone; an append through
 * `ReplicatedEventStore` is in the replica when it resolves; several replicas on one file (in one
 * process and in several) copy every event once; a replica of another log, or of a log behind it,
 * is refused with a message saying what to do.
 *
 * PostgreSQL comes from LOOPS_TEST_PG_URL (default postgres://postgres@127.0.0.1:5432/test). Not
 * answering: these tests are skipped, loudly, or fail under CI=true (test/helpers/prerequisite.ts).
 * Every log gets a schema of its own (loops_test_<random>), dropped when its test ends. The
 * PostgreSQL side runs no projections here: the replica runs SQLite's.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildSync } from 'esbuild';
import { filter, firstValueFrom, timeout } from 'rxjs';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { upcast } from '../../src/events/catalog.js';
import { openDatabase, type Db } from '../../src/events/db.js';
import { LoopsError } from '../../src/events/errors.js';
import { SqliteEventLog, type ReplicaPage } from '../../src/events/sqlite-log.js';
import type { AppendOptions, EventStore, NewEvent } from '../../src/events/types.js';
import { inlineHandler, projections } from '../../src/projections/registry.js';
import { rebuildProjections } from '../../src/runtime/admin/projections.js';
import { Replica, ReplicaMismatchError, ReplicatedEventStore, type ReplicaOptions, type ReplicaSource } from '../../src/runtime/replica.js';
import { openReader } from '../../src/runtime/store.js';
import { at, loopEv } from '../helpers/events.js';
import { goldenScenarios, loadGolden, type GoldenEvent } from '../helpers/golden.js';
import { DEFAULT_PG_URL, PG_URL, adminClient, dropSchemas, pgLog, pgReachable } from '../helpers/pg.js';
import { requirePrerequisite } from '../helpers/prerequisite.js';
import { tempDir } from '../helpers/tmp.js';

const pgVerdict = await pgReachable();
const havePg = requirePrerequisite(`PostgreSQL for the replica's tests (LOOPS_TEST_PG_URL, default ${DEFAULT_PG_URL})`, () => pgVerdict);

const ROOT = join(import.meta.dirname, '..', '..');

/** Schemas made by this file's run; each is dropped when its test ends, and any left over at the end. */
const schemas: string[] = [];
afterAll(async () => {
  if (havePg) await dropSchemas(schemas);
});

/** A replica, ended when the test ends. */
async function openReplica(options: ReplicaOptions): Promise<Replica> {
  const replica = await Replica.open(options);
  onTestFinished(() => replica.end());
  return replica;
}

/** A plain SQLite log with the projections (the reference a replica must equal), closed when the test ends. */
async function referenceLog(): Promise<{ db: Db; log: SqliteEventLog }> {
  const reader = await openReader(join(tempDir('loops-replica-ref-'), 'data'));
  const log = new SqliteEventLog(reader.db, { handlers: [inlineHandler()] });
  onTestFinished(() => {
    log.close();
    reader.close();
  });
  return { db: reader.db, log };
}

type Row = Record<string, unknown>;

/** Everything a replica holds, in an order that does not depend on how rows were written. */
function contents(db: Db): { userVersion: unknown; events: Row[]; streams: Row[]; projections: Row[]; tables: Record<string, string[]> } {
  const tables: Record<string, string[]> = {};
  for (const projection of projections) {
    for (const table of projection.tables) {
      tables[table.name] = (db.prepare(`SELECT * FROM ${table.name}`).all() as Row[]).map((row) => JSON.stringify(row)).sort();
    }
  }
  return {
    userVersion: db.pragma('user_version', { simple: true }),
    events: db.prepare('SELECT * FROM events ORDER BY position').all() as Row[],
    streams: db.prepare('SELECT * FROM streams ORDER BY stream_id').all() as Row[],
    projections: db.prepare('SELECT * FROM projections ORDER BY name').all() as Row[],
    tables,
  };
}

// ── golden logs as appends ───────────────────────────────────────────────────

const scenarios = goldenScenarios();

interface Append {
  streamId: string;
  events: NewEvent[];
  options: AppendOptions;
}

/**
 * The appends that make a golden log, in its order: each run of one stream's consecutive events is
 * one append (an older schema version's payload upcast: an append is always of the current one).
 * An archived stream's history (moved to an archive file when it was recorded, not in the golden)
 * is made up from a stream of the same kind that kept its events — one event per append, so that
 * a replica catching up between them holds part of it when the tombstone comes — and appended
 * when the stream was created, so its `stream.archived` tombstone archives real events.
 */
function goldenAppends(name: string): Append[] {
  const golden = loadGolden(name);
  const byId = new Map(golden.streams.map((s) => [s.stream_id, s]));
  const toNew = (e: Pick<GoldenEvent, 'type' | 'v' | 'data' | 'meta' | 'at' | 'state'>): NewEvent => ({ type: e.type, data: upcast(e.type, e.v, e.data), meta: e.meta, at: e.at, state: e.state });
  const creation = (streamId: string): Partial<AppendOptions> => {
    const stream = byId.get(streamId)!;
    return { kind: stream.kind, ...(stream.machine_id !== null ? { machine: { id: stream.machine_id, version: stream.machine_version! } } : {}) };
  };
  const made: Array<{ at: string; appends: Append[] }> = [];
  for (const stream of golden.streams) {
    const events = golden.events.filter((e) => e.stream_id === stream.stream_id);
    if (events[0]?.type !== 'stream.archived') continue;
    const through = (events[0].data as { toVersion: number }).toVersion;
    const [kind, id] = stream.stream_id.split(':') as [string, string];
    const template = golden.streams
      .map((s) => golden.events.filter((e) => e.stream_id === s.stream_id))
      .find((es) => es[0]?.stream_id.startsWith(`${kind}:`) && es[0].version === 1 && es.length >= through)!;
    const templateId = template[0]!.stream_id.slice(kind.length + 1);
    made.push({
      at: stream.created_at,
      appends: template.slice(0, through).map((e, i) => ({
        streamId: stream.stream_id,
        events: [toNew({ ...JSON.parse(JSON.stringify(e).replaceAll(templateId, id)) as GoldenEvent, at: stream.created_at })],
        options: { expectedVersion: i, ...(i === 0 ? creation(stream.stream_id) : {}) },
      })),
    });
  }
  const appends: Append[] = [];
  const versions = new Map<string, number>();
  const note = (append: Append) => {
    appends.push(append);
    versions.set(append.streamId, (append.options.archivedThrough ?? append.options.expectedVersion) + append.events.length);
  };
  for (let i = 0; i < golden.events.length; ) {
    const first = golden.events[i]!;
    while (made.length > 0 && made[0]!.at < first.at) for (const append of made.shift()!.appends) note(append);
    let j = i + 1;
    if (first.type !== 'stream.archived') while (j < golden.events.length && golden.events[j]!.stream_id === first.stream_id && golden.events[j]!.type !== 'stream.archived') j++;
    const group = golden.events.slice(i, j);
    i = j;
    const known = versions.get(first.stream_id);
    const options: AppendOptions =
      first.type === 'stream.archived'
        ? { expectedVersion: known!, archivedThrough: (first.data as { toVersion: number }).toVersion }
        : { expectedVersion: known ?? 0, ...(known === undefined ? creation(first.stream_id) : {}) };
    note({ streamId: first.stream_id, events: group.map(toNew), options });
  }
  for (const rest of made) for (const append of rest.appends) note(append);
  return appends;
}

/** A ReplicaSource whose `replicaPage` calls each wait until `parties` of them are waiting (so that replicas read the same page). */
function together(source: ReplicaSource, parties: number): ReplicaSource {
  let waiting: Array<() => void> = [];
  return new Proxy(source, {
    get(target, key, receiver) {
      if (key !== 'replicaPage') return Reflect.get(target, key, receiver) as unknown;
      return async (after: number, limit: number, check?: number): Promise<ReplicaPage> => {
        if (limit > 0) {
          await new Promise<void>((resolve) => {
            waiting.push(resolve);
            if (waiting.length === parties) {
              for (const go of waiting) go();
              waiting = [];
            }
            // A party that failed never comes: the others go on alone (the test then fails on its counts, not a hang).
            setTimeout(resolve, 5000).unref();
          });
        }
        return target.replicaPage(after, limit, check);
      };
    },
  });
}

const paused = (reason: string, ms = 0): NewEvent => ({ type: 'loop.paused', data: { reason }, at: at(ms), state: 'paused' });
const created = (loopId: string, name: string): NewEvent => ({ ...loopEv.created({ loopId, name }), state: 'active' });
const loopName = (db: Db, loopId: string) => (db.prepare('SELECT name FROM loops WHERE id = ?').get(loopId) as { name: string } | undefined)?.name;

describe.skipIf(!havePg)('replica of a PostgreSQL log', () => {
  describe.each(scenarios)('golden %s, appended through PostgreSQL', (name) => {
    it('reaches the replica, which then equals a SQLite log that made the same appends: events, streams, every projection table', async () => {
      const appends = goldenAppends(name);
      const ref = await referenceLog();
      const pg = await pgLog(schemas).open();
      const dir = tempDir('loops-replica-');
      // Caught up after every append (the live path: a tombstone finds the whole history), after
      // every third (part of an archived history), and only at the end (none of it).
      const live = await openReplica({ file: join(dir, 'live.db'), source: pg.events, follow: false });
      const third = await openReplica({ file: join(dir, 'third.db'), source: pg.events, follow: false });
      const cold = await openReplica({ file: join(dir, 'cold.db'), source: pg.events, follow: false });
      let n = 0;
      for (const append of appends) {
        const [mine, theirs] = await Promise.all([ref.log.append(append.streamId, append.events, append.options), pg.events.append(append.streamId, append.events, append.options)]);
        expect(theirs.position, `${name}: position of the append to ${append.streamId}`).toBe(mine.position);
        expect(await live.catchUp(theirs.position)).toBe(theirs.position);
        if (++n % 3 === 0) await third.catchUp();
      }
      await third.catchUp();
      const head = await cold.catchUp();
      expect(head).toBe(await pg.events.headPosition());

      const expected = contents(ref.db);
      expect(expected.events.length, `${name}: no events`).toBeGreaterThan(0);
      for (const [which, replica] of [['live', live], ['every third', third], ['cold', cold]] as const) {
        const actual = contents(replica.db);
        expect(actual.events, `${name}, ${which}: events`).toStrictEqual(expected.events);
        expect(actual.streams, `${name}, ${which}: streams`).toStrictEqual(expected.streams);
        for (const table of Object.keys(expected.tables)) expect(actual.tables[table], `${name}, ${which}: table ${table}`).toStrictEqual(expected.tables[table]);
        expect(actual.projections, `${name}, ${which}: projection versions`).toStrictEqual(expected.projections);
        expect(actual.userVersion, `${name}, ${which}: log format`).toBe(expected.userVersion);
        expect(replica.head, `${name}, ${which}: head`).toBe(head);
      }
      // The copy is the source's rows, byte for byte.
      const admin = await adminClient();
      onTestFinished(() => admin.end());
      const pgEvents = (await admin.query(`SELECT position, stream_id, version, type, v, data, meta, at, state FROM "${pg.schema}".events ORDER BY position`)).rows as Row[];
      expect(contents(cold.db).events).toStrictEqual(pgEvents);
      expect(cold.stats.applied).toBe(pgEvents.length);
    });
  });

  it('copies events verbatim, one of an older schema version too (never upcast and written back), and its projections equal a rebuild', async () => {
    const log = pgLog(schemas);
    const pg = await log.open();
    const golden = loadGolden('cancelled-workflow');
    expect(golden.events.some((e) => e.v === 1 && e.type === 'wfrun.started'), 'the golden holds a wfrun.started v1').toBe(true);
    // Written as an older loops wrote them: straight into the tables.
    const admin = await adminClient();
    onTestFinished(() => admin.end());
    await admin.query('BEGIN');
    for (const e of golden.events) {
      await admin.query(`INSERT INTO "${log.schema}".events (position, stream_id, version, type, v, data, meta, at, state) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, [
        e.position,
        e.stream_id,
        e.version,
        e.type,
        e.v,
        JSON.stringify(e.data),
        JSON.stringify(e.meta),
        e.at,
        e.state === null ? null : JSON.stringify(e.state),
      ]);
    }
    for (const s of golden.streams) {
      await admin.query(`INSERT INTO "${log.schema}".streams (stream_id, kind, version, machine_id, machine_version, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`, [
        s.stream_id,
        s.kind,
        s.version,
        s.machine_id,
        s.machine_version,
        s.created_at,
        s.updated_at,
      ]);
    }
    await admin.query(`UPDATE "${log.schema}".log_head SET position = $1`, [Math.max(...golden.events.map((e) => e.position))]);
    await admin.query('COMMIT');

    const replica = await openReplica({ file: join(tempDir('loops-replica-'), 'replica.db'), source: pg.events, follow: false });
    const pgEvents = (await admin.query(`SELECT position, stream_id, version, type, v, data, meta, at, state FROM "${log.schema}".events ORDER BY position`)).rows as Row[];
    const pgStreams = (await admin.query(`SELECT * FROM "${log.schema}".streams ORDER BY stream_id`)).rows as Row[];
    const copy = contents(replica.db);
    expect(copy.events).toStrictEqual(pgEvents);
    expect(copy.streams).toStrictEqual(pgStreams);
    expect(copy.events.find((e) => e.type === 'wfrun.started')).toMatchObject({ v: 1 });

    // A SQLite database holding the same rows, its projections rebuilt from them.
    const rebuilt = openDatabase(join(tempDir('loops-replica-rebuilt-'), 'loops.db'));
    onTestFinished(() => void rebuilt.close());
    const insert = rebuilt.prepare('INSERT INTO events (position, stream_id, version, type, v, data, meta, at, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)');
    for (const e of pgEvents) insert.run(...(Object.values(e) as Array<string | number | null>));
    rebuildProjections(rebuilt);
    expect(copy.tables).toStrictEqual(contents(rebuilt).tables);
  });

  it("follows another process's appends through events$, without being asked to catch up", async () => {
    const log = pgLog(schemas);
    const [here, elsewhere] = [await log.open(), await log.open()];
    const replica = await openReplica({ file: join(tempDir('loops-replica-'), 'replica.db'), source: here.events });
    const first = await elsewhere.events.append('loop:loop_a', [created('loop_a', 'from-elsewhere')], { expectedVersion: 0, kind: 'loop' });
    await firstValueFrom(replica.head$.pipe(filter((head) => head >= first.position), timeout(10_000)));
    expect(loopName(replica.db, 'loop_a')).toBe('from-elsewhere');

    // A burst: 50 appends by the other process, caught up in far fewer catch-ups (one at a time).
    const pagesBefore = replica.stats.pages;
    let last = 0;
    for (let i = 0; i < 50; i++) last = (await elsewhere.events.append('loop:loop_a', [paused(`p${i}`, i)], { expectedVersion: i + 1 })).position;
    await firstValueFrom(replica.head$.pipe(filter((head) => head >= last), timeout(10_000)));
    expect(replica.db.prepare("SELECT count(*) AS n FROM events WHERE stream_id = 'loop:loop_a'").get()).toEqual({ n: 51 });
    expect(replica.stats.applied).toBe(51);
    expect(replica.stats.pages - pagesBefore).toBeLessThanOrEqual(50);
  });

  it('a catch-up that failed (the source unreachable for a moment) is tried again by itself', async () => {
    const pg = await pgLog(schemas).open();
    let failures = 1;
    const flaky = new Proxy(pg.events, {
      get(target, key, receiver) {
        if (key !== 'replicaPage') return Reflect.get(target, key, receiver) as unknown;
        return (after: number, limit: number, check?: number) =>
          limit > 0 && failures-- > 0 ? Promise.reject(new Error('connection refused (on purpose)')) : target.replicaPage(after, limit, check);
      },
    });
    const replica = await openReplica({ file: join(tempDir('loops-replica-'), 'replica.db'), source: flaky, catchUp: false, retryMs: 50 });
    // One event, and nothing after it: only the retry brings it in.
    const { position } = await pg.events.append('loop:loop_a', [created('loop_a', 'late')], { expectedVersion: 0, kind: 'loop' });
    await firstValueFrom(replica.head$.pipe(filter((head) => head >= position), timeout(10_000)));
    expect(failures).toBe(-1);
    expect(loopName(replica.db, 'loop_a')).toBe('late');
    expect(replica.lastError).toBeNull();
  });

  it('read-your-writes: an append or a batch through ReplicatedEventStore is in the replica when it resolves', async () => {
    const pg = await pgLog(schemas).open();
    // Not following: nothing but the store's own catching up brings the events in.
    const replica = await openReplica({ file: join(tempDir('loops-replica-'), 'replica.db'), source: pg.events, follow: false });

    // Straight to PostgreSQL, the replica does not have it. (Checked before the store exists: the
    // store relays every source event, this one too, and catches the replica up to it.)
    await pg.events.append('loop:loop_0', [created('loop_0', 'behind')], { expectedVersion: 0, kind: 'loop' });
    expect(loopName(replica.db, 'loop_0')).toBeUndefined();
    const store: EventStore = new ReplicatedEventStore(pg.events, replica);

    const one = await store.append('loop:loop_1', [created('loop_1', 'mine')], { expectedVersion: 0, kind: 'loop', machine: { id: 'loops.loop', version: 1 } });
    expect(loopName(replica.db, 'loop_1')).toBe('mine');
    expect(replica.head).toBeGreaterThanOrEqual(one.position);
    expect(replica.db.prepare("SELECT kind, machine_id, machine_version FROM streams WHERE stream_id = 'loop:loop_1'").get()).toEqual({ kind: 'loop', machine_id: 'loops.loop', machine_version: 1 });

    // A group commit of several appends made together.
    await Promise.all([2, 3, 4].map((i) => store.append(`loop:loop_${i}`, [created(`loop_${i}`, `group-${i}`)], { expectedVersion: 0, kind: 'loop' })));
    expect([2, 3, 4].map((i) => loopName(replica.db, `loop_${i}`))).toEqual(['group-2', 'group-3', 'group-4']);

    // A batch: its appends are in the replica when it resolves (not before its commit).
    await store.batch(async (batch) => {
      await store.append('loop:loop_5', [created('loop_5', 'batched-5')], { expectedVersion: 0, kind: 'loop', batch });
      await store.append('loop:loop_6', [created('loop_6', 'batched-6')], { expectedVersion: 0, kind: 'loop', batch });
      expect(loopName(replica.db, 'loop_5')).toBeUndefined();
    });
    expect([loopName(replica.db, 'loop_5'), loopName(replica.db, 'loop_6')]).toEqual(['batched-5', 'batched-6']);

    // settled(): an append nobody awaited is in the replica.
    void store.append('loop:loop_7', [created('loop_7', 'unawaited')], { expectedVersion: 0, kind: 'loop' });
    await store.settled();
    expect(loopName(replica.db, 'loop_7')).toBe('unawaited');

    // Reads go to the log.
    expect(await store.headPosition()).toBe(await pg.events.headPosition());
    expect((await store.readStream('loop:loop_0')).length).toBe(1);

    // events$: the source's events — its own and, here, one appended behind its back — each
    // published once the replica holds it: a subscriber finds it in the tables.
    const found: Array<string | null | undefined> = [];
    const sub = store.events$.subscribe((e) => found.push(loopName(replica.db, e.streamId.slice('loop:'.length))));
    onTestFinished(() => sub.unsubscribe());
    const arrived = firstValueFrom(store.events$.pipe(filter((e) => e.streamId === 'loop:loop_9')));
    await pg.events.append('loop:loop_8', [created('loop_8', 'elsewhere')], { expectedVersion: 0, kind: 'loop' });
    await store.append('loop:loop_9', [created('loop_9', 'mine-again')], { expectedVersion: 0, kind: 'loop' });
    await arrived;
    expect(found).toEqual(['elsewhere', 'mine-again']);
  });

  it('two replicas on one file, catching up together in one process, copy every event once', async () => {
    const pg = await pgLog(schemas).open();
    for (let i = 0; i < 25; i++) await pg.events.append(`loop:loop_${i}`, [created(`loop_${i}`, `n${i}`), paused('x', 1)], { expectedVersion: 0, kind: 'loop' });
    const file = join(tempDir('loops-replica-'), 'replica.db');
    const source = together(pg.events, 2);
    const options = { file, source, follow: false, catchUp: false, pageSize: 20 } as const;
    const [a, b] = [await openReplica(options), await openReplica(options)];
    // Both read each page before either writes it: one writes it, the other finds the head moved.
    const [ha, hb] = await Promise.all([a.catchUp(), b.catchUp()]);
    expect([ha, hb]).toEqual([50, 50]);
    expect(a.stats.applied + b.stats.applied).toBe(50);
    expect(a.stats.skipped + b.stats.skipped).toBe(50);
    expect(a.db.prepare('SELECT count(*) AS n, count(DISTINCT position) AS d FROM events').get()).toEqual({ n: 50, d: 50 });
    expect(a.db.prepare('SELECT count(*) AS n FROM loops').get()).toEqual({ n: 25 });
  });

  it('replicas in several processes on one file, catching up together, copy every event once', async () => {
    const log = pgLog(schemas);
    const pg = await log.open();
    const total = 600;
    for (let i = 0; i < total / 3; i++) {
      await pg.events.append(`loop:loop_${i}`, [created(`loop_${i}`, `n${i}`), paused('a', 1), paused('b', 2)], { expectedVersion: 0, kind: 'loop' });
    }
    // The replica as a process would load it: bundled from the sources (packages left to node_modules).
    const dir = join(ROOT, 'node_modules', '.cache', `loops-replica-${process.pid}-${Date.now()}`);
    mkdirSync(dir, { recursive: true });
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(
      join(dir, 'entry.ts'),
      `export { openPgStore } from ${JSON.stringify(join(ROOT, 'src', 'events', 'pg', 'index.ts'))};
       export { Replica } from ${JSON.stringify(join(ROOT, 'src', 'runtime', 'replica.ts'))};`,
    );
    buildSync({ entryPoints: [join(dir, 'entry.ts')], bundle: true, platform: 'node', format: 'esm', packages: 'external', outfile: join(dir, 'replica.mjs'), logLevel: 'silent' });
    const script = join(dir, 'main.mjs');
    writeFileSync(
      script,
      `import { openPgStore, Replica } from './replica.mjs';
       const [url, schema, file] = process.argv.slice(2);
       const store = await openPgStore({ url, schema });
       const replica = await Replica.open({ file, source: store.events, follow: false, catchUp: false, pageSize: 25 });
       // Start together: at the first whole second after the parent's go.
       await new Promise((resolve) => setTimeout(resolve, Number(process.argv[5]) - Date.now()));
       const head = await replica.catchUp();
       console.log(JSON.stringify({ head, ...replica.stats }));
       await replica.end();
       store.events.close();
      `,
    );
    const file = join(tempDir('loops-replica-'), 'replica.db');
    const startAt = Date.now() + 3000;
    const run = () =>
      new Promise<{ code: number | null; out: string }>((resolve) => {
        const child = spawn(process.execPath, [script, PG_URL, log.schema, file, String(startAt)], { stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        child.stdout.on('data', (c: Buffer) => (out += c.toString()));
        child.stderr.on('data', (c: Buffer) => (out += c.toString()));
        child.on('exit', (code) => resolve({ code, out }));
      });
    const results = await Promise.all([run(), run(), run()]);
    for (const r of results) expect(r.code, r.out).toBe(0);
    const stats = results.map((r) => JSON.parse(r.out) as { head: number; applied: number; skipped: number; pages: number });
    expect(stats.map((s) => s.head)).toEqual([total, total, total]);
    expect(stats.reduce((sum, s) => sum + s.applied, 0)).toBe(total);
    const db = openDatabase(file);
    onTestFinished(() => void db.close());
    expect(db.prepare('SELECT count(*) AS n, count(DISTINCT position) AS d FROM events').get()).toEqual({ n: total, d: total });
    expect(db.prepare('SELECT count(*) AS n FROM loops').get()).toEqual({ n: total / 3 });
    expect(db.prepare('SELECT position FROM replica_head').get()).toEqual({ position: total });
  }, 60_000);

  describe('refuses a source it cannot follow, saying what to do', () => {
    const refusal = (what: RegExp) => expect.objectContaining({ name: 'ReplicaMismatchError', message: expect.stringMatching(what), hint: expect.stringMatching(/delete .*replica\.db/) });

    it('another log: another schema, or the same schema dropped and made again', async () => {
      const first = pgLog(schemas);
      const other = pgLog(schemas);
      const [a, b] = [await first.open(), await other.open()];
      await a.events.append('loop:loop_a', [paused('a')], { expectedVersion: 0, kind: 'loop' });
      const file = join(tempDir('loops-replica-'), 'replica.db');
      (await Replica.open({ file, source: a.events, follow: false })).close();
      const error = await Replica.open({ file, source: b.events, follow: false }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ReplicaMismatchError);
      expect(error).toBeInstanceOf(LoopsError);
      expect(error).toEqual(refusal(new RegExp(`is a copy of the log in schema ${first.schema} .* not of the one in schema ${other.schema}`)));

      await a.end();
      await dropSchemas([first.schema]);
      const again = await first.open();
      await again.events.append('loop:loop_a', [paused('a')], { expectedVersion: 0, kind: 'loop' });
      await expect(Replica.open({ file, source: again.events, follow: false })).rejects.toEqual(refusal(/is a copy of the log in schema/));
    });

    it('a log behind the replica (restored from an older backup), and one written since', async () => {
      const log = pgLog(schemas);
      const pg = await log.open();
      for (let i = 0; i < 5; i++) await pg.events.append(`loop:loop_${i}`, [paused(`${i}`)], { expectedVersion: 0, kind: 'loop' });
      const file = join(tempDir('loops-replica-'), 'replica.db');
      const replica = await Replica.open({ file, source: pg.events, follow: false });
      onTestFinished(() => replica.close());
      expect(replica.head).toBe(5);
      // The log as a backup taken at position 2 restores it: same tables, fewer events.
      const admin = await adminClient();
      onTestFinished(() => admin.end());
      await admin.query(`DELETE FROM "${log.schema}".events WHERE position > 2; DELETE FROM "${log.schema}".streams WHERE version = 1 AND stream_id NOT IN (SELECT stream_id FROM "${log.schema}".events); UPDATE "${log.schema}".log_head SET position = 2`);
      const restored = await log.open();
      await expect(replica.catchUp()).rejects.toEqual(refusal(/holds the log up to position 5, but the log in schema .* ends at position 2/));
      await expect(Replica.open({ file, source: restored.events, follow: false })).rejects.toEqual(refusal(/ends at position 2/));
      // Written since the restore, past the replica's head: the event at its last position is another one.
      for (let i = 0; i < 5; i++) await restored.events.append(`loop:other_${i}`, [paused(`${i}`)], { expectedVersion: 0, kind: 'loop' });
      await expect(Replica.open({ file, source: restored.events, follow: false })).rejects.toEqual(refusal(/copied loop:loop_4 version 1 at position 5, but the log .* holds loop:other_2 version 1 there/));
    });

    it('a database that holds a log of its own', async () => {
      const pg = await pgLog(schemas).open();
      const file = join(tempDir('loops-replica-'), 'replica.db');
      const db = openDatabase(file);
      const own = new SqliteEventLog(db);
      await own.append('loop:mine', [paused('mine')], { expectedVersion: 0, kind: 'loop' });
      own.close();
      db.close();
      await expect(Replica.open({ file, source: pg.events, follow: false })).rejects.toEqual(refusal(/holds a log of its own/));
    });
  });
});
