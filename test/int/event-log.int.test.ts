import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { openDatabase, type Db } from '../../src/events/db.js';
import { BusyError, ConcurrencyConflictError, ValidationError } from '../../src/events/errors.js';
import { SqliteEventLog } from '../../src/events/sqlite-log.js';
import type { AppendResult, InlineHandler, NewEvent, StoredEvent } from '../../src/events/types.js';
import { inlineHandler, projections } from '../../src/projections/registry.js';
import { at, loopEv } from '../helpers/events.js';
import { tempDir } from '../helpers/tmp.js';

function openLog(handlers: InlineHandler[] = []): { db: Db; log: SqliteEventLog; file: string } {
  const file = join(tempDir(), 'log.db');
  const db = openDatabase(file);
  const log = new SqliteEventLog(db, { handlers });
  onTestFinished(() => {
    log.close();
    db.close();
  });
  return { db, log, file };
}

const paused = (reason: string, ms = 0): NewEvent => ({ type: 'loop.paused', data: { reason }, at: at(ms) });
const count = (db: Db, table: string) => (db.prepare(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;

describe('SqliteEventLog: append and read', () => {
  it('appends events with contiguous stream versions and global positions', async () => {
    const { log } = openLog();
    const first = await log.append('loop:a', [paused('1'), paused('2')], { expectedVersion: 0, kind: 'loop' });
    expect(first).toMatchObject({ streamId: 'loop:a', version: 2, position: 2 });
    expect(first.events.map((e) => [e.version, e.position])).toEqual([
      [1, 1],
      [2, 2],
    ]);
    const other = await log.append('loop:b', [paused('b1')], { expectedVersion: 0, kind: 'loop', machine: { id: 'm', version: 3 } });
    expect(other).toMatchObject({ version: 1, position: 3 });
    const third = await log.append('loop:a', [paused('3', 10)], { expectedVersion: 2 });
    expect(third).toMatchObject({ version: 3, position: 4 });
    expect(await log.headPosition()).toBe(4);

    const stream = await log.readStream('loop:a');
    expect(stream.map((e) => [e.version, e.position, (e.data as { reason: string }).reason])).toEqual([
      [1, 1, '1'],
      [2, 2, '2'],
      [3, 4, '3'],
    ]);
    expect((await log.readStream('loop:a', 3)).map((e) => e.version)).toEqual([3]);
    expect(await log.readStream('loop:none')).toEqual([]);
    expect(await log.streamInfo('loop:a')).toMatchObject({ kind: 'loop', version: 3, createdAt: at(0), updatedAt: at(10), machineId: null });
    expect(await log.streamInfo('loop:b')).toMatchObject({ machineId: 'm', machineVersion: 3 });
    expect(await log.streamInfo('loop:none')).toBeUndefined();
  });

  it('stores type, schema version, data, meta, time and state, and reads them back', async () => {
    const { log } = openLog();
    await log.append('loop:a', [{ ...paused('why'), meta: { runnerId: 'r1', correlationId: 'c' }, state: 'paused' }], {
      expectedVersion: 0,
      kind: 'loop',
    });
    await log.append('loop:a', [paused('no state')], { expectedVersion: 1 });
    const [a, b] = (await log.readStream('loop:a')) as [StoredEvent, StoredEvent];
    expect(a).toEqual({
      position: 1,
      streamId: 'loop:a',
      version: 1,
      type: 'loop.paused',
      v: 1,
      data: { reason: 'why' },
      meta: { runnerId: 'r1', correlationId: 'c' },
      at: at(0),
      state: 'paused',
    });
    expect(b.state).toBeNull();
    expect(b.meta).toEqual({});
  });

  it('readAll pages by global position', async () => {
    const { log } = openLog();
    for (let i = 0; i < 5; i++) await log.append(`loop:${i % 2}`, [paused(String(i))], { expectedVersion: Math.floor(i / 2), kind: 'loop' });
    expect((await log.readAll()).map((e) => e.position)).toEqual([1, 2, 3, 4, 5]);
    expect((await log.readAll({ fromPosition: 2 })).map((e) => e.position)).toEqual([3, 4, 5]);
    expect((await log.readAll({ fromPosition: 1, limit: 2 })).map((e) => e.position)).toEqual([2, 3]);
    expect([...log.iterateAll(0, 2)].map((e) => e.position)).toEqual([1, 2, 3, 4, 5]);
    expect(await log.headPosition()).toBe(5);
  });

  it('an empty log has head position 0', async () => {
    const { log } = openLog();
    expect(await log.headPosition()).toBe(0);
    expect(await log.readAll()).toEqual([]);
  });

  it('refuses empty appends, invalid payloads and unknown types, writing nothing', async () => {
    const { log, db } = openLog();
    await expect(log.append('loop:a', [], { expectedVersion: 0, kind: 'loop' })).rejects.toThrow(ValidationError);
    await expect(log.append('loop:a', [{ type: 'loop.paused', data: { reason: 5 }, at: at(0) }], { expectedVersion: 0, kind: 'loop' })).rejects.toThrow(
      /invalid loop\.paused event: reason: /,
    );
    await expect(log.append('loop:a', [{ type: 'loop.nope', data: {}, at: at(0) }], { expectedVersion: 0, kind: 'loop' })).rejects.toThrow(/unknown event type/);
    await expect(log.append('loop:a', [paused('x')], { expectedVersion: 0 })).rejects.toThrow(/needs a kind/);
    expect(count(db, 'events')).toBe(0);
    expect(count(db, 'streams')).toBe(0);
  });
});

describe('SqliteEventLog: optimistic concurrency', () => {
  it('a stale expected version throws ConcurrencyConflictError and appends nothing', async () => {
    const { log, db } = openLog();
    await log.append('loop:a', [paused('1')], { expectedVersion: 0, kind: 'loop' });
    await log.append('loop:a', [paused('2')], { expectedVersion: 1 });
    for (const expectedVersion of [0, 1, 3]) {
      let caught: unknown;
      try {
        await log.append('loop:a', [paused('stale')], { expectedVersion, kind: 'loop' });
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(ConcurrencyConflictError);
      expect(caught).toMatchObject({ code: 'conflict', streamId: 'loop:a', expectedVersion, actualVersion: 2, retryable: true });
    }
    expect(count(db, 'events')).toBe(2);
    expect((await log.streamInfo('loop:a'))?.version).toBe(2);
    expect(await log.headPosition()).toBe(2);
  });

  it('two connections to one file: the second writer with the same expected version conflicts', async () => {
    const { log, file } = openLog();
    const db2 = openDatabase(file);
    const log2 = new SqliteEventLog(db2);
    onTestFinished(() => {
      db2.close();
    });
    await log.append('loop:a', [paused('1')], { expectedVersion: 0, kind: 'loop' });
    await log.append('loop:a', [paused('mine')], { expectedVersion: 1 });
    await expect(log2.append('loop:a', [paused('theirs')], { expectedVersion: 1 })).rejects.toThrow(ConcurrencyConflictError);
    expect((await log2.readStream('loop:a')).map((e) => (e.data as { reason: string }).reason)).toEqual(['1', 'mine']);
  });

  // A guard that does not hold, and a take-lease with expectToken: store-contract.int (both stores).
});

describe('SqliteEventLog: projections and publication', () => {
  function withProjections(extra: InlineHandler[] = []) {
    const opened = openLog([inlineHandler(), ...extra]);
    for (const p of projections) for (const ddl of p.ddl) opened.db.exec(ddl);
    return opened;
  }

  it('runs inline projections inside the append', async () => {
    const { log, db } = withProjections();
    const created = loopEv.created();
    await log.append('loop:loop_1', [{ ...created, state: 'active' }], { expectedVersion: 0, kind: 'loop' });
    expect(db.prepare('SELECT id, name, status FROM loops').all()).toEqual([{ id: 'loop_1', name: 'backup', status: 'active' }]);
  });

  it('a failing projection statement rolls back the whole append: no event, no stream, no position used', async () => {
    let fail = false;
    const { log, db } = withProjections([
      (event) => (fail && event.type === 'loop.paused' ? [{ sql: 'INSERT INTO no_such_table VALUES (?)', params: [1] }] : []),
    ]);
    const seen: StoredEvent[] = [];
    log.events$.subscribe((e) => seen.push(e));
    await log.append('loop:loop_1', [{ ...loopEv.created(), state: 'active' }], { expectedVersion: 0, kind: 'loop' });
    fail = true;
    await expect(log.append('loop:loop_1', [{ ...loopEv.paused('x'), state: 'paused' }], { expectedVersion: 1 })).rejects.toThrow(/no such table/);
    expect(count(db, 'events')).toBe(1);
    expect((await log.streamInfo('loop:loop_1'))?.version).toBe(1);
    expect(await log.headPosition()).toBe(1);
    // The first projection's UPDATE in the same transaction was rolled back too.
    expect(db.prepare('SELECT status, reason FROM loops').get()).toEqual({ status: 'active', reason: null });
    expect(seen.map((e) => e.type)).toEqual(['loop.created']);
    // The next append reuses the position and version.
    fail = false;
    const next = await log.append('loop:loop_1', [{ ...loopEv.paused('y'), state: 'paused' }], { expectedVersion: 1 });
    expect(next).toMatchObject({ version: 2, position: 2 });
  });

  it('a projection constraint violation (duplicate live name) rolls back the event that caused it', async () => {
    const { log, db } = withProjections();
    await log.append('loop:loop_1', [{ ...loopEv.created(), state: 'active' }], { expectedVersion: 0, kind: 'loop' });
    await expect(
      log.append('loop:loop_2', [{ ...loopEv.created({ loopId: 'loop_2' }), state: 'active' }], { expectedVersion: 0, kind: 'loop' }),
    ).rejects.toThrow(/UNIQUE constraint failed: loops\.live_name/);
    expect(count(db, 'events')).toBe(1);
    expect(await log.streamInfo('loop:loop_2')).toBeUndefined();
  });

  it('events$ publishes only after the commit: a second connection already sees the row', async () => {
    const { log, file } = openLog();
    const reader = new Database(file, { readonly: true });
    onTestFinished(() => {
      reader.close();
    });
    const visible: Array<{ position: number; seenByOther: boolean }> = [];
    log.events$.subscribe((e) => {
      const row = reader.prepare('SELECT position FROM events WHERE position = ?').get(e.position);
      visible.push({ position: e.position, seenByOther: row !== undefined });
    });
    await log.append('loop:a', [paused('1'), paused('2')], { expectedVersion: 0, kind: 'loop' });
    expect(visible).toEqual([
      { position: 1, seenByOther: true },
      { position: 2, seenByOther: true },
    ]);
  });

  it('events$ publishes nothing for a failed append and completes on close', async () => {
    const { log } = openLog();
    const seen: number[] = [];
    let completed = false;
    log.events$.subscribe({ next: (e) => seen.push(e.position), complete: () => (completed = true) });
    await log.append('loop:a', [paused('1')], { expectedVersion: 0, kind: 'loop' });
    await expect(log.append('loop:a', [paused('2')], { expectedVersion: 0 })).rejects.toThrow(ConcurrencyConflictError);
    expect(seen).toEqual([1]);
    log.close();
    expect(completed).toBe(true);
  });
});

describe('SqliteEventLog.batch: many appends, one commit', () => {
  it('publishes the batch\'s events after it committed, in order; a conflicting append undoes only itself', async () => {
    const { db, log } = openLog();
    await log.append('loop:a', [paused('a1')], { expectedVersion: 0, kind: 'loop' });
    const seen: Array<[string, number, boolean]> = [];
    const sub = log.events$.subscribe((e) => seen.push([e.streamId, e.version, db.inTransaction]));
    const result = await log.batch(async (batch) => {
      await log.append('loop:b', [paused('b1')], { expectedVersion: 0, kind: 'loop', batch });
      await expect(log.append('loop:a', [paused('stale')], { expectedVersion: 0, batch })).rejects.toThrow(ConcurrencyConflictError);
      await log.append('loop:a', [paused('a2')], { expectedVersion: 1, batch });
      // Nothing published yet: the batch has not committed.
      expect(seen).toEqual([]);
      // A nested batch joins this one.
      return log.batch(async (inner) => (await log.append('loop:c', [paused('c1')], { expectedVersion: 0, kind: 'loop', batch: inner })).position, batch);
    });
    sub.unsubscribe();
    expect(result).toBe(4);
    expect(seen).toEqual([
      ['loop:b', 1, false],
      ['loop:a', 2, false],
      ['loop:c', 1, false],
    ]);
    expect((await log.readStream('loop:a')).map((e) => (e.data as { reason: string }).reason)).toEqual(['a1', 'a2']);
    expect(await log.headPosition()).toBe(4);
  });

  it('a batch that throws commits and publishes nothing', async () => {
    const { log } = openLog();
    const seen: StoredEvent[] = [];
    const sub = log.events$.subscribe((e) => seen.push(e));
    await expect(
      log.batch(async (batch) => {
        await log.append('loop:a', [paused('a1')], { expectedVersion: 0, kind: 'loop', batch });
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    sub.unsubscribe();
    expect(seen).toEqual([]);
    expect(await log.headPosition()).toBe(0);
    expect(await log.readStream('loop:a')).toEqual([]);
    // The log works on after it.
    expect((await log.append('loop:a', [paused('a1')], { expectedVersion: 0, kind: 'loop' })).version).toBe(1);
  });

  it('an append without the batch handle, made while a batch is open, waits for the batch\'s commit and is published after it', async () => {
    const { db, log } = openLog();
    const seen: Array<[string, number, boolean]> = [];
    const sub = log.events$.subscribe((e) => seen.push([e.streamId, e.position, db.inTransaction]));
    let outside!: Promise<AppendResult>;
    let outsideSettled = false;
    await log.batch(async (batch) => {
      await log.append('loop:a', [paused('a1')], { expectedVersion: 0, kind: 'loop', batch });
      outside = log.append('loop:b', [paused('b1')], { expectedVersion: 0, kind: 'loop' });
      void outside.finally(() => (outsideSettled = true));
      await log.append('loop:a', [paused('a2')], { expectedVersion: 1, batch });
      // Still open: the outside append has not run, not even into this transaction (which this connection would see).
      expect(outsideSettled).toBe(false);
      expect(log.readStreamSync('loop:b')).toEqual([]);
      expect(count(db, 'events')).toBe(2);
      expect(seen).toEqual([]);
    });
    const result = await outside;
    sub.unsubscribe();
    // Written in its own transaction after the batch's commit: the next position, published after the batch's events.
    expect(result).toMatchObject({ streamId: 'loop:b', version: 1, position: 3 });
    expect(seen).toEqual([
      ['loop:a', 1, false],
      ['loop:a', 2, false],
      ['loop:b', 3, false],
    ]);
    expect((await log.readAll()).map((e) => [e.streamId, e.position])).toEqual([
      ['loop:a', 1],
      ['loop:a', 2],
      ['loop:b', 3],
    ]);
  });

  it('an append without the batch handle, made while a batch is open, is not rolled back with the batch', async () => {
    const { db, log } = openLog();
    const seen: string[] = [];
    const sub = log.events$.subscribe((e) => seen.push(e.streamId));
    let outside!: Promise<AppendResult>;
    await expect(
      log.batch(async (batch) => {
        await log.append('loop:a', [paused('a1')], { expectedVersion: 0, kind: 'loop', batch });
        outside = log.append('loop:b', [paused('b1')], { expectedVersion: 0, kind: 'loop' });
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await outside).toMatchObject({ streamId: 'loop:b', version: 1 });
    sub.unsubscribe();
    expect(seen).toEqual(['loop:b']);
    expect(await log.readStream('loop:a')).toEqual([]);
    expect((await log.readStream('loop:b')).map((e) => (e.data as { reason: string }).reason)).toEqual(['b1']);
    expect(count(db, 'events')).toBe(1);
  });
});

describe('SqliteEventLog.batch: one writer at a time per database file in this process', () => {
  it('two batches started together take turns: both commit, neither inside the other', async () => {
    const { log } = openLog();
    const order: string[] = [];
    const run = (name: string) =>
      log.batch(async (batch) => {
        order.push(`${name} begins`);
        await log.append(`loop:${name}`, [paused(`${name}1`)], { expectedVersion: 0, kind: 'loop', batch });
        await new Promise<void>((resolve) => setImmediate(resolve)); // the other batch gets every chance to start
        await log.append(`loop:${name}`, [paused(`${name}2`)], { expectedVersion: 1, batch });
        order.push(`${name} ends`);
        return name;
      });
    expect(await Promise.all([run('a'), run('b')])).toEqual(['a', 'b']);
    expect(order).toEqual(['a begins', 'a ends', 'b begins', 'b ends']);
    expect((await log.readAll()).map((e) => [e.streamId, e.position])).toEqual([
      ['loop:a', 1],
      ['loop:a', 2],
      ['loop:b', 3],
      ['loop:b', 4],
    ]);
  });

  it('a second connection of this process to the same file waits for the open batch instead of busy-waiting on its lock', async () => {
    const { log, file } = openLog();
    // busy_timeout 5 s: a second connection that went for SQLite's lock while the batch awaits would
    // block this thread — and the batch with it — for 5 s, then fail busy.
    const otherDb = openDatabase(file);
    const other = new SqliteEventLog(otherDb);
    onTestFinished(() => {
      other.close();
      otherDb.close();
    });
    const started = performance.now();
    let outside!: Promise<AppendResult>;
    await log.batch(async (batch) => {
      await log.append('loop:a', [paused('a1')], { expectedVersion: 0, kind: 'loop', batch });
      outside = other.append('loop:b', [paused('b1')], { expectedVersion: 0, kind: 'loop' });
      await new Promise<void>((resolve) => setImmediate(resolve));
      await log.append('loop:a', [paused('a2')], { expectedVersion: 1, batch });
    });
    expect(await outside).toMatchObject({ streamId: 'loop:b', position: 3 });
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});

describe('SqliteEventLog: a database another connection holds (SQLITE_BUSY)', () => {
  /** A log whose connection waits only 50 ms for the write lock, and a second connection holding it. */
  function lockedLog() {
    const file = join(tempDir(), 'log.db');
    const db = openDatabase(file, { busyTimeoutMs: 50 });
    const log = new SqliteEventLog(db);
    const other = new Database(file);
    onTestFinished(() => {
      if (other.inTransaction) other.exec('ROLLBACK');
      other.close();
      log.close();
      db.close();
    });
    other.exec('BEGIN EXCLUSIVE');
    return { db, log, other };
  }

  it('batch() throws the busy error (code busy, retryable), appends and publishes nothing, and works once the lock is released', async () => {
    const { log, other } = lockedLog();
    const seen: StoredEvent[] = [];
    const sub = log.events$.subscribe((e) => seen.push(e));
    let error: unknown;
    try {
      await log.batch((batch) => log.append('loop:a', [paused('a1')], { expectedVersion: 0, kind: 'loop', batch }));
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(BusyError);
    expect(error).toMatchObject({ code: 'busy', retryable: true, message: 'the database is busy (another loops process holds the write lock)' });
    expect((error as BusyError).cause).toMatchObject({ code: 'SQLITE_BUSY' });
    other.exec('ROLLBACK');
    expect(seen).toEqual([]);
    expect(await log.headPosition()).toBe(0);
    expect(await log.batch(async (batch) => (await log.append('loop:a', [paused('a1')], { expectedVersion: 0, kind: 'loop', batch })).version)).toBe(1);
    sub.unsubscribe();
    expect(seen.map((e) => e.version)).toEqual([1]);
  });

  it('append() outside a batch throws the same busy error', async () => {
    const { log } = lockedLog();
    await expect(log.append('loop:a', [paused('a1')], { expectedVersion: 0, kind: 'loop' })).rejects.toThrow(BusyError);
  });
});
