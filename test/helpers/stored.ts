/**
 * Turning machine events into stored events the way the runtime does (state after each event
 * from a fold of the stream's machine, contiguous versions, global positions), for projection
 * tests that do not go through the log.
 */
import type { AnyStateMachine } from 'xstate';
import type { StoredEvent } from '../../src/events/types.js';
import { fold, stateOf } from '../../src/machines/fold.js';
import type { MachineInput } from './machine.js';

export class Positions {
  private next = 1;
  take(): number {
    return this.next++;
  }
}

export function storedStream(
  machine: AnyStateMachine,
  streamId: string,
  events: ReadonlyArray<MachineInput>,
  positions: Positions,
): StoredEvent[] {
  const { steps } = fold(machine, events);
  return events.map((event, i) => ({
    position: positions.take(),
    streamId,
    version: i + 1,
    type: event.type,
    v: 1,
    data: event.data,
    meta: {},
    at: event.at,
    state: stateOf(steps[i]!.after),
  }));
}
