/**
 * Running a workflow in this process: the workflow-run machine decides (which steps start, which
 * are skipped, retries, the final status); this module binds its named effects to real processes.
 * Every step transition is an event on the run's stream, appended before its effect: the intent
 * (`step.spawn_requested`, with the rendered command line) before the spawn, the process identity
 * after it, the outcome (with the step's outputs) when it ends. The run holds a lease, renewed by
 * heartbeat; every append is fenced by it.
 *
 * Outputs: a step writes `key=value` lines (or one JSON object) to the file named by
 * `$LOOPS_OUTPUT`; later steps get them through `${{ steps.<id>.outputs.<key> }}` in `args`,
 * `env` and `cwd`, substituted as whole values — never spliced into shell text.
 *
 * Over 500 lines on purpose: one class binds every effect of the workflow-run machine (spawn,
 * watch, retry timer, cancel, lease) — split, each half would need the other's state.
 */
import type { AnyMachineSnapshot } from 'xstate';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { EventData, ForkedFrom, LoopAgentTarget } from '../../events/catalog.js';
import type { Batch } from '../../events/types.js';
import { LoopsError, UsageError, uniqueViolation } from '../../events/errors.js';
import type { StoredEvent } from '../../events/types.js';
import { renderTemplate, type StepView } from '../../workflow/expr.js';
import type { StepSpec, WorkflowSpec } from '../../workflow/spec.js';
import { currentMachines } from '../../machines/registry.js';
import { stepOf, stepViews, type WorkflowRunContext, type workflowRunMachine } from '../../machines/workflow-run.js';
import { DurableActor, type Effects } from '../actor.js';
import { watchCancel } from '../execution/cancel.js';
import type { TimerHandle } from '../clock.js';
import { findRunProcess, recordedDeadline, SpawnFailedError, spawnProcess, type Deadline, type ProcessHandle } from '../execution/executor.js';
import { type ProcessIdentity, processState } from '../execution/process-info.js';
import { adoptProcess, exitFromFiles } from '../execution/process-watch.js';
import { runSecrets } from '../execution/run-secrets.js';
import { maskDeep, SecretMasker } from '../execution/secrets.js';
import { maskFiles } from '../execution/output.js';
import { agentEnd, prepareSpawn } from '../execution/spawn-plan.js';
import { prepareAgent, withAgentError, type PreparedAgent } from '../agents/run.js';
import { isProviderId, type ProviderId } from '../agents/index.js';
import { newId } from '../ids.js';
import { HeldLease } from '../leases.js';
import { runDir } from '../paths.js';
import type { Runtime } from '../runtime.js';
import { findWorkflowRecord, findWorkflowRun, workflowVersion, type WorkflowRunView } from '../queries/workflows.js';
import { faultPoint } from '../../events/faults.js';
import { stopLeftovers } from '../execution/terminate.js';

export interface RunWorkflowOptions {
  /** Values for the spec's `inputs` (`--input k=v`). */
  inputs?: Record<string, string>;
  /** Aborting cancels the run (its running steps are stopped; `always()` steps still run). */
  signal?: AbortSignal;
  /** Every event of the run as it is recorded, with the run's state after it (the live view). */
  onEvent?: (event: StoredEvent, context: WorkflowRunContext) => void;
  /** Called once the run is started, with its id. */
  onStarted?: (wfRunId: string) => void;
  /** A loop slot + attempt maps to exactly one workflow run (default: a key of its own). */
  idempotencyKey?: string;
  trigger?: 'manual' | 'schedule';
  loopId?: string | null;
  slot?: string | null;
  attempt?: number;
  /** Lease time-to-live (default 30 s), renewed every third of it. */
  leaseTtlMs?: number;
  /** The run's id, when it was recorded before (a workflow loop's run records it first). */
  wfRunId?: string;
  tailBytes?: number;
  /**
   * A fork or rerun (./fork.ts): where it came from, and the result of each step it reuses
   * (recorded as `step.reused` in its start's transaction; those steps never spawn).
   */
  fork?: { forkedFrom: ForkedFrom; reused: Record<string, EventData<'step.reused'>> };
  /** Appends that belong with the run's start, in its transaction (a fork's note on its parent's stream). */
  withStart?: (batch: Batch) => Promise<unknown>;
}

export interface WorkflowRunResult {
  run: WorkflowRunView;
  /** False when the idempotency key named a run that already existed (it was not started again). */
  started: boolean;
}

const DEFAULT_TTL = 30_000;

/** Checks `--input` values against the spec's declared inputs and applies the defaults. */
export function resolveInputs(spec: WorkflowSpec, given: Record<string, string>): Record<string, string> {
  const declared = Object.keys(spec.inputs);
  for (const key of Object.keys(given)) {
    if (!Object.hasOwn(spec.inputs, key)) {
      throw new UsageError(`--input ${key}: workflow ${spec.name} has no input named ${JSON.stringify(key)}`, {
        hint: declared.length ? `its inputs: ${declared.join(', ')}` : 'it declares no inputs (add them under inputs: in the spec)',
      });
    }
  }
  const out: Record<string, string> = {};
  for (const [key, input] of Object.entries(spec.inputs)) {
    const value = (Object.hasOwn(given, key) ? given[key] : undefined) ?? input.default;
    if (value === null || value === undefined) {
      if (input.required) throw new UsageError(`--input ${key}: workflow ${spec.name} needs this input`, { hint: `add --input ${key}=<value>` });
      continue;
    }
    out[key] = value;
  }
  return out;
}

/** Parses what a step wrote to $LOOPS_OUTPUT: one JSON object, or `key=value` lines (# comments). */
export function parseOutputs(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  const trimmed = text.trim();
  if (trimmed.startsWith('{')) {
    try {
      const value = JSON.parse(trimmed) as unknown;
      if (value && typeof value === 'object' && !Array.isArray(value)) {
        for (const [k, v] of Object.entries(value)) out[k] = typeof v === 'string' ? v : JSON.stringify(v);
        return out;
      }
    } catch {
      // not JSON: read it as lines
    }
  }
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === '' || line.trimStart().startsWith('#')) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) continue;
    const key = line.slice(0, eq).trim();
    if (/^[A-Za-z_][A-Za-z0-9_-]*$/.test(key)) out[key] = line.slice(eq + 1);
  }
  return out;
}

function readOutputs(file: string): Record<string, string> {
  if (!existsSync(file)) return {};
  if (statSync(file).size > 1024 * 1024) return {};
  return parseOutputs(readFileSync(file, 'utf8'));
}


/** Starts a run of the workflow's latest version (or returns the run its idempotency key names). */
export async function runWorkflow(runtime: Runtime, idOrName: string, options: RunWorkflowOptions = {}): Promise<WorkflowRunResult> {
  const workflow = findWorkflowRecord(runtime.db, idOrName);
  const { spec } = workflowVersion(runtime.db, workflow.id, workflow.version);
  const inputs = resolveInputs(spec, options.inputs ?? {});
  if (options.idempotencyKey) {
    const existing = runtime.db.prepare('SELECT id FROM workflow_runs WHERE idempotency_key = ?').get(options.idempotencyKey) as { id: string } | undefined;
    if (existing) return { run: findWorkflowRun(runtime.db, existing.id), started: false };
  }
  const run = await executeWorkflowRun(runtime, { workflowId: workflow.id, workflowName: workflow.name, version: workflow.version, spec, inputs }, options);
  return { run, started: true };
}

/** What a workflow run runs: a workflow's spec at one version, with its inputs. */
export interface PinnedWorkflow {
  workflowId: string;
  workflowName: string;
  version: number;
  spec: WorkflowSpec;
  inputs: Record<string, string>;
}

/** Executes one workflow run to its end in this process. */
export async function executeWorkflowRun(
  runtime: Runtime,
  pinned: PinnedWorkflow,
  options: RunWorkflowOptions = {},
): Promise<WorkflowRunView> {
  return new WorkflowRunner(runtime, options.wfRunId ?? newId('wfrun', runtime.clock.now()), options).start(pinned);
}

/**
 * Continues a workflow run whose runner stopped (kill -9, a crash, a reboot): takes over its lease,
 * reconciles every step that has no recorded outcome against the OS — a step whose process (pid and
 * start time) still runs is adopted and its real exit recorded when it ends; one that ended while
 * nobody watched gets its exit status from its file; one of which nothing is known is recorded
 * abandoned (and retried when its policy allows) — re-arms retries and the workflow timeout, and
 * runs the rest. A step whose success is recorded is never run again.
 */
export async function resumeWorkflowRun(runtime: Runtime, wfRunIdOrPrefix: string, options: RunWorkflowOptions = {}): Promise<WorkflowRunView> {
  const run = findWorkflowRun(runtime.db, wfRunIdOrPrefix);
  return new WorkflowRunner(runtime, run.id, options).resume();
}

interface StepHandle {
  cancel(reason: string | null): void;
}

class WorkflowRunner {
  private readonly streamId: string;
  /** The run's lease: taken with wfrun.started (or over, on resume), renewed, fencing every append. */
  private readonly lease: HeldLease;
  private readonly timers = new Set<TimerHandle>();
  private readonly handles = new Map<string, StepHandle>();
  private actor!: DurableActor<typeof workflowRunMachine>;

  constructor(
    private readonly runtime: Runtime,
    private readonly wfRunId: string,
    private readonly options: RunWorkflowOptions,
  ) {
    this.streamId = `wfrun:${wfRunId}`;
    this.lease = new HeldLease(runtime, this.streamId, options.leaseTtlMs ?? DEFAULT_TTL);
  }

  private get context(): WorkflowRunContext {
    return this.actor.context;
  }

  private later(atMs: number, fn: () => void): void {
    const { clock } = this.runtime;
    const timer = clock.setTimeout(() => {
      this.timers.delete(timer);
      // A timer counts from the event loop's cached time, so it can fire a millisecond or two
      // before `atMs` on the wall clock: never act (and record) before the instant itself.
      if (clock.now() < atMs) this.later(atMs, fn);
      else fn();
    }, Math.max(0, atMs - clock.now()));
    this.timers.add(timer);
  }

  /** Records under the run's lease; a failure to record ends the run's actor with it (never rejects). */
  private record(type: string, data: unknown): Promise<void> {
    return this.actor.recordOrFail([{ type, data }], this.lease.fence());
  }

  /** The values masked in steps' output, by the names asked for: read from the environment once per run. */
  private readonly secretCache = new Map<string, string[]>();
  private secrets(names: readonly string[]): string[] {
    const key = names.join('\0');
    let values = this.secretCache.get(key);
    if (!values) this.secretCache.set(key, (values = runSecrets(names)));
    return values;
  }

  /**
   * What a step attempt wrote to `$LOOPS_OUTPUT`, with every secret value of the run masked: outputs
   * are recorded (`step.exited`) and substituted into later steps' recorded command lines, so a
   * secret never travels through them — later steps read it from their environment (`secrets:`).
   */
  private outputsOf(stepId: string, attempt: number): Record<string, string> {
    const file = join(this.stepDir(stepId, attempt), 'output');
    const outputs = readOutputs(file);
    const masker = new SecretMasker(this.secrets(this.context.spec!.secrets));
    if (masker.empty) return outputs;
    // The file too, like the step's stdout and stderr: no secret stays in a run file.
    if (existsSync(file)) maskFiles(file, masker);
    return maskDeep(outputs, masker);
  }

  private batch: Array<{ type: string; data: unknown }> = [];
  /** Agent steps prepared with their intent, by `<step>#<attempt>`, until spawned. */
  private readonly agents = new Map<string, { target: LoopAgentTarget; prepared: PreparedAgent } | { error: string }>();

  /**
   * Records process facts (spawned, exited) in batches: the ones that arrive in the same turn of
   * the event loop — parallel steps starting or ending together — go into one transaction (one
   * fsync), with the intents of the steps they make ready.
   */
  private recordSoon(type: string, data: unknown): void {
    this.batch.push({ type, data });
    if (this.batch.length > 1) return;
    setImmediate(() => {
      const events = this.batch;
      this.batch = [];
      if (this.actor.snapshot.status === 'done') return;
      void this.actor.recordOrFail(events, this.lease.fence());
    });
  }
  private lastFlush = 0;

  private stepDir(stepId: string, attempt: number): string {
    return join(runDir(this.runtime.dataDir, this.wfRunId), stepId, String(attempt));
  }

  private readonly effects: Effects<typeof workflowRunMachine> = {
    // Inline: what the machine decided — retries, skips, the intents of the steps that start — goes
    // into the same transaction as the event that caused it.
    recordDecisions: {
      inline: (
        params: {
          retries: Array<EventData<'step.retry_scheduled'>>;
          skips: Array<EventData<'step.skipped'>>;
          starts: Array<{ stepId: string; attempt: number }>;
          reuses?: string[];
        },
        snapshot: AnyMachineSnapshot,
      ) => [
        ...(params.reuses ?? []).map((stepId) => {
          const reused = this.options.fork?.reused[stepId];
          if (!reused) throw new LoopsError('internal', `workflow run ${this.wfRunId} reuses step ${stepId} but was given no result for it`);
          return { type: 'step.reused', data: reused };
        }),
        ...params.retries.map((r) => ({ type: 'step.retry_scheduled', data: { stepId: r.stepId, attempt: r.attempt, dueAt: r.dueAt, reason: r.reason } })),
        ...params.skips.map((s) => ({ type: 'step.skipped', data: { stepId: s.stepId, reason: s.reason } })),
        ...params.starts.map((s) => ({ type: 'step.spawn_requested', data: this.spawnRequest(snapshot.context, s.stepId, s.attempt) })),
      ],
    },
    // Runs started before decisions were recorded (resumed by this version): their intents only.
    startSteps: {
      inline: (params: { steps: Array<{ stepId: string; attempt: number }> }, snapshot: AnyMachineSnapshot) =>
        params.steps.map((s) => ({
          type: 'step.spawn_requested',
          data: this.spawnRequest(snapshot.context, s.stepId, s.attempt),
        })),
    },
    // Not awaited in the actor's effect order: the steps one decision starts are forked together
    // (their intents are all recorded by then), not each after the previous one's fork was
    // answered. A kill asked for while one is starting reaches it once it has started (spawnStep).
    spawnStep: (params: EventData<'step.spawn_requested'>) => {
      this.spawnStep(params).catch((error: unknown) => this.actor.fail(error));
    },
    killSteps: (params: { stepIds: string[]; reason: string }) => {
      for (const id of params.stepIds) this.handles.get(id)?.cancel(params.reason);
    },
    armRetry: (params: { retries: Array<{ stepId: string; attempt: number; dueAt: string }> }) => {
      for (const r of params.retries) this.armRetry(r.stepId, r.attempt, r.dueAt);
    },
    armTimeout: (params: { at: string | null; timeoutMs: number | null }) => {
      if (params.at !== null && params.timeoutMs !== null) this.armTimeout(params.at, params.timeoutMs);
    },
    finalize: () => {
      for (const t of this.timers) this.runtime.clock.clearTimeout(t);
      this.timers.clear();
    },
  };

  private armRetry(stepId: string, attempt: number, dueAt: string): void {
    this.later(Date.parse(dueAt), () => void this.record('step.retry_due', { stepId, attempt }));
  }

  private armTimeout(at: string, timeoutMs: number): void {
    this.later(Date.parse(at), () => {
      if (this.actor.snapshot.status !== 'done' && !this.context.timedOut) void this.record('wfrun.timed_out', { timeoutMs });
    });
  }

  /** The step's rendered environment: the spec's env, the step's, and loops' own variables. */
  private stepEnv(c: WorkflowRunContext, step: StepSpec, attempt: number): Record<string, string> {
    const values = { steps: stepViews(c.steps), inputs: c.inputs };
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(c.spec!.env)) env[k] = renderTemplate(v, values);
    for (const [k, v] of Object.entries(step.target.env)) env[k] = renderTemplate(v, values);
    return Object.assign(env, loopsEnv(c, step, attempt, join(this.stepDir(step.id, attempt), 'output'), this.loopRun(c)));
  }

  private loopRunRow: LoopRunOfWorkflow | null | undefined;
  /**
   * The loop run this workflow run is the run of (a workflow loop's), from the read side: its
   * (loop, slot, attempt) names exactly one. Null for a run started by hand.
   */
  private loopRun(c: WorkflowRunContext): LoopRunOfWorkflow | null {
    if (this.loopRunRow !== undefined) return this.loopRunRow;
    if (!c.loopId || !c.slot) return (this.loopRunRow = null);
    const row = this.runtime.db
      .prepare('SELECT id, loop_name AS loopName, scheduled_for AS scheduledFor FROM loop_runs WHERE loop_id = ? AND slot = ? AND attempt = ?')
      .get(c.loopId, c.slot, c.attempt) as LoopRunOfWorkflow | undefined;
    return (this.loopRunRow = row ?? null);
  }

  /** The intent for one attempt of a step: its command line with the outputs of earlier steps substituted. */
  private spawnRequest(c: WorkflowRunContext, stepId: string, attempt: number): EventData<'step.spawn_requested'> {
    const step = c.spec!.steps.find((s) => s.id === stepId)!;
    const values = { steps: stepViews(c.steps), inputs: c.inputs };
    const render = (text: string) => renderTemplate(text, values);
    const target = step.target;
    const envKeys = Object.keys(this.stepEnv(c, step, attempt)).sort();
    const cwd = target.cwd === null ? null : render(target.cwd);
    if (target.type !== 'command') {
      // The adapter's argv (the prompt, with outputs substituted, goes on stdin); a problem becomes
      // the step's spawn failure.
      const key = `${stepId}#${attempt}`;
      try {
        if (!isProviderId(target.provider)) throw new Error(`unknown provider ${JSON.stringify(target.provider)}`);
        // prompt-file and extra-args take templates too (docs/workflows.md): each value one path, one argument.
        const prompt = render(target.prompt ?? readFileSync(render(target.promptFile!), 'utf8'));
        const loopTarget: LoopAgentTarget = {
          kind: 'agent',
          provider: target.provider,
          prompt,
          promptFile: null,
          model: target.model,
          agent: target.agent,
          cwd,
          env: {},
          permissionMode: target.permissionMode,
          extraArgs: target.extraArgs.map(render),
          configIsolation: target.configIsolation,
          account: target.account,
          ...(target.accountTool !== undefined ? { accountTool: target.accountTool } : {}),
          maxTurns: target.maxTurns,
          maxCostUsd: target.maxCostUsd,
          idleTimeoutMs: target.idleTimeoutMs,
        };
        const prepared = prepareAgent(this.runtime.dataDir, this.stepDir(stepId, attempt), loopTarget);
        this.agents.set(key, { target: loopTarget, prepared });
        return {
          stepId,
          attempt,
          command: prepared.invocation.command,
          args: prepared.invocation.args,
          shell: false,
          cwd,
          envKeys: [...new Set([...envKeys, ...Object.keys(prepared.env)])].sort(),
          timeoutAt: step.timeoutMs === null ? null : new Date(this.runtime.clock.now() + step.timeoutMs).toISOString(),
        };
      } catch (error) {
        this.agents.set(key, { error: (error as Error).message });
        return { stepId, attempt, command: target.provider, args: [], shell: false, cwd, envKeys, timeoutAt: null };
      }
    }
    return {
      stepId,
      attempt,
      command: target.shell ? target.command : render(target.command),
      args: target.args.map(render),
      shell: target.shell,
      cwd,
      envKeys,
      timeoutAt: step.timeoutMs === null ? null : new Date(this.runtime.clock.now() + step.timeoutMs).toISOString(),
    };
  }

  /** The agent provider of a step, when it is an agent step. */
  private providerOf(stepId: string): ProviderId | null {
    const target = this.context.spec!.steps.find((s) => s.id === stepId)?.target;
    return target && target.type !== 'command' && isProviderId(target.provider) ? target.provider : null;
  }

  /** Starts the process of a step whose intent is recorded: the same preparation and executor as a run's. */
  private async spawnStep(request: EventData<'step.spawn_requested'>): Promise<void> {
    const { stepId, attempt } = request;
    const c = this.context;
    const step = c.spec!.steps.find((s) => s.id === stepId)!;
    const dir = this.stepDir(stepId, attempt);
    let agent: { target: LoopAgentTarget; prepared: PreparedAgent } | { error: string } | null = null;
    if (step.target.type !== 'command') {
      agent = this.agents.get(`${stepId}#${attempt}`) ?? { error: 'the agent step could not be prepared' };
      this.agents.delete(`${stepId}#${attempt}`);
      // Not prepared (its prompt-file unreadable, …): a spawn failure saying why — the target below
      // would otherwise be the bare CLI with no arguments and no prompt.
      if ('error' in agent) {
        await this.record('step.spawn_failed', { stepId, attempt, error: agent.error, code: 'EINVAL' });
        return;
      }
    }
    const argv = { command: request.command, args: request.args, shell: request.shell, cwd: request.cwd };
    const prepared = await prepareSpawn(this.runtime, {
      target:
        agent && 'target' in agent
          ? agent.target
          : {
              kind: 'command',
              ...argv,
              env: {},
              // A command step's account (its profile's variables, LOOPS_ACCOUNT_*, nothing inherited of another).
              ...(step.target.type === 'command' && step.target.account !== undefined ? { account: step.target.account, accountTool: step.target.accountTool! } : {}),
            },
      agent,
      argv,
      // The spec's `secrets:` come from this runner's environment (never from the log) and are masked.
      secretNames: c.spec!.secrets,
      env: this.stepEnv(c, step, attempt),
      dir,
      // The deadline recorded in the step's intent: the only timeout the executor knows.
      deadline: recordedDeadline(request.timeoutAt, step.timeoutMs),
      killGraceMs: null,
      ...(this.options.tailBytes !== undefined ? { tailBytes: this.options.tailBytes } : {}),
    });
    if (!prepared.ok) {
      await this.record('step.spawn_failed', { stepId, attempt, error: prepared.error, code: prepared.code });
      return;
    }
    let handle: ProcessHandle;
    faultPoint('after-append-before-spawn');
    try {
      handle = await spawnProcess(prepared.spec, this.runtime.clock, this.runtime.spawner);
    } catch (error) {
      if (error instanceof SpawnFailedError) {
        await this.record('step.spawn_failed', { stepId, attempt, error: error.message, code: error.code });
        return;
      }
      throw error;
    }
    this.handles.set(stepId, handle);
    faultPoint('after-spawn-before-record');
    this.recordSoon('step.spawned', { stepId, attempt, pid: handle.pid, pgid: handle.pgid, startTime: handle.startTime, bootId: handle.bootId, env: handle.env, cwd: handle.cwd });
    // Cancelled (or timed out) while it was starting: stop it now — unless it is a step that
    // starts because the run is stopping (always() / cancelled()).
    const now = this.context;
    if ((now.cancelRequested || now.timedOut) && !stepOf(now, stepId)!.afterStop) handle.cancel(now.cancelReason ?? 'workflow stopping');
    void handle.exited.then((exit) => {
      faultPoint('after-exit-before-record');
      this.handles.delete(stepId);
      const report = agentEnd(prepared);
      this.recordSoon('step.exited', {
        stepId,
        attempt,
        ...withAgentError(exit, report),
        outputs: this.outputsOf(stepId, attempt),
        ...(report ? { agent: report } : {}),
      } satisfies EventData<'step.exited'>);
    });
  }

  /** Records the end of a step attempt whose process ended while nobody watched, from its files. */
  private async recordFromFiles(stepId: string, attempt: number, startedAt: string | null, how: string): Promise<boolean> {
    // Its runner may have died between the step's exit and the SIGKILL of what it left behind.
    await stopLeftovers(stepOf(this.context, stepId)?.pid ?? null, this.runtime.clock);
    const dir = this.stepDir(stepId, attempt);
    const found = exitFromFiles(dir, { secrets: this.secrets(this.context.spec!.secrets), startedAt, provider: this.providerOf(stepId), how });
    if (!found) return false;
    await this.record('step.exited', {
      stepId,
      attempt,
      ...found.exit,
      outputs: this.outputsOf(stepId, attempt),
      ...(found.agent ? { agent: found.agent } : {}),
    } satisfies EventData<'step.exited'>);
    return true;
  }

  /** The deadline a step attempt's intent recorded (read back from the log, for an adopted step). */
  private async recordedStepDeadline(stepId: string, attempt: number): Promise<Deadline | null> {
    const intent = (await this.runtime.log.readStream(this.streamId)).findLast((e) => e.type === 'step.spawn_requested' && (e.data as EventData<'step.spawn_requested'>).stepId === stepId && (e.data as EventData<'step.spawn_requested'>).attempt === attempt);
    const timeoutMs = this.context.spec!.steps.find((s) => s.id === stepId)?.timeoutMs ?? null;
    return intent ? recordedDeadline((intent.data as EventData<'step.spawn_requested'>).timeoutAt, timeoutMs) : null;
  }

  /**
   * Watches a step process this runner did not start until it ends — with its recorded deadline
   * enforced and cancel through the same terminate routine as a step started here — then records
   * its end from its files.
   */
  private async adopt(stepId: string, attempt: number, identity: ProcessIdentity, startedAt: string | null): Promise<void> {
    const deadline = await this.recordedStepDeadline(stepId, attempt);
    const watched = adoptProcess(this.runtime.clock, {
      identity,
      dir: this.stepDir(stepId, attempt),
      deadline,
      killGraceMs: null,
      secrets: this.secrets(this.context.spec!.secrets),
      startedAt,
      provider: this.providerOf(stepId),
      how: `recorded from its exit-status file; adopted by runner ${this.runtime.runnerId}`,
    });
    this.handles.set(stepId, { cancel: (reason) => watched.cancel(reason ?? this.context.cancelReason ?? 'workflow stopping') });
    void watched.ended.then((end) => {
      this.handles.delete(stepId);
      if (this.actor.snapshot.status === 'done') return;
      if (end.kind === 'exited') {
        return this.record('step.exited', {
          stepId,
          attempt,
          ...end.end.exit,
          outputs: end.end.exit.cancelled || end.end.exit.timedOut ? {} : this.outputsOf(stepId, attempt),
          ...(end.end.agent ? { agent: end.end.agent } : {}),
        } satisfies EventData<'step.exited'>);
      }
      return this.record('step.abandoned', { stepId, attempt, reason: end.reason });
    });
  }

  private watchAndWait(): Promise<WorkflowRunView> {
    this.lease.keepAlive();
    const unwatch = watchCancel(this.runtime, this.streamId, () => {
      const before = this.context.cancelRequested;
      void this.actor.refreshOrFail().then(() => {
        // A request from another process: stop the running steps now.
        if (!before && this.context.cancelRequested) for (const h of this.handles.values()) h.cancel(this.context.cancelReason ?? 'cancelled');
      });
    });
    const { signal } = this.options;
    const onAbort = () => {
      if (this.actor.snapshot.status === 'done' || this.context.cancelRequested) return;
      const reason: unknown = signal?.reason;
      void this.record('wfrun.cancel_requested', { reason: typeof reason === 'string' ? reason : null });
    };
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    return this.actor.done.then(
      () => this.cleanup(unwatch, onAbort),
      (error: unknown) => {
        this.cleanup(unwatch, onAbort);
        throw error;
      },
    );
  }

  private cleanup(unwatch: () => void, onAbort: () => void): WorkflowRunView {
    unwatch();
    this.lease.stop();
    this.sub?.unsubscribe();
    for (const t of this.timers) this.runtime.clock.clearTimeout(t);
    this.timers.clear();
    this.options.signal?.removeEventListener('abort', onAbort);
    return findWorkflowRun(this.runtime.db, this.wfRunId);
  }

  private sub: { unsubscribe(): void } | null = null;

  private subscribe(): void {
    const { onEvent } = this.options;
    if (!onEvent) return;
    this.sub = this.runtime.log.events$.subscribe((e) => {
      if (e.streamId === this.streamId) onEvent(e, this.context);
    });
  }

  async start(pinned: { workflowId: string; workflowName: string; version: number; spec: WorkflowSpec; inputs: Record<string, string> }): Promise<WorkflowRunView> {
    const { runtime, options } = this;
    const { db, clock } = runtime;
    this.actor = DurableActor.create(runtime, this.streamId, 'wfrun', currentMachines.workflowRun, this.effects);
    this.subscribe();
    const started: EventData<'wfrun.started'> = {
      wfRunId: this.wfRunId,
      workflowId: pinned.workflowId,
      workflowName: pinned.workflowName,
      version: pinned.version,
      spec: pinned.spec,
      inputs: pinned.inputs,
      trigger: options.trigger ?? 'manual',
      loopId: options.loopId ?? null,
      slot: options.slot ?? null,
      attempt: options.attempt ?? 1,
      idempotencyKey: options.idempotencyKey ?? `manual:${this.wfRunId}`,
      runnerId: runtime.runnerId,
      // A new run's lease starts at token 1, taken in the start's own transaction.
      leaseToken: 1,
      // Its skips and retries are recorded as events (step.skipped, step.retry_scheduled).
      decisions: 'recorded',
      ...(options.fork ? { forkedFrom: options.fork.forkedFrom, reuse: Object.keys(options.fork.reused) } : {}),
    };
    try {
      const { withStart } = options;
      if (withStart) {
        await runtime.log.batch(async (batch) => {
          await this.actor.record('wfrun.started', started, { ...this.lease.takeNew(), batch });
          await withStart(batch);
        });
      } else await this.actor.record('wfrun.started', started, this.lease.takeNew());
    } catch (error) {
      this.sub?.unsubscribe();
      if (uniqueViolation(error)?.includes('idempotency_key')) {
        const existing = db.prepare('SELECT id FROM workflow_runs WHERE idempotency_key = ?').get(started.idempotencyKey) as { id: string } | undefined;
        if (existing) return findWorkflowRun(db, existing.id);
      }
      throw error;
    }
    options.onStarted?.(this.wfRunId);
    return this.watchAndWait();
  }

  async resume(): Promise<WorkflowRunView> {
    const { runtime } = this;
    const { db, clock } = runtime;
    this.actor = await DurableActor.load(runtime, this.streamId, this.effects, currentMachines.workflowRun);
    if (this.actor.snapshot.status === 'done') return findWorkflowRun(db, this.wfRunId);
    // Take the run over: only when its lease ran out (its runner is gone) or is ours.
    const now = clock.now();
    const held = await runtime.leases.get(this.streamId);
    if (held && held.holder !== runtime.runnerId && held.expiresAt > now) {
      throw new LoopsError('conflict', `workflow run ${this.wfRunId} is running in ${held.holder} (its lease is renewed until ${new Date(held.expiresAt).toISOString()})`, {
        hint: 'it does not need resuming; loops workflows cancel stops it',
        retryable: true,
      });
    }
    await this.lease.takeOver();
    this.subscribe();
    this.options.onStarted?.(this.wfRunId);
    const c = this.context;
    if (c.spec!.timeoutMs !== null && !c.timedOut) {
      this.armTimeout(new Date(Date.parse(c.startedAt!) + c.spec!.timeoutMs).toISOString(), c.spec!.timeoutMs);
    }
    // Decide from the state as recovered: steps planned by what is recorded below start through
    // the machine's own startSteps effect, not a second time here.
    const recovered = c;
    for (const step of c.spec!.steps) {
      const s = stepOf(recovered, step.id)!;
      if ((this.actor.snapshot.status as string) === 'done') break;
      switch (s.status) {
        case 'starting':
          // Planned, intent never recorded: it never started. Its intent now, then its spawn.
          if (stepOf(this.context, step.id)!.status === 'starting') await this.record('step.spawn_requested', this.spawnRequest(this.context, step.id, s.attempt));
          break;
        case 'skipping':
          // Decided by an event appended without the runner's effects (a cancel from another process), not yet recorded.
          if (stepOf(this.context, step.id)!.status === 'skipping') await this.record('step.skipped', { stepId: step.id, reason: s.reason ?? 'skipped' });
          break;
        case 'retrying':
          if (s.retryAt !== null) this.armRetry(step.id, s.attempt + 1, s.retryAt);
          // A retry decided but not recorded: recording it arms it (armRetry).
          else if (s.pendingRetry && stepOf(this.context, step.id)!.retryAt === null) await this.record('step.retry_scheduled', { stepId: step.id, ...s.pendingRetry });
          break;
        case 'spawning':
        case 'running': {
          let identity: ProcessIdentity | null = s.pid === null ? null : { pid: s.pid, startTime: s.startTime, bootId: s.bootId };
          if (identity === null) {
            // Its runner died after the fork, before it recorded the pid: find the process by its
            // wrapper's argv, record it, and adopt it rather than lose track of it.
            identity = findRunProcess(join(this.stepDir(step.id, s.attempt), 'exit-status'));
            if (identity) await this.record('step.spawned', { stepId: step.id, attempt: s.attempt, pid: identity.pid, pgid: identity.pid, startTime: identity.startTime, bootId: identity.bootId });
          }
          // Adopted only when its identity is confirmed: a live pid that cannot be told from another
          // process's (no start time recorded, another boot) is never adopted nor signalled.
          const os = identity === null ? null : processState(identity);
          if (identity !== null && os?.state === 'running') {
            await this.adopt(step.id, s.attempt, identity, s.startedAt);
            if (this.context.cancelRequested || this.context.timedOut) this.handles.get(step.id)!.cancel(this.context.cancelReason);
          } else if (!(await this.recordFromFiles(step.id, s.attempt, s.startedAt, 'recorded from its exit-status file after its runner stopped'))) {
            await this.record('step.abandoned', {
              stepId: step.id,
              attempt: s.attempt,
              reason:
                s.pid === null
                  ? 'its runner stopped between recording the intent and the spawn; nothing is known of the process'
                  : os?.state === 'unconfirmed'
                    ? `its runner stopped and its process identity could not be confirmed (${os.reason}): pid ${s.pid} is alive but may be another process, so it was not signalled; its exit status is unknown`
                    : `its runner stopped and its process (pid ${s.pid}) is gone without an exit status`,
            });
          }
          break;
        }
        default:
          break;
      }
    }
    return this.watchAndWait();
  }
}

interface LoopRunOfWorkflow {
  id: string;
  loopName: string;
  scheduledFor: string;
}

/**
 * The environment every step gets from loops. A step of a workflow loop's run also gets the loop
 * run's variables, as a command loop's run does (and as the predecessor gave them): LOOPS_LOOP_ID,
 * LOOPS_LOOP_NAME, LOOPS_RUN_ID (the loop run's id) and LOOPS_SCHEDULED_FOR (its instant, ISO-8601).
 */
function loopsEnv(c: WorkflowRunContext, step: StepSpec, attempt: number, outputFile: string, loopRun: LoopRunOfWorkflow | null): Record<string, string> {
  return {
    LOOPS_WORKFLOW_ID: c.workflowId ?? '',
    LOOPS_WORKFLOW_NAME: c.workflowName ?? '',
    LOOPS_WORKFLOW_RUN_ID: c.wfRunId ?? '',
    LOOPS_WORKFLOW_STEP_ID: step.id,
    LOOPS_WORKFLOW_VERSION: String(c.version ?? ''),
    LOOPS_ATTEMPT: String(attempt),
    LOOPS_OUTPUT: outputFile,
    LOOPS_IDEMPOTENCY_KEY: c.idempotencyKey ?? '',
    ...(c.loopId ? { LOOPS_LOOP_ID: c.loopId } : {}),
    ...(loopRun ? { LOOPS_LOOP_NAME: loopRun.loopName, LOOPS_RUN_ID: loopRun.id, LOOPS_SCHEDULED_FOR: loopRun.scheduledFor } : c.slot ? { LOOPS_SCHEDULED_FOR: c.slot } : {}),
  };
}


/**
 * A workflow loop's run whose runner stopped while its workflow run went on (the daemon finds it
 * in recovery): takes over the loop run's lease, resumes the workflow run — or starts it, when the
 * runner stopped between recording it and starting it — and records the loop run's end as the
 * workflow run ends. Returns the loop run's final status.
 */
export async function recoverWorkflowLoopRun(runtime: Runtime, runId: string, options: { leaseTtlMs?: number; signal?: AbortSignal } = {}): Promise<string> {
  const { db } = runtime;
  const streamId = `run:${runId}`;
  const actor = await DurableActor.load(runtime, streamId, {}, currentMachines.run);
  const context = actor.context;
  const started = (await runtime.log.readStream(streamId)).find((e) => e.type === 'run.workflow_started');
  if (!started || actor.snapshot.status === 'done') return actor.state;
  const { wfRunId, idempotencyKey, workflowId } = started.data as EventData<'run.workflow_started'>;
  // The loop run's lease, taken over from the runner that is gone and kept while the workflow runs.
  const lease = new HeldLease(runtime, streamId, options.leaseTtlMs ?? DEFAULT_TTL);
  await lease.takeOver();
  lease.keepAlive();
  let ended: EventData<'run.workflow_ended'>;
  try {
    const view = (await runtime.log.streamInfo(`wfrun:${wfRunId}`))
      ? await resumeWorkflowRun(runtime, wfRunId, options.signal ? { signal: options.signal } : {})
      : await (async () => {
          const workflow = findWorkflowRecord(db, workflowId);
          const { spec } = workflowVersion(db, workflow.id, workflow.version);
          return executeWorkflowRun(
            runtime,
            { workflowId: workflow.id, workflowName: workflow.name, version: workflow.version, spec, inputs: resolveInputs(spec, {}) },
            {
              wfRunId,
              idempotencyKey,
              trigger: context.trigger ?? 'schedule',
              loopId: context.loopId,
              slot: context.slot,
              attempt: context.attempt,
              ...(options.signal ? { signal: options.signal } : {}),
            },
          );
        })();
    const ends = ['succeeded', 'failed', 'cancelled', 'timed_out'] as const;
    ended = { wfRunId, status: ends.find((x) => x === view.status) ?? 'failed', error: view.error };
  } catch (error) {
    ended = { wfRunId, status: 'failed', error: `the workflow run could not be resumed: ${(error as Error).message}` };
  } finally {
    lease.stop();
  }
  await actor.record('run.workflow_ended', ended, lease.fence());
  return actor.state;
}
