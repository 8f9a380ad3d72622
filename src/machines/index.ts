export * from './events.js';
export * from './loop.js';
export * from './run.js';
export * from './registry.js';
export * from './fold.js';
export * from './workflow.js';
export * from './workflow-run.js';
export * from './account.js';
