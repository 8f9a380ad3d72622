/**
 * The store contract (issue 15): the same cases run against the SQLite store (sqlite-log.ts,
 * sqlite-leases.ts) and the PostgreSQL store (src/events/pg), so the second says exactly what the
 * first does — append and read, the compare-and-set, the guards, batches and group commit,
 * `events$`, reads by position. Then what only PostgreSQL has to prove, because its writers do not
 * take turns on their own (docs/design/postgres.md, "Where today's code relies on SQLite's single
 * writer"): positions in commit order, the lease take race, the fence against a takeover, other
 * processes' events through LISTEN/NOTIFY and polling when LISTEN is lost, and its error messages.
 *
 * PostgreSQL comes from LOOPS_TEST_PG_URL (default postgres://postgres@127.0.0.1:5432/test). Not
 * answering: these tests are skipped, loudly, or fail under CI=true (test/helpers/prerequisite.ts).
 * Every store under test gets a schema of its own (loops_test_<random>), dropped when it ends.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildSync } from 'esbuild';
import { firstValueFrom, filter, take, toArray, type Observable } from 'rxjs';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { openDatabase, type Db } from '../../src/events/db.js';
import { ClaimLostError, ConcurrencyConflictError, FormatVersionError, LeaseLostError, LoopsError, ValidationError, uniqueViolation } from '../../src/events/errors.js';
import { PgEventStore, openPgStore, pgPlaceholders } from '../../src/events/pg/index.js';
import { SqliteLeaseStore } from '../../src/events/sqlite-leases.js';
import { SqliteEventLog } from '../../src/events/sqlite-log.js';
import type { AppendResult, Batch, EventStore, InlineHandler, LeaseStore, NewEvent, StoredEvent } from '../../src/events/types.js';
import { inlineHandler, projections as projectProjections } from '../../src/projections/registry.js';
import { at, loopEv, T0 } from '../helpers/events.js';
import { DEFAULT_PG_URL, PG_URL, adminClient, dropSchemas, lockWaiters, pgLog, pgReachable, testSchemaName, waitForDb } from '../helpers/pg.js';
import { requirePrerequisite } from '../helpers/prerequisite.js';

const pgVerdict = await pgReachable();
const havePg = requirePrerequisite(`PostgreSQL for the PostgreSQL store's tests (LOOPS_TEST_PG_URL, default ${DEFAULT_PG_URL})`, () => pgVerdict);

const ROOT = join(import.meta.dirname, '..', '..');

// ── the two stores, behind one shape ─────────────────────────────────────────

interface Handle {
  events: EventStore;
  leases: LeaseStore;
}

interface Log extends Handle {
  /** Another handle on the same log, as another process would open it. */
  another(): Promise<Handle>;
  /** Rows of a query in SQL both dialects accept (`?` placeholders), on a connection of the test's own. */
  rows<T>(sql: string, params?: ReadonlyArray<string | number | null>): Promise<T[]>;
}

interface Backend {
  name: 'sqlite' | 'postgres';
  available: boolean;
  /**
   * A new log. `projections`: with the project's projections (src/projections), kept as each store
   * keeps them for a runtime — on SQLite their DDL run and their inline handler first; on
   * PostgreSQL `openPgStore({ projections })` — before `handlers` and `ddl`.
   */
  open(options?: { handlers?: InlineHandler[]; ddl?: string[]; projections?: boolean }): Promise<Log>;
}

/** Schemas made by this file's run; each is dropped when its test ends, and any left over at the end. */
const schemas: string[] = [];
afterAll(async () => {
  if (havePg) await dropSchemas(schemas);
});

const sqlite: Backend = {
  name: 'sqlite',
  available: true,
  async open({ handlers: own = [], ddl = [], projections = false } = {}) {
    const dir = mkdtempSync(join(tmpdir(), 'loops-contract-'));
    const file = join(dir, 'loops.db');
    const db = openDatabase(file);
    const handlers = projections ? [inlineHandler(), ...own] : own;
    for (const sql of [...(projections ? projectProjections.flatMap((p) => p.ddl) : []), ...ddl]) db.exec(sql);
    const dbs: Db[] = [db];
    const logs: SqliteEventLog[] = [new SqliteEventLog(db, { handlers })];
    onTestFinished(async () => {
      for (const log of logs) {
        await log.settled();
        log.close();
      }
      for (const d of dbs) d.close();
      rmSync(dir, { recursive: true, force: true });
    });
    return {
      events: logs[0]!,
      leases: new SqliteLeaseStore(db),
      async another() {
        const db2 = openDatabase(file);
        dbs.push(db2);
        const log = new SqliteEventLog(db2, { handlers });
        logs.push(log);
        return { events: log, leases: new SqliteLeaseStore(db2) };
      },
      async rows<T>(sql: string, params: ReadonlyArray<string | number | null> = []) {
        return db.prepare(sql).all(...params) as T[];
      },
    };
  },
};

const postgres: Backend = {
  name: 'postgres',
  available: havePg,
  async open({ handlers = [], ddl = [], projections = false } = {}) {
    const log = pgLog(schemas, { handlers, ...(projections ? { projections: projectProjections } : {}) });
    const first = await log.open();
    const admin = await adminClient();
    onTestFinished(() => admin.end());
    await admin.query(`SET search_path TO "${log.schema}"`);
    for (const sql of ddl) await admin.query(sql);
    return {
      events: first.events,
      leases: first.leases,
      async another() {
        const store = await log.open();
        return { events: store.events, leases: store.leases };
      },
      async rows<T>(sql: string, params: ReadonlyArray<string | number | null> = []) {
        return (await admin.query(pgPlaceholders(sql), [...params])).rows as T[];
      },
    };
  },
};

// ── events ───────────────────────────────────────────────────────────────────

const paused = (reason: string | null, ms = 0): NewEvent => ({ type: 'loop.paused', data: { reason }, at: at(ms) });
const resumed = (ms = 0): NewEvent => ({ type: 'loop.resumed', data: { reason: null, nextRunAt: null }, at: at(ms) });
const reasons = (events: StoredEvent[]) => events.map((e) => (e.data as { reason: string | null }).reason);

/** The next `n` events of `events$`, as a promise (subscribed now). */
function nextEvents(events$: Observable<StoredEvent>, n: number): Promise<StoredEvent[]> {
  return firstValueFrom(events$.pipe(take(n), toArray()));
}

/** Rejection reasons of settled promises, and how many were fulfilled. */
function tally<T>(results: PromiseSettledResult<T>[]): { ok: T[]; errors: unknown[] } {
  return {
    ok: results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : [])),
    errors: results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : [])),
  };
}

// A projection of the test's own, in SQL both dialects accept: pauses counted per stream, and a
// run queue (what the `queued` guard checks) fed by reasons `queue <id>` and emptied by `claim <id>`.
const PROJECTION_DDL = [
  'CREATE TABLE pauses (stream_id TEXT PRIMARY KEY, n INTEGER NOT NULL, last_reason TEXT)',
  'CREATE TABLE run_queue (run_id TEXT PRIMARY KEY)',
];
const projection: InlineHandler = (event) => {
  if (event.type !== 'loop.paused') return [];
  const reason = (event.data as { reason: string | null }).reason ?? '';
  const statements = [
    {
      sql: 'INSERT INTO pauses (stream_id, n, last_reason) VALUES (?, 1, ?) ON CONFLICT (stream_id) DO UPDATE SET n = pauses.n + 1, last_reason = excluded.last_reason',
      params: [event.streamId, reason],
    },
  ];
  const [verb, id] = reason.split(' ');
  if (verb === 'queue' && id) statements.push({ sql: 'INSERT INTO run_queue (run_id) VALUES (?)', params: [id] });
  if (verb === 'claim' && id) statements.push({ sql: 'DELETE FROM run_queue WHERE run_id = ?', params: [id] });
  return statements;
};

// ── the contract ─────────────────────────────────────────────────────────────

describe.each([sqlite, postgres])('store contract: $name', (backend) => {
  describe.skipIf(!backend.available)('append and read', () => {
    it('round trip: versions, positions, stream info; what is stored is byte for byte the JSON.stringify of what was appended', async () => {
      const log = await backend.open();
      const tricky = `naïve ☃ 🎉 "quoted" \\ back\nslash\ttab \u0000 nul \u2028 \ud800 lone ${'x'.repeat(3000)}`;
      const state = { z: 1, a: [1.5, 1e21, 0.1, -2], nested: { ключ: null, '': true } };
      const meta = { runnerId: 'r1', correlationId: 'c', leaseToken: 7, by: { source: 'cli', user: 'u', host: 'h', loops: '0.1.0' } };
      const first = await log.events.append('loop:a', [{ ...paused(tricky), meta, state }, paused('2', 5)], {
        expectedVersion: 0,
        kind: 'loop',
        machine: { id: 'loop', version: 3 },
      });
      expect(first).toMatchObject({ streamId: 'loop:a', version: 2, position: 2 });
      expect(first.events.map((e) => [e.version, e.position])).toEqual([
        [1, 1],
        [2, 2],
      ]);
      expect(await log.events.append('loop:b', [paused('b')], { expectedVersion: 0, kind: 'loop' })).toMatchObject({ version: 1, position: 3 });
      expect(await log.events.append('loop:a', [paused('3', 10)], { expectedVersion: 2 })).toMatchObject({ version: 3, position: 4 });

      const stream = await log.events.readStream('loop:a');
      expect(stream.map((e) => [e.version, e.position])).toEqual([
        [1, 1],
        [2, 2],
        [3, 4],
      ]);
      expect(stream[0]).toEqual({ position: 1, streamId: 'loop:a', version: 1, type: 'loop.paused', v: 1, data: { reason: tricky }, meta, at: at(0), state });
      expect(stream[0]).toEqual(first.events[0]);
      expect(stream[1]).toMatchObject({ meta: {}, state: null });
      expect((await log.events.readStream('loop:a', 3)).map((e) => e.version)).toEqual([3]);
      expect(await log.events.readStream('loop:none')).toEqual([]);
      expect(await log.events.streamInfo('loop:a')).toEqual({ streamId: 'loop:a', kind: 'loop', version: 3, machineId: 'loop', machineVersion: 3, createdAt: at(0), updatedAt: at(10) });
      expect(await log.events.streamInfo('loop:b')).toMatchObject({ machineId: null, machineVersion: null });
      expect(await log.events.streamInfo('loop:none')).toBeUndefined();

      const raw = await log.rows<Record<string, unknown>>('SELECT stream_id, version, type, v, data, meta, at, state FROM events ORDER BY position');
      expect(raw[0]).toEqual({ stream_id: 'loop:a', version: 1, type: 'loop.paused', v: 1, data: JSON.stringify({ reason: tricky }), meta: JSON.stringify(meta), at: at(0), state: JSON.stringify(state) });
      expect(raw[1]).toMatchObject({ data: '{"reason":"2"}', meta: '{}', state: null, at: at(5) });
    });

    it('an empty log: head 0, nothing to read', async () => {
      const log = await backend.open();
      expect(await log.events.headPosition()).toBe(0);
      expect(await log.events.readAll()).toEqual([]);
      expect(await log.events.streamsWithEvents(0, 10, ['loop.paused'])).toEqual([]);
    });

    it('refuses empty appends, invalid payloads, unknown types and a new stream without a kind, writing nothing', async () => {
      const log = await backend.open();
      await expect(log.events.append('loop:a', [], { expectedVersion: 0, kind: 'loop' })).rejects.toThrow(ValidationError);
      await expect(log.events.append('loop:a', [{ type: 'loop.paused', data: { reason: 5 }, at: at(0) }], { expectedVersion: 0, kind: 'loop' })).rejects.toThrow(/invalid loop\.paused event: reason: /);
      await expect(log.events.append('loop:a', [{ type: 'loop.nope', data: {}, at: at(0) }], { expectedVersion: 0, kind: 'loop' })).rejects.toThrow(/unknown event type/);
      await expect(log.events.append('loop:a', [paused('x')], { expectedVersion: 0 })).rejects.toThrow(/needs a kind/);
      expect(await log.events.headPosition()).toBe(0);
      expect(await log.events.streamInfo('loop:a')).toBeUndefined();
    });
  });

  describe.skipIf(!backend.available)('compare-and-set', () => {
    it('a stale expected version throws ConcurrencyConflictError and appends nothing', async () => {
      const log = await backend.open();
      await log.events.append('loop:a', [paused('1')], { expectedVersion: 0, kind: 'loop' });
      await log.events.append('loop:a', [paused('2')], { expectedVersion: 1 });
      for (const expectedVersion of [0, 1, 3]) {
        const caught = await log.events.append('loop:a', [paused('stale')], { expectedVersion, kind: 'loop' }).catch((e: unknown) => e);
        expect(caught).toBeInstanceOf(ConcurrencyConflictError);
        expect(caught).toMatchObject({ code: 'conflict', streamId: 'loop:a', expectedVersion, actualVersion: 2, retryable: true });
      }
      // A stream that does not exist is at version 0.
      await expect(log.events.append('loop:none', [paused('x')], { expectedVersion: 2 })).rejects.toMatchObject({ actualVersion: 0 });
      expect(reasons(await log.events.readStream('loop:a'))).toEqual(['1', '2']);
      expect(await log.events.headPosition()).toBe(2);
    });

    it('two creators of one new stream, on two handles at once: exactly one wins, the other conflicts', async () => {
      const log = await backend.open();
      const other = await log.another();
      for (let i = 0; i < 5; i++) {
        const streamId = `loop:new${i}`;
        const { ok, errors } = tally(
          await Promise.allSettled([
            log.events.append(streamId, [paused('mine')], { expectedVersion: 0, kind: 'loop' }),
            other.events.append(streamId, [paused('theirs')], { expectedVersion: 0, kind: 'loop' }),
          ]),
        );
        expect(ok).toHaveLength(1);
        expect(errors).toHaveLength(1);
        expect(errors[0]).toBeInstanceOf(ConcurrencyConflictError);
        expect(errors[0]).toMatchObject({ expectedVersion: 0, actualVersion: 1 });
        expect(await log.events.readStream(streamId)).toHaveLength(1);
      }
    });

    it('another handle whose expected version of an existing stream is stale conflicts, and reads what the first wrote', async () => {
      const log = await backend.open();
      const other = await log.another();
      await log.events.append('loop:a', [paused('1')], { expectedVersion: 0, kind: 'loop' });
      await log.events.append('loop:a', [paused('mine')], { expectedVersion: 1 });
      const caught = await other.events.append('loop:a', [paused('theirs')], { expectedVersion: 1 }).catch((e: unknown) => e);
      expect(caught).toBeInstanceOf(ConcurrencyConflictError);
      expect(caught).toMatchObject({ streamId: 'loop:a', expectedVersion: 1, actualVersion: 2 });
      expect(reasons(await other.events.readStream('loop:a'))).toEqual(['1', 'mine']);
      expect(await other.events.headPosition()).toBe(2);
    });

    it('two writers of an existing stream, on two handles at once, with the same expected version: exactly one wins; the other conflicts and says so; the stream has the winner\'s event only', async () => {
      const log = await backend.open();
      const other = await log.another();
      await log.events.append('loop:race', [paused('seed')], { expectedVersion: 0, kind: 'loop' });
      for (let round = 0; round < 5; round++) {
        const version = (await log.events.streamInfo('loop:race'))!.version;
        const write = (handle: Handle, label: string) => handle.events.append('loop:race', [{ ...paused(label), meta: { runnerId: label } }], { expectedVersion: version });
        const [a, b] = await Promise.allSettled([write(log, `a${round}`), write(other, `b${round}`)]);
        const { ok, errors } = tally([a, b]);
        expect(ok).toHaveLength(1);
        expect(ok[0]).toMatchObject({ version: version + 1 });
        expect(errors).toHaveLength(1);
        expect(errors[0]).toBeInstanceOf(ConcurrencyConflictError);
        expect(errors[0]).toMatchObject({
          code: 'conflict',
          retryable: true,
          expectedVersion: version,
          actualVersion: version + 1,
          message: `stream loop:race is at version ${version + 1}, expected ${version}: another writer appended first`,
        });
        const winner = a.status === 'fulfilled' ? `a${round}` : `b${round}`;
        const stream = await other.events.readStream('loop:race');
        expect(stream.map((e) => e.version)).toEqual(Array.from({ length: version + 1 }, (_, i) => i + 1));
        expect(stream.at(-1)).toMatchObject({ meta: { runnerId: winner }, data: { reason: winner } });
      }
      expect(await log.events.headPosition()).toBe(6);
    });

    it('group commit: appends of one turn take positions in call order; a failed one undoes only itself; one on top of a failed one fails too', async () => {
      const log = await backend.open();
      await log.events.append('loop:a', [paused('a1')], { expectedVersion: 0, kind: 'loop' });
      const seen: string[] = [];
      const sub = log.events.events$.subscribe((e) => seen.push(`${e.streamId}@${e.version}`));
      const ok1 = log.events.append('loop:b', [paused('b1')], { expectedVersion: 0, kind: 'loop' });
      const stale = log.events.append('loop:a', [paused('a-stale')], { expectedVersion: 0 });
      const badLease = log.events.append('loop:c', [paused('c1')], { expectedVersion: 0, kind: 'loop', guards: [{ kind: 'lease-held', name: 'run:x', holder: 'me', token: 1 }] });
      const ok2 = log.events.append('loop:a', [paused('a2')], { expectedVersion: 1 });
      const failing = log.events.append('loop:b', [paused('b2')], { expectedVersion: 1, guards: [{ kind: 'lease-held', name: 'run:x', holder: 'me', token: 1 }] });
      const onTop = log.events.append('loop:b', [paused('b3')], { expectedVersion: 2 });
      await expect(stale).rejects.toBeInstanceOf(ConcurrencyConflictError);
      await expect(badLease).rejects.toBeInstanceOf(LeaseLostError);
      await expect(failing).rejects.toBeInstanceOf(LeaseLostError);
      await expect(onTop).rejects.toBeInstanceOf(ConcurrencyConflictError);
      expect([(await ok1).position, (await ok2).position]).toEqual([2, 3]);
      sub.unsubscribe();
      expect(seen).toEqual(['loop:b@1', 'loop:a@2']);
      expect(await log.events.streamInfo('loop:c')).toBeUndefined();
      expect(await log.events.headPosition()).toBe(3);
    });

    it('settled() waits for appends nobody awaited', async () => {
      const log = await backend.open();
      void log.events.append('loop:a', [paused('a')], { expectedVersion: 0, kind: 'loop' });
      void log.events.append('loop:b', [paused('b')], { expectedVersion: 0, kind: 'loop' });
      await log.events.settled();
      expect(await log.rows('SELECT stream_id FROM events ORDER BY position')).toEqual([{ stream_id: 'loop:a' }, { stream_id: 'loop:b' }]);
      await log.events.settled();
    });
  });

  describe.skipIf(!backend.available)('guards and leases', () => {
    it('take-lease takes the lease with the events; a live holder refuses another; after expiry the takeover gets token + 1; the fence then refuses the old token', async () => {
      const log = await backend.open();
      const now = T0;
      const takeBy = (holder: string, nowMs: number, streamId: string, expectedVersion: number, expectToken?: number) =>
        log.events.append(streamId, [paused(`${holder} claims`)], {
          expectedVersion,
          kind: 'run',
          nowMs,
          guards: [{ kind: 'take-lease', name: 'run:1', holder, ttlMs: 1000, ...(expectToken === undefined ? {} : { expectToken }) }],
        });
      const fenced = (holder: string, token: number, nowMs: number, streamId: string, expectedVersion: number, release = false) =>
        log.events.append(streamId, [paused(`${holder} reports`)], { expectedVersion, nowMs, guards: [{ kind: 'lease-held', name: 'run:1', holder, token, release }] });

      const first = await takeBy('A', now, 'run:a', 0, 1);
      expect(first.leases).toEqual({ 'run:1': { name: 'run:1', holder: 'A', token: 1, expiresAt: now + 1000 } });
      expect(await log.leases.get('run:1')).toEqual({ holder: 'A', token: 1, expiresAt: now + 1000 });

      // B, while A's lease is live: refused, retryably, nothing written.
      const refused = await takeBy('B', now + 500, 'run:b', 0).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(LoopsError);
      expect(refused).toMatchObject({ code: 'conflict', retryable: true, message: `run:1 is leased by A until ${new Date(now + 1000).toISOString()}` });
      expect(await log.events.streamInfo('run:b')).toBeUndefined();

      // A's fence holds while its lease is live.
      await fenced('A', 1, now + 500, 'run:a', 1);

      // B takes over once A's lease expired (B's clock): token 2.
      const takeover = await takeBy('B', now + 1000, 'run:b', 0);
      expect(takeover.leases['run:1']).toEqual({ name: 'run:1', holder: 'B', token: 2, expiresAt: now + 2000 });

      // A's fence is refused now, whatever A's clock says; nothing written.
      await expect(fenced('A', 1, now + 500, 'run:a', 2)).rejects.toThrow(/lease run:1 is no longer held by A \(token 1\)/);
      await expect(fenced('A', 1, now + 500, 'run:a', 2)).rejects.toBeInstanceOf(LeaseLostError);
      expect((await log.events.streamInfo('run:a'))?.version).toBe(2);

      // A take that expects the first token finds another: refused, and the lease is not bumped.
      await expect(takeBy('B', now + 1500, 'run:b', 1, 1)).rejects.toThrow(/run:1 was started by another runner/);
      expect(await log.leases.get('run:1')).toEqual({ holder: 'B', token: 2, expiresAt: now + 2000 });

      // B's fence after its own lease expired (by its clock): refused.
      await expect(fenced('B', 2, now + 2001, 'run:b', 1)).rejects.toThrow(/lease run:1 expired at/);

      // The fence with `release`: the lease is given back with the events.
      await fenced('B', 2, now + 1999, 'run:b', 1, true);
      expect(await log.leases.get('run:1')).toBeNull();
      expect((await log.events.streamInfo('run:b'))?.version).toBe(2);
    });

    it('a guard that does not hold aborts the append before anything is written; one that holds takes its lease in the same transaction; the same take again is a new token, which expectToken refuses', async () => {
      const log = await backend.open();
      await expect(
        log.events.append('loop:a', [paused('x')], { expectedVersion: 0, kind: 'loop', guards: [{ kind: 'lease-held', name: 'loop:a', holder: 'me', token: 1 }] }),
      ).rejects.toThrow(/lease loop:a is no longer held by me \(token 1\)/);
      expect(await log.events.headPosition()).toBe(0);
      expect(await log.events.streamInfo('loop:a')).toBeUndefined();
      expect(await log.leases.get('loop:a')).toBeNull();
      const result = await log.events.append('loop:a', [paused('x')], {
        expectedVersion: 0,
        kind: 'loop',
        nowMs: T0,
        guards: [{ kind: 'take-lease', name: 'loop:a', holder: 'me', ttlMs: 1000, expectToken: 1 }],
      });
      expect(result.leases).toEqual({ 'loop:a': { name: 'loop:a', holder: 'me', token: 1, expiresAt: T0 + 1000 } });
      // The same holder taking it again would get token 2: expecting the first, the append is refused.
      await expect(
        log.events.append('loop:a', [paused('y')], { expectedVersion: 1, nowMs: T0, guards: [{ kind: 'take-lease', name: 'loop:a', holder: 'me', ttlMs: 1000, expectToken: 1 }] }),
      ).rejects.toThrow(/loop:a was started by another runner/);
      expect(await log.leases.get('loop:a')).toEqual({ holder: 'me', token: 1, expiresAt: T0 + 1000 });
      expect(reasons(await log.events.readStream('loop:a'))).toEqual(['x']);
      expect(await log.events.headPosition()).toBe(1);
    });

    it('take-lease with release: the token is taken and given back in the same transaction', async () => {
      const log = await backend.open();
      const result = await log.events.append('loop:a', [paused('once')], {
        expectedVersion: 0,
        kind: 'loop',
        nowMs: T0,
        guards: [{ kind: 'take-lease', name: 'loop:a', holder: 'me', ttlMs: 1000, release: true }],
      });
      expect(result.leases['loop:a']).toMatchObject({ holder: 'me', token: 1 });
      expect(await log.leases.get('loop:a')).toBeNull();
    });

    it('the lease store: take, renew, release, releaseByHolder, expireHolder, get', async () => {
      const log = await backend.open();
      const { leases } = log;
      const lease = await leases.take('d', 'A', 1000, T0);
      expect(lease).toEqual({ name: 'd', holder: 'A', token: 1, expiresAt: T0 + 1000 });
      await expect(leases.take('d', 'B', 1000, T0 + 999)).rejects.toMatchObject({ code: 'conflict', retryable: true });
      // The same holder again: a new token.
      expect((await leases.take('d', 'A', 1000, T0 + 10)).token).toBe(2);
      const renewed = await leases.renew({ ...lease, token: 2 }, 5000, T0 + 20);
      expect(renewed).toEqual({ name: 'd', holder: 'A', token: 2, expiresAt: T0 + 5020 });
      await expect(leases.renew(lease, 5000, T0 + 20)).rejects.toBeInstanceOf(LeaseLostError);
      // A renewal that arrives late (sent before the last one) never shortens the lease.
      await leases.renew({ ...lease, token: 2 }, 5000, T0 + 10);
      expect((await leases.get('d'))?.expiresAt).toBe(T0 + 5020);
      // A release with a stale token changes nothing; with the right one, the lease is gone.
      await leases.release(lease);
      expect(await leases.get('d')).toEqual({ holder: 'A', token: 2, expiresAt: T0 + 5020 });
      await leases.release(renewed);
      expect(await leases.get('d')).toBeNull();
      // After a release the token starts again at 1 (the row is gone, as on SQLite).
      expect((await leases.take('d', 'B', 1000, T0)).token).toBe(1);
      await leases.releaseByHolder('d', 'nobody');
      expect(await leases.get('d')).not.toBeNull();
      await leases.releaseByHolder('d', 'B');
      expect(await leases.get('d')).toBeNull();
      // expireHolder: every live lease of a holder that is gone expires now; others can take them.
      await leases.take('e1', 'gone', 60_000, T0);
      await leases.take('e2', 'gone', 60_000, T0);
      await leases.take('e3', 'alive', 60_000, T0);
      await leases.expireHolder('gone', T0 + 100);
      expect(await leases.get('e1')).toEqual({ holder: 'gone', token: 1, expiresAt: T0 + 100 });
      expect((await leases.take('e2', 'C', 1000, T0 + 100)).token).toBe(2);
      await expect(leases.take('e3', 'C', 1000, T0 + 100)).rejects.toMatchObject({ code: 'conflict' });
    });

    it('live(prefix): the leases of one prefix alive at a time, by name — not expired ones, not other prefixes, not a name that merely sorts near', async () => {
      const log = await backend.open();
      const { leases } = log;
      await leases.take('run:a', 'A', 1000, T0);
      await leases.take('run:b', 'B', 5000, T0);
      await leases.take('run;c', 'C', 5000, T0); // ';' follows ':' — the range's end, not in it
      await leases.take('runner:r', 'R', 5000, T0);
      await leases.take('ru', 'X', 5000, T0);
      const live = await leases.live('run:', T0 + 1000);
      expect([...live.keys()].sort()).toEqual(['run:b']);
      expect(live.get('run:b')).toEqual({ holder: 'B', token: 1, expiresAt: T0 + 5000 });
      expect([...(await leases.live('run:', T0 + 999)).keys()].sort()).toEqual(['run:a', 'run:b']);
      expect([...(await leases.live('runner:', T0)).keys()]).toEqual(['runner:r']);
      expect((await leases.live('run:', T0 + 5000)).size).toBe(0);
      await expect(leases.live('', T0)).rejects.toThrow(/prefix/);
    });

    it('queued: the guard passes while the run is queued, and a second claim loses', async () => {
      const log = await backend.open({ handlers: [projection], ddl: PROJECTION_DDL });
      await log.events.append('loop:q', [paused('queue r1')], { expectedVersion: 0, kind: 'loop' });
      const claim = (streamId: string) => log.events.append(streamId, [paused('claim r1')], { expectedVersion: 0, kind: 'run', guards: [{ kind: 'queued', runId: 'r1' }] });
      await claim('run:first');
      const lost = await claim('run:second').catch((e: unknown) => e);
      expect(lost).toBeInstanceOf(ClaimLostError);
      expect(lost).toMatchObject({ message: 'run r1 was not claimed: it is no longer queued (another runner claimed it, or it was dropped)' });
      expect(await log.events.streamInfo('run:second')).toBeUndefined();
    });
  });

  describe.skipIf(!backend.available)('batches', () => {
    it('appends share one commit; a failing append is rolled back alone; reads inside see the batch; events and afterCommit come after the commit', async () => {
      const log = await backend.open();
      await log.events.append('loop:a', [paused('a1')], { expectedVersion: 0, kind: 'loop' });
      const seen: string[] = [];
      const sub = log.events.events$.subscribe((e) => seen.push(`${e.streamId}@${e.version}`));
      const order: string[] = [];
      const positions = await log.events.batch(async (batch) => {
        const b1 = await log.events.append('loop:b', [paused('b1')], { expectedVersion: 0, kind: 'loop', batch });
        await expect(log.events.append('loop:a', [paused('stale')], { expectedVersion: 0, batch })).rejects.toBeInstanceOf(ConcurrencyConflictError);
        await expect(
          log.events.append('loop:c', [paused('c1')], { expectedVersion: 0, kind: 'loop', batch, guards: [{ kind: 'lease-held', name: 'run:x', holder: 'me', token: 1 }] }),
        ).rejects.toBeInstanceOf(LeaseLostError);
        const a2 = await log.events.append('loop:a', [paused('a2')], { expectedVersion: 1, batch });
        // Reads made while the batch is open see its writes.
        expect(reasons(await log.events.readStream('loop:b'))).toEqual(['b1']);
        expect(await log.events.headPosition()).toBe(3);
        log.events.afterCommit(() => order.push('after commit'), batch);
        // Nothing is published before the commit.
        expect(seen).toEqual([]);
        order.push('callback done');
        return [b1.position, a2.position];
      });
      sub.unsubscribe();
      expect(positions).toEqual([2, 3]);
      expect(order).toEqual(['callback done', 'after commit']);
      expect(seen).toEqual(['loop:b@1', 'loop:a@2']);
      expect(await log.events.streamInfo('loop:c')).toBeUndefined();
      expect(reasons(await log.events.readAll())).toEqual(['a1', 'b1', 'a2']);
    });

    it('a batch whose callback throws writes nothing, publishes nothing, and drops its afterCommit callbacks; the next append reuses the positions', async () => {
      const log = await backend.open();
      const seen: StoredEvent[] = [];
      const sub = log.events.events$.subscribe((e) => seen.push(e));
      let after = false;
      await expect(
        log.events.batch(async (batch) => {
          await log.events.append('loop:a', [paused('a1')], { expectedVersion: 0, kind: 'loop', batch });
          await log.leases.take('held', 'me', 1000, T0, batch);
          log.events.afterCommit(() => (after = true), batch);
          throw new Error('changed my mind');
        }),
      ).rejects.toThrow('changed my mind');
      sub.unsubscribe();
      expect(seen).toEqual([]);
      expect(after).toBe(false);
      expect(await log.events.headPosition()).toBe(0);
      expect(await log.leases.get('held')).toBeNull();
      expect(await log.events.append('loop:a', [paused('again')], { expectedVersion: 0, kind: 'loop' })).toMatchObject({ position: 1, version: 1 });
    });

    it('a write that is not part of an open batch comes after it; `within` joins the open batch', async () => {
      const log = await backend.open();
      let outside!: Promise<AppendResult>;
      await log.events.batch(async (batch) => {
        await log.events.append('loop:in', [paused('in 1')], { expectedVersion: 0, kind: 'loop', batch });
        outside = log.events.append('loop:out', [paused('out')], { expectedVersion: 0, kind: 'loop' });
        // The outside append's turn ends (its group would commit now, were no batch open).
        await new Promise((resolve) => setImmediate(resolve));
        await log.events.batch((joined) => log.events.append('loop:in', [paused('in 2')], { expectedVersion: 1, batch: joined }), batch);
      });
      expect((await outside).position).toBe(3);
      expect(reasons(await log.events.readAll())).toEqual(['in 1', 'in 2', 'out']);
    });

    it('an append without the batch handle, made while a batch is open, waits for the batch\'s commit: unsettled and unseen inside it, then written and published after the batch\'s events', async () => {
      const log = await backend.open();
      const seen: Array<[string, number]> = [];
      const sub = log.events.events$.subscribe((e) => seen.push([e.streamId, e.position]));
      let outside!: Promise<AppendResult>;
      let outsideSettled = false;
      await log.events.batch(async (batch) => {
        await log.events.append('loop:a', [paused('a1')], { expectedVersion: 0, kind: 'loop', batch });
        outside = log.events.append('loop:b', [paused('b1')], { expectedVersion: 0, kind: 'loop' });
        void outside.finally(() => (outsideSettled = true));
        // The outside append's turn ends (its group would commit now, were no batch open).
        await new Promise((resolve) => setImmediate(resolve));
        await log.events.append('loop:a', [paused('a2')], { expectedVersion: 1, batch });
        // It has not run, not even into this transaction (which reads made now would see).
        expect(outsideSettled).toBe(false);
        expect(await log.events.readStream('loop:b')).toEqual([]);
        expect(await log.events.headPosition()).toBe(2);
        expect(seen).toEqual([]);
      });
      expect(await outside).toMatchObject({ streamId: 'loop:b', version: 1, position: 3 });
      sub.unsubscribe();
      expect(seen).toEqual([
        ['loop:a', 1],
        ['loop:a', 2],
        ['loop:b', 3],
      ]);
    });

    it('an append without the batch handle, made while a batch is open, is not rolled back with the batch', async () => {
      const log = await backend.open();
      const seen: string[] = [];
      const sub = log.events.events$.subscribe((e) => seen.push(e.streamId));
      let outside!: Promise<AppendResult>;
      await expect(
        log.events.batch(async (batch) => {
          await log.events.append('loop:a', [paused('a1')], { expectedVersion: 0, kind: 'loop', batch });
          outside = log.events.append('loop:b', [paused('b1')], { expectedVersion: 0, kind: 'loop' });
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
      expect(await outside).toMatchObject({ streamId: 'loop:b', version: 1, position: 1 });
      sub.unsubscribe();
      expect(seen).toEqual(['loop:b']);
      expect(await log.events.readStream('loop:a')).toEqual([]);
      expect(reasons(await log.events.readStream('loop:b'))).toEqual(['b1']);
      expect(await log.events.headPosition()).toBe(1);
    });

    it('two batches started together take turns: both commit, neither inside the other', async () => {
      const log = await backend.open();
      const order: string[] = [];
      const run = (name: string) =>
        log.events.batch(async (batch) => {
          order.push(`${name} begins`);
          await log.events.append(`loop:${name}`, [paused(`${name}1`)], { expectedVersion: 0, kind: 'loop', batch });
          await new Promise<void>((resolve) => setImmediate(resolve)); // the other batch gets every chance to start
          await log.events.append(`loop:${name}`, [paused(`${name}2`)], { expectedVersion: 1, batch });
          order.push(`${name} ends`);
          return name;
        });
      expect(await Promise.all([run('a'), run('b')])).toEqual(['a', 'b']);
      expect(order).toEqual(['a begins', 'a ends', 'b begins', 'b ends']);
      expect((await log.events.readAll()).map((e) => [e.streamId, e.position])).toEqual([
        ['loop:a', 1],
        ['loop:a', 2],
        ['loop:b', 3],
        ['loop:b', 4],
      ]);
    });

    it('another handle\'s append, made while a batch that has written is open, waits for its commit and comes after it', async () => {
      const log = await backend.open();
      const other = await log.another();
      let outside!: Promise<AppendResult>;
      await log.events.batch(async (batch) => {
        await log.events.append('loop:a', [paused('a1')], { expectedVersion: 0, kind: 'loop', batch });
        outside = other.events.append('loop:b', [paused('b1')], { expectedVersion: 0, kind: 'loop' });
        await new Promise<void>((resolve) => setImmediate(resolve));
        await log.events.append('loop:a', [paused('a2')], { expectedVersion: 1, batch });
      });
      expect(await outside).toMatchObject({ streamId: 'loop:b', position: 3 });
      expect((await other.events.readAll()).map((e) => [e.streamId, e.position])).toEqual([
        ['loop:a', 1],
        ['loop:a', 2],
        ['loop:b', 3],
      ]);
    });

    it('lease writes inside a batch share its commit', async () => {
      const log = await backend.open();
      await log.events.batch(async (batch) => {
        const lease = await log.leases.take('l', 'me', 1000, T0, batch);
        await log.events.append('run:l', [paused('claimed')], { expectedVersion: 0, kind: 'run', batch, nowMs: T0, guards: [{ kind: 'lease-held', name: 'l', holder: 'me', token: lease.token }] });
        await log.leases.expireHolder('me', T0 + 10, batch);
      });
      expect(await log.leases.get('l')).toEqual({ holder: 'me', token: 1, expiresAt: T0 + 10 });
    });
  });

  describe.skipIf(!backend.available)('publication and reads by position', () => {
    it('events$ publishes committed events once each, in position order', async () => {
      const log = await backend.open();
      const seen: StoredEvent[] = [];
      const sub = log.events.events$.subscribe((e) => seen.push(e));
      const results: AppendResult[] = [];
      results.push(await log.events.append('loop:a', [paused('1'), paused('2')], { expectedVersion: 0, kind: 'loop' }));
      results.push(...(await Promise.all(['b', 'c', 'd'].map((s) => log.events.append(`loop:${s}`, [paused(s)], { expectedVersion: 0, kind: 'loop' })))));
      results.push(
        ...(await log.events.batch(async (batch) => [
          await log.events.append('loop:a', [paused('3')], { expectedVersion: 2, batch }),
          await log.events.append('loop:e', [paused('e')], { expectedVersion: 0, kind: 'loop', batch }),
        ])),
      );
      sub.unsubscribe();
      expect(seen.map((e) => e.position)).toEqual([1, 2, 3, 4, 5, 6, 7]);
      expect(seen).toEqual(results.flatMap((r) => r.events));
    });

    it('readAll, readStreamPage and streamsWithEvents go by position; headPosition is the last', async () => {
      const log = await backend.open();
      for (let i = 0; i < 6; i++) await log.events.append(`loop:${i % 2}`, [paused(String(i))], { expectedVersion: Math.floor(i / 2), kind: 'loop' });
      await log.events.append('loop:1', [resumed()], { expectedVersion: 3 });
      expect((await log.events.readAll()).map((e) => e.position)).toEqual([1, 2, 3, 4, 5, 6, 7]);
      expect((await log.events.readAll({ fromPosition: 2 })).map((e) => e.position)).toEqual([3, 4, 5, 6, 7]);
      expect((await log.events.readAll({ fromPosition: 1, limit: 2 })).map((e) => e.position)).toEqual([2, 3]);
      expect((await log.events.readStreamPage('loop:0', 2, 2)).map((e) => [e.version, reasons([e])[0]])).toEqual([
        [2, '2'],
        [3, '4'],
      ]);
      expect(await log.events.readStreamPage('loop:0', 4, 10)).toEqual([]);
      expect(await log.events.streamsWithEvents(0, 7, ['loop.resumed'])).toEqual(['loop:1']);
      expect(await log.events.streamsWithEvents(6, 7, ['loop.paused'])).toEqual([]);
      expect((await log.events.streamsWithEvents(1, 3, ['loop.paused', 'loop.resumed'])).sort()).toEqual(['loop:0', 'loop:1']);
      expect(await log.events.streamsWithEvents(0, 7, ["it's"])).toEqual([]);
      expect(await log.events.headPosition()).toBe(7);
    });

    it('inline projections run in the append; a failing statement rolls back the whole append and uses no position', async () => {
      let fail = false;
      const log = await backend.open({
        handlers: [projection, (event) => (fail && event.type === 'loop.paused' ? [{ sql: 'INSERT INTO no_such_table VALUES (?)', params: [1] }] : [])],
        ddl: PROJECTION_DDL,
      });
      const seen: StoredEvent[] = [];
      const sub = log.events.events$.subscribe((e) => seen.push(e));
      await log.events.append('loop:a', [paused('one'), paused("it's two?")], { expectedVersion: 0, kind: 'loop' });
      expect(await log.rows('SELECT stream_id, n, last_reason FROM pauses')).toEqual([{ stream_id: 'loop:a', n: 2, last_reason: "it's two?" }]);
      fail = true;
      await expect(log.events.append('loop:a', [paused('three')], { expectedVersion: 2 })).rejects.toThrow(/no_such_table/);
      expect(await log.rows('SELECT n, last_reason FROM pauses')).toEqual([{ n: 2, last_reason: "it's two?" }]);
      expect(await log.events.headPosition()).toBe(2);
      expect(seen.map((e) => e.position)).toEqual([1, 2]);
      fail = false;
      expect(await log.events.append('loop:a', [paused('three')], { expectedVersion: 2 })).toMatchObject({ version: 3, position: 3 });
      sub.unsubscribe();
    });

    it('a projection constraint violation (a duplicate live loop name: loops_live_name) rolls back the whole append — not in the log, the head not moved, nothing published — alone, in a group commit, in a batch', async () => {
      const log = await backend.open({ projections: true });
      const seen: StoredEvent[] = [];
      const sub = log.events.events$.subscribe((e) => seen.push(e));
      const create = (loopId: string, name: string, batch?: Batch) =>
        log.events.append(`loop:${loopId}`, [{ ...loopEv.created({ loopId, name }), state: 'active' }], { expectedVersion: 0, kind: 'loop', batch });
      const loops = () => log.rows<{ id: string; live_name: string | null; status: string }>('SELECT id, live_name, status FROM loops ORDER BY id');

      await create('loop_1', 'backup');
      expect(await loops()).toEqual([{ id: 'loop_1', live_name: 'backup', status: 'active' }]);

      // Alone. The database's own error is passed on as it is (neither store wraps a projection's
      // error), so its text is each database's; both are the violation of the live_name index as
      // loops' commands recognise it (`uniqueViolation`: `loops create` then says the name is taken).
      const alone = await create('loop_2', 'backup').catch((e: unknown) => e);
      expect(uniqueViolation(alone)).toMatch(/live_name/);
      expect((alone as Error).message).toBe(backend.name === 'sqlite' ? 'UNIQUE constraint failed: loops.live_name' : 'duplicate key value violates unique constraint "loops_live_name"');
      expect(await log.events.headPosition()).toBe(1);
      expect(await log.events.streamInfo('loop:loop_2')).toBeUndefined();
      expect(await log.events.readStream('loop:loop_2')).toEqual([]);
      expect(seen.map((e) => e.position)).toEqual([1]);

      // In a group commit (one turn's appends): the duplicate undoes only itself.
      const [first, duplicate, pause] = await Promise.allSettled([
        create('loop_3', 'other'),
        create('loop_4', 'other'),
        log.events.append('loop:loop_1', [{ ...loopEv.paused('p'), state: 'paused' }], { expectedVersion: 1 }),
      ]);
      expect(first).toMatchObject({ status: 'fulfilled', value: { position: 2 } });
      expect(duplicate.status).toBe('rejected');
      expect(uniqueViolation((duplicate as PromiseRejectedResult).reason)).toMatch(/live_name/);
      expect(pause).toMatchObject({ status: 'fulfilled', value: { position: 3 } });
      expect(await log.events.streamInfo('loop:loop_4')).toBeUndefined();

      // In a batch: the duplicate rejects alone, and the batch commits the rest.
      const positions = await log.events.batch(async (batch) => {
        const created = await create('loop_5', 'third', batch);
        expect(uniqueViolation(await create('loop_6', 'third', batch).catch((e: unknown) => e))).toMatch(/live_name/);
        expect(uniqueViolation(await create('loop_7', 'backup', batch).catch((e: unknown) => e))).toMatch(/live_name/);
        const paused3 = await log.events.append('loop:loop_3', [{ ...loopEv.paused('q'), state: 'paused' }], { expectedVersion: 1, batch });
        return [created.position, paused3.position];
      });
      expect(positions).toEqual([4, 5]);
      sub.unsubscribe();

      expect(seen.map((e) => [e.streamId, e.position])).toEqual([
        ['loop:loop_1', 1],
        ['loop:loop_3', 2],
        ['loop:loop_1', 3],
        ['loop:loop_5', 4],
        ['loop:loop_3', 5],
      ]);
      expect(await log.events.readAll()).toEqual(seen);
      expect(await log.events.headPosition()).toBe(5);
      for (const id of ['loop_2', 'loop_4', 'loop_6', 'loop_7']) expect(await log.events.streamInfo(`loop:${id}`)).toBeUndefined();
      expect(await loops()).toEqual([
        { id: 'loop_1', live_name: 'backup', status: 'paused' },
        { id: 'loop_3', live_name: 'other', status: 'paused' },
        { id: 'loop_5', live_name: 'third', status: 'active' },
      ]);
      // The positions the failed appends held are used again.
      expect(await create('loop_8', 'fourth')).toMatchObject({ version: 1, position: 6 });
    });

    it('events$ publishes an event only after its commit: another handle on the same log already reads it — alone, in a group commit, in a batch', async () => {
      const log = await backend.open();
      const other = await log.another();
      const published: StoredEvent[] = [];
      const readByOther: Array<Promise<StoredEvent | undefined>> = [];
      const sub = log.events.events$.subscribe((e) => {
        published.push(e);
        // Asked in the subscriber itself: SQLite's read runs here and now, on the other connection;
        // PostgreSQL's statement is sent now, on the other store's pool.
        readByOther.push(other.events.readAll({ fromPosition: e.position - 1, limit: 1 }).then((rows) => rows[0]));
      });
      await log.events.append('loop:a', [paused('1'), paused('2')], { expectedVersion: 0, kind: 'loop' });
      await Promise.all(['b', 'c'].map((s) => log.events.append(`loop:${s}`, [paused(s)], { expectedVersion: 0, kind: 'loop' })));
      await log.events.batch(async (batch) => {
        await log.events.append('loop:a', [paused('3')], { expectedVersion: 2, batch });
        await log.events.append('loop:d', [paused('d')], { expectedVersion: 0, kind: 'loop', batch });
      });
      sub.unsubscribe();
      expect(published.map((e) => e.position)).toEqual([1, 2, 3, 4, 5, 6]);
      expect(await Promise.all(readByOther)).toEqual(published);
    });

    it('events$ publishes nothing for a failed append, and completes when the store is closed', async () => {
      const log = await backend.open();
      const seen: number[] = [];
      let completed = false;
      const complete = new Promise<void>((resolve) =>
        log.events.events$.subscribe({
          next: (e) => seen.push(e.position),
          complete: () => {
            completed = true;
            resolve();
          },
        }),
      );
      await log.events.append('loop:a', [paused('1')], { expectedVersion: 0, kind: 'loop' });
      await expect(log.events.append('loop:a', [paused('2')], { expectedVersion: 0 })).rejects.toThrow(ConcurrencyConflictError);
      expect(seen).toEqual([1]);
      // An append still in flight (its group not yet committed) when the store is closed.
      const inFlight = log.events.append('loop:b', [paused('b')], { expectedVersion: 0, kind: 'loop' });
      log.events.close();
      if (backend.name === 'sqlite') {
        // SqliteEventLog.close() completes events$ and does nothing else, at once: the database
        // handle is its caller's and stays open, so the append in flight still commits at the end
        // of its turn — unpublished, events$ being complete.
        expect(completed).toBe(true);
        expect(await inFlight).toMatchObject({ position: 2 });
        expect(seen).toEqual([1]);
      } else {
        // PgEventStore.close() starts end() (its connections are its own): the appends in flight
        // settle first — committed and published — then following stops, the pool closes, and
        // events$ completes.
        expect(completed).toBe(false);
        await complete;
        expect(await inFlight).toMatchObject({ position: 2 });
        expect(seen).toEqual([1, 2]);
      }
      await complete;
      // A subscriber that comes later is completed at once.
      expect(await firstValueFrom(log.events.events$, { defaultValue: null })).toBeNull();
      const other = await log.another();
      expect((await other.events.readAll()).map((e) => [e.streamId, e.position])).toEqual([
        ['loop:a', 1],
        ['loop:b', 2],
      ]);
      if (other.events instanceof PgEventStore) {
        // PostgreSQL's awaited end(): resolved once events$ has completed.
        let ended = false;
        other.events.events$.subscribe({ complete: () => (ended = true) });
        await other.events.end();
        expect(ended).toBe(true);
        // Used after end(): an append, a batch and a read each say the store is closed (not that
        // the server cannot be reached).
        const closed = /^the PostgreSQL store \(.*\) is closed$/;
        await expect(other.events.append('loop:c', [paused('c')], { expectedVersion: 0, kind: 'loop' })).rejects.toThrow(closed);
        await expect(other.events.batch(async () => undefined)).rejects.toThrow(closed);
        await expect(other.events.headPosition()).rejects.toThrow(closed);
      }
    });

    it('archiving: the tombstone replaces the history it names, and no position is reused', async () => {
      const log = await backend.open();
      await log.events.append('loop:a', [paused('1'), paused('2'), paused('3')], { expectedVersion: 0, kind: 'loop' });
      const tombstone = (events: number): NewEvent => ({
        type: 'stream.archived',
        data: { file: 'archive/loop-a.jsonl', sha256: 'a'.repeat(64), fromVersion: 1, toVersion: 3, events, machine: { id: 'loop', version: 1 }, state: 'done', rows: {} },
        at: at(10),
      });
      await expect(log.events.append('loop:a', [tombstone(2)], { expectedVersion: 3, archivedThrough: 3 })).rejects.toThrow(/3 event\(s\) found up to version 3, the tombstone says 2/);
      expect(await log.events.readStream('loop:a')).toHaveLength(3);
      expect(await log.events.append('loop:a', [tombstone(3)], { expectedVersion: 3, archivedThrough: 3 })).toMatchObject({ version: 4, position: 4 });
      expect((await log.events.readStream('loop:a')).map((e) => [e.version, e.type])).toEqual([[4, 'stream.archived']]);
      expect(await log.events.append('loop:b', [paused('b')], { expectedVersion: 0, kind: 'loop' })).toMatchObject({ position: 5 });
      expect((await log.events.readAll()).map((e) => e.position)).toEqual([4, 5]);
      expect(await log.events.headPosition()).toBe(5);
    });
  });
});

describe('PostgreSQL store: inline projections written for SQLite', () => {
  it('their ? placeholders become $1, $2 … — not inside literals, quoted names or comments; numbered ones are refused', () => {
    expect(pgPlaceholders(`SELECT '?', 'it''s ?', "odd?col" FROM t WHERE a = ? -- really?\n AND b = ? /* or ? */ AND c IN (?, ?)`)).toBe(
      `SELECT '?', 'it''s ?', "odd?col" FROM t WHERE a = $1 -- really?\n AND b = $2 /* or ? */ AND c IN ($3, $4)`,
    );
    expect(pgPlaceholders('UPDATE t SET n = n + 1')).toBe('UPDATE t SET n = n + 1');
    expect(() => pgPlaceholders('SELECT ?1')).toThrow(ValidationError);
  });
});

// ── PostgreSQL only: what its writers racing must not break ───────────────────

describe.skipIf(!havePg)('PostgreSQL store: concurrency', () => {
  it('positions follow commit order: a transaction that began first but wrote last commits after; one that wrote first holds the others until its commit; a reader by position misses nothing', async () => {
    const log = pgLog(schemas);
    const a = await log.open({ applicationName: 'loops-test-a' });
    const b = await log.open({ applicationName: 'loops-test-b' });
    const reader = await log.open({ follow: false });
    const admin = await adminClient();
    onTestFinished(() => admin.end());

    // A reader following by position, as the cancel watch and a replica do, all along.
    const seen: number[] = [];
    let stop = false;
    const follow = (async () => {
      let last = 0;
      for (;;) {
        const done = stop;
        for (const e of await reader.events.readAll({ fromPosition: last })) {
          seen.push(e.position);
          last = e.position;
        }
        if (done) return;
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();

    // 1. A's transaction begins first (a read in a batch), B appends and commits, then A writes:
    //    A's event comes after B's.
    const [aLate, bEarly] = await a.events.batch(async (batch) => {
      await a.events.readStream('loop:a');
      const early = await b.events.append('loop:b', [paused('b first')], { expectedVersion: 0, kind: 'loop' });
      const late = await a.events.append('loop:a', [paused('a late')], { expectedVersion: 0, kind: 'loop', batch });
      return [late, early];
    });
    expect(bEarly.position).toBeLessThan(aLate.position);

    // 2. A writes first and holds its transaction open: B's append waits for it (on the log
    //    head's lock), and commits after it, with a higher position.
    let bHeld!: Promise<AppendResult>;
    const aFirst = await a.events.batch(async (batch) => {
      const first = await a.events.append('loop:a', [paused('a first')], { expectedVersion: 1, batch });
      bHeld = b.events.append('loop:b', [paused('b waits')], { expectedVersion: 1 });
      await waitForDb(async () => (await lockWaiters(admin, 'loops-test-b')) === 1, 10_000, "B's append waiting for A's lock");
      return first;
    });
    expect((await bHeld).position).toBe(aFirst.position + 1);

    // 3. Many writers at once, batches held across awaits among them.
    const writers = [a, b, await log.open()].map((store, w) =>
      (async () => {
        const out: number[] = [];
        let version = 0;
        for (let i = 0; i < 15; i++) {
          if (i % 3 === 0) {
            const rs = await store.events.batch(async (batch) => {
              const first = await store.events.append(`loop:w${w}`, [paused(`${w}.${i}`)], { expectedVersion: version, kind: 'loop', batch });
              await new Promise((resolve) => setImmediate(resolve));
              const second = await store.events.append(`loop:w${w}`, [paused(`${w}.${i}b`)], { expectedVersion: version + 1, batch });
              return [first, second];
            });
            version += 2;
            out.push(...rs.map((r) => r.position));
          } else {
            out.push((await store.events.append(`loop:w${w}`, [paused(`${w}.${i}`)], { expectedVersion: version, kind: 'loop' })).position);
            version += 1;
          }
        }
        return out;
      })(),
    );
    const written = (await Promise.all(writers)).flat();
    stop = true;
    await follow;
    const head = await reader.events.headPosition();
    expect(head).toBe(4 + 3 * 20);
    // Every position once, in order, none skipped: a late commit never landed behind the reader.
    expect(seen).toEqual(Array.from({ length: head }, (_, i) => i + 1));
    expect(new Set(written).size).toBe(written.length);
  });

  it('lease take race: of 20 takers of an expired lease, exactly one wins, and its token is the previous one + 1', async () => {
    const log = pgLog(schemas);
    const stores = await Promise.all([0, 1, 2, 3].map(() => log.open({ poolSize: 5 })));
    const tokens: number[] = [];
    for (let round = 0; round < 5; round++) {
      // Each round's clock is past the previous winner's expiry.
      const now = T0 + round * 10_000;
      const { ok, errors } = tally(await Promise.allSettled(Array.from({ length: 20 }, (_, i) => stores[i % 4]!.leases.take('lease:x', `taker${i}`, 1000, now))));
      expect(ok).toHaveLength(1);
      expect(errors).toHaveLength(19);
      for (const error of errors) expect(error).toMatchObject({ code: 'conflict', retryable: true });
      tokens.push(ok[0]!.token);
      expect(await stores[0]!.leases.get('lease:x')).toEqual({ holder: ok[0]!.holder, token: ok[0]!.token, expiresAt: now + 1000 });
    }
    expect(tokens).toEqual([1, 2, 3, 4, 5]);

    // The same race through the append guard: exactly one append commits, the others write nothing.
    const now = T0 + 100_000;
    const { ok, errors } = tally(
      await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) =>
          stores[i % 4]!.events.append(`run:${i}`, [paused('claim')], { expectedVersion: 0, kind: 'run', nowMs: now, guards: [{ kind: 'take-lease', name: 'lease:x', holder: `taker${i}`, ttlMs: 1000 }] }),
        ),
      ),
    );
    expect(ok).toHaveLength(1);
    expect(ok[0]!.leases['lease:x']!.token).toBe(6);
    for (const error of errors) expect(error).toMatchObject({ code: 'conflict' });
    expect(await stores[0]!.events.headPosition()).toBe(1);
  });

  it('fence against takeover: a holder\'s fenced append and a takeover never both commit on one token', async () => {
    const log = pgLog(schemas);
    const holder = await log.open({ applicationName: 'loops-test-holder' });
    const taker = await log.open({ applicationName: 'loops-test-taker' });
    const admin = await adminClient();
    onTestFinished(() => admin.end());
    const waiting = (app: string) => waitForDb(async () => (await lockWaiters(admin, app)) >= 1, 10_000, `${app} waiting for a lock`);
    const E = T0 + 1000; // the holder's lease expires at E
    let streams = 0;
    const fence = (token: number) =>
      holder.events.append(`run:h${++streams}`, [paused('holder reports')], { expectedVersion: 0, kind: 'run', nowMs: E - 1, guards: [{ kind: 'lease-held', name: 'L', holder: 'H', token }] });
    const takeover = (batch?: Batch) =>
      taker.events.append(`run:t${++streams}`, [paused('taker claims')], { expectedVersion: 0, kind: 'run', nowMs: E + 1, batch, guards: [{ kind: 'take-lease', name: 'L', holder: 'T', ttlMs: 1000 }] });
    const handBack = async () => {
      await admin.query(`DELETE FROM "${log.schema}".leases`);
      return (await holder.leases.take('L', 'H', 1000, T0)).token;
    };

    // The takeover commits first (its transaction holds the locks while the fence waits): the fence fails.
    let token = await handBack();
    let fenced!: Promise<AppendResult>;
    await taker.events.batch(async (batch) => {
      await takeover(batch);
      fenced = fence(token);
      await waiting('loops-test-holder');
    });
    await expect(fenced).rejects.toBeInstanceOf(LeaseLostError);

    // The fence commits first: the takeover waits for it, then takes token + 1. Both committed, in that order.
    token = await handBack();
    let taken!: Promise<AppendResult>;
    const reported = await holder.events.batch(async (batch) => {
      const r = await holder.events.append(`run:h${++streams}`, [paused('holder reports')], { expectedVersion: 0, kind: 'run', nowMs: E - 1, batch, guards: [{ kind: 'lease-held', name: 'L', holder: 'H', token }] });
      taken = takeover();
      await waiting('loops-test-taker');
      return r;
    });
    expect((await taken).position).toBeGreaterThan(reported.position);
    expect((await taken).leases['L']!.token).toBe(token + 1);

    // The lease store's own take (one statement, no log head) waits on the fence's row lock.
    token = await handBack();
    let direct!: Promise<{ token: number }>;
    await holder.events.batch(async (batch) => {
      await holder.events.append(`run:h${++streams}`, [paused('holder reports')], { expectedVersion: 0, kind: 'run', nowMs: E - 1, batch, guards: [{ kind: 'lease-held', name: 'L', holder: 'H', token }] });
      direct = taker.leases.take('L', 'T', 1000, E + 1);
      await waiting('loops-test-taker');
    });
    expect((await direct).token).toBe(token + 1);

    // Free races: whatever the order, a committed fence precedes the takeover.
    for (let round = 0; round < 20; round++) {
      token = await handBack();
      const [f, t] = await Promise.allSettled([fence(token), takeover()]);
      expect(t.status).toBe('fulfilled');
      const takenOver = (t as PromiseFulfilledResult<AppendResult>).value;
      expect(takenOver.leases['L']!.token).toBe(token + 1);
      if (f.status === 'fulfilled') expect(f.value.position).toBeLessThan(takenOver.position);
      else expect(f.reason).toBeInstanceOf(LeaseLostError);
    }
  });

  it('events$ of another process (a second pool): it receives this one\'s events through LISTEN/NOTIFY, with its own, in position order, once each', async () => {
    const log = pgLog(schemas);
    const one = await log.open();
    const two = await log.open();
    expect(two.events.listening).toBe(true);
    const atTwo = nextEvents(two.events.events$, 12);
    const atOne = nextEvents(one.events.events$, 12);
    const results: AppendResult[] = [];
    results.push(await one.events.append('loop:a', [paused('1'), paused('2')], { expectedVersion: 0, kind: 'loop' }));
    results.push(await two.events.append('loop:z', [paused('z1')], { expectedVersion: 0, kind: 'loop' }));
    results.push(...(await Promise.all(['b', 'c', 'd', 'e'].map((s) => one.events.append(`loop:${s}`, [paused(s)], { expectedVersion: 0, kind: 'loop' })))));
    results.push(await two.events.append('loop:z', [paused('z2')], { expectedVersion: 1 }));
    results.push(
      ...(await one.events.batch(async (batch) => [
        await one.events.append('loop:a', [paused('3')], { expectedVersion: 2, batch }),
        await one.events.append('loop:f', [paused('f'), paused('f2')], { expectedVersion: 0, kind: 'loop', batch }),
      ])),
    );
    results.push(await two.events.append('loop:z', [paused('z3')], { expectedVersion: 2 }));
    const expected = results.flatMap((r) => r.events).sort((x, y) => x.position - y.position);
    expect(expected.map((e) => e.position)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    expect(await atTwo).toEqual(expected);
    expect(await atOne).toEqual(expected);
  });

  it('a lost LISTEN connection: the store says so, polls the head and still delivers, then listens again', async () => {
    const log = pgLog(schemas);
    const writer = await log.open({ follow: false });
    const store = await log.open({ pollMs: 50, reconnectMs: 2000 });
    const admin = await adminClient();
    onTestFinished(() => admin.end());
    expect(store.events.listening).toBe(true);
    const received: Array<{ reason: string; listening: boolean }> = [];
    const sub = store.events.events$.subscribe((e) => received.push({ reason: reasons([e])[0]!, listening: store.events.listening }));
    onTestFinished(() => sub.unsubscribe());

    const down = firstValueFrom(store.events.listening$.pipe(filter((l) => !l)));
    await admin.query('SELECT pg_terminate_backend($1)', [store.events.listenerPid]);
    await down;
    expect(store.events.listening).toBe(false);
    expect(store.events.listenerPid).toBeNull();

    const polled = nextEvents(store.events.events$, 1);
    await writer.events.append('loop:a', [paused('while polling')], { expectedVersion: 0, kind: 'loop' });
    await polled;
    expect(received).toEqual([{ reason: 'while polling', listening: false }]);

    await firstValueFrom(store.events.listening$.pipe(filter((l) => l)));
    expect(store.events.listenerPid).not.toBeNull();
    const notified = nextEvents(store.events.events$, 1);
    await writer.events.append('loop:a', [paused('listening again')], { expectedVersion: 1 });
    await notified;
    expect(received).toEqual([
      { reason: 'while polling', listening: false },
      { reason: 'listening again', listening: true },
    ]);
  });
});

describe.skipIf(!havePg)('PostgreSQL store: opening, errors, closing', () => {
  it('a bad URL or schema name is a ValidationError, before any connection', async () => {
    await expect(openPgStore({ url: 'not a url', schema: 'loops' })).rejects.toThrow(ValidationError);
    await expect(openPgStore({ url: 'mysql://root:pw@localhost/x', schema: 'loops' })).rejects.toThrow(/is not a postgres:\/\/ URL/);
    await expect(openPgStore({ url: 'mysql://root:pw@localhost/x', schema: 'loops' })).rejects.not.toThrow(/pw/);
    await expect(openPgStore({ url: PG_URL, schema: 'Bad-Name' })).rejects.toThrow(/schema name "Bad-Name" is not valid/);
    await expect(openPgStore({ url: PG_URL, schema: 'pg_loops' })).rejects.toThrow(ValidationError);
  });

  it('an unreachable server, a missing database: the message says where (never the password) and how to fix it', async () => {
    const unreachable = await openPgStore({ url: 'postgres://loops:secret@127.0.0.1:1/fleet', schema: 'loops', connectTimeoutMs: 2000 }).catch((e: unknown) => e);
    expect(unreachable).toBeInstanceOf(LoopsError);
    expect((unreachable as LoopsError).message).toMatch(/^cannot reach PostgreSQL at loops@127\.0\.0\.1:1\/fleet: /);
    expect((unreachable as LoopsError).hint).toMatch(/server is running/);
    expect(JSON.stringify({ m: (unreachable as LoopsError).message, h: (unreachable as LoopsError).hint })).not.toMatch(/secret/);

    const url = new URL(PG_URL);
    url.pathname = '/loops_no_such_database';
    const missing = await openPgStore({ url: url.toString(), schema: 'loops' }).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(LoopsError);
    expect((missing as LoopsError).message).toMatch(/database loops_no_such_database does not exist/);
    expect((missing as LoopsError).hint).toMatch(/createdb loops_no_such_database/);
  });

  it('a user who may not create the schema: the message names the right to grant', async () => {
    const admin = await adminClient();
    const role = `loops_test_role_${testSchemaName().slice(-12)}`;
    await admin.query(`CREATE ROLE ${role} LOGIN`);
    onTestFinished(async () => {
      await admin.query(`DROP ROLE IF EXISTS ${role}`);
      await admin.end();
    });
    const url = new URL(PG_URL);
    url.username = role;
    url.password = '';
    const schema = testSchemaName();
    schemas.push(schema);
    const refused = await openPgStore({ url: url.toString(), schema }).catch((e: unknown) => e);
    if ((refused as { message?: string }).message?.includes('refused the connection')) {
      // A server that does not trust this role's login (not the local default): nothing more to check here.
      return;
    }
    expect(refused).toBeInstanceOf(LoopsError);
    expect((refused as LoopsError).message).toMatch(new RegExp(`user ${role} may not create or read loops’ tables in schema ${schema}`));
    expect((refused as LoopsError).hint).toMatch(new RegExp(`GRANT CREATE ON DATABASE \\w+ TO ${role}`));
  });

  it('a schema migrated or a log written by a newer loops is refused', async () => {
    const log = pgLog(schemas);
    await (await log.open()).end();
    const admin = await adminClient();
    onTestFinished(() => admin.end());
    await admin.query(`UPDATE "${log.schema}".log_head SET format = 99`);
    await expect(log.open()).rejects.toThrow(FormatVersionError);
    await expect(log.open()).rejects.toThrow(/log uses format 99, but this loops understands only up to 2/);
    await admin.query(`UPDATE "${log.schema}".log_head SET format = 1`);
    await admin.query(`INSERT INTO "${log.schema}".loops_migrations (version) VALUES (99)`);
    await expect(log.open()).rejects.toThrow(/tables are at migration 99/);
  });

  it('the queued guard without a run_queue table: not supported yet, said plainly', async () => {
    const log = pgLog(schemas);
    const store = await log.open();
    await expect(store.events.append('run:r', [paused('claim')], { expectedVersion: 0, kind: 'run', guards: [{ kind: 'queued', runId: 'r' }] })).rejects.toThrow(
      /cannot check that run r is still queued: schema \w+ has no run_queue table/,
    );
  });

  it('two processes opening a new schema at once: one creates it, both work', async () => {
    const log = pgLog(schemas);
    const [one, two] = await Promise.all([log.open(), log.open()]);
    await one.events.append('loop:a', [paused('a')], { expectedVersion: 0, kind: 'loop' });
    expect(await two.events.headPosition()).toBe(1);
  });

  it('a process that opens the store, appends and ends it (awaited), closes it, or forgets to, exits by itself', async () => {
    const log = pgLog(schemas);
    // The store as a process would load it: bundled from the sources (packages left to node_modules).
    const dir = join(ROOT, 'node_modules', '.cache', `loops-pg-exit-${process.pid}-${Date.now()}`);
    mkdirSync(dir, { recursive: true });
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    buildSync({ entryPoints: [join(ROOT, 'src', 'events', 'pg', 'index.ts')], bundle: true, platform: 'node', format: 'esm', packages: 'external', outfile: join(dir, 'pg-store.mjs'), logLevel: 'silent' });
    const script = join(dir, 'main.mjs');
    writeFileSync(
      script,
      `import { openPgStore } from './pg-store.mjs';
       const store = await openPgStore({ url: process.argv[2], schema: process.argv[3] });
       const r = await store.events.append('loop:' + process.argv[4], [{ type: 'loop.paused', data: { reason: 'x' }, at: new Date().toISOString() }], { expectedVersion: 0, kind: 'loop' });
       console.log('appended', r.position, store.events.listening);
       if (process.argv[4] === 'close') store.events.close();
       if (process.argv[4] === 'end') { await store.end(); console.log('ended'); }
       setTimeout(() => { console.error('still alive after 20 s'); process.exit(9); }, 20_000).unref();
      `,
    );
    const run = (how: string) =>
      new Promise<{ code: number | null; out: string }>((resolve) => {
        const child = spawn(process.execPath, [script, PG_URL, log.schema, how], { stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        child.stdout.on('data', (c: Buffer) => (out += c.toString()));
        child.stderr.on('data', (c: Buffer) => (out += c.toString()));
        child.on('exit', (code) => resolve({ code, out }));
      });
    const closed = await run('close');
    expect(closed).toEqual({ code: 0, out: 'appended 1 true\n' });
    const forgotten = await run('forgotten');
    expect(forgotten).toEqual({ code: 0, out: 'appended 2 true\n' });
    // An awaited end resolves (it once waited for an unreferenced LISTEN socket's close: exit 13).
    const ended = await run('end');
    expect(ended).toEqual({ code: 0, out: 'appended 3 true\nended\n' });
  });
});
