/**
 * Running a loop now, in this process: claim a run under a lease, record the intent, spawn,
 * record the process identity, wait, record the outcome (fenced by the lease), release.
 * Every step is an event appended before the effect it causes.
 */
import type { AnyMachineSnapshot } from 'xstate';
import { join } from 'node:path';
import type { EventData } from '../../events/catalog.js';
import { ClaimLostError, ConcurrencyConflictError, InvalidTransitionError, LoopsError } from '../../events/errors.js';
import { currentMachines } from '../../machines/registry.js';
import type { RunContext } from '../../machines/run.js';
import { DurableActor, type Effects } from '../actor.js';
import { agentSink, cliVersion, prepareAgent, reportFrom, type PreparedAgent } from '../agents/run.js';
import { resolveAccountEnv } from '../agents/accounts.js';
import { AgentOutputParser, AUTH_ENV_VARS, PROVIDERS } from '../agents/index.js';
import { runSecrets } from './run-secrets.js';
import { SecretMasker } from './secrets.js';
import { watchCancel } from './cancel.js';
import type { TimerHandle } from '../clock.js';
import { SpawnFailedError, spawnProcess, type ProcessHandle } from './executor.js';
import { newId } from '../ids.js';
import { assertLeaseHeld, holdRunnerLease, releaseLease, renewLease, takeLease, type Lease } from '../leases.js';
import { runDir } from '../paths.js';
import { findLoop, findRun, type LoopView, type RunView } from '../queries/loops.js';
import type { Runtime } from '../runtime.js';
import { stillQueued } from '../daemon/run-queue.js';
import { afterScheduledRun, decideLoop } from '../loops/decisions.js';
import { findWorkflow, workflowVersion } from '../queries/workflows.js';
import { executeWorkflowRun, resolveInputs } from '../workflows/runner.js';

export interface RunNowOptions {
  /** Live output of the process. */
  onOutput?: (stream: 'stdout' | 'stderr', chunk: Buffer) => void;
  /** Called once the run is claimed, with its id. */
  onClaimed?: (runId: string) => void;
  /** Aborting cancels the run: its process group is killed and the run recorded `cancelled`. */
  signal?: AbortSignal;
  /** Lease time-to-live (default 30 s); renewed every third of it while the run executes. */
  leaseTtlMs?: number;
  /** Bytes of stdout/stderr kept in the run's events (default 64 KiB each). */
  tailBytes?: number;
}

export const DEFAULT_LEASE_TTL_MS = 30_000;

export async function runNow(runtime: Runtime, idOrName: string, options: RunNowOptions = {}): Promise<RunView> {
  const loop = findLoop(runtime.db, idOrName);
  if (loop.status === 'archived' || loop.status === 'expired') {
    throw new InvalidTransitionError(`loop ${loop.name} is ${loop.status} and cannot run`, {
      hint: `${loop.status} loops keep their history only; create a new loop to run this again`,
    });
  }
  const now = runtime.clock.now();
  // A loop that is due: run-now takes the due slot — decided and recorded like any pass (a daemon
  // or tick racing for it loses the compare-and-set), so the slot never gets two runs — and claims
  // what fired like any pass (a runner that claims one of them first runs it instead).
  if (loop.status === 'active' && loop.nextRunAt !== null && Date.parse(loop.nextRunAt) <= now) {
    const { fired } = runtime.log.batch(() => {
      holdRunnerLease(runtime);
      return decideLoop(runtime, loop.id, now);
    });
    let last: RunView | null = null;
    for (const f of fired) {
      try {
        last = await executeRun(runtime, loop, { runId: f.runId, slot: f.slot, scheduledFor: f.fireAt, trigger: 'schedule', queued: true, ...options });
      } catch (error) {
        if (!(error instanceof ClaimLostError)) throw error;
      }
    }
    if (last) return last;
  }
  // Otherwise (not due, paused, stopped, or its due slot was skipped for overlap): an ad-hoc slot
  // of its own, which never touches the schedule.
  const runId = newId('run', now);
  return executeRun(runtime, loop, {
    runId,
    slot: `manual:${runId}`,
    scheduledFor: new Date(now).toISOString(),
    trigger: 'manual',
    ...options,
  });
}

export interface ExecuteRunOptions extends RunNowOptions {
  runId: string;
  /** The slot this run executes: a scheduled instant, or `manual:<runId>`. */
  slot: string;
  scheduledFor: string;
  trigger: 'manual' | 'schedule';
  /** Attempt number within the slot (default 1). */
  attempt?: number;
  /**
   * The run is queued work (a fired or buffered slot, a scheduled retry): the claim checks, in its
   * transaction, that nobody claimed or dropped it first, and fails with a conflict if so.
   */
  queued?: boolean;
}

/**
 * Executes one run of `loop` in this process: claim under a lease, record the intent, spawn,
 * record the process, wait, record the outcome (fenced), release; then, for a scheduled run, what
 * follows its end (a retry by the loop's policy, a fixed-delay loop's next due time). Used by
 * run-now and the pass. The claim is made synchronously, before the first await: a claim that
 * loses to another runner rejects with a `ConcurrencyConflictError` and records nothing.
 */
export async function executeRun(runtime: Runtime, loop: LoopView, options: ExecuteRunOptions): Promise<RunView> {
  const { db, clock } = runtime;
  const now = clock.now();
  const runId = options.runId;
  const streamId = `run:${runId}`;
  const ttl = options.leaseTtlMs ?? loop.policies.leaseMs ?? DEFAULT_LEASE_TTL_MS;
  // A new run id has no lease yet, so the claim takes fencing token 1; the lease is taken in the
  // same transaction as run.claimed and released in the one that records the run's end.
  let lease: Lease = { name: streamId, holder: runtime.runnerId, token: 1, expiresAt: now + ttl };
  const fenced = {
    precondition: (next: AnyMachineSnapshot) => {
      assertLeaseHeld(db, lease, clock.now());
      if (next.status === 'done') releaseLease(db, lease);
    },
    meta: { leaseToken: lease.token },
    // A cancel request appended by another process moved the stream on: catch up, record again.
    retryOnConflict: true,
  };

  let heartbeat: TimerHandle | null = null;
  const beat = () => {
    heartbeat = clock.setTimeout(() => {
      try {
        lease = renewLease(db, lease, ttl, clock.now());
        beat();
      } catch {
        heartbeat = null; // lost: the fenced outcome append will refuse and report it
      }
    }, Math.max(1, Math.floor(ttl / 3)));
  };
  const stopHeartbeat = () => {
    if (heartbeat !== null) clock.clearTimeout(heartbeat);
    heartbeat = null;
  };

  let handle: ProcessHandle | null = null;
  let workflowAbort: AbortController | null = null;
  let agent: PreparedAgent | null = null;
  let agentError: string | null = null;
  const files = runDir(runtime.dataDir, runId);
  const effects: Effects = {
    // Recorded in the same transaction as run.claimed: the intent is in the log before the spawn.
    requestSpawn: {
      inline: (_params, snapshot, at) => {
        if (options.signal?.aborted) return null; // cancelled before it started: record no intent
        const target = loop.target;
        const context = snapshot.context as RunContext;
        if (target.kind === 'workflow') {
          // The loop run is a workflow run: its id and idempotency key are recorded before it starts.
          const started: EventData<'run.workflow_started'> = {
            wfRunId: newId('wfrun', clock.now()),
            workflowId: target.workflowId,
            idempotencyKey: `loop:${context.loopId}:${context.slot}:${context.attempt}`,
          };
          return { type: 'run.workflow_started', data: started };
        }
        const timeoutMs = loop.policies.timeoutMs;
        // From the instant the intent is recorded at, exactly.
        const timeoutAt = timeoutMs === null ? null : new Date(Date.parse(at) + timeoutMs).toISOString();
        if (target.kind === 'agent') {
          // The adapter's argv (the prompt is not in it where the CLI has another channel); a
          // problem (an unreadable prompt file, a bad flag value) becomes the spawn's failure.
          try {
            agent = prepareAgent(runtime.dataDir, files, target);
          } catch (error) {
            agentError = (error as Error).message;
          }
          const data: EventData<'process.spawn_requested'> = {
            command: agent?.invocation.command ?? PROVIDERS[target.provider].binary,
            args: agent?.invocation.args ?? [],
            shell: false,
            cwd: target.cwd,
            envKeys: Object.keys({ ...(agent?.env ?? {}), ...runEnv(context) }).sort(),
            timeoutAt,
          };
          return { type: 'process.spawn_requested', data };
        }
        const data: EventData<'process.spawn_requested'> = {
          command: target.command,
          args: target.args,
          shell: target.shell,
          cwd: target.cwd,
          envKeys: Object.keys(runEnv(snapshot.context as RunContext)).sort(),
          timeoutAt,
        };
        return { type: 'process.spawn_requested', data };
      },
    },
    startWorkflow: async (params: EventData<'run.workflow_started'>) => {
      const context = actor.snapshot.context as RunContext;
      const controller = (workflowAbort = new AbortController());
      if (context.cancelRequested) controller.abort(cancelReason(actor) ?? 'cancelled');
      let ended: EventData<'run.workflow_ended'>;
      try {
        const workflow = findWorkflow(db, params.workflowId);
        const { spec } = workflowVersion(db, workflow.id, workflow.version);
        const run = await executeWorkflowRun(
          runtime,
          { workflowId: workflow.id, workflowName: workflow.name, version: workflow.version, spec, inputs: resolveInputs(spec, {}) },
          {
            wfRunId: params.wfRunId,
            idempotencyKey: params.idempotencyKey,
            trigger: context.trigger ?? 'schedule',
            loopId: context.loopId,
            slot: context.slot,
            attempt: context.attempt,
            signal: controller.signal,
            ...(options.tailBytes !== undefined ? { tailBytes: options.tailBytes } : {}),
          },
        );
        const ends = ['succeeded', 'failed', 'cancelled', 'timed_out'] as const;
        const status = ends.find((x) => x === run.status) ?? 'failed';
        ended = { wfRunId: params.wfRunId, status, error: run.error };
      } catch (error) {
        ended = { wfRunId: params.wfRunId, status: 'failed', error: `the workflow could not run: ${(error as Error).message}` };
      }
      actor.record('run.workflow_ended', ended, fenced);
    },
    spawn: async (_params, actor) => {
      if (actor.snapshot.value !== 'spawning') return;
      const target = loop.target;
      if (target.kind === 'workflow') return;
      if (target.kind === 'agent' && agent === null) {
        actor.record('process.spawn_failed', { error: agentError ?? 'the agent could not be prepared', code: 'EINVAL' }, fenced);
        return;
      }
      // Secrets come from this runner's environment, never from the log.
      const secretNames = target.secretEnv ?? [];
      const missing = secretNames.filter((n) => process.env[n] === undefined);
      if (missing.length) {
        actor.record(
          'process.spawn_failed',
          { error: `secret variable${missing.length > 1 ? 's' : ''} ${missing.join(', ')} not set in the environment of runner ${runtime.runnerId}`, code: 'ENOENT' },
          fenced,
        );
        return;
      }
      const secretEnv = Object.fromEntries(secretNames.map((n) => [n, process.env[n]!]));
      const parser = target.kind === 'agent' ? new AgentOutputParser(target.provider) : null;
      // An account: its credentials replace every inherited one; a profile that does not resolve
      // fails the run before the CLI starts.
      let accountEnv: Record<string, string> | null = null;
      if (target.kind === 'agent' && target.account !== null) {
        try {
          accountEnv = resolveAccountEnv(db, target.provider, target.account);
        } catch (error) {
          actor.record('process.spawn_failed', { error: (error as Error).message, code: 'EACCOUNT' }, fenced);
          return;
        }
      }
      const secrets = runSecrets(secretNames);
      const context = actor.snapshot.context as RunContext;
      try {
        handle = await spawnProcess(
          {
            ...(target.kind === 'agent'
              ? {
                  command: agent!.invocation.command,
                  args: agent!.invocation.args,
                  shell: false,
                  cwd: target.cwd,
                  env: { ...agent!.env, ...(accountEnv ?? {}), ...secretEnv, ...runEnv(context) },
                  ...(accountEnv ? { unsetEnv: AUTH_ENV_VARS } : {}),
                  ...(agent!.invocation.stdin !== null ? { stdin: agent!.invocation.stdin } : {}),
                  idleTimeoutMs: target.idleTimeoutMs,
                  stdoutSink: agentSink(parser!, target),
                }
              : { command: target.command, args: target.args, shell: target.shell, cwd: target.cwd, env: { ...secretEnv, ...runEnv(context) } }),
            secrets,
            timeoutMs: loop.policies.timeoutMs,
            killGraceMs: loop.policies.killGraceMs,
            ...(options.tailBytes !== undefined ? { tailBytes: options.tailBytes } : {}),
            stdoutFile: join(files, 'stdout.log'),
            statusFile: join(files, 'exit-status'),
            stderrFile: join(files, 'stderr.log'),
            ...(options.onOutput ? { onOutput: options.onOutput } : {}),
          },
          clock,
          runtime.spawner,
        );
      } catch (error) {
        if (error instanceof SpawnFailedError) {
          actor.record('process.spawn_failed', { error: error.message, code: error.code }, fenced);
          return;
        }
        throw error;
      }
      const started = handle;
      actor.record(
        'process.spawned',
        { pid: started.pid, pgid: started.pgid, startTime: started.startTime, bootId: started.bootId },
        fenced,
      );
      if ((actor.snapshot.context as RunContext).cancelRequested) started.cancel(cancelReason(actor));
      started.exited.then((exit) => {
        try {
          if (target.kind === 'agent') {
            // The agent's own account of the run goes into the transaction of its exit.
            const report = reportFrom(parser!, target.provider, cliVersion(target.provider));
            if (report.finalMessage !== null && secrets.length) report.finalMessage = new SecretMasker(secrets).mask(report.finalMessage);
            actor.recordAll(
              [
                { type: 'run.agent_reported', data: report },
                { type: 'process.exited', data: exit },
              ],
              fenced,
            );
          } else actor.record('process.exited', exit, fenced);
        } catch (error) {
          actor.fail(error);
        }
      });
    },
    killProcess: (params: { reason: string | null }) => {
      handle?.cancel(params.reason);
      workflowAbort?.abort(params.reason ?? 'cancelled');
    },
    // The lease row was released in the transaction that recorded the end.
    finalize: () => stopHeartbeat(),
  };

  const actor = DurableActor.create(runtime, streamId, 'run', currentMachines.run, effects);
  const claimed: EventData<'run.claimed'> = {
    runId,
    loopId: loop.id,
    loopName: loop.name,
    slot: options.slot,
    scheduledFor: options.scheduledFor,
    attempt: options.attempt ?? 1,
    trigger: options.trigger,
    target: loop.target,
    policies: loop.policies,
    runnerId: runtime.runnerId,
    leaseToken: lease.token,
  };
  try {
    actor.record('run.claimed', claimed, {
      ...fenced,
      retryOnConflict: false, // another claim of this run id is a lost race, not something to catch up with
      precondition: () => {
        if (options.queued) stillQueued(runtime, runId)();
        const taken = takeLease(db, streamId, runtime.runnerId, ttl, clock.now());
        if (taken.token !== lease.token) throw new ClaimLostError(runId, 'another runner holds its lease');
        lease = taken;
      },
    });
  } catch (error) {
    if (error instanceof ClaimLostError) throw error;
    if (error instanceof ConcurrencyConflictError) throw new ClaimLostError(runId, 'another runner claimed it first');
    if (error instanceof LoopsError && error.code === 'conflict') throw new ClaimLostError(runId, error.message);
    throw error;
  }
  beat();
  // Cancel requests from anywhere (loops cancel, overlap cancel-other) reach this runner here.
  const unwatch = watchCancel(runtime, streamId, () => {
    try {
      actor.refresh();
    } catch (error) {
      actor.fail(error);
    }
  });
  options.onClaimed?.(runId);

  const onAbort = () => {
    const reason = abortReason(options.signal);
    if (actor.snapshot.status === 'done' || (actor.snapshot.context as RunContext).cancelRequested) return;
    try {
      actor.record('run.cancel_requested', { reason }, fenced);
    } catch (error) {
      actor.fail(error);
    }
  };
  if (options.signal?.aborted) onAbort();
  else options.signal?.addEventListener('abort', onAbort, { once: true });

  try {
    await actor.done;
  } finally {
    stopHeartbeat();
    unwatch();
    options.signal?.removeEventListener('abort', onAbort);
  }
  const run = findRun(db, runId);
  if (options.trigger === 'schedule') afterScheduledRun(runtime, loop.id, run);
  return run;
}

function runEnv(context: RunContext): Record<string, string> {
  const target = context.target;
  return {
    ...(target?.kind === 'command' ? target.env : {}),
    LOOPS_LOOP_ID: context.loopId ?? '',
    LOOPS_LOOP_NAME: context.loopName ?? '',
    LOOPS_RUN_ID: context.runId ?? '',
    LOOPS_SCHEDULED_FOR: context.scheduledFor ?? '',
    LOOPS_ATTEMPT: String(context.attempt),
    // A slot + attempt is one run: a command can use this to make its own effects idempotent.
    LOOPS_IDEMPOTENCY_KEY: `loop:${context.loopId ?? ''}:${context.slot ?? ''}:${context.attempt}`,
  };
}

function abortReason(signal: AbortSignal | undefined): string | null {
  const reason: unknown = signal?.reason;
  if (typeof reason === 'string') return reason;
  if (reason instanceof Error && reason.name !== 'AbortError') return reason.message;
  return null;
}

function cancelReason(actor: DurableActor): string | null {
  const error = (actor.snapshot.context as RunContext).error;
  return error?.replace(/^cancelled(: ?)?/, '') || null;
}
