/**
 * An attempt, from claimed to recorded — the one path every run takes, whoever runs it (`run-now`,
 * `loops tick`, the daemon, recovery):
 *
 *   claim (lease taken in the claim's transaction) → intent (`process.spawn_requested`, with the
 *   absolute deadline) → spawn (inline or through the spawner helper) → `process.spawned` →
 *   deadline / cancel / idle / budget stops through the one terminate routine → `process.exited`
 *   (fenced by the lease, released with it) → what follows a scheduled run (retry, fixed delay).
 *
 * A run whose runner died joins the same path where it left it: `adoptRun` takes the lease over
 * (fencing the dead runner out), records `process.adopted`, watches the process with the same
 * recorded deadline and `--kill-grace`, and records its end the way a live run's is recorded;
 * `finishStaleRun` records the end of one whose process is already gone, from its files.
 *
 * A workflow step's attempt is made of the same pieces (workflows/runner.ts): `prepareSpawn`
 * (spawn-plan.ts), the executor, `adoptProcess` / `exitFromFiles` (process-watch.ts), `HeldLease`.
 */
import type { AnyMachineSnapshot } from 'xstate';
import type { Batch, StoredEvent } from '../../events/types.js';
import { join } from 'node:path';
import type { CommandTarget as LoopCommandTarget, EventData, ForkedFrom, LoopAgentTarget } from '../../events/catalog.js';
import { ClaimLostError, ConcurrencyConflictError, LoopsError } from '../../events/errors.js';
import { currentMachines } from '../../machines/registry.js';
import type { RunContext, runMachine } from '../../machines/run.js';
import { DurableActor, type Effects } from '../actor.js';
import { resolveAccountEnv } from '../agents/accounts.js';
import { AgentOutputParser, AUTH_ENV_VARS, PROVIDERS, isProviderId, type ProviderId } from '../agents/index.js';
import { agentSink, cliVersion, prepareAgent, reportFrom, withAgentError, type PreparedAgent } from '../agents/run.js';
import { agentEnd, prepareSpawn } from './spawn-plan.js';
import { newId } from '../ids.js';
import { HeldLease } from '../leases.js';
import { afterScheduledRun } from '../loops/decisions.js';
import { isHookSlot, requestNotices, tellRunEnded } from '../loops/notify.js';
import { runDir } from '../paths.js';
import { findRun, type LoopRecord, type RunView } from '../queries/loops.js';
import { findWorkflowRecord, workflowVersion } from '../queries/workflows.js';
import type { Runtime } from '../runtime.js';
import type { PinnedWorkflow, RunWorkflowOptions } from '../workflows/runner.js';
import { watchCancel } from './cancel.js';
import { recordedDeadline, SpawnFailedError, spawnProcess, type Deadline, type ExitInfo, type SpawnSpec } from './executor.js';
import { adoptProcess, exitFromFiles, type AdoptedProcess } from './process-watch.js';
import type { ProcessIdentity } from './process-info.js';
import { maskingSecrets } from './run-secrets.js';
import { SecretMasker } from './secrets.js';
import { faultPoint } from '../../events/faults.js';
import { stopLeftovers } from './terminate.js';

export const DEFAULT_LEASE_TTL_MS = 30_000;

// ── a loop run ─────────────────────────────────────────────────────────────────────────────────

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
  /**
   * Who the run's end is to be told (--on-failure, --notify-url): `deliver` (default) runs the hook
   * and POSTs before the run's promise resolves (run-now); `record` only records the notices, for
   * the caller to deliver (the Dispatcher: a loop's next run never waits for its notices).
   */
  notices?: 'deliver' | 'record';
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
  /** A fork or rerun (`loops fork`, `loops rerun`): recorded in its run.claimed. */
  forkedFrom?: ForkedFrom;
  /** Appends that belong with the claim, in its transaction (a fork's note on its parent's stream). */
  withClaim?: (batch: Batch) => Promise<unknown>;
  /** A workflow loop's fork: the workflow run is of this pinned spec version (not the latest), reusing these steps. */
  workflowRun?: { pinned: PinnedWorkflow; fork?: RunWorkflowOptions['fork'] };
}

/** The environment loops gives every run. */
function runEnv(context: RunContext): Record<string, string> {
  const target = context.target;
  const env = {
    ...(target?.kind === 'command' ? target.env : {}),
    LOOPS_LOOP_ID: context.loopId ?? '',
    LOOPS_LOOP_NAME: context.loopName ?? '',
    LOOPS_RUN_ID: context.runId ?? '',
    LOOPS_SCHEDULED_FOR: context.scheduledFor ?? '',
    LOOPS_ATTEMPT: String(context.attempt),
    // A slot + attempt is one run: a command can use this to make its own effects idempotent.
    LOOPS_IDEMPOTENCY_KEY: `loop:${context.loopId ?? ''}:${context.slot ?? ''}:${context.attempt}`,
  };
  // An --on-failure command's run: its LOOPS_* variables are the failed run's (recorded in its
  // target's env: LOOPS_RUN_ID is the failed run); its own id is LOOPS_HOOK_RUN_ID.
  if (isHookSlot(context.slot) && target?.kind === 'command') return { ...env, ...target.env, LOOPS_HOOK_RUN_ID: context.runId ?? '' };
  return env;
}

/**
 * What a run's runner does once the run is its own — claimed now, or taken over: keeps the lease,
 * passes cancel requests (from anywhere) and the caller's abort to the machine, waits for the end,
 * and then records what follows a scheduled run. The process side is the effects'.
 */
async function superviseRun(
  runtime: Runtime,
  actor: DurableActor<typeof runMachine>,
  lease: HeldLease,
  options: { signal?: AbortSignal; onClaimed?: (runId: string) => void; loopId: string; trigger: 'manual' | 'schedule' | null; notices?: 'deliver' | 'record' },
): Promise<RunView> {
  const runId = actor.streamId.slice('run:'.length);
  lease.keepAlive();
  // Cancel requests from anywhere (loops cancel, overlap cancel-other) reach this runner here.
  const unwatch = watchCancel(runtime, actor.streamId, () => void actor.refreshOrFail());
  options.onClaimed?.(runId);
  const onAbort = () => {
    const reason = abortReason(options.signal);
    if (actor.snapshot.status === 'done' || actor.context.cancelRequested) return;
    void actor.recordOrFail([{ type: 'run.cancel_requested', data: { reason } }], lease.fence());
  };
  if (options.signal?.aborted) onAbort();
  else options.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await actor.done;
  } finally {
    lease.stop();
    unwatch();
    options.signal?.removeEventListener('abort', onAbort);
  }
  const run = findRun(runtime.db, runId);
  const followUp = options.trigger === 'schedule' ? await afterScheduledRun(runtime, options.loopId, run) : [];
  // Who is to be told of this end (--on-failure, --notify-url): recorded, then told here or by the caller.
  if (options.notices === 'record') await requestNotices(runtime, run, followUp);
  else await tellRunEnded(runtime, run, followUp, (loop, o) => executeRun(runtime, loop, o), options.signal ? { signal: options.signal } : {});
  return run;
}

/** Records a process's end on the run: its agent report first, then its exit, in one transaction. */
function recordExit(actor: DurableActor<typeof runMachine>, lease: HeldLease, exit: ExitInfo, agent: EventData<'run.agent_reported'> | null): Promise<void> {
  faultPoint('after-exit-before-record');
  // The run's error says what the agent CLI reported (its API error, its turn limit), then how it exited.
  return actor.recordOrFail([...(agent ? [{ type: 'run.agent_reported', data: agent }] : []), { type: 'process.exited', data: withAgentError(exit, agent) }], lease.fence());
}

/**
 * Executes one run of `loop` in this process, claim to follow-up (see the module comment). A claim
 * that loses to another runner rejects with a `ClaimLostError` and records nothing.
 */
export async function executeRun(runtime: Runtime, loop: LoopRecord, options: ExecuteRunOptions): Promise<RunView> {
  const { db, clock } = runtime;
  const runId = options.runId;
  const streamId = `run:${runId}`;
  const lease = new HeldLease(runtime, streamId, options.leaseTtlMs ?? loop.policies.leaseMs ?? DEFAULT_LEASE_TTL_MS);
  let running: { cancel(reason: string | null): void } | null = null;
  let workflowAbort: AbortController | null = null;
  let agent: { prepared: PreparedAgent } | { error: string } | null = null;
  const dir = runDir(runtime.dataDir, runId);
  const effects: Effects<typeof runMachine> = {
    // Recorded in the same transaction as run.claimed: the intent is in the log before the spawn.
    requestSpawn: {
      inline: (_params, snapshot, at) => {
        if (options.signal?.aborted) return null; // cancelled before it started: record no intent
        const target = loop.target;
        const context = snapshot.context;
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
        // From the instant the intent is recorded at, exactly: the deadline every runner honours.
        const timeoutAt = timeoutMs === null ? null : new Date(Date.parse(at) + timeoutMs).toISOString();
        if (target.kind === 'agent') {
          // The adapter's argv (the prompt is not in it where the CLI has another channel); a
          // problem (an unreadable prompt file, a bad flag value) becomes the spawn's failure.
          try {
            agent = { prepared: prepareAgent(runtime.dataDir, dir, target) };
          } catch (error) {
            agent = { error: (error as Error).message };
          }
          const prepared = 'prepared' in agent ? agent.prepared : null;
          const data: EventData<'process.spawn_requested'> = {
            command: prepared?.invocation.command ?? PROVIDERS[target.provider].binary,
            args: prepared?.invocation.args ?? [],
            shell: false,
            cwd: target.cwd,
            envKeys: Object.keys({ ...(prepared?.env ?? {}), ...runEnv(context) }).sort(),
            timeoutAt,
          };
          return { type: 'process.spawn_requested', data };
        }
        const data: EventData<'process.spawn_requested'> = {
          command: target.command,
          args: target.args,
          shell: target.shell,
          cwd: target.cwd,
          envKeys: Object.keys(runEnv(context)).sort(),
          timeoutAt,
        };
        return { type: 'process.spawn_requested', data };
      },
    },
    startWorkflow: async (params: EventData<'run.workflow_started'>) => {
      const context = actor.context;
      const controller = (workflowAbort = new AbortController());
      if (context.cancelRequested) controller.abort(cancelReason(actor) ?? 'cancelled');
      let ended: EventData<'run.workflow_ended'>;
      try {
        // The workflow runner (and the workflow language) loads only for a workflow loop's run.
        const { executeWorkflowRun, resolveInputs } = await import('../workflows/runner.js');
        const pinned =
          options.workflowRun?.pinned ??
          (() => {
            const workflow = findWorkflowRecord(db, params.workflowId);
            const { spec } = workflowVersion(db, workflow.id, workflow.version);
            return { workflowId: workflow.id, workflowName: workflow.name, version: workflow.version, spec, inputs: resolveInputs(spec, {}) };
          })();
        const run = await executeWorkflowRun(
          runtime,
          pinned,
          {
            ...(options.workflowRun?.fork ? { fork: options.workflowRun.fork } : {}),
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
      await actor.record('run.workflow_ended', ended, lease.fence());
    },
    spawn: async (_params, actor) => {
      if (actor.snapshot.value !== 'spawning') return;
      const target = loop.target;
      if (target.kind === 'workflow') return;
      const context = actor.context;
      const prepared = await prepareSpawn(runtime, {
        target,
        agent,
        secretNames: target.secretEnv ?? [],
        secretRefs: target.secretRefs ?? [],
        env: runEnv(context),
        dir,
        // The deadline recorded in the intent: the only timeout the executor knows.
        deadline: recordedDeadline(context.timeoutAt, loop.policies.timeoutMs),
        killGraceMs: loop.policies.killGraceMs,
        ...(options.tailBytes !== undefined ? { tailBytes: options.tailBytes } : {}),
        ...(options.onOutput ? { onOutput: options.onOutput } : {}),
      });
      if (!prepared.ok) {
        await actor.record('process.spawn_failed', { error: prepared.error, code: prepared.code }, lease.fence());
        return;
      }
      let handle;
      faultPoint('after-append-before-spawn');
      try {
        handle = await spawnProcess(prepared.spec, clock, runtime.spawner);
      } catch (error) {
        if (error instanceof SpawnFailedError) {
          await actor.record('process.spawn_failed', { error: error.message, code: error.code }, lease.fence());
          return;
        }
        throw error;
      }
      running = handle;
      faultPoint('after-spawn-before-record');
      await actor.record('process.spawned', { pid: handle.pid, pgid: handle.pgid, startTime: handle.startTime, bootId: handle.bootId, env: handle.env, cwd: handle.cwd }, lease.fence());
      if (actor.context.cancelRequested) handle.cancel(cancelReason(actor));
      void handle.exited.then((exit) => recordExit(actor, lease, exit, agentEnd(prepared)));
    },
    killProcess: (params: { reason: string | null }) => {
      running?.cancel(params.reason);
      workflowAbort?.abort(params.reason ?? 'cancelled');
    },
    // The lease was released in the transaction that recorded the end.
    finalize: () => lease.stop(),
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
    // A new run's lease starts at token 1, taken in the claim's own transaction.
    leaseToken: 1,
    ...(options.forkedFrom ? { forkedFrom: options.forkedFrom } : {}),
  };
  try {
    // Another claim of this run id is a lost race, not something to catch up with (no retry).
    const claim = lease.takeNew(options.queued ? [{ kind: 'queued', runId }] : []);
    const { withClaim } = options;
    if (withClaim) {
      await runtime.log.batch(async (batch) => {
        await actor.record('run.claimed', claimed, { ...claim, batch });
        await withClaim(batch);
      });
    } else await actor.record('run.claimed', claimed, claim);
  } catch (error) {
    if (error instanceof ClaimLostError) throw error;
    if (error instanceof ConcurrencyConflictError) throw new ClaimLostError(runId, 'another runner claimed it first');
    if (error instanceof LoopsError && (error.code === 'conflict' || error.code === 'lease_lost')) throw new ClaimLostError(runId, error.message);
    throw error;
  }
  return superviseRun(runtime, actor, lease, {
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.onClaimed ? { onClaimed: options.onClaimed } : {}),
    ...(options.notices ? { notices: options.notices } : {}),
    loopId: loop.id,
    trigger: options.trigger,
  });
}

// ── a run whose runner is gone ─────────────────────────────────────────────────────────────────

export interface AdoptRunOptions {
  /** Aborting cancels the run (its process group stopped through the terminate routine). */
  signal?: AbortSignal;
  /**
   * Aborting stops watching and gives the lease back, leaving the process running for the next
   * runner to adopt (a daemon's graceful stop: it did not start it). `adoptRun` then resolves null.
   */
  release?: AbortSignal;
  leaseTtlMs?: number;
  /** How often the process is looked at (default 250 ms). */
  pollMs?: number;
  /** Called once the run is taken over (the lease is ours, `process.adopted` recorded). */
  onAdopted?: (runId: string, pid: number) => void;
}

/** The agent provider of a run's target, when it is an agent. */
function providerOf(context: RunContext): ProviderId | null {
  const t = context.target;
  return t?.kind === 'agent' && isProviderId(t.provider) ? t.provider : null;
}

/**
 * Takes over a run whose runner stopped while its process (`identity`, confirmed alive by the
 * caller) went on: the lease with a new token and `process.adopted` in one transaction, then the
 * same supervision as a live run — its recorded deadline and `--kill-grace` enforced, cancel
 * requests honoured through the same terminate routine — and its end recorded from its files.
 * Resolves with the run once it ended (null when released first).
 */
export async function adoptRun(runtime: Runtime, runId: string, identity: ProcessIdentity, options: AdoptRunOptions = {}): Promise<RunView | null> {
  const streamId = `run:${runId}`;
  let watched: AdoptedProcess | null = null;
  const lease = new HeldLease(runtime, streamId, options.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS);
  const actor = await DurableActor.load(
    runtime,
    streamId,
    {
      killProcess: (params) => watched?.cancel(params.reason),
      finalize: () => lease.stop(),
    },
    currentMachines.run,
  );
  const context = actor.context;
  if (actor.snapshot.status === 'done' || actor.state !== 'running') return findRun(runtime.db, runId);
  const previous = context.runnerId;
  // The lease first, with a new token (a runner holding it live refuses: one adopter only); then
  // the fact, fenced by it. A crash between the two leaves a lease that runs out: recovery again.
  await lease.takeOver();
  await actor.record(
    'process.adopted',
    { runnerId: runtime.runnerId, leaseToken: lease.token!, pid: identity.pid, reason: `its runner ${previous} stopped while its process went on` },
    lease.fence(),
  );
  options.onAdopted?.(runId, identity.pid);
  const secrets = await maskingSecrets(context.target, runtime.clock);
  watched = adoptProcess(runtime.clock, {
    identity,
    dir: runDir(runtime.dataDir, runId),
    deadline: recordedDeadline(context.timeoutAt, context.policies?.timeoutMs ?? null),
    killGraceMs: context.policies?.killGraceMs ?? null,
    secrets,
    startedAt: context.startedAt,
    provider: providerOf(context),
    how: `recorded from its exit-status file; adopted by runner ${runtime.runnerId} after runner ${previous} stopped`,
    ...(options.pollMs !== undefined ? { pollMs: options.pollMs } : {}),
  });
  if (context.cancelRequested) watched.cancel(cancelReason(actor));
  let released = false;
  const release = () => {
    released = true;
    watched?.release();
    void lease.release().catch(() => undefined); // best effort: it runs out by itself
    actor.fail(new Error('released'));
  };
  if (options.release?.aborted) release();
  else options.release?.addEventListener('abort', release, { once: true });
  void watched.ended.then((end) => {
    if (end.kind === 'exited') return recordExit(actor, lease, end.end.exit, end.end.agent);
    return actor.recordOrFail([{ type: 'run.abandoned', data: { reason: `runner ${previous} stopped; ${end.reason}` } }], lease.fence());
  });
  try {
    return await superviseRun(runtime, actor, lease, {
      ...(options.signal ? { signal: options.signal } : {}),
      // Adopted by a pass's Dispatcher, which delivers the notices.
      notices: 'record',
      loopId: context.loopId ?? '',
      trigger: context.trigger,
    });
  } catch (error) {
    if (released) return null;
    throw error;
  } finally {
    options.release?.removeEventListener('abort', release);
  }
}

/**
 * Records the end of a run whose runner is gone and whose process is gone too: its real outcome
 * from the files its exit-status wrapper left (with the output tails and an agent's report), or
 * `run.abandoned` — with the lease taken over in the same transaction (a new fencing token) — and
 * then what follows it (a retry, when the loop's policy allows one).
 */
export async function finishStaleRun(
  runtime: Runtime,
  runId: string,
  options: { leaseTtlMs?: number; unconfirmed?: string | null; elsewhere?: string } = {},
): Promise<{ outcome: 'exited' | 'abandoned'; run: RunView; followUp: StoredEvent[] }> {
  const actor = await DurableActor.load(runtime, `run:${runId}`, {}, currentMachines.run);
  if (actor.snapshot.status === 'done') return { outcome: 'exited', run: findRun(runtime.db, runId), followUp: [] };
  const context = actor.context;
  const lease = new HeldLease(runtime, `run:${runId}`, options.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS);
  const takeOver = lease.takeOverIn();
  const secrets = await maskingSecrets(context.target, runtime.clock);
  // Its runner may have died between the process's exit and the SIGKILL of what it left behind —
  // on this host: a process group of another host's run is that host's (here the same number
  // names an unrelated group, never signalled).
  if (options.elsewhere === undefined) await stopLeftovers(context.pid, runtime.clock, context.policies?.killGraceMs ?? undefined);
  const found = exitFromFiles(runDir(runtime.dataDir, runId), {
    secrets,
    startedAt: context.startedAt,
    provider: providerOf(context),
    how: `recorded from its exit-status file after runner ${context.runnerId} stopped`,
  });
  // A process started but never recorded (its runner died right after the fork) that has ended
  // since: its wrapper wrote its pid with its status, so it is recorded as spawned, then exited.
  const unrecorded =
    found !== null && context.pid === null && found.pid !== null && actor.state === 'spawning'
      ? [{ type: 'process.spawned', data: { pid: found.pid, pgid: found.pid, startTime: null, bootId: null } }]
      : [];
  let outcome: 'exited' | 'abandoned';
  if (found && (context.pid !== null || unrecorded.length) && (unrecorded.length || actor.accepts('process.exited', {}))) {
    await actor.recordAll([...unrecorded, ...(found.agent ? [{ type: 'run.agent_reported', data: found.agent }] : []), { type: 'process.exited', data: found.exit }], takeOver);
    outcome = 'exited';
  } else {
    // Before the process started: no spawn intent (anywhere), or an intent on this host whose
    // process recovery looked for and did not find. An intent on another host is not known here.
    const reason =
      context.pid === null && (actor.state === 'claimed' || !options.elsewhere)
        ? `runner ${context.runnerId} stopped before the process was started`
        : options.elsewhere
          ? `runner ${context.runnerId} stopped renewing its lease (${options.elsewhere}); its process was not checked or signalled from here, and its exit status is unknown`
          : options.unconfirmed
          ? `runner ${context.runnerId} stopped and its process identity could not be confirmed (${options.unconfirmed}): pid ${context.pid} is alive but may be another process, so it was not signalled; its exit status is unknown`
          : `runner ${context.runnerId} stopped and the process (pid ${context.pid}) is gone; its exit status is unknown`;
    await actor.record('run.abandoned', { reason }, takeOver);
    outcome = 'abandoned';
  }
  const run = findRun(runtime.db, runId);
  const followUp = context.trigger === 'schedule' ? await afterScheduledRun(runtime, run.loopId, run) : [];
  // Its notices are recorded; the pass that recovered it delivers them (pendingNotices).
  await requestNotices(runtime, run, followUp);
  return { outcome, run, followUp };
}

function abortReason(signal: AbortSignal | undefined): string | null {
  const reason: unknown = signal?.reason;
  if (typeof reason === 'string') return reason;
  if (reason instanceof Error && reason.name !== 'AbortError') return reason.message;
  return null;
}

function cancelReason(actor: DurableActor<typeof runMachine>): string | null {
  const error = actor.context.error;
  return error?.replace(/^cancelled(: ?)?/, '') || null;
}
