/**
 * src/runtime — the only impure layer: the clock, the durable actor (persist, then execute), the
 * store seam, and in folders by concern: execution/ (an attempt from claim to recorded exit, the
 * executor, the spawner helper, output files, process identity, cancel), daemon/ (the pass, the
 * run queue, the daemon, recovery), loops/ (defining loops, the decisions on their streams),
 * workflows/ (the workflow runner, spec files), agents/ (one file per provider), admin/ (doctor,
 * stats, projections, replay, why) and queries/ (the read side). See docs/architecture.md.
 *
 * May import every layer below — machines, projections, workflow, scheduling, events — and any
 * package; never src/cli, and no import circle between its folders (layer rule cli → runtime →
 * {machines, projections} → {workflow, scheduling} → events, scripts/check-layers.mjs). Start with
 * actor.ts (persist, then execute), then execution/attempt.ts and daemon/pass.ts; each folder's
 * README.md says what it holds.
 */
export * from './clock.js';
export * from './paths.js';
export * from './store.js';
export * from './runtime.js';
export * from './actor.js';
export * from './execution/executor.js';
export * from './execution/spawner.js';
export * from './execution/output.js';
export * from './execution/process-info.js';
export * from './leases.js';
export * from './loops/commands.js';
export * from './execution/run-now.js';
export * from './queries/loops.js';
export * from './admin/replay.js';
export * from './admin/projections.js';
export * from './ids.js';
export * from './loops/decisions.js';
export * from './admin/why.js';
export * from './daemon/recovery.js';
export * from './daemon/daemon.js';
export * from './daemon/service.js';
export * from './execution/cancel.js';
export * from './workflows/files.js';
export * from './queries/workflows.js';
export * from './workflows/specs.js';
export * from './workflows/runner.js';
export * from './execution/env.js';
export * from './execution/secrets.js';
export * from './agents/index.js';
export * from './agents/run.js';
