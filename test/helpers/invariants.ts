/**
 * Checks every integration test runs after touching the log:
 *  - every stream replays on the machine that wrote it to the states recorded in the log;
 *  - the live projection tables equal a rebuild into a scratch database (verifyProjections);
 *  - deleting the live rows and rebuilding in place restores identical rows.
 */
import { join } from 'node:path';
import { expect } from 'vitest';
import { openDatabase, type Db } from '../../src/events/db.js';
import { SqliteEventLog } from '../../src/events/sqlite-log.js';
import { syncLog as syncLogOf } from '../../src/runtime/admin/invariants.js';
import type { EventStore } from '../../src/events/types.js';
import { rebuildProjections, verifyProjections } from '../../src/runtime/admin/projections.js';
import { findViolations, replaySync, type InvariantOptions } from '../../src/runtime/admin/invariants.js';

export { findViolations, replaySync };

export type TableRows = Record<'loops' | 'loop_runs', unknown[]>;

export function projectionRows(db: Db): TableRows {
  return {
    loops: db.prepare('SELECT * FROM loops ORDER BY id').all(),
    loop_runs: db.prepare('SELECT * FROM loop_runs ORDER BY id').all(),
  };
}

/**
 * These helpers stay synchronous (plain calls in assertions): they read through the SQLite store's
 * `*Sync` reads, so the log they are given must be a `SqliteEventLog` (a runtime's is).
 */
const syncLog = (log: EventStore): SqliteEventLog => syncLogOf(log);

export function expectReplayOk(log: EventStore, streamId: string): void {
  const result = replaySync(log, streamId);
  expect(result.steps, `${streamId} has events`).toBeGreaterThan(0);
  expect(result.ok, `${streamId} diverges at version ${result.firstMismatch}`).toBe(true);
}

export function expectVerifyOk(db: Db): void {
  const verify = verifyProjections(db);
  expect(verify.ok, verify.tables.flatMap((t) => t.differences).join('\n')).toBe(true);
}

export function expectRebuildRestores(db: Db): void {
  const before = projectionRows(db);
  db.exec('DELETE FROM loop_runs; DELETE FROM loops');
  expect(projectionRows(db)).toEqual({ loops: [], loop_runs: [] });
  rebuildProjections(db);
  expect(projectionRows(db)).toEqual(before);
}

/** All three checks, over every stream in the log. */
export function expectLogConsistent(runtime: { db: Db; log: EventStore }): void {
  const streams = runtime.db.prepare<[], { stream_id: string }>('SELECT stream_id FROM streams ORDER BY stream_id').all();
  for (const { stream_id } of streams) expectReplayOk(runtime.log, stream_id);
  expectVerifyOk(runtime.db);
  expectRebuildRestores(runtime.db);
}

export function eventTypes(log: EventStore, streamId: string): string[] {
  return syncLog(log).readStreamSync(streamId).map((e) => e.type);
}

// The invariant checker itself is src/runtime/admin/invariants.ts (`loops verify` runs it too).
export type { InvariantOptions };

/** Fails with every violation listed. */
export function expectInvariants(runtime: { db: Db; log: EventStore }, options: InvariantOptions = {}): void {
  expect(findViolations(runtime.db, runtime.log, options)).toEqual([]);
}

/** The checker on a data directory another process wrote (e2e): opened read-mostly, closed after. */
export function expectDataDirInvariants(dataDir: string, options: InvariantOptions = {}): void {
  const db = openDatabase(join(dataDir, 'loops.db'));
  try {
    expect(findViolations(db, new SqliteEventLog(db, { handlers: [] }), options)).toEqual([]);
  } finally {
    db.close();
  }
}
