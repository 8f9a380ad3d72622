/**
 * One scheduling pass (`loops tick`, and later each wake-up of the daemon): for every active loop
 * that is due, decide what happens to each slot that came due — fired, skipped for overlap,
 * coalesced or missed by the catch-up policy — record those decisions on the loop's stream in one
 * append (compare-and-set: two schedulers never decide a slot twice), then execute the fired runs:
 * one after another within a loop (catch-up `all` never starts a herd), loops in parallel up to
 * `concurrency`.
 */
import { cached } from '../events/db.js';
import { ConcurrencyConflictError } from '../events/errors.js';
import type { StoredEvent } from '../events/types.js';
import type { LoopContext } from '../machines/loop.js';
import { DurableActor } from './actor.js';
import { newId } from './ids.js';
import { decideDue, fixedDelayNext, type Decision } from './planner.js';
import { findLoop, type RunView } from './queries.js';
import { requestCancel } from './cancel.js';
import { executeRun, type RunNowOptions } from './run-now.js';
import type { Runtime } from './runtime.js';

export interface TickOptions {
  /** Loops whose runs execute at the same time (default 4). */
  concurrency?: number;
  /** A slot at most this late is on time (default 60 s). */
  lateGraceMs?: number;
  /** Called as each decision is recorded and each run ends. */
  onDecision?: (loopName: string, event: StoredEvent) => void;
  onRun?: (run: RunView) => void;
  signal?: AbortSignal;
  runOptions?: Pick<RunNowOptions, 'leaseTtlMs' | 'tailBytes'>;
}

export interface TickDecision {
  loopId: string;
  loopName: string;
  type: string;
  data: unknown;
}

export interface TickResult {
  /** When the pass looked at the clock. */
  at: string;
  decisions: TickDecision[];
  runs: RunView[];
  /** Loops another scheduler decided first (their slots were not decided twice). */
  conflicts: string[];
}

/** Runs of a loop that are still going: not finished, and their runner's lease is alive. */
export function runningRuns(runtime: Runtime, loopId: string, nowMs: number): string[] {
  return cached<[string, string], { id: string }>(
    runtime.db,
    `SELECT r.id FROM loop_runs r JOIN leases l ON l.name = 'run:' || r.id
     WHERE r.loop_id = ? AND r.status IN ('claimed', 'spawning', 'running') AND l.expires_at > ?
     ORDER BY r.claimed_position`,
  )
    .all(loopId, new Date(nowMs).toISOString())
    .map((r) => r.id);
}

/** How many slots of the loop wait behind a running run (overlap buffer-one, buffer-all, cancel-other). */
function bufferedCount(runtime: Runtime, loopId: string): number {
  return cached<[string], { n: number }>(runtime.db, 'SELECT count(*) AS n FROM buffered_slots WHERE loop_id = ?').get(loopId)!.n;
}

export interface BufferedSlot {
  loopId: string;
  loopName: string;
  runId: string;
  slot: string;
  fireAt: string;
}

/**
 * Buffered slots whose turn has come: the oldest one of each loop (active, or expired with slots
 * still waiting) that has no run going any more.
 */
export function dueBuffered(runtime: Runtime, nowMs: number): BufferedSlot[] {
  const rows = cached<[], BufferedSlot>(
    runtime.db,
    `SELECT b.loop_id AS loopId, l.name AS loopName, b.run_id AS runId, b.slot, b.fire_at AS fireAt
     FROM buffered_slots b CROSS JOIN loops l ON l.id = b.loop_id -- CROSS: from the (few) buffered slots, not every active loop
     WHERE l.status IN ('active', 'expired')
       AND b.position = (SELECT min(position) FROM buffered_slots WHERE loop_id = b.loop_id)
     ORDER BY b.position`,
  ).all();
  return rows.filter((r) => runningRuns(runtime, r.loopId, nowMs).length === 0);
}

/** Decides and records what is due for one loop; returns the runs to execute. */
export function decideLoop(
  runtime: Runtime,
  loopId: string,
  nowMs: number,
  options: Pick<TickOptions, 'lateGraceMs'> = {},
): { events: StoredEvent[]; fired: Array<{ runId: string; slot: string; fireAt: string }> } {
  const actor = DurableActor.load(runtime, `loop:${loopId}`);
  if (actor.state !== 'active') return { events: [], fired: [] };
  const c = actor.snapshot.context as LoopContext;
  const decisions: Decision[] = decideDue(
    { id: loopId, schedule: c.schedule!, timing: c.timing!, policies: c.policies! },
    {
      scheduleFrom: c.scheduleFrom!,
      lastSlot: c.lastSlot,
      scheduledRuns: c.scheduledRuns,
      running: runningRuns(runtime, loopId, nowMs),
      buffered: bufferedCount(runtime, loopId),
      nextRunAt: c.nextRunAt,
    },
    nowMs,
    () => newId('run', nowMs),
    options.lateGraceMs === undefined ? {} : { lateGraceMs: options.lateGraceMs },
  );
  if (decisions.length === 0) return { events: [], fired: [] };
  const events = actor.recordAll(decisions);
  const fired = decisions.flatMap((d) => (d.type === 'slot.fired' ? [{ runId: d.data.runId, slot: d.data.slot, fireAt: d.data.fireAt }] : []));
  // cancel-other: the going runs are asked to stop; the buffered slot runs once they have.
  const cancels = new Map<string, string>();
  for (const d of decisions) if (d.type === 'slot.buffered') for (const id of d.data.cancels) if (!cancels.has(id)) cancels.set(id, d.data.slot);
  for (const [runId, slot] of cancels) requestCancel(runtime, runId, `overlap cancel-other: slot ${slot} is due`);
  return { events, fired };
}

/** The delay before attempt `next` (2, 3, …): retryDelay × backoff^(next−2), at most maxRetryDelay. */
export function retryDelay(policies: { retryDelayMs: number; backoff: number; maxRetryDelayMs: number | null }, next: number): number {
  const delay = Math.round(policies.retryDelayMs * policies.backoff ** Math.max(0, next - 2));
  return policies.maxRetryDelayMs === null ? delay : Math.min(delay, policies.maxRetryDelayMs);
}

/**
 * After a scheduled run ended: if it failed, timed out or was abandoned and the loop has attempts
 * left for that slot, record the retry (its own run id, due after the back-off). A cancelled run is
 * never retried. Returns the recorded events.
 */
export function scheduleRetry(
  runtime: Runtime,
  loopId: string,
  run: Pick<RunView, 'id' | 'slot' | 'attempt' | 'trigger' | 'status' | 'error' | 'finishedAt'>,
): StoredEvent[] {
  if (run.trigger !== 'schedule' || !['failed', 'timed_out', 'abandoned'].includes(run.status)) return [];
  for (let tries = 0; ; tries++) {
    const actor = DurableActor.load(runtime, `loop:${loopId}`);
    const c = actor.snapshot.context as LoopContext;
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
      return actor.recordAll([{ type: 'slot.retry_scheduled', data }]);
    } catch (error) {
      if (error instanceof ConcurrencyConflictError && tries < 3) continue;
      throw error;
    }
  }
}

export interface DueRetry {
  loopId: string;
  loopName: string;
  runId: string;
  slot: string;
  attempt: number;
  dueAt: string;
}

/** Retries whose time has come, of loops that are active (or expired after firing the slot). */
export function dueRetries(runtime: Runtime, nowMs: number): DueRetry[] {
  return cached<[string], DueRetry>(
    runtime.db,
    `SELECT p.loop_id AS loopId, l.name AS loopName, p.run_id AS runId, p.slot, p.attempt, p.due_at AS dueAt
     FROM pending_retries p JOIN loops l ON l.id = p.loop_id
     WHERE l.status IN ('active', 'expired') AND p.due_at <= ? ORDER BY p.due_at`,
  ).all(new Date(nowMs).toISOString());
}

/** The earliest pending retry of an active loop, or null. */
export function nextRetryAt(runtime: Runtime): number | null {
  const row = cached<[], { due: string }>(
    runtime.db,
    `SELECT p.due_at AS due FROM pending_retries p JOIN loops l ON l.id = p.loop_id WHERE l.status IN ('active', 'expired')
     ORDER BY p.due_at LIMIT 1`,
  ).get();
  return row ? Date.parse(row.due) : null;
}

/** What follows a scheduled run's end: a retry when one is due by the policy, else (fixed-delay) the next slot. */
export function afterScheduledRun(runtime: Runtime, loopId: string, run: RunView): StoredEvent[] {
  const retry = scheduleRetry(runtime, loopId, run);
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
export function rescheduleAfterRun(runtime: Runtime, loopId: string, run: Pick<RunView, 'id' | 'finishedAt'> | null): StoredEvent[] {
  for (let attempt = 0; ; attempt++) {
    const actor = DurableActor.load(runtime, `loop:${loopId}`);
    const c = actor.snapshot.context as LoopContext;
    if (actor.state !== 'active' || !isFixedDelay(c)) return [];
    const finished = run?.finishedAt ? Date.parse(run.finishedAt) : runtime.clock.now();
    const next = fixedDelayNext({ id: loopId, schedule: c.schedule!, timing: c.timing! }, finished);
    try {
      return next === null
        ? actor.recordAll([{ type: 'loop.expired', data: { reason: 'expires-at' } }])
        : actor.recordAll([{ type: 'loop.rescheduled', data: { nextRunAt: next, after: run?.id ?? null } }]);
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
export function repairFixedDelay(runtime: Runtime, nowMs: number): StoredEvent[] {
  const rows = cached<[], { id: string }>(
    runtime.db,
    `SELECT id FROM loops WHERE status = 'active' AND next_run_at IS NULL
       AND json_extract(schedule, '$.kind') = 'every' AND json_extract(schedule, '$.anchor') = 'fixed-delay'`,
  ).all();
  const out: StoredEvent[] = [];
  for (const { id } of rows) {
    if (runningRuns(runtime, id, nowMs).length > 0) continue;
    const last = cached<[string], { id: string; finished_at: string | null }>(
      runtime.db,
      `SELECT id, finished_at FROM loop_runs WHERE loop_id = ? AND trigger = 'schedule' ORDER BY claimed_position DESC LIMIT 1`,
    ).get(id);
    out.push(...rescheduleAfterRun(runtime, id, last ? { id: last.id, finishedAt: last.finished_at } : null));
  }
  return out;
}

export async function tick(runtime: Runtime, options: TickOptions = {}): Promise<TickResult> {
  const nowMs = runtime.clock.now();
  repairFixedDelay(runtime, nowMs);
  const at = new Date(nowMs).toISOString();
  const due = cached<[string], { id: string; name: string }>(
    runtime.db,
    "SELECT id, name FROM loops WHERE status = 'active' AND next_run_at IS NOT NULL AND next_run_at <= ? ORDER BY next_run_at",
  ).all(at);
  const result: TickResult = { at, decisions: [], runs: [], conflicts: [] };
  // One work item per loop: its retries and fired slots run one after another.
  const byLoop = new Map<string, { loopId: string; fired: Array<{ runId: string; slot: string; fireAt: string; attempt?: number }> }>();
  const itemFor = (loopId: string) => {
    let item = byLoop.get(loopId);
    if (!item) byLoop.set(loopId, (item = { loopId, fired: [] }));
    return item;
  };
  for (const retry of dueRetries(runtime, nowMs)) {
    result.decisions.push({ loopId: retry.loopId, loopName: retry.loopName, type: 'slot.retry_due', data: retry });
    itemFor(retry.loopId).fired.push({ runId: retry.runId, slot: retry.slot, fireAt: retry.dueAt, attempt: retry.attempt });
  }
  for (const loop of due) {
    try {
      const { events, fired } = decideLoop(runtime, loop.id, nowMs, options);
      for (const event of events) {
        result.decisions.push({ loopId: loop.id, loopName: loop.name, type: event.type, data: event.data });
        options.onDecision?.(loop.name, event);
      }
      if (fired.length) itemFor(loop.id).fired.push(...fired);
    } catch (error) {
      if (error instanceof ConcurrencyConflictError) {
        result.conflicts.push(loop.name);
        continue;
      }
      throw error;
    }
  }
  // Loops with a buffered slot whose blocking run has ended (elsewhere, or before this pass).
  for (const b of dueBuffered(runtime, nowMs)) itemFor(b.loopId);
  // Execute: within a loop one run after another, then its buffered slots in the order they came;
  // loops in parallel up to the concurrency.
  const work = [...byLoop.values()];
  const concurrency = Math.max(1, options.concurrency ?? 4);
  let index = 0;
  const worker = async () => {
    while (index < work.length) {
      const item = work[index++]!;
      const loop = findLoop(runtime.db, item.loopId, { includeRemoved: true });
      for (const f of item.fired) {
        if (options.signal?.aborted) return;
        const run = await executeRun(runtime, loop, {
          runId: f.runId,
          slot: f.slot,
          scheduledFor: f.fireAt,
          trigger: 'schedule',
          ...(f.attempt ? { attempt: f.attempt } : {}),
          ...(options.signal ? { signal: options.signal } : {}),
          ...options.runOptions,
        });
        result.runs.push(run);
        afterScheduledRun(runtime, item.loopId, run);
        options.onRun?.(run);
      }
      for (;;) {
        if (options.signal?.aborted) return;
        const next = dueBuffered(runtime, runtime.clock.now()).find((b) => b.loopId === item.loopId);
        if (!next) break;
        result.decisions.push({ loopId: next.loopId, loopName: next.loopName, type: 'slot.buffer_due', data: next });
        const run = await executeRun(runtime, loop, {
          runId: next.runId,
          slot: next.slot,
          scheduledFor: next.fireAt,
          trigger: 'schedule',
          ...(options.signal ? { signal: options.signal } : {}),
          ...options.runOptions,
        });
        result.runs.push(run);
        afterScheduledRun(runtime, item.loopId, run);
        options.onRun?.(run);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, work.length) }, worker));
  return result;
}
