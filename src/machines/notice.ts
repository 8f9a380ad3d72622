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
}

export type NoticeEvent = MachineEvent<
  'notice.requested' | 'notice.hook_claimed' | 'notice.hook_ended' | 'notice.attempt_failed' | 'notice.delivered' | 'notice.given_up'
>;

export const noticeMachine = setup({
  types: { context: {} as NoticeContext, events: {} as NoticeEvent },
}).createMachine({
  id: NOTICE_MACHINE_ID,
  initial: 'new',
  context: { request: null, failedAttempts: 0, retryAt: null, lastError: null, hookRunId: null },
  states: {
    new: {
      on: { 'notice.requested': { target: 'pending', actions: assign(({ event }) => ({ request: event.data })) } },
    },
    pending: {
      on: {
        'notice.hook_claimed': {
          guard: ({ context }) => context.request?.channel === 'command' && context.hookRunId === null,
          actions: assign(({ event }) => ({ hookRunId: event.data.hookRunId })),
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
