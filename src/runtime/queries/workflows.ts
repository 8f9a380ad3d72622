/**
 * Read side for workflows: the `workflows`, `workflow_versions`, `workflow_runs`, `workflow_steps`
 * and `workflow_step_attempts` projection tables as the API shapes the CLI and SDK return
 * (camelCase). Light on purpose — no zod, xstate or rxjs — so `loops workflows list` starts fast.
 * Over 500 lines on purpose: the row shapes, views and finders of the five tables a workflow run
 * spans, read together.
 */
import type { EventData, ForkedFrom } from '../../events/catalog.js';
import { cached, type Db } from '../../events/db.js';
import { AmbiguousError, NotFoundError } from '../../events/errors.js';
import type { WorkflowSpec } from '../../workflow/spec.js';
import { containsPattern, prefixPattern, shownRef } from './refs.js';

/** A workflow with its latest version. */
/** A workflow's definition and state, as its projection row holds them: what running it needs. */
export interface WorkflowRecord {
  id: string;
  name: string;
  description: string | null;
  /** The latest version number (1, 2, …). */
  version: number;
  /** `active` or `archived`. */
  status: string;
  /** The latest version's spec. */
  spec: WorkflowSpec;
  /** Absolute path the latest version was read from, and the SHA-256 of that file's text. */
  sourceFile: string | null;
  sha256: string | null;
  /** Why it was archived. */
  reason: string | null;
  createdAt: string;
  updatedAt: string;
}

/** A workflow as `workflows list` and `show` present it: its record, with its run count and last run. */
export interface WorkflowView extends WorkflowRecord {
  runCount: number;
  lastRun: { id: string; status: string | null; at: string | null } | null;
}

/** One stored version of a workflow's spec. */
export interface WorkflowVersionView {
  workflowId: string;
  version: number;
  spec: WorkflowSpec;
  sourceFile: string | null;
  sha256: string | null;
  createdAt: string;
}

/** One run of a workflow (of the spec version it pinned). */
export interface WorkflowRunView {
  id: string;
  workflowId: string;
  workflowName: string;
  version: number;
  /** `running`, then `succeeded`, `failed`, `cancelled` or `timed_out`. */
  status: string;
  trigger: string;
  loopId: string | null;
  slot: string | null;
  attempt: number;
  idempotencyKey: string;
  runnerId: string;
  inputs: Record<string, string>;
  stepCount: number;
  /** A cancel was requested / the workflow timeout passed (the run is stopping, or ended so). */
  cancelRequested: boolean;
  timedOut: boolean;
  /** The cancel reason, the workflow timeout, or the steps that failed the run. */
  error: string | null;
  startedAt: string;
  finishedAt: string | null;
  durationMs: number | null;
  updatedAt: string;
  /** When `loops prune` removed the run's output folder (every step attempt's), or null while it is kept. */
  outputPrunedAt: string | null;
  /** When `loops prune --archive` moved the run's events to an archive file, or null while they are in the log. */
  archivedAt: string | null;
  /** A fork or rerun (`loops fork`, `loops rerun`): its parent run and fork point; null otherwise. */
  forkedFrom: ForkedFrom | null;
}

/** One attempt of a step. */
export interface WorkflowStepAttemptView {
  attempt: number;
  /** spawning | running | succeeded | failed | timed_out | cancelled | abandoned */
  status: string;
  exitCode: number | null;
  signal: string | null;
  error: string | null;
  pid: number | null;
  startedAt: string;
  finishedAt: string | null;
  durationMs: number | null;
  /** Agent steps: what the CLI reported (tokens, cost, session, …); null when it said nothing, or the attempt has not exited. */
  agent: EventData<'run.agent_reported'> | null;
}

/** One step of a workflow run, with every attempt. */
export interface WorkflowStepView {
  wfRunId: string;
  stepId: string;
  /** Index of the step in the pinned spec (file order). */
  ord: number;
  name: string | null;
  needs: string[];
  /** The step's `if` condition (null: `success()`). */
  if: string | null;
  continueOnError: boolean;
  /** Attempts allowed by the spec's retries (1 = no retry). */
  maxAttempts: number;
  /** `command` or `agent`. */
  targetType: string;
  /** Agent steps: the provider and model the spec asked for (null for command steps; the model when unset). */
  provider: string | null;
  model: string | null;
  /**
   * pending | starting | spawning | running | retrying | succeeded | failed | timed_out | cancelled |
   * skipped | abandoned. Pending steps of a run that ended are skipped; while the run is going a
   * pending step may already be skipped in the machine's view (skips are not events).
   */
  status: string;
  /** The current (or last) attempt number; 0 before the first. */
  attempt: number;
  /** Outcome of the last ended attempt. */
  exitCode: number | null;
  signal: string | null;
  error: string | null;
  outputs: Record<string, string>;
  stdout: string;
  stderr: string;
  stdoutBytes: number;
  stderrBytes: number;
  pid: number | null;
  /** The first attempt's start; the last attempt's end (null while one runs). */
  startedAt: string | null;
  finishedAt: string | null;
  /** Sum over the ended attempts. */
  durationMs: number | null;
  /** What the agent CLI reported about the last ended attempt (each attempt has its own in `attempts`). */
  agent: EventData<'run.agent_reported'> | null;
  /** Every attempt, in order. */
  attempts: WorkflowStepAttemptView[];
}

/**
 * What agent CLIs reported, summed over `reports` reports (of step attempts). A sum is null when no
 * report had the number — not 0; the cost is summed over the `costReports` reports that had one.
 */
export interface AgentTotals {
  reports: number;
  turns: number | null;
  tokens: { input: number | null; output: number | null; cacheRead: number | null; cacheWrite: number | null };
  costUsd: number | null;
  costReports: number;
}

interface WorkflowRow {
  id: string;
  name: string;
  description: string | null;
  version: number;
  status: string;
  spec: string;
  source_file: string | null;
  sha256: string | null;
  reason: string | null;
  created_at: string;
  updated_at: string;
}

interface WorkflowViewRow extends WorkflowRow {
  run_count: number;
  last_run_id: string | null;
  last_run_status: string | null;
  last_run_at: string | null;
}

interface VersionRow {
  workflow_id: string;
  version: number;
  spec: string;
  source_file: string | null;
  sha256: string | null;
  created_at: string;
}

interface RunRow {
  id: string;
  workflow_id: string;
  workflow_name: string;
  version: number;
  status: string;
  trigger: string;
  loop_id: string | null;
  slot: string | null;
  attempt: number;
  idempotency_key: string;
  runner_id: string;
  inputs: string;
  step_count: number;
  cancel_requested: number;
  timed_out: number;
  error: string | null;
  started_at: string;
  finished_at: string | null;
  duration_ms: number | null;
  updated_at: string;
  /** Absent from tables built before the column existed (they are rebuilt when opened). */
  output_pruned_at?: string | null;
  archived_at?: string | null;
  forked_from?: string | null;
}

interface StepRow {
  wfrun_id: string;
  step_id: string;
  ord: number;
  name: string | null;
  needs: string;
  if_cond: string | null;
  continue_on_error: number;
  max_attempts: number;
  target_type: string;
  provider: string | null;
  model: string | null;
  status: string;
  attempts: number;
  exit_code: number | null;
  signal: string | null;
  error: string | null;
  outputs: string;
  stdout: string;
  stderr: string;
  stdout_bytes: number;
  stderr_bytes: number;
  pid: number | null;
  started_at: string | null;
  finished_at: string | null;
  duration_ms: number | null;
  agent: string | null;
}

interface AttemptRow {
  step_id: string;
  attempt: number;
  status: string;
  exit_code: number | null;
  signal: string | null;
  error: string | null;
  pid: number | null;
  started_at: string;
  finished_at: string | null;
  duration_ms: number | null;
  agent: string | null;
}

/** What an agent CLI reported about one step attempt (the `agent` field of its `step.exited` event). */
type AgentReport = EventData<'run.agent_reported'>;

const reportOf = (json: string | null): AgentReport | null => (json === null ? null : (JSON.parse(json) as AgentReport));

/**
 * A workflow row with its run count and last run, computed from `workflow_runs` (its index on
 * (workflow_id, claimed_position) serves both): runs never rewrite workflows, and an archived run
 * counts the same.
 */
const WORKFLOW_SELECT = `SELECT w.*, (SELECT COUNT(*) FROM workflow_runs c WHERE c.workflow_id = w.id) AS run_count,
    r.id AS last_run_id, r.started_at AS last_run_at, r.status AS last_run_status
  FROM workflows w LEFT JOIN workflow_runs r ON r.claimed_position = (SELECT MAX(m.claimed_position) FROM workflow_runs m WHERE m.workflow_id = w.id)`;

/** A workflow row alone: what a run reads (it does not count the workflow's runs, a cost that grows with them). */
const WORKFLOW_RECORD_SELECT = 'SELECT w.* FROM workflows w';

function toWorkflowRecord(row: WorkflowRow): WorkflowRecord {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    version: row.version,
    status: row.status,
    spec: JSON.parse(row.spec) as WorkflowSpec,
    sourceFile: row.source_file,
    sha256: row.sha256,
    reason: row.reason,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export function toWorkflowView(row: WorkflowViewRow): WorkflowView {
  return {
    ...toWorkflowRecord(row),
    runCount: row.run_count,
    lastRun: row.last_run_id ? { id: row.last_run_id, status: row.last_run_status, at: row.last_run_at } : null,
  };
}

export function toWorkflowRunView(row: RunRow): WorkflowRunView {
  return {
    id: row.id,
    workflowId: row.workflow_id,
    workflowName: row.workflow_name,
    version: row.version,
    status: row.status,
    trigger: row.trigger,
    loopId: row.loop_id,
    slot: row.slot,
    attempt: row.attempt,
    idempotencyKey: row.idempotency_key,
    runnerId: row.runner_id,
    inputs: JSON.parse(row.inputs) as Record<string, string>,
    stepCount: row.step_count,
    cancelRequested: row.cancel_requested === 1,
    timedOut: row.timed_out === 1,
    error: row.error,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    durationMs: row.duration_ms,
    updatedAt: row.updated_at,
    outputPrunedAt: row.output_pruned_at ?? null,
    archivedAt: row.archived_at ?? null,
    forkedFrom: row.forked_from ? (JSON.parse(row.forked_from) as ForkedFrom) : null,
  };
}

function toAttemptView(row: AttemptRow): WorkflowStepAttemptView {
  return {
    attempt: row.attempt,
    status: row.status,
    exitCode: row.exit_code,
    signal: row.signal,
    error: row.error,
    pid: row.pid,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    durationMs: row.duration_ms,
    agent: reportOf(row.agent),
  };
}

function toStepView(row: StepRow, attempts: WorkflowStepAttemptView[]): WorkflowStepView {
  return {
    wfRunId: row.wfrun_id,
    stepId: row.step_id,
    ord: row.ord,
    name: row.name,
    needs: JSON.parse(row.needs) as string[],
    if: row.if_cond,
    continueOnError: row.continue_on_error === 1,
    maxAttempts: row.max_attempts,
    targetType: row.target_type,
    provider: row.provider,
    model: row.model,
    status: row.status,
    attempt: row.attempts,
    exitCode: row.exit_code,
    signal: row.signal,
    error: row.error,
    outputs: JSON.parse(row.outputs) as Record<string, string>,
    stdout: row.stdout,
    stderr: row.stderr,
    stdoutBytes: row.stdout_bytes,
    stderrBytes: row.stderr_bytes,
    pid: row.pid,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    durationMs: row.duration_ms,
    agent: reportOf(row.agent),
    attempts,
  };
}

export interface ListWorkflowsOptions {
  /** Include archived workflows (default false). */
  all?: boolean;
}

/** Workflows by name (archived ones only with `all`). */
export function listWorkflows(db: Db, options: ListWorkflowsOptions = {}): WorkflowView[] {
  return cached<[], WorkflowViewRow>(
    db,
    `${WORKFLOW_SELECT} ${options.all ? '' : "WHERE w.status <> 'archived'"} ORDER BY w.name COLLATE NOCASE, w.created_at`,
  )
    .all()
    .map(toWorkflowView);
}

function candidates(rows: WorkflowRow[]): Array<{ id: string; name: string; status: string }> {
  return rows.map((r) => ({ id: r.id, name: r.name, status: r.status }));
}

function ambiguous(idOrName: string, rows: WorkflowRow[], hint: string): AmbiguousError {
  return new AmbiguousError(
    `${shownRef(idOrName)} matches ${rows.length} workflows: ${rows.map((r) => `${r.name} (${r.id}${r.status === 'archived' ? ', archived' : ''})`).join(', ')}`,
    { hint, details: { candidates: candidates(rows) } },
  );
}

/**
 * Resolves a workflow by exact id, exact name (among workflows not archived), or unique id prefix
 * (at least 4 characters). With `includeArchived`, archived workflows match by id and prefix too,
 * and by name when no live workflow has it. Unknown → NotFoundError; several matches →
 * AmbiguousError listing them (also in `details.candidates`).
 */
export function findWorkflow(db: Db, idOrName: string, options: { includeArchived?: boolean } = {}): WorkflowView {
  return resolveWorkflow(db, idOrName, options, WORKFLOW_SELECT, toWorkflowView);
}

/** {@link findWorkflow}'s resolution, returning the workflow's record without its run statistics. */
export function findWorkflowRecord(db: Db, idOrName: string, options: { includeArchived?: boolean } = {}): WorkflowRecord {
  return resolveWorkflow(db, idOrName, options, WORKFLOW_RECORD_SELECT, toWorkflowRecord);
}

function resolveWorkflow<R extends WorkflowRow, T>(db: Db, idOrName: string, options: { includeArchived?: boolean }, select: string, map: (row: R) => T): T {
  const archived = options.includeArchived === true;
  const byId = cached<[string], R>(db, `${select} WHERE w.id = ?`).get(idOrName);
  if (byId && (archived || byId.status !== 'archived')) return map(byId);
  const byName = cached<[string], R>(db, `${select} WHERE w.live_name = ?`).get(idOrName);
  if (byName) return map(byName);
  if (archived) {
    const old = cached<[string], R>(db, `${select} WHERE w.name = ? AND w.live_name IS NULL ORDER BY w.created_at`).all(idOrName);
    if (old.length === 1) return map(old[0]!);
    if (old.length > 1) throw ambiguous(idOrName, old, 'several archived workflows had this name: give the id');
  }
  const pattern = prefixPattern(idOrName);
  if (pattern !== null) {
    const byPrefix = cached<[string], R>(
      db,
      `${select} WHERE w.id LIKE ? ESCAPE '\\' ${archived ? '' : "AND w.status <> 'archived'"} ORDER BY w.id LIMIT 11`,
    ).all(pattern);
    if (byPrefix.length === 1) return map(byPrefix[0]!);
    if (byPrefix.length > 1) throw ambiguous(idOrName, byPrefix, 'give the full id or the name');
  }
  const similar = cached<[string], { name: string }>(
    db,
    "SELECT name FROM workflows WHERE status <> 'archived' AND name LIKE ? ESCAPE '\\' ORDER BY name LIMIT 3",
  ).all(containsPattern(idOrName.slice(0, 3)));
  const archivedHit =
    !archived && byId === undefined
      ? cached<[string], { id: string }>(db, "SELECT id FROM workflows WHERE name = ? AND status = 'archived' LIMIT 1").get(idOrName)
      : undefined;
  throw new NotFoundError(
    byId || archivedHit ? `workflow ${shownRef(idOrName)} is archived` : `no workflow named or with id ${shownRef(idOrName)}`,
    {
      hint:
        similar.length > 0
          ? `did you mean ${similar.map((s) => s.name).join(', ')}? (loops workflows list shows all workflows)`
          : byId || archivedHit
            ? 'loops workflows list --all shows archived workflows'
            : 'loops workflows list shows all workflows',
    },
  );
}

/** One stored version of a workflow's spec. */
export function workflowVersion(db: Db, workflowId: string, version: number): WorkflowVersionView {
  const row = cached<[string, number], VersionRow>(db, 'SELECT * FROM workflow_versions WHERE workflow_id = ? AND version = ?').get(
    workflowId,
    version,
  );
  if (!row) {
    // Only for the hint: the latest version there is (versions are appended through the stream's compare-and-set).
    const latest = cached<[string], { n: number | null }>(db, 'SELECT version AS n FROM workflow_versions WHERE workflow_id = ? ORDER BY version DESC LIMIT 1').get(
      workflowId,
    )?.n;
    throw new NotFoundError(`workflow ${workflowId} has no version ${version}`, {
      hint: latest ? (latest === 1 ? 'its only version is 1' : `its versions are 1 to ${latest}`) : 'loops workflows list shows all workflows',
    });
  }
  return {
    workflowId: row.workflow_id,
    version: row.version,
    spec: JSON.parse(row.spec) as WorkflowSpec,
    sourceFile: row.source_file,
    sha256: row.sha256,
    createdAt: row.created_at,
  };
}

/** Every version of a workflow, oldest first. */
export function workflowVersions(db: Db, workflowId: string): Array<Omit<WorkflowVersionView, 'spec'>> {
  return cached<[string], Omit<VersionRow, 'spec'>>(
    db,
    'SELECT workflow_id, version, source_file, sha256, created_at FROM workflow_versions WHERE workflow_id = ? ORDER BY version',
  )
    .all(workflowId)
    .map((row) => ({ workflowId: row.workflow_id, version: row.version, sourceFile: row.source_file, sha256: row.sha256, createdAt: row.created_at }));
}

export interface ListWorkflowRunsOptions {
  workflowId?: string;
  /** At most this many (default 20). */
  limit?: number;
  status?: string;
}

/** Workflow runs, newest first. */
export function listWorkflowRuns(db: Db, options: ListWorkflowRunsOptions = {}): WorkflowRunView[] {
  const where: string[] = [];
  const params: Array<string | number> = [];
  if (options.workflowId) {
    where.push('workflow_id = ?');
    params.push(options.workflowId);
  }
  if (options.status) {
    where.push('status = ?');
    params.push(options.status);
  }
  params.push(options.limit ?? 20);
  return cached<Array<string | number>, RunRow>(
    db,
    `SELECT * FROM workflow_runs ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY claimed_position DESC LIMIT ?`,
  )
    .all(...params)
    .map(toWorkflowRunView);
}

/** A workflow run by exact id or unique id prefix (at least 4 characters). */
export function findWorkflowRun(db: Db, idOrPrefix: string): WorkflowRunView {
  const exact = cached<[string], RunRow>(db, 'SELECT * FROM workflow_runs WHERE id = ?').get(idOrPrefix);
  if (exact) return toWorkflowRunView(exact);
  const pattern = prefixPattern(idOrPrefix);
  if (pattern !== null) {
    const rows = cached<[string], RunRow>(db, "SELECT * FROM workflow_runs WHERE id LIKE ? ESCAPE '\\' ORDER BY id LIMIT 11").all(pattern);
    if (rows.length === 1) return toWorkflowRunView(rows[0]!);
    if (rows.length > 1) {
      throw new AmbiguousError(`${shownRef(idOrPrefix)} matches ${rows.length} workflow runs: ${rows.map((r) => r.id).join(', ')}`, {
        hint: 'give more characters of the run id',
        details: { candidates: rows.map((r) => ({ id: r.id, workflowName: r.workflow_name, status: r.status })) },
      });
    }
  }
  throw new NotFoundError(`no workflow run with id ${shownRef(idOrPrefix)}`, { hint: 'loops workflows runs lists recent workflow runs' });
}

/** The steps of a workflow run in spec order, each with its attempts. */
export function workflowRunSteps(db: Db, wfRunId: string): WorkflowStepView[] {
  const steps = cached<[string], StepRow>(db, 'SELECT * FROM workflow_steps WHERE wfrun_id = ? ORDER BY ord').all(wfRunId);
  const attempts = cached<[string], AttemptRow>(
    db,
    'SELECT * FROM workflow_step_attempts WHERE wfrun_id = ? ORDER BY step_id, attempt',
  ).all(wfRunId);
  const byStep = new Map<string, WorkflowStepAttemptView[]>();
  for (const row of attempts) {
    let list = byStep.get(row.step_id);
    if (!list) byStep.set(row.step_id, (list = []));
    list.push(toAttemptView(row));
  }
  return steps.map((row) => toStepView(row, byStep.get(row.step_id) ?? []));
}

/** Null-safe addition: null means "nobody reported it", and stays null only while nobody did. */
const plus = (a: number | null, b: number | null): number | null => (a === null ? b : b === null ? a : a + b);

/**
 * The sum of agent reports (e.g. every attempt of a step, or of every step of a run); null when
 * there is none. The cost is rounded to nano-dollars, like `loops stats`.
 */
export function sumAgentReports(reports: Iterable<EventData<'run.agent_reported'> | null>): AgentTotals | null {
  let totals: AgentTotals | null = null;
  for (const r of reports) {
    if (r === null) continue;
    totals ??= { reports: 0, turns: null, tokens: { input: null, output: null, cacheRead: null, cacheWrite: null }, costUsd: null, costReports: 0 };
    totals.reports += 1;
    totals.turns = plus(totals.turns, r.turns);
    totals.tokens.input = plus(totals.tokens.input, r.tokens.input);
    totals.tokens.output = plus(totals.tokens.output, r.tokens.output);
    totals.tokens.cacheRead = plus(totals.tokens.cacheRead, r.tokens.cacheRead);
    totals.tokens.cacheWrite = plus(totals.tokens.cacheWrite, r.tokens.cacheWrite);
    totals.costUsd = plus(totals.costUsd, r.costUsd);
    if (r.costUsd !== null) totals.costReports += 1;
  }
  if (totals?.costUsd != null) totals.costUsd = Math.round(totals.costUsd * 1e9) / 1e9;
  return totals;
}

/** What the agent CLIs of a step reported over all its attempts (retries cost too); null when none reported. */
export function stepAgentTotals(step: WorkflowStepView): AgentTotals | null {
  return sumAgentReports(step.attempts.map((a) => a.agent));
}

/** What the agent CLIs of a run's steps reported over every attempt; null when none reported. */
export function runAgentTotals(steps: WorkflowStepView[]): AgentTotals | null {
  return sumAgentReports(steps.flatMap((s) => s.attempts.map((a) => a.agent)));
}
