/**
 * src/scheduling — pure schedule arithmetic: cron on a zone's wall clock (croner as a calculator,
 * always with an explicit reference time), time zones, building a schedule from flags, the slot
 * planner with its overlap / catch-up decisions, the named policies (./policies.ts: one table per
 * family, which the planner, the catalogue and `create` derive from) and the human description of a
 * schedule. No clock is read here: `loops next`, the pass and a replay all compute the same times.
 */
export * from './schedule.js';
export * from './describe.js';
export * from './zone.js';
export * from './cron.js';
export * from './planner.js';
export * from './policies.js';
