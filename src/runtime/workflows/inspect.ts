/**
 * A workflow run in full, as `loops workflows inspect` shows it: the run, every step with its
 * attempts, why each skipped step was skipped, and what the agent steps' CLIs reported in all; and
 * where each attempt's process started, with which environment (names only), as `step.spawned`
 * recorded them.
 */
import type { SpawnEnv } from '../../events/catalog.js';
import type { Db } from '../../events/db.js';
import { findWorkflowRun, runAgentTotals, workflowRunSteps, type AgentTotals, type WorkflowRunView, type WorkflowStepView } from '../queries/workflows.js';
import { skipReasons } from './explain.js';
import { stepSpawnRecords, type SpawnRecord } from '../queries/spawn-record.js';

/** The parts of a workflow run, read once. */
export interface WorkflowRunDetail {
  run: WorkflowRunView;
  steps: WorkflowStepView[];
  /** Why each skipped step was skipped, by step id. */
  reasons: Record<string, string>;
  /** Where each attempt started and with which environment's names, by `<stepId>#<attempt>` (those recorded). */
  spawns: Map<string, SpawnRecord>;
}

/** A workflow run as `loops workflows inspect --json` prints it. */
export type WorkflowRunInspection = WorkflowRunView & {
  /** What the agent steps' CLIs reported, summed over every attempt (null: none reported). */
  agent: AgentTotals | null;
  /** Every step; a skipped one says why (`skipReason`); an attempt its spawn recorded has `cwd` and `env` (names). */
  steps: Array<WorkflowStepView & { skipReason?: string | null; attempts: Array<WorkflowStepView['attempts'][number] & { cwd?: string; env?: SpawnEnv }> }>;
};

/** The workflow run (id or unique prefix), its steps and skip reasons; NotFoundError when there is none. */
export function workflowRunDetail(db: Db, ref: string): WorkflowRunDetail {
  const run = findWorkflowRun(db, ref);
  const steps = workflowRunSteps(db, run.id);
  // Why steps were skipped is decided by the machine: read (or, for old runs, folded) only when some were.
  const reasons = steps.some((s) => s.status === 'skipped') ? skipReasons(db, run.id) : {};
  return { run, steps, reasons, spawns: stepSpawnRecords(db, run.id) };
}

/** The detail as one object (`loops workflows inspect --json`). */
export function inspection(detail: WorkflowRunDetail): WorkflowRunInspection {
  return {
    ...detail.run,
    agent: runAgentTotals(detail.steps),
    steps: detail.steps.map((s) => {
      const step = s.status === 'skipped' ? { ...s, skipReason: detail.reasons[s.stepId] ?? null } : s;
      if (!s.attempts.some((a) => detail.spawns.has(`${s.stepId}#${a.attempt}`))) return step;
      const attempts = s.attempts.map((a) => {
        const r = detail.spawns.get(`${s.stepId}#${a.attempt}`);
        return r ? { ...a, ...(r.cwd !== null ? { cwd: r.cwd } : {}), ...(r.env !== null ? { env: r.env } : {}) } : a;
      });
      return { ...step, attempts };
    }),
  };
}

/** `loops workflows inspect <ref> --json`: the workflow run (id or unique prefix) in full. */
export function inspectWorkflowRun(db: Db, ref: string): WorkflowRunInspection {
  return inspection(workflowRunDetail(db, ref));
}
