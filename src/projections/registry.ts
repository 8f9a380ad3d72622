import type { InlineHandler, StoredEvent } from '../events/types.js';
import { accountsProjection } from './accounts.js';
import { hostsProjection } from './hosts.js';
import { loopsProjection } from './loops.js';
import { noticesProjection } from './notices.js';
import { runsProjection } from './runs.js';
import { runQueueProjection, slotDecisionsProjection } from './slots.js';
import type { Projection } from './types.js';
import { workflowRunsProjection, workflowsProjection, workflowVersionsProjection } from './workflows.js';

/** Every projection, in the order they are applied. */
export const projections: ReadonlyArray<Projection> = [
  loopsProjection,
  runsProjection,
  slotDecisionsProjection,
  runQueueProjection,
  workflowsProjection,
  workflowVersionsProjection,
  workflowRunsProjection,
  accountsProjection,
  noticesProjection,
  hostsProjection,
];

export { retiredProjections } from './versions.js';

/** One inline handler applying every projection that handles the event. */
export function inlineHandler(list: ReadonlyArray<Projection> = projections): InlineHandler {
  return (event: StoredEvent) => {
    const out = [];
    for (const projection of list) {
      if (projection.handles.has(event.type)) out.push(...projection.evolve(event));
    }
    return out;
  };
}

export function findProjection(name: string): Projection | undefined {
  return projections.find((p) => p.name === name || p.tables.some((t) => t.name === name));
}
