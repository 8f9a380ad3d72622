/**
 * `workflow_runs`: one row per workflow run (stream `wfrun:<id>`), with one row per step of its
 *   pinned spec in `workflow_steps` and one row per attempt of a step in `workflow_step_attempts`.
 *   The three tables are one projection because a step's status depends on its run (a cancel or a
 *   workflow timeout stops retries): rebuilding them together keeps them consistent.
 *
 * Step statuses come from facts, not from a second copy of the machine's rules (projections may
 * not import machines):
 * - the run's own status is the machine state recorded on each `wfrun:` event (`running`, then one
 *   of succeeded | failed | cancelled | timed_out) — never re-derived here;
 * - step rows are written `pending` at `wfrun.started`; `step.spawn_requested` → `spawning`,
 *   `step.spawned` → `running`, `step.retry_due` → `starting`;
 * - an attempt's outcome comes from its event, as the machine computes it: `step.exited` is
 *   `timed_out` (timedOut), `cancelled` (cancelled), `succeeded` (exit 0) or `failed`;
 *   `step.spawn_failed` is `failed`; `step.abandoned` is `abandoned`; the step takes that status;
 * - the run's decisions are recorded (`decisions = 'recorded'`, every run since wfrun.started v2):
 *   `step.skipped` makes the step `skipped` with its `skip_reason` the moment it is decided — while
 *   the run goes on — and `step.retry_scheduled` makes a step whose attempt ended `retrying` until
 *   `retry_at`. Both are appended in the transaction of the event that caused them, so no reader
 *   sees the step in between;
 * - a cancel or a workflow timeout ends every `retrying` step as `cancelled` (no retry follows);
 * - an agent step's report (what its CLI said: tokens, cost, session, …) is the `agent` field of its
 *   `step.exited` event: it is kept per attempt, and on the step for its last ended attempt (NULL
 *   when that attempt was not an agent's, or its CLI said nothing, or it never exited — a spawn
 *   failure or an abandoned attempt). An agent step also keeps the provider and model its spec
 *   asked for, so `loops stats` can name them when the CLI did not.
 *
 * Runs started before decisions were recorded (`decisions = 'derived'`: wfrun.started v1, upcast)
 * have neither event, and their rows are derived as they always were, for them only: a failed,
 * timed-out or abandoned attempt leaves the step `retrying` when attempts remain (`max_attempts`)
 * and the run is not stopping; a step still `pending` when the run ends was skipped (no reason:
 * `loops workflows inspect` folds such a run's log for it, runtime/workflows/explain.ts).
 *
 * The unit test test/unit/workflow-projections.unit.test.ts drives random runs of both kinds through
 * the real machine and checks these rules against the machine's own step states after every
 * transaction: a change to the machine's step logic that this projection does not follow fails it.
 */
import type { EventData } from '../events/catalog.js';
import { formatDuration } from '../events/durations.js';
import type { StoredEvent } from '../events/types.js';
import type { WorkflowSpec } from '../events/workflow-model.js';
import { defineProjection, sql, stateName, streamKey } from './types.js';
import { PROJECTION_VERSIONS } from './versions.js';

/** The final states of a workflow run (the machine's final state values). */
const RUN_FINAL_STATUSES: ReadonlySet<string> = new Set(['succeeded', 'failed', 'cancelled', 'timed_out']);

const wfRunIdOf = (event: StoredEvent) => streamKey(event, 'wfrun');

/** Milliseconds from the row's `started_at` to the bound instant (BIGINT: INTEGER to SQLite, 64-bit on PostgreSQL too). */
const sinceStart = `CAST(ROUND((julianday(?) - julianday(started_at)) * 86400000) AS BIGINT)`;

export const workflowRunsProjection = defineProjection({
  name: 'workflow_runs',
  // v2: agent reports (`agent`) on steps and attempts, the agent provider and model the spec asked
  // for on steps, and an index of runs by loop (for `loops stats`).
  // v3: output_pruned_at, when `loops prune` removed the run's output (retention:output stream).
  // v4: recorded decisions — step.skipped (skip_reason) and step.retry_scheduled (retry_at) — and
  // the run's `decisions` (the derivation of skips and retries is kept for `derived` runs only).
  // v5: archived_at, when `loops prune --archive` moved the run's events to an archive file (its
  //     rows are kept: the stream.archived tombstone carries them).
  // v6: forked_from, a fork's or rerun's parent and fork point (wfrun.started's forkedFrom, JSON),
  //     and step.reused (a fork's reused step takes its recorded result).
  // v7: the index workflow_runs_loop_started on a loop's workflow runs by start (no row changes):
  //     `loops stats --since` reads the window's runs, not the whole history.
  version: PROJECTION_VERSIONS.workflow_runs,
  ddl: [
    `CREATE TABLE IF NOT EXISTS workflow_runs (
      -- Position of the wfrun.started event: unique, in start order, and the rowid.
      claimed_position INTEGER PRIMARY KEY,
      id               TEXT NOT NULL UNIQUE,
      workflow_id      TEXT NOT NULL,
      workflow_name    TEXT NOT NULL,
      version          INTEGER NOT NULL,
      status           TEXT NOT NULL,
      trigger          TEXT NOT NULL,
      loop_id          TEXT,
      slot             TEXT,
      attempt          INTEGER NOT NULL,
      idempotency_key  TEXT NOT NULL UNIQUE,
      runner_id        TEXT NOT NULL,
      inputs           TEXT NOT NULL,
      step_count       INTEGER NOT NULL,
      -- Set by wfrun.cancel_requested / wfrun.timed_out: the run is stopping (no more retries).
      cancel_requested INTEGER NOT NULL DEFAULT 0,
      timed_out        INTEGER NOT NULL DEFAULT 0,
      -- The cancel reason, the workflow timeout, or (once failed) the steps that failed it.
      error            TEXT,
      started_at       TEXT NOT NULL,
      finished_at      TEXT,
      duration_ms      INTEGER,
      updated_at       TEXT NOT NULL,
      -- When loops prune removed the run's output folder (every step attempt's); NULL while kept.
      output_pruned_at TEXT,
      -- How its skips and retries are known: 'recorded' (step.skipped, step.retry_scheduled) or
      -- 'derived' (a run started before they were recorded: derived here, see above).
      decisions        TEXT NOT NULL,
      -- When loops prune --archive moved the run's events to an archive file; NULL while in the log.
      archived_at      TEXT,
      -- A fork or rerun (loops fork, loops rerun): {runId, from, reason, how} as JSON; NULL otherwise.
      forked_from      TEXT
    )`,
    `CREATE INDEX IF NOT EXISTS workflow_runs_workflow ON workflow_runs (workflow_id, claimed_position)`,
    // A workflow loop's runs (loops stats sums their agent steps per loop, in this order).
    `CREATE INDEX IF NOT EXISTS workflow_runs_loop ON workflow_runs (loop_id, started_at)`,
    // The workflow runs of loops by start (loops stats --since: the window's runs, whatever the history).
    `CREATE INDEX IF NOT EXISTS workflow_runs_loop_started ON workflow_runs (started_at) WHERE loop_id IS NOT NULL`,
    `CREATE TABLE IF NOT EXISTS workflow_steps (
      wfrun_id          TEXT NOT NULL,
      step_id           TEXT NOT NULL,
      -- Index of the step in the pinned spec (file order).
      ord               INTEGER NOT NULL,
      name              TEXT,
      -- From the spec: direct needs (JSON array), the if condition, continue-on-error, total attempts allowed.
      needs             TEXT NOT NULL,
      if_cond           TEXT,
      continue_on_error INTEGER NOT NULL,
      max_attempts      INTEGER NOT NULL,
      target_type       TEXT NOT NULL,
      -- Agent steps: the provider and model the spec asked for (the model may be NULL); NULL for commands.
      provider          TEXT,
      model             TEXT,
      status            TEXT NOT NULL,
      -- The current (or last) attempt number; 0 before the first.
      attempts          INTEGER NOT NULL DEFAULT 0,
      -- Outcome of the last ended attempt (kept while a retry runs; the attempts table has each one).
      exit_code         INTEGER,
      signal            TEXT,
      error             TEXT,
      outputs           TEXT NOT NULL DEFAULT '{}',
      stdout            TEXT NOT NULL DEFAULT '',
      stderr            TEXT NOT NULL DEFAULT '',
      stdout_bytes      INTEGER NOT NULL DEFAULT 0,
      stderr_bytes      INTEGER NOT NULL DEFAULT 0,
      pid               INTEGER,
      -- The first attempt's start; the last attempt's end (NULL while an attempt runs or never ran).
      started_at        TEXT,
      finished_at       TEXT,
      -- Sum over the ended attempts.
      duration_ms       INTEGER,
      -- What the agent CLI reported about the last ended attempt (JSON, as in step.exited), or NULL.
      agent             TEXT,
      -- Why it was skipped (step.skipped); NULL otherwise, and for the skipped steps of derived runs.
      skip_reason       TEXT,
      -- When its retry is due while it is retrying (step.retry_scheduled); NULL otherwise.
      retry_at          TEXT,
      PRIMARY KEY (wfrun_id, step_id)
    )`,
    `CREATE TABLE IF NOT EXISTS workflow_step_attempts (
      wfrun_id    TEXT NOT NULL,
      step_id     TEXT NOT NULL,
      attempt     INTEGER NOT NULL,
      status      TEXT NOT NULL,
      exit_code   INTEGER,
      signal      TEXT,
      error       TEXT,
      pid         INTEGER,
      started_at  TEXT NOT NULL,
      finished_at TEXT,
      duration_ms INTEGER,
      -- What the agent CLI reported about this attempt (JSON, as in step.exited), or NULL.
      agent       TEXT,
      PRIMARY KEY (wfrun_id, step_id, attempt)
    ) WITHOUT ROWID`,
  ],
  tables: [
    { name: 'workflow_runs', orderBy: 'id', perStream: { kind: 'wfrun', key: 'id' } },
    // Archived: the output tails stay in the archive file (the sizes and the step outputs stay here).
    { name: 'workflow_steps', orderBy: 'wfrun_id, step_id', perStream: { kind: 'wfrun', key: 'wfrun_id', slim: { stdout: '', stderr: '' } } },
    { name: 'workflow_step_attempts', orderBy: 'wfrun_id, step_id, attempt', perStream: { kind: 'wfrun', key: 'wfrun_id' } },
  ],
  on: {
    // After its rows are restored from the tombstone (defineProjection does that for perStream tables).
    'stream.archived': (e) => (e.streamId.startsWith('wfrun:') ? [sql('UPDATE workflow_runs SET archived_at = ? WHERE id = ?', e.at, wfRunIdOf(e))] : []),
    'wfrun.started': (e) => {
      const d = e.data;
      return [
        sql(
          `INSERT INTO workflow_runs (claimed_position, id, workflow_id, workflow_name, version, status, trigger, loop_id, slot, attempt,
             idempotency_key, runner_id, inputs, step_count, started_at, updated_at, decisions, forked_from)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          e.position,
          d.wfRunId,
          d.workflowId,
          d.workflowName,
          d.version,
          // The final status, if any, is written by endRun.
          'running',
          d.trigger,
          d.loopId,
          d.slot,
          d.attempt,
          d.idempotencyKey,
          d.runnerId,
          JSON.stringify(d.inputs),
          d.spec.steps.length,
          e.at,
          e.at,
          d.decisions,
          d.forkedFrom ? JSON.stringify(d.forkedFrom) : null,
        ),
        ...d.spec.steps.map((step, ord) =>
          sql(
            `INSERT INTO workflow_steps (${STEP_SPEC_COLUMNS}, status) VALUES (${STEP_SPEC_VALUES}, 'pending')`,
            ...stepSpecValues(d.wfRunId, step, ord),
          ),
        ),
      ];
    },
    // Another tool's finished workflow run, whole (loops import --with-history): the run, each step, and
    // one attempt per step that started. runner_id says where it came from.
    'wfrun.imported': (e) => {
      const d = e.data;
      const byId = new Map(d.steps.map((st) => [st.stepId, st]));
      return [
        sql(
          `INSERT INTO workflow_runs (claimed_position, id, workflow_id, workflow_name, version, status, trigger, loop_id, slot, attempt,
             idempotency_key, runner_id, inputs, step_count, error, started_at, finished_at, duration_ms, updated_at, decisions)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, '{}', ?, ?, ?, ?, ?, ?, 'recorded')`,
          e.position,
          d.wfRunId,
          d.workflowId,
          d.workflowName,
          d.version,
          stateName(e) ?? d.status,
          d.trigger,
          d.loopId,
          d.slot,
          // As a workflow loop's run keys its workflow run (execution/attempt.ts), so the two join.
          d.loopId !== null && d.slot !== null ? `loop:${d.loopId}:${d.slot}:1` : `imported:${d.importedFrom.id}`,
          `imported from ${d.importedFrom.tool}`,
          d.spec.steps.length,
          d.error,
          d.startedAt,
          d.finishedAt,
          Math.max(0, Date.parse(d.finishedAt) - Date.parse(d.startedAt)),
          e.at,
        ),
        ...d.spec.steps.flatMap((step, ord) => {
          const st = byId.get(step.id);
          const ran = st !== undefined && st.startedAt !== null;
          return [
            sql(
              `INSERT INTO workflow_steps (${STEP_SPEC_COLUMNS}, status, attempts, exit_code, error, stdout, stderr, stdout_bytes, stderr_bytes, pid,
                 started_at, finished_at, duration_ms, skip_reason)
               VALUES (${STEP_SPEC_VALUES}, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
              ...stepSpecValues(d.wfRunId, step, ord),
              st?.status ?? 'skipped',
              ran ? 1 : 0,
              st?.exitCode ?? null,
              st?.error ?? null,
              st?.stdout ?? '',
              st?.stderr ?? '',
              st?.stdoutBytes ?? 0,
              st?.stderrBytes ?? 0,
              st?.pid ?? null,
              st?.startedAt ?? null,
              st?.finishedAt ?? null,
              st?.durationMs ?? null,
              st === undefined ? 'not run' : st.status === 'skipped' ? st.reason : null,
            ),
            ...(ran
              ? [
                  sql(
                    `INSERT INTO workflow_step_attempts (wfrun_id, step_id, attempt, status, exit_code, error, pid, started_at, finished_at, duration_ms)
                     VALUES (?, ?, 1, ?, ?, ?, ?, ?, ?, ?)`,
                    d.wfRunId,
                    step.id,
                    st.status,
                    st.exitCode,
                    st.error,
                    st.pid,
                    st.startedAt,
                    st.finishedAt,
                    st.durationMs,
                  ),
                ]
              : []),
          ];
        }),
      ];
    },
    'step.spawn_requested': (e) => {
      const id = wfRunIdOf(e);
      const d = e.data;
      return [
        sql(
          `INSERT INTO workflow_step_attempts (wfrun_id, step_id, attempt, status, started_at) VALUES (?, ?, ?, 'spawning', ?)`,
          id,
          d.stepId,
          d.attempt,
          e.at,
        ),
        sql(
          `UPDATE workflow_steps SET status = 'spawning', attempts = ?, pid = NULL, started_at = COALESCE(started_at, ?), finished_at = NULL
           WHERE wfrun_id = ? AND step_id = ?`,
          d.attempt,
          e.at,
          id,
          d.stepId,
        ),
        touch(id, e.at),
      ];
    },
    'step.spawned': (e) => {
      const id = wfRunIdOf(e);
      const d = e.data;
      return [
        sql(
          `UPDATE workflow_step_attempts SET status = 'running', pid = ? WHERE wfrun_id = ? AND step_id = ? AND attempt = ?`,
          d.pid,
          id,
          d.stepId,
          d.attempt,
        ),
        sql(`UPDATE workflow_steps SET status = 'running', pid = ? WHERE wfrun_id = ? AND step_id = ?`, d.pid, id, d.stepId),
        touch(id, e.at),
      ];
    },
    'step.spawn_failed': (e) =>
      endAttempt(wfRunIdOf(e), e.data.stepId, e.data.attempt, e.at, 'failed', {
        exitCode: null,
        signal: null,
        error: e.data.error,
        durationMs: null,
      }),
    'step.abandoned': (e) =>
      endAttempt(wfRunIdOf(e), e.data.stepId, e.data.attempt, e.at, 'abandoned', {
        exitCode: null,
        signal: null,
        error: e.data.reason,
        durationMs: null,
      }),
    'step.exited': (e) => {
      const d = e.data;
      // As the machine decides.
      const status = d.timedOut ? 'timed_out' : d.cancelled ? 'cancelled' : d.exitCode === 0 ? 'succeeded' : 'failed';
      return endAttempt(wfRunIdOf(e), d.stepId, d.attempt, e.at, status, {
        exitCode: d.exitCode,
        signal: d.signal,
        error: d.error,
        durationMs: d.durationMs,
        exited: d,
      });
    },
    // Recorded runs: the decisions, as recorded.
    'step.skipped': (e) => [
      sql(`UPDATE workflow_steps SET status = 'skipped', skip_reason = ? WHERE wfrun_id = ? AND step_id = ?`, e.data.reason, wfRunIdOf(e), e.data.stepId),
      touch(wfRunIdOf(e), e.at),
    ],
    // A fork's step that is not run again: the result it reuses (no attempt of its own).
    'step.reused': (e) => [
      sql(
        `UPDATE workflow_steps SET status = ?, exit_code = ?, signal = ?, error = ?, outputs = ?, agent = ?, skip_reason = ? WHERE wfrun_id = ? AND step_id = ?`,
        e.data.status,
        e.data.exitCode,
        e.data.signal,
        e.data.error,
        JSON.stringify(e.data.outputs),
        e.data.agent ? JSON.stringify(e.data.agent) : null,
        e.data.reason,
        wfRunIdOf(e),
        e.data.stepId,
      ),
      touch(wfRunIdOf(e), e.at),
    ],
    'step.retry_scheduled': (e) => [
      sql(`UPDATE workflow_steps SET status = 'retrying', retry_at = ? WHERE wfrun_id = ? AND step_id = ?`, e.data.dueAt, wfRunIdOf(e), e.data.stepId),
      touch(wfRunIdOf(e), e.at),
    ],
    'step.retry_due': (e) => [
      sql(`UPDATE workflow_steps SET status = 'starting', retry_at = NULL WHERE wfrun_id = ? AND step_id = ?`, wfRunIdOf(e), e.data.stepId),
      touch(wfRunIdOf(e), e.at),
    ],
    'wfrun.cancel_requested': (e) => [
      sql(
        `UPDATE workflow_runs SET cancel_requested = 1, error = ?, updated_at = ? WHERE id = ?`,
        e.data.reason ? `cancelled: ${e.data.reason}` : 'cancelled',
        e.at,
        wfRunIdOf(e),
      ),
      stopRetries(wfRunIdOf(e), e.at),
    ],
    'wfrun.timed_out': (e) => [
      sql(
        `UPDATE workflow_runs SET timed_out = 1, error = ?, updated_at = ? WHERE id = ?`,
        `the workflow timed out after ${formatDuration(e.data.timeoutMs)}`,
        e.at,
        wfRunIdOf(e),
      ),
      stopRetries(wfRunIdOf(e), e.at),
    ],
    // On the retention:output stream (its state, `keeping`, is never a run's final one): the run's output folder was removed.
    'wfrun.output_pruned': (e) => [sql('UPDATE workflow_runs SET output_pruned_at = ? WHERE id = ?', e.at, e.data.wfRunId)],
  },
  // Whatever the event, once the run's recorded state is final the run ends.
  after: (event) => {
    const status = stateName(event);
    // An imported run's row already holds its end, as the other tool recorded it.
    if (event.type === 'wfrun.imported') return [];
    return status !== null && RUN_FINAL_STATUSES.has(status) ? endRun(wfRunIdOf(event), status, event.at) : [];
  },
});

/** A step's row as its pinned spec gives it (wfrun.started, wfrun.imported): the columns and their values. */
const STEP_SPEC_COLUMNS = 'wfrun_id, step_id, ord, name, needs, if_cond, continue_on_error, max_attempts, target_type, provider, model';
const STEP_SPEC_VALUES = '?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?';
function stepSpecValues(wfRunId: string, step: WorkflowSpec['steps'][number], ord: number) {
  return [
    wfRunId,
    step.id,
    ord,
    step.name,
    JSON.stringify(step.needs),
    step.if,
    step.continueOnError ? 1 : 0,
    step.retries.attempts,
    step.target.type,
    step.target.type === 'agent' ? step.target.provider : null,
    step.target.type === 'agent' ? step.target.model : null,
  ];
}

function touch(id: string, at: string) {
  return sql('UPDATE workflow_runs SET updated_at = ? WHERE id = ?', at, id);
}

/** A cancel or the workflow timeout: steps waiting for a retry end as cancelled. */
function stopRetries(id: string, at: string) {
  return sql(`UPDATE workflow_steps SET status = 'cancelled', finished_at = ?, retry_at = NULL WHERE wfrun_id = ? AND status = 'retrying'`, at, id);
}

/**
 * An attempt ended: its own row gets the outcome, and the step takes the attempt's status (a
 * recorded retry decision follows in the same transaction: step.retry_scheduled). For a derived
 * run only, the step is `retrying` instead when the attempt would be retried (a failed, timed-out
 * or abandoned attempt, attempts left, the run not stopping), as such runs were projected.
 */
function endAttempt(
  id: string,
  stepId: string,
  attempt: number,
  at: string,
  status: 'succeeded' | 'failed' | 'timed_out' | 'cancelled' | 'abandoned',
  outcome: {
    exitCode: number | null;
    signal: string | null;
    error: string | null;
    /** Measured by the runner; null: from the attempt's start to `at`. */
    durationMs: number | null;
    exited?: EventData<'step.exited'>;
  },
) {
  const derivedRetry = `(SELECT decisions = 'derived' AND cancel_requested + timed_out = 0 FROM workflow_runs WHERE id = ?)`;
  const retried = status === 'failed' || status === 'timed_out' || status === 'abandoned';
  const x = outcome.exited;
  // The CLI's report, as recorded (absent from events of command steps and of older runners).
  const agent = x?.agent ? JSON.stringify(x.agent) : null;
  return [
    sql(
      `UPDATE workflow_step_attempts SET status = ?, exit_code = ?, signal = ?, error = ?, finished_at = ?,
         duration_ms = ${outcome.durationMs === null ? `MAX(0, ${sinceStart})` : '?'}, agent = ?
       WHERE wfrun_id = ? AND step_id = ? AND attempt = ?`,
      status,
      outcome.exitCode,
      outcome.signal,
      outcome.error,
      at,
      outcome.durationMs ?? at,
      agent,
      id,
      stepId,
      attempt,
    ),
    sql(
      `UPDATE workflow_steps SET
         status = ${retried ? `CASE WHEN attempts < max_attempts AND ${derivedRetry} THEN 'retrying' ELSE ? END` : '?'},
         exit_code = ?, signal = ?, error = ?, finished_at = ?, agent = ?,
         duration_ms = (SELECT SUM(duration_ms) FROM workflow_step_attempts WHERE wfrun_id = ? AND step_id = ?)
         ${x ? ', outputs = ?, stdout = ?, stderr = ?, stdout_bytes = ?, stderr_bytes = ?' : ''}
       WHERE wfrun_id = ? AND step_id = ?`,
      ...(retried ? [id] : []),
      status,
      outcome.exitCode,
      outcome.signal,
      outcome.error,
      at,
      agent,
      id,
      stepId,
      ...(x ? [JSON.stringify(x.outputs), x.stdout, x.stderr, x.stdoutBytes, x.stderrBytes] : []),
      id,
      stepId,
    ),
    touch(id, at),
  ];
}

/**
 * The run ended (its recorded state is final): its status and end. A failed run names the steps
 * that failed it (not continue-on-error ones). A derived run recorded no skips: its steps that
 * never started were skipped (a recorded run has no step left pending when it ends).
 */
function endRun(id: string, status: string, at: string) {
  return [
    sql(
      `UPDATE workflow_steps SET status = 'skipped'
       WHERE wfrun_id = ? AND status = 'pending' AND (SELECT decisions FROM workflow_runs WHERE id = ?) = 'derived'`,
      id,
      id,
    ),
    sql(
      `UPDATE workflow_runs SET status = ?, finished_at = ?, duration_ms = MAX(0, ${sinceStart}), updated_at = ?,
         error = CASE WHEN ? = 'failed' THEN COALESCE(error, (
           SELECT 'failed step' || CASE WHEN COUNT(*) > 1 THEN 's' ELSE '' END || ': ' || group_concat(step_id, ', ')
           FROM (SELECT step_id FROM workflow_steps
                 WHERE wfrun_id = ? AND continue_on_error = 0 AND status IN ('failed', 'timed_out', 'cancelled', 'abandoned')
                 ORDER BY ord) AS failed)) ELSE error END
       WHERE id = ?`,
      status,
      at,
      at,
      at,
      status,
      id,
      id,
    ),
  ];
}
