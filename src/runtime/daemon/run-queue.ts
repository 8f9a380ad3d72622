/**
 * The read side of the run queue (the `run_queue` projection): claimable work — fired and
 * buffered slots and scheduled retries that nobody has claimed yet. A claim checks, inside its
 * transaction, that its work is still queued with the `queued` append guard (src/events/sqlite-leases.ts).
 */
import type { Runtime } from '../runtime.js';
import { liveRunLeases, runningRuns } from '../loops/decisions.js';
import { cached } from '../../events/db.js';
import { runnerMayRun } from '../host.js';

/** One piece of claimable work: a run a decision promised and nobody has claimed yet. */
export interface QueueItem {
  runId: string;
  loopId: string;
  loopName: string;
  kind: 'fired' | 'buffered' | 'retry';
  slot: string;
  attempt: number;
  /** When it is due: the slot's fire time, or the retry's. */
  dueAt: string;
  position: number;
  decidedBy: string | null;
  /** The loop's overlap policy: with `allow` its runs may go at the same time. */
  overlap: string;
  /** The labels a runner needs to claim it (the loop's `--runs-on`), or null: any runner. */
  runsOn: string[] | null;
}

export const QUEUE_COLUMNS = `q.run_id AS runId, q.loop_id AS loopId, l.name AS loopName, q.kind, q.slot, q.attempt,
  q.due_at AS dueAt, q.position, q.decided_by AS decidedBy, coalesce(json_extract(l.policies, '$.overlap'), 'skip') AS overlap,
  l.runs_on AS runsOn`;

/** Queue rows as read with QUEUE_COLUMNS (`runsOn` a JSON array, or null), as items. */
export function queueItems(rows: ReadonlyArray<Omit<QueueItem, 'runsOn'> & { runsOn: string | null }>): QueueItem[] {
  return rows.map((row) => ({ ...row, runsOn: row.runsOn === null ? null : (JSON.parse(row.runsOn) as string[]) }));
}

type QueueRow = Omit<QueueItem, 'runsOn'> & { runsOn: string | null };

/**
 * Work this runner may start now, in due order: fired slots and retries due by `dueByMs`, and
 * buffered slots (due since they were decided) once their loop has no run going — only the oldest
 * buffered slot of a loop. Of loops that are active (or expired after deciding it); a paused loop's
 * work waits for its resume. A loop pinned with `--runs-on` is left to runners with its labels.
 */
export async function claimableWork(runtime: Runtime, dueByMs: number): Promise<QueueItem[]> {
  const rows = queueItems(
    cached<[string], QueueRow>(
      runtime.db,
      `SELECT ${QUEUE_COLUMNS} FROM run_queue q CROSS JOIN loops l ON l.id = q.loop_id -- CROSS: from the (few) queued rows
       WHERE (q.due_at <= ? OR q.kind = 'buffered') AND l.status IN ('active', 'expired')
       ORDER BY q.due_at, q.position`,
    ).all(new Date(dueByMs).toISOString()),
  ).filter((item) => runnerMayRun(runtime, item.runsOn));
  // Which runs are going is asked of the lease store only when a buffered slot waits on it.
  const live = rows.some((r) => r.kind === 'buffered') ? await liveRunLeases(runtime, runtime.clock.now()) : null;
  const firstBuffered = new Set<string>();
  return rows.filter((r) => {
    if (r.kind !== 'buffered') return true;
    if (firstBuffered.has(r.loopId)) return false;
    firstBuffered.add(r.loopId);
    return runningRuns(runtime, r.loopId, live!).length === 0;
  });
}

/**
 * The earliest due time after `afterMs` of queued work of an active (or expired) loop, or null.
 * Buffered slots are not counted: they start when the run they wait for ends, not at a time.
 */
export function nextQueuedDue(runtime: Runtime, afterMs: number): number | null {
  const row = cached<[string], { due: string }>(
      runtime.db,
      `SELECT q.due_at AS due FROM run_queue q CROSS JOIN loops l ON l.id = q.loop_id
       WHERE q.due_at > ? AND q.kind != 'buffered' AND l.status IN ('active', 'expired') ORDER BY q.due_at LIMIT 1`,
    )
    .get(new Date(afterMs).toISOString());
  return row ? Date.parse(row.due) : null;
}

/** Queued work of a loop (all kinds), oldest first. */
export function queuedWork(runtime: Runtime, loopId: string): QueueItem[] {
  return queueItems(cached<[string], QueueRow>(runtime.db, `SELECT ${QUEUE_COLUMNS} FROM run_queue q JOIN loops l ON l.id = q.loop_id WHERE q.loop_id = ? ORDER BY q.position`).all(loopId));
}

