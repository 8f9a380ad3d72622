/**
 * What the tables do not keep about a workflow run, read from its log: why each skipped step was
 * skipped (`needs c which failed`, `if: … was false`, `the workflow was cancelled`). The machine
 * decides skips from the recorded facts, so folding the run's stream gives the same answer it
 * gave while the run went on.
 */
import type { Db } from '../../events/db.js';
import { upcast } from '../../events/catalog.js';
import { fold } from '../../machines/fold.js';
import { workflowRunMachine, type WorkflowRunContext } from '../../machines/workflow-run.js';

export function skipReasons(db: Db, wfRunId: string): Record<string, string> {
  const rows = db.prepare('SELECT type, v, at, data FROM events WHERE stream_id = ? ORDER BY version').all(`wfrun:${wfRunId}`) as Array<{
    type: string;
    v: number;
    at: string;
    data: string;
  }>;
  const { snapshot } = fold(
    workflowRunMachine,
    rows.map((r) => ({ type: r.type, at: r.at, data: upcast(r.type, r.v, JSON.parse(r.data)) })),
  );
  const out: Record<string, string> = {};
  for (const [id, s] of Object.entries((snapshot.context as WorkflowRunContext).steps)) {
    if (s.status === 'skipped' && s.reason) out[id] = s.reason;
  }
  return out;
}
