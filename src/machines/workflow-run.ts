/**
 * The workflow-run machine: one actor per run of a workflow spec, stream `wfrun:<id>`. Its context
 * holds every step's state; each event is a fact about one step (or the whole run), and after each
 * one the machine plans, purely: which pending steps are ready (every `needs` ended), whether each
 * runs or is skipped (its `if`, with GitHub-style `success()` by default), which start now (up to
 * the spec's `concurrency`), and whether the run is over.
 *
 * new ─wfrun.started─► running ──(every step ended)──► succeeded | failed | cancelled | timed_out
 *
 * Step lifecycle inside `running`:
 *   pending ─(ready, if true)─► starting ─step.spawn_requested─► spawning ─step.spawned─► running
 *   pending ─(ready, if false / a need failed)─► skipped
 *   running ─step.exited─► succeeded | failed | timed_out | cancelled   (failed: retrying if attempts remain)
 *   retrying ─step.retry_due─► starting
 *   spawning | running ─step.abandoned─► abandoned (retrying if attempts remain)
 *
 * Effects leave as named actions with their parameters: `startSteps` (record each intent, inline),
 * `spawnStep` (start the process once its intent is recorded),
 * `killSteps` (cancel / workflow timeout), `armRetry` (a durable deadline, re-armed after a
 * restart from the recorded `dueAt`), `armTimeout`, `finalize` (release the lease). Time enters
 * only through event fields (`at`).
 */
import { assign, setup } from 'xstate';
import type { EventType } from '../events/catalog.js';
import { evaluateCondition, parseCondition, type ConditionContext, type StepView } from '../workflow/expr.js';
import type { WorkflowSpec } from '../workflow/spec.js';
import type { MachineEvent } from './events.js';

export const WORKFLOW_RUN_MACHINE_ID = 'loops.workflow-run';
export const WORKFLOW_RUN_MACHINE_VERSION = 1;

export type StepStatus =
  | 'pending'
  | 'starting'
  | 'spawning'
  | 'running'
  | 'retrying'
  | 'succeeded'
  | 'failed'
  | 'timed_out'
  | 'cancelled'
  | 'skipped'
  | 'abandoned';

export const TERMINAL_STEP_STATUSES: ReadonlySet<StepStatus> = new Set(['succeeded', 'failed', 'timed_out', 'cancelled', 'skipped', 'abandoned']);
/** A step whose process may be alive. */
export const ACTIVE_STEP_STATUSES: ReadonlySet<StepStatus> = new Set(['starting', 'spawning', 'running']);

export type WorkflowRunStatus = 'new' | 'running' | 'succeeded' | 'failed' | 'cancelled' | 'timed_out';

export interface StepState {
  status: StepStatus;
  /** The current (or last) attempt; 0 before the first. */
  attempt: number;
  pid: number | null;
  startTime: string | null;
  /** The boot the process ran on (with pid and start time, its identity). */
  bootId: string | null;
  exitCode: number | null;
  signal: string | null;
  error: string | null;
  outputs: Record<string, string>;
  /** The first attempt's start and the last attempt's end (instants from the events). */
  startedAt: string | null;
  endedAt: string | null;
  /** When a retry is due. */
  retryAt: string | null;
  /** Why it was skipped. */
  reason: string | null;
  /** Started after the run was cancelled or timed out (an always() / cancelled() step): not to be stopped. */
  afterStop: boolean;
}

export interface WorkflowRunContext {
  wfRunId: string | null;
  workflowId: string | null;
  workflowName: string | null;
  version: number | null;
  spec: WorkflowSpec | null;
  inputs: Record<string, string>;
  trigger: 'manual' | 'schedule' | null;
  loopId: string | null;
  slot: string | null;
  attempt: number;
  idempotencyKey: string | null;
  runnerId: string | null;
  leaseToken: number | null;
  startedAt: string | null;
  finishedAt: string | null;
  steps: Record<string, StepState>;
  cancelRequested: boolean;
  cancelReason: string | null;
  timedOut: boolean;
  /** Set by each planning step: what the effects must do now. */
  toStart: Array<{ stepId: string; attempt: number }>;
  toKill: string[];
  toRetry: Array<{ stepId: string; attempt: number; dueAt: string }>;
  error: string | null;
}

type E<T extends EventType> = MachineEvent<T>;
export type WorkflowRunEvent =
  | E<'wfrun.started'>
  | E<'step.spawn_requested'>
  | E<'step.spawned'>
  | E<'step.spawn_failed'>
  | E<'step.exited'>
  | E<'step.abandoned'>
  | E<'step.retry_due'>
  | E<'wfrun.cancel_requested'>
  | E<'wfrun.timed_out'>;

function newStep(): StepState {
  return {
    status: 'pending',
    attempt: 0,
    pid: null,
    startTime: null,
    bootId: null,
    exitCode: null,
    signal: null,
    error: null,
    outputs: {},
    startedAt: null,
    endedAt: null,
    retryAt: null,
    reason: null,
    afterStop: false,
  };
}

/** The delay before attempt `next` (2, 3, …): delay × backoff^(next−2), at most maxDelay. */
export function stepRetryDelay(retries: { delayMs: number; backoff: number; maxDelayMs: number | null }, next: number): number {
  const delay = Math.round(retries.delayMs * retries.backoff ** Math.max(0, next - 2));
  return retries.maxDelayMs === null ? delay : Math.min(delay, retries.maxDelayMs);
}

/** A step ended in a way that does not fail its dependants' `success()`: succeeded, or failed under continue-on-error. */
function ok(spec: WorkflowSpec, steps: Record<string, StepState>, id: string): boolean {
  const s = steps[id]!;
  if (s.status === 'succeeded') return true;
  const continueOnError = spec.steps.find((x) => x.id === id)?.continueOnError ?? false;
  return continueOnError && (s.status === 'failed' || s.status === 'timed_out' || s.status === 'abandoned');
}

function ancestorsOf(spec: WorkflowSpec, id: string): Set<string> {
  const byId = new Map(spec.steps.map((s) => [s.id, s]));
  const out = new Set<string>();
  const stack = [...(byId.get(id)?.needs ?? [])];
  while (stack.length) {
    const next = stack.pop()!;
    if (out.has(next)) continue;
    out.add(next);
    stack.push(...(byId.get(next)?.needs ?? []));
  }
  return out;
}

function stepViews(steps: Record<string, StepState>): Record<string, StepView> {
  const out: Record<string, StepView> = {};
  for (const [id, s] of Object.entries(steps)) out[id] = { status: s.status, exitCode: s.exitCode, outputs: s.outputs };
  return out;
}

/**
 * Pure planning after an event: skips and starts ready steps (file order, up to `concurrency`),
 * and says which running steps to kill (after a cancel or the workflow timeout).
 */
function plan(context: WorkflowRunContext, at: string): Partial<WorkflowRunContext> {
  const spec = context.spec!;
  const steps: Record<string, StepState> = { ...context.steps };
  const stopping = context.cancelRequested || context.timedOut;
  let active = Object.values(steps).filter((s) => ACTIVE_STEP_STATUSES.has(s.status)).length;
  // Views of the steps for conditions: built once per change, not once per step looked at.
  let views: Record<string, StepView> | null = null;
  // Steps the event itself starts (a retry that came due) stay in the list.
  const toStart: Array<{ stepId: string; attempt: number }> = [...context.toStart];
  // Skipping a step can make its dependants ready: repeat until nothing changes.
  for (let changed = true; changed; ) {
    changed = false;
    for (const step of spec.steps) {
      const s = steps[step.id]!;
      if (s.status !== 'pending') continue;
      if (!step.needs.every((n) => TERMINAL_STEP_STATUSES.has(steps[n]!.status))) continue;
      const failedAncestor = () =>
        [...ancestorsOf(spec, step.id)].some((a) => ['failed', 'timed_out', 'abandoned'].includes(steps[a]!.status) && !ok(spec, steps, a));
      const cond: ConditionContext = {
        success: !stopping && step.needs.every((n) => ok(spec, steps, n)),
        // Only a condition that is not the default success() can ask for failure() or the steps.
        failure: step.if === null ? false : failedAncestor(),
        cancelled: stopping,
        steps: step.if === null ? {} : (views ??= stepViews(steps)),
        inputs: context.inputs,
      };
      const run = evaluateCondition(parseCondition(step.if ?? 'success()'), cond);
      if (!run) {
        const failedNeed = step.needs.find((n) => !ok(spec, steps, n));
        const reason =
          step.if !== null
            ? `if: ${step.if} was false`
            : stopping
              ? context.timedOut
                ? 'the workflow timed out'
                : 'the workflow was cancelled'
              : `needs ${failedNeed} which ${steps[failedNeed!]!.status === 'skipped' ? 'was skipped' : steps[failedNeed!]!.status}`;
        steps[step.id] = { ...s, status: 'skipped', reason, endedAt: at };
        views = null;
        changed = true;
        continue;
      }
      if (active >= spec.concurrency) continue;
      steps[step.id] = { ...s, status: 'starting', attempt: 1, afterStop: stopping };
      views = null;
      toStart.push({ stepId: step.id, attempt: 1 });
      active += 1;
    }
  }
  return { steps, toStart };
}

function allEnded(context: WorkflowRunContext): boolean {
  return Object.values(context.steps).every((s) => TERMINAL_STEP_STATUSES.has(s.status));
}

/** The run's final status once every step ended. */
export function finalStatus(context: WorkflowRunContext): 'succeeded' | 'failed' | 'cancelled' | 'timed_out' {
  if (context.cancelRequested) return 'cancelled';
  if (context.timedOut) return 'timed_out';
  const spec = context.spec!;
  const failed = spec.steps.some((step) => {
    const s = context.steps[step.id]!;
    return ['failed', 'timed_out', 'cancelled', 'abandoned'].includes(s.status) && !step.continueOnError;
  });
  return failed ? 'failed' : 'succeeded';
}

function updateStep(context: WorkflowRunContext, stepId: string, patch: Partial<StepState>): Record<string, StepState> {
  return { ...context.steps, [stepId]: { ...context.steps[stepId]!, ...patch } };
}

/** An attempt ended badly: retry when attempts remain and the run is not stopping, else the end status. */
function endAttempt(
  context: WorkflowRunContext,
  stepId: string,
  at: string,
  status: 'failed' | 'timed_out' | 'abandoned' | 'cancelled' | 'succeeded',
  patch: Partial<StepState>,
): Partial<WorkflowRunContext> {
  const step = context.spec!.steps.find((s) => s.id === stepId)!;
  const current = context.steps[stepId]!;
  const stopping = context.cancelRequested || context.timedOut;
  const retry = status !== 'succeeded' && status !== 'cancelled' && !stopping && current.attempt < step.retries.attempts;
  if (retry) {
    const next = current.attempt + 1;
    const dueAt = new Date(Date.parse(at) + stepRetryDelay(step.retries, next)).toISOString();
    return {
      steps: updateStep(context, stepId, { ...patch, status: 'retrying', retryAt: dueAt, endedAt: at, pid: null }),
      toRetry: [{ stepId, attempt: next, dueAt }],
    };
  }
  return { steps: updateStep(context, stepId, { ...patch, status, endedAt: at, retryAt: null, pid: null }), toRetry: [] };
}

/** Applies `update` to the context, then plans (the single place where steps start or are skipped). */
function applyAndPlan(
  context: WorkflowRunContext,
  event: WorkflowRunEvent,
  update: (context: WorkflowRunContext) => Partial<WorkflowRunContext>,
): Partial<WorkflowRunContext> {
  const base = { ...context, toStart: [], toKill: [], toRetry: [], ...update(context) } as WorkflowRunContext;
  return { ...base, ...plan(base, event.at) };
}

const stepOf = (context: WorkflowRunContext, event: { data: { stepId: string; attempt: number } }) => {
  const s = context.steps[event.data.stepId];
  return s !== undefined && s.attempt === event.data.attempt ? s : null;
};

export const workflowRunMachine = setup({
  types: {
    context: {} as WorkflowRunContext,
    events: {} as WorkflowRunEvent,
  },
  guards: {
    allEnded: ({ context }) => context.spec !== null && allEnded(context),
    isStarting: ({ context, event }) => event.type === 'step.spawn_requested' && stepOf(context, event)?.status === 'starting',
    isSpawning: ({ context, event }) =>
      (event.type === 'step.spawned' || event.type === 'step.spawn_failed') && stepOf(context, event)?.status === 'spawning',
    isLive: ({ context, event }) =>
      (event.type === 'step.exited' || event.type === 'step.abandoned') &&
      ['spawning', 'running'].includes(stepOf(context, event)?.status ?? ''),
    isRetrying: ({ context, event }) =>
      event.type === 'step.retry_due' &&
      context.steps[event.data.stepId]?.status === 'retrying' &&
      context.steps[event.data.stepId]!.attempt + 1 === event.data.attempt,
    notStopping: ({ context }) => !context.cancelRequested && !context.timedOut,
  },
  actions: {
    stampFinish: assign(({ event }) => ({ finishedAt: event.at })),
    /**
     * Record each step's intent (`step.spawn_requested`, its rendered command line) — in the same
     * transaction as the event that made the steps ready (an inline effect). Runtime-bound.
     */
    startSteps: (_args, _params: { steps: Array<{ stepId: string; attempt: number }> }) => {},
    /** The intent is recorded: start the process. Runtime-bound. */
    spawnStep: (
      _args,
      _params: { stepId: string; attempt: number; command: string; args: string[]; shell: boolean; cwd: string | null; envKeys: string[]; timeoutAt: string | null },
    ) => {},
    /** Stop these steps' process groups (cancel, workflow timeout). Runtime-bound. */
    killSteps: (_args, _params: { stepIds: string[]; reason: string }) => {},
    /** A durable deadline: record step.retry_due at dueAt. Runtime-bound. */
    armRetry: (_args, _params: { retries: Array<{ stepId: string; attempt: number; dueAt: string }> }) => {},
    /** The whole-workflow timeout: record wfrun.timed_out at `at`. Runtime-bound. */
    armTimeout: (_args, _params: { at: string | null; timeoutMs: number | null }) => {},
    /** The run ended: release the lease. Runtime-bound. */
    finalize: (_args, _params: { status: string }) => {},
  },
}).createMachine({
  id: WORKFLOW_RUN_MACHINE_ID,
  initial: 'new',
  context: {
    wfRunId: null,
    workflowId: null,
    workflowName: null,
    version: null,
    spec: null,
    inputs: {},
    trigger: null,
    loopId: null,
    slot: null,
    attempt: 1,
    idempotencyKey: null,
    runnerId: null,
    leaseToken: null,
    startedAt: null,
    finishedAt: null,
    steps: {},
    cancelRequested: false,
    cancelReason: null,
    timedOut: false,
    toStart: [],
    toKill: [],
    toRetry: [],
    error: null,
  },
  states: {
    new: {
      on: {
        'wfrun.started': {
          target: 'running',
          actions: [
            assign(({ context, event }) => applyAndPlan(context, event, () => {
              const d = (event as E<'wfrun.started'>).data;
              return {
                wfRunId: d.wfRunId,
                workflowId: d.workflowId,
                workflowName: d.workflowName,
                version: d.version,
                spec: d.spec,
                inputs: d.inputs,
                trigger: d.trigger,
                loopId: d.loopId,
                slot: d.slot,
                attempt: d.attempt,
                idempotencyKey: d.idempotencyKey,
                runnerId: d.runnerId,
                leaseToken: d.leaseToken,
                startedAt: event.at,
                steps: Object.fromEntries(d.spec.steps.map((s) => [s.id, newStep()])),
              };
            })),
            {
              type: 'armTimeout',
              params: ({ context }) => ({
                timeoutMs: context.spec!.timeoutMs,
                at: context.spec!.timeoutMs === null ? null : new Date(Date.parse(context.startedAt!) + context.spec!.timeoutMs).toISOString(),
              }),
            },
            { type: 'startSteps', params: ({ context }) => ({ steps: context.toStart }) },
          ],
        },
      },
    },
    running: {
      always: [
        { guard: 'allEnded', target: 'ended' },
      ],
      on: {
        'step.spawn_requested': {
          guard: 'isStarting',
          actions: [
            assign(({ context, event }) => ({
              steps: updateStep(context, event.data.stepId, {
                status: 'spawning',
                startedAt: context.steps[event.data.stepId]!.startedAt ?? event.at,
              }),
              toStart: [],
            })),
            { type: 'spawnStep', params: ({ event }) => event.data },
          ],
        },
        'step.spawned': {
          guard: 'isSpawning',
          actions: assign(({ context, event }) => ({
            steps: updateStep(context, event.data.stepId, { status: 'running', pid: event.data.pid, startTime: event.data.startTime, bootId: event.data.bootId }),
            toStart: [],
          })),
        },
        'step.spawn_failed': {
          guard: 'isSpawning',
          actions: [
            assign(({ context, event }) => applyAndPlan(context, event, (context) => {
              const d = (event as E<'step.spawn_failed'>).data;
              return endAttempt(context, d.stepId, event.at, 'failed', { error: d.error, exitCode: null });
            })),
            { type: 'armRetry', params: ({ context }) => ({ retries: context.toRetry }) },
            { type: 'startSteps', params: ({ context }) => ({ steps: context.toStart }) },
          ],
        },
        'step.exited': {
          guard: 'isLive',
          actions: [
            assign(({ context, event }) => applyAndPlan(context, event, (context) => {
              const d = (event as E<'step.exited'>).data;
              const status = d.timedOut
                ? 'timed_out'
                : d.cancelled
                  ? 'cancelled'
                  : d.exitCode === 0
                    ? 'succeeded'
                    : 'failed';
              return endAttempt(context, d.stepId, event.at, status, {
                exitCode: d.exitCode,
                signal: d.signal,
                error: d.error,
                outputs: d.outputs,
              });
            })),
            { type: 'armRetry', params: ({ context }) => ({ retries: context.toRetry }) },
            { type: 'startSteps', params: ({ context }) => ({ steps: context.toStart }) },
          ],
        },
        'step.abandoned': {
          guard: 'isLive',
          actions: [
            assign(({ context, event }) => applyAndPlan(context, event, (context) => {
              const d = (event as E<'step.abandoned'>).data;
              return endAttempt(context, d.stepId, event.at, 'abandoned', { error: d.reason, exitCode: null });
            })),
            { type: 'armRetry', params: ({ context }) => ({ retries: context.toRetry }) },
            { type: 'startSteps', params: ({ context }) => ({ steps: context.toStart }) },
          ],
        },
        'step.retry_due': {
          guard: 'isRetrying',
          actions: [
            assign(({ context, event }) => applyAndPlan(context, event, (context) => {
              const d = (event as E<'step.retry_due'>).data;
              if (context.cancelRequested || context.timedOut) {
                return { steps: updateStep(context, d.stepId, { status: 'cancelled', retryAt: null, endedAt: event.at }) };
              }
              return {
                steps: updateStep(context, d.stepId, { status: 'starting', attempt: d.attempt, retryAt: null }),
                toStart: [{ stepId: d.stepId, attempt: d.attempt }],
              };
            })),
            { type: 'startSteps', params: ({ context }) => ({ steps: context.toStart }) },
          ],
        },
        'wfrun.cancel_requested': {
          guard: 'notStopping',
          actions: [
            assign(({ context, event }) => applyAndPlan(context, event, (context) => {
              const d = (event as E<'wfrun.cancel_requested'>).data;
              return { cancelRequested: true, cancelReason: d.reason, ...stopRetries(context, event.at) };
            })),
            {
              type: 'killSteps',
              params: ({ context }) => ({ stepIds: activeSteps(context), reason: context.cancelReason ?? 'workflow cancelled' }),
            },
            { type: 'startSteps', params: ({ context }) => ({ steps: context.toStart }) },
          ],
        },
        'wfrun.timed_out': {
          guard: 'notStopping',
          actions: [
            assign(({ context, event }) => applyAndPlan(context, event, (context) => ({ timedOut: true, ...stopRetries(context, event.at) }))),
            {
              type: 'killSteps',
              params: ({ context }) => ({ stepIds: activeSteps(context), reason: `the workflow timed out after ${context.spec!.timeoutMs} ms` }),
            },
            { type: 'startSteps', params: ({ context }) => ({ steps: context.toStart }) },
          ],
        },
      },
    },
    ended: {
      always: [
        { guard: ({ context }) => finalStatus(context) === 'succeeded', target: 'succeeded' },
        { guard: ({ context }) => finalStatus(context) === 'failed', target: 'failed' },
        { guard: ({ context }) => finalStatus(context) === 'cancelled', target: 'cancelled' },
        { target: 'timed_out' },
      ],
    },
    succeeded: { type: 'final', entry: ['stampFinish', { type: 'finalize', params: { status: 'succeeded' } }] },
    failed: { type: 'final', entry: ['stampFinish', { type: 'finalize', params: { status: 'failed' } }] },
    cancelled: { type: 'final', entry: ['stampFinish', { type: 'finalize', params: { status: 'cancelled' } }] },
    timed_out: { type: 'final', entry: ['stampFinish', { type: 'finalize', params: { status: 'timed_out' } }] },
  },
});

/** Steps waiting for a retry end as cancelled when the run is stopping. */
function stopRetries(context: WorkflowRunContext, at: string): Partial<WorkflowRunContext> {
  let steps = context.steps;
  for (const [id, s] of Object.entries(steps)) {
    if (s.status === 'retrying') steps = { ...steps, [id]: { ...s, status: 'cancelled', retryAt: null, endedAt: at } };
  }
  return { steps };
}

function activeSteps(context: WorkflowRunContext): string[] {
  return Object.entries(context.steps)
    .filter(([, s]) => ACTIVE_STEP_STATUSES.has(s.status))
    .map(([id]) => id);
}
