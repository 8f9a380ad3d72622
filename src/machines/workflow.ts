/**
 * The workflow-spec machine: one actor per workflow, stream `workflow:<id>`. Versions are
 * appended (`workflow.created` is version 1, each `workflow.updated` the next); `archive` hides the
 * workflow from new runs and keeps its history and runs.
 *
 * new ─workflow.created─► active ─workflow.updated─► active ─workflow.archived─► archived
 */
import { assign, setup } from 'xstate';
import type { WorkflowSpec } from '../workflow/spec.js';
import type { MachineEvent } from './events.js';

export const WORKFLOW_MACHINE_ID = 'loops.workflow';
export const WORKFLOW_MACHINE_VERSION = 1;

export interface WorkflowContext {
  workflowId: string | null;
  name: string | null;
  version: number;
  spec: WorkflowSpec | null;
  createdAt: string | null;
  updatedAt: string | null;
}

export type WorkflowEvent = MachineEvent<'workflow.created'> | MachineEvent<'workflow.updated'> | MachineEvent<'workflow.archived'>;

export const workflowMachine = setup({
  types: { context: {} as WorkflowContext, events: {} as WorkflowEvent },
  guards: {
    /** Versions go up one at a time. */
    nextVersion: ({ context, event }) => event.type === 'workflow.updated' && event.data.version === context.version + 1,
  },
}).createMachine({
  id: WORKFLOW_MACHINE_ID,
  initial: 'new',
  context: { workflowId: null, name: null, version: 0, spec: null, createdAt: null, updatedAt: null },
  states: {
    new: {
      on: {
        'workflow.created': {
          target: 'active',
          actions: assign(({ event }) => ({
            workflowId: event.data.workflowId,
            name: event.data.name,
            version: 1,
            spec: event.data.spec,
            createdAt: event.at,
            updatedAt: event.at,
          })),
        },
      },
    },
    active: {
      on: {
        'workflow.updated': {
          guard: 'nextVersion',
          actions: assign(({ event }) => ({ version: event.data.version, spec: event.data.spec, updatedAt: event.at })),
        },
        'workflow.archived': { target: 'archived', actions: assign(({ event }) => ({ updatedAt: event.at })) },
      },
    },
    archived: {},
  },
});
