/**
 * Recovery: runs left unfinished by a runner that is gone (its lease expired). What is true is
 * recorded through the attempt path (execution/attempt.ts): the real exit status from the files the
 * exit-status wrapper left, or `run.abandoned` when the process is gone without one
 * (`finishStaleRun`, under a taken-over lease: the old runner is fenced out). A process that
 * outlived its runner is reported as orphaned, with its confirmed identity, for the pass to adopt
 * (`adoptRun`).
 */
import { join } from 'node:path';
import { cached } from '../../events/db.js';
import { currentMachines } from '../../machines/registry.js';
import { ConcurrencyConflictError, LeaseLostError, LoopsError } from '../../events/errors.js';
import { DurableActor } from '../actor.js';
import { hostId, runnerHost } from '../host.js';
import { finishStaleRun } from '../execution/attempt.js';
import { findRunProcess } from '../execution/executor.js';
import { HeldLease } from '../leases.js';
import { runDir } from '../paths.js';
import { isSameProcessAlive, type ProcessIdentity, processState, runnerGone } from '../execution/process-info.js';
import { readStartedStatus } from '../execution/status-file.js';
import type { Runtime } from '../runtime.js';

export interface RecoveryReport {
  abandoned: string[];
  /** Runs whose real exit status was recorded from their exit-status file. */
  exited: string[];
  /** Retries scheduled for abandoned runs whose loop has attempts left. */
  retried: string[];
  /**
   * Runs whose process is still alive though its runner is gone: confirmed by its whole identity
   * (pid, start time, boot id), which each entry carries for the adopter to check again.
   */
  orphaned: Array<ProcessIdentity & { runId: string; timeoutAt: string | null }>;
  /** Runs of workflow loops whose runner is gone while their workflow run went on: to be resumed. */
  workflows: string[];
  /**
   * Runs whose recorded pid is alive but whose process identity could not be confirmed (no start
   * time recorded, another boot): not adopted, not signalled; recorded from their status file or
   * abandoned (they are in `exited` or `abandoned` too). `reason` says why, for a log line.
   */
  unconfirmed: Array<{ runId: string; pid: number; reason: string }>;
  /**
   * Runs another host of a fleet ran, whose lease expired: ended here without their process being
   * looked for or signalled (only the host that ran it can check it). They are in `abandoned` (or
   * `exited`) too; `runnerId` is the runner that stopped renewing its lease, `host` its host.
   */
  elsewhere?: Array<{ runId: string; runnerId: string; host: string }>;
}

export { processRunning } from '../execution/process-info.js';

/**
 * Unfinished runs whose runner is gone: their lease is gone or expired, or it is held by a runner
 * that provably no longer runs (`runnerGone`: a `run-now` killed, or one that gave up recording its
 * end on a full disk) — whose leases are expired now, as a daemon starting expires a dead
 * predecessor's, instead of holding the run `running` until they run out. `skip`: runs the caller
 * executes itself (a daemon's runs whose lease ran out while it retried a write are still its own).
 * Every pass asks: the runs still going are read from their own index (loop_runs_live), and sorted
 * (`+`: not in the rowid's order, which would walk the whole history to keep the few live ones).
 */
async function staleRuns(runtime: Runtime, nowMs: number, skip: (runId: string) => boolean): Promise<string[]> {
  const rows = cached<[], { id: string }>(
    runtime.db,
    `SELECT r.id FROM loop_runs r
     WHERE r.status IN ('claimed', 'spawning', 'running')
     ORDER BY +r.claimed_position`,
  ).all();
  if (rows.length === 0) return [];
  const live = await runtime.leases.live('run:', nowMs);
  const dead = new Set<string>();
  const out: string[] = [];
  for (const row of rows) {
    if (skip(row.id)) continue;
    const lease = live.get(`run:${row.id}`);
    if (lease === undefined) out.push(row.id);
    else if (lease.holder !== runtime.runnerId && (dead.has(lease.holder) || runnerGone(lease.holder))) {
      dead.add(lease.holder);
      out.push(row.id);
    }
  }
  for (const holder of dead) await runtime.leases.expireHolder(holder, nowMs);
  return out;
}

export async function recoverRuns(runtime: Runtime, leaseTtlMs = 30_000, skip: (runId: string) => boolean = () => false): Promise<RecoveryReport> {
  const now = runtime.clock.now();
  const report: RecoveryReport = { abandoned: [], exited: [], retried: [], orphaned: [], workflows: [], unconfirmed: [], elsewhere: [] };
  const stale = await staleRuns(runtime, now, skip);
  // On a shared store: each host's live daemon (`daemon:<host>` → its runner), read once.
  const daemons = runtime.fleet && stale.length > 0 ? await runtime.leases.live('daemon:', now) : null;
  for (const runId of stale) {
    try {
      await recoverRun(runtime, runId, leaseTtlMs, report, daemons);
    } catch (error) {
      // Another runner (another host of a fleet) took the run over, or recorded its end, between
      // the read that found it stale and this runner's write: it is theirs now.
      if (error instanceof ConcurrencyConflictError || error instanceof LeaseLostError || (error instanceof LoopsError && error.code === 'conflict')) continue;
      throw error;
    }
  }
  return report;
}

/** Recovers one stale run (see `recoverRuns`), adding what became of it to `report`. */
async function recoverRun(runtime: Runtime, runId: string, leaseTtlMs: number, report: RecoveryReport, daemons: ReadonlyMap<string, { holder: string }> | null): Promise<void> {
  {
    const actor = await DurableActor.load(runtime, `run:${runId}`, {}, currentMachines.run);
    if (actor.snapshot.status === 'done') return;
    const context = actor.context;
    if (context.target?.kind === 'workflow' && actor.state === 'running') {
      report.workflows.push(runId);
      return;
    }
    // On a store hosts share, liveness is judged only on the host that ran it (docs/scaling.md): a
    // process another host started is neither looked for nor signalled here, whatever pid this
    // host has. (A SQLite data directory is one machine's: its runners all ran here.)
    const ranOn = runtime.fleet && context.runnerId !== null ? runnerHost(context.runnerId) : null;
    const elsewhere = ranOn !== null && ranOn !== hostId() ? `it ran on host ${ranOn}, and only that host can check its process` : null;
    // That host's daemon is alive and is not the runner that stopped (a daemon restarted after a
    // kill, which expired its predecessor's leases as it started; or one alive beside a `run-now`
    // that died): the run is that daemon's to recover, with its process checked — read from its
    // exit-status file or adopted — not abandoned from here with its end unknown (and run again).
    const hostDaemon = elsewhere !== null ? daemons?.get(`daemon:${ranOn}`) : undefined;
    if (hostDaemon !== undefined && hostDaemon.holder !== context.runnerId) return;
    // A recorded process is adopted only when its identity is confirmed. A live pid that cannot be
    // told from another process's (no start time recorded, another boot) is left alone — never
    // adopted, never signalled — and the run is recorded from its status file or abandoned.
    let unconfirmed: string | null = null;
    if (context.pid !== null && elsewhere === null) {
      const identity = { pid: context.pid, startTime: context.startTime, bootId: context.bootId };
      const os = processState(identity);
      // Ended but not yet reaped by the spawner helper that started it (its status file still says
      // `running`): adopted like a live one, whose watch then reads the end the helper writes as
      // it reaps it — not recorded from a status file that is a moment from being written.
      const reaping = os.state === 'gone' && isSameProcessAlive(identity) && readStartedStatus(join(runDir(runtime.dataDir, runId), 'exit-status'))?.pid === context.pid;
      if (os.state === 'running' || reaping) {
        report.orphaned.push({ runId, ...identity, timeoutAt: context.timeoutAt });
        return;
      }
      if (os.state === 'unconfirmed') {
        unconfirmed = os.reason;
        report.unconfirmed.push({ runId, pid: context.pid, reason: os.reason });
      }
    }
    if (context.pid === null && actor.state === 'spawning' && elsewhere === null) {
      // Its runner died after the fork but before it recorded the pid: the process may be running
      // all the same. Found by its wrapper's argv, it is recorded now and adopted, never run twice.
      const found = findRunProcess(join(runDir(runtime.dataDir, runId), 'exit-status'));
      if (found) {
        // Under the run's lease, taken over (fencing the dead runner) and given back: the adopter takes it next.
        const lease = new HeldLease(runtime, `run:${runId}`, leaseTtlMs);
        await actor.record('process.spawned', { pid: found.pid, pgid: found.pid, startTime: found.startTime, bootId: found.bootId }, lease.takeOverIn({ release: true }));
        report.orphaned.push({ runId, ...found, timeoutAt: context.timeoutAt });
        return;
      }
    }
    const ended = await finishStaleRun(runtime, runId, { leaseTtlMs, unconfirmed, ...(elsewhere ? { elsewhere } : {}) });
    (ended.outcome === 'exited' ? report.exited : report.abandoned).push(runId);
    if (elsewhere !== null) (report.elsewhere ??= []).push({ runId, runnerId: context.runnerId!, host: ranOn! });
    report.retried.push(...ended.followUp.flatMap((e) => (e.type === 'slot.retry_scheduled' ? [(e.data as { runId: string }).runId] : [])));
  }
}
