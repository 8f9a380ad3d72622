/**
 * The scheduling pass — one implementation, used by `loops tick`, the daemon and `run-now` of a
 * due loop. A pass has two durable steps:
 *
 *  1. **decide** (`decide`): every due loop's slot decisions (fired, skipped, buffered, coalesced,
 *     missed, expired) recorded on its stream, all of them in one transaction; and work stranded by
 *     a runner that is gone judged by its loop's catch-up policy (`slot.dropped` when too late).
 *  2. **claim and run** (`Dispatcher`): the claimable work in the `run_queue` projection — fired
 *     and buffered slots, scheduled retries — that is due, claimed and run up to a concurrency,
 *     one run at a time per loop.
 *
 * Because the decision and the claim are separate facts in the log, a slot fired by a pass whose
 * process died before starting it is not lost: whoever passes next claims it.
 */
import { setMaxListeners } from 'node:events';
import { cached } from '../../events/db.js';
import { OVERLAP, type OverlapPolicy } from '../../events/policies.js';
import { ClaimLostError, ConcurrencyConflictError, LeaseLostError } from '../../events/errors.js';
import type { Batch, StoredEvent } from '../../events/types.js';
import { currentMachines } from '../../machines/registry.js';
import { DurableActor } from '../actor.js';
import type { TimerHandle } from '../clock.js';
import { formatDuration } from '../../events/durations.js';
import { holdRunnerLease, RUNNER_LEASE_TTL_MS, runnerLeaseName } from '../leases.js';
import { strandedVerdict } from '../../scheduling/planner.js';
import { adoptRun } from '../execution/attempt.js';
import { afterScheduledRun } from '../loops/decisions.js';
import { deliverNotice, pendingNotices, requestNotices, type RunHook } from '../loops/notify.js';
import { findLoopRecord, findRun, type RunView } from '../queries/loops.js';
import { recoverWorkflowLoopRun } from '../workflows/runner.js';
import { recoverRuns, type RecoveryReport } from './recovery.js';
import { claimableWork, QUEUE_COLUMNS, queueItems, type QueueItem } from './run-queue.js';
import { eligibleRunners, liveRunners } from './hosts.js';
import { executeRun, type RunNowOptions } from '../execution/run-now.js';
import type { Runtime } from '../runtime.js';
import { decideLoop, repairFixedDelay } from '../loops/decisions.js';
import { faultPoint } from '../../events/faults.js';

// ── step 1: decide ─────────────────────────────────────────────────────────────────────────────

export interface PassDecision {
  loopId: string;
  loopName: string;
  type: string;
  data: unknown;
}

export interface DecideOptions {
  /** A slot at most this late is on time (default 60 s). */
  lateGraceMs?: number;
  /** Called with each recorded decision, after the pass's transaction committed. */
  onDecision?: (loopName: string, event: StoredEvent) => void;
  /** Called when deciding a loop failed (other than losing the race to another pass). */
  onError?: (loopName: string, error: Error) => void;
  /**
   * Given, the due loops are decided in transactions of growing size — 4, then 8, 16… loops — and
   * this is called after each but the last has committed, with the runs this pass fired so far
   * (the daemon starts them), then the event loop is let turn: the first runs of a burst are
   * claimed and their processes started while the rest are decided. Only runs of loops already
   * decided start meanwhile, so every decision sees what it would see in one transaction; work
   * queued before the pass (retries, buffered or stranded slots) waits for the pass's end, as
   * ever. Without it, one transaction decides them all (`tick`).
   */
  betweenCommits?: (fired: ReadonlySet<string>) => Promise<unknown>;
}

/** The first transaction of a pass's decisions, with `betweenCommits` (then each is twice the last). */
const FIRST_DECIDE_BATCH = 4;

export interface DecideResult {
  decisions: PassDecision[];
  /** Loops another scheduler decided first (their slots were not decided twice). */
  conflicts: string[];
}

/**
 * Step 1 of a pass: records every due loop's decisions, and what becomes of work stranded by
 * runners that are gone, in one transaction (one fsync for a hundred loops due at once), each
 * loop in its own savepoint. Takes this runner's lease in the same transaction. With
 * `betweenCommits`, in a few transactions of growing size instead (the lease in the first, the
 * stranded work in the last).
 */
export async function decide(runtime: Runtime, nowMs: number, options: DecideOptions = {}): Promise<DecideResult> {
  const result: DecideResult = { decisions: [], conflicts: [] };
  const recorded: Array<{ loopName: string; event: StoredEvent }> = [];
  const note = (loopId: string, loopName: string, events: StoredEvent[]) => {
    for (const event of events) {
      result.decisions.push({ loopId, loopName, type: event.type, data: event.data });
      recorded.push({ loopName, event });
    }
  };
  for (const event of await repairFixedDelay(runtime, nowMs)) {
    const loopId = event.streamId.slice('loop:'.length);
    note(loopId, findLoopRecord(runtime.db, loopId, { includeRemoved: true }).name, [event]);
  }
  const due = cached<[string], { id: string; name: string }>(
      runtime.db,
      // An @reboot loop has no due time until a boot is decided: every pass asks it (the planner finds the boot, once).
      // Two index ranges of (status, next_run_at), not one OR: an OR across them made SQLite scan every loop.
      `SELECT id, name, next_run_at FROM loops WHERE status = 'active' AND next_run_at <= ?
       UNION ALL
       SELECT id, name, next_run_at FROM loops WHERE status = 'active' AND next_run_at IS NULL AND lower(json_extract(schedule, '$.expr')) = '@reboot'
       ORDER BY next_run_at`,
    )
    .all(new Date(nowMs).toISOString());
  const stranded = await strandedWork(runtime, nowMs);
  if (due.length === 0 && stranded.length === 0) return result;
  const parts: Array<typeof due> = [];
  if (options.betweenCommits === undefined) parts.push(due);
  else for (let at = 0, size = FIRST_DECIDE_BATCH; at < due.length || parts.length === 0; at += size, size *= 2) parts.push(due.slice(at, at + size));
  for (const [k, part] of parts.entries()) {
    const last = k === parts.length - 1;
    const told = recorded.length;
    await runtime.log.batch(async (batch) => {
      if (k === 0) await holdRunnerLease(runtime, RUNNER_LEASE_TTL_MS, batch);
      for (const loop of part) {
        try {
          const { events } = await decideLoop(runtime, loop.id, nowMs, options.lateGraceMs === undefined ? { batch } : { lateGraceMs: options.lateGraceMs, batch });
          note(loop.id, loop.name, events);
        } catch (error) {
          if (error instanceof ConcurrencyConflictError) result.conflicts.push(loop.name);
          else if (options.onError) options.onError(loop.name, error as Error);
          else throw error;
        }
      }
      if (!last) return;
      const byLoop = new Map<string, Stranded[]>();
      for (const item of stranded) byLoop.set(item.loopId, [...(byLoop.get(item.loopId) ?? []), item]);
      for (const [loopId, items] of byLoop) {
        try {
          note(loopId, items[0]!.loopName, await judgeStranded(runtime, loopId, items, nowMs, options.lateGraceMs ?? 60_000, batch, result.decisions));
        } catch (error) {
          if (error instanceof ConcurrencyConflictError) continue; // claimed or decided meanwhile: the next pass looks again
          if (options.onError) options.onError(items[0]!.loopName, error as Error);
          else throw error;
        }
      }
    });
    const committed = recorded.slice(told);
    if (committed.some(({ event }) => event.type === 'slot.fired')) faultPoint('between-fired-and-claimed');
    for (const { loopName, event } of committed) options.onDecision?.(loopName, event);
    if (!last && options.betweenCommits) {
      const fired = new Set(result.decisions.flatMap((d) => (d.type === 'slot.fired' ? [(d.data as { runId: string }).runId] : [])));
      await options.betweenCommits(fired);
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }
  return result;
}

/** A fired slot nobody is going to start, and why: its decider is gone, or no live runner has its loop's labels. */
type Stranded = QueueItem & { why: string };

/**
 * Fired slots nobody is going to start: decided by a runner whose lease is gone (it stopped before
 * starting them), or — of a loop pinned with `--runs-on`, meant for a runner with its labels
 * whoever decided it — no runner with those labels is alive (holds its runner lease).
 */
async function strandedWork(runtime: Runtime, nowMs: number): Promise<Stranded[]> {
  const rows = queueItems(
    cached<[string], Parameters<typeof queueItems>[0][number]>(
      runtime.db,
      `SELECT ${QUEUE_COLUMNS} FROM run_queue q CROSS JOIN loops l ON l.id = q.loop_id
       WHERE q.kind = 'fired' AND q.due_at <= ?
       ORDER BY q.position`,
    ).all(new Date(nowMs).toISOString()),
  ).filter((q) => q.runsOn !== null || q.decidedBy !== runtime.runnerId);
  if (rows.length === 0) return [];
  const live = await runtime.leases.live('runner:', nowMs);
  const runners = rows.some((q) => q.runsOn !== null) ? await liveRunners(runtime, nowMs) : [];
  const stranded: Stranded[] = [];
  for (const q of rows) {
    if (q.runsOn !== null) {
      if (eligibleRunners(runners, q.runsOn).length === 0) {
        stranded.push({ ...q, why: `no live runner has the label${q.runsOn.length > 1 ? 's' : ''} ${q.runsOn.join(',')} it runs on` });
      }
    } else if (q.decidedBy === null || !live.has(`runner:${q.decidedBy}`)) {
      stranded.push({ ...q, why: `runner ${q.decidedBy ?? '?'} stopped before starting it` });
    }
  }
  return stranded;
}

/**
 * Stranded fired slots of one loop: each still runs unless its loop's catch-up policy says it is
 * too late now (catch-up none past the grace, outside the catch-up window, or — catch-up latest —
 * a later slot fired since); those are recorded `slot.dropped`, with why.
 */
async function judgeStranded(
  runtime: Runtime,
  loopId: string,
  items: Stranded[],
  nowMs: number,
  graceMs: number,
  batch: Batch,
  decidedNow: ReadonlyArray<DecideResult['decisions'][number]>,
): Promise<StoredEvent[]> {
  const actor = await DurableActor.load(runtime, `loop:${loopId}`, {}, currentMachines.loop);
  const c = actor.context;
  if (!c.policies) return [];
  const drops: Array<{ type: 'slot.dropped'; data: { runId: string; slot: string; attempt: number; reason: string } }> = [];
  for (const item of items) {
    // Fired before this pass (the table), or by it (its decisions: not committed yet, and a store's
    // read side may show only what is committed — docs/design/postgres.md, (c)).
    const laterFired =
      decidedNow.some((d) => d.loopId === loopId && (d.type === 'slot.fired' || d.type === 'slot.buffered') && (d.data as { slot: string }).slot > item.slot) ||
      cached(runtime.db, "SELECT 1 FROM slot_decisions WHERE loop_id = ? AND decision IN ('fired', 'buffered') AND slot_from > ? LIMIT 1")
        .get(loopId, item.slot) !== undefined;
    const verdict = strandedVerdict(c.policies, { fireAt: item.dueAt }, laterFired, nowMs, graceMs);
    if (verdict === null) continue;
    const late = formatDuration(Math.max(0, nowMs - Date.parse(item.dueAt)));
    drops.push({
      type: 'slot.dropped',
      data: { runId: item.runId, slot: item.slot, attempt: item.attempt, reason: `stranded: ${item.why}; ${verdict} (${late} late)` },
    });
  }
  if (drops.length === 0) return [];
  return actor.recordAll(drops, { guards: drops.map((d) => ({ kind: 'queued' as const, runId: d.data.runId })), batch });
}

/** A loop's overlap rule (an unknown name, from a newer loops, is treated as the default). */
function overlapRule(name: string) {
  return OVERLAP.policies[(name in OVERLAP.policies ? name : OVERLAP.default) as OverlapPolicy];
}

// ── step 2: claim and run ──────────────────────────────────────────────────────────────────────

/** The first chunk of a burst's starts (`Dispatcher.launchStarts`); each next chunk is twice the last. */
const FIRST_START_CHUNK = 2;

export interface DispatcherOptions {
  /** Runs at once (default 4), adopted ones included. */
  concurrency?: number;
  /**
   * Aborting cancels the runs it started and starts no more; adopted processes are left running,
   * their leases given back, for the next runner to adopt (it did not start them).
   */
  signal?: AbortSignal;
  runOptions?: Pick<RunNowOptions, 'leaseTtlMs' | 'tailBytes'>;
  /** A run is about to be claimed. */
  onStart?: (item: QueueItem) => void;
  /** A run ended (it is recorded). */
  onRun?: (run: RunView, item: QueueItem | null) => void;
  /** A run could not be executed (not a lost claim: that is silent). */
  onError?: (item: QueueItem | { runId: string; loopName: string }, error: Error) => void;
  /** Something finished: capacity or a loop became free. */
  onSettled?: () => void;
}

/**
 * Claims and runs queued work: up to `concurrency` runs at once, one at a time per loop unless its
 * runs may overlap (`--overlap allow`): a loop's fired slots, retries and buffered slots run one
 * after another, in due order. It also takes over what runners that are gone left behind
 * (`recover`). The one concurrency primitive of the runtime's scheduling: `tick` drains it, the
 * daemon keeps it open.
 */
export class Dispatcher {
  private readonly inFlight = new Map<string, Promise<void>>();
  /** Runs going per loop (started or adopted here). */
  private readonly busyLoops = new Map<string, number>();
  private waitingCount = 0;
  /** Runs decided and not yet started (`launchStarts`). */
  private readonly pendingStarts: Array<() => void> = [];
  private launching = false;
  private heartbeat: TimerHandle | null = null;
  private closed = false;

  constructor(
    readonly runtime: Runtime,
    readonly options: DispatcherOptions = {},
  ) {
    // Every run it starts listens on the one signal (its cancel): as many as the concurrency.
    if (options.signal) setMaxListeners(0, options.signal);
  }

  get concurrency(): number {
    return Math.max(1, this.options.concurrency ?? 4);
  }

  /** Runs executing now (adopted ones included). */
  get active(): number {
    return this.inFlight.size;
  }

  /** Work that was due at the last dispatch and did not start (no capacity, or its loop busy). */
  get waiting(): number {
    return this.waitingCount;
  }

  /** True while `runId` is being executed (or watched, adopted) by this dispatcher. */
  running(runId: string): boolean {
    return this.inFlight.has(runId);
  }

  /**
   * Starts what is due by `dueByMs` and may start now — of it, with `only`, the runs it names —
   * and returns the items started. Only the read of the queue awaits; what starts is decided after
   * it in one turn (a second dispatch meanwhile sees these runs in flight).
   */
  async dispatch(dueByMs: number, only?: ReadonlySet<string>): Promise<QueueItem[]> {
    if (this.closed || this.options.signal?.aborted) return [];
    const work = await claimableWork(this.runtime, dueByMs);
    if (this.closed || this.options.signal?.aborted) return [];
    const started: QueueItem[] = [];
    let waiting = 0;
    /** With `only`: loops with earlier work not named (it goes first, at a later dispatch). */
    const later = new Set<string>();
    for (const item of work) {
      if (this.inFlight.has(item.runId)) continue;
      if (only && (!only.has(item.runId) || later.has(item.loopId))) {
        later.add(item.loopId);
        continue;
      }
      // One run of a loop at a time (catch-up never starts a herd), unless its runs may overlap.
      const waitsForLoop = overlapRule(item.overlap).whenBusy !== 'run' && (this.busyLoops.get(item.loopId) ?? 0) > 0;
      if (waitsForLoop || this.inFlight.size >= this.concurrency) {
        waiting += 1;
        continue;
      }
      if (this.start(item)) started.push(item);
    }
    this.waitingCount = waiting;
    this.launchStarts();
    return started;
  }

  /**
   * Starts the runs `dispatch` decided, in chunks of growing size, one chunk per turn of the event
   * loop: 2, then 4, 8, 16… A chunk's claims commit together at the end of its turn (group commit),
   * so its runs' spawn requests go out — and the spawner helper forks them on the other core —
   * while the next chunk is claimed. Started all in one turn, a burst of 100 runs sent its first
   * spawn request only after all 100 claims were built and committed. Each run is in flight (and
   * its loop busy) from the turn `dispatch` decided it; one closed or aborted before its turn
   * stays queued, unclaimed.
   */
  private launchStarts(): void {
    if (this.launching || this.pendingStarts.length === 0) return;
    this.launching = true;
    let size = FIRST_START_CHUNK;
    const next = () => {
      const chunk = this.pendingStarts.splice(0, size);
      size *= 2;
      for (const launch of chunk) launch();
      if (this.pendingStarts.length > 0) setImmediate(next);
      else this.launching = false;
    };
    next();
  }

  /**
   * Runs left behind by runners that are gone: records what is known of those whose process is
   * gone, and takes over those whose process still runs (`adoptRun`: same deadline, same
   * terminate, same recording as a run started here) and workflow loop runs whose workflow run
   * went on. Both then count as this dispatcher's runs. Returns what recovery found.
   */
  async recover(): Promise<RecoveryReport> {
    // Runs executed here are never stale to us (one whose lease ran out while it retried a write on a full disk is still ours).
    const report = await recoverRuns(this.runtime, this.options.runOptions?.leaseTtlMs, (runId) => this.inFlight.has(runId));
    if (this.closed || this.options.signal?.aborted) return report;
    const signal = this.options.signal ? { signal: this.options.signal } : {};
    const ttl = this.options.runOptions?.leaseTtlMs !== undefined ? { leaseTtlMs: this.options.runOptions.leaseTtlMs } : {};
    // Each adoption is waited for until its lease is taken and recorded (not its process's end):
    // the decisions that follow (overlap) see the run as going — on a store whose lease writes
    // are a round trip away, before they were made.
    const taken: Array<Promise<unknown>> = [];
    for (const o of report.orphaned) {
      if (this.inFlight.has(o.runId)) continue;
      const run = findRun(this.runtime.db, o.runId);
      const release = this.options.signal ? { release: this.options.signal } : {};
      let adopted!: () => void;
      const ready = new Promise<void>((resolve) => (adopted = resolve));
      const adoption = adoptRun(this.runtime, o.runId, o, { ...release, ...ttl, onAdopted: () => adopted() });
      this.track(o.runId, run.loopId, run.loopName, null, adoption);
      taken.push(Promise.race([ready, adoption.then(() => undefined, () => undefined)]));
    }
    await Promise.all(taken);
    for (const runId of report.workflows) {
      if (this.inFlight.has(runId)) continue;
      const run = findRun(this.runtime.db, runId);
      const resumed = recoverWorkflowLoopRun(this.runtime, runId, { ...signal, ...ttl }).then(async () => {
        const ended = findRun(this.runtime.db, runId);
        const followUp = await afterScheduledRun(this.runtime, ended.loopId, ended);
        await requestNotices(this.runtime, ended, followUp);
        return ended;
      });
      this.track(runId, run.loopId, run.loopName, null, resumed);
    }
    await this.deliverNotices();
    return report;
  }

  /**
   * Tells the ends of runs (--on-failure, --notify-url) that no live runner is telling: those this
   * dispatcher's runs recorded, and those a runner that stopped left pending. Each is this
   * dispatcher's work (drain and idle wait for it), but never holds its loop's next run.
   */
  async deliverNotices(): Promise<void> {
    if (this.closed || this.options.signal?.aborted) return;
    const now = this.runtime.clock.now();
    const pending = pendingNotices(this.runtime, await this.runtime.leases.live('notice:', now));
    if (this.closed || this.options.signal?.aborted) return;
    const signal = this.options.signal ? { signal: this.options.signal } : {};
    for (const n of pending) {
      const key = `notice:${n.noticeId}`;
      if (this.inFlight.has(key)) continue;
      const hook: RunHook = (loop, o) => executeRun(this.runtime, loop, { ...o, ...this.options.runOptions });
      // Under a key of its own, not the loop's: a loop's runs do not wait for its notices.
      this.track(key, key, n.loopName, null, deliverNotice(this.runtime, n.noticeId, hook, signal).then(() => null));
    }
  }

  private start(item: QueueItem): boolean {
    const { runtime, options } = this;
    let loop;
    try {
      loop = findLoopRecord(runtime.db, item.loopId, { includeRemoved: true });
    } catch (error) {
      options.onError?.(item, error as Error);
      return false;
    }
    options.onStart?.(item);
    let launch!: () => void;
    const launched = new Promise<boolean>((resolve) => (launch = () => resolve(!(this.closed || options.signal?.aborted))));
    this.pendingStarts.push(launch);
    // A lost claim rejects, silently (track).
    const done = launched.then((go) => (go ? executeRun(runtime, loop, {
      runId: item.runId,
      slot: item.slot,
      scheduledFor: item.dueAt,
      trigger: 'schedule',
      queued: true,
      // Its notices are recorded with its end and delivered by deliverNotices.
      notices: 'record',
      ...(item.attempt > 1 ? { attempt: item.attempt } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      ...options.runOptions,
    }) : null));
    this.track(item.runId, item.loopId, item.loopName, item, done);
    return true;
  }

  private track(runId: string, loopId: string, loopName: string, item: QueueItem | null, run: Promise<RunView | null>): void {
    const { options } = this;
    this.busyLoops.set(loopId, (this.busyLoops.get(loopId) ?? 0) + 1);
    const settle = () => {
      this.inFlight.delete(runId);
      const left = (this.busyLoops.get(loopId) ?? 1) - 1;
      if (left > 0) this.busyLoops.set(loopId, left);
      else this.busyLoops.delete(loopId);
    };
    const done = run
      .then(
        (view) => {
          settle();
          if (view) options.onRun?.(view, item);
        },
        (error: unknown) => {
          settle();
          if (error instanceof ClaimLostError) return; // another runner claimed it first, or it was dropped
          options.onError?.(item ?? { runId, loopName }, error as Error);
        },
      )
      .finally(() => options.onSettled?.());
    this.inFlight.set(runId, done);
  }

  /**
   * Runs everything due by `dueByMs` — and what becomes startable as runs end (a loop's next
   * item, a buffered slot whose blocking run ended) — until nothing more can start and nothing
   * runs. What `loops tick` does.
   */
  async drain(dueByMs: number): Promise<void> {
    for (;;) {
      await this.dispatch(dueByMs);
      await this.deliverNotices();
      if (this.inFlight.size === 0) return;
      await Promise.race(this.inFlight.values());
    }
  }

  /** Resolves once nothing runs (what is running now, and what those start, have ended). */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all(this.inFlight.values());
  }

  /** Keeps this runner's lease alive while the dispatcher is open (the daemon's lifetime, a tick). */
  keepRunnerLease(ttlMs = RUNNER_LEASE_TTL_MS): void {
    const { clock } = this.runtime;
    const beat = () => {
      this.heartbeat = clock.setTimeout(() => {
        if (this.closed) return;
        // busy: the next beat tries again, well within the lease
        holdRunnerLease(this.runtime, ttlMs).catch(() => undefined);
        beat();
      }, Math.floor(ttlMs / 3));
    };
    beat();
  }

  /** Stops renewing; the runner lease is given up so what is left queued is known stranded at once. */
  close(): void {
    this.closed = true;
    if (this.heartbeat !== null) this.runtime.clock.clearTimeout(this.heartbeat);
    this.heartbeat = null;
    // best effort: it expires by itself
    this.runtime.leases.releaseByHolder(runnerLeaseName(this.runtime.runnerId), this.runtime.runnerId).catch(() => undefined);
  }
}

// ── loops tick ─────────────────────────────────────────────────────────────────────────────────

export interface TickOptions extends Pick<DecideOptions, 'lateGraceMs' | 'onDecision'> {
  /** Runs at once (default 4). */
  concurrency?: number;
  /** Work decided earlier (a retry, a buffered slot, a slot a stopped runner fired) starts now. */
  onStart?: (item: QueueItem) => void;
  onRun?: (run: RunView) => void;
  signal?: AbortSignal;
  runOptions?: Pick<RunNowOptions, 'leaseTtlMs' | 'tailBytes'>;
}

export interface TickResult {
  /** When the pass looked at the clock. */
  at: string;
  /** The decisions this pass recorded, in order. */
  decisions: PassDecision[];
  /** Queued work decided before this pass that it claimed: retries, buffered slots, stranded slots. */
  started: QueueItem[];
  runs: RunView[];
  /** Loops another scheduler decided first (their slots were not decided twice). */
  conflicts: string[];
}

/**
 * One pass in the foreground: decide, then run everything due at the pass's instant (and what
 * becomes startable as runs end), and wait for it all.
 */
export async function tick(runtime: Runtime, options: TickOptions = {}): Promise<TickResult> {
  const nowMs = runtime.clock.now();
  const started: QueueItem[] = [];
  const runs: RunView[] = [];
  let fired = new Set<string>();
  let failure: Error | null = null;
  const dispatcher = new Dispatcher(runtime, {
    ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.runOptions ? { runOptions: options.runOptions } : {}),
    onStart: (item) => {
      if (fired.has(item.runId)) return;
      started.push(item);
      options.onStart?.(item);
    },
    onRun: (run) => {
      runs.push(run);
      options.onRun?.(run);
    },
    onError: (_item, error) => {
      // A run this pass took over, or claimed, and lost to another runner since: theirs to record.
      if (error instanceof LeaseLostError) return;
      // Reported once the pass is done (thrown here, in a run's promise, it was an unhandled
      // rejection: a stack trace and exit 1 instead of, say, the busy error's exit 75).
      failure ??= error;
    },
  });
  // What runners that are gone left behind first (its retries are queued work of this pass), then
  // the decisions, then everything due.
  await dispatcher.recover();
  const decided = await decide(runtime, nowMs, {
    ...(options.lateGraceMs !== undefined ? { lateGraceMs: options.lateGraceMs } : {}),
    ...(options.onDecision ? { onDecision: options.onDecision } : {}),
  });
  const result: TickResult = { at: new Date(nowMs).toISOString(), decisions: decided.decisions, started, runs, conflicts: decided.conflicts };
  fired = new Set(decided.decisions.flatMap((d) => (d.type === 'slot.fired' ? [(d.data as { runId: string }).runId] : [])));
  dispatcher.keepRunnerLease();
  try {
    await dispatcher.drain(nowMs);
  } finally {
    dispatcher.close();
  }
  if (failure) throw failure;
  return result;
}
