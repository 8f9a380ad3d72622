/**
 * Kept for the modules that still import `../agents/providers.js` (src/runtime/workflows/files.ts,
 * src/runtime/queries/run-output.ts, src/cli/commands/loops.ts): the provider table and the
 * invocation moved to ./providers/index.ts and ./invocation.ts. Import `../agents/index.js` instead;
 * this file goes once nothing imports it.
 */
export * from './index.js';
