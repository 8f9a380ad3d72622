/**
 * Where a run's process really started and with which environment, as its spawn recorded it
 * (`process.spawned`, `step.spawned`: `cwd` and `env` names): what `loops show <run>` and `loops
 * workflows inspect` print. Read from the log (no projection holds it); absent for a spawn recorded
 * before these fields existed, by a recovery, or whose events were archived.
 */
import type { SpawnEnv } from '../../events/catalog.js';
import type { Db } from '../../events/db.js';
import { streamEventsOfType } from '../../events/sqlite-reads.js';

/** What a spawn recorded of its start: the directory (absolute, symlinks resolved) and the environment's names. */
export interface SpawnRecord {
  cwd: string | null;
  env: SpawnEnv | null;
}

function recordOf(data: { cwd?: unknown; env?: unknown }): SpawnRecord | null {
  const cwd = typeof data.cwd === 'string' ? data.cwd : null;
  const env = data.env && typeof data.env === 'object' ? (data.env as SpawnEnv) : null;
  return cwd === null && env === null ? null : { cwd, env };
}

/** The spawn record of a loop run's process, or null when none was recorded. */
export function runSpawnRecord(db: Db, runId: string): SpawnRecord | null {
  const spawned = streamEventsOfType(db, `run:${runId}`, 'process.spawned');
  const last = spawned.at(-1);
  return last ? recordOf(JSON.parse(last.data) as { cwd?: unknown; env?: unknown }) : null;
}

/** The spawn records of a workflow run's step attempts, by `<stepId>#<attempt>` (those that have one). */
export function stepSpawnRecords(db: Db, wfRunId: string): Map<string, SpawnRecord> {
  const out = new Map<string, SpawnRecord>();
  for (const row of streamEventsOfType(db, `wfrun:${wfRunId}`, 'step.spawned')) {
    const data = JSON.parse(row.data) as { stepId: string; attempt: number; cwd?: unknown; env?: unknown };
    const record = recordOf(data);
    if (record) out.set(`${data.stepId}#${data.attempt}`, record);
  }
  return out;
}
