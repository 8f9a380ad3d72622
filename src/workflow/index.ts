/**
 * src/workflow — the workflow language, pure: the native and predecessor file shapes and their
 * normaliser into the canonical spec (src/events/workflow-model.ts), the DAG helpers, the JSON
 * Schema, and the `if:` / `${{ }}` expression language. No I/O: files are read in
 * src/runtime/workflows.
 */
export * from './expr.js';
export { normalizeWorkflowSpec, stepAncestors, topologicalOrder, workflowFileSchema, workflowJsonSchema } from './spec.js';
