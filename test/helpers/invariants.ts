/**
 * Checks every integration test runs after touching the log:
 *  - every stream replays on the machine that wrote it to the states recorded in the log;
 *  - the live projection tables equal a rebuild into a scratch database (verifyProjections);
 *  - deleting the live rows and rebuilding in place restores identical rows.
 */
import { expect } from 'vitest';
import type { Db } from '../../src/events/db.js';
import type { EventLog } from '../../src/events/types.js';
import { rebuildProjections, verifyProjections } from '../../src/runtime/projection-admin.js';
import { replayStream } from '../../src/runtime/replay.js';

export type TableRows = Record<'loops' | 'loop_runs', unknown[]>;

export function projectionRows(db: Db): TableRows {
  return {
    loops: db.prepare('SELECT * FROM loops ORDER BY id').all(),
    loop_runs: db.prepare('SELECT * FROM loop_runs ORDER BY id').all(),
  };
}

export function expectReplayOk(log: EventLog, streamId: string): void {
  const result = replayStream(log, streamId);
  expect(result.steps.length, `${streamId} has events`).toBeGreaterThan(0);
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
export function expectLogConsistent(runtime: { db: Db; log: EventLog }): void {
  const streams = runtime.db.prepare<[], { stream_id: string }>('SELECT stream_id FROM streams ORDER BY stream_id').all();
  for (const { stream_id } of streams) expectReplayOk(runtime.log, stream_id);
  expectVerifyOk(runtime.db);
  expectRebuildRestores(runtime.db);
}

export function eventTypes(log: EventLog, streamId: string): string[] {
  return log.readStream(streamId).map((e) => e.type);
}
