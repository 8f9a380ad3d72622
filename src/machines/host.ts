/**
 * The host machine: one actor per runner host, stream `host:<hostId>` — which daemon runs there
 * and the labels it runs loops for (`--runs-on`, src/runtime/daemon/hosts.ts).
 *
 * new ─host.started─► up ─host.stopped─► down
 *                     ▲ │ host.started         │
 *                     └─┘ (restarted after     │
 *                          a kill: no stop)    │
 *                     ◄────host.started────────┘
 *
 * Never final: a host comes and goes. Whether its daemon is alive now is its daemon lease's
 * business, not the log's — a daemon killed with SIGKILL records no stop.
 */
import { assign, setup } from 'xstate';
import type { MachineEvent } from './events.js';

export const HOST_MACHINE_ID = 'loops.host';
export const HOST_MACHINE_VERSION = 1;

export interface HostContext {
  hostId: string | null;
  runnerId: string | null;
  labels: string[];
}

export type HostEvent = MachineEvent<'host.started' | 'host.stopped'>;

export const hostMachine = setup({
  types: { context: {} as HostContext, events: {} as HostEvent },
  actions: {
    started: assign(({ event }) =>
      event.type === 'host.started' ? { hostId: event.data.hostId, runnerId: event.data.runnerId, labels: event.data.labels } : {},
    ),
  },
}).createMachine({
  id: HOST_MACHINE_ID,
  initial: 'new',
  context: { hostId: null, runnerId: null, labels: [] },
  states: {
    new: { on: { 'host.started': { target: 'up', actions: 'started' } } },
    up: {
      on: {
        'host.started': { target: 'up', actions: 'started' },
        // Only the daemon that started last stops it (a stale one's stop is refused).
        'host.stopped': { target: 'down', guard: ({ context, event }) => event.data.runnerId === context.runnerId },
      },
    },
    down: { on: { 'host.started': { target: 'up', actions: 'started' } } },
  },
});
