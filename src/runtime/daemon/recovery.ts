/**
 * Recovery: runs left unfinished by a runner that is gone (its lease expired). The new runner
 * takes over the run's lease — a new fencing token, so the old runner can no longer record
 * anything — and records what is true: the real exit status from the file the exit-status wrapper
 * wrote, or `run.abandoned` when the process is gone without one. A process that outlived its
 * runner is reported as orphaned; the daemon adopts it (see Daemon) and records its end.
 */
import { closeSync, existsSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { cached } from '../../events/db.js';
import type { RunContext } from '../../machines/run.js';
import type { EventData } from '../../events/catalog.js';
import { DurableActor } from '../actor.js';
import { agentReport, cliVersion } from '../agents/run.js';
import { readStatusFile, WRAPPER_NAME } from '../execution/executor.js';
import { assertLeaseHeld, releaseLease, takeLease } from '../leases.js';
import { maskFiles, tailOfOutput } from '../execution/output.js';
import { runSecrets } from '../execution/run-secrets.js';
import { SecretMasker } from '../execution/secrets.js';
import { runDir } from '../paths.js';
import { findWrapperProcess, type ProcessIdentity, processState } from '../execution/process-info.js';
import { findRun } from '../queries/loops.js';
import type { Runtime } from '../runtime.js';
import { scheduleRetry } from '../loops/decisions.js';

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
}

export { processRunning } from '../execution/process-info.js';

interface StaleRow {
  id: string;
}

/** Unfinished runs whose lease is gone or expired. */
function staleRuns(runtime: Runtime, nowIso: string): string[] {
  return cached<[string], StaleRow>(
    runtime.db,
    `SELECT r.id FROM loop_runs r LEFT JOIN leases l ON l.name = 'run:' || r.id
     WHERE r.status IN ('claimed', 'spawning', 'running') AND (l.name IS NULL OR l.expires_at <= ?)
     ORDER BY r.claimed_position`,
  )
    .all(nowIso)
    .map((r) => r.id);
}

export function recoverRuns(runtime: Runtime, leaseTtlMs = 30_000): RecoveryReport {
  const now = runtime.clock.now();
  const report: RecoveryReport = { abandoned: [], exited: [], retried: [], orphaned: [], workflows: [], unconfirmed: [] };
  for (const runId of staleRuns(runtime, new Date(now).toISOString())) {
    const actor = DurableActor.load(runtime, `run:${runId}`);
    if (actor.snapshot.status === 'done') continue;
    const context = actor.snapshot.context as RunContext;
    if (context.target?.kind === 'workflow' && actor.state === 'running') {
      report.workflows.push(runId);
      continue;
    }
    // A recorded process is adopted only when its identity is confirmed. A live pid that cannot be
    // told from another process's (no start time recorded, another boot) is left alone — never
    // adopted, never signalled — and the run is recorded from its status file or abandoned.
    let unconfirmed: string | null = null;
    if (context.pid !== null) {
      const identity = { pid: context.pid, startTime: context.startTime, bootId: context.bootId };
      const os = processState(identity);
      if (os.state === 'running') {
        report.orphaned.push({ runId, ...identity, timeoutAt: context.timeoutAt });
        continue;
      }
      if (os.state === 'unconfirmed') {
        unconfirmed = os.reason;
        report.unconfirmed.push({ runId, pid: context.pid, reason: os.reason });
      }
    }
    if (context.pid === null && actor.state === 'spawning') {
      // Its runner died after the fork but before it recorded the pid: the process may be running
      // all the same. Found by its wrapper's argv, it is recorded now and adopted, never run twice.
      const found = findWrapperProcess(join(runDir(runtime.dataDir, runId), 'exit-status'), WRAPPER_NAME);
      if (found) {
        actor.record('process.spawned', { pid: found.pid, pgid: found.pid, startTime: found.startTime, bootId: found.bootId }, takeOverLease(runtime, runId, leaseTtlMs));
        report.orphaned.push({ runId, ...found, timeoutAt: context.timeoutAt });
        continue;
      }
    }
    const ended = finishRecovered(runtime, runId, leaseTtlMs, unconfirmed === null ? {} : { unconfirmed });
    (ended.outcome === 'exited' ? report.exited : report.abandoned).push(runId);
    report.retried.push(...ended.retried);
  }
  return report;
}

export { tailOfOutput } from '../execution/output.js';

/** An append precondition that takes the run's lease over for this runner (fencing the old one) and releases it. */
function takeOverLease(runtime: Runtime, runId: string, leaseTtlMs: number): { precondition: () => void } {
  const now = runtime.clock.now();
  return {
    precondition: () => {
      const lease = takeLease(runtime.db, `run:${runId}`, runtime.runnerId, leaseTtlMs, now);
      assertLeaseHeld(runtime.db, lease, now);
      releaseLease(runtime.db, lease);
    },
  };
}

/**
 * Records the end of a run whose process is gone: its real exit status when the exit-status
 * wrapper left one (with the output tails from its files), else `run.abandoned`. Takes over the
 * run's lease in the same transaction (a new fencing token), then schedules a retry if the
 * loop's policy allows one.
 */
export function finishRecovered(
  runtime: Runtime,
  runId: string,
  leaseTtlMs = 30_000,
  options: {
    timedOut?: boolean;
    /**
     * Why the run's recorded process could not be confirmed as its own (a live pid with no start
     * time recorded, or recorded on another boot): without a status file the run is abandoned
     * saying so, and the process was not signalled.
     */
    unconfirmed?: string;
  } = {},
): { outcome: 'exited' | 'abandoned'; retried: string[] } {
  const actor = DurableActor.load(runtime, `run:${runId}`);
  if (actor.snapshot.status === 'done') return { outcome: 'exited', retried: [] };
  const context = actor.snapshot.context as RunContext;
  const takeOver = takeOverLease(runtime, runId, leaseTtlMs);
  const files = runDir(runtime.dataDir, runId);
  const statusPath = join(files, 'exit-status');
  const status = readStatusFile(statusPath);
  // A process started but never recorded (its runner died right after the fork) that has ended
  // since: its wrapper wrote its pid with its status, so it is recorded as spawned, then exited.
  const unrecorded =
    status !== null && context.pid === null && status.pid !== null && actor.state === 'spawning'
      ? [{ type: 'process.spawned' as const, data: { pid: status.pid, pgid: status.pid, startTime: null, bootId: null } }]
      : [];
  let outcome: 'exited' | 'abandoned';
  if (status && (context.pid !== null || unrecorded.length) && (unrecorded.length || actor.accepts('process.exited', {}))) {
    // The process wrote its output while no runner watched: mask its secrets now, in the files too.
    const secrets = runSecrets(context.target && context.target.kind !== 'workflow' ? (context.target.secretEnv ?? []) : []);
    const masker = secrets.length ? new SecretMasker(secrets) : null;
    if (masker) for (const f of ['stdout.log', 'stderr.log']) maskFiles(join(files, f), masker);
    const stdout = tailOfOutput(join(files, 'stdout.log'));
    const stderr = tailOfOutput(join(files, 'stderr.log'));
    const endedAt = statSync(statusPath).mtimeMs;
    const started = context.startedAt ? Date.parse(context.startedAt) : endedAt;
    const timedOut = options.timedOut === true;
    const how = status.signal ? `killed by signal ${status.signal}` : status.exitCode === 0 ? null : `exited with code ${status.exitCode}`;
    // An agent's own account of the run, parsed from its files (the head kept past the cap
    // supplies the session id and model when the rotation dropped them).
    const target = context.target;
    const agentEvents: Array<{ type: 'run.agent_reported'; data: EventData<'run.agent_reported'> }> = [];
    if (target?.kind === 'agent') {
      const reported = agentReport(target.provider, join(files, 'stdout.log'), cliVersion(target.provider));
      if (reported.finalMessage !== null && masker) reported.finalMessage = masker.mask(reported.finalMessage);
      agentEvents.push({ type: 'run.agent_reported', data: reported });
    }
    actor.recordAll([
      ...unrecorded,
      ...agentEvents,
      {
        type: 'process.exited',
        data: {
        exitCode: status.exitCode,
        signal: status.signal,
        timedOut,
        cancelled: false,
        stdout: stdout.text,
        stderr: stderr.text,
        stdoutBytes: stdout.total,
        stderrBytes: stderr.total,
        durationMs: Math.max(0, Math.round(endedAt - started)),
        error: timedOut
          ? `timed out (enforced after runner ${context.runnerId} stopped)${how ? `; ${how}` : ''}`
          : how
            ? `${how} (recorded from its exit-status file after runner ${context.runnerId} stopped)`
            : null,
        },
      },
    ], takeOver);
    outcome = 'exited';
  } else {
    actor.record(
      'run.abandoned',
      {
        reason:
          context.pid === null
            ? `runner ${context.runnerId} stopped before the process was started`
            : options.unconfirmed !== undefined
              ? `runner ${context.runnerId} stopped and its process identity could not be confirmed (${options.unconfirmed}): pid ${context.pid} is alive but may be another process, so it was not signalled; its exit status is unknown`
              : `runner ${context.runnerId} stopped and the process (pid ${context.pid}) is gone; its exit status is unknown`,
      },
      takeOver,
    );
    outcome = 'abandoned';
  }
  const run = findRun(runtime.db, runId);
  const retried = scheduleRetry(runtime, run.loopId, run).map((e) => (e.data as { runId: string }).runId);
  return { outcome, retried };
}
