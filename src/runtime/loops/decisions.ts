/**
 * Decisions on a loop's stream: what happens to each slot that came due — fired, skipped for
 * overlap, buffered, coalesced or missed by the catch-up policy — recorded in one append
 * (compare-and-set: two schedulers never decide a slot twice); a retry after a failed attempt; a
 * fixed-delay loop's next due time. The pass that calls these and runs what they promise is
 * pass.ts.
 */
import { cached } from '../../events/db.js';
import { ConcurrencyConflictError } from '../../events/errors.js';
import { backoffDelay } from '../../events/policies.js';
import type { Batch, LeaseInfo, StoredEvent } from '../../events/types.js';
import type { LoopContext } from '../../machines/loop.js';
import { currentMachines } from '../../machines/registry.js';
import { DurableActor } from '../actor.js';
import { newId } from '../ids.js';
import { decideDue, fixedDelayNext, type Decision } from '../../scheduling/planner.js';
import type { RunView } from '../queries/loops.js';
import { requestCancel } from '../execution/cancel.js';
import type { Runtime } from '../runtime.js';

/** Live leases by name (`LeaseStore.live`). */
export type LiveLeases = ReadonlyMap<string, LeaseInfo>;

/** The live leases of runs (`run:<id>`), read once for the sync reads that judge which runs are going. */
export function liveRunLeases(runtime: Runtime, nowMs: number): Promise<LiveLeases> {
  return runtime.leases.live('run:', nowMs);
}

/** The loop's runs recorded as not finished (not its --on-failure command's runs, slot `hook:…`), oldest first. */
function unfinishedRuns(runtime: Runtime, loopId: string): Array<{ id: string }> {
  return cached<[string], { id: string }>(
    runtime.db,
    `SELECT r.id FROM loop_runs r
     WHERE r.loop_id = ? AND r.status IN ('claimed', 'spawning', 'running') AND r.slot NOT LIKE 'hook:%'
     ORDER BY r.claimed_position`,
  ).all(loopId);
}

/**
 * Runs of a loop that are still going: not finished, and their runner's lease is alive (in `live`,
 * from `liveRunLeases`). Not its --on-failure command's runs (slot `hook:…`): a slot is not skipped
 * because a failure is being told.
 */
export function runningRuns(runtime: Runtime, loopId: string, live: LiveLeases): string[] {
  return unfinishedRuns(runtime, loopId)
    .filter((r) => live.has(`run:${r.id}`))
    .map((r) => r.id);
}

/**
 * `runningRuns` for one loop at `nowMs`, reading the leases only when the loop has unfinished runs:
 * a loop deciding its next slot usually has none, and the live leases of every run (a burst's
 * hundred) are then not read once per loop decided.
 */
export async function runningRunsAt(runtime: Runtime, loopId: string, nowMs: number): Promise<string[]> {
  if (unfinishedRuns(runtime, loopId).length === 0) return [];
  return runningRuns(runtime, loopId, await liveRunLeases(runtime, nowMs));
}

/** How many slots of the loop wait behind a running run (overlap buffer-one, buffer-all, cancel-other). */
export function bufferedCount(runtime: Runtime, loopId: string): number {
  return cached<[string], { n: number }>(runtime.db, "SELECT count(*) AS n FROM run_queue WHERE loop_id = ? AND kind = 'buffered'").get(loopId)!.n;
}

/** Decides and records what is due for one loop; returns the runs to execute. */
export async function decideLoop(
  runtime: Runtime,
  loopId: string,
  nowMs: number,
  options: { lateGraceMs?: number; batch?: Batch } = {},
): Promise<{ events: StoredEvent[]; fired: Array<{ runId: string; slot: string; fireAt: string }> }> {
  const actor = await DurableActor.load(runtime, `loop:${loopId}`, {}, currentMachines.loop);
  if (actor.state !== 'active') return { events: [], fired: [] };
  const c = actor.context;
  const decisions: Decision[] = decideDue(
    { id: loopId, schedule: c.schedule!, timing: c.timing!, policies: c.policies! },
    {
      scheduleFrom: c.scheduleFrom!,
      lastSlot: c.lastSlot,
      scheduledRuns: c.scheduledRuns,
      running: await runningRunsAt(runtime, loopId, nowMs),
      buffered: bufferedCount(runtime, loopId),
      nextRunAt: c.nextRunAt,
    },
    nowMs,
    () => newId('run', nowMs),
    options.lateGraceMs === undefined ? {} : { lateGraceMs: options.lateGraceMs },
  );
  if (decisions.length === 0) return { events: [], fired: [] };
  const events = await actor.recordAll(decisions, options.batch ? { batch: options.batch } : {});
  const fired = decisions.flatMap((d) => (d.type === 'slot.fired' ? [{ runId: d.data.runId, slot: d.data.slot, fireAt: d.data.fireAt }] : []));
  // cancel-other: the going runs are asked to stop; the buffered slot runs once they have.
  const cancels = new Map<string, string>();
  for (const d of decisions) if (d.type === 'slot.buffered') for (const id of d.data.cancels) if (!cancels.has(id)) cancels.set(id, d.data.slot);
  for (const [runId, slot] of cancels) await requestCancel(runtime, runId, `overlap cancel-other: slot ${slot} is due`, options.batch);
  return { events, fired };
}

/** The delay before a loop's attempt `next` (2, 3, …), by its policies (`backoffDelay`). */
export function retryDelay(policies: { retryDelayMs: number; backoff: number; maxRetryDelayMs: number | null }, next: number): number {
  return backoffDelay(policies.retryDelayMs, policies.backoff, policies.maxRetryDelayMs, next);
}

/**
 * After a scheduled run ended: if it failed, timed out or was abandoned and the loop has attempts
 * left for that slot, record the retry (its own run id, due after the back-off). A cancelled run is
 * never retried. Returns the recorded events.
 */
export async function scheduleRetry(
  runtime: Runtime,
  loopId: string,
  run: Pick<RunView, 'id' | 'slot' | 'attempt' | 'trigger' | 'status' | 'error' | 'finishedAt'>,
): Promise<StoredEvent[]> {
  if (run.trigger !== 'schedule' || !['failed', 'timed_out', 'abandoned'].includes(run.status)) return [];
  for (let tries = 0; ; tries++) {
    const actor = await DurableActor.load(runtime, `loop:${loopId}`, {}, currentMachines.loop);
    const c = actor.context;
    // An expired loop still retries the slots it fired before it expired.
    if (!['active', 'expired'].includes(actor.state) || !c.policies || run.attempt >= c.policies.attempts) return [];
    const next = run.attempt + 1;
    const base = run.finishedAt ? Date.parse(run.finishedAt) : runtime.clock.now();
    const data = {
      slot: run.slot,
      attempt: next,
      runId: newId('run', runtime.clock.now()),
      dueAt: new Date(base + retryDelay(c.policies, next)).toISOString(),
      after: run.id,
      reason: `${run.status}${run.error ? `: ${run.error}` : ''}`,
    };
    try {
      return await actor.recordAll([{ type: 'slot.retry_scheduled', data }]);
    } catch (error) {
      if (error instanceof ConcurrencyConflictError && tries < 3) continue;
      throw error;
    }
  }
}

/** What follows a scheduled run's end: a retry when one is due by the policy, else (fixed-delay) the next slot. */
export async function afterScheduledRun(runtime: Runtime, loopId: string, run: RunView): Promise<StoredEvent[]> {
  const retry = await scheduleRetry(runtime, loopId, run);
  return retry.length ? retry : rescheduleAfterRun(runtime, loopId, run);
}

/** Is this a fixed-delay loop (its next slot is set when its run ends)? */
function isFixedDelay(c: LoopContext): boolean {
  return c.schedule?.kind === 'every' && c.schedule.anchor === 'fixed-delay';
}

/**
 * After a scheduled run of a fixed-delay loop ended: record when the loop is due next (`every`
 * after the finish), or that it expired. Retries on a concurrent append.
 */
export async function rescheduleAfterRun(runtime: Runtime, loopId: string, run: Pick<RunView, 'id' | 'finishedAt'> | null): Promise<StoredEvent[]> {
  for (let attempt = 0; ; attempt++) {
    const actor = await DurableActor.load(runtime, `loop:${loopId}`, {}, currentMachines.loop);
    const c = actor.context;
    if (actor.state !== 'active' || !isFixedDelay(c)) return [];
    const finished = run?.finishedAt ? Date.parse(run.finishedAt) : runtime.clock.now();
    const next = fixedDelayNext({ id: loopId, schedule: c.schedule!, timing: c.timing! }, finished);
    try {
      return next === null
        ? await actor.recordAll([{ type: 'loop.expired', data: { reason: 'expires-at' } }])
        : await actor.recordAll([{ type: 'loop.rescheduled', data: { nextRunAt: next, after: run?.id ?? null } }]);
    } catch (error) {
      if (error instanceof ConcurrencyConflictError && attempt < 3) continue;
      throw error;
    }
  }
}

/**
 * Fixed-delay loops left without a due time (their runner stopped between firing a slot and
 * recording the run's end): due `every` after their last run finished, or from now.
 */
export async function repairFixedDelay(runtime: Runtime, nowMs: number): Promise<StoredEvent[]> {
  const rows = cached<[], { id: string }>(
    runtime.db,
    `SELECT id FROM loops WHERE status = 'active' AND next_run_at IS NULL
       AND json_extract(schedule, '$.kind') = 'every' AND json_extract(schedule, '$.anchor') = 'fixed-delay'`,
  ).all();
  const out: StoredEvent[] = [];
  const live = rows.length > 0 ? await liveRunLeases(runtime, nowMs) : new Map();
  for (const { id } of rows) {
    if (runningRuns(runtime, id, live).length > 0) continue;
    const last = cached<[string], { id: string; finished_at: string | null }>(
      runtime.db,
      `SELECT id, finished_at FROM loop_runs WHERE loop_id = ? AND trigger = 'schedule' ORDER BY claimed_position DESC LIMIT 1`,
    ).get(id);
    out.push(...(await rescheduleAfterRun(runtime, id, last ? { id: last.id, finishedAt: last.finished_at } : null)));
  }
  return out;
}
