/**
 * Read side: the projection tables as the API shapes the CLI and SDK return (camelCase).
 * Light on purpose — no zod, xstate or rxjs — so `loops list` starts fast.
 */
import type { EventData, ForkedFrom, LoopPolicies, Schedule, Target, Timing } from '../../events/catalog.js';
import { cached, type Db } from '../../events/db.js';
import { AmbiguousError, NotFoundError } from '../../events/errors.js';
import { containsPattern, prefixPattern, shownRef } from './refs.js';

/** A loop's definition and state, as its projection row holds them: what running it needs. */
export interface LoopRecord {
  id: string;
  name: string;
  description: string | null;
  status: string;
  schedule: Schedule;
  timing: Timing;
  target: Target;
  policies: LoopPolicies;
  timeoutMs: number | null;
  nextRunAt: string | null;
  reason: string | null;
  createdAt: string;
  updatedAt: string;
  /** Runs of scheduled slots (run-now excluded): what max-runs counts. */
  scheduledRuns: number;
  /** The labels a runner needs to run it (`--runs-on`); null: any runner. */
  runsOn: string[] | null;
}

/** A loop as `list` and `show` present it: its record, with its run count and last run. */
export interface LoopView extends LoopRecord {
  runCount: number;
  lastRun: { id: string; status: string | null; at: string | null } | null;
}

export interface RunView {
  id: string;
  loopId: string;
  loopName: string;
  slot: string;
  scheduledFor: string;
  attempt: number;
  trigger: string;
  status: string;
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  error: string | null;
  stdout: string;
  stderr: string;
  stdoutBytes: number;
  stderrBytes: number;
  pid: number | null;
  runnerId: string;
  claimedAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  durationMs: number | null;
  /** What an agent CLI reported (agent loops): model, session, turns, tokens, cost, final message; null otherwise. */
  agent: EventData<'run.agent_reported'> | null;
  /**
   * When `loops prune` removed the run's output folder (for a workflow loop's run: its workflow
   * run's), or null while it is kept.
   */
  outputPrunedAt: string | null;
  /** When `loops prune --archive` moved the run's events to an archive file, or null while they are in the log. */
  archivedAt: string | null;
  /** A fork or rerun (`loops fork`, `loops rerun`): its parent run and fork point; null otherwise. */
  forkedFrom: ForkedFrom | null;
}

interface LoopRow {
  id: string;
  name: string;
  description: string | null;
  status: string;
  schedule: string;
  timing: string;
  target: string;
  policies: string;
  next_run_at: string | null;
  reason: string | null;
  created_at: string;
  updated_at: string;
  scheduled_runs: number;
  runs_on: string | null;
}

interface LoopViewRow extends LoopRow {
  run_count: number;
  last_run_id: string | null;
  last_run_status: string | null;
  last_run_at: string | null;
}

interface RunRow {
  id: string;
  loop_id: string;
  loop_name: string;
  slot: string;
  scheduled_for: string;
  attempt: number;
  trigger: string;
  status: string;
  target: string;
  runner_id: string;
  pid: number | null;
  exit_code: number | null;
  signal: string | null;
  timed_out: number;
  error: string | null;
  stdout: string;
  stderr: string;
  stdout_bytes: number;
  stderr_bytes: number;
  claimed_at: string;
  started_at: string | null;
  finished_at: string | null;
  duration_ms: number | null;
  agent: string | null;
  /** Absent from tables built before the column existed (they are rebuilt when opened). */
  output_pruned_at?: string | null;
  archived_at?: string | null;
  forked_from?: string | null;
}

/**
 * A loop row with its run count and last run — not counting the runs of its --on-failure command
 * (slot `hook:…`), which would hide the failure they report — computed from `loop_runs` (the index on
 * (loop_id, claimed_position) serves both): never copied into `loops`, so runs never rewrite their
 * loop's row, and an archived run — whose run.claimed is gone from the log — counts the same.
 */
const LOOP_SELECT = `SELECT l.*, (SELECT COUNT(*) FROM loop_runs c WHERE c.loop_id = l.id) AS run_count,
    r.id AS last_run_id, r.claimed_at AS last_run_at, r.status AS last_run_status
  FROM loops l LEFT JOIN loop_runs r ON r.claimed_position = (SELECT MAX(m.claimed_position) FROM loop_runs m WHERE m.loop_id = l.id AND m.slot NOT LIKE 'hook:%')`;

/**
 * A loop row alone: the record the run path reads (run-now, the daemon's claims, notices). It does
 * not count the loop's runs, which costs in proportion to them.
 */
const LOOP_RECORD_SELECT = 'SELECT l.* FROM loops l';

function toLoopRecord(row: LoopRow): LoopRecord {
  const policies = JSON.parse(row.policies) as LoopPolicies;
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    status: row.status,
    schedule: JSON.parse(row.schedule) as Schedule,
    timing: JSON.parse(row.timing) as Timing,
    target: JSON.parse(row.target) as Target,
    policies,
    timeoutMs: policies.timeoutMs,
    nextRunAt: row.next_run_at,
    reason: row.reason,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    scheduledRuns: row.scheduled_runs,
    runsOn: row.runs_on ? (JSON.parse(row.runs_on) as string[]) : null,
  };
}

export function toLoopView(row: LoopViewRow): LoopView {
  return {
    ...toLoopRecord(row),
    runCount: row.run_count,
    lastRun: row.last_run_id ? { id: row.last_run_id, status: row.last_run_status, at: row.last_run_at } : null,
  };
}

export function toRunView(row: RunRow): RunView {
  return {
    id: row.id,
    loopId: row.loop_id,
    loopName: row.loop_name,
    slot: row.slot,
    scheduledFor: row.scheduled_for,
    attempt: row.attempt,
    trigger: row.trigger,
    status: row.status,
    exitCode: row.exit_code,
    signal: row.signal,
    timedOut: row.timed_out === 1,
    error: row.error,
    stdout: row.stdout,
    stderr: row.stderr,
    stdoutBytes: row.stdout_bytes,
    stderrBytes: row.stderr_bytes,
    pid: row.pid,
    runnerId: row.runner_id,
    claimedAt: row.claimed_at,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    durationMs: row.duration_ms,
    agent: row.agent === null || row.agent === undefined ? null : (JSON.parse(row.agent) as EventData<'run.agent_reported'>),
    outputPrunedAt: row.output_pruned_at ?? null,
    archivedAt: row.archived_at ?? null,
    forkedFrom: row.forked_from ? (JSON.parse(row.forked_from) as ForkedFrom) : null,
  };
}

export interface ListLoopsOptions {
  /** Include removed loops (default false). */
  all?: boolean;
}

export function listLoops(db: Db, options: ListLoopsOptions = {}): LoopView[] {
  const rows = cached<[], LoopViewRow>(
    db,
    `${LOOP_SELECT} ${options.all ? '' : "WHERE l.status <> 'removed'"} ORDER BY l.name COLLATE NOCASE, l.created_at`,
    )
    .all();
  return rows.map(toLoopView);
}

/**
 * Resolves a loop by exact id, exact name (among loops not removed), or unique id prefix.
 * Unknown → NotFoundError; several matches → AmbiguousError listing them.
 */
export function findLoop(db: Db, idOrName: string, options: { includeRemoved?: boolean } = {}): LoopView {
  return resolveLoop(db, idOrName, options, LOOP_SELECT, toLoopView);
}

/** {@link findLoop}'s resolution, returning the loop's record without its run statistics. */
export function findLoopRecord(db: Db, idOrName: string, options: { includeRemoved?: boolean } = {}): LoopRecord {
  return resolveLoop(db, idOrName, options, LOOP_RECORD_SELECT, toLoopRecord);
}

function resolveLoop<R extends LoopRow, T>(db: Db, idOrName: string, options: { includeRemoved?: boolean }, select: string, map: (row: R) => T): T {
  const byId = cached<[string], R>(db, `${select} WHERE l.id = ?`).get(idOrName);
  if (byId && (options.includeRemoved || byId.status !== 'removed')) return map(byId);
  const byName = cached<[string], R>(db, `${select} WHERE l.live_name = ?`).all(idOrName);
  if (byName.length === 1) return map(byName[0]!);
  const pattern = prefixPattern(idOrName);
  if (pattern !== null) {
    const byPrefix = cached<[string], R>(
        db, `${select} WHERE l.id LIKE ? ESCAPE '\\' ${options.includeRemoved ? '' : "AND l.status <> 'removed'"} LIMIT 11`,
      )
      .all(pattern);
    if (byPrefix.length === 1) return map(byPrefix[0]!);
    if (byPrefix.length > 1) {
      throw new AmbiguousError(`${shownRef(idOrName)} matches ${byPrefix.length} loops: ${byPrefix.map((r) => `${r.name} (${r.id})`).join(', ')}`, {
        hint: 'give the full id or the name',
      });
    }
  }
  const similar = cached<[string], { name: string }>(db, "SELECT name FROM loops WHERE status <> 'removed' AND name LIKE ? ESCAPE '\\' LIMIT 3")
    .all(containsPattern(idOrName.slice(0, 3)));
  throw new NotFoundError(`no loop named or with id ${shownRef(idOrName)}`, {
    hint:
      similar.length > 0
        ? `did you mean ${similar.map((s) => s.name).join(', ')}? (loops list shows all loops)`
        : 'loops list shows all loops',
  });
}

export interface ListRunsOptions {
  loopId?: string;
  limit?: number;
  status?: string;
}

export function listRuns(db: Db, options: ListRunsOptions = {}): RunView[] {
  const where: string[] = [];
  const params: Array<string | number> = [];
  if (options.loopId) {
    where.push('loop_id = ?');
    params.push(options.loopId);
  }
  if (options.status) {
    where.push('status = ?');
    params.push(options.status);
  }
  params.push(options.limit ?? 20);
  const rows = cached<Array<string | number>, RunRow>(
    db,
    `SELECT * FROM loop_runs ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY claimed_position DESC LIMIT ?`,
    )
    .all(...params);
  return rows.map(toRunView);
}

/** A run by exact id or unique id prefix. */
export function findRun(db: Db, id: string): RunView {
  const exact = cached<[string], RunRow>(db, 'SELECT * FROM loop_runs WHERE id = ?').get(id);
  if (exact) return toRunView(exact);
  const pattern = prefixPattern(id);
  if (pattern !== null) {
    const rows = cached<[string], RunRow>(db, "SELECT * FROM loop_runs WHERE id LIKE ? ESCAPE '\\' LIMIT 11").all(pattern);
    if (rows.length === 1) return toRunView(rows[0]!);
    if (rows.length > 1) {
      throw new AmbiguousError(`${shownRef(id)} matches ${rows.length} runs: ${rows.map((r) => r.id).join(', ')}`, {
        hint: 'give more characters of the run id',
      });
    }
  }
  throw new NotFoundError(`no run with id ${shownRef(id)}`, { hint: 'loops runs lists recent runs' });
}

export { countEvents } from '../../events/sqlite-reads.js';
