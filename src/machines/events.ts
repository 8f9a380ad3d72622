/**
 * Machine events are stored events reduced to what a machine may see: the type, the time the
 * event happened (`at`, from the runtime's clock) and the payload. Machines never read a clock.
 */
import type { EventData, EventType } from '../events/catalog.js';
import type { StoredEvent } from '../events/types.js';

export type MachineEvent<T extends EventType = EventType> = T extends EventType
  ? { type: T; at: string; data: EventData<T> }
  : never;

export function toMachineEvent(event: Pick<StoredEvent, 'type' | 'at' | 'data'>): MachineEvent {
  return { type: event.type, at: event.at, data: event.data } as MachineEvent;
}
