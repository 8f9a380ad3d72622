/**
 * `loop_runs`: one row per run, with its status, process outcome, output tails and timings.
 * Status is the machine state recorded on each event, so the projection never re-derives it.
 */
import type { StoredEvent } from '../events/types.js';
import { defineProjection, sql, stateName, streamKey } from './types.js';
import { PROJECTION_VERSIONS } from './versions.js';

/** Milliseconds from the row's `started_at` to the bound instant (BIGINT: INTEGER to SQLite, 64-bit on PostgreSQL too). */
const durationSql = `CAST(ROUND((julianday(?) - julianday(started_at)) * 86400000) AS BIGINT)`;

const runIdOf = (event: StoredEvent) => streamKey(event, 'run');

/** The run started executing: its process was asked for, or its workflow run started. */
function started(event: StoredEvent) {
  return sql('UPDATE loop_runs SET status = ?, started_at = ?, updated_at = ? WHERE id = ?', stateName(event), event.at, event.at, runIdOf(event));
}

/** The run ended without a process exit to record (spawn failed, abandoned, its workflow run ended). */
function endWith(event: StoredEvent, error: string | null) {
  return sql(
    `UPDATE loop_runs SET status = ?, error = ?, finished_at = ?, duration_ms = ${durationSql}, updated_at = ? WHERE id = ?`,
    stateName(event),
    error,
    event.at,
    event.at,
    event.at,
    runIdOf(event),
  );
}

export const runsProjection = defineProjection({
  name: 'loop_runs',
  // v2: rows keyed by claimed_position (the rowid, so newest-first needs no extra index).
  // v3: what an agent CLI reported about the run (JSON), for agent loops.
  // v4: output_pruned_at, when `loops prune` removed the run's output (retention:output stream).
  // v5: runner_id follows process.adopted (the runner that took the run over records its end).
  // v6: archived_at, when `loops prune --archive` moved the run's events to an archive file (the
  //     row is kept: the stream.archived tombstone carries it).
  // v7: forked_from, a fork's or rerun's parent and fork point (run.claimed's forkedFrom, JSON).
  // v8: the index loop_runs_time on a run's time for a window (no row changes): `loops stats --since`
  //     reads the window's runs, not the whole history.
  version: PROJECTION_VERSIONS.loop_runs,
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
      -- When loops prune removed the output folder (of a workflow loop's run: its workflow run's); NULL while kept.
      output_pruned_at TEXT,
      -- When loops prune --archive moved the run's events to an archive file; NULL while in the log.
      archived_at     TEXT,
      -- A fork or rerun (loops fork, loops rerun): {runId, from, reason, how} as JSON; NULL otherwise.
      forked_from     TEXT,
      UNIQUE (loop_id, slot, attempt)
    )`,
    `CREATE INDEX IF NOT EXISTS loop_runs_loop ON loop_runs (loop_id, claimed_position)`,
    // The runs still going, and only them: a loop's decision (overlap) and recovery find them
    // without reading the loop's history (decisions.ts runningRuns, recovery.ts staleRuns; the
    // status list must stay the one those queries filter on, for SQLite to use this index).
    `CREATE INDEX IF NOT EXISTS loop_runs_live ON loop_runs (loop_id, claimed_position) WHERE status IN ('claimed', 'spawning', 'running')`,
    // A run's time for a window (when it started, or was claimed if it never started): the
    // expression must stay the one \`loops stats --since\` filters on (admin/stats.ts RUN_TIME).
    `CREATE INDEX IF NOT EXISTS loop_runs_time ON loop_runs (COALESCE(started_at, claimed_at))`,
  ],
  // Archived: the output tails stay in the archive file (stdout_bytes / stderr_bytes stay here).
  tables: [{ name: 'loop_runs', orderBy: 'id', perStream: { kind: 'run', key: 'id', slim: { stdout: '', stderr: '' } } }],
  on: {
    'run.claimed': (e) => [
      sql(
        `INSERT INTO loop_runs (id, loop_id, loop_name, slot, scheduled_for, attempt, trigger, status, target,
               runner_id, claimed_at, claimed_position, updated_at, forked_from)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        e.data.runId,
        e.data.loopId,
        e.data.loopName,
        e.data.slot,
        e.data.scheduledFor,
        e.data.attempt,
        e.data.trigger,
        stateName(e) ?? 'claimed',
        JSON.stringify(e.data.target),
        e.data.runnerId,
        e.at,
        e.position,
        e.at,
        e.data.forkedFrom ? JSON.stringify(e.data.forkedFrom) : null,
      ),
    ],
    // Another tool's finished run, whole (loops import --with-history). runner_id says where it came from.
    'run.imported': (e) => {
      const d = e.data;
      return [
        sql(
          `INSERT INTO loop_runs (id, loop_id, loop_name, slot, scheduled_for, attempt, trigger, status, target, runner_id,
                 pid, exit_code, timed_out, error, stdout, stderr, stdout_bytes, stderr_bytes,
                 claimed_at, started_at, finished_at, duration_ms, claimed_position, updated_at)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          d.runId,
          d.loopId,
          d.loopName,
          d.slot,
          d.scheduledFor,
          d.attempt,
          d.trigger,
          stateName(e) ?? d.status,
          JSON.stringify(d.target),
          `imported from ${d.importedFrom.tool}`,
          d.pid,
          d.exitCode,
          d.status === 'timed_out' ? 1 : 0,
          d.error,
          d.stdout,
          d.stderr,
          d.stdoutBytes,
          d.stderrBytes,
          d.startedAt ?? d.scheduledFor,
          d.startedAt,
          d.finishedAt,
          d.durationMs,
          e.position,
          e.at,
        ),
      ];
    },
    'process.spawn_requested': (e) => [started(e)],
    'run.workflow_started': (e) => [started(e)],
    'process.spawned': (e) => [
      sql('UPDATE loop_runs SET status = ?, pid = ?, updated_at = ? WHERE id = ?', stateName(e), e.data.pid, e.at, runIdOf(e)),
    ],
    'process.spawn_failed': (e) => [endWith(e, e.data.error)],
    'process.adopted': (e) => [sql('UPDATE loop_runs SET runner_id = ?, updated_at = ? WHERE id = ?', e.data.runnerId, e.at, runIdOf(e))],
    'run.cancel_requested': (e) => {
      const status = stateName(e);
      const error = e.data.reason ? `cancelled: ${e.data.reason}` : 'cancelled';
      // Before a spawn the request ends the run at once; afterwards process.exited records the end.
      const ended = status === 'cancelled';
      return [
        sql(
          `UPDATE loop_runs SET status = ?, error = ?, finished_at = ${ended ? '?' : 'finished_at'},
               duration_ms = ${ended ? `COALESCE(${durationSql}, 0)` : 'duration_ms'}, updated_at = ? WHERE id = ?`,
          ...(ended ? [status, error, e.at, e.at, e.at, runIdOf(e)] : [status, error, e.at, runIdOf(e)]),
        ),
      ];
    },
    'process.exited': (e) => {
      const d = e.data;
      return [
        sql(
          `UPDATE loop_runs SET status = ?, exit_code = ?, signal = ?, timed_out = ?, error = COALESCE(?, error),
               stdout = ?, stderr = ?, stdout_bytes = ?, stderr_bytes = ?, finished_at = ?, duration_ms = ?, updated_at = ?
             WHERE id = ?`,
          stateName(e),
          d.exitCode,
          d.signal,
          d.timedOut ? 1 : 0,
          d.error,
          d.stdout,
          d.stderr,
          d.stdoutBytes,
          d.stderrBytes,
          e.at,
          d.durationMs,
          e.at,
          runIdOf(e),
        ),
      ];
    },
    'run.agent_reported': (e) => [
      sql('UPDATE loop_runs SET agent = ?, updated_at = ? WHERE id = ?', JSON.stringify(e.data), e.at, runIdOf(e)),
    ],
    'run.workflow_ended': (e) => [endWith(e, e.data.error)],
    'run.abandoned': (e) => [endWith(e, e.data.reason)],
    // After the row is restored from the tombstone (defineProjection does that for perStream tables).
    'stream.archived': (e) => (e.streamId.startsWith('run:') ? [sql('UPDATE loop_runs SET archived_at = ? WHERE id = ?', e.at, runIdOf(e))] : []),
    // On the retention:output stream (the run's own stream is final): its output folder was removed.
    'run.output_pruned': (e) => [sql('UPDATE loop_runs SET output_pruned_at = ? WHERE id = ?', e.at, e.data.runId)],
    'wfrun.output_pruned': (e) =>
      e.data.loopRunId === null ? [] : [sql('UPDATE loop_runs SET output_pruned_at = ? WHERE id = ?', e.at, e.data.loopRunId)],
  },
});
