/**
 * The loop-run machine: one actor per run, stream `run:<id>`.
 *
 * new ─run.claimed─► claimed ─process.spawn_requested─► spawning ─process.spawned─► running
 *                                                         │                          │
 *                                          process.spawn_failed              process.exited
 *                                                         ▼                          ▼
 *                                     failed   succeeded | failed | timed_out | cancelled
 *
 * `run.abandoned` ends any non-terminal state (the runner lost the process). `run.cancel_requested`
 * before a spawn cancels at once; after it, the runtime kills the process group and the exit
 * decides. Effects leave as named actions: `requestSpawn` (record the intent), `spawn`,
 * `killProcess`, `finalize` (release the lease).
 *
 * Embedded in another XState app (docs/embedding.md): created with `input` (`RunInput`) it starts
 * `claimed`; its final states give `output` (`RunOutput`), so a parent's `onDone` branches on it.
 * The runtime creates it without input: it starts `new`, and recorded history replays unchanged.
 */
import { assign, setup } from 'xstate';
import type { CommandTarget, EventData, LoopPolicies, Target } from '../events/catalog.js';
import { CATCH_UP, OVERLAP, RETRY } from '../events/policies.js';
import type { MachineEvent } from './events.js';

export const RUN_MACHINE_ID = 'loops.run';
export const RUN_MACHINE_VERSION = 1;

export type RunStatus =
  | 'new'
  | 'claimed'
  | 'spawning'
  | 'running'
  | 'succeeded'
  | 'failed'
  | 'timed_out'
  | 'cancelled'
  | 'abandoned';

export const TERMINAL_RUN_STATUSES: ReadonlySet<RunStatus> = new Set([
  'succeeded',
  'failed',
  'timed_out',
  'cancelled',
  'abandoned',
]);

export interface RunContext {
  runId: string | null;
  loopId: string | null;
  loopName: string | null;
  slot: string | null;
  scheduledFor: string | null;
  attempt: number;
  trigger: 'manual' | 'schedule' | null;
  target: Target | null;
  policies: LoopPolicies | null;
  runnerId: string | null;
  leaseToken: number | null;
  pid: number | null;
  startTime: string | null;
  /** The boot the process ran on (with pid and start time, its identity). */
  bootId: string | null;
  timeoutAt: string | null;
  cancelRequested: boolean;
  exitCode: number | null;
  signal: string | null;
  error: string | null;
  stdout: string;
  stderr: string;
  startedAt: string | null;
  finishedAt: string | null;
  durationMs: number | null;
  /** What an agent CLI reported about the run (agent loops). */
  agent: EventData<'run.agent_reported'> | null;
}

export type RunEvent = MachineEvent<
  | 'run.claimed'
  | 'process.spawn_requested'
  | 'process.spawned'
  | 'process.spawn_failed'
  | 'run.cancel_requested'
  | 'process.exited'
  | 'run.abandoned'
  | 'run.workflow_started'
  | 'run.workflow_ended'
  | 'run.agent_reported'
  | 'process.adopted'
  | 'run.imported'
>;

/**
 * What a host gives the machine when it creates it with `input` (an app that runs loops' machine
 * itself, e.g. `createActor(runMachine.provide({ actions }), { input: { target } })`): the target
 * and, optionally, its policies and identity. Everything else `run.claimed` carries gets a default,
 * and the machine starts `claimed` (its `requestSpawn` asked for) — no hand-made claim event.
 * Without input the machine starts `new`, as the runtime creates it.
 */
export interface RunInput {
  target: Target;
  /** Defaults: no timeout, 5 s kill grace, one attempt, the CLI's overlap / catch-up defaults. */
  policies?: Partial<LoopPolicies>;
  runId?: string;
  loopId?: string;
  loopName?: string;
  slot?: string;
  scheduledFor?: string;
  attempt?: number;
  trigger?: 'manual' | 'schedule';
  runnerId?: string;
  leaseToken?: number;
}

/** The policies of a run created from `RunInput` without them (the CLI's defaults for a new loop). */
export const DEFAULT_RUN_POLICIES: LoopPolicies = {
  timeoutMs: null,
  killGraceMs: 5000,
  overlap: OVERLAP.default,
  catchUp: CATCH_UP.default,
  catchUpWindowMs: null,
  catchUpLimit: null,
  attempts: RETRY.attempts.default,
  retryDelayMs: RETRY.retryDelay.defaultMs,
  backoff: RETRY.backoff.default,
  maxRetryDelayMs: RETRY.maxRetryDelay.defaultMs,
  leaseMs: 30_000,
};

/** A run machine's output once it ended: how, and what the process or agent said. */
export interface RunOutput {
  runId: string | null;
  status: Extract<RunStatus, 'succeeded' | 'failed' | 'timed_out' | 'cancelled' | 'abandoned'>;
  exitCode: number | null;
  signal: string | null;
  error: string | null;
  /** The agent CLI's report (agent loops), else null. */
  agent: EventData<'run.agent_reported'> | null;
  startedAt: string | null;
  finishedAt: string | null;
  durationMs: number | null;
}

/** The output of a run that ended (`snapshot.output`, or computed from a restored snapshot's state), else null. */
export function runOutputOf(snapshot: { value: unknown; context: RunContext }): RunOutput | null {
  const status = snapshot.value as RunStatus;
  if (typeof status !== 'string' || !TERMINAL_RUN_STATUSES.has(status)) return null;
  return runOutput(snapshot.context, status as RunOutput['status']);
}

function runOutput(context: RunContext, status: RunOutput['status']): RunOutput {
  return {
    runId: context.runId,
    status,
    exitCode: context.exitCode,
    signal: context.signal,
    error: context.error,
    agent: context.agent,
    startedAt: context.startedAt,
    finishedAt: context.finishedAt,
    durationMs: context.durationMs,
  };
}

/** The context a run created with `input` starts with (as if its `run.claimed` were recorded). */
export function runContextFromInput(input: RunInput): RunContext {
  const runId = input.runId ?? 'embedded';
  return {
    ...initialContext,
    runId,
    loopId: input.loopId ?? 'embedded',
    loopName: input.loopName ?? 'embedded',
    slot: input.slot ?? `manual:${runId}`,
    scheduledFor: input.scheduledFor ?? null,
    attempt: input.attempt ?? 1,
    trigger: input.trigger ?? 'manual',
    target: input.target,
    policies: { ...DEFAULT_RUN_POLICIES, ...input.policies },
    runnerId: input.runnerId ?? null,
    leaseToken: input.leaseToken ?? null,
  };
}

const initialContext: RunContext = {
  runId: null,
  loopId: null,
  loopName: null,
  slot: null,
  scheduledFor: null,
  attempt: 1,
  trigger: null,
  target: null,
  policies: null,
  runnerId: null,
  leaseToken: null,
  pid: null,
  startTime: null,
  bootId: null,
  timeoutAt: null,
  cancelRequested: false,
  exitCode: null,
  signal: null,
  error: null,
  stdout: '',
  stderr: '',
  startedAt: null,
  finishedAt: null,
  durationMs: null,
  agent: null,
};

export const runMachine = setup({
  types: {
    context: {} as RunContext,
    events: {} as RunEvent,
    // void, not undefined: inferring from an optional property drops undefined, and createActor would require input.
    input: {} as RunInput | void,
    output: {} as RunOutput,
  },
  guards: {
    /** Created with `input`: the claim is in the context already (never so for a stream the runtime replays). */
    givenInput: ({ context }) => context.runId !== null && context.target !== null,
    timedOut: ({ event }) => event.type === 'process.exited' && event.data.timedOut,
    cancelled: ({ event, context }) =>
      event.type === 'process.exited' && (event.data.cancelled || context.cancelRequested),
    exitedZero: ({ event }) =>
      event.type === 'process.exited' && event.data.exitCode === 0 && event.data.signal === null,
  },
  actions: {
    recordExit: assign(({ event, context }) => {
      if (event.type !== 'process.exited') return {};
      return {
        exitCode: event.data.exitCode,
        signal: event.data.signal,
        error: event.data.error ?? (context.cancelRequested ? context.error : null),
        stdout: event.data.stdout,
        stderr: event.data.stderr,
        finishedAt: event.at,
        durationMs: event.data.durationMs,
      };
    }),
    recordEnd: assign(({ event, context }) => ({
      finishedAt: event.at,
      durationMs: context.startedAt === null ? null : Math.max(0, Date.parse(event.at) - Date.parse(context.startedAt)),
    })),
    recordImported: assign(({ event }) => {
      if (event.type !== 'run.imported') return {};
      const d = event.data;
      return {
        runId: d.runId,
        loopId: d.loopId,
        loopName: d.loopName,
        slot: d.slot,
        scheduledFor: d.scheduledFor,
        attempt: d.attempt,
        trigger: d.trigger,
        target: d.target,
        pid: d.pid,
        exitCode: d.exitCode,
        error: d.error,
        stdout: d.stdout,
        stderr: d.stderr,
        startedAt: d.startedAt,
        finishedAt: d.finishedAt,
        durationMs: d.durationMs,
      };
    }),
    recordWorkflowEnd: assign(({ event }) => (event.type === 'run.workflow_ended' ? { error: event.data.error } : {})),
    /** Run the workflow run whose start was recorded. Runtime-bound. */
    startWorkflow: (_args, _params: { wfRunId: string; workflowId: string; idempotencyKey: string }) => {},
    /** Record `process.spawn_requested` (the intent) before anything is spawned. Runtime-bound. */
    requestSpawn: (_args, _params: { runId: string | null; target: Target | null }) => {},
    /** Start the process. Runtime-bound. */
    spawn: (_args, _params: { runId: string | null; target: CommandTarget | null; timeoutAt: string | null }) => {},
    /** Kill the run's process group (SIGTERM, SIGKILL after the grace period). Runtime-bound. */
    killProcess: (_args, _params: { runId: string | null; pid: number | null; reason: string | null }) => {},
    /** The run reached a terminal state: release its lease. Runtime-bound. */
    finalize: (_args, _params: { runId: string | null; status: RunStatus }) => {},
  },
}).createMachine({
  id: RUN_MACHINE_ID,
  initial: 'new',
  context: ({ input }) => (input ? runContextFromInput(input as RunInput) : initialContext),
  output: ({ context, event }) => runOutput(context, (event as unknown as { output: { status: RunOutput['status'] } }).output.status),
  states: {
    new: {
      always: { guard: 'givenInput', target: 'claimed' },
      on: {
        // Another tool's finished run, brought across whole (loops import): straight to its end.
        'run.imported': [
          { guard: ({ event }) => event.data.status === 'succeeded', target: 'succeeded', actions: 'recordImported' },
          { guard: ({ event }) => event.data.status === 'timed_out', target: 'timed_out', actions: 'recordImported' },
          { guard: ({ event }) => event.data.status === 'cancelled', target: 'cancelled', actions: 'recordImported' },
          { guard: ({ event }) => event.data.status === 'abandoned', target: 'abandoned', actions: 'recordImported' },
          { target: 'failed', actions: 'recordImported' },
        ],
        'run.claimed': {
          target: 'claimed',
          actions: assign(({ event }) => ({
            runId: event.data.runId,
            loopId: event.data.loopId,
            loopName: event.data.loopName,
            slot: event.data.slot,
            scheduledFor: event.data.scheduledFor,
            attempt: event.data.attempt,
            trigger: event.data.trigger,
            target: event.data.target,
            policies: event.data.policies,
            runnerId: event.data.runnerId,
            leaseToken: event.data.leaseToken,
          })),
        },
      },
    },
    claimed: {
      entry: { type: 'requestSpawn', params: ({ context }) => ({ runId: context.runId, target: context.target }) },
      on: {
        'process.spawn_requested': {
          target: 'spawning',
          actions: assign(({ event }) => ({ timeoutAt: event.data.timeoutAt, startedAt: event.at })),
        },
        // A workflow loop: the run is its workflow run (recorded before that run starts).
        'run.workflow_started': {
          target: 'running',
          actions: [
            assign(({ event }) => ({ startedAt: event.at })),
            { type: 'startWorkflow', params: ({ event }) => event.data },
          ],
        },
        'run.cancel_requested': {
          target: 'cancelled',
          actions: [assign(({ event }) => ({ cancelRequested: true, error: cancelMessage(event.data.reason) })), 'recordEnd'],
        },
        'run.abandoned': {
          target: 'abandoned',
          actions: [assign(({ event }) => ({ error: event.data.reason })), 'recordEnd'],
        },
      },
    },
    spawning: {
      entry: {
        type: 'spawn',
        params: ({ context }) => ({
          runId: context.runId,
          target: context.target?.kind === 'command' ? context.target : null,
          timeoutAt: context.timeoutAt,
        }),
      },
      on: {
        'process.spawned': {
          target: 'running',
          actions: assign(({ event }) => ({ pid: event.data.pid, startTime: event.data.startTime, bootId: event.data.bootId })),
        },
        'process.spawn_failed': {
          target: 'failed',
          actions: [assign(({ event }) => ({ error: event.data.error })), 'recordEnd'],
        },
        'run.cancel_requested': {
          actions: assign(({ event }) => ({ cancelRequested: true, error: cancelMessage(event.data.reason) })),
        },
        'run.abandoned': {
          target: 'abandoned',
          actions: [assign(({ event }) => ({ error: event.data.reason })), 'recordEnd'],
        },
      },
    },
    running: {
      on: {
        // Taken over by another runner (its own died); the process goes on, watched by the new one.
        'process.adopted': { actions: assign(({ event }) => ({ runnerId: event.data.runnerId, leaseToken: event.data.leaseToken })) },
        // An agent CLI's own account of the run (model, session, tokens, cost), just before its exit.
        'run.agent_reported': { actions: assign(({ event }) => ({ agent: event.data })) },
        'run.workflow_ended': [
          { guard: ({ event }) => event.data.status === 'succeeded', target: 'succeeded', actions: ['recordWorkflowEnd', 'recordEnd'] },
          { guard: ({ event }) => event.data.status === 'timed_out', target: 'timed_out', actions: ['recordWorkflowEnd', 'recordEnd'] },
          { guard: ({ event }) => event.data.status === 'cancelled', target: 'cancelled', actions: ['recordWorkflowEnd', 'recordEnd'] },
          { target: 'failed', actions: ['recordWorkflowEnd', 'recordEnd'] },
        ],
        'process.exited': [
          { guard: 'timedOut', target: 'timed_out', actions: 'recordExit' },
          { guard: 'cancelled', target: 'cancelled', actions: 'recordExit' },
          { guard: 'exitedZero', target: 'succeeded', actions: 'recordExit' },
          { target: 'failed', actions: 'recordExit' },
        ],
        'run.cancel_requested': {
          actions: [
            assign(({ event }) => ({ cancelRequested: true, error: cancelMessage(event.data.reason) })),
            {
              type: 'killProcess',
              params: ({ context, event }) => ({
                runId: context.runId,
                pid: context.pid,
                reason: event.type === 'run.cancel_requested' ? event.data.reason : null,
              }),
            },
          ],
        },
        'run.abandoned': {
          target: 'abandoned',
          actions: [assign(({ event }) => ({ error: event.data.reason })), 'recordEnd'],
        },
      },
    },
    succeeded: { type: 'final', output: { status: 'succeeded' as const }, entry: { type: 'finalize', params: ({ context }) => ({ runId: context.runId, status: 'succeeded' as const }) } },
    failed: { type: 'final', output: { status: 'failed' as const }, entry: { type: 'finalize', params: ({ context }) => ({ runId: context.runId, status: 'failed' as const }) } },
    timed_out: { type: 'final', output: { status: 'timed_out' as const }, entry: { type: 'finalize', params: ({ context }) => ({ runId: context.runId, status: 'timed_out' as const }) } },
    cancelled: { type: 'final', output: { status: 'cancelled' as const }, entry: { type: 'finalize', params: ({ context }) => ({ runId: context.runId, status: 'cancelled' as const }) } },
    abandoned: { type: 'final', output: { status: 'abandoned' as const }, entry: { type: 'finalize', params: ({ context }) => ({ runId: context.runId, status: 'abandoned' as const }) } },
  },
});

function cancelMessage(reason: string | null): string {
  return reason ? `cancelled: ${reason}` : 'cancelled';
}
