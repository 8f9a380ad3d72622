export * from './types.js';
export * from './loops.js';
export * from './notices.js';
export * from './runs.js';
export * from './registry.js';
export * from './slots.js';
export * from './workflows.js';
