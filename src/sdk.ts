/**
 * `<package>/sdk`: the `LoopsClient` class of `@hasna/loops` (its method names and result shapes:
 * create, list, get, pause, resume, stop, delete, runs, tick, runNow, close), and everything else
 * the `loops` command line does — runs, output, cancel, workflows, events of a stream or of the
 * whole log, live events (`events$`), stats, why, doctor, verify, backup, restore, prune, replay,
 * diff, fork, rerun, export, verifyBundle, the import of `@hasna/loops`, the daemon's status, start,
 * stop and log, and the machines — over the runtime
 * the CLI itself uses: every method calls the function a CLI command calls, nothing is implemented
 * twice. Differences from the predecessor (docs/migrating.md): every method returns a Promise;
 * errors are typed (`LoopsError` and its subclasses, each with a stable `code`; docs/sdk.md says
 * which method throws which); a `dynamic` schedule is stored as what it means (`every`,
 * fixed-delay), and reads back as such.
 *
 * Over 500 lines: the predecessor's types must stay in this file (the parity test reads them
 * here), the client is one class, and the layer check lets this top-level module import only the
 * layers, not a sibling, so its conversions (at the end) stay here too.
 */
import type { Observable } from 'rxjs';
import {
  AlreadyExistsError,
  AmbiguousError,
  BusyError,
  ConcurrencyConflictError,
  DeterminismError,
  FormatVersionError,
  InvalidTransitionError,
  LoopsError,
  NotFoundError,
  UsageError,
  ValidationError,
  type LoopsErrorCode,
} from './events/errors.js';
import type { LoopPolicies, Schedule } from './events/catalog.js';
import type { SpaceReport, StoredEvent } from './events/types.js';
import type { BackupReport, RestoreReport } from './runtime/admin/backup.js';
import type { BundleReport } from './runtime/admin/bundle-verify.js';
import type { ArchiveReport } from './runtime/admin/archive.js';
import type { ImportOptions, ImportReport, ImportRow } from './runtime/admin/import-hasna.js';
import type { MachineExport, MachineInfo } from './runtime/admin/machines.js';
import type { PruneCandidate, PruneReport } from './runtime/admin/prune.js';
import type { PruneOutcome, PruneRequest } from './runtime/admin/prune-request.js';
import type { DaemonLogTail, DaemonStarted, DaemonStatus, DaemonStopped, StartDaemonOptions } from './runtime/daemon/control.js';
import type { RebuildResult, VerifyResult } from './runtime/admin/projections.js';
import type { AccountView } from './runtime/agents/accounts.js';
import type { ScrubReport } from './runtime/loops/scrub.js';
import type { ExportResult, ExportSummary } from './runtime/admin/export-bundle.js';
import type { RunDiff } from './runtime/admin/run-diff.js';
import type { ForkPlan, ForkResult } from './runtime/loops/fork-run.js';
import type { ForkRequest, SetOutput } from './runtime/workflows/fork.js';
import type { DoctorReport } from './runtime/admin/doctor.js';
import type { ReplayResult } from './runtime/admin/replay.js';
import type { StatsReport } from './runtime/admin/stats.js';
import type { VerifyReport } from './runtime/admin/verify-log.js';
import type { DecisionView, SlotExplanation } from './runtime/admin/why.js';
import { systemClock, type Clock } from './runtime/clock.js';
import { tick as runTick, type PassDecision } from './runtime/daemon/pass.js';
import { requestCancel, requestWorkflowCancel, type CancelResult } from './runtime/execution/cancel.js';
import { runNow as runLoopNow } from './runtime/execution/run-now.js';
import { changeLoopState, createAgentLoop, createCommandLoop, createWorkflowLoop, type CreateCommandLoopInput, type LoopStateCommand } from './runtime/loops/commands.js';
import { liveEvents, readEvents, resolveStream, type EventFilter } from './runtime/queries/log-events.js';
import { findLoop, findRun, listLoops, listRuns as queryRuns, type LoopView, type RunView } from './runtime/queries/loops.js';
import { nextFires, type NextFire } from './runtime/queries/next-fires.js';
import { readRunOutput, type RunOutput, type StreamOutput } from './runtime/queries/output-json.js';
import { findWorkflow, findWorkflowRun, listWorkflowRuns, listWorkflows, type WorkflowRunView, type WorkflowView } from './runtime/queries/workflows.js';
import { resolveDataDir } from './runtime/paths.js';
import { openRuntime, type Runtime } from './runtime/runtime.js';
import { resumeWorkflowRun, runWorkflow } from './runtime/workflows/runner.js';
import { inspectWorkflowRun, type WorkflowRunInspection } from './runtime/workflows/inspect.js';
import { archiveWorkflow, createWorkflow, updateWorkflow } from './runtime/workflows/specs.js';

export {
  AlreadyExistsError,
  AmbiguousError,
  BusyError,
  ConcurrencyConflictError,
  DeterminismError,
  FormatVersionError,
  InvalidTransitionError,
  LoopsError,
  NotFoundError,
  UsageError,
  ValidationError,
};
export type {
  AccountView,
  ArchiveReport,
  DaemonLogTail,
  DaemonStarted,
  DaemonStatus,
  DaemonStopped,
  ImportOptions,
  ImportReport,
  ImportRow,
  MachineExport,
  MachineInfo,
  PruneCandidate,
  PruneOutcome,
  PruneReport,
  PruneRequest,
  SpaceReport,
  StartDaemonOptions,
  RebuildResult,
  ScrubReport,
  VerifyResult,
  BackupReport,
  BundleReport,
  ExportResult,
  ExportSummary,
  ForkPlan,
  ForkResult,
  RunDiff,
  SetOutput,
  CancelResult,
  DecisionView,
  DoctorReport,
  EventFilter,
  LoopsErrorCode,
  LoopView,
  NextFire,
  ReplayResult,
  RestoreReport,
  RunOutput,
  RunView,
  SlotExplanation,
  StatsReport,
  StoredEvent,
  StreamOutput,
  VerifyReport,
  WorkflowRunInspection,
  WorkflowRunView,
  WorkflowView,
};

// ---- the predecessor's shapes (its src/types.ts), as loops fills them ---------------------------

/** A loop's status (the loop machine's states). */
export type LoopStatus = 'active' | 'paused' | 'stopped' | 'expired' | 'archived' | 'removed';
/** What a loop does with slots missed while nothing ran: none, the latest only, or all (up to `catchUpLimit`). */
export type CatchUpPolicy = 'none' | 'latest' | 'all';
/** The predecessor's two, and loops' others (`buffer-one`, `buffer-all`, `cancel-other`). */
export type OverlapPolicy = 'skip' | 'allow' | 'buffer-one' | 'buffer-all' | 'cancel-other';
/** An interval counted from the slots (`fixed_rate`) or from each run's end (`fixed_delay`). */
export type IntervalAnchor = 'fixed_rate' | 'fixed_delay';

/** A credentials profile (`loops accounts`) a run uses, and the tool it is for. */
export interface AccountRef {
  profile: string;
  tool?: string;
}

/** When a loop fires. */
export type ScheduleSpec =
  | { type: 'once'; at: string }
  | { type: 'interval'; everyMs: number; anchor?: IntervalAnchor }
  | { type: 'cron'; expression: string; /** loops: the IANA zone (default the system's). */ tz?: string }
  /** One run `minIntervalMs` (default 60 000) after the previous one finished; read back as `interval`, `fixed_delay`. */
  | { type: 'dynamic'; minIntervalMs?: number }
  /** loops: runs only through runNow. */
  | { type: 'manual' };

/** A loop that runs a command. */
export interface CommandTarget {
  type: 'command';
  command: string;
  args?: string[];
  /** Default: the directory the process calling create runs in (recorded as an absolute path). */
  cwd?: string;
  /** Default true: `command` is shell text. */
  shell?: boolean;
  env?: Record<string, string>;
  timeoutMs?: number;
  account?: AccountRef;
}

/** A loop that runs an AI coding-agent CLI (`provider`: claude, codex, …) with a prompt. */
export interface AgentTarget {
  type: 'agent';
  provider: string;
  prompt: string;
  cwd?: string;
  model?: string;
  agent?: string;
  extraArgs?: string[];
  timeoutMs?: number;
  configIsolation?: string;
  account?: AccountRef;
}

/** A loop that runs a stored workflow. */
export interface WorkflowTarget {
  type: 'workflow';
  /** A workflow id or name. */
  workflowId: string;
  timeoutMs?: number;
}

/** What a loop runs. */
export type LoopTarget = CommandTarget | AgentTarget | WorkflowTarget;

/** `create`'s input: the predecessor's fields (durations in milliseconds). */
export interface CreateLoopInput {
  name: string;
  description?: string;
  schedule: ScheduleSpec;
  target: LoopTarget;
  catchUp?: CatchUpPolicy;
  catchUpLimit?: number;
  overlap?: OverlapPolicy;
  maxAttempts?: number;
  retryDelayMs?: number;
  leaseMs?: number;
  expiresAt?: string;
  /**
   * loops: check before recording that a run can start (default true) — the command or the agent's
   * CLI is found, its account resolves — as `create` does; false is `--no-preflight`.
   */
  preflight?: boolean;
  /** loops: only runners with every one of these labels run it (`--runs-on`; a host's id is one of its labels). */
  runsOn?: string[];
}

/** A loop, in the predecessor's shape (`getLoop` gives loops' own, fuller view). */
export interface Loop {
  id: string;
  name: string;
  description?: string;
  status: LoopStatus;
  schedule: ScheduleSpec;
  target: LoopTarget;
  nextRunAt?: string;
  catchUp: CatchUpPolicy;
  catchUpLimit: number;
  overlap: OverlapPolicy;
  maxAttempts: number;
  retryDelayMs: number;
  leaseMs: number;
  expiresAt?: string;
  createdAt: string;
  updatedAt: string;
}

/** A run's status; `skipped` only in `tick`'s `skipped` list. */
export type RunStatus = 'claimed' | 'running' | 'succeeded' | 'failed' | 'timed_out' | 'cancelled' | 'abandoned' | 'skipped' | (string & {});

/** A run, in the predecessor's shape (`getRun` / `listRuns` give loops' own, fuller view). */
export interface LoopRun {
  id: string;
  loopId: string;
  loopName: string;
  scheduledFor: string;
  attempt: number;
  status: RunStatus;
  startedAt?: string;
  finishedAt?: string;
  claimedBy?: string;
  pid?: number;
  exitCode?: number;
  durationMs?: number;
  stdout?: string;
  stderr?: string;
  error?: string;
  createdAt: string;
  updatedAt: string;
}

/** What one scheduling pass (`tick`) did. */
export interface TickResult {
  /** Runs this pass started that had not ended when it returned (loops waits for every run: empty). */
  claimed: LoopRun[];
  /** Runs this pass started and saw end. */
  completed: LoopRun[];
  /** Slots this pass recorded as skipped (overlap), as runs of status `skipped` with no process. */
  skipped: LoopRun[];
  /** loops recovers stranded runs when a runner starts (the daemon): empty here. */
  recovered: LoopRun[];
  /** Loops that ended in this pass (their last slot passed, max-runs, expires-at). */
  expired: Loop[];
}

/** Options of `new LoopsClient(…)`. */
export interface LoopsClientOptions {
  /** The data directory (default `$LOOPS_DATA_DIR`, else the platform's: see docs/cli.md). */
  dataDir?: string;
  /** Identity of this runner in the log (default `<host>:<pid>:<random>`). */
  runnerId?: string;
  /** The clock (tests): default the system clock. */
  clock?: Clock;
  /** This runner's host labels, which loops created with `runsOn` ask for (default `$LOOPS_HOST_LABELS`). */
  labels?: string[];
}


// ---- loops' own options and results ---------------------------------------------------------

/** A filter of events (`events`, `logEvents`, `events$`); every given field must hold. */
export interface EventQuery {
  /** Only the events of this stream: a run id, a workflow run id, a loop name or id, or a raw stream id (`loop:…`). */
  stream?: string;
  /** Only events of these types; `run.*` names every type starting with `run.`. */
  types?: readonly string[];
  /** Only events of this loop (name or id): its stream, its runs' and the workflow runs they started. */
  loop?: string;
  /** Only events recorded at or after this ISO-8601 time. */
  since?: string;
}

/** Options of `logEvents`. */
export interface LogEventsOptions extends EventQuery {
  /** Only events past this log position (default 0). */
  afterPosition?: number;
  /** At most this many (default: all). */
  limit?: number;
}

/** Options of `events$`. */
export interface LiveEventsQuery extends EventQuery {
  /** Start after this log position instead of now (0: the whole log, then what comes). */
  afterPosition?: number;
  /** How often the log is looked at, in ms (default 200). */
  pollMs?: number;
}

/** Options of `listRuns` (`loops runs`). */
export interface ListRunsQuery {
  /** Only runs of this loop (name or id; removed loops too). */
  loop?: string;
  /** Only runs in this status (claimed, running, succeeded, failed, timed_out, cancelled, abandoned…). */
  status?: string;
  /** At most this many, newest first (default 20, as `loops runs`). */
  limit?: number;
}

/** Options of `output` (`loops logs --json`). */
export interface OutputQuery {
  /** Only the last `tail` lines of each stream (default: all). */
  tail?: number;
  /** Which streams (default both). */
  streams?: ReadonlyArray<'stdout' | 'stderr'>;
  /** The beginning kept when the output was rotated, instead. */
  head?: boolean;
  /** Workflow runs: only this step. */
  step?: string;
  /** With `step`: this attempt (default its last). */
  attempt?: number;
}

/** Options of `why`. */
export interface WhyQuery {
  /** Explain the slot at (or just before) this time (ISO-8601; without an offset, in the loop's zone). */
  at?: string;
  /** Without `at`: how many recent decisions (default 10). */
  limit?: number;
}

/** Options of `replay`. */
export interface ReplayOptions {
  /** An archived run (`loops prune --archive`): replay its archived events from the archive file too. */
  archive?: boolean;
  /** Where the archive file is now, if it was moved (implies `archive`). */
  archiveFile?: string;
}

/** Options of `fork`. */
export interface ForkOptions {
  /** The step to run again from (its id), or a version of the parent's stream (digits). */
  from: string;
  /** Outputs of reused steps to override: `{ stepId, key, value }` or `'<step>.<key>=<value>'`. */
  setOutputs?: ReadonlyArray<SetOutput | string>;
  /** Why (recorded on both runs). */
  reason?: string;
  /** The plan only: which steps would be reused and which run again; nothing is recorded. */
  dryRun?: boolean;
  /** Cancels the new run. */
  signal?: AbortSignal;
}

/** Options of `rerun`. */
export interface RerunOptions {
  /** Only the steps that did not succeed run again (the others' results are reused). */
  failed?: boolean;
  reason?: string;
  dryRun?: boolean;
  signal?: AbortSignal;
}

/** A fork or rerun: its plan, and the new run once ended (null for a dry run). */
export interface ForkOutcome {
  plan: ForkPlan;
  result: ForkResult | null;
}

/** Options of `export`. */
export interface ExportOptions {
  /** A loop's runs claimed at or after this time: ISO-8601, or how long ago (`7d`). */
  since?: string;
  /** Where to write (default `<id>.loops-bundle.jsonl` in the working directory, or `.html`); `-`: give the lines. */
  output?: string;
  /** One self-contained HTML page instead of the bundle. */
  html?: boolean;
}

// ---- the client -----------------------------------------------------------------------------

/**
 * The loops SDK: one data directory's loops, runs and workflows. The database is opened on first
 * use (created if absent) and held until `close()`; several clients (and the CLI, and the daemon)
 * may use the same directory at once. Every method rejects with a `LoopsError` subclass: see each
 * method and docs/sdk.md.
 */
export class LoopsClient {
  private opened: Promise<Runtime> | null = null;
  private closed = false;
  private closing = new AbortController();

  /** A client of `options.dataDir` (default `$LOOPS_DATA_DIR`, else the platform's). Opens nothing yet. */
  constructor(private readonly options: LoopsClientOptions = {}) {}

  /** The runtime, opened on first use (the database is created if absent). */
  private runtime(): Promise<Runtime> {
    if (this.closed) return Promise.reject(new UsageError('this LoopsClient is closed', { hint: 'create a new LoopsClient' }));
    this.opened ??= openRuntime({
      source: 'sdk',
      ...(this.options.dataDir !== undefined ? { dataDir: this.options.dataDir } : {}),
      ...(this.options.clock !== undefined ? { clock: this.options.clock } : {}),
      ...(this.options.runnerId !== undefined ? { runnerId: this.options.runnerId } : {}),
      ...(this.options.labels !== undefined ? { labels: this.options.labels } : {}),
    });
    return this.opened;
  }

  // ---- loops ----

  /**
   * Creates a loop (`loops create command|agent|workflow`). Throws ValidationError (a bad field),
   * AlreadyExistsError (the name is taken), NotFoundError (a workflow target that does not exist),
   * UsageError (preflight: the command or agent CLI is not found).
   */
  async create(input: CreateLoopInput): Promise<Loop> {
    const runtime = await this.runtime();
    const common = createOptions(input);
    const t = input.target;
    let view: LoopView;
    if (t === null || typeof t !== 'object') throw new ValidationError('target: expected an object with type command, agent or workflow');
    switch (t.type) {
      case 'command':
        view = await createCommandLoop(runtime, {
          ...accountInput(t.account),
          ...common,
          command: t.command,
          args: t.args ?? [],
          shell: t.shell ?? true,
          cwd: t.cwd ?? process.cwd(),
          env: t.env ?? {},
          timeout: t.timeoutMs ?? null,
        });
        break;
      case 'agent':
        view = await createAgentLoop(runtime, {
          ...accountInput(t.account),
          ...common,
          provider: t.provider,
          prompt: t.prompt,
          model: t.model ?? null,
          agent: t.agent ?? null,
          extraArgs: t.extraArgs ?? [],
          configIsolation: t.configIsolation ?? null,
          cwd: t.cwd ?? process.cwd(),
          timeout: t.timeoutMs ?? null,
        });
        break;
      case 'workflow':
        view = await createWorkflowLoop(runtime, { ...common, workflow: t.workflowId, timeout: t.timeoutMs ?? null });
        break;
      default:
        throw new ValidationError(`target.type: ${JSON.stringify((t as { type?: unknown }).type)} is not command, agent or workflow`);
    }
    return toLoop(view);
  }

  /** Loops not removed, by name (`loops list`); `status` keeps those in that status (`removed` lists the removed). */
  async list(options: { status?: LoopStatus } = {}): Promise<Loop[]> {
    const runtime = await this.runtime();
    return listLoops(runtime.db, { all: options.status === 'removed' })
      .filter((l) => options.status === undefined || l.status === options.status)
      .map(toLoop);
  }

  /** One loop by id, name or unique id prefix, in the predecessor's shape. NotFoundError / AmbiguousError otherwise. */
  async get(idOrName: string): Promise<Loop> {
    return toLoop(findLoop((await this.runtime()).db, idOrName));
  }

  /** One loop in loops' own shape, as `loops show --json --reveal` prints it (removed loops too). NotFoundError / AmbiguousError. */
  async getLoop(idOrName: string): Promise<LoopView> {
    return findLoop((await this.runtime()).db, idOrName, { includeRemoved: true });
  }

  /** Loops in loops' own shape (`loops list --json`); `all`: removed ones too. */
  async listLoops(options: { all?: boolean } = {}): Promise<LoopView[]> {
    return listLoops((await this.runtime()).db, { all: options.all === true });
  }

  /** Pauses a loop (`loops pause`). NotFoundError; InvalidTransitionError when it cannot be paused (removed, archived…). */
  async pause(idOrName: string, options: { reason?: string } = {}): Promise<Loop> {
    return this.changeState(idOrName, 'pause', options.reason);
  }

  /** Resumes a paused or stopped loop (`loops resume`); it is scheduled again from now. NotFoundError, InvalidTransitionError. */
  async resume(idOrName: string, options: { reason?: string } = {}): Promise<Loop> {
    return this.changeState(idOrName, 'resume', options.reason);
  }

  /** Stops a loop until resumed (`loops stop`). NotFoundError, InvalidTransitionError. */
  async stop(idOrName: string, options: { reason?: string } = {}): Promise<Loop> {
    return this.changeState(idOrName, 'stop', options.reason);
  }

  /** Archives a loop: its history is kept and it never runs again (`loops archive`). NotFoundError, InvalidTransitionError. */
  async archive(idOrName: string, options: { reason?: string } = {}): Promise<Loop> {
    return this.changeState(idOrName, 'archive', options.reason);
  }

  /** Removes the loop (`loops remove`; its runs and events stay in the log; its name can be reused): true once removed. NotFoundError. */
  async delete(idOrName: string, options: { reason?: string } = {}): Promise<boolean> {
    const view = await changeLoopState(await this.runtime(), idOrName, 'remove', { reason: options.reason ?? null });
    return view.status === 'removed';
  }

  private async changeState(idOrName: string, command: LoopStateCommand, reason: string | undefined): Promise<Loop> {
    return toLoop(await changeLoopState(await this.runtime(), idOrName, command, { reason: reason ?? null }));
  }

  /** The next `count` (default 5, at most 1000) fire times of a loop (`loops next`); empty unless it is active. NotFoundError, UsageError. */
  async next(idOrName: string, options: { count?: number } = {}): Promise<NextFire[]> {
    const count = options.count ?? 5;
    if (!Number.isInteger(count) || count < 1 || count > 1000) throw new UsageError(`next: count must be a whole number from 1 to 1000, got ${JSON.stringify(count)}`);
    const runtime = await this.runtime();
    return nextFires(findLoop(runtime.db, idOrName), runtime.clock.now(), count);
  }

  // ---- runs ----

  /** Runs in the predecessor's shape, newest first (at most `limit`, default 100), of one loop (id or name) or of all. NotFoundError. */
  async runs(loopIdOrName?: string, options: { limit?: number; status?: string } = {}): Promise<LoopRun[]> {
    const runtime = await this.runtime();
    const loopId = loopIdOrName === undefined ? undefined : findLoop(runtime.db, loopIdOrName, { includeRemoved: true }).id;
    return queryRuns(runtime.db, {
      ...(loopId !== undefined ? { loopId } : {}),
      ...(options.status !== undefined ? { status: options.status } : {}),
      limit: options.limit ?? 100,
    }).map(toLoopRun);
  }

  /** Runs in loops' own shape, newest first, as `loops runs --json` lists them. NotFoundError (the loop), UsageError (the limit). */
  async listRuns(query: ListRunsQuery = {}): Promise<RunView[]> {
    const limit = query.limit ?? 20;
    if (!Number.isInteger(limit) || limit < 1) throw new UsageError(`listRuns: limit must be a positive whole number, got ${JSON.stringify(limit)}`);
    const runtime = await this.runtime();
    const loopId = query.loop === undefined ? undefined : findLoop(runtime.db, query.loop, { includeRemoved: true }).id;
    return queryRuns(runtime.db, { limit, ...(loopId !== undefined ? { loopId } : {}), ...(query.status !== undefined ? { status: query.status } : {}) });
  }

  /** One run by id or unique prefix, in loops' own shape (`loops show <run> --json`). NotFoundError / AmbiguousError. */
  async getRun(runId: string): Promise<RunView> {
    return findRun((await this.runtime()).db, runId);
  }

  /**
   * A run's output (`loops logs <ref> --json`): of a run (id or prefix), a loop's latest run (name
   * or id) or a workflow run (each step attempt); secrets masked. NotFoundError, UsageError.
   */
  async output(ref: string, query: OutputQuery = {}): Promise<RunOutput> {
    const runtime = await this.runtime();
    return readRunOutput(runtime.db, runtime.dataDir, ref, {
      tail: query.tail ?? null,
      head: query.head ?? false,
      step: query.step ?? null,
      attempt: query.attempt ?? null,
      ...(query.streams !== undefined ? { streams: query.streams } : {}),
    });
  }

  /**
   * Asks for a running run to be cancelled (`loops cancel`): its runner (the daemon, a tick, a
   * runNow anywhere) stops its process group and records it cancelled. A run that already ended is
   * left as it is (`outcome: 'ended'`). NotFoundError.
   */
  async cancel(runId: string, options: { reason?: string } = {}): Promise<CancelResult> {
    const runtime = await this.runtime();
    return requestCancel(runtime, findRun(runtime.db, runId).id, options.reason ?? null);
  }

  /** One scheduling pass in this process (`loops tick`): decides what is due, runs it, waits for it. */
  async tick(): Promise<TickResult> {
    const runtime = await this.runtime();
    const result = await runTick(runtime);
    const expired = new Set(result.decisions.filter((d) => d.type === 'loop.expired').map((d) => d.loopId));
    const skipped = result.decisions.filter((d) => d.type === 'slot.skipped');
    return {
      claimed: result.runs.filter((r) => r.finishedAt === null).map(toLoopRun),
      completed: result.runs.filter((r) => r.finishedAt !== null).map(toLoopRun),
      skipped: skipped.map((d) => skippedRun(d, runtime.clock.now())),
      recovered: [],
      expired: [...expired].map((id) => toLoop(findLoop(runtime.db, id, { includeRemoved: true }))),
    };
  }

  /**
   * Runs the loop now in this process (`loops run-now`) and resolves with the ended run (a failed
   * command is a run with status `failed`, not an error); `signal` cancels it. NotFoundError.
   */
  async runNow(idOrName: string, options: { signal?: AbortSignal } = {}): Promise<LoopRun> {
    return toLoopRun(await runLoopNow(await this.runtime(), idOrName, options.signal ? { signal: options.signal } : {}));
  }

  // ---- workflows (loops; the predecessor's SDK had none) ----

  /** Stores version 1 of the workflow spec file (YAML or JSON) at `file` (`loops workflows create`). ValidationError, AlreadyExistsError. */
  async createWorkflow(file: string): Promise<WorkflowView> {
    return (await createWorkflow(await this.runtime(), file)).workflow;
  }

  /** Stores the spec file at `file` as the next version of the workflow (`loops workflows update`). NotFoundError, ValidationError. */
  async updateWorkflow(idOrName: string, file: string): Promise<WorkflowView> {
    return (await updateWorkflow(await this.runtime(), idOrName, file)).workflow;
  }

  /** Workflows (`loops workflows list --json`); `all`: archived ones too. */
  async listWorkflows(options: { all?: boolean } = {}): Promise<WorkflowView[]> {
    return listWorkflows((await this.runtime()).db, options);
  }

  /** One workflow by id or name, with its latest spec (`loops workflows show --json`). NotFoundError. */
  async getWorkflow(idOrName: string): Promise<WorkflowView> {
    return findWorkflow((await this.runtime()).db, idOrName, { includeArchived: true });
  }

  /** Runs the workflow now in this process (`loops workflows run`); resolves with the ended run; `signal` cancels it. NotFoundError, ValidationError (inputs). */
  async runWorkflow(idOrName: string, options: { inputs?: Record<string, string>; signal?: AbortSignal } = {}): Promise<WorkflowRunView> {
    return (await runWorkflow(await this.runtime(), idOrName, options)).run;
  }

  /** Continues a workflow run whose runner stopped (`loops workflows resume`), in this process, to its end (an ended run is given back as it is). NotFoundError. */
  async resumeWorkflow(wfRunId: string, options: { signal?: AbortSignal } = {}): Promise<WorkflowRunView> {
    return resumeWorkflowRun(await this.runtime(), wfRunId, options);
  }

  /** Asks for a running workflow run to be cancelled (`loops workflows cancel`). NotFoundError. */
  async cancelWorkflowRun(wfRunId: string, options: { reason?: string } = {}): Promise<CancelResult> {
    const runtime = await this.runtime();
    return requestWorkflowCancel(runtime, findWorkflowRun(runtime.db, wfRunId).id, options.reason ?? null);
  }

  /** A workflow run in full: every step, attempt and why skipped steps were (`loops workflows inspect --json`). NotFoundError. */
  async inspectWorkflowRun(wfRunId: string): Promise<WorkflowRunInspection> {
    return inspectWorkflowRun((await this.runtime()).db, wfRunId);
  }

  /** Workflow runs, newest first (default 50), of one workflow or of all (`loops workflows runs --json`). NotFoundError. */
  async workflowRuns(idOrName?: string, options: { limit?: number; status?: string } = {}): Promise<WorkflowRunView[]> {
    const runtime = await this.runtime();
    const workflowId = idOrName === undefined ? undefined : findWorkflow(runtime.db, idOrName, { includeArchived: true }).id;
    return listWorkflowRuns(runtime.db, {
      ...(workflowId !== undefined ? { workflowId } : {}),
      ...(options.status !== undefined ? { status: options.status } : {}),
      limit: options.limit ?? 50,
    });
  }

  /** Hides a workflow from new runs; its history stays (`loops workflows archive`). NotFoundError. */
  async archiveWorkflow(idOrName: string, reason?: string): Promise<WorkflowView> {
    return archiveWorkflow(await this.runtime(), idOrName, reason ?? null);
  }

  // ---- events ----

  /**
   * The events of one stream in order (`loops events <ref> --json`, `loops workflows events`): a
   * run id, a workflow run id, a loop name or id, or a raw stream id. NotFoundError.
   */
  async events(ref: string, options: { limit?: number } = {}): Promise<StoredEvent[]> {
    const runtime = await this.runtime();
    const streamId = await resolveStream(runtime.db, runtime.log, ref);
    const list = await runtime.log.readStream(streamId);
    return options.limit === undefined ? list : list.slice(0, options.limit);
  }

  /** The events of the whole log that pass the filter, in log order. NotFoundError (the stream or loop), UsageError (the filter). */
  async logEvents(options: LogEventsOptions = {}): Promise<StoredEvent[]> {
    const runtime = await this.runtime();
    const filter = await this.eventFilter(runtime, options);
    return readEvents(runtime.db, {
      ...filter,
      ...(options.afterPosition !== undefined ? { afterPosition: options.afterPosition } : {}),
      ...(options.limit !== undefined ? { limit: options.limit } : {}),
    });
  }

  /**
   * Live events: every event appended from the moment of subscription on (or after
   * `afterPosition`), by any process — the daemon, the CLI, another client — that passes the
   * filter, in log order. The log is polled by position (every `pollMs`, default 200 ms);
   * unsubscribing stops the polling; `close()` completes it. A filter naming a stream or loop that
   * does not exist errors the observable with NotFoundError.
   */
  events$(query: LiveEventsQuery = {}): Observable<StoredEvent> {
    const opened = this.runtime();
    const db = opened.then((runtime) => runtime.db);
    const filter = opened.then((runtime) => this.eventFilter(runtime, query));
    // A rejection reaches subscribers only: an unused observable leaves no unhandled rejection.
    for (const p of [db, filter]) p.catch(() => undefined);
    return liveEvents(
      db,
      filter,
      {
        signal: this.closing.signal,
        ...(query.afterPosition !== undefined ? { afterPosition: query.afterPosition } : {}),
        ...(query.pollMs !== undefined ? { pollMs: query.pollMs } : {}),
      },
    );
  }

  /** The query's references resolved: the stream's id, the loop's id. */
  private async eventFilter(runtime: Runtime, query: EventQuery): Promise<EventFilter> {
    return {
      ...(query.stream !== undefined ? { stream: await resolveStream(runtime.db, runtime.log, query.stream) } : {}),
      ...(query.types !== undefined ? { types: query.types } : {}),
      ...(query.loop !== undefined ? { loopId: findLoop(runtime.db, query.loop, { includeRemoved: true }).id } : {}),
      ...(query.since !== undefined ? { since: query.since } : {}),
    };
  }

  // ---- admin ----

  /** Runs, failures, duration, tokens and cost per loop (`loops stats --json`); `since`: an ISO time or how long ago (`7d`). NotFoundError, UsageError. */
  async stats(options: { loop?: string; since?: string } = {}): Promise<StatsReport> {
    const runtime = await this.runtime();
    const { parseSince, runStats } = await import('./runtime/admin/stats.js');
    const since = options.since !== undefined ? await parseSince(options.since, runtime.clock.now(), 'since') : null;
    return runStats(runtime.db, { loop: options.loop, since });
  }

  /**
   * What happened to a loop's slots, from the log (`loops why --json`): the recent decisions, or
   * with `at` the explanation of that slot. NotFoundError, ValidationError (a bad `at`), UsageError (a bad `limit`).
   */
  async why(idOrName: string, query: WhyQuery & { at: string }): Promise<SlotExplanation>;
  async why(idOrName: string, query?: WhyQuery & { at?: undefined }): Promise<DecisionView[]>;
  async why(idOrName: string, query: WhyQuery = {}): Promise<SlotExplanation | DecisionView[]> {
    const runtime = await this.runtime();
    const [{ explainSlot, recentDecisions }, { parseInstant }] = await Promise.all([import('./runtime/admin/why.js'), import('./scheduling/schedule.js')]);
    const loop = findLoop(runtime.db, idOrName, { includeRemoved: true });
    if (query.at !== undefined) return explainSlot(runtime.db, loop, parseInstant(query.at, loop.timing.tz, 'at'), runtime.clock.now());
    const limit = query.limit ?? 10;
    if (!Number.isInteger(limit) || limit < 1) throw new UsageError(`why: limit must be a positive whole number, got ${JSON.stringify(limit)}`);
    return recentDecisions(runtime.db, loop.id, limit);
  }

  /** Checks the data directory, database, daemon, agent CLIs and every active loop (`loops doctor --json`); never throws for a failed check (`ok: false`). */
  async doctor(): Promise<DoctorReport> {
    const runtime = await this.runtime();
    const { runDoctor } = await import('./runtime/admin/doctor.js');
    return runDoctor({ dataDir: runtime.dataDir, now: runtime.clock.now() });
  }

  /** Checks the log's invariants (`loops verify --json`); `processes`: also that no process a run started is alive. A violation is `ok: false`, not an error. */
  async verify(options: { processes?: boolean } = {}): Promise<VerifyReport> {
    const { verifyLog } = await import('./runtime/admin/verify-log.js');
    return verifyLog((await this.runtime()).db, options);
  }

  /** Writes a consistent copy of the log and its tables to `target` (`loops backup`), while others write. UsageError / AlreadyExistsError as the CLI. */
  async backup(target: string): Promise<BackupReport> {
    const runtime = await this.runtime();
    const { backup } = await import('./runtime/admin/backup.js');
    return backup(runtime.dataDir, target);
  }

  /**
   * Puts a backup `backup` wrote in place of the data directory's database (`loops restore`),
   * after checking it (integrity, a log format this loops reads, an event log in it); the tables
   * are rebuilt from the restored log if they differ. This client's database is closed first and
   * opened again on the next call (every `events$` completes, as on `close()`): call it with
   * nothing else of this client under way. Refused (UsageError) while a daemon runs, for a file
   * that is not a loops backup, and over a database that holds events unless `force` (it is then
   * kept beside, as `loops.db.before-restore-<time>`); FormatVersionError for a backup of a newer
   * loops; LoopsError `internal` for a damaged file.
   */
  async restore(file: string, options: { force?: boolean } = {}): Promise<RestoreReport> {
    if (typeof file !== 'string' || file.trim() === '') throw new UsageError(`restore: file must be the path of a file backup wrote, got ${JSON.stringify(file)}`);
    const dataDir = clientDataDir(this.options, this.closed);
    const opened = this.opened;
    this.opened = null;
    this.closing.abort();
    this.closing = new AbortController();
    if (opened) (await opened.catch(() => null))?.close();
    const { restore } = await import('./runtime/admin/backup.js');
    return restore(dataDir, file, { force: options.force === true, now: (this.options.clock ?? systemClock).now() });
  }

  /**
   * Removes the output folders of finished runs (`loops prune --json`): those finished before
   * `olderThan` (`30d`, an ISO time), except the `keepLast` most recent of each loop and
   * workflow, each removal recorded first; `archive` also moves their events to an archive file;
   * `vacuum` rewrites loops.db to give its free space back (the daemon stopped); `dryRun` records
   * and removes nothing. `prune` is null for a vacuum alone; a folder that could not be removed is
   * in `prune.failed` (the CLI then exits 1), not an error. UsageError: nothing to prune, `vacuum`
   * with `dryRun` or with the daemon running, a bad `olderThan` or `keepLast`.
   */
  async prune(request: PruneRequest): Promise<PruneOutcome> {
    if (request === null || typeof request !== 'object') throw new UsageError('prune: expected { olderThan?, keepLast?, archive?, vacuum?, dryRun? }', { hint: "e.g. prune({ olderThan: '30d', keepLast: 10, dryRun: true })" });
    const { runPrune } = await import('./runtime/admin/prune-request.js');
    return runPrune(await this.runtime(), request);
  }

  /**
   * Brings the loops, workflows and (`withHistory`) finished runs of `@hasna/loops` across from
   * its database (`loops import hasna-loops --json`; `db` default `~/.hasna/loops/loops.db`), all
   * in one transaction; `dryRun` writes nothing; `prefix` goes before every imported name. A record
   * that cannot come across is a row with outcome `not imported` and its reason (the CLI then
   * exits 1), not an error. ValidationError (no such file, not the predecessor's database, a bad
   * prefix), UsageError (an empty path or a value that is not a string).
   */
  async importHasnaLoops(options: ImportOptions = {}): Promise<ImportReport> {
    if (options === null || typeof options !== 'object') throw new UsageError('importHasnaLoops: expected { db?, withHistory?, dryRun?, prefix? }');
    for (const key of ['db', 'prefix'] as const) {
      if (options[key] !== undefined && typeof options[key] !== 'string') throw new UsageError(`importHasnaLoops: ${key} must be a string, got ${JSON.stringify(options[key])}`);
    }
    const { importHasnaLoops } = await import('./runtime/admin/import-hasna.js');
    return importHasnaLoops(await this.runtime(), options);
  }

  // ---- the daemon (its pid and state files; the client never runs one itself) ----

  /** Whether the data directory's daemon runs and is healthy, and what it reports (`loops daemon status --json`); not running is `running: false`, not an error. */
  async daemonStatus(): Promise<DaemonStatus> {
    const { daemonStatus } = await import('./runtime/daemon/control.js');
    return daemonStatus(clientDataDir(this.options, this.closed), (this.options.clock ?? systemClock).now());
  }

  /**
   * Starts the data directory's daemon in the background (`loops daemon start`): a detached
   * process of the built `loops` that outlives this one, logging to daemon.log; resolves once it
   * runs. AlreadyExistsError when one runs, UsageError for a bad option, LoopsError `internal` when
   * it exits at once or does not come up within 10 s.
   */
  async startDaemon(options: StartDaemonOptions = {}): Promise<DaemonStarted> {
    const { startDaemon } = await import('./runtime/daemon/control.js');
    return startDaemon(clientDataDir(this.options, this.closed), options);
  }

  /**
   * Stops the data directory's daemon gracefully (`loops daemon stop`: running runs are cancelled
   * and recorded) and resolves once its process has ended; none running is `{ stopped: false }`.
   * UsageError for a bad timeout; LoopsError `internal` when it has not ended within `timeoutMs` (default 60 000).
   */
  async stopDaemon(options: { timeoutMs?: number } = {}): Promise<DaemonStopped> {
    const { stopDaemon } = await import('./runtime/daemon/control.js');
    return stopDaemon(clientDataDir(this.options, this.closed), options);
  }

  /** The last `lines` (default 50) lines of the daemon's log (`loops daemon logs -n`); `exists: false` before it wrote one. UsageError for a bad count. */
  async daemonLogs(options: { lines?: number } = {}): Promise<DaemonLogTail> {
    const { daemonLogLines } = await import('./runtime/daemon/control.js');
    return daemonLogLines(clientDataDir(this.options, this.closed), options.lines ?? 50);
  }

  // ---- the machines (no database) ----

  /** The state machines that write the log: name, id, current version and every version kept (`loops machines list --json`). */
  async listMachines(): Promise<MachineInfo[]> {
    const { listMachines } = await import('./runtime/admin/machines.js');
    return listMachines();
  }

  /** One version (default the current) of a machine, by name or id, as JSON (`loops machines export`). NotFoundError (machine or version), UsageError (a version that is not a positive whole number). */
  async exportMachine(name: string, options: { version?: number } = {}): Promise<MachineExport> {
    const { exportMachine } = await import('./runtime/admin/machines.js');
    return exportMachine(name, options.version);
  }

  /**
   * Rebuilds every state of a run (or any stream) from the log alone and checks it against the
   * recorded states (`loops replay --json`). A mismatch is `ok: false` with `firstMismatch` (the
   * CLI exits 6: `DeterminismError`); `strict: true` throws that DeterminismError instead. NotFoundError.
   */
  async replay(runId: string, options: ReplayOptions & { strict?: boolean } = {}): Promise<ReplayResult> {
    const runtime = await this.runtime();
    const { determinismError, replayArchived, replayStream } = await import('./runtime/admin/replay.js');
    const streamId = await resolveStream(runtime.db, runtime.log, runId);
    const result =
      options.archive === true || options.archiveFile !== undefined
        ? await replayArchived(runtime.log, runtime.dataDir, streamId, options.archiveFile)
        : await replayStream(runtime.log, streamId);
    if (options.strict === true && !result.ok) throw determinismError(result);
    return result;
  }

  /**
   * The first transition where two runs (run or workflow run ids, loop names, stream ids) part
   * ways, both replayed in lockstep (`loops diff --json`). Runs of different loops or workflows are
   * refused (UsageError) unless `force`. A side that does not replay as recorded has `mismatch`
   * set (the CLI then exits 6). NotFoundError.
   */
  async diff(a: string, b: string, options: { force?: boolean } = {}): Promise<RunDiff> {
    const runtime = await this.runtime();
    const { diffRuns } = await import('./runtime/admin/run-diff.js');
    const [streamA, streamB] = [await resolveStream(runtime.db, runtime.log, a), await resolveStream(runtime.db, runtime.log, b)];
    return diffRuns(runtime.log, streamA, streamB, options);
  }

  /**
   * Runs a run again from a step (`loops fork --from`), reusing the recorded results of the steps
   * before it, with `setOutputs` overriding some (`<step>.<key>=<value>` of `--set-output`), in this
   * process, to its end; `dryRun`: the plan only, nothing recorded. NotFoundError, UsageError (the
   * step), LoopsError `conflict` (retryable) when the loop's overlap policy holds it back.
   */
  async fork(runId: string, options: ForkOptions): Promise<ForkOutcome> {
    const { parseSetOutput } = await import('./runtime/workflows/fork.js');
    const setOutputs = (options.setOutputs ?? []).map((o) => (typeof o === 'string' ? parseSetOutput(o) : o));
    return this.forkOrRerun(runId, { how: 'fork', from: options.from, setOutputs, reason: options.reason ?? null }, options);
  }

  /**
   * Runs a run again as a new run of the same definition version (`loops rerun`); `failed`: only
   * the steps that did not succeed run again (`--failed`). As `fork` otherwise.
   */
  async rerun(runId: string, options: RerunOptions = {}): Promise<ForkOutcome> {
    return this.forkOrRerun(runId, { how: options.failed === true ? 'rerun-failed' : 'rerun', reason: options.reason ?? null }, options);
  }

  private async forkOrRerun(runId: string, request: ForkRequest, options: { dryRun?: boolean; signal?: AbortSignal }): Promise<ForkOutcome> {
    const runtime = await this.runtime();
    const { executeFork, planFork } = await import('./runtime/loops/fork-run.js');
    const plan = await planFork(runtime, runId, request);
    if (options.dryRun === true) return { plan, result: null };
    const signal = options.signal ? { signal: options.signal } : {};
    return { plan, result: await executeFork(runtime, plan, { run: signal, workflow: signal }) };
  }

  /**
   * Writes the audit bundle of a run, a workflow run or a loop (`loops export`): its events,
   * outputs and output files, chained by sha256, secrets masked — or, with `html`, one page.
   * `output: '-'` writes nothing and gives the lines. NotFoundError; UsageError (a bad ISO `since`), ValidationError (a bad duration).
   */
  async export(ref: string, options: ExportOptions = {}): Promise<ExportResult> {
    const runtime = await this.runtime();
    const { exportBundle } = await import('./runtime/admin/export-bundle.js');
    return exportBundle(runtime.db, runtime.dataDir, ref, {
      since: options.since ?? null,
      output: options.output ?? null,
      html: options.html === true,
      now: runtime.clock.now(),
      flag: 'since',
    });
  }

  /**
   * Checks a bundle `export` wrote (`loops verify <bundle> --json`), with no data directory: its
   * hashes and links, trailer, stream versions, the replay of every state, outputs and files. A
   * problem is `ok: false` with one line in `problems`; a file that is not a bundle is a ValidationError.
   */
  async verifyBundle(file: string): Promise<BundleReport> {
    const { verifyBundle } = await import('./runtime/admin/bundle-verify.js');
    return verifyBundle(file);
  }

  /** Registers a credentials profile for an agent CLI (`loops accounts add`): `dir` is its config directory. ValidationError, AlreadyExistsError. */
  async addAccount(name: string, input: { tool: string; dir: string }): Promise<AccountView> {
    const { addAccount } = await import('./runtime/agents/accounts.js');
    return addAccount(await this.runtime(), { name, tool: input.tool, dir: input.dir });
  }

  /** The credentials profiles (`loops accounts list --json`). */
  async listAccounts(): Promise<AccountView[]> {
    const { listAccounts } = await import('./runtime/agents/accounts.js');
    return listAccounts((await this.runtime()).db);
  }

  /** Removes a credentials profile (`loops accounts remove`). NotFoundError. */
  async removeAccount(name: string, options: { reason?: string } = {}): Promise<AccountView> {
    const { removeAccount } = await import('./runtime/agents/accounts.js');
    return removeAccount(await this.runtime(), name, options.reason ?? null);
  }

  /** Redefines loops and workflows that hold a secret value in clear, passing it by name (`loops secrets scrub --json`); `dryRun`: the report only. */
  async scrubSecrets(options: { dryRun?: boolean } = {}): Promise<ScrubReport> {
    const { scrubSecrets } = await import('./runtime/loops/scrub.js');
    return scrubSecrets(await this.runtime(), options);
  }

  /** Drops the projection tables and rebuilds them from the log (`loops projections rebuild --json`). */
  async rebuildProjections(): Promise<RebuildResult> {
    const { rebuildProjections } = await import('./runtime/admin/projections.js');
    return rebuildProjections((await this.runtime()).db);
  }

  /** Rebuilds the tables into a scratch database and compares (`loops projections verify --json`); a difference is `ok: false`. */
  async verifyProjections(): Promise<VerifyResult> {
    const { verifyProjections } = await import('./runtime/admin/projections.js');
    return verifyProjections((await this.runtime()).db);
  }

  /** Closes the database (and the spawner helper, if one was started) and completes every `events$`. Later calls fail with a UsageError. */
  async close(): Promise<void> {
    this.closed = true;
    this.closing.abort();
    const opened = this.opened;
    this.opened = null;
    if (opened) (await opened).close();
  }
}

/** The data directory of a client with these options, without opening it; a closed client's calls fail as every method's do. */
function clientDataDir(options: LoopsClientOptions, closed: boolean): string {
  if (closed) throw new UsageError('this LoopsClient is closed', { hint: 'create a new LoopsClient' });
  return options.dataDir ?? resolveDataDir();
}

/** `loops()` of the predecessor: a client with these options. */
export function loops(options: LoopsClientOptions = {}): LoopsClient {
  return new LoopsClient(options);
}

// ---- input → the runtime's create input ------------------------------------------------------

/** The fields every kind of loop shares, as the runtime takes them. */
type CommonInput = Pick<
  CreateCommandLoopInput,
  'name' | 'description' | 'schedule' | 'overlap' | 'catchUp' | 'catchUpLimit' | 'attempts' | 'retryDelay' | 'lease' | 'preflight' | 'runsOn'
>;

/** `create`'s common fields → the runtime's (ValidationError on a bad shape). */
function createOptions(input: CreateLoopInput): CommonInput {
  if (input === null || typeof input !== 'object') throw new ValidationError('create: expected an object with name, schedule and target');
  return {
    name: input.name,
    description: input.description ?? null,
    schedule: { ...scheduleFlags(input.schedule), ...(input.expiresAt !== undefined ? { expiresAt: input.expiresAt } : {}) },
    overlap: input.overlap ?? null,
    catchUp: input.catchUp ?? null,
    catchUpLimit: input.catchUpLimit ?? null,
    attempts: input.maxAttempts ?? null,
    retryDelay: input.retryDelayMs ?? null,
    lease: input.leaseMs ?? null,
    ...(input.preflight !== undefined ? { preflight: input.preflight } : {}),
    ...(input.runsOn !== undefined ? { runsOn: input.runsOn } : {}),
  };
}

function scheduleFlags(s: ScheduleSpec): CreateCommandLoopInput['schedule'] {
  if (s === null || typeof s !== 'object') throw new ValidationError('schedule: expected an object with type once, interval, cron, dynamic or manual');
  switch (s.type) {
    case 'once':
      return { at: s.at };
    case 'interval':
      return { every: msText(s.everyMs, 'schedule.everyMs'), ...(s.anchor === 'fixed_delay' ? { anchor: 'fixed-delay' } : {}) };
    case 'cron':
      return { cron: s.expression, ...(s.tz !== undefined ? { tz: s.tz } : {}) };
    case 'dynamic':
      return s.minIntervalMs === undefined ? { dynamic: true } : { every: msText(s.minIntervalMs, 'schedule.minIntervalMs'), anchor: 'fixed-delay' };
    case 'manual':
      return { manual: true };
    default:
      throw new ValidationError(`schedule.type: ${JSON.stringify((s as { type?: unknown }).type)} is not once, interval, cron, dynamic or manual`);
  }
}

function msText(ms: unknown, field: string): string {
  if (typeof ms !== 'number' || !Number.isInteger(ms) || ms <= 0) throw new ValidationError(`${field}: expected a positive whole number of milliseconds, got ${JSON.stringify(ms)}`);
  return `${ms}ms`;
}

/** `{ profile, tool }` → the runtime's `account` / `accountTool` (checked there: a command needs its tool). */
function accountInput(account: AccountRef | undefined): { account?: string; accountTool?: string } {
  if (account === undefined) return {};
  if (account === null || typeof account !== 'object' || typeof account.profile !== 'string') {
    throw new ValidationError('target.account: expected { profile, tool? }', { hint: "e.g. account: { profile: 'work', tool: 'claude' }" });
  }
  return { account: account.profile, ...(account.tool !== undefined ? { accountTool: account.tool } : {}) };
}

// ---- the runtime's views → the predecessor's shapes ------------------------------------------

function toSchedule(s: Schedule, tz: string): ScheduleSpec {
  switch (s.kind) {
    case 'every':
      return { type: 'interval', everyMs: s.everyMs, anchor: s.anchor === 'fixed-delay' ? 'fixed_delay' : 'fixed_rate' };
    case 'cron':
      return { type: 'cron', expression: s.expr, tz: s.tz ?? tz };
    case 'at':
      return { type: 'once', at: s.at };
    default:
      return { type: 'manual' };
  }
}

function toTarget(view: LoopView): LoopTarget {
  const t = view.target;
  const timeout = view.policies.timeoutMs ?? undefined;
  if (t.kind === 'workflow') return { type: 'workflow', workflowId: t.workflowId, ...(timeout !== undefined ? { timeoutMs: timeout } : {}) };
  if (t.kind === 'agent') {
    return {
      type: 'agent',
      provider: t.provider,
      prompt: t.prompt ?? '',
      ...(t.cwd !== null ? { cwd: t.cwd } : {}),
      ...(t.model !== null ? { model: t.model } : {}),
      ...(t.agent !== null ? { agent: t.agent } : {}),
      extraArgs: t.extraArgs,
      ...(timeout !== undefined ? { timeoutMs: timeout } : {}),
      configIsolation: t.configIsolation,
      ...(t.account ? { account: { profile: t.account, tool: t.accountTool ?? t.provider } } : {}),
    };
  }
  return {
    type: 'command',
    command: t.command,
    args: t.args,
    ...(t.cwd !== null ? { cwd: t.cwd } : {}),
    shell: t.shell,
    env: t.env,
    ...(timeout !== undefined ? { timeoutMs: timeout } : {}),
    ...(t.account ? { account: { profile: t.account, ...(t.accountTool ? { tool: t.accountTool } : {}) } } : {}),
  };
}

/** A loop view → the predecessor's `Loop`. */
function toLoop(view: LoopView): Loop {
  const p: LoopPolicies = view.policies;
  return {
    id: view.id,
    name: view.name,
    ...(view.description !== null ? { description: view.description } : {}),
    status: view.status as LoopStatus,
    schedule: toSchedule(view.schedule, view.timing.tz),
    target: toTarget(view),
    ...(view.nextRunAt !== null ? { nextRunAt: view.nextRunAt } : {}),
    catchUp: p.catchUp as CatchUpPolicy,
    catchUpLimit: p.catchUpLimit ?? 0,
    overlap: p.overlap as OverlapPolicy,
    maxAttempts: p.attempts,
    retryDelayMs: p.retryDelayMs,
    leaseMs: p.leaseMs,
    ...(view.timing.expiresAt !== null ? { expiresAt: view.timing.expiresAt } : {}),
    createdAt: view.createdAt,
    updatedAt: view.updatedAt,
  };
}

/** A run view → the predecessor's `LoopRun`. */
function toLoopRun(run: RunView): LoopRun {
  return {
    id: run.id,
    loopId: run.loopId,
    loopName: run.loopName,
    scheduledFor: run.scheduledFor,
    attempt: run.attempt,
    status: run.status,
    ...(run.startedAt !== null ? { startedAt: run.startedAt } : {}),
    ...(run.finishedAt !== null ? { finishedAt: run.finishedAt } : {}),
    claimedBy: run.runnerId,
    ...(run.pid !== null ? { pid: run.pid } : {}),
    ...(run.exitCode !== null ? { exitCode: run.exitCode } : {}),
    ...(run.durationMs !== null ? { durationMs: run.durationMs } : {}),
    stdout: run.stdout,
    stderr: run.stderr,
    ...(run.error !== null ? { error: run.error } : {}),
    createdAt: run.claimedAt,
    updatedAt: run.finishedAt ?? run.startedAt ?? run.claimedAt,
  };
}

/** A skipped slot as the predecessor listed it: a run record of status `skipped` (loops records the decision, no run). */
function skippedRun(d: PassDecision, nowMs: number): LoopRun {
  const at = new Date(nowMs).toISOString();
  const data = d.data as { slot?: string; reason?: string; blockedBy?: string | null };
  return {
    id: '',
    loopId: d.loopId,
    loopName: d.loopName,
    scheduledFor: data.slot ?? at,
    attempt: 1,
    status: 'skipped',
    error: `skipped: ${data.reason ?? 'overlap'}${data.blockedBy ? ` (${data.blockedBy} was still running)` : ''}`,
    createdAt: at,
    updatedAt: at,
  };
}
