/**
 * loops as a library: the machines (pure, embeddable in any XState app), the event log, the
 * projections and the runtime that the CLI itself uses.
 */
export * from './events/index.js';
export * from './workflow/index.js';
export * from './scheduling/index.js';
export * from './machines/index.js';
export * from './projections/index.js';
export * from './runtime/index.js';
