/**
 * `loops prune`: removes the output folders of finished runs — `runs/<runId>/` of a loop run,
 * `runs/<wfRunId>/` (every step attempt) of a workflow run — and records each removal as a fact.
 *
 * - **What may go.** Only a run that has ended (a loop run not `claimed`, `spawning` or `running`; a
 *   workflow run not `running`) and holds no live lease; a workflow loop's own run has no folder
 *   (its output is its workflow run's). Of those, the ones finished before the cutoff
 *   (`--older-than`), except the `keepLast` most recent finished runs of each loop and each
 *   workflow (by claim order), whatever their age. Folders that belong to no run in the log are
 *   never touched.
 * - **Recorded first, then removed.** The removals are appended to the `retention:output` stream
 *   (`run.output_pruned` / `wfrun.output_pruned`, up to `CHUNK` per transaction) before the folders
 *   go. A prune that stops in between
 *   (a crash, a full disk, a permission error) leaves folders the log already calls pruned: the next
 *   prune removes them (`completed`), so the log and the disk agree again without a second fact.
 * - **Concurrent prunes** append to the same stream with its expected version: the loser of the
 *   race selects again (what the winner pruned is no longer a candidate).
 */
import { lstatSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { BusyError, ConcurrencyConflictError, LoopsError, UsageError } from '../../events/errors.js';
import type { Db } from '../../events/db.js';
import type { LeaseStore } from '../../events/types.js';
import { parseDuration } from '../../events/durations.js';
import { currentMachines } from '../../machines/registry.js';
import { OUTPUT_RETENTION_STREAM } from '../../machines/retention.js';
import { DurableActor } from '../actor.js';
import { runDir } from '../paths.js';
import type { Runtime } from '../runtime.js';

/** Events per append: a prune of 100,000 runs is 200 commits, each a few ms. */
export const CHUNK = 500;

export interface PruneOptions {
  /** Prune only runs finished before this instant (ISO); null: whatever their age. */
  cutoff: string | null;
  /** Keep this many most recent finished runs of each loop and of each workflow; null: none kept by count. */
  keepLast: number | null;
}

export interface PruneCandidate {
  /** `run`: a loop run (`run_…`); `workflow`: a workflow run (`wfrun_…`). */
  kind: 'run' | 'workflow';
  id: string;
  /** The loop (loop runs) or the workflow (workflow runs). */
  ownerId: string;
  ownerName: string;
  /** Workflow runs started by a workflow loop: that loop's run. */
  loopRunId: string | null;
  status: string;
  finishedAt: string;
  path: string;
  /** Sizes of the files in the folder, summed. */
  bytes: number;
  files: number;
}

export interface PruneReport {
  dryRun: boolean;
  cutoff: string | null;
  keepLast: number | null;
  /** The runs whose output is (or, in a dry run, would be) removed, oldest first. */
  runs: PruneCandidate[];
  /** Folders an earlier prune recorded as pruned but did not remove (it stopped in between): removed now. */
  completed: Array<{ kind: 'run' | 'workflow'; id: string; path: string; bytes: number }>;
  /** Runs pruned (recorded), not counting `completed`. */
  pruned: number;
  /** Bytes removed (or that would be): the runs' and the completed folders'. */
  bytes: number;
  /** Folders that could not be removed (the removal is recorded; the next prune tries again). */
  failed: Array<{ id: string; path: string; error: string }>;
}

const ISO_START = /^\d{4}-\d{2}-\d{2}/;
const ZERO = /^0+(?:\.0*)?(?:ms|s|m|h|d|w)?$/;

/**
 * `--older-than`: a duration before `now` (`30d`, `12h`, `0s` = everything finished until now) or
 * an ISO time (without an offset it is read in the system time zone). Returns the cutoff (ISO).
 */
export async function parseOlderThan(input: string, now: number): Promise<string> {
  const text = input.trim();
  const hint = 'give how long ago (30d, 12h, 1w; 0s for every finished run) or an ISO time (2026-05-01, 2026-05-01T09:00Z)';
  let at: number;
  try {
    if (ISO_START.test(text)) {
      const { parseInstant, systemTimeZone } = await import('../../scheduling/schedule.js');
      at = parseInstant(text, systemTimeZone(), '--older-than');
    } else {
      at = ZERO.test(text.toLowerCase()) ? now : now - parseDuration(text, '--older-than', Infinity);
    }
  } catch (error) {
    if (!(error instanceof LoopsError)) throw error;
    const message = ISO_START.test(text) ? error.message : `--older-than: ${JSON.stringify(input)} is neither a duration nor a time`;
    throw new UsageError(`loops prune: ${message.replace(/^loops prune: /, '')}`, { hint, cause: error });
  }
  if (!Number.isFinite(at)) throw new UsageError(`loops prune: --older-than: ${JSON.stringify(input)} is out of range`, { hint });
  if (at > now) {
    throw new UsageError(`loops prune: --older-than: ${new Date(at).toISOString()} is in the future`, {
      hint: 'runs finished before it have not all finished yet; give a time in the past, or a duration (30d)',
    });
  }
  return new Date(at).toISOString();
}

/** `--keep-last`: a whole number, 0 or more. */
export function parseKeepLast(input: string): number {
  const text = input.trim();
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text))) {
    throw new UsageError(`loops prune: --keep-last must be a whole number of runs, got ${JSON.stringify(input)}`, {
      hint: 'e.g. --keep-last 10 keeps the 10 most recent finished runs of each loop and each workflow',
    });
  }
  return Number(text);
}

/** A run id safe to join to `runs/` (ids are generated, but the folder is removed recursively). */
const SAFE_ID = /^[A-Za-z0-9][A-Za-z0-9_-]*$/;

export interface Row {
  kind: 'run' | 'workflow';
  id: string;
  owner_id: string;
  owner_name: string;
  loop_run_id: string | null;
  status: string;
  finished_at: string;
}

/** Runs and workflow runs a live lease holds (a runner still records something of them): never pruned or archived. */
export interface HeldRuns {
  has(kind: Row['kind'], id: string): boolean;
}

/** The runs and workflow runs held by a live lease at `nowMs`, from the lease store (two reads). */
export async function heldRuns(leases: LeaseStore, nowMs: number): Promise<HeldRuns> {
  const [runs, wfRuns] = await Promise.all([leases.live('run:', nowMs), leases.live('wfrun:', nowMs)]);
  return { has: (kind, id) => (kind === 'run' ? runs.has(`run:${id}`) : wfRuns.has(`wfrun:${id}`)) };
}

/**
 * Finished runs beyond the keepLast newest of their loop / workflow, finished before the cutoff,
 * with no live lease (`held`), not done yet — oldest first. `output`: their output folders, not pruned yet
 * (not yet filtered on having a folder; a workflow loop's run has none). `archive`: their streams
 * (a workflow loop's run too), not archived yet (archive.ts).
 */
export function selectRows(db: Db, options: PruneOptions, held: HeldRuns, purpose: 'output' | 'archive' = 'output'): Row[] {
  const params = { cutoff: options.cutoff, keep: options.keepLast ?? 0 };
  const pending = purpose === 'output' ? 'output_pruned_at' : 'archived_at';
  const runs = db
    .prepare<typeof params, Row>(
      `SELECT 'run' AS kind, id, loop_id AS owner_id, loop_name AS owner_name, NULL AS loop_run_id, status, finished_at FROM (
         SELECT id, loop_id, loop_name, status, COALESCE(finished_at, updated_at) AS finished_at, ${pending} AS pending,
                ROW_NUMBER() OVER (PARTITION BY loop_id ORDER BY claimed_position DESC) AS newest
         FROM loop_runs
         WHERE status NOT IN ('claimed', 'spawning', 'running')${purpose === 'output' ? " AND json_extract(target, '$.kind') <> 'workflow'" : ''}
       )
       WHERE newest > @keep AND pending IS NULL AND (@cutoff IS NULL OR finished_at < @cutoff)`,
    )
    .all(params);
  const wfRuns = db
    .prepare<typeof params, Row>(
      `SELECT 'workflow' AS kind, w.id, w.workflow_id AS owner_id, w.workflow_name AS owner_name, r.id AS loop_run_id, w.status, w.finished_at FROM (
         SELECT id, workflow_id, workflow_name, status, loop_id, slot, attempt, COALESCE(finished_at, updated_at) AS finished_at, ${pending} AS pending,
                ROW_NUMBER() OVER (PARTITION BY workflow_id ORDER BY claimed_position DESC) AS newest
         FROM workflow_runs
         WHERE status <> 'running'
       ) w
       LEFT JOIN loop_runs r ON r.loop_id = w.loop_id AND r.slot = w.slot AND r.attempt = w.attempt
       WHERE w.newest > @keep AND w.pending IS NULL AND (@cutoff IS NULL OR w.finished_at < @cutoff)`,
    )
    .all(params);
  return [...runs, ...wfRuns].filter((r) => !held.has(r.kind, r.id)).sort(byFinish);
}

const byFinish = (a: Row, b: Row) => a.finished_at.localeCompare(b.finished_at) || a.id.localeCompare(b.id);

/** Files and bytes under a run folder (symlinks counted as themselves, never followed); null when it is not a directory. */
export function folderSize(path: string): { bytes: number; files: number } | null {
  let st;
  try {
    st = lstatSync(path);
  } catch {
    return null;
  }
  if (!st.isDirectory()) return null;
  let bytes = 0;
  let files = 0;
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, entry.name);
      if (entry.isDirectory()) walk(p);
      else {
        files += 1;
        try {
          bytes += lstatSync(p).size;
        } catch {
          // removed meanwhile
        }
      }
    }
  };
  walk(path);
  return { bytes, files };
}

async function candidatesOf(runtime: Pick<Runtime, 'db' | 'dataDir' | 'leases'>, options: PruneOptions, nowMs: number): Promise<PruneCandidate[]> {
  const { db, dataDir } = runtime;
  const out: PruneCandidate[] = [];
  for (const row of selectRows(db, options, await heldRuns(runtime.leases, nowMs))) {
    if (!SAFE_ID.test(row.id)) continue;
    const path = runDir(dataDir, row.id);
    const size = folderSize(path);
    // No folder (a run that never started, or whose folder is gone): nothing to prune, nothing to record.
    if (size === null) continue;
    out.push({
      kind: row.kind,
      id: row.id,
      ownerId: row.owner_id,
      ownerName: row.owner_name,
      loopRunId: row.loop_run_id,
      status: row.status,
      finishedAt: row.finished_at,
      path,
      ...size,
    });
  }
  return out;
}

/** Runs the log calls pruned whose folder is still there (an earlier prune stopped before removing it). */
function leftovers(db: Db, dataDir: string): PruneReport['completed'] {
  const rows = db
    .prepare<[], { kind: 'run' | 'workflow'; id: string }>(
      `SELECT 'run' AS kind, id FROM loop_runs WHERE output_pruned_at IS NOT NULL
       UNION ALL SELECT 'workflow' AS kind, id FROM workflow_runs WHERE output_pruned_at IS NOT NULL`,
    )
    .all();
  const out: PruneReport['completed'] = [];
  for (const { kind, id } of rows) {
    if (!SAFE_ID.test(id)) continue;
    const path = runDir(dataDir, id);
    const size = folderSize(path);
    if (size !== null) out.push({ kind, id, path, bytes: size.bytes });
  }
  return out;
}

/** What a prune would remove now, without changing anything (`--dry-run`). */
export async function planPrune(runtime: Pick<Runtime, 'db' | 'dataDir' | 'leases'>, options: PruneOptions, nowMs: number): Promise<PruneReport> {
  const runs = await candidatesOf(runtime, options, nowMs);
  const completed = leftovers(runtime.db, runtime.dataDir);
  return {
    dryRun: true,
    cutoff: options.cutoff,
    keepLast: options.keepLast,
    runs,
    completed,
    pruned: runs.length,
    bytes: sum(runs) + sum(completed),
    failed: [],
  };
}

function sum(list: ReadonlyArray<{ bytes: number }>): number {
  return list.reduce((n, c) => n + c.bytes, 0);
}

function eventOf(c: PruneCandidate, options: PruneOptions): { type: string; data: unknown } {
  const rule = { cutoff: options.cutoff, keepLast: options.keepLast };
  return c.kind === 'run'
    ? { type: 'run.output_pruned', data: { runId: c.id, loopId: c.ownerId, bytes: c.bytes, ...rule } }
    : { type: 'wfrun.output_pruned', data: { wfRunId: c.id, workflowId: c.ownerId, loopRunId: c.loopRunId, bytes: c.bytes, ...rule } };
}

function remove(path: string): string | null {
  try {
    rmSync(path, { recursive: true, force: true, maxRetries: 2 });
    return null;
  } catch (error) {
    return (error as Error).message;
  }
}

/**
 * Prunes: records each removal on `retention:output` (in chunks), then removes the folders; then
 * removes the folders earlier prunes recorded but left behind.
 */
export async function prune(runtime: Runtime, options: PruneOptions): Promise<PruneReport> {
  const { db, dataDir, clock } = runtime;
  const done: PruneCandidate[] = [];
  const failed: PruneReport['failed'] = [];
  let conflicts = 0;
  for (;;) {
    // The stream's version is read before the selection: an append made meanwhile by another prune
    // makes ours conflict, and we select again.
    const actor = (await runtime.log.streamInfo(OUTPUT_RETENTION_STREAM))
      ? await DurableActor.load(runtime, OUTPUT_RETENTION_STREAM)
      : DurableActor.create(runtime, OUTPUT_RETENTION_STREAM, 'retention', currentMachines.retention);
    const candidates = await candidatesOf(runtime, options, clock.now());
    if (candidates.length === 0) break;
    let reselect = false;
    for (let i = 0; i < candidates.length && !reselect; i += CHUNK) {
      const chunk = candidates.slice(i, i + CHUNK);
      try {
        // The retention stream's compare-and-set is the guard: its version was read before the
        // selection, so a prune that recorded meanwhile makes this append conflict and we select
        // again; a finished run never becomes running again.
        await actor.recordAll(chunk.map((c) => eventOf(c, options)));
      } catch (error) {
        if (!(error instanceof ConcurrencyConflictError)) throw error;
        if (++conflicts > 5) {
          throw new BusyError('loops prune: other prunes kept changing the retention log meanwhile', { hint: 'run it again' });
        }
        reselect = true;
        break;
      }
      for (const c of chunk) {
        const error = remove(c.path);
        if (error) failed.push({ id: c.id, path: c.path, error });
        done.push(c);
      }
    }
    if (!reselect) break;
  }
  // Folders recorded as pruned (by this prune or an earlier one) and still there.
  const completed = leftovers(db, dataDir).filter((l) => !failed.some((f) => f.id === l.id));
  for (const l of completed) {
    const error = remove(l.path);
    if (error) failed.push({ id: l.id, path: l.path, error });
  }
  const finished = completed.filter((l) => !failed.some((f) => f.id === l.id));
  done.sort((a, b) => a.finishedAt.localeCompare(b.finishedAt) || a.id.localeCompare(b.id));
  const removed = done.filter((c) => !failed.some((f) => f.id === c.id));
  return {
    dryRun: false,
    cutoff: options.cutoff,
    keepLast: options.keepLast,
    runs: done,
    completed: finished,
    pruned: done.length,
    bytes: sum(removed) + sum(finished),
    failed,
  };
}
