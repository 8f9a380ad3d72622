/**
 * Recovery: runs left unfinished by a runner that is gone (its lease expired). The new runner
 * takes over the run's lease — a new fencing token, so the old runner can no longer record
 * anything — and records what is true: `run.abandoned` when the run's process is gone. A process
 * that outlived its runner is left alone and reported (adopting it, with its real exit status,
 * comes with the exit-status wrapper).
 */
import { cached } from '../events/db.js';
import type { RunContext } from '../machines/run.js';
import { DurableActor } from './actor.js';
import { assertLeaseHeld, releaseLease, takeLease } from './leases.js';
import { isSameProcessAlive } from './process-info.js';
import type { Runtime } from './runtime.js';

export interface RecoveryReport {
  abandoned: string[];
  /** Runs whose process is still alive though its runner is gone. */
  orphaned: Array<{ runId: string; pid: number }>;
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
  const report: RecoveryReport = { abandoned: [], orphaned: [] };
  for (const runId of staleRuns(runtime, new Date(now).toISOString())) {
    const actor = DurableActor.load(runtime, `run:${runId}`);
    if (actor.snapshot.status === 'done') continue;
    const context = actor.snapshot.context as RunContext;
    if (context.pid !== null && isSameProcessAlive(context.pid, context.startTime)) {
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
  }
  return report;
}
