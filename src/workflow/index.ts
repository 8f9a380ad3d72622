/**
 * src/workflow — the workflow language, pure: the native and predecessor file shapes and their
 * normaliser into the canonical spec (src/events/workflow-model.ts), the DAG helpers, the JSON
 * Schema, and the `if:` / `${{ }}` expression language. No I/O: files are read in
 * src/runtime/workflows.
 *
 * May import src/events only, and the zod package; pure — no node:*, clock, timers or processes
 * (layer rule cli → runtime → {machines, projections} → {workflow, scheduling} → events,
 * scripts/check-layers.mjs). Start with spec.ts (`normalizeWorkflowSpec`), then expr.ts (its
 * grammar on top); the canonical spec it produces is src/events/workflow-model.ts.
 */
export * from './expr.js';
export { normalizeWorkflowSpec, sequentialOrder, stepAncestors, topologicalOrder, workflowFileSchema, workflowJsonSchema } from './spec.js';
