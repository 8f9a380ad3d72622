export * from './errors.js';
export * from './types.js';
export * from './catalog.js';
export * from './db.js';
export * from './sqlite-log.js';
