/**
 * The workflow-run machine: one actor per run of a workflow spec, stream `wfrun:<id>`. Its context
 * holds every step's state; each event is a fact about one step (or the whole run), and after each
 * one the machine plans, purely: which pending steps are ready (every `needs` ended), whether each
 * runs or is skipped (its `if`, with GitHub-style `success()` by default), which start now (up to
 * the spec's `concurrency`), whether a failed attempt is retried, and whether the run is over.
 *
 * new ─wfrun.started─► running ──(every step ended)──► succeeded | failed | cancelled | timed_out
 *
 * Step lifecycle inside `running`:
 *   pending ─(ready, if true)─► starting ─step.spawn_requested─► spawning ─step.spawned─► running
 *   pending ─(ready, if false / a need failed)─► skipping ─step.skipped─► skipped
 *   running ─step.exited─► succeeded | failed | timed_out | cancelled   (failed: retrying if attempts remain)
 *   retrying ─step.retry_scheduled─► retrying (retryAt set) ─step.retry_due─► starting
 *   spawning | running ─step.abandoned─► abandoned (retrying if attempts remain)
 *
 * How it plans depends on the run's pinned spec: `execution: sequential` (every predecessor-shape
 * file; src/events/workflow-model.ts) looks at one step at a time in the predecessor's depth-first
 * order and, after the first failure without continue-on-error, skips the rest
 * (`planSequential`); absent or `parallel` (every spec stored before the field existed) starts
 * every ready step up to `concurrency` (`plan`). The field is new and optional, so no stream written
 * before it plans differently.
 *
 * Decisions are facts. What planning decides is asked for as one inline effect,
 * `recordDecisions {retries, skips, starts}`: the runner turns it into `step.retry_scheduled`,
 * `step.skipped` and `step.spawn_requested` events appended in the transaction of the event that
 * caused them, and only those events move the steps: a skip decided is `skipping` (not ended, so
 * its dependants wait) until its `step.skipped` makes it `skipped` with its reason; a retry decided
 * is `retrying` with no `retryAt` until its `step.retry_scheduled` sets it (and arms the timer,
 * `armRetry`). Dependants of a skipped step are planned after its `step.skipped`, in the same
 * transaction. The projections and `loops workflows inspect` read these events, never re-derive
 * them.
 *
 * Version 2, and why it is one definition with a compatibility path rather than two copies.
 * Version 1 recorded no decisions: it skipped steps and scheduled retries in its context only. Its
 * streams must still fold identically (and their projections stay the same), so this definition
 * keeps version 1's behaviour, selected by the run's own first fact: `wfrun.started` v2 carries
 * `decisions: 'recorded'`; every v1 `wfrun.started` is upcast to `decisions: 'derived'` (catalog.ts),
 * and a `derived` run plans exactly as version 1 did — skipped at once, `retryAt` at once,
 * `armRetry` + `startSteps` as its effects — while the new events are refused on it. The mode
 * comes from the log itself, not from the registry, so a v1 stream folds the same wherever it is
 * read (replay, projections, explain.ts), and the projections can tell the two kinds of run apart
 * from the same event (they cannot see the streams table). A second 500-line copy would have to
 * receive every later fix twice; the golden logs (test/fixtures/golden, recorded by version-1
 * builds) check that the derived path did not move. The version is bumped all the same
 * (registry.ts maps @1 and @2 to this definition) so that an older loops, which cannot fold the new
 * events, refuses a version-2 stream by name instead of misreading it.
 *
 * Effects leave as named actions with their parameters: `recordDecisions` (inline: the decisions'
 * events, intents included), `spawnStep` (start the process once its intent is recorded),
 * `killSteps` (cancel / workflow timeout), `armRetry` (a durable deadline, re-armed after a
 * restart from the recorded `dueAt`), `armTimeout`, `finalize` (release the lease); derived runs
 * use `startSteps` (inline, the intents) and `armRetry` instead of `recordDecisions`. Time enters
 * only through event fields (`at`).
 *
 * Embedded in another XState app (docs/embedding.md): created with `input` (`WorkflowRunInput`) it
 * starts `running`, planned as after a `wfrun.started`; its final states give `output`
 * (`WorkflowRunOutput`: status, every step's result and outputs, error). Without input (the
 * runtime) it starts `new`.
 *
 * Over 500 lines on purpose: one machine definition (its states, guards and the planner they share)
 * read as a whole; the planner is pure functions in this file because only this machine uses them.
 */
import { assign, enqueueActions, setup } from 'xstate';
import type { EventType } from '../events/catalog.js';
import { backoffDelay } from '../events/policies.js';
import { evaluateCondition, parseCondition, type ConditionContext, type StepView } from '../workflow/expr.js';
import { sequentialOrder, type WorkflowSpec } from '../workflow/spec.js';
import type { MachineEvent } from './events.js';

export const WORKFLOW_RUN_MACHINE_ID = 'loops.workflow-run';
/** 2: skips and retry decisions are recorded (`step.skipped`, `step.retry_scheduled`); see above. */
export const WORKFLOW_RUN_MACHINE_VERSION = 2;

export type StepStatus =
  | 'pending'
  /** Decided skipped; ends as `skipped` when its `step.skipped` is recorded (recorded runs only). */
  | 'skipping'
  /** A fork's or rerun's step whose recorded result is reused; ends as that result when its `step.reused` is recorded. */
  | 'reusing'
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
  /** When a retry is due (recorded runs: once its step.retry_scheduled is). */
  retryAt: string | null;
  /** A retry decided, not yet recorded (recorded runs: what its step.retry_scheduled says); else null. */
  pendingRetry: { attempt: number; dueAt: string; reason: string } | null;
  /** Why it was skipped (or is being skipped). */
  reason: string | null;
  /** Started after the run was cancelled or timed out (an always() / cancelled() step): not to be stopped. */
  afterStop: boolean;
}

/**
 * One step as the run's context keeps it: its id, then its state. The context holds them as an
 * array in the spec's order (an imported run: in the order it was imported), not as a map keyed by
 * id: a wide run changes one step per event, and copying a 500-entry array costs about a
 * microsecond where copying a 500-key object costs 60–200 (the whole of a replay's budget).
 * `contextChanges` compares it entry by entry all the same, as `steps.<id>`, with the id as the
 * entry's path rather than part of its value — so the field hashes are what they were when the
 * steps were a map. Look a step up with {@link stepOf}.
 */
export interface StepEntry extends StepState {
  id: string;
}

/** A retry decided by planning: attempt `attempt` at `dueAt` (`reason`: recorded runs). */
export interface RetryDecision {
  stepId: string;
  attempt: number;
  dueAt: string;
  reason?: string;
}

export interface WorkflowRunContext {
  /** How this run keeps its step decisions (from its wfrun.started): recorded as events, or derived (runs from before). */
  decisions: 'recorded' | 'derived';
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
  /** Every step, in the spec's order ({@link stepOf} finds one by id). */
  steps: StepEntry[];
  cancelRequested: boolean;
  cancelReason: string | null;
  timedOut: boolean;
  /** Set by each planning step: what the effects must do now. */
  toStart: Array<{ stepId: string; attempt: number }>;
  toKill: string[];
  toRetry: RetryDecision[];
  /** Skips decided by this planning step (recorded runs). */
  toSkip: Array<{ stepId: string; reason: string }>;
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
  | E<'step.skipped'>
  | E<'step.retry_scheduled'>
  | E<'step.reused'>
  | E<'wfrun.cancel_requested'>
  | E<'wfrun.timed_out'>
  | E<'wfrun.imported'>;

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
    pendingRetry: null,
    reason: null,
    afterStop: false,
  };
}

function newEntry(id: string, status: StepStatus = 'pending'): StepEntry {
  return { id, ...newStep(), status };
}

/**
 * What planning looks up in a spec, computed once per spec object (a run's context keeps its
 * spec's reference): each step's position by id, and where the spec's plain tail begins — the
 * steps from there on need nothing and have no `if:`, so while the run is not stopping and its
 * concurrency is full, planning has nothing to decide for any of them.
 */
interface SpecIndex {
  positions: Map<string, number>;
  plainFrom: number;
}

const specIndexes = new WeakMap<WorkflowSpec, SpecIndex>();

function indexSpec(spec: WorkflowSpec): SpecIndex {
  let index = specIndexes.get(spec);
  if (index === undefined) {
    let plainFrom = spec.steps.length;
    while (plainFrom > 0 && spec.steps[plainFrom - 1]!.needs.length === 0 && spec.steps[plainFrom - 1]!.if === null) plainFrom -= 1;
    index = { positions: new Map(spec.steps.map((s, i) => [s.id, i])), plainFrom };
    specIndexes.set(spec, index);
  }
  return index;
}

function specIndex(spec: WorkflowSpec): Map<string, number> {
  return indexSpec(spec).positions;
}

/** Where a step is in `steps`: its spec position when the array is in spec order (always, but for some imported runs), else searched. -1: none. */
function indexOf(spec: WorkflowSpec | null, steps: readonly StepEntry[], id: string): number {
  if (spec !== null) {
    const i = specIndex(spec).get(id);
    if (i !== undefined && steps[i]?.id === id) return i;
  }
  return steps.findIndex((s) => s.id === id);
}

/** A step of a run by id (undefined: the run has none), in constant time. */
export function stepOf(context: Pick<WorkflowRunContext, 'spec' | 'steps'>, id: string): StepEntry | undefined {
  const i = indexOf(context.spec, context.steps, id);
  return i < 0 ? undefined : context.steps[i];
}

/** A run's steps keyed by id: a new object for reading (the context keeps them as an array, {@link StepEntry}). */
export function stepsById(context: Pick<WorkflowRunContext, 'steps'>): Record<string, StepEntry> {
  const out: Record<string, StepEntry> = {};
  for (const s of context.steps) out[s.id] = s;
  return out;
}

/** Decisions are recorded as events (not so for runs started before they were; see the top of the file). */
const records = (context: WorkflowRunContext): boolean => context.decisions === 'recorded';

/** A step ended in a way that does not fail its dependants' `success()`: succeeded, or failed under continue-on-error. */
function ok(spec: WorkflowSpec, steps: readonly StepEntry[], id: string): boolean {
  const s = steps[indexOf(spec, steps, id)]!;
  if (s.status === 'succeeded') return true;
  const continueOnError = spec.steps[specIndex(spec).get(id)!]?.continueOnError ?? false;
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

/** What conditions see of the steps (`steps.<id>.outputs.<key>`), keyed by id. */
export function stepViews(steps: readonly StepEntry[]): Record<string, StepView> {
  const out: Record<string, StepView> = {};
  for (const s of steps) out[s.id] = { status: s.status, exitCode: s.exitCode, outputs: s.outputs };
  return out;
}

/**
 * Pure planning after an event: skips and starts ready steps (file order, up to `concurrency`).
 * A recorded run marks a skip `skipping` and lists it in `toSkip` (its step.skipped ends it, and
 * plans its dependants); a derived run skips at once and goes on with the dependants.
 */
function plan(context: WorkflowRunContext, at: string, owned: boolean): Partial<WorkflowRunContext> {
  const spec = context.spec!;
  if (spec.execution === 'sequential') return planSequential(context, at);
  // Copied on the first change only (most events start one step or none), and not at all when
  // the event's own update already made the array a fresh copy nobody else holds.
  let steps = context.steps;
  let mine = owned;
  const write = (i: number, entry: StepEntry) => {
    if (!mine) {
      steps = steps.slice();
      mine = true;
    }
    steps[i] = entry;
  };
  const statusOf = (id: string) => steps[indexOf(spec, steps, id)]!.status;
  const stopping = context.cancelRequested || context.timedOut;
  const { plainFrom } = indexSpec(spec);
  let active = 0;
  for (const s of steps) if (ACTIVE_STEP_STATUSES.has(s.status)) active += 1;
  // Views of the steps for conditions: built once per change, not once per step looked at.
  let views: Record<string, StepView> | null = null;
  // Steps the event itself starts (a retry that came due) stay in the list.
  // Copied on the first decision: an event that decides nothing keeps the lists it had.
  let toStart = context.toStart;
  let toSkip = context.toSkip;
  // Skipping a step can make its dependants ready: repeat until nothing changes.
  for (let changed = true; changed; ) {
    changed = false;
    let position = 0;
    for (const step of spec.steps) {
      if (position >= plainFrom && active >= spec.concurrency && !stopping) break;
      // Steps are in spec order (the usual case: compared by position, not looked up).
      const i = steps[position]?.id === step.id ? position : indexOf(spec, steps, step.id);
      position += 1;
      const s = steps[i]!;
      if (s.status !== 'pending') continue;
      if (!step.needs.every((n) => TERMINAL_STEP_STATUSES.has(statusOf(n)))) continue;
      const success = !stopping && step.needs.every((n) => ok(spec, steps, n));
      let run = success;
      if (step.if !== null) {
        // Only a condition that is not the default success() can ask for failure() or the steps.
        const failure = [...ancestorsOf(spec, step.id)].some((a) => ['failed', 'timed_out', 'abandoned'].includes(statusOf(a)) && !ok(spec, steps, a));
        const cond: ConditionContext = { success, failure, cancelled: stopping, steps: (views ??= stepViews(steps)), inputs: context.inputs };
        run = holds(step.if, cond);
      }
      if (!run) {
        const failedNeed = step.needs.find((n) => !ok(spec, steps, n));
        const reason =
          step.if !== null
            ? `if: ${step.if} was false`
            : stopping
              ? context.timedOut
                ? 'the workflow timed out'
                : 'the workflow was cancelled'
              : `needs ${failedNeed} which ${statusOf(failedNeed!) === 'skipped' ? 'was skipped' : statusOf(failedNeed!)}`;
        if (records(context)) {
          // Decided; its step.skipped (same transaction) ends it. Not ended yet, so no dependant is ready.
          write(i, { ...s, status: 'skipping', reason });
          if (toSkip === context.toSkip) toSkip = [...toSkip];
          toSkip.push({ stepId: step.id, reason });
          views = null;
          continue;
        }
        write(i, { ...s, status: 'skipped', reason, endedAt: at });
        views = null;
        changed = true;
        continue;
      }
      if (active >= spec.concurrency) continue;
      write(i, { ...s, status: 'starting', attempt: 1, afterStop: stopping });
      views = null;
      if (toStart === context.toStart) toStart = [...toStart];
      toStart.push({ stepId: step.id, attempt: 1 });
      active += 1;
    }
  }
  return { steps, toStart, toSkip };
}

/**
 * A step's condition: the default `success()` is `cond.success` itself, with no expression
 * evaluated — planning looks at every pending step on every event, so a wide run pays for this
 * once per step per event.
 */
function holds(condition: string | null, cond: ConditionContext): boolean {
  return condition === null ? cond.success : evaluateCondition(parseCondition(condition), cond);
}

/** A step that ended badly without continue-on-error: it fails the run. */
function failsRun(spec: WorkflowSpec, steps: readonly StepEntry[], id: string): boolean {
  const s = steps[indexOf(spec, steps, id)]!;
  return ['failed', 'timed_out', 'cancelled', 'abandoned'].includes(s.status) && !ok(spec, steps, id);
}

/**
 * Planning for a `sequential` spec (the predecessor's semantics, src/events/workflow-model.ts):
 * one step at a time in {@link sequentialOrder}; the first step not ended is the only one looked
 * at — started when its condition holds, skipped when not — and nothing else moves while it runs,
 * retries or waits for its step.skipped. Once a step failed the run (failed, timed out or
 * abandoned without continue-on-error), `success()` is false for every later step, so the rest
 * are skipped (an `if: always()` / `failure()` step still runs); `failure()` is true from then on.
 */
function planSequential(context: WorkflowRunContext, at: string): Partial<WorkflowRunContext> {
  const spec = context.spec!;
  const steps = context.steps.slice();
  const statusOf = (id: string) => steps[indexOf(spec, steps, id)]!.status;
  const stopping = context.cancelRequested || context.timedOut;
  const toStart: Array<{ stepId: string; attempt: number }> = [...context.toStart];
  const toSkip: Array<{ stepId: string; reason: string }> = [...context.toSkip];
  const byId = new Map(spec.steps.map((s) => [s.id, s]));
  const order = sequentialOrder(spec);
  for (const id of order) {
    const i = indexOf(spec, steps, id);
    const s = steps[i]!;
    if (TERMINAL_STEP_STATUSES.has(s.status)) continue;
    // Starting, running, retrying or being skipped: the one step in progress is waited for.
    if (s.status !== 'pending') break;
    const step = byId.get(id)!;
    const stoppedBy = order.find((other) => failsRun(spec, steps, other));
    const cond: ConditionContext = {
      success: !stopping && stoppedBy === undefined && step.needs.every((n) => ok(spec, steps, n)),
      failure: stoppedBy !== undefined,
      cancelled: stopping,
      steps: step.if === null ? {} : stepViews(steps),
      inputs: context.inputs,
    };
    if (holds(step.if, cond)) {
      steps[i] = { ...s, status: 'starting', attempt: 1, afterStop: stopping };
      toStart.push({ stepId: id, attempt: 1 });
      break;
    }
    const failedNeed = step.needs.find((n) => !ok(spec, steps, n));
    const reason =
      step.if !== null
        ? `if: ${step.if} was false`
        : stopping
          ? context.timedOut
            ? 'the workflow timed out'
            : 'the workflow was cancelled'
          : stoppedBy !== undefined
            ? `step ${stoppedBy} ${statusOf(stoppedBy) === 'timed_out' ? 'timed out' : statusOf(stoppedBy)} (execution: sequential stops at the first failure)`
            : `needs ${failedNeed} which ${statusOf(failedNeed!) === 'skipped' ? 'was skipped' : statusOf(failedNeed!)}`;
    if (records(context)) {
      // Decided; its step.skipped (same transaction) ends it and plans the next step.
      steps[i] = { ...s, status: 'skipping', reason };
      toSkip.push({ stepId: id, reason });
      break;
    }
    steps[i] = { ...s, status: 'skipped', reason, endedAt: at };
  }
  return { steps, toStart, toSkip };
}

/** Every step ended. From the last one: in a run under way, the steps at the end are the last to end, so this is usually one look. */
function allEnded(context: WorkflowRunContext): boolean {
  for (let i = context.steps.length - 1; i >= 0; i--) if (!TERMINAL_STEP_STATUSES.has(context.steps[i]!.status)) return false;
  return true;
}

/** The run's final status once every step ended. */
export function finalStatus(context: WorkflowRunContext): 'succeeded' | 'failed' | 'cancelled' | 'timed_out' {
  if (context.cancelRequested) return 'cancelled';
  if (context.timedOut) return 'timed_out';
  const spec = context.spec!;
  const failed = spec.steps.some((step) => {
    const s = stepOf(context, step.id)!;
    return ['failed', 'timed_out', 'cancelled', 'abandoned'].includes(s.status) && !step.continueOnError;
  });
  return failed ? 'failed' : 'succeeded';
}

/** The steps with one step patched: a copy of the array (not of every step). */
function updateStep(context: WorkflowRunContext, stepId: string, patch: Partial<StepState>): StepEntry[] {
  const i = indexOf(context.spec, context.steps, stepId);
  const steps = context.steps.slice();
  steps[i] = { ...steps[i]!, ...patch };
  return steps;
}

/** An attempt ended badly: retry when attempts remain and the run is not stopping, else the end status. */
function endAttempt(
  context: WorkflowRunContext,
  stepId: string,
  at: string,
  status: 'failed' | 'timed_out' | 'abandoned' | 'cancelled' | 'succeeded',
  patch: Partial<StepState>,
): Partial<WorkflowRunContext> {
  const step = context.spec!.steps[specIndex(context.spec!).get(stepId)!]!;
  const current = stepOf(context, stepId)!;
  const stopping = context.cancelRequested || context.timedOut;
  const retry = status !== 'succeeded' && status !== 'cancelled' && !stopping && current.attempt < step.retries.attempts;
  if (retry) {
    const next = current.attempt + 1;
    const dueAt = new Date(Date.parse(at) + backoffDelay(step.retries.delayMs, step.retries.backoff, step.retries.maxDelayMs, next)).toISOString();
    if (records(context)) {
      // Decided; its step.retry_scheduled (same transaction) sets retryAt and arms the timer.
      const reason = retryReason(current.attempt, status, patch.error ?? null);
      return {
        steps: updateStep(context, stepId, { ...patch, status: 'retrying', retryAt: null, pendingRetry: { attempt: next, dueAt, reason }, endedAt: at, pid: null }),
        toRetry: [{ stepId, attempt: next, dueAt, reason }],
      };
    }
    return {
      steps: updateStep(context, stepId, { ...patch, status: 'retrying', retryAt: dueAt, endedAt: at, pid: null }),
      toRetry: [{ stepId, attempt: next, dueAt }],
    };
  }
  return { steps: updateStep(context, stepId, { ...patch, status, endedAt: at, retryAt: null, pid: null }), toRetry: [] };
}

/** What a retry decision says of the attempt that ended: `attempt 1 failed: exited with code 3`. */
function retryReason(attempt: number, status: StepStatus, error: string | null): string {
  const how = status === 'timed_out' ? 'timed out' : status === 'abandoned' ? 'was abandoned' : 'failed';
  return `attempt ${attempt} ${how}${error ? `: ${error}` : ''}`;
}

/**
 * The empty list every planning step starts from: one shared (never mutated) array, so an event
 * that decides nothing leaves these fields the same reference and nothing to compare.
 */
const NONE: never[] = [];

/** Applies `update` to the context, then plans (the single place where steps start or are skipped). */
function applyAndPlan(
  context: WorkflowRunContext,
  event: WorkflowRunEvent,
  update: (context: WorkflowRunContext) => Partial<WorkflowRunContext>,
): Partial<WorkflowRunContext> {
  const base = { ...context, toStart: NONE, toKill: NONE, toRetry: NONE, toSkip: NONE, ...update(context) } as WorkflowRunContext;
  // A steps array the update made is this transition's own (updateStep, stopRetries, a start's): planning may write into it.
  return { ...base, ...plan(base, event.at, base.steps !== context.steps) };
}

/** The step an event names, if the event is about its current attempt. */
const attemptOf = (context: WorkflowRunContext, event: { data: { stepId: string; attempt: number } }) => {
  const s = stepOf(context, event.data.stepId);
  return s !== undefined && s.attempt === event.data.attempt ? s : null;
};

/**
 * What a host gives the machine when it creates it with `input` (an app running loops' machine
 * itself): the spec and, optionally, the run's identity and inputs. The machine then starts
 * `running` as if its `wfrun.started` were recorded (decisions recorded, its first steps planned
 * and asked for). Without input it starts `new`, as the runtime creates it. Machines read no
 * clock: `startedAt` (default: the epoch) is the instant the workflow timeout counts from.
 */
export interface WorkflowRunInput {
  spec: WorkflowSpec;
  wfRunId?: string;
  workflowId?: string;
  /** Default: the spec's name. */
  workflowName?: string;
  version?: number;
  inputs?: Record<string, string>;
  trigger?: 'manual' | 'schedule';
  idempotencyKey?: string;
  startedAt?: string;
}

/** One step as a workflow run's output reports it. */
export interface WorkflowStepResult {
  status: StepStatus;
  /** Attempts made (0: never started). */
  attempts: number;
  exitCode: number | null;
  signal: string | null;
  error: string | null;
  /** What the step wrote to $LOOPS_OUTPUT. */
  outputs: Record<string, string>;
}

/** A workflow run's output once it ended: its status, every step's result, and why it did not succeed. */
export interface WorkflowRunOutput {
  wfRunId: string | null;
  workflowName: string | null;
  status: 'succeeded' | 'failed' | 'cancelled' | 'timed_out';
  error: string | null;
  steps: Record<string, WorkflowStepResult>;
  startedAt: string | null;
  finishedAt: string | null;
}

const WORKFLOW_RUN_ENDS = ['succeeded', 'failed', 'cancelled', 'timed_out'] as const;

/** The output of a workflow run that ended (`snapshot.output`, or computed from a restored snapshot's state), else null. */
export function workflowRunOutputOf(snapshot: { value: unknown; context: WorkflowRunContext }): WorkflowRunOutput | null {
  const status = WORKFLOW_RUN_ENDS.find((x) => x === snapshot.value);
  return status ? workflowRunOutput(snapshot.context, status) : null;
}

function workflowRunOutput(context: WorkflowRunContext, status: WorkflowRunOutput['status']): WorkflowRunOutput {
  const steps: Record<string, WorkflowStepResult> = {};
  for (const s of context.steps) {
    steps[s.id] = { status: s.status, attempts: s.attempt, exitCode: s.exitCode, signal: s.signal, error: s.error, outputs: s.outputs };
  }
  // As the workflow_runs projection words it.
  let error = context.error;
  if (error === null && status === 'cancelled') error = context.cancelReason ? `cancelled: ${context.cancelReason}` : 'cancelled';
  if (error === null && status === 'timed_out') error = `the workflow timed out after ${context.spec?.timeoutMs ?? 0} ms`;
  if (error === null && status === 'failed' && context.spec) {
    const failed = context.spec.steps.filter((st) => failsRun(context.spec!, context.steps, st.id)).map((st) => st.id);
    if (failed.length) error = `failed step${failed.length > 1 ? 's' : ''}: ${failed.join(', ')}`;
  }
  return { wfRunId: context.wfRunId, workflowName: context.workflowName, status, error, steps, startedAt: context.startedAt, finishedAt: context.finishedAt };
}

/** The context a run created with `input` has before planning (as its `wfrun.started` would set it). */
function contextFromInput(input: WorkflowRunInput): WorkflowRunContext {
  const wfRunId = input.wfRunId ?? 'embedded';
  return {
    ...initialWorkflowRunContext,
    decisions: 'recorded',
    wfRunId,
    workflowId: input.workflowId ?? input.spec.name,
    workflowName: input.workflowName ?? input.spec.name,
    version: input.version ?? 1,
    spec: input.spec,
    inputs: input.inputs ?? {},
    trigger: input.trigger ?? 'manual',
    idempotencyKey: input.idempotencyKey ?? wfRunId,
    startedAt: input.startedAt ?? new Date(0).toISOString(),
    steps: input.spec.steps.map((s) => newEntry(s.id)),
  };
}

const initialWorkflowRunContext: WorkflowRunContext = {
  decisions: 'derived',
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
  steps: [],
  cancelRequested: false,
  cancelReason: null,
  timedOut: false,
  toStart: [],
  toKill: [],
  toRetry: [],
  toSkip: [],
  error: null,
};

/** A named action of this machine with its parameters, enqueued by `decide` (setup's types cannot name sibling actions there). */
const named = (type: 'recordDecisions' | 'armRetry' | 'startSteps', params: unknown) => ({ type, params }) as never;

export const workflowRunMachine = setup({
  types: {
    context: {} as WorkflowRunContext,
    events: {} as WorkflowRunEvent,
    // void, not undefined: see run.ts.
    input: {} as WorkflowRunInput | void,
    output: {} as WorkflowRunOutput,
  },
  guards: {
    /** Created with `input`: started already (never so for a stream the runtime replays). */
    givenInput: ({ context }) => context.wfRunId !== null && context.spec !== null,
    allEnded: ({ context }) => context.spec !== null && allEnded(context),
    isStarting: ({ context, event }) => event.type === 'step.spawn_requested' && attemptOf(context, event)?.status === 'starting',
    isSpawning: ({ context, event }) =>
      (event.type === 'step.spawned' || event.type === 'step.spawn_failed') && attemptOf(context, event)?.status === 'spawning',
    isLive: ({ context, event }) =>
      (event.type === 'step.exited' || event.type === 'step.abandoned') &&
      ['spawning', 'running'].includes(attemptOf(context, event)?.status ?? ''),
    // A derived run's retrying step always has its retryAt; a recorded run's once step.retry_scheduled set it.
    isRetrying: ({ context, event }) =>
      event.type === 'step.retry_due' &&
      stepOf(context, event.data.stepId)?.status === 'retrying' &&
      stepOf(context, event.data.stepId)!.retryAt !== null &&
      stepOf(context, event.data.stepId)!.attempt + 1 === event.data.attempt,
    isSkipping: ({ context, event }) => event.type === 'step.skipped' && stepOf(context, event.data.stepId)?.status === 'skipping',
    isReusing: ({ context, event }) => event.type === 'step.reused' && stepOf(context, event.data.stepId)?.status === 'reusing',
    /** A retry decided (by the step's last attempt ending) and not yet recorded. */
    isRetryDecided: ({ context, event }) =>
      event.type === 'step.retry_scheduled' &&
      stepOf(context, event.data.stepId)?.status === 'retrying' &&
      stepOf(context, event.data.stepId)!.retryAt === null &&
      stepOf(context, event.data.stepId)!.attempt + 1 === event.data.attempt,
    notStopping: ({ context }) => !context.cancelRequested && !context.timedOut,
  },
  actions: {
    // An imported run ended when the other tool said it did.
    recordImported: assign(({ event }) => {
      if (event.type !== 'wfrun.imported') return {};
      const d = event.data;
      return {
        decisions: 'recorded' as const,
        wfRunId: d.wfRunId,
        workflowId: d.workflowId,
        workflowName: d.workflowName,
        version: d.version,
        spec: d.spec,
        trigger: d.trigger,
        loopId: d.loopId,
        startedAt: d.startedAt,
        error: d.error,
        steps: d.steps.map(
          (st): StepEntry => ({
            ...newEntry(st.stepId, st.status),
            attempt: st.startedAt === null ? 0 : 1,
            pid: st.pid,
            exitCode: st.exitCode,
            error: st.error,
            startedAt: st.startedAt,
            endedAt: st.finishedAt,
            reason: st.reason,
          }),
        ),
      };
    }),
    stampFinish: assign(({ event }) => ({ finishedAt: event.type === 'wfrun.imported' ? event.data.finishedAt : event.at })),
    /**
     * Record what planning decided, in the same transaction as the event that caused it (an inline
     * effect), in this order: `step.retry_scheduled` per retry, `step.skipped` per skip, and each
     * start's intent (`step.spawn_requested`, its rendered command line). Recorded runs. Runtime-bound.
     */
    recordDecisions: (
      _args,
      _params: {
        retries: Array<Required<RetryDecision>>;
        skips: Array<{ stepId: string; reason: string }>;
        starts: Array<{ stepId: string; attempt: number }>;
        /** A fork's start: the steps it reuses (their step.reused first). */
        reuses?: string[];
      },
    ) => {},
    /**
     * Record each step's intent (`step.spawn_requested`, its rendered command line) — in the same
     * transaction as the event that made the steps ready (an inline effect). Derived runs (their
     * recorded runs use recordDecisions). Runtime-bound.
     */
    startSteps: (_args, _params: { steps: Array<{ stepId: string; attempt: number }> }) => {},
    /** The intent is recorded: start the process. Runtime-bound. */
    spawnStep: (
      _args,
      _params: { stepId: string; attempt: number; command: string; args: string[]; shell: boolean; cwd: string | null; envKeys: string[]; timeoutAt: string | null },
    ) => {},
    /** Stop these steps' process groups (cancel, workflow timeout). Runtime-bound. */
    killSteps: (_args, _params: { stepIds: string[]; reason: string }) => {},
    /** A durable deadline: record step.retry_due at dueAt (recorded runs: once step.retry_scheduled is). Runtime-bound. */
    armRetry: (_args, _params: { retries: Array<{ stepId: string; attempt: number; dueAt: string }> }) => {},
    /** The whole-workflow timeout: record wfrun.timed_out at `at`. Runtime-bound. */
    armTimeout: (_args, _params: { at: string | null; timeoutMs: number | null }) => {},
    /** The run ended: release the lease. Runtime-bound. */
    finalize: (_args, _params: { status: string }) => {},
    /**
     * The effects of what planning decided: a recorded run records every decision inline
     * (`recordDecisions`); a derived run asks for the intents inline (`startSteps`) and, after an
     * attempt ended, for its retry timers (`armRetry`), as version 1 did.
     */
    decide: enqueueActions(({ context, event, enqueue }, params: { afterAttempt: boolean }) => {
      if (records(context)) {
        const reuses = event.type === 'wfrun.started' ? (event.data.reuse ?? []) : [];
        enqueue(
          named('recordDecisions', {
            retries: context.toRetry as Array<Required<RetryDecision>>,
            skips: context.toSkip,
            starts: context.toStart,
            ...(reuses.length ? { reuses } : {}),
          }),
        );
        return;
      }
      if (params.afterAttempt) enqueue(named('armRetry', { retries: context.toRetry }));
      enqueue(named('startSteps', { steps: context.toStart }));
    }),
  },
}).createMachine({
  id: WORKFLOW_RUN_MACHINE_ID,
  initial: 'new',
  context: ({ input }) => (input ? contextFromInput(input as WorkflowRunInput) : initialWorkflowRunContext),
  output: ({ context, event }) => workflowRunOutput(context, (event as unknown as { output: { status: WorkflowRunOutput['status'] } }).output.status),
  states: {
    new: {
      // Created with input: plan and ask for the first steps, as wfrun.started does.
      always: {
        guard: 'givenInput',
        target: 'running',
        actions: [
          assign(({ context }) => applyAndPlan(context, { at: context.startedAt! } as WorkflowRunEvent, () => ({}))),
          { type: 'armTimeout', params: ({ context }) => timeoutParams(context) },
          { type: 'decide', params: { afterAttempt: false } },
        ],
      },
      on: {
        // Another tool's finished workflow run, brought across whole (loops import): straight to its end.
        'wfrun.imported': [
          { guard: ({ event }) => event.data.status === 'succeeded', target: 'succeeded', actions: 'recordImported' },
          { guard: ({ event }) => event.data.status === 'cancelled', target: 'cancelled', actions: 'recordImported' },
          { guard: ({ event }) => event.data.status === 'timed_out', target: 'timed_out', actions: 'recordImported' },
          { target: 'failed', actions: 'recordImported' },
        ],
        'wfrun.started': {
          target: 'running',
          actions: [
            assign(({ context, event }) => applyAndPlan(context, event, () => {
              const d = (event as E<'wfrun.started'>).data;
              return {
                decisions: d.decisions === 'recorded' ? 'recorded' : 'derived',
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
                // A fork's reused steps wait for their step.reused (same transaction); the rest plan as usual.
                steps: d.spec.steps.map((s) => newEntry(s.id, d.reuse?.includes(s.id) ? 'reusing' : 'pending')),
              };
            })),
            { type: 'armTimeout', params: ({ context }) => timeoutParams(context) },
            { type: 'decide', params: { afterAttempt: false } },
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
                startedAt: stepOf(context, event.data.stepId)!.startedAt ?? event.at,
              }),
              toStart: NONE,
            })),
            { type: 'spawnStep', params: ({ event }) => event.data },
          ],
        },
        'step.spawned': {
          guard: 'isSpawning',
          actions: assign(({ context, event }) => ({
            steps: updateStep(context, event.data.stepId, { status: 'running', pid: event.data.pid, startTime: event.data.startTime, bootId: event.data.bootId }),
            toStart: NONE,
          })),
        },
        'step.spawn_failed': {
          guard: 'isSpawning',
          actions: [
            assign(({ context, event }) => applyAndPlan(context, event, (context) => {
              const d = (event as E<'step.spawn_failed'>).data;
              return endAttempt(context, d.stepId, event.at, 'failed', { error: d.error, exitCode: null });
            })),
            { type: 'decide', params: { afterAttempt: true } },
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
            { type: 'decide', params: { afterAttempt: true } },
          ],
        },
        'step.abandoned': {
          guard: 'isLive',
          actions: [
            assign(({ context, event }) => applyAndPlan(context, event, (context) => {
              const d = (event as E<'step.abandoned'>).data;
              return endAttempt(context, d.stepId, event.at, 'abandoned', { error: d.reason, exitCode: null });
            })),
            { type: 'decide', params: { afterAttempt: true } },
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
            { type: 'decide', params: { afterAttempt: false } },
          ],
        },
        // Recorded runs: the decisions, as recorded (each in the transaction of the event that caused it).
        'step.skipped': {
          guard: 'isSkipping',
          actions: [
            assign(({ context, event }) => applyAndPlan(context, event, (context) => {
              const d = (event as E<'step.skipped'>).data;
              return { steps: updateStep(context, d.stepId, { status: 'skipped', reason: d.reason, endedAt: event.at }) };
            })),
            { type: 'decide', params: { afterAttempt: false } },
          ],
        },
        // A fork's reused step takes the result recorded for it, and its dependants are planned.
        'step.reused': {
          guard: 'isReusing',
          actions: [
            assign(({ context, event }) => applyAndPlan(context, event, (context) => {
              const d = (event as E<'step.reused'>).data;
              return {
                steps: updateStep(context, d.stepId, { status: d.status, exitCode: d.exitCode, signal: d.signal, error: d.error, outputs: d.outputs, reason: d.reason }),
              };
            })),
            { type: 'decide', params: { afterAttempt: false } },
          ],
        },
        'step.retry_scheduled': {
          guard: 'isRetryDecided',
          actions: [
            assign(({ context, event }) => {
              const d = (event as E<'step.retry_scheduled'>).data;
              return { steps: updateStep(context, d.stepId, { retryAt: d.dueAt, pendingRetry: null }) };
            }),
            {
              type: 'armRetry',
              params: ({ event }) => {
                const d = (event as E<'step.retry_scheduled'>).data;
                return { retries: [{ stepId: d.stepId, attempt: d.attempt, dueAt: d.dueAt }] };
              },
            },
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
            { type: 'decide', params: { afterAttempt: false } },
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
            { type: 'decide', params: { afterAttempt: false } },
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
    succeeded: { type: 'final', output: { status: 'succeeded' as const }, entry: ['stampFinish', { type: 'finalize', params: { status: 'succeeded' } }] },
    failed: { type: 'final', output: { status: 'failed' as const }, entry: ['stampFinish', { type: 'finalize', params: { status: 'failed' } }] },
    cancelled: { type: 'final', output: { status: 'cancelled' as const }, entry: ['stampFinish', { type: 'finalize', params: { status: 'cancelled' } }] },
    timed_out: { type: 'final', output: { status: 'timed_out' as const }, entry: ['stampFinish', { type: 'finalize', params: { status: 'timed_out' } }] },
  },
});

/** `armTimeout`'s params: the whole-workflow deadline, from the run's start. */
function timeoutParams(context: WorkflowRunContext): { timeoutMs: number | null; at: string | null } {
  return {
    timeoutMs: context.spec!.timeoutMs,
    at: context.spec!.timeoutMs === null ? null : new Date(Date.parse(context.startedAt!) + context.spec!.timeoutMs).toISOString(),
  };
}

/** Steps waiting for a retry end as cancelled when the run is stopping. */
function stopRetries(context: WorkflowRunContext, at: string): Partial<WorkflowRunContext> {
  let steps = context.steps;
  steps.forEach((s, i) => {
    if (s.status !== 'retrying') return;
    if (steps === context.steps) steps = steps.slice();
    steps[i] = { ...s, status: 'cancelled', retryAt: null, ...(s.pendingRetry ? { pendingRetry: null } : {}), endedAt: at };
  });
  return { steps };
}

function activeSteps(context: WorkflowRunContext): string[] {
  return context.steps.filter((s) => ACTIVE_STEP_STATUSES.has(s.status)).map((s) => s.id);
}
