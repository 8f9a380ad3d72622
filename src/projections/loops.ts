/**
 * `loops`: one row per loop definition, its status and schedule, and a summary of its last run.
 * Removed loops keep their row (status `removed`) so history still resolves; names are unique
 * among loops that are not removed.
 */
import type { EventData } from '../events/catalog.js';
import type { StoredEvent } from '../events/types.js';
import { sql, stateName, type Projection } from './types.js';

const LOOP_STATUS_EVENTS = ['loop.paused', 'loop.resumed', 'loop.stopped', 'loop.archived', 'loop.removed'];

export const loopsProjection: Projection = {
  name: 'loops',
  // v2: the last-run summary also follows process.spawn_requested / process.spawned.
  // v3: name uniqueness through `live_name` (NULL once removed), so a status change such as
  //     pause/resume does not rewrite the unique index.
  // v4: no last_run_status copy: readers join loop_runs on last_run_id, so a run's later
  //     events no longer rewrite its loop's row.
  // v5: timing (zone, jitter, starts/expires, max runs) and the count of scheduled runs.
  // v6: slot decisions move next_run_at; scheduled_runs counts fired slots; expired loops.
  // v7: an index on (status, next_run_at): finding due loops costs the same with 10 or 10,000 loops.
  version: 7,
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
      run_count       INTEGER NOT NULL DEFAULT 0,
      -- Runs of scheduled slots (not run-now): what --max-runs counts.
      scheduled_runs  INTEGER NOT NULL DEFAULT 0,
      last_run_id     TEXT,
      last_run_at     TEXT
    )`,
    `CREATE UNIQUE INDEX IF NOT EXISTS loops_live_name ON loops (live_name)`,
    `CREATE INDEX IF NOT EXISTS loops_due ON loops (status, next_run_at)`,
  ],
  tables: [{ name: 'loops', orderBy: 'id' }],
  handles: new Set([
    'loop.created',
    ...LOOP_STATUS_EVENTS,
    'loop.expired',
    'loop.rescheduled',
    'slot.fired',
    'slot.buffered',
    'slot.skipped',
    'slot.missed',
    'run.claimed',
  ]),
  evolve(event: StoredEvent) {
    switch (event.type) {
      case 'loop.created': {
        const d = event.data as EventData<'loop.created'>;
        return [
          sql(
            `INSERT INTO loops (id, name, live_name, description, status, schedule, timing, target, policies, next_run_at, created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
            d.loopId,
            d.name,
            d.name,
            d.description,
            stateName(event) ?? 'active',
            JSON.stringify(d.schedule),
            JSON.stringify(d.timing),
            JSON.stringify(d.target),
            JSON.stringify(d.policies),
            d.nextRunAt,
            event.at,
            event.at,
          ),
        ];
      }
      case 'loop.removed':
        return [
          sql(
            'UPDATE loops SET status = ?, live_name = NULL, reason = ?, next_run_at = NULL, updated_at = ? WHERE id = ?',
            stateName(event),
            (event.data as { reason: string | null }).reason,
            event.at,
            loopIdOf(event.streamId),
          ),
        ];
      case 'loop.paused':
      case 'loop.resumed':
      case 'loop.stopped':
      case 'loop.archived': {
        const d = event.data as { reason: string | null; nextRunAt?: string | null };
        return [
          sql(
            'UPDATE loops SET status = ?, reason = ?, next_run_at = ?, updated_at = ? WHERE id = ?',
            stateName(event),
            d.reason,
            d.nextRunAt ?? null,
            event.at,
            loopIdOf(event.streamId),
          ),
        ];
      }
      case 'run.claimed': {
        const d = event.data as EventData<'run.claimed'>;
        return [
          sql(
            'UPDATE loops SET run_count = run_count + 1, last_run_id = ?, last_run_at = ? WHERE id = ?',
            d.runId,
            event.at,
            d.loopId,
          ),
        ];
      }
      case 'loop.expired':
        return [
          sql(
            'UPDATE loops SET status = ?, next_run_at = NULL, updated_at = ? WHERE id = ?',
            stateName(event),
            event.at,
            loopIdOf(event.streamId),
          ),
        ];
      case 'loop.rescheduled':
        return [
          sql(
            'UPDATE loops SET next_run_at = ?, updated_at = ? WHERE id = ?',
            (event.data as { nextRunAt: string }).nextRunAt,
            event.at,
            loopIdOf(event.streamId),
          ),
        ];
      case 'slot.fired':
      case 'slot.buffered':
      case 'slot.skipped':
      case 'slot.missed': {
        const d = event.data as { nextRunAt: string | null };
        return [
          sql(
            `UPDATE loops SET next_run_at = ?, scheduled_runs = scheduled_runs + ?, updated_at = ? WHERE id = ?`,
            d.nextRunAt,
            event.type === 'slot.fired' || event.type === 'slot.buffered' ? 1 : 0,
            event.at,
            loopIdOf(event.streamId),
          ),
        ];
      }
      default:
        return [];
    }
  },
};

function loopIdOf(streamId: string): string {
  return streamId.slice('loop:'.length);
}

