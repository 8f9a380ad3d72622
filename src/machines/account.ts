/**
 * The account machine: one actor per credentials profile, stream `account:<id>`.
 *
 * new ─account.added─► active ─account.removed─► removed
 */
import { assign, setup } from 'xstate';
import type { MachineEvent } from './events.js';

export const ACCOUNT_MACHINE_ID = 'loops.account';
export const ACCOUNT_MACHINE_VERSION = 1;

export interface AccountContext {
  accountId: string | null;
  name: string | null;
  tool: string | null;
  dir: string | null;
}

export type AccountEvent = MachineEvent<'account.added'> | MachineEvent<'account.removed'>;

export const accountMachine = setup({
  types: { context: {} as AccountContext, events: {} as AccountEvent },
}).createMachine({
  id: ACCOUNT_MACHINE_ID,
  initial: 'new',
  context: { accountId: null, name: null, tool: null, dir: null },
  states: {
    new: {
      on: {
        'account.added': {
          target: 'active',
          actions: assign(({ event }) => ({ accountId: event.data.accountId, name: event.data.name, tool: event.data.tool, dir: event.data.dir })),
        },
      },
    },
    active: { on: { 'account.removed': { target: 'removed' } } },
    removed: { type: 'final' },
  },
});
