/**
 * `loops`: one row per loop definition, its status and schedule, and a summary of its last run.
 * Removed loops keep their row (status `removed`) so history still resolves; names are unique
 * among loops that are not removed.
 */
import type { StoredEvent } from '../events/types.js';
import { defineProjection, sql, stateName, streamKey, type ProjectionEvent } from './types.js';
import { PROJECTION_VERSIONS } from './versions.js';

const loopIdOf = (event: StoredEvent) => streamKey(event, 'loop');

/** Paused, resumed, stopped or archived: the status, the reason and the due time (none unless resumed). */
function statusChanged(event: ProjectionEvent<'loop.paused' | 'loop.resumed' | 'loop.stopped' | 'loop.archived'>, nextRunAt: string | null) {
  return sql(
    'UPDATE loops SET status = ?, reason = ?, next_run_at = ?, updated_at = ? WHERE id = ?',
    stateName(event),
    event.data.reason,
    nextRunAt,
    event.at,
    loopIdOf(event),
  );
}

/** A slot decision that carries the loop's next due time; `scheduled` counts it as a scheduled run. */
function slotDecided(event: ProjectionEvent<'slot.fired' | 'slot.buffered' | 'slot.skipped' | 'slot.missed'>, scheduled: 0 | 1) {
  return sql(
    `UPDATE loops SET next_run_at = ?, scheduled_runs = scheduled_runs + ?, updated_at = ? WHERE id = ?`,
    event.data.nextRunAt,
    scheduled,
    event.at,
    loopIdOf(event),
  );
}

export const loopsProjection = defineProjection({
  name: 'loops',
  // v2: the last-run summary also follows process.spawn_requested / process.spawned.
  // v3: name uniqueness through `live_name` (NULL once removed), so a status change such as
  //     pause/resume does not rewrite the unique index.
  // v4: no last_run_status copy: readers join loop_runs on last_run_id, so a run's later
  //     events no longer rewrite its loop's row.
  // v5: timing (zone, jitter, starts/expires, max runs) and the count of scheduled runs.
  // v6: slot decisions move next_run_at; scheduled_runs counts fired slots; expired loops.
  // v7: an index on (status, next_run_at): finding due loops costs the same with 10 or 10,000 loops.
  // v8: no run_count / last_run_*: readers compute them from loop_runs, which an archived run
  //     (its run.claimed gone from the log) still has a row in.
  // v9: runs_on, the labels a runner needs to claim its work (`--runs-on`).
  version: PROJECTION_VERSIONS.loops,
  ddl: [
    `CREATE TABLE IF NOT EXISTS loops (
      id              TEXT PRIMARY KEY,
      name            TEXT NOT NULL,
      -- The name while the loop is not removed, NULL after: names are unique among live loops.
      live_name       TEXT,
      description     TEXT,
      status          TEXT NOT NULL,
      schedule        TEXT NOT NULL,
      timing          TEXT NOT NULL,
      target          TEXT NOT NULL,
      policies        TEXT NOT NULL,
      next_run_at     TEXT,
      reason          TEXT,
      created_at      TEXT NOT NULL,
      updated_at      TEXT NOT NULL,
      -- Runs of scheduled slots (not run-now): what --max-runs counts.
      scheduled_runs  INTEGER NOT NULL DEFAULT 0,
      -- JSON array of the labels a runner needs to run it (--runs-on); NULL: any runner.
      runs_on         TEXT
    )`,
    `CREATE UNIQUE INDEX IF NOT EXISTS loops_live_name ON loops (live_name)`,
    `CREATE INDEX IF NOT EXISTS loops_due ON loops (status, next_run_at)`,
  ],
  tables: [{ name: 'loops', orderBy: 'id' }],
  on: {
    'loop.created': (e) => {
      const d = e.data;
      return [
        sql(
          `INSERT INTO loops (id, name, live_name, description, status, schedule, timing, target, policies, next_run_at, created_at, updated_at, runs_on)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          d.loopId,
          d.name,
          d.name,
          d.description,
          stateName(e) ?? 'active',
          JSON.stringify(d.schedule),
          JSON.stringify(d.timing),
          JSON.stringify(d.target),
          JSON.stringify(d.policies),
          d.nextRunAt,
          e.at,
          e.at,
          d.runsOn ? JSON.stringify(d.runsOn) : null,
        ),
      ];
    },
    'loop.paused': (e) => [statusChanged(e, null)],
    'loop.resumed': (e) => [statusChanged(e, e.data.nextRunAt)],
    'loop.stopped': (e) => [statusChanged(e, null)],
    'loop.archived': (e) => [statusChanged(e, null)],
    'loop.removed': (e) => [
      sql(
        'UPDATE loops SET status = ?, live_name = NULL, reason = ?, next_run_at = NULL, updated_at = ? WHERE id = ?',
        stateName(e),
        e.data.reason,
        e.at,
        loopIdOf(e),
      ),
    ],
    'loop.expired': (e) => [
      sql('UPDATE loops SET status = ?, next_run_at = NULL, updated_at = ? WHERE id = ?', stateName(e), e.at, loopIdOf(e)),
    ],
    'loop.rescheduled': (e) => [sql('UPDATE loops SET next_run_at = ?, updated_at = ? WHERE id = ?', e.data.nextRunAt, e.at, loopIdOf(e))],
    // A slot decision moves the due time; a fired or buffered slot is a scheduled run.
    'slot.fired': (e) => [slotDecided(e, 1)],
    'slot.buffered': (e) => [slotDecided(e, 1)],
    'slot.skipped': (e) => [slotDecided(e, 0)],
    'slot.missed': (e) => [slotDecided(e, 0)],
  },
});
