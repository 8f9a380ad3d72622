/**
 * The scheduler daemon: one per data directory. It sleeps until the earliest due loop (never more
 * than `maxSleepMs` at once, re-reading the wall clock on every wake so suspend and clock jumps
 * are noticed and handled by the catch-up policy), notices changes made by other processes
 * (a new loop, a resume) within a second by watching the log's head position, decides due slots
 * exactly like `loops tick`, and runs what fires — concurrently up to `concurrency`, one after
 * another within a loop — without ever waiting for runs before the next pass.
 */
import { existsSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cached } from '../events/db.js';
import { ConcurrencyConflictError, LoopsError } from '../events/errors.js';
import type { TimerHandle } from './clock.js';
import { acquireLease, releaseLease, renewLease, takeLease, type Lease } from './leases.js';
import { databaseFile } from './paths.js';
import { bootId, processStartTime, signalGroup } from './process-info.js';
import { findLoop, findRun, type RunView } from './queries.js';
import { recoverWorkflowLoopRun } from './workflow-run.js';
import { pidFile, readPidFile, runningDaemon, type DaemonInfo } from './daemon-info.js';
import { finishRecovered, processRunning, recoverRuns } from './recovery.js';
import { executeRun } from './run-now.js';
import { type Runtime, useSpawnerHelper } from './runtime.js';
import { checkCancelRequests } from './cancel.js';
import { afterScheduledRun, decideLoop, dueBuffered, dueRetries, nextRetryAt, repairFixedDelay } from './scheduler.js';

export const DAEMON_LEASE = 'daemon';
export { pidFile, runningDaemon, type DaemonInfo } from './daemon-info.js';

export interface DaemonState {
  lastPassAt: string | null;
  lastError: string | null;
  activeRuns: number;
  queuedRuns: number;
  nextFireAt: string | null;
  passes: number;
  /** Who forks the runs: the spawner helper (its pid while it runs) or the daemon itself, and why. */
  spawner?: { mode: 'helper' | 'inline'; pid: number | null; reason: string | null };
}

export interface DaemonOptions {
  concurrency?: number;
  /** Longest single sleep (default 30 s): wake up and re-read the wall clock at least this often. */
  maxSleepMs?: number;
  /** How often the log's head is checked for changes made by others (default 1 s). */
  watchMs?: number;
  /** Daemon lease time-to-live (default 15 s), renewed every third. */
  leaseTtlMs?: number;
  version?: string;
  log?: (line: string) => void;
  onRun?: (run: RunView) => void;
  /**
   * `helper` (default): runs are forked by a small spawner process (spawner.ts), so starting 100
   * runs at once does not hold this thread for the forks; `inline`: forked from this process.
   */
  spawner?: 'helper' | 'inline';
}

export function stateFile(dataDir: string): string {
  return join(dataDir, 'daemon-state.json');
}
export function logFile(dataDir: string): string {
  return join(dataDir, 'daemon.log');
}

export function readDaemonState(dataDir: string): DaemonState | null {
  try {
    return JSON.parse(readFileSync(stateFile(dataDir), 'utf8')) as DaemonState;
  } catch {
    return null;
  }
}

function writeJson(file: string, value: unknown): void {
  writeFileSync(`${file}.tmp`, JSON.stringify(value, null, 2) + '\n', { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
}

export class Daemon {
  private lease: Lease | null = null;
  private stopping = false;
  private wake: (() => void) | null = null;
  private timers = new Set<TimerHandle>();
  private readonly running = new Map<string, AbortController>();
  /** Per-loop chains: runs of one loop execute one after another. */
  private readonly chains = new Map<string, Promise<void>>();
  private queued = 0;
  private adopted = 0;
  private readonly adoptedIds = new Set<string>();
  /** Retries already queued (their pending row goes only when the run is claimed). */
  private readonly retrying = new Set<string>();
  private active = 0;
  private waiting: Array<() => void> = [];
  private readonly state: DaemonState = { lastPassAt: null, lastError: null, activeRuns: 0, queuedRuns: 0, nextFireAt: null, passes: 0 };
  private stopped!: Promise<void>;
  private stopPromise: Promise<void> | null = null;

  constructor(
    readonly runtime: Runtime,
    readonly options: DaemonOptions = {},
  ) {}

  private readonly onNudge = (): void => {
    checkCancelRequests(this.runtime);
    this.wake?.();
  };

  private log(line: string): void {
    (this.options.log ?? ((l: string) => process.stdout.write(`${l}\n`)))(`${new Date(this.runtime.clock.now()).toISOString()} ${line}`);
  }

  /** Takes the data directory's daemon lease (refusing when another live daemon holds it), recovers, starts the loop. */
  start(): void {
    const { runtime } = this;
    const previous = readPidFile(runtime.dataDir);
    const other = previous && processRunning(previous.pid, previous.startTime) ? previous : null;
    if (other && other.runnerId !== runtime.runnerId) {
      throw new LoopsError('already_exists', `a daemon is already running for ${runtime.dataDir} (pid ${other.pid}, since ${other.startedAt})`, {
        hint: 'loops daemon status shows it; loops daemon stop stops it',
      });
    }
    // A pid file left by a daemon whose process is gone (kill -9, a crash, a reboot) proves its
    // runner dead: its leases — the daemon lease and those of the runs it was executing — are
    // expired now, in the same transaction that takes the daemon lease, instead of blocking this
    // start (and recovery) until they run out.
    const dead = previous && !other && previous.runnerId !== runtime.runnerId ? previous.runnerId : null;
    const ttl = this.options.leaseTtlMs ?? 15_000;
    try {
      const now = runtime.clock.now();
      this.lease = runtime.db
        .transaction(() => {
          if (dead) {
            const nowIso = new Date(now).toISOString();
            cached(runtime.db, 'UPDATE leases SET expires_at = ? WHERE holder = ? AND expires_at > ?').run(nowIso, dead, nowIso);
          }
          return takeLease(runtime.db, DAEMON_LEASE, runtime.runnerId, ttl, now);
        })
        .immediate();
    } catch (error) {
      // The holder's lease is live but its process is gone (no pid file, or a stale one): wait it out.
      throw new LoopsError('conflict', `another daemon held ${runtime.dataDir} moments ago; its lease expires within ${ttl / 1000}s`, {
        cause: error,
        retryable: true,
        hint: 'try again in a few seconds',
      });
    }
    const info: DaemonInfo = {
      pid: process.pid,
      startTime: processStartTime(process.pid),
      bootId: bootId(),
      runnerId: runtime.runnerId,
      version: this.options.version ?? '0.0.0',
      startedAt: new Date(runtime.clock.now()).toISOString(),
      dataDir: runtime.dataDir,
    };
    writeJson(pidFile(runtime.dataDir), info);
    if ((this.options.spawner ?? 'helper') === 'helper') {
      const why = useSpawnerHelper(runtime).unavailableReason;
      if (why) this.log(`${why}; runs are forked by the daemon itself`);
    }
    this.saveState();
    this.log(`daemon started: pid ${process.pid}, data ${runtime.dataDir}, concurrency ${this.options.concurrency ?? 4}`);
    // `loops cancel` (and other writers) nudge the daemon with SIGUSR2: look at the log now.
    process.on('SIGUSR2', this.onNudge);
    this.recover();
    this.heartbeat(ttl);
    this.stopped = this.loop();
  }

  /**
   * A run whose runner stopped while its process kept going: take over its lease (fencing the old
   * runner), keep it alive, enforce the run's timeout, and when the process ends record its real
   * outcome from the exit-status file.
   */
  private adopt(o: { runId: string; pid: number; startTime: string | null; timeoutAt: string | null }, ttl: number): void {
    const { runtime } = this;
    const name = `run:${o.runId}`;
    let lease: Lease;
    try {
      lease = acquireLease(runtime.db, name, runtime.runnerId, ttl, runtime.clock.now());
    } catch (error) {
      this.log(`run ${o.runId}: cannot adopt it: ${(error as Error).message}`);
      return;
    }
    this.log(`adopted run ${o.runId}: its runner stopped but its process ${o.pid} is still running`);
    this.adoptedIds.add(o.runId);
    let timedOut = false;
    let killAt: number | null = null;
    this.adopted += 1;
    const watch = () => {
      const timer = runtime.clock.setTimeout(() => {
        this.timers.delete(timer);
        if (this.stopping) {
          this.adopted -= 1;
          return; // left running; adopted again by the next daemon
        }
        const now = runtime.clock.now();
        if (!processRunning(o.pid, o.startTime)) {
          this.adopted -= 1;
          this.adoptedIds.delete(o.runId);
          try {
            const ended = finishRecovered(runtime, o.runId, ttl, { timedOut });
            this.log(`adopted run ${o.runId} ended: ${ended.outcome === 'exited' ? 'recorded from its exit-status file' : 'abandoned (no exit status)'}`);
            for (const id of ended.retried) this.log(`scheduled retry ${id}`);
          } catch (error) {
            this.state.lastError = `adopted run ${o.runId}: ${(error as Error).message}`;
            this.log(this.state.lastError);
          }
          this.wake?.();
          return;
        }
        try {
          lease = renewLease(runtime.db, lease, ttl, now);
        } catch (error) {
          this.adopted -= 1;
          this.log(`adopted run ${o.runId}: lost its lease (${(error as Error).message}); no longer watching it`);
          return;
        }
        if (o.timeoutAt && !timedOut && now >= Date.parse(o.timeoutAt)) {
          timedOut = true;
          killAt = now + 5000;
          signalGroup(o.pid, 'SIGTERM');
          this.log(`adopted run ${o.runId}: timed out; SIGTERM to its process group`);
        } else if (killAt !== null && now >= killAt) {
          signalGroup(o.pid, 'SIGKILL');
          killAt = null;
        }
        watch();
      }, 1000);
      this.timers.add(timer);
    };
    watch();
  }

  private heartbeat(ttl: number): void {
    const timer = this.runtime.clock.setTimeout(() => {
      this.timers.delete(timer);
      if (this.stopping || !this.lease) return;
      try {
        this.lease = renewLease(this.runtime.db, this.lease, ttl, this.runtime.clock.now());
        this.heartbeat(ttl);
      } catch (error) {
        this.state.lastError = `lost the daemon lease: ${(error as Error).message}`;
        this.log(this.state.lastError);
        void this.stop('lost the daemon lease');
      }
    }, Math.floor(ttl / 3));
    this.timers.add(timer);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = this.runtime.clock.setTimeout(() => {
        this.timers.delete(timer);
        this.wake = null;
        resolve();
      }, Math.max(0, ms));
      this.timers.add(timer);
      this.wake = () => {
        this.runtime.clock.clearTimeout(timer);
        this.timers.delete(timer);
        this.wake = null;
        resolve();
      };
    });
  }

  private nextDue(): number | null {
    const row = cached<[], { next: string | null }>(
      this.runtime.db,
      "SELECT next_run_at AS next FROM loops WHERE status = 'active' AND next_run_at IS NOT NULL ORDER BY next_run_at LIMIT 1",
    ).get();
    const loop = row?.next ? Date.parse(row.next) : null;
    const retry = nextRetryAt(this.runtime);
    if (loop === null) return retry;
    return retry === null ? loop : Math.min(loop, retry);
  }

  private async loop(): Promise<void> {
    const maxSleep = this.options.maxSleepMs ?? 30_000;
    const watch = this.options.watchMs ?? 1000;
    while (!this.stopping) {
      try {
        this.pass();
      } catch (error) {
        this.state.lastError = (error as Error).message;
        this.log(`pass failed: ${this.state.lastError}`);
      }
      // Sleep until the earliest due time, at most maxSleep, waking every `watch` to see whether
      // someone else changed the log (then re-plan at once).
      const head = this.runtime.log.headPosition();
      const next = this.nextDue();
      this.state.nextFireAt = next === null ? null : new Date(next).toISOString();
      this.saveState();
      const deadline = this.runtime.clock.monotonic() + Math.min(maxSleep, next === null ? maxSleep : Math.max(0, next - this.runtime.clock.now()));
      while (!this.stopping) {
        const left = deadline - this.runtime.clock.monotonic();
        if (left <= 0) break;
        await this.sleep(Math.min(left, watch));
        if (this.runtime.log.headPosition() !== head) break;
        // A wall-clock jump (or suspend) can make a loop due early: check the due time again.
        const due = this.nextDue();
        if (due !== null && due <= this.runtime.clock.now()) break;
      }
    }
  }

  /** One pass: decide every due loop and queue what fired. */
  /**
   * Runs left by runners that are gone — at start, and on every pass (a `run-now` killed while the
   * daemon runs leaves one whose lease runs out later): record their real end, or adopt them.
   */
  private recover(): void {
    const report = recoverRuns(this.runtime);
    for (const id of report.abandoned) this.log(`recovered run ${id}: abandoned (its runner stopped and its process is gone)`);
    for (const id of report.retried) this.log(`scheduled retry ${id} for a recovered run`);
    for (const id of report.exited) this.log(`recovered run ${id}: its real exit status was recorded from its exit-status file`);
    for (const o of report.orphaned) {
      if (this.adoptedIds.has(o.runId)) continue;
      this.adopt(o, this.options.leaseTtlMs ?? 15_000);
    }
    for (const runId of report.workflows) {
      if (this.adoptedIds.has(runId)) continue;
      this.adoptedIds.add(runId);
      this.log(`resuming run ${runId}: its runner stopped while its workflow run went on`);
      // A graceful stop cancels it like the daemon's own runs.
      const controller = new AbortController();
      this.running.set(runId, controller);
      const done = recoverWorkflowLoopRun(this.runtime, runId, { leaseTtlMs: this.options.leaseTtlMs ?? 15_000, signal: controller.signal })
        .then((status) => {
          const run = findRun(this.runtime.db, runId);
          this.log(`resumed run ${runId} ${status}`);
          if (!this.stopping) for (const event of afterScheduledRun(this.runtime, run.loopId, run)) this.log(`${run.loopName}: ${event.type} ${JSON.stringify(event.data)}`);
        })
        .catch((error: unknown) => {
          this.state.lastError = `resuming run ${runId}: ${(error as Error).message}`;
          this.log(this.state.lastError);
        })
        .finally(() => {
          this.running.delete(runId);
          this.adoptedIds.delete(runId);
          this.chains.delete(`recover:${runId}`);
          this.wake?.();
        });
      // Shutdown waits for it like for the per-loop chains.
      this.chains.set(`recover:${runId}`, done);
    }
  }

  pass(): void {
    const { runtime } = this;
    const now = runtime.clock.now();
    this.recover();
    for (const event of repairFixedDelay(runtime, now)) this.log(`${event.streamId}: ${event.type} ${JSON.stringify(event.data)}`);
    const due = cached<[string], { id: string; name: string }>(
      runtime.db,
      "SELECT id, name FROM loops WHERE status = 'active' AND next_run_at IS NOT NULL AND next_run_at <= ? ORDER BY next_run_at",
    ).all(new Date(now).toISOString());
    // Every due loop's decision in one transaction (one fsync for a hundred loops due at once, not
    // a hundred); each its own savepoint. Their runs start once it committed.
    const decided: Array<{ loopId: string; fired: ReturnType<typeof decideLoop>['fired'] }> = [];
    const lines: string[] = [];
    if (due.length) runtime.log.batch(() => {
      for (const loop of due) {
        try {
          const { events, fired } = decideLoop(runtime, loop.id, now);
          for (const event of events) lines.push(`${loop.name}: ${event.type} ${JSON.stringify(event.data)}`);
          decided.push({ loopId: loop.id, fired });
        } catch (error) {
          if (error instanceof ConcurrencyConflictError) continue; // someone else (tick, run-now) decided first
          this.state.lastError = `${loop.name}: ${(error as Error).message}`;
          lines.push(`deciding ${loop.name} failed: ${(error as Error).message}`);
        }
      }
    });
    for (const line of lines) this.log(line);
    for (const { loopId, fired } of decided) for (const f of fired) this.enqueue(loopId, f);
    for (const b of dueBuffered(runtime, now)) {
      if (this.retrying.has(b.runId)) continue;
      this.retrying.add(b.runId);
      this.log(`${b.loopName}: buffered slot ${b.slot} starts as run ${b.runId} (the run it waited for has ended)`);
      this.enqueue(b.loopId, { runId: b.runId, slot: b.slot, fireAt: b.fireAt });
    }
    for (const retry of dueRetries(runtime, now)) {
      if (this.retrying.has(retry.runId)) continue;
      this.retrying.add(retry.runId);
      this.log(`${retry.loopName}: retry ${retry.runId} (attempt ${retry.attempt} of slot ${retry.slot}) is due`);
      this.enqueue(retry.loopId, { runId: retry.runId, slot: retry.slot, fireAt: retry.dueAt, attempt: retry.attempt });
    }
    this.state.lastPassAt = new Date(now).toISOString();
    this.state.passes += 1;
  }

  private async slot(): Promise<void> {
    const limit = Math.max(1, this.options.concurrency ?? 4);
    if (this.active < limit) {
      this.active += 1;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.active += 1;
  }

  private release(): void {
    this.active -= 1;
    this.waiting.shift()?.();
  }

  private enqueue(loopId: string, fired: { runId: string; slot: string; fireAt: string; attempt?: number }): void {
    this.queued += 1;
    const previous = this.chains.get(loopId) ?? Promise.resolve();
    const next = previous.then(async () => {
      await this.slot();
      this.queued -= 1;
      const controller = new AbortController();
      this.running.set(fired.runId, controller);
      this.saveState();
      try {
        if (this.stopping) controller.abort('daemon shutting down');
        const loop = findLoop(this.runtime.db, loopId, { includeRemoved: true });
        const run = await executeRun(this.runtime, loop, {
          runId: fired.runId,
          slot: fired.slot,
          scheduledFor: fired.fireAt,
          trigger: 'schedule',
          signal: controller.signal,
          ...(fired.attempt ? { attempt: fired.attempt } : {}),
        });
        this.log(`${run.loopName}: run ${run.id} ${run.status}${run.error ? ` (${run.error})` : ''} in ${run.durationMs ?? 0}ms`);
        if (!this.stopping) for (const event of afterScheduledRun(this.runtime, loopId, run)) this.log(`${run.loopName}: ${event.type} ${JSON.stringify(event.data)}`);
        this.options.onRun?.(run);
      } catch (error) {
        this.state.lastError = `run ${fired.runId}: ${(error as Error).message}`;
        this.log(this.state.lastError);
      } finally {
        this.running.delete(fired.runId);
        this.retrying.delete(fired.runId);
        this.release();
        this.saveState();
        // A slot buffered behind this run may start now.
        this.wake?.();
      }
    });
    this.chains.set(loopId, next);
    void next.finally(() => {
      if (this.chains.get(loopId) === next) this.chains.delete(loopId);
    });
  }

  private saveState(): void {
    this.state.activeRuns = this.running.size + this.adopted;
    this.state.queuedRuns = this.queued;
    const spawner = this.runtime.spawner;
    const why = spawner ? spawner.unavailableReason : (this.options.spawner ?? 'helper') === 'inline' ? 'spawner: inline was asked for' : null;
    this.state.spawner = spawner && why === null ? { mode: 'helper', pid: spawner.pid, reason: null } : { mode: 'inline', pid: null, reason: why };
    try {
      writeJson(stateFile(this.runtime.dataDir), this.state);
    } catch {
      // best effort: status falls back to the database
    }
  }

  /** Graceful stop: no new runs; running ones are cancelled (process groups killed) and recorded. */
  stop(reason = 'daemon shutting down'): Promise<void> {
    // Every caller (a signal handler, `daemon run` after `done`, the lease heartbeat) waits for the
    // whole stop — runs recorded, lease released — not just for the loop to end.
    this.stopPromise ??= this.shutdown(reason);
    return this.stopPromise;
  }

  private async shutdown(reason: string): Promise<void> {
    this.stopping = true;
    this.log(`stopping: ${reason}; cancelling ${this.running.size} running run(s)`);
    for (const controller of this.running.values()) controller.abort(reason);
    this.wake?.();
    await this.stopped;
    await Promise.all([...this.chains.values()]);
    for (const timer of this.timers) this.runtime.clock.clearTimeout(timer);
    this.timers.clear();
    process.off('SIGUSR2', this.onNudge);
    if (this.lease) releaseLease(this.runtime.db, this.lease);
    this.lease = null;
    const mine = runningDaemon(this.runtime.dataDir);
    if (!mine || mine.pid === process.pid) rmSync(pidFile(this.runtime.dataDir), { force: true });
    this.saveState();
    this.log('daemon stopped');
  }

  /** Resolves when the daemon loop ended (after stop). */
  get done(): Promise<void> {
    return this.stopped;
  }
}

/** Database size in bytes (with its WAL), for status. */
export function databaseSize(dataDir: string): number {
  const file = databaseFile(dataDir);
  let size = 0;
  for (const f of [file, `${file}-wal`]) {
    try {
      size += statSync(f).size;
    } catch {
      // missing: 0
    }
  }
  return size;
}
