/**
 * Folding a stream through a machine with the pure `transition()` — the only way a stream is
 * restored. Restoring with `createActor(machine, { snapshot })` would restart invoked actors and
 * could repeat side effects; here the replayed actions are returned, never executed.
 */
import { createActor, initialTransition } from 'xstate';
import type { ActorScope, AnyMachineSnapshot, AnyStateMachine, EventObject } from 'xstate';
import { isAnnotation } from '../events/catalog.js';
import type { Json } from '../events/types.js';
import { toMachineEvent } from './events.js';

export interface FoldStep {
  event: { type: string; at: string; data: unknown };
  before: AnyMachineSnapshot;
  after: AnyMachineSnapshot;
  /** False when the machine did not accept the event in the state it was in. */
  accepted: boolean;
  actions: ReadonlyArray<{ type: string; params?: unknown }>;
}

const initialSnapshots = new WeakMap<AnyStateMachine, AnyMachineSnapshot>();

/** The machine's initial snapshot. Snapshots are immutable, so one is computed per machine and shared. */
export function initialSnapshot(machine: AnyStateMachine): AnyMachineSnapshot {
  let snapshot = initialSnapshots.get(machine);
  if (!snapshot) {
    snapshot = initialTransition(machine)[0] as AnyMachineSnapshot;
    fastContext(snapshot);
    initialSnapshots.set(machine, snapshot);
  }
  return snapshot;
}

interface Scope {
  scope: ActorScope<AnyMachineSnapshot, EventObject>;
  sink: { actions: Array<{ type: string; params?: unknown }> };
}
const scopes = new WeakMap<AnyStateMachine, Scope>();

/**
 * XState's `transition(machine, snapshot, event)` without its per-call set-up: `transition()`
 * builds a fresh inert actor scope on every call, and building it computes the machine's initial
 * state — more than half the cost of a step. The scope here is the same inert scope, built once
 * per machine: actions are collected, never executed, and nothing is spawned (these machines
 * invoke no actors). `machine.transition(snapshot, event, scope)` is XState's public
 * ActorLogic method; the result equals `transition()`'s (a unit test checks it).
 */
export function pureTransition(
  machine: AnyStateMachine,
  snapshot: AnyMachineSnapshot,
  event: EventObject,
): [AnyMachineSnapshot, Array<{ type: string; params?: unknown }>] {
  let entry = scopes.get(machine);
  if (!entry) {
    const self = createActor(machine);
    const sink: Scope['sink'] = { actions: [] };
    const scope = {
      self,
      defer: () => {},
      id: '',
      logger: () => {},
      sessionId: '',
      stopChild: () => {},
      system: self.system,
      emit: () => {},
      actionExecutor: (action: { type: string; params?: unknown }) => {
        sink.actions.push(action);
      },
    } as unknown as Scope['scope'];
    entry = { scope, sink };
    scopes.set(machine, entry);
  }
  entry.sink.actions = [];
  const next = machine.transition(snapshot, event, entry.scope) as AnyMachineSnapshot;
  const actions = entry.sink.actions;
  entry.sink.actions = [];
  if (next !== snapshot && next.context !== snapshot.context) fastContext(next);
  return [next, actions];
}

/**
 * Gives a snapshot a copy of its context in V8's fast mode. XState builds each new context with
 * `Object.assign({}, context, update)`, which past a dozen fields leaves the object in dictionary
 * mode, and then every later `Object.assign` of it (the next step's), every read of its fields and
 * every `JSON.stringify` of it takes the slow path: 7-8 µs for one assign of a run's 25-field
 * context against 0.5 µs for a fast one. A spread copy has the same fields, in the same order, in
 * fast mode; the snapshot is new and nobody holds it yet.
 */
function fastContext(snapshot: AnyMachineSnapshot): void {
  const context: unknown = snapshot.context;
  if (typeof context === 'object' && context !== null && !Array.isArray(context)) {
    (snapshot as { context: unknown }).context = { ...(context as Record<string, unknown>) };
  }
}

/** One pure step: the next snapshot and the actions the runtime should execute. */
export function step(
  machine: AnyStateMachine,
  snapshot: AnyMachineSnapshot,
  event: { type: string; at: string; data: unknown },
): FoldStep {
  const machineEvent = toMachineEvent(event);
  if (event.type === ARCHIVED) return restoreArchived(machine, snapshot, machineEvent);
  // An annotation (catalogue: `annotation: true`) is recorded on the stream; no machine sees it.
  if (isAnnotation(event.type)) return { event: machineEvent, before: snapshot, after: snapshot, accepted: true, actions: [] };
  const [after, actions] = pureTransition(machine, snapshot, machineEvent);
  // XState returns the very same snapshot when no transition was enabled for the event (the
  // answer `snapshot.can()` gives, without computing the transition twice).
  const accepted = after !== snapshot;
  return {
    event: machineEvent,
    before: snapshot,
    after: after as AnyMachineSnapshot,
    accepted,
    actions: actions.map((action) => ({ type: action.type, params: action.params })),
  };
}

/** The tombstone of a stream whose earlier events were archived (see the catalogue). */
export const ARCHIVED = 'stream.archived';

/**
 * `stream.archived` restores the final state it records, whatever came before: nothing, when the
 * archived events are gone (the context stays the initial one: nothing reads an ended stream's
 * context), or the archived events themselves, replayed from the archive file — then they must
 * have led to this state, or the step is not accepted (their context is kept). No machine sees
 * the event, and it asks for no effect.
 */
function restoreArchived(machine: AnyStateMachine, snapshot: AnyMachineSnapshot, event: EventObject): FoldStep {
  const recorded = (event as unknown as { data: { state: unknown } }).data.state;
  const after = machine.resolveState({ value: recorded as never, context: snapshot.context as never }) as AnyMachineSnapshot;
  const fresh = snapshot === initialSnapshot(machine);
  const accepted = after.status === 'done' && (fresh || JSON.stringify(snapshot.value) === JSON.stringify(recorded));
  return { event: event as FoldStep['event'], before: snapshot, after, accepted, actions: [] };
}

/** Folds events from the initial state; returns every step (for replay) and the final snapshot. */
export function fold(
  machine: AnyStateMachine,
  events: Iterable<{ type: string; at: string; data: unknown }>,
): { snapshot: AnyMachineSnapshot; steps: FoldStep[] } {
  let snapshot = initialSnapshot(machine);
  const steps: FoldStep[] = [];
  for (const event of events) {
    const result = step(machine, snapshot, event);
    steps.push(result);
    snapshot = result.after;
  }
  return { snapshot, steps };
}

/** The state value as recorded in the log. */
export function stateOf(snapshot: AnyMachineSnapshot): Json {
  return snapshot.value as Json;
}
