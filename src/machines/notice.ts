/**
 * The notice machine: one actor per notice, stream `notice:<id>` — telling someone that a loop's
 * run ended (`--on-failure` runs a command, `--notify-url` POSTs a JSON summary).
 *
 * new ─notice.requested─► pending ─notice.delivered─► delivered
 *                           │ ▲    ─notice.hook_ended─► ran
 *                           └─┘    ─notice.given_up──► given_up
 *      notice.hook_claimed / notice.attempt_failed
 *
 * Pure. The runtime delivers (src/runtime/loops/notify.ts); a pending notice whose runner stopped
 * is finished by the next one, from what its stream says (attempts made, the next try's time, the
 * hook run's id).
 */
import { assign, setup } from 'xstate';
import type { EventData } from '../events/catalog.js';
import type { MachineEvent } from './events.js';

export const NOTICE_MACHINE_ID = 'loops.notice';
export const NOTICE_MACHINE_VERSION = 1;

export interface NoticeContext {
  request: EventData<'notice.requested'> | null;
  /** POSTs that failed so far. */
  failedAttempts: number;
  /** When the next POST is due (null: now). */
  retryAt: string | null;
  lastError: string | null;
  /** The `--on-failure` command's run, once its id is recorded. */
  hookRunId: string | null;
  /** Its attempt in the hook's slot: how many runs were claimed for it (a replaced one never started). */
  hookAttempt: number;
}

export type NoticeEvent = MachineEvent<
  'notice.requested' | 'notice.hook_claimed' | 'notice.hook_ended' | 'notice.attempt_failed' | 'notice.delivered' | 'notice.given_up'
>;

export const noticeMachine = setup({
  types: { context: {} as NoticeContext, events: {} as NoticeEvent },
}).createMachine({
  id: NOTICE_MACHINE_ID,
  initial: 'new',
  context: { request: null, failedAttempts: 0, retryAt: null, lastError: null, hookRunId: null, hookAttempt: 0 },
  states: {
    new: {
      on: { 'notice.requested': { target: 'pending', actions: assign(({ event }) => ({ request: event.data })) } },
    },
    pending: {
      on: {
        // The first claim, or one that replaces the claimed run (it never started: notify.ts).
        'notice.hook_claimed': {
          guard: ({ context, event }) => context.request?.channel === 'command' && context.hookRunId === event.data.replaces,
          actions: assign(({ event, context }) => ({ hookRunId: event.data.hookRunId, hookAttempt: context.hookAttempt + 1 })),
        },
        'notice.attempt_failed': {
          guard: ({ context }) => context.request?.channel === 'url',
          actions: assign(({ event, context }) => ({
            failedAttempts: context.failedAttempts + 1,
            retryAt: event.data.retryAt,
            lastError: event.data.error,
          })),
        },
        'notice.delivered': { target: 'delivered', guard: ({ context }) => context.request?.channel === 'url' },
        'notice.hook_ended': { target: 'ran', guard: ({ context }) => context.request?.channel === 'command' },
        'notice.given_up': { target: 'given_up', actions: assign(({ event }) => ({ lastError: event.data.error })) },
      },
    },
    delivered: { type: 'final' },
    ran: { type: 'final' },
    given_up: { type: 'final' },
  },
});
