/**
 * Typed wrappers over the pure fold (fold.ts) and the machines' events, for apps that embed loops'
 * machines: `foldAs(runMachine, events)` is the machine's own `SnapshotFrom<typeof runMachine>`, so
 * `snapshot.context.exitCode` and `snapshot.output` are typed; `machineEvent('process.exited', at,
 * data)` checks the payload against the catalogue's type. Pure: no clock, no I/O.
 */
import type { AnyStateMachine, EventFromLogic, OutputFrom, SnapshotFrom } from 'xstate';
import type { EventData, EventType } from '../events/catalog.js';
import type { MachineEvent } from './events.js';
import { fold, step } from './fold.js';

/** An event as the log stores it: what `foldAs` reads. */
export interface LoggedEvent {
  type: string;
  at: string;
  data: unknown;
}

/**
 * Restores a stream by folding its events through `machine` with the pure transition (replayed
 * actions are returned by `fold`, never executed) and returns the machine's own snapshot type.
 * `M` is inferred from `machine`; `foldAs<typeof runMachine>(runMachine, events)` says it.
 */
export function foldAs<M extends AnyStateMachine>(machine: M, events: Iterable<LoggedEvent>): SnapshotFrom<M> {
  return fold(machine, events).snapshot as SnapshotFrom<M>;
}

/** One pure step from a typed snapshot: the next snapshot (typed) and the actions it asks for. */
export function stepAs<M extends AnyStateMachine>(
  machine: M,
  snapshot: SnapshotFrom<M>,
  event: LoggedEvent,
): { snapshot: SnapshotFrom<M>; accepted: boolean; actions: ReadonlyArray<{ type: string; params?: unknown }> } {
  const result = step(machine, snapshot as never, event);
  return { snapshot: result.after as SnapshotFrom<M>, accepted: result.accepted, actions: result.actions };
}

/** A machine event of the catalogue, its payload checked by the compiler: `machineEvent('process.exited', at, {...})`. */
export function machineEvent<T extends EventType>(type: T, at: string, data: EventData<T>): MachineEvent<T> {
  return { type, at, data } as MachineEvent<T>;
}

/** The events a machine accepts (its `setup({ types: { events } })`). */
export type EventsOf<M extends AnyStateMachine> = EventFromLogic<M>;
/** What a machine's `onDone` receives as `event.output`. */
export type OutputOf<M extends AnyStateMachine> = OutputFrom<M>;
