/**
 * Why each skipped step of a workflow run was skipped (`needs c which failed`, `if: … was false`,
 * `the workflow was cancelled`).
 *
 * A run records it: `step.skipped {stepId, reason}`, appended when the skip is decided and
 * projected to `workflow_steps.skip_reason`, so this is a read of the table — live, while the run
 * goes on. Runs started before skips were recorded (`workflow_runs.decisions = 'derived'`) have no
 * reason in the tables: for them only, the run's stream is folded on the machine that wrote it,
 * which derives each reason from the recorded facts as it did while the run went on.
 */
import type { Db } from '../../events/db.js';
import { readStreamWithMachine } from '../../events/sqlite-log.js';
import { fold } from '../../machines/fold.js';
import { getMachine } from '../../machines/registry.js';
import type { WorkflowRunContext } from '../../machines/workflow-run.js';

export function skipReasons(db: Db, wfRunId: string): Record<string, string> {
  const rows = db
    .prepare("SELECT step_id AS stepId, skip_reason AS reason FROM workflow_steps WHERE wfrun_id = ? AND status = 'skipped' ORDER BY ord")
    .all(wfRunId) as Array<{ stepId: string; reason: string | null }>;
  const out: Record<string, string> = {};
  for (const r of rows) if (r.reason !== null) out[r.stepId] = r.reason;
  if (rows.every((r) => r.reason !== null)) return out;
  return { ...derivedSkipReasons(db, wfRunId), ...out };
}

/** The reasons a run that recorded no skips had, from a fold of its stream on the machine that wrote it. */
function derivedSkipReasons(db: Db, wfRunId: string): Record<string, string> {
  const read = readStreamWithMachine(db, `wfrun:${wfRunId}`);
  const machine = read?.machine ? getMachine(read.machine) : undefined;
  if (!read || !machine) return {};
  const { snapshot } = fold(machine, read.events);
  const out: Record<string, string> = {};
  for (const s of (snapshot.context as WorkflowRunContext).steps) {
    if (s.status === 'skipped' && s.reason) out[s.id] = s.reason;
  }
  return out;
}
