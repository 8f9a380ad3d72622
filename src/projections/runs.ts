/**
 * `loop_runs`: one row per run, with its status, process outcome, output tails and timings.
 * Status is the machine state recorded on each event, so the projection never re-derives it.
 */
import type { EventData } from '../events/catalog.js';
import type { StoredEvent } from '../events/types.js';
import { sql, stateName, type Projection } from './types.js';

const durationSql = `CAST(ROUND((julianday(?) - julianday(started_at)) * 86400000) AS INTEGER)`;

/** The run ended without a process exit to record (spawn failed, abandoned, its workflow run ended). */
function endWith(status: string | null, error: string | null, at: string, id: string) {
  return sql(
    `UPDATE loop_runs SET status = ?, error = ?, finished_at = ?, duration_ms = ${durationSql}, updated_at = ? WHERE id = ?`,
    status,
    error,
    at,
    at,
    at,
    id,
  );
}

export const runsProjection: Projection = {
  name: 'loop_runs',
  // v2: rows keyed by claimed_position (the rowid, so newest-first needs no extra index).
  // v3: what an agent CLI reported about the run (JSON), for agent loops.
  version: 3,
  ddl: [
    `CREATE TABLE IF NOT EXISTS loop_runs (
      -- Position of the run.claimed event: unique, in claim order, and the rowid.
      claimed_position INTEGER PRIMARY KEY,
      id              TEXT NOT NULL UNIQUE,
      loop_id         TEXT NOT NULL,
      loop_name       TEXT NOT NULL,
      slot            TEXT NOT NULL,
      scheduled_for   TEXT NOT NULL,
      attempt         INTEGER NOT NULL,
      trigger         TEXT NOT NULL,
      status          TEXT NOT NULL,
      target          TEXT NOT NULL,
      runner_id       TEXT NOT NULL,
      pid             INTEGER,
      exit_code       INTEGER,
      signal          TEXT,
      timed_out       INTEGER NOT NULL DEFAULT 0,
      error           TEXT,
      stdout          TEXT NOT NULL DEFAULT '',
      stderr          TEXT NOT NULL DEFAULT '',
      stdout_bytes    INTEGER NOT NULL DEFAULT 0,
      stderr_bytes    INTEGER NOT NULL DEFAULT 0,
      claimed_at      TEXT NOT NULL,
      started_at      TEXT,
      finished_at     TEXT,
      duration_ms     INTEGER,
      agent           TEXT,
      updated_at      TEXT NOT NULL,
      UNIQUE (loop_id, slot, attempt)
    )`,
    `CREATE INDEX IF NOT EXISTS loop_runs_loop ON loop_runs (loop_id, claimed_position)`,
  ],
  tables: [{ name: 'loop_runs', orderBy: 'id' }],
  handles: new Set([
    'run.claimed',
    'process.spawn_requested',
    'process.spawned',
    'process.spawn_failed',
    'run.cancel_requested',
    'process.exited',
    'run.abandoned',
    'run.workflow_started',
    'run.workflow_ended',
    'run.agent_reported',
  ]),
  evolve(event: StoredEvent) {
    const id = event.streamId.slice('run:'.length);
    const status = stateName(event);
    switch (event.type) {
      case 'run.claimed': {
        const d = event.data as EventData<'run.claimed'>;
        return [
          sql(
            `INSERT INTO loop_runs (id, loop_id, loop_name, slot, scheduled_for, attempt, trigger, status, target,
               runner_id, claimed_at, claimed_position, updated_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
            d.runId,
            d.loopId,
            d.loopName,
            d.slot,
            d.scheduledFor,
            d.attempt,
            d.trigger,
            status ?? 'claimed',
            JSON.stringify(d.target),
            d.runnerId,
            event.at,
            event.position,
            event.at,
          ),
        ];
      }
      case 'process.spawn_requested':
      case 'run.workflow_started':
        return [sql('UPDATE loop_runs SET status = ?, started_at = ?, updated_at = ? WHERE id = ?', status, event.at, event.at, id)];
      case 'process.spawned': {
        const d = event.data as EventData<'process.spawned'>;
        return [sql('UPDATE loop_runs SET status = ?, pid = ?, updated_at = ? WHERE id = ?', status, d.pid, event.at, id)];
      }
      case 'process.spawn_failed': {
        const d = event.data as EventData<'process.spawn_failed'>;
        return [endWith(status, d.error, event.at, id)];
      }
      case 'run.cancel_requested': {
        const d = event.data as EventData<'run.cancel_requested'>;
        const error = d.reason ? `cancelled: ${d.reason}` : 'cancelled';
        // Before a spawn the request ends the run at once; afterwards process.exited records the end.
        const ended = status === 'cancelled';
        return [
          sql(
            `UPDATE loop_runs SET status = ?, error = ?, finished_at = ${ended ? '?' : 'finished_at'},
               duration_ms = ${ended ? `COALESCE(${durationSql}, 0)` : 'duration_ms'}, updated_at = ? WHERE id = ?`,
            ...(ended ? [status, error, event.at, event.at, event.at, id] : [status, error, event.at, id]),
          ),
        ];
      }
      case 'process.exited': {
        const d = event.data as EventData<'process.exited'>;
        return [
          sql(
            `UPDATE loop_runs SET status = ?, exit_code = ?, signal = ?, timed_out = ?, error = COALESCE(?, error),
               stdout = ?, stderr = ?, stdout_bytes = ?, stderr_bytes = ?, finished_at = ?, duration_ms = ?, updated_at = ?
             WHERE id = ?`,
            status,
            d.exitCode,
            d.signal,
            d.timedOut ? 1 : 0,
            d.error,
            d.stdout,
            d.stderr,
            d.stdoutBytes,
            d.stderrBytes,
            event.at,
            d.durationMs,
            event.at,
            id,
          ),
        ];
      }
      case 'run.agent_reported':
        return [sql('UPDATE loop_runs SET agent = ?, updated_at = ? WHERE id = ?', JSON.stringify(event.data), event.at, id)];
      case 'run.workflow_ended': {
        const d = event.data as EventData<'run.workflow_ended'>;
        return [endWith(status, d.error, event.at, id)];
      }
      case 'run.abandoned': {
        const d = event.data as EventData<'run.abandoned'>;
        return [endWith(status, d.reason, event.at, id)];
      }
      default:
        return [];
    }
  },
};
