/**
 * The loop machine: one actor per loop definition, stream `loop:<id>`.
 *
 * new ──loop.created──► active ⇄ paused
 *                          │  ╲     │
 *                          ▼   ╲    ▼
 *                       stopped ─► archived ─► removed (final)
 *
 * Pure: time and the next due time arrive in event payloads; effects leave as named actions
 * (`scheduleChanged`) that the runtime binds.
 */
import { assign, setup } from 'xstate';
import type { LoopPolicies, Schedule, Target, Timing } from '../events/catalog.js';
import type { MachineEvent } from './events.js';

export const LOOP_MACHINE_ID = 'loops.loop';
export const LOOP_MACHINE_VERSION = 1;

export interface LoopContext {
  loopId: string | null;
  name: string | null;
  description: string | null;
  schedule: Schedule | null;
  timing: Timing | null;
  target: Target | null;
  policies: LoopPolicies | null;
  /** Next due time (ISO UTC), null when the loop will not fire by itself. */
  nextRunAt: string | null;
  /** Reason given with the last pause / stop / archive / remove. */
  reason: string | null;
  createdAt: string | null;
  updatedAt: string | null;
  /** Slots at or before this instant are not due: the creation time, or the last resume. */
  scheduleFrom: string | null;
  /** The latest slot that got a decision (fired, skipped, coalesced or missed). */
  lastSlot: string | null;
  /** Slots fired so far (what max-runs counts). */
  scheduledRuns: number;
}

export type LoopEvent = MachineEvent<
  | 'loop.created'
  | 'loop.paused'
  | 'loop.resumed'
  | 'loop.stopped'
  | 'loop.archived'
  | 'loop.removed'
  | 'loop.expired'
  | 'loop.rescheduled'
  | 'slot.retry_scheduled'
  | 'slot.fired'
  | 'slot.skipped'
  | 'slot.coalesced'
  | 'slot.missed'
  | 'slot.buffered'
  | 'slot.dropped'
>;

export const loopMachine = setup({
  types: {
    context: {} as LoopContext,
    events: {} as LoopEvent,
  },
  actions: {
    applyResume: assign(({ event }) => {
      if (event.type !== 'loop.resumed') return {};
      // Slots that passed while the loop was not active are not caught up.
      return { reason: event.data.reason, nextRunAt: event.data.nextRunAt, updatedAt: event.at, scheduleFrom: event.at };
    }),
    /** A slot decision: remember the latest decided slot and the next due time. */
    applyDecision: assign(({ event, context }) => {
      switch (event.type) {
        case 'slot.fired':
          return {
            lastSlot: later(context.lastSlot, event.data.slot),
            nextRunAt: event.data.nextRunAt,
            scheduledRuns: context.scheduledRuns + 1,
          };
        case 'slot.buffered':
          // It will run: it counts against --max-runs like a fired slot.
          return {
            lastSlot: later(context.lastSlot, event.data.slot),
            nextRunAt: event.data.nextRunAt,
            scheduledRuns: context.scheduledRuns + 1,
          };
        case 'slot.skipped':
          return { lastSlot: later(context.lastSlot, event.data.slot), nextRunAt: event.data.nextRunAt };
        case 'slot.coalesced':
          return { lastSlot: later(context.lastSlot, event.data.to) };
        case 'slot.missed':
          return { lastSlot: later(context.lastSlot, event.data.to), nextRunAt: event.data.nextRunAt };
        default:
          return {};
      }
    }),
    /** Work it had decided on will not run (slot.dropped): nothing changes but the time. */
    noteDropped: assign(({ event }) => ({ updatedAt: event.at })),
    /** The loop's due time changed (or it stopped being due): the scheduler re-arms. Runtime-bound. */
    scheduleChanged: (_args, _params: { loopId: string | null; nextRunAt: string | null }) => {},
  },
}).createMachine({
  id: LOOP_MACHINE_ID,
  initial: 'new',
  context: {
    loopId: null,
    name: null,
    description: null,
    schedule: null,
    timing: null,
    target: null,
    policies: null,
    nextRunAt: null,
    reason: null,
    createdAt: null,
    updatedAt: null,
    scheduleFrom: null,
    lastSlot: null,
    scheduledRuns: 0,
  },
  states: {
    new: {
      on: {
        'loop.created': {
          target: 'active',
          actions: assign(({ event }) => ({
            loopId: event.data.loopId,
            name: event.data.name,
            description: event.data.description,
            schedule: event.data.schedule,
            timing: event.data.timing,
            target: event.data.target,
            policies: event.data.policies,
            nextRunAt: event.data.nextRunAt,
            createdAt: event.at,
            updatedAt: event.at,
            // An imported loop starts where the other tool's schedule stood.
            scheduleFrom: event.data.scheduleFrom ?? event.at,
          })),
        },
      },
    },
    active: {
      entry: {
        type: 'scheduleChanged',
        params: ({ context }) => ({ loopId: context.loopId, nextRunAt: context.nextRunAt }),
      },
      on: {
        'loop.paused': {
          target: 'paused',
          actions: assign(({ event }) => ({ reason: event.data.reason, nextRunAt: null, updatedAt: event.at })),
        },
        'loop.stopped': { target: 'stopped' },
        'loop.archived': { target: 'archived' },
        'loop.removed': { target: 'removed' },
        'loop.expired': { target: 'expired' },
        'slot.fired': { actions: 'applyDecision' },
        'slot.skipped': { actions: 'applyDecision' },
        'slot.coalesced': { actions: 'applyDecision' },
        'slot.missed': { actions: 'applyDecision' },
        'slot.buffered': { actions: 'applyDecision' },
        'loop.rescheduled': {
          actions: assign(({ event }) => ({ nextRunAt: event.data.nextRunAt, updatedAt: event.at })),
        },
        // A failed attempt is retried later under the same slot; the retry is a run of its own.
        'slot.retry_scheduled': { actions: assign(({ event }) => ({ updatedAt: event.at })) },
        'slot.dropped': { actions: 'noteDropped' },
      },
    },
    /** Past --expires-at or --max-runs: it fires no more. Its history stays; it can be archived or removed. */
    expired: {
      entry: [
        assign(({ event }) => ({ nextRunAt: null, updatedAt: event.at })),
        { type: 'scheduleChanged', params: ({ context }) => ({ loopId: context.loopId, nextRunAt: null }) },
      ],
      on: {
        'loop.archived': { target: 'archived' },
        'loop.removed': { target: 'removed' },
        // Its last slots still get their retries (the slot fired before the loop expired).
        'slot.retry_scheduled': { actions: assign(({ event }) => ({ updatedAt: event.at })) },
        'slot.dropped': { actions: 'noteDropped' },
      },
    },
    paused: {
      entry: { type: 'scheduleChanged', params: ({ context }) => ({ loopId: context.loopId, nextRunAt: null }) },
      on: {
        'loop.resumed': { target: 'active', actions: 'applyResume' },
        'slot.dropped': { actions: 'noteDropped' },
        'loop.stopped': { target: 'stopped' },
        'loop.archived': { target: 'archived' },
        'loop.removed': { target: 'removed' },
      },
    },
    stopped: {
      entry: [
        assign(({ event }) => ({
          reason: 'reason' in event.data ? event.data.reason : null,
          nextRunAt: null,
          updatedAt: event.at,
        })),
        { type: 'scheduleChanged', params: ({ context }) => ({ loopId: context.loopId, nextRunAt: null }) },
      ],
      on: {
        'loop.resumed': { target: 'active', actions: 'applyResume' },
        'slot.dropped': { actions: 'noteDropped' },
        'loop.archived': { target: 'archived' },
        'loop.removed': { target: 'removed' },
      },
    },
    archived: {
      entry: [
        assign(({ event }) => ({
          reason: 'reason' in event.data ? event.data.reason : null,
          nextRunAt: null,
          updatedAt: event.at,
        })),
        { type: 'scheduleChanged', params: ({ context }) => ({ loopId: context.loopId, nextRunAt: null }) },
      ],
      on: {
        'loop.removed': { target: 'removed' },
        'slot.dropped': { actions: 'noteDropped' },
      },
    },
    removed: {
      type: 'final',
      entry: [
        assign(({ event }) => ({
          reason: 'reason' in event.data ? event.data.reason : null,
          nextRunAt: null,
          updatedAt: event.at,
        })),
        { type: 'scheduleChanged', params: ({ context }) => ({ loopId: context.loopId, nextRunAt: null }) },
      ],
    },
  },
});

function later(a: string | null, b: string): string {
  return a === null || Date.parse(b) > Date.parse(a) ? b : a;
}
