/**
 * A workflow run in full, as `loops workflows inspect` shows it: the run, every step with its
 * attempts, why each skipped step was skipped, and what the agent steps' CLIs reported in all.
 */
import type { Db } from '../../events/db.js';
import { findWorkflowRun, runAgentTotals, workflowRunSteps, type AgentTotals, type WorkflowRunView, type WorkflowStepView } from '../queries/workflows.js';
import { skipReasons } from './explain.js';

/** The parts of a workflow run, read once. */
export interface WorkflowRunDetail {
  run: WorkflowRunView;
  steps: WorkflowStepView[];
  /** Why each skipped step was skipped, by step id. */
  reasons: Record<string, string>;
}

/** A workflow run as `loops workflows inspect --json` prints it. */
export type WorkflowRunInspection = WorkflowRunView & {
  /** What the agent steps' CLIs reported, summed over every attempt (null: none reported). */
  agent: AgentTotals | null;
  /** Every step; a skipped one says why (`skipReason`). */
  steps: Array<WorkflowStepView & { skipReason?: string | null }>;
};

/** The workflow run (id or unique prefix), its steps and skip reasons; NotFoundError when there is none. */
export function workflowRunDetail(db: Db, ref: string): WorkflowRunDetail {
  const run = findWorkflowRun(db, ref);
  const steps = workflowRunSteps(db, run.id);
  // Why steps were skipped is decided by the machine: read (or, for old runs, folded) only when some were.
  const reasons = steps.some((s) => s.status === 'skipped') ? skipReasons(db, run.id) : {};
  return { run, steps, reasons };
}

/** The detail as one object (`loops workflows inspect --json`). */
export function inspection(detail: WorkflowRunDetail): WorkflowRunInspection {
  return {
    ...detail.run,
    agent: runAgentTotals(detail.steps),
    steps: detail.steps.map((s) => (s.status === 'skipped' ? { ...s, skipReason: detail.reasons[s.stepId] ?? null } : s)),
  };
}

/** `loops workflows inspect <ref> --json`: the workflow run (id or unique prefix) in full. */
export function inspectWorkflowRun(db: Db, ref: string): WorkflowRunInspection {
  return inspection(workflowRunDetail(db, ref));
}
