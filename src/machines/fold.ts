/**
 * Folding a stream through a machine with the pure `transition()` — the only way a stream is
 * restored. Restoring with `createActor(machine, { snapshot })` would restart invoked actors and
 * could repeat side effects; here the replayed actions are returned, never executed.
 */
import { initialTransition, transition } from 'xstate';
import type { AnyMachineSnapshot, AnyStateMachine } from 'xstate';
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

export function initialSnapshot(machine: AnyStateMachine): AnyMachineSnapshot {
  return initialTransition(machine)[0] as AnyMachineSnapshot;
}

/** One pure step: the next snapshot and the actions the runtime should execute. */
export function step(
  machine: AnyStateMachine,
  snapshot: AnyMachineSnapshot,
  event: { type: string; at: string; data: unknown },
): FoldStep {
  const machineEvent = toMachineEvent(event);
  const accepted = snapshot.can(machineEvent);
  const [after, actions] = transition(machine, snapshot, machineEvent);
  return {
    event: machineEvent,
    before: snapshot,
    after: after as AnyMachineSnapshot,
    accepted,
    actions: actions.map((action) => ({ type: action.type, params: action.params })),
  };
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
