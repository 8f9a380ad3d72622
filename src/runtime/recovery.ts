/**
 * Recovery: runs left unfinished by a runner that is gone (its lease expired). The new runner
 * takes over the run's lease — a new fencing token, so the old runner can no longer record
 * anything — and records what is true: `run.abandoned` when the run's process is gone. A process
 * that outlived its runner is left alone and reported (adopting it, with its real exit status,
 * comes with the exit-status wrapper).
 */
import { readFileSync } from 'node:fs';
import { cached } from '../events/db.js';
import type { RunContext } from '../machines/run.js';
import { DurableActor } from './actor.js';
import { assertLeaseHeld, releaseLease, takeLease } from './leases.js';
import { isSameProcessAlive } from './process-info.js';
import { findRun } from './queries.js';
import type { Runtime } from './runtime.js';
import { scheduleRetry } from './scheduler.js';

export interface RecoveryReport {
  abandoned: string[];
  /** Retries scheduled for abandoned runs whose loop has attempts left. */
  retried: string[];
  /** Runs whose process is still alive though its runner is gone. */
  orphaned: Array<{ runId: string; pid: number }>;
}

/**
 * True while the process with this identity is running. A zombie (exited, not yet reaped — e.g.
 * reparented to an init that reaps late or never) still has its /proc entry and start time, but it
 * has ended: it counts as gone.
 */
export function processRunning(pid: number, startTime: string | null): boolean {
  if (!isSameProcessAlive(pid, startTime)) return false;
  if (process.platform !== 'linux') return true;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

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
  const report: RecoveryReport = { abandoned: [], retried: [], orphaned: [] };
  for (const runId of staleRuns(runtime, new Date(now).toISOString())) {
    const actor = DurableActor.load(runtime, `run:${runId}`);
    if (actor.snapshot.status === 'done') continue;
    const context = actor.snapshot.context as RunContext;
    if (context.pid !== null && processRunning(context.pid, context.startTime)) {
      report.orphaned.push({ runId, pid: context.pid });
      continue;
    }
    const streamId = `run:${runId}`;
    let lease = { name: streamId, holder: runtime.runnerId, token: 0, expiresAt: now + leaseTtlMs };
    actor.record(
      'run.abandoned',
      {
        reason:
          context.pid === null
            ? `runner ${context.runnerId} stopped before the process was started`
            : `runner ${context.runnerId} stopped and the process (pid ${context.pid}) is gone; its exit status is unknown`,
      },
      {
        precondition: () => {
          lease = takeLease(runtime.db, streamId, runtime.runnerId, leaseTtlMs, now);
          assertLeaseHeld(runtime.db, lease, now);
          releaseLease(runtime.db, lease);
        },
      },
    );
    report.abandoned.push(runId);
    const run = findRun(runtime.db, runId);
    for (const event of scheduleRetry(runtime, run.loopId, run)) {
      report.retried.push((event.data as { runId: string }).runId);
    }
  }
  return report;
}
