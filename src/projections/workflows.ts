/**
 * Workflow spec projections (stream `workflow:<id>`):
 *
 * - `workflows`: one row per workflow with its latest spec version, status and a run summary.
 *   Archived workflows keep their row; names are unique among workflows that are not archived
 *   (`live_name`, NULL once archived), like `loops.live_name`.
 * - `workflow_versions`: every stored version of every spec, as recorded (runs pin one).
 *
 * The runs of workflows (`workflow_runs` and its step tables) are in workflow-runs.ts.
 */
import type { StoredEvent } from '../events/types.js';
import { defineProjection, sql, stateName, streamKey, type ProjectionEvent } from './types.js';
import { PROJECTION_VERSIONS } from './versions.js';

export { workflowRunsProjection } from './workflow-runs.js';

const workflowIdOf = (event: StoredEvent) => streamKey(event, 'workflow');

export const workflowsProjection = defineProjection({
  name: 'workflows',
  // v2: no run_count / last_run_*: readers compute them from workflow_runs, which an archived
  //     workflow run (its wfrun.started gone from the log) still has a row in.
  version: PROJECTION_VERSIONS.workflows,
  ddl: [
    `CREATE TABLE IF NOT EXISTS workflows (
      id           TEXT PRIMARY KEY,
      name         TEXT NOT NULL,
      -- The name while the workflow is not archived, NULL after: names are unique among live workflows.
      live_name    TEXT,
      description  TEXT,
      -- The latest version, its spec (JSON) and where it was read from.
      version      INTEGER NOT NULL,
      status       TEXT NOT NULL,
      spec         TEXT NOT NULL,
      source_file  TEXT,
      sha256       TEXT,
      reason       TEXT,
      created_at   TEXT NOT NULL,
      updated_at   TEXT NOT NULL
    )`,
    `CREATE UNIQUE INDEX IF NOT EXISTS workflows_live_name ON workflows (live_name)`,
  ],
  tables: [{ name: 'workflows', orderBy: 'id' }],
  on: {
    'workflow.created': (e) => {
      const d = e.data;
      return [
        sql(
          `INSERT INTO workflows (id, name, live_name, description, version, status, spec, source_file, sha256, created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          d.workflowId,
          d.name,
          d.name,
          d.spec.description,
          d.version,
          stateName(e) ?? 'active',
          JSON.stringify(d.spec),
          d.sourceFile,
          d.sha256,
          e.at,
          e.at,
        ),
      ];
    },
    'workflow.updated': (e) => {
      const d = e.data;
      return [
        sql(
          `UPDATE workflows SET version = ?, description = ?, spec = ?, source_file = ?, sha256 = ?, updated_at = ? WHERE id = ?`,
          d.version,
          d.spec.description,
          JSON.stringify(d.spec),
          d.sourceFile,
          d.sha256,
          e.at,
          workflowIdOf(e),
        ),
      ];
    },
    'workflow.archived': (e) => [
      sql(
        'UPDATE workflows SET status = ?, live_name = NULL, reason = ?, updated_at = ? WHERE id = ?',
        stateName(e) ?? 'archived',
        e.data.reason,
        e.at,
        workflowIdOf(e),
      ),
    ],
  },
});

export const workflowVersionsProjection = defineProjection({
  name: 'workflow_versions',
  version: PROJECTION_VERSIONS.workflow_versions,
  ddl: [
    `CREATE TABLE IF NOT EXISTS workflow_versions (
      workflow_id  TEXT NOT NULL,
      version      INTEGER NOT NULL,
      spec         TEXT NOT NULL,
      source_file  TEXT,
      sha256       TEXT,
      created_at   TEXT NOT NULL,
      PRIMARY KEY (workflow_id, version)
    ) WITHOUT ROWID`,
  ],
  tables: [{ name: 'workflow_versions', orderBy: 'workflow_id, version' }],
  on: {
    'workflow.created': (e) => [versionStored(e)],
    'workflow.updated': (e) => [versionStored(e)],
  },
});

/** A version of the spec, as recorded. */
function versionStored(event: ProjectionEvent<'workflow.created' | 'workflow.updated'>) {
  const d = event.data;
  return sql(
    'INSERT INTO workflow_versions (workflow_id, version, spec, source_file, sha256, created_at) VALUES (?, ?, ?, ?, ?, ?)',
    workflowIdOf(event),
    d.version,
    JSON.stringify(d.spec),
    d.sourceFile,
    d.sha256,
    event.at,
  );
}
