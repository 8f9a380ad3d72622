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
 */
import { assign, setup } from 'xstate';
import type { CommandTarget, EventData, LoopPolicies, Target } from '../events/catalog.js';
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
  },
  guards: {
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
  context: initialContext,
  states: {
    new: {
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
    succeeded: { type: 'final', entry: { type: 'finalize', params: ({ context }) => ({ runId: context.runId, status: 'succeeded' as const }) } },
    failed: { type: 'final', entry: { type: 'finalize', params: ({ context }) => ({ runId: context.runId, status: 'failed' as const }) } },
    timed_out: { type: 'final', entry: { type: 'finalize', params: ({ context }) => ({ runId: context.runId, status: 'timed_out' as const }) } },
    cancelled: { type: 'final', entry: { type: 'finalize', params: ({ context }) => ({ runId: context.runId, status: 'cancelled' as const }) } },
    abandoned: { type: 'final', entry: { type: 'finalize', params: ({ context }) => ({ runId: context.runId, status: 'abandoned' as const }) } },
  },
});

function cancelMessage(reason: string | null): string {
  return reason ? `cancelled: ${reason}` : 'cancelled';
}
