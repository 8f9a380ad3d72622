/**
 * Every projection's name and version, in the order they are applied: the one place a version is
 * bumped (each projection module takes its version from here). A version that differs from the one
 * a database recorded makes that projection rebuild from the log when the database is opened.
 *
 * Kept apart from the projections themselves so that opening a database for reading (store.ts)
 * checks them without loading every projection module — a cold `loops list` loads none of them.
 */
export const PROJECTION_VERSIONS = {
  loops: 9,
  loop_runs: 9,
  slot_decisions: 4,
  run_queue: 1,
  workflows: 2,
  workflow_versions: 1,
  workflow_runs: 7,
  accounts: 1,
  notices: 1,
  hosts: 2,
} as const;

/**
 * Projections that no longer exist, with their tables: dropped (and forgotten) the next time the
 * projections are rebuilt. `pending_retries` and `buffered_slots` became `run_queue`.
 */
export const retiredProjections: ReadonlyArray<{ name: string; tables: ReadonlyArray<string> }> = [
  { name: 'pending_retries', tables: ['pending_retries'] },
  { name: 'buffered_slots', tables: ['buffered_slots'] },
];
