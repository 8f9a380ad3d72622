/**
 * Group commit (src/events/sqlite-log.ts): the appends made outside a batch in one turn of the event
 * loop share one transaction, each in its own savepoint, and each promise settles after the commit.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { openDatabase, type Db } from '../../src/events/db.js';
import { BusyError, ConcurrencyConflictError, LeaseLostError } from '../../src/events/errors.js';
import { SqliteEventLog } from '../../src/events/sqlite-log.js';
import type { NewEvent, StoredEvent } from '../../src/events/types.js';
import { currentMachines } from '../../src/machines/registry.js';
import { DurableActor } from '../../src/runtime/actor.js';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { at, loopEv } from '../helpers/events.js';
import { tempDir, useRuntime } from '../helpers/tmp.js';

function openLog(options: { busyTimeoutMs?: number } = {}): { db: Db; log: SqliteEventLog; file: string } {
  const file = join(tempDir(), 'log.db');
  const db = openDatabase(file, options);
  const log = new SqliteEventLog(db);
  onTestFinished(() => {
    log.close();
    db.close();
  });
  return { db, log, file };
}

const paused = (reason: string): NewEvent => ({ type: 'loop.paused', data: { reason }, at: at(0) });
/** Rows another connection sees: what is committed. */
function committed(file: string): number {
  const reader = new Database(file, { readonly: true });
  try {
    return (reader.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number }).n;
  } finally {
    reader.close();
  }
}

describe('group commit', () => {
  it('appends to many streams in one turn share one commit; each promise settles after it, events published in order', async () => {
    const { log, file } = openLog();
    const seen: string[] = [];
    const sub = log.events$.subscribe((e) => seen.push(e.streamId));
    const before = { ...log.commitStats };
    const settledAt: number[] = [];
    const appends = ['a', 'b', 'c', 'd', 'e'].map((s) =>
      log.append(`loop:${s}`, [paused(s)], { expectedVersion: 0, kind: 'loop' }).then((r) => {
        // Durable when told: another connection sees every row of the group.
        settledAt.push(committed(file));
        return r;
      }),
    );
    // Nothing is written before the turn ends.
    expect(committed(file)).toBe(0);
    const results = await Promise.all(appends);
    sub.unsubscribe();
    expect(results.map((r) => r.position)).toEqual([1, 2, 3, 4, 5]);
    expect(settledAt).toEqual([5, 5, 5, 5, 5]);
    expect(seen).toEqual(['loop:a', 'loop:b', 'loop:c', 'loop:d', 'loop:e']);
    expect(log.commitStats.commits - before.commits).toBe(1);
    expect(log.commitStats.appends - before.appends).toBe(5);
  });

  it('a failed append undoes only its own savepoint and rejects only its own promise', async () => {
    const { log } = openLog();
    await log.append('loop:a', [paused('a1')], { expectedVersion: 0, kind: 'loop' });
    const seen: StoredEvent[] = [];
    const sub = log.events$.subscribe((e) => seen.push(e));
    const ok1 = log.append('loop:b', [paused('b1')], { expectedVersion: 0, kind: 'loop' });
    const stale = log.append('loop:a', [paused('a-stale')], { expectedVersion: 0 });
    const badLease = log.append('loop:c', [paused('c1')], { expectedVersion: 0, kind: 'loop', guards: [{ kind: 'lease-held', name: 'run:x', holder: 'me', token: 1 }] });
    const ok2 = log.append('loop:a', [paused('a2')], { expectedVersion: 1 });
    await expect(stale).rejects.toBeInstanceOf(ConcurrencyConflictError);
    await expect(badLease).rejects.toBeInstanceOf(LeaseLostError);
    expect((await ok1).version).toBe(1);
    expect((await ok2).version).toBe(2);
    sub.unsubscribe();
    expect(seen.map((e) => `${e.streamId}@${e.version}`)).toEqual(['loop:b@1', 'loop:a@2']);
    expect(await log.streamInfo('loop:c')).toBeUndefined();
    expect((await log.readStream('loop:a')).map((e) => (e.data as { reason: string }).reason)).toEqual(['a1', 'a2']);
  });

  it('two appends to one stream in one turn: the second on top of the first; if the first fails, so does the second', async () => {
    const { log } = openLog();
    const first = log.append('loop:a', [paused('1')], { expectedVersion: 0, kind: 'loop' });
    const second = log.append('loop:a', [paused('2')], { expectedVersion: 1 });
    expect([(await first).version, (await second).version]).toEqual([1, 2]);

    const failing = log.append('loop:a', [paused('3')], { expectedVersion: 2, guards: [{ kind: 'lease-held', name: 'run:x', holder: 'me', token: 1 }] });
    const onTop = log.append('loop:a', [paused('4')], { expectedVersion: 3 });
    await expect(failing).rejects.toBeInstanceOf(LeaseLostError);
    await expect(onTop).rejects.toBeInstanceOf(ConcurrencyConflictError);
    expect((await log.streamInfo('loop:a'))?.version).toBe(2);
  });

  it('settled() waits for the turn’s group; a batch begun meanwhile commits the group first, keeping the order', async () => {
    const { log, file } = openLog();
    const early = log.append('loop:a', [paused('early')], { expectedVersion: 0, kind: 'loop' });
    const inBatch = log.batch(async (batch) => (await log.append('loop:b', [paused('batched')], { expectedVersion: 0, kind: 'loop', batch })).position);
    await log.settled();
    expect(committed(file)).toBeGreaterThanOrEqual(1);
    expect((await early).position).toBe(1);
    expect(await inBatch).toBe(2);
    void log.append('loop:c', [paused('c')], { expectedVersion: 0, kind: 'loop' });
    await log.settled();
    expect(committed(file)).toBe(3);
    // Nothing waiting: at once.
    await log.settled();
  });

  it('a transaction that cannot start (the lock held elsewhere) rejects the whole group, writes nothing, and works once released', async () => {
    const { log, file } = openLog({ busyTimeoutMs: 50 });
    const other = new Database(file);
    onTestFinished(() => {
      other.close();
    });
    other.exec('BEGIN EXCLUSIVE');
    const a = log.append('loop:a', [paused('a')], { expectedVersion: 0, kind: 'loop' });
    const b = log.append('loop:b', [paused('b')], { expectedVersion: 0, kind: 'loop' });
    await expect(a).rejects.toBeInstanceOf(BusyError);
    await expect(b).rejects.toBeInstanceOf(BusyError);
    other.exec('ROLLBACK');
    expect(committed(file)).toBe(0);
    const again = await Promise.all([
      log.append('loop:a', [paused('a')], { expectedVersion: 0, kind: 'loop' }),
      log.append('loop:b', [paused('b')], { expectedVersion: 0, kind: 'loop' }),
    ]);
    expect(again.map((r) => r.position)).toEqual([1, 2]);
  });

  it('groupCommit: false commits each append before its promise is returned', async () => {
    const file = join(tempDir(), 'log.db');
    const db = openDatabase(file);
    const log = new SqliteEventLog(db, { groupCommit: false });
    onTestFinished(() => {
      log.close();
      db.close();
    });
    const pending = log.append('loop:a', [paused('a')], { expectedVersion: 0, kind: 'loop' });
    expect(committed(file)).toBe(1);
    await pending;
  });
});

describe('an actor whose records share a group', () => {
  it('moves back once, to the state before both, when the first fails; then records again', async () => {
    const runtime = await useRuntime({ clock: new SimulatedClock('2026-02-01T00:00:00.000Z') });
    const actor = DurableActor.create(runtime, 'loop:loop_1', 'loop', currentMachines.loop);
    await actor.record('loop.created', loopEv.created().data);
    expect([actor.version, actor.state]).toEqual([1, 'active']);
    const fenced = actor.record('loop.paused', { reason: 'x' }, { guards: [{ kind: 'lease-held', name: 'loop:loop_1', holder: 'nobody', token: 7 }] });
    const onTop = actor.record('loop.resumed', { reason: null, nextRunAt: null });
    // Both moved the actor ahead, optimistically.
    expect(actor.version).toBe(3);
    await expect(fenced).rejects.toBeInstanceOf(LeaseLostError);
    await expect(onTop).rejects.toBeInstanceOf(ConcurrencyConflictError);
    expect([actor.version, actor.state]).toEqual([1, 'active']);
    await actor.record('loop.paused', { reason: 'y' });
    expect([actor.version, actor.state]).toEqual([2, 'paused']);
    expect((await runtime.log.readStream('loop:loop_1')).map((e) => e.type)).toEqual(['loop.created', 'loop.paused']);
  });

  it('keeps the first when only the second fails', async () => {
    const runtime = await useRuntime({ clock: new SimulatedClock('2026-02-01T00:00:00.000Z') });
    const actor = DurableActor.create(runtime, 'loop:loop_2', 'loop', currentMachines.loop);
    await actor.record('loop.created', loopEv.created({ loopId: 'loop_2' }).data);
    const first = actor.record('loop.paused', { reason: 'x' });
    const second = actor.record('loop.resumed', { reason: null, nextRunAt: null }, { guards: [{ kind: 'lease-held', name: 'loop:loop_2', holder: 'nobody', token: 7 }] });
    await first;
    await expect(second).rejects.toBeInstanceOf(LeaseLostError);
    expect([actor.version, actor.state]).toEqual([2, 'paused']);
  });
});
