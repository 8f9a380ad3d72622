/**
 * The scheduler daemon: one per data directory. It sleeps until the earliest due loop or queued
 * run (never more than `maxSleepMs` at once, re-reading the wall clock on every wake so suspend and
 * clock jumps are noticed and handled by the catch-up policy), notices changes made by other
 * processes (a new loop, a resume, a run ended elsewhere) within a second by watching the log's
 * head position, and runs the same pass as `loops tick` (pass.ts): decide what is due, then claim
 * and run the queued work up to `concurrency` — without ever waiting for runs before the next pass.
 */
import { closeSync, existsSync, fstatSync, openSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { cached, writeTransaction } from '../../events/db.js';
import { LoopsError } from '../../events/errors.js';
import { formatDuration } from '../../events/durations.js';
import type { TimerHandle } from '../clock.js';
import type { Lease } from '../leases.js';
import { databaseFile } from '../paths.js';
import { bootId, processStartTime, runnerGone } from '../execution/process-info.js';
import type { RunView } from '../queries/loops.js';
import { pidFile, readPidFile, runningDaemon, type DaemonInfo } from './daemon-info.js';
import { processRunning } from './recovery.js';
import { decide, Dispatcher } from './pass.js';
import { nextQueuedDue } from './run-queue.js';
import { measureClock, recordHostStarted, recordHostStopped } from './hosts.js';
import { type Runtime, useInlineSpawns, useSpawnerHelper } from '../runtime.js';
import { checkCancelRequests } from '../execution/cancel.js';
import { faultPoint } from '../../events/faults.js';
import { storageFault, type StorageFaultKind } from '../storage-fault.js';

/**
 * The daemon lease: one daemon per data directory on SQLite (`daemon`); on a store that hosts share
 * (PostgreSQL), one per host (`daemon:<host id>`, host.ts) — every host of a fleet runs its own.
 */
export function daemonLease(runtime: Pick<Runtime, 'fleet'>): string {
  return runtime.fleet ? `daemon:${runtime.fleet.hostId}` : 'daemon';
}
export { pidFile, runningDaemon, type DaemonInfo } from './daemon-info.js';

/** A host whose clock is further than this from the database server's is warned about (a fleet's hosts compare through it). */
export const CLOCK_WARN_MS = 1000;

/** The daemon lease's time-to-live (`DaemonOptions.leaseTtlMs`), renewed every third of it. */
export const DAEMON_LEASE_TTL_MS = 15_000;

export interface DaemonState {
  lastPassAt: string | null;
  lastError: string | null;
  activeRuns: number;
  queuedRuns: number;
  nextFireAt: string | null;
  passes: number;
  /**
   * The daemon found something due right after a pass had handled it, pass after pass: it backs
   * off to its watch interval and reports itself unhealthy (`daemon status` exits 1).
   */
  spinning?: boolean;
  /** Since when due work has waited while no run was going (it should have started): unhealthy. */
  stalledSince?: string | null;
  /** Who forks the runs: the spawner helper (its pid while it runs) or the daemon itself, and why. */
  spawner?: { mode: 'helper' | 'inline'; pid: number | null; reason: string | null };
  /**
   * Writes fail for a reason of the machine's, not of the work (storage-fault.ts): the disk is
   * full, the database is locked by another connection beyond its busy timeout, an I/O error.
   * Nothing that failed was written (SQLite rolled it back); due slots and queued runs wait. The
   * daemon backs off (`retryInMs`: 1 s doubling to 10 × the watch interval) and, while degraded,
   * starts each pass with one write — its lease renewed — and does nothing else until that
   * succeeds; the first pass without a fault clears it. `daemon status` reports it (unhealthy).
   */
  degraded?: { since: string; kind: StorageFaultKind; reason: string; failures: number; retryInMs: number } | null;
}

export interface DaemonOptions {
  concurrency?: number;
  /** Longest single sleep (default 30 s): wake up and re-read the wall clock at least this often. */
  maxSleepMs?: number;
  /** How often the log's head is checked for changes made by others (default 1 s). */
  watchMs?: number;
  /** How often, at most, the state file is rewritten while runs start and end (default {@link STATE_WRITE_INTERVAL_MS}). */
  stateIntervalMs?: number;
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
  // Twice: a file rewritten in place on a full disk (writeStateFile) may be caught half-written.
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return JSON.parse(readFileSync(stateFile(dataDir), 'utf8')) as DaemonState;
    } catch {
      // missing, or caught mid-write
    }
  }
  return null;
}

function writeJson(file: string, value: unknown): void {
  writeFileSync(`${file}.tmp`, JSON.stringify(value, null, 2) + '\n', { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
}

/**
 * How often, at most, the daemon rewrites its state file while runs start and end and passes run.
 * Each rewrite is a new file renamed over the old one (~0.2 ms of the daemon's thread on a quiet
 * disk, milliseconds on a busy one, and an inode made and freed); runs ending one by one rewrote it
 * once each. `daemon status` now reads it at most this late; starting, stopping and a storage
 * fault are written at once.
 */
export const STATE_WRITE_INTERVAL_MS = 250;

/** The state file is padded to a multiple of this, so that it can be rewritten in place on a full disk. */
const STATE_BLOCK = 4096;

/**
 * Writes the daemon's state file: a new file renamed over the old one (a reader sees one or the
 * other), padded with spaces to whole 4 KiB blocks. When the new file cannot be written — the disk
 * is full, which is exactly when `daemon status` must say so — the old file's blocks are rewritten
 * in place instead: that takes no new space (on tmpfs, ext4, xfs; not on copy-on-write file
 * systems). A reader may then catch a half-written file; `readDaemonState` reads again.
 */
export function writeStateFile(file: string, value: unknown): void {
  const json = JSON.stringify(value, null, 2) + '\n';
  const size = Math.ceil((Buffer.byteLength(json) + 1) / STATE_BLOCK) * STATE_BLOCK;
  const text = json.padEnd(size - 1, ' ') + '\n';
  try {
    writeFileSync(`${file}.tmp`, text, { mode: 0o600 });
    renameSync(`${file}.tmp`, file);
    return;
  } catch (error) {
    rmSync(`${file}.tmp`, { force: true }); // what it took is given back
    let fd: number | null = null;
    try {
      fd = openSync(file, 'r+');
      const have = fstatSync(fd).size;
      if (have < Buffer.byteLength(text)) throw error;
      writeSync(fd, text.padEnd(have - 1, ' ') + '\n', 0);
    } finally {
      if (fd !== null) closeSync(fd);
    }
  }
}

export class Daemon {
  private lease: Lease | null = null;
  private stopping = false;
  private wake: (() => void) | null = null;
  private timers = new Set<TimerHandle>();
  /** Aborted by stop(): cancels every run the daemon executes. */
  private readonly abort = new AbortController();
  /** Claims and runs the queued work (the pass's step 2). */
  private readonly dispatcher: Dispatcher;
  private decisions: { unsubscribe(): void } | null = null;
  private readonly state: DaemonState = {
    lastPassAt: null,
    lastError: null,
    activeRuns: 0,
    queuedRuns: 0,
    nextFireAt: null,
    passes: 0,
    spinning: false,
    stalledSince: null,
    degraded: null,
  };
  /** A storage fault was met since the current pass began (it must not clear `degraded`). */
  private faultInPass = false;
  private stopped!: Promise<void>;
  private stopPromise: Promise<void> | null = null;

  constructor(
    readonly runtime: Runtime,
    readonly options: DaemonOptions = {},
  ) {
    // The pass's second step (claim and run), and recovery: made here so that a pass can run before
    // start() (a benchmark, a test), started with the daemon.
    this.dispatcher = new Dispatcher(this.runtime, {
      concurrency: this.options.concurrency ?? 4,
      signal: this.abort.signal,
      onStart: (item) => {
        if (item.kind === 'retry') this.log(`${item.loopName}: retry ${item.runId} (attempt ${item.attempt} of slot ${item.slot}) is due`);
        else if (item.kind === 'buffered') this.log(`${item.loopName}: buffered slot ${item.slot} starts as run ${item.runId} (the run it waited for has ended)`);
        this.saveStateSoon();
      },
      onRun: (run, item) => {
        // item null: a run taken over from a runner that stopped (adopted, or its workflow resumed).
        this.log(`${run.loopName}: run ${run.id} ${run.status}${run.error ? ` (${run.error})` : ''} in ${run.durationMs ?? 0}ms${item ? '' : ' (taken over from a runner that stopped)'}`);
        this.saveStateSoon();
        this.options.onRun?.(run);
      },
      onError: (item, error) => {
        if (this.noteFault(error, `run ${item.runId} (${item.loopName})`)) return;
        this.state.lastError = `run ${item.runId} (${item.loopName}): ${error.message}`;
        this.log(this.state.lastError);
      },
      // A run ended: its loop's next work, or a buffered slot, may start now.
      onSettled: () => {
        this.saveStateSoon();
        this.wake?.();
      },
    });
  }

  private readonly onNudge = (): void => {
    checkCancelRequests(this.runtime);
    this.wake?.();
  };

  private log(line: string): void {
    (this.options.log ?? ((l: string) => process.stdout.write(`${l}\n`)))(`${new Date(this.runtime.clock.now()).toISOString()} ${line}`);
  }

  /** Takes the data directory's daemon lease (refusing when another live daemon holds it), recovers, starts the loop. */
  async start(): Promise<void> {
    const { runtime } = this;
    const previous = readPidFile(runtime.dataDir);
    const other = previous && processRunning(previous) ? previous : null;
    if (other && other.runnerId !== runtime.runnerId) {
      throw new LoopsError('already_exists', `a daemon is already running for ${runtime.dataDir} (pid ${other.pid}, since ${other.startedAt})`, {
        hint: 'loops daemon status shows it; loops daemon stop stops it',
      });
    }
    // A pid file left by a daemon whose process is gone (kill -9, a crash, a reboot) proves its
    // runner dead: its leases — the daemon lease and those of the runs it was executing — are
    // expired now, in the same transaction that takes the daemon lease, instead of blocking this
    // start (and recovery) until they run out. Without a pid file (removed by hand, or left by a
    // build that wrote it after the lease), a holder on this host whose pid no process has is dead
    // as surely.
    // Both, when they differ: a daemon killed after writing its pid file but before its lease
    // committed (LOOPS_FAULT=mid-batch) leaves the pid file naming it and the lease its
    // predecessor's — proving only one of them dead left the other's lease blocking every start.
    const holder = await runtime.leases.get(daemonLease(runtime));
    const dead = new Set<string>();
    if (previous && !other && previous.runnerId !== runtime.runnerId) dead.add(previous.runnerId);
    if (holder && holder.holder !== runtime.runnerId && holder.expiresAt > runtime.clock.now() && runnerGone(holder.holder)) dead.add(holder.holder);
    const ttl = this.options.leaseTtlMs ?? DAEMON_LEASE_TTL_MS;
    const info: DaemonInfo = {
      pid: process.pid,
      startTime: processStartTime(process.pid),
      bootId: bootId(),
      runnerId: runtime.runnerId,
      version: this.options.version ?? '0.0.0',
      startedAt: new Date(runtime.clock.now()).toISOString(),
      dataDir: runtime.dataDir,
    };
    const file = pidFile(runtime.dataDir);
    // On a shared store, this host's clock against the server's: leases and due times use each
    // writing host's clock, so a host far off is said at once (and recorded with its start).
    const clock = await measureClock(runtime);
    let wrote = false;
    try {
      const now = runtime.clock.now();
      this.lease = await runtime.log.batch(async (batch) => {
          for (const runner of dead) await runtime.leases.expireHolder(runner, now, batch);
          const lease = await runtime.leases.take(daemonLease(runtime), runtime.runnerId, ttl, now, batch);
          // Who runs on this host now, and the labels it runs pinned loops for: with the lease.
          await recordHostStarted(runtime, info.version, batch, clock?.offsetMs ?? null);
          faultPoint('between-lease-and-pidfile');
          // The pid file is written while the write lock is held, before the lease commits: a
          // daemon killed at any point leaves either no lease, or a lease and a pid file that names
          // its (dead) process — never a lease nobody can prove dead.
          writeJson(file, info);
          wrote = true;
          return lease;
        });
    } catch (error) {
      if (wrote) {
        if (previous) writeJson(file, previous);
        else rmSync(file, { force: true });
      }
      if (error instanceof LoopsError && error.code === 'busy') throw error;
      // The holder's lease is live and it cannot be proved dead: wait it out.
      throw new LoopsError('conflict', `another daemon held ${runtime.dataDir} moments ago; its lease expires within ${ttl / 1000}s`, {
        cause: error,
        retryable: true,
        hint: 'try again in a few seconds',
      });
    }
    if (this.options.spawner === 'inline') useInlineSpawns(runtime);
    else {
      const spawner = useSpawnerHelper(runtime);
      const why = spawner.unavailableReason;
      if (why) this.log(`${why}; runs are forked by the daemon itself`);
      // The helper ends when idle and starts again on demand: status shows the one running now.
      spawner.onChange = () => {
        if (!this.stopping) this.saveStateSoon();
      };
    }
    this.dispatcher.keepRunnerLease();
    // Every decision this daemon records — a pass's, a retry after a run, a fixed-delay reschedule —
    // goes to its log, from the one place they are all published.
    this.decisions = runtime.log.events$.subscribe((event) => {
      if (!event.streamId.startsWith('loop:') || !(event.type.startsWith('slot.') || event.type === 'loop.expired' || event.type === 'loop.rescheduled')) return;
      const name = cached<[string], { name: string }>(runtime.db, 'SELECT name FROM loops WHERE id = ?').get(event.streamId.slice(5))?.name ?? event.streamId;
      this.log(`${name}: ${event.type} ${JSON.stringify(event.data)}`);
    });
    this.saveState();
    const labels = runtime.labels?.length ? `, labels ${runtime.labels.join(',')}` : '';
    this.log(`daemon started: pid ${process.pid}, data ${runtime.dataDir}, concurrency ${this.options.concurrency ?? 4}${labels}`);
    if (clock) {
      const off = `this host's clock is ${Math.abs(clock.offsetMs)} ms ${clock.offsetMs > 0 ? 'behind' : 'ahead of'} the database server's (±${Math.ceil(clock.rttMs / 2)} ms)`;
      this.log(Math.abs(clock.offsetMs) > CLOCK_WARN_MS ? `warning: ${off}: leases and due times use each host's clock; keep the fleet's clocks in sync (NTP)` : off);
    }
    // `loops cancel` (and other writers) nudge the daemon with SIGUSR2: look at the log now.
    process.on('SIGUSR2', this.onNudge);
    try {
      await this.recover();
    } catch (error) {
      // Started but not running: stop what recovery began (adopted runs, the lease) rather than
      // stay alive doing nothing — the caller sees the error and exits.
      this.log(`start failed while recovering: ${(error as Error).message}`);
      await this.stop('start failed').catch(() => undefined);
      throw error;
    }
    this.heartbeat(ttl);
    this.stopped = this.loop();
  }

  private heartbeat(ttl: number): void {
    const timer = this.runtime.clock.setTimeout(() => {
      this.timers.delete(timer);
      if (this.stopping || !this.lease) return;
      this.heartbeat(ttl); // armed now: the beats keep their rhythm whatever the store's latency
      this.runtime.leases.renew(this.lease, ttl, this.runtime.clock.now()).then(
        (lease) => {
          if (this.stopping || !this.lease || lease.expiresAt <= this.lease.expiresAt) return;
          this.lease = lease;
        },
        (error: unknown) => {
          // The disk full or the database locked: not lost — the next beat tries again (and the
          // lease, once expired, is still ours unless another daemon took it: renew says so).
          if (this.noteFault(error, 'renewing the daemon lease')) return;
          this.state.lastError = `lost the daemon lease: ${(error as Error).message}`;
          this.log(this.state.lastError);
          void this.stop('lost the daemon lease');
        },
      );
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
      this.nowAsleep();
    });
  }

  /** Callers of `asleep()` waiting for the loop to go to sleep. */
  private sleepers: Array<() => void> = [];

  private nowAsleep(): void {
    const sleepers = this.sleepers;
    this.sleepers = [];
    for (const resolve of sleepers) resolve();
  }

  /**
   * Resolves once the daemon's loop is asleep until its next wake (its clock's timer, a change in
   * the log, a run's end) — at once when it is asleep now, not started, or stopping. For tests
   * that step a simulated clock: a step's wake, head read and pass are round trips on PostgreSQL
   * (not one synchronous turn, as on SQLite), so each step awaits this before the next.
   */
  asleep(): Promise<void> {
    if (this.wake !== null || this.stopping || this.stopped === undefined) return Promise.resolve();
    return new Promise((resolve) => this.sleepers.push(resolve));
  }

  /**
   * The earliest instant something will be due after the pass at `passMs`: a loop's next slot, or
   * queued work due later (a retry's back-off). Work already due that did not start waits for
   * capacity, for its loop's run, or for a run elsewhere to end — a run's end wakes the daemon — so
   * it is not counted here: counting it made the daemon spin without ever awaiting.
   */
  private nextDue(passMs: number): number | null {
    const row = cached<[], { next: string | null }>(
      this.runtime.db,
      "SELECT next_run_at AS next FROM loops WHERE status = 'active' AND next_run_at IS NOT NULL ORDER BY next_run_at LIMIT 1",
    ).get();
    const loop = row?.next ? Date.parse(row.next) : null;
    const queued = nextQueuedDue(this.runtime, passMs);
    if (loop === null) return queued;
    return queued === null ? loop : Math.min(loop, queued);
  }

  /** The spawner helper (ended when idle) started again shortly before something is due, so its start-up is not the first run's lateness. */
  private warmAhead(due: number | null): void {
    if (due !== null && due - this.runtime.clock.now() <= 2000) this.runtime.spawner?.warm();
  }

  /**
   * The log's head, or null when it cannot be read now: a storage fault (the disk, a lock, a lost
   * connection to PostgreSQL) makes the daemon degraded and back off, like a failed write; anything
   * else is its last error. The loop never dies of a read between passes.
   */
  private async head(): Promise<number | null> {
    try {
      return await this.runtime.log.headPosition();
    } catch (error) {
      if (!this.noteFault(error, 'reading the log head')) {
        this.state.lastError = `reading the log head: ${(error as Error).message}`;
        this.log(this.state.lastError);
      }
      return null;
    }
  }

  private async loop(): Promise<void> {
    const maxSleep = this.options.maxSleepMs ?? 30_000;
    const watch = this.options.watchMs ?? 1000;
    /** Passes in a row after which something was still due at once. */
    let hot = 0;
    /** Passes in a row that ended degraded: the back-off doubles with each. */
    let failing = 0;
    while (!this.stopping) {
      const passMs = this.runtime.clock.now();
      try {
        await this.pass();
      } catch (error) {
        if (!this.noteFault(error, 'pass')) {
          this.state.lastError = (error as Error).message;
          this.log(`pass failed: ${this.state.lastError}`);
        }
      }
      // Sleep until the earliest due time, at most maxSleep, waking every `watch` to see whether
      // someone else changed the log (then re-plan at once).
      const head = await this.head();
      const next = this.nextDue(passMs);
      this.warmAhead(next);
      this.state.nextFireAt = next === null ? null : new Date(next).toISOString();
      let wait = next === null ? maxSleep : Math.min(maxSleep, next - this.runtime.clock.now());
      const degraded = this.state.degraded ?? null;
      if (degraded) {
        // Writes fail: what is due waits. Back off (1 s, 2 s, 4 s … at most 10 × watch) instead of
        // passing again at once; a change in the log (someone could write) cuts the wait short.
        failing += 1;
        hot = 0;
        this.state.spinning = false;
        wait = Math.min(maxSleep, 10 * watch, watch * 2 ** Math.min(failing - 1, 10));
        degraded.retryInMs = wait;
      } else if (wait <= 0) {
        // Due again right after a pass (a loop with more due slots than one pass decides, or a
        // clock that moved meanwhile): pass again — but a pass that keeps leaving something due is
        // a bug, not work: back off to the watch interval and say so.
        hot += 1;
        if (hot > 3) {
          wait = watch;
          if (hot > 10 && !this.state.spinning) {
            this.state.spinning = true;
            this.state.lastError = `something stays due right after every pass (next due ${this.state.nextFireAt}); backing off to ${watch} ms`;
            this.log(this.state.lastError);
          }
        }
      } else {
        hot = 0;
        this.state.spinning = false;
      }
      if (!degraded) failing = 0;
      this.saveStateSoon();
      // Every iteration awaits, whatever the sums say: signals, run ends and stop() get their turn.
      if (wait <= 0) await new Promise<void>((resolve) => setImmediate(resolve));
      const deadline = this.runtime.clock.monotonic() + Math.max(0, wait);
      while (!this.stopping) {
        const left = deadline - this.runtime.clock.monotonic();
        if (left <= 0) break;
        await this.sleep(Math.min(left, watch));
        const now = await this.head();
        if (now !== null && now !== head) break;
        // Degraded: due work waits for the back-off (it is what cannot be written).
        if (degraded) continue;
        // A wall-clock jump (or suspend) can make something due early: check the due time again.
        const due = this.nextDue(passMs);
        if (due !== null && due <= this.runtime.clock.now()) break;
        this.warmAhead(due);
      }
    }
  }

  /**
   * Runs left by runners that are gone — at start, and on every pass (a `run-now` killed while the
   * daemon runs leaves one whose lease runs out later): their real end recorded, or taken over
   * by the dispatcher (adopted processes, resumed workflow runs); said in the log.
   */
  private async recover(): Promise<void> {
    const report = await this.dispatcher.recover();
    const unconfirmed = new Map(report.unconfirmed.map((u) => [u.runId, u]));
    const elsewhere = new Map((report.elsewhere ?? []).map((e) => [e.runId, e]));
    for (const id of report.abandoned) {
      const u = unconfirmed.get(id);
      const e = elsewhere.get(id);
      this.log(
        e
          ? `recovered run ${id}: abandoned (its runner ${e.runnerId} on host ${e.host} stopped renewing its lease; its process there was not checked or signalled from here)`
          : u
            ? `recovered run ${id}: abandoned (its runner stopped; pid ${u.pid} is alive but ${u.reason}, so it was not signalled)`
            : `recovered run ${id}: abandoned (its runner stopped and its process is gone)`,
      );
    }
    for (const id of report.retried) this.log(`scheduled retry ${id} for a recovered run`);
    for (const id of report.exited) this.log(`recovered run ${id}: its real exit status was recorded from its exit-status file`);
    for (const o of report.orphaned) this.log(`adopted run ${o.runId}: its runner stopped but its process ${o.pid} is still running`);
    for (const id of report.workflows) this.log(`resuming run ${id}: its runner stopped while its workflow run went on`);
  }

  /** One pass: recover what runners left behind, decide what is due, start the queued work that may start. */
  async pass(): Promise<void> {
    const { runtime } = this;
    const now = runtime.clock.now();
    this.faultInPass = false;
    if (this.state.degraded && this.lease) {
      // Degraded: one write first — the daemon lease renewed — and nothing else until it succeeds
      // (each failing write may wait out the busy timeout: no pass made of them).
      try {
        const lease = await runtime.leases.renew(this.lease, this.options.leaseTtlMs ?? 15_000, now);
        if (this.lease && lease.expiresAt > this.lease.expiresAt) this.lease = lease;
      } catch (error) {
        if (this.noteFault(error, 'pass (renewing the daemon lease)')) return;
        throw error;
      }
    }
    await this.recover();
    await decide(runtime, now, {
      onError: (loopName, error) => {
        if (this.noteFault(error, `deciding ${loopName}`)) return;
        this.state.lastError = `${loopName}: ${error.message}`;
        this.log(`deciding ${loopName} failed: ${error.message}`);
      },
      // A burst's first runs start while the rest of it is decided.
      betweenCommits: (fired) => (this.stopping ? Promise.resolve() : this.dispatcher.dispatch(now, fired)),
    });
    if (!this.stopping) await this.dispatcher.dispatch(now);
    // Due work waits while nothing runs: it should have started (a claim that keeps failing).
    const stalled = this.dispatcher.waiting > 0 && this.dispatcher.active === 0;
    if (!stalled) this.state.stalledSince = null;
    else this.state.stalledSince ??= new Date(now).toISOString();
    this.state.lastPassAt = new Date(now).toISOString();
    this.state.passes += 1;
    const degraded = this.state.degraded;
    if (degraded && !this.faultInPass) {
      this.state.degraded = null;
      this.log(`no longer degraded: writes succeed again (${degraded.reason} since ${degraded.since}, ${formatDuration(Math.max(0, now - Date.parse(degraded.since)))}; ${degraded.failures} failed write(s), each rolled back and retried)`);
    }
  }

  /**
   * A write failed: when it is a storage fault (the disk full, the database locked beyond its busy
   * timeout, an I/O error), the daemon is degraded — said once in its log, in its state for
   * `daemon status` — and true is returned; anything else is the caller's to report.
   */
  private noteFault(error: unknown, where: string): boolean {
    const fault = storageFault(error);
    if (!fault) return false;
    this.faultInPass = true;
    const now = new Date(this.runtime.clock.now()).toISOString();
    const before = this.state.degraded ?? null;
    this.state.degraded = { since: before?.since ?? now, kind: fault.kind, reason: fault.reason, failures: (before?.failures ?? 0) + 1, retryInMs: before?.retryInMs ?? 0 };
    this.state.lastError = `${where}: ${fault.reason}`;
    if (!before || before.kind !== fault.kind) {
      this.log(`degraded: ${fault.reason} (${where}); nothing was written — due slots and runs wait, retried with back-off until writes succeed`);
    }
    this.saveState();
    return true;
  }

  /** A write of the state file is pending (`saveStateSoon`): at the end of this turn, or by `stateTimer`. */
  private stateSoon = false;
  private stateTimer: ReturnType<typeof setTimeout> | null = null;
  /** When the state file was last written (`performance.now()`). */
  private stateWrittenAt = Number.NEGATIVE_INFINITY;
  /** Callers of `stateSaved()` waiting for the pending write. */
  private stateWaiters: Array<() => void> = [];

  /**
   * `saveState` soon: at the end of this turn, or — when the file was written less than
   * {@link STATE_WRITE_INTERVAL_MS} ago — once that interval is over. A burst of runs starting or
   * ending together (100 loops due in one second) writes the status file once per turn in which
   * some start, not once per run; runs ending one by one over a second write it a few times, not
   * once each.
   */
  private saveStateSoon(): void {
    if (this.stateSoon) return;
    this.stateSoon = true;
    const wait = this.stateWrittenAt + (this.options.stateIntervalMs ?? STATE_WRITE_INTERVAL_MS) - performance.now();
    const write = () => {
      if (this.stateSoon) this.saveState();
    };
    if (wait <= 0) setImmediate(write);
    else {
      this.stateTimer = setTimeout(write, wait);
      this.stateTimer.unref();
    }
  }

  /**
   * Resolves once the state file (`daemon status` reads it) says what this daemon knows now: at once
   * when no write is pending, else after the pending one — within {@link STATE_WRITE_INTERVAL_MS}.
   */
  stateSaved(): Promise<void> {
    if (!this.stateSoon) return Promise.resolve();
    return new Promise((resolve) => this.stateWaiters.push(resolve));
  }

  private saveState(): void {
    this.stateSoon = false;
    if (this.stateTimer !== null) {
      clearTimeout(this.stateTimer);
      this.stateTimer = null;
    }
    this.state.activeRuns = this.dispatcher.active ?? 0;
    this.state.queuedRuns = this.dispatcher.waiting ?? 0;
    const spawner = this.runtime.spawner;
    const why = spawner ? spawner.unavailableReason : (this.options.spawner ?? 'helper') === 'inline' ? 'spawner: inline was asked for' : null;
    this.state.spawner = spawner && why === null ? { mode: 'helper', pid: spawner.pid, reason: null } : { mode: 'inline', pid: null, reason: why };
    try {
      writeStateFile(stateFile(this.runtime.dataDir), this.state);
    } catch {
      // best effort: status falls back to the database
    }
    this.stateWrittenAt = performance.now();
    const waiters = this.stateWaiters;
    this.stateWaiters = [];
    for (const resolve of waiters) resolve();
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
    this.nowAsleep(); // it will not sleep again
    this.log(`stopping: ${reason}; cancelling ${this.dispatcher.active ?? 0} running run(s)`);
    this.abort.abort(reason);
    this.wake?.();
    await this.stopped;
    await this.dispatcher.idle();
    this.dispatcher.close();
    this.decisions?.unsubscribe();
    for (const timer of this.timers) this.runtime.clock.clearTimeout(timer);
    this.timers.clear();
    process.off('SIGUSR2', this.onNudge);
    const lease = this.lease;
    this.lease = null;
    // Best effort, as the release: a daemon that cannot write leaves its host "up" until its lease runs out.
    if (lease) await recordHostStopped(this.runtime, reason).catch(() => undefined);
    if (lease) await this.runtime.leases.release(lease).catch(() => undefined); // it runs out by itself
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
