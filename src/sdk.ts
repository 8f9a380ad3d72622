/**
 * `<package>/sdk`: the `LoopsClient` class of `@hasna/loops` (its method names and result shapes:
 * create, list, get, pause, resume, stop, delete, runs, tick, runNow, close), plus workflows, over
 * the runtime the CLI itself uses — every call is the same function a CLI command calls, nothing is
 * implemented twice. Differences from the predecessor (docs/migrating.md): every method returns a
 * Promise; errors are typed (`LoopsError` and its subclasses, each with a stable `code`); a
 * `dynamic` schedule is stored as what it means (`every`, fixed-delay), and reads back as such.
 */
import type { LoopPolicies, Schedule } from './events/catalog.js';
import {
  AlreadyExistsError,
  AmbiguousError,
  BusyError,
  InvalidTransitionError,
  LoopsError,
  NotFoundError,
  UsageError,
  ValidationError,
  type LoopsErrorCode,
} from './events/errors.js';
import type { Clock } from './runtime/clock.js';
import { tick as runTick, type PassDecision } from './runtime/daemon/pass.js';
import { runNow as runLoopNow } from './runtime/execution/run-now.js';
import {
  changeLoopState,
  createAgentLoop,
  createCommandLoop,
  createWorkflowLoop,
  type CreateCommandLoopInput,
} from './runtime/loops/commands.js';
import { findLoop, listLoops, listRuns, type LoopView, type RunView } from './runtime/queries/loops.js';
import {
  findWorkflow,
  listWorkflowRuns,
  listWorkflows,
  type WorkflowRunView,
  type WorkflowView,
} from './runtime/queries/workflows.js';
import { openRuntime, type Runtime } from './runtime/runtime.js';
import { archiveWorkflow, createWorkflow, updateWorkflow } from './runtime/workflows/specs.js';
import { runWorkflow } from './runtime/workflows/runner.js';

export { AlreadyExistsError, AmbiguousError, BusyError, InvalidTransitionError, LoopsError, NotFoundError, UsageError, ValidationError };
export type { LoopsErrorCode, LoopView, RunView, WorkflowRunView, WorkflowView };

// ---- the predecessor's shapes (its src/types.ts), as loops fills them ---------------------------

export type LoopStatus = 'active' | 'paused' | 'stopped' | 'expired' | 'archived' | 'removed';
export type CatchUpPolicy = 'none' | 'latest' | 'all';
/** The predecessor's two, and loops' others (`buffer-one`, `buffer-all`, `cancel-other`). */
export type OverlapPolicy = 'skip' | 'allow' | 'buffer-one' | 'buffer-all' | 'cancel-other';
export type IntervalAnchor = 'fixed_rate' | 'fixed_delay';

export interface AccountRef {
  profile: string;
  tool?: string;
}

export type ScheduleSpec =
  | { type: 'once'; at: string }
  | { type: 'interval'; everyMs: number; anchor?: IntervalAnchor }
  | { type: 'cron'; expression: string; /** loops: the IANA zone (default the system's). */ tz?: string }
  /** One run `minIntervalMs` (default 60 000) after the previous one finished; read back as `interval`, `fixed_delay`. */
  | { type: 'dynamic'; minIntervalMs?: number }
  /** loops: runs only through runNow. */
  | { type: 'manual' };

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

export interface WorkflowTarget {
  type: 'workflow';
  /** A workflow id or name. */
  workflowId: string;
  timeoutMs?: number;
}

export type LoopTarget = CommandTarget | AgentTarget | WorkflowTarget;

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
}

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

export type RunStatus = 'claimed' | 'running' | 'succeeded' | 'failed' | 'timed_out' | 'cancelled' | 'abandoned' | 'skipped' | (string & {});

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

export interface LoopsClientOptions {
  /** The data directory (default `$LOOPS_DATA_DIR`, else the platform's: see docs/cli.md). */
  dataDir?: string;
  /** Identity of this runner in the log (default `<host>:<pid>:<random>`). */
  runnerId?: string;
  /** The clock (tests): default the system clock. */
  clock?: Clock;
}

// ---- the client -----------------------------------------------------------------------------

export class LoopsClient {
  private opened: Promise<Runtime> | null = null;
  private closed = false;

  constructor(private readonly options: LoopsClientOptions = {}) {}

  /** The runtime, opened on first use (the database is created if absent). */
  private runtime(): Promise<Runtime> {
    if (this.closed) return Promise.reject(new UsageError('this LoopsClient is closed', { hint: 'create a new LoopsClient' }));
    this.opened ??= openRuntime({
      source: 'sdk',
      ...(this.options.dataDir !== undefined ? { dataDir: this.options.dataDir } : {}),
      ...(this.options.clock !== undefined ? { clock: this.options.clock } : {}),
      ...(this.options.runnerId !== undefined ? { runnerId: this.options.runnerId } : {}),
    });
    return this.opened;
  }

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

  /** Loops not removed, by name; `status` keeps those in that status. */
  async list(options: { status?: LoopStatus } = {}): Promise<Loop[]> {
    const runtime = await this.runtime();
    return listLoops(runtime.db, { all: options.status === 'removed' })
      .filter((l) => options.status === undefined || l.status === options.status)
      .map(toLoop);
  }

  /** By id, name or unique id prefix; NotFoundError / AmbiguousError otherwise. */
  async get(idOrName: string): Promise<Loop> {
    return toLoop(findLoop((await this.runtime()).db, idOrName));
  }

  async pause(idOrName: string): Promise<Loop> {
    return toLoop(await changeLoopState(await this.runtime(), idOrName, 'pause'));
  }

  async resume(idOrName: string): Promise<Loop> {
    return toLoop(await changeLoopState(await this.runtime(), idOrName, 'resume'));
  }

  async stop(idOrName: string): Promise<Loop> {
    return toLoop(await changeLoopState(await this.runtime(), idOrName, 'stop'));
  }

  /** Removes the loop (its runs and events stay in the log; its name can be reused): true once removed. */
  async delete(idOrName: string): Promise<boolean> {
    const view = await changeLoopState(await this.runtime(), idOrName, 'remove');
    return view.status === 'removed';
  }

  /** Runs, newest first (at most `limit`, default 100), of one loop (id or name) or of all. */
  async runs(loopIdOrName?: string, options: { limit?: number; status?: string } = {}): Promise<LoopRun[]> {
    const runtime = await this.runtime();
    const loopId = loopIdOrName === undefined ? undefined : findLoop(runtime.db, loopIdOrName, { includeRemoved: true }).id;
    return listRuns(runtime.db, {
      ...(loopId !== undefined ? { loopId } : {}),
      ...(options.status !== undefined ? { status: options.status } : {}),
      limit: options.limit ?? 100,
    }).map(toLoopRun);
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

  /** Runs the loop now in this process and resolves with the ended run (a failed command is a run with status `failed`, not an error). */
  async runNow(idOrName: string, options: { signal?: AbortSignal } = {}): Promise<LoopRun> {
    return toLoopRun(await runLoopNow(await this.runtime(), idOrName, options.signal ? { signal: options.signal } : {}));
  }

  // ---- workflows (loops; the predecessor's SDK had none) ----

  /** Stores version 1 of the workflow spec file (YAML or JSON) at `file`. */
  async createWorkflow(file: string): Promise<WorkflowView> {
    return (await createWorkflow(await this.runtime(), file)).workflow;
  }

  /** Stores the spec file at `file` as the next version of the workflow. */
  async updateWorkflow(idOrName: string, file: string): Promise<WorkflowView> {
    return (await updateWorkflow(await this.runtime(), idOrName, file)).workflow;
  }

  async listWorkflows(options: { all?: boolean } = {}): Promise<WorkflowView[]> {
    return listWorkflows((await this.runtime()).db, options);
  }

  async getWorkflow(idOrName: string): Promise<WorkflowView> {
    return findWorkflow((await this.runtime()).db, idOrName);
  }

  /** Runs the workflow now in this process; resolves with the ended workflow run. */
  async runWorkflow(idOrName: string, options: { inputs?: Record<string, string>; signal?: AbortSignal } = {}): Promise<WorkflowRunView> {
    return (await runWorkflow(await this.runtime(), idOrName, options)).run;
  }

  /** Workflow runs, newest first (default 50), of one workflow or of all. */
  async workflowRuns(idOrName?: string, options: { limit?: number; status?: string } = {}): Promise<WorkflowRunView[]> {
    const runtime = await this.runtime();
    const workflowId = idOrName === undefined ? undefined : findWorkflow(runtime.db, idOrName, { includeArchived: true }).id;
    return listWorkflowRuns(runtime.db, {
      ...(workflowId !== undefined ? { workflowId } : {}),
      ...(options.status !== undefined ? { status: options.status } : {}),
      limit: options.limit ?? 50,
    });
  }

  async archiveWorkflow(idOrName: string, reason?: string): Promise<WorkflowView> {
    return archiveWorkflow(await this.runtime(), idOrName, reason ?? null);
  }

  /** Closes the database (and the spawner helper, if one was started). Later calls fail with a UsageError. */
  async close(): Promise<void> {
    this.closed = true;
    const opened = this.opened;
    this.opened = null;
    if (opened) (await opened).close();
  }
}

/** `loops()` of the predecessor: a client with these options. */
export function loops(options: LoopsClientOptions = {}): LoopsClient {
  return new LoopsClient(options);
}

// ---- input → the runtime's create input ------------------------------------------------------

type CommonInput = Pick<
  CreateCommandLoopInput,
  'name' | 'description' | 'schedule' | 'overlap' | 'catchUp' | 'catchUpLimit' | 'attempts' | 'retryDelay' | 'lease' | 'preflight'
>;

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
