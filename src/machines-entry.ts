/**
 * `loops-scheduler/machines`: loops' state machines alone, for apps that embed them in their own
 * XState actors — the machines (with `input` and `output`), their typed events and contexts, the
 * registry of machine versions, and the pure fold (`fold`, typed `foldAs`). Imports no SQLite, no
 * processes, no file system: only `xstate` (a peer dependency) and `zod`. Running real processes
 * durably is the main entry's (`durableRun`, `durableWorkflowRun`); see docs/embedding.md.
 */
export * from './machines/events.js';
export * from './machines/loop.js';
export * from './machines/run.js';
export * from './machines/workflow.js';
export * from './machines/workflow-run.js';
export * from './machines/account.js';
export * from './machines/notice.js';
export * from './machines/retention.js';
export * from './machines/registry.js';
export * from './machines/fold.js';
export * from './machines/typed.js';
export type { EventData, EventType, Target, CommandTarget, WorkflowTarget, LoopAgentTarget, LoopPolicies } from './events/catalog.js';
export { normalizeWorkflowSpec, type WorkflowSpec } from './workflow/spec.js';
