/**
 * The retention machine: one actor per data directory and kind of retention, stream
 * `retention:output` — what `loops prune` removed. A run's own stream is final (its machine accepts
 * nothing more), so the fact that its output folder was removed lives here, one event per run.
 *
 * keeping ─run.output_pruned / wfrun.output_pruned─► keeping   (counts what was removed)
 *
 * It never ends: there is always a next prune. It decides nothing either (which runs go is the
 * runtime's selection, checked again inside the append transaction); it keeps the totals, and its
 * stream is the ordered record of every removal, for replay like any other.
 */
import { assign, setup } from 'xstate';
import type { MachineEvent } from './events.js';

export const RETENTION_MACHINE_ID = 'loops.retention';
export const RETENTION_MACHINE_VERSION = 1;

/** The stream of output pruning (one per data directory). */
export const OUTPUT_RETENTION_STREAM = 'retention:output';

export interface RetentionContext {
  /** Loop runs and workflow runs whose output was removed. */
  runsPruned: number;
  bytesFreed: number;
  lastPrunedAt: string | null;
}

export type RetentionEvent = MachineEvent<'run.output_pruned'> | MachineEvent<'wfrun.output_pruned'>;

export const retentionMachine = setup({
  types: { context: {} as RetentionContext, events: {} as RetentionEvent },
  actions: {
    count: assign(({ context, event }) => ({
      runsPruned: context.runsPruned + 1,
      bytesFreed: context.bytesFreed + event.data.bytes,
      lastPrunedAt: event.at,
    })),
  },
}).createMachine({
  id: RETENTION_MACHINE_ID,
  initial: 'keeping',
  context: { runsPruned: 0, bytesFreed: 0, lastPrunedAt: null },
  states: {
    keeping: {
      on: {
        'run.output_pruned': { actions: 'count' },
        'wfrun.output_pruned': { actions: 'count' },
      },
    },
  },
});
