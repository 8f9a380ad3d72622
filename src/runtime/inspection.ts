/**
 * XState's Inspect API for the durable actors (actor.ts): a runtime opened with `inspect` (an
 * `@statelyai/inspect` inspector's `inspect`, or any observer or function of XState inspection
 * events) is told of every stream actor it creates or restores (`@xstate.actor`), and of every
 * event it records or catches up with — after the event is in the log — with the snapshot it led
 * to (`@xstate.event`, then `@xstate.snapshot`). The actor's ref is a stand-in: its `sessionId`
 * and `id` are the stream id, `getSnapshot()` the actor's snapshot now, `logic` its machine (for a
 * definition); it accepts no events (events reach a stream through the log). An inspector that
 * throws is ignored: inspection never fails a record.
 */
import type { AnyMachineSnapshot, AnyStateMachine, InspectionEvent, Observer } from 'xstate';

/** An XState inspector: `createActor`'s `inspect` option, e.g. `createBrowserInspector().inspect`. */
export type Inspector = Observer<InspectionEvent> | ((event: InspectionEvent) => void);

/** What an inspected durable actor shows of itself. */
export interface InspectedActor {
  readonly streamId: string;
  readonly machine: AnyStateMachine;
  readonly snapshot: AnyMachineSnapshot;
}

const refs = new WeakMap<InspectedActor, InspectionEvent['actorRef']>();

function refOf(actor: InspectedActor): InspectionEvent['actorRef'] {
  let ref = refs.get(actor);
  if (!ref) {
    ref = {
      sessionId: actor.streamId,
      id: actor.streamId,
      src: actor.machine.id,
      logic: actor.machine,
      getSnapshot: () => actor.snapshot,
      send: () => {
        throw new Error(`${actor.streamId} takes its events from the log: record them through the runtime`);
      },
    } as unknown as InspectionEvent['actorRef'];
    refs.set(actor, ref);
  }
  return ref;
}

function tell(inspector: Inspector, event: InspectionEvent): void {
  try {
    if (typeof inspector === 'function') inspector(event);
    else inspector.next?.(event);
  } catch {
    // an inspector's failure is its own: the record stands
  }
}

/** `@xstate.actor`: a durable actor was created or restored. */
export function inspectActor(inspector: Inspector | undefined, actor: InspectedActor): void {
  if (!inspector) return;
  tell(inspector, { type: '@xstate.actor', rootId: actor.streamId, actorRef: refOf(actor) });
}

/** `@xstate.event` then `@xstate.snapshot`: an event is in the log, and the state it led to. */
export function inspectStep(
  inspector: Inspector | undefined,
  actor: InspectedActor,
  event: { type: string; at: string; data: unknown },
  snapshot: AnyMachineSnapshot,
): void {
  if (!inspector) return;
  const actorRef = refOf(actor);
  const machineEvent = { type: event.type, at: event.at, data: event.data };
  tell(inspector, { type: '@xstate.event', rootId: actor.streamId, actorRef, sourceRef: undefined, event: machineEvent });
  tell(inspector, { type: '@xstate.snapshot', rootId: actor.streamId, actorRef, event: machineEvent, snapshot });
}
