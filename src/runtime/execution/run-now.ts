/**
 * `loops run-now`: a due loop's slot is decided and claimed like any pass would (a daemon or tick
 * racing for it loses the compare-and-set); otherwise the run gets an ad-hoc slot of its own. Either
 * way the run takes the one attempt path (attempt.ts).
 */
import { ClaimLostError, InvalidTransitionError, ValidationError } from '../../events/errors.js';
import { hostId, runnerHost, runnerMayRun } from '../host.js';
import { newId } from '../ids.js';
import { holdRunnerLease, RUNNER_LEASE_TTL_MS } from '../leases.js';
import { decideLoop } from '../loops/decisions.js';
import { findLoopRecord, type RunView } from '../queries/loops.js';
import type { Runtime } from '../runtime.js';
import { executeRun, type RunNowOptions } from './attempt.js';

export { DEFAULT_LEASE_TTL_MS, executeRun, type ExecuteRunOptions, type RunNowOptions } from './attempt.js';

export async function runNow(runtime: Runtime, idOrName: string, options: RunNowOptions & { here?: boolean } = {}): Promise<RunView> {
  const { here, ...runOptions } = options;
  const loop = findLoopRecord(runtime.db, idOrName);
  if (here !== true && !runnerMayRun(runtime, loop.runsOn)) {
    const mine = runtime.labels?.length ? `labels ${runtime.labels.join(',')}` : 'no labels';
    throw new ValidationError(
      `loop ${loop.name} runs on runners labelled ${loop.runsOn!.join(',')}; this host (${runnerHost(runtime.runnerId) ?? hostId()}, ${mine}) has not all of them`,
      { hint: 'run it on a host with those labels (loops daemon status --fleet lists them; LOOPS_HOST_LABELS gives a command labels), or pass --here to run it on this host anyway' },
    );
  }
  if (loop.status === 'archived' || loop.status === 'expired') {
    throw new InvalidTransitionError(`loop ${loop.name} is ${loop.status} and cannot run`, {
      hint: `${loop.status} loops keep their history only; create a new loop to run this again`,
    });
  }
  const now = runtime.clock.now();
  // A loop that is due: run-now takes the due slot — decided and recorded like any pass (a daemon
  // or tick racing for it loses the compare-and-set), so the slot never gets two runs — and claims
  // what fired like any pass (a runner that claims one of them first runs it instead).
  if (loop.status === 'active' && loop.nextRunAt !== null && Date.parse(loop.nextRunAt) <= now) {
    const { fired } = await runtime.log.batch(async (batch) => {
      await holdRunnerLease(runtime, RUNNER_LEASE_TTL_MS, batch);
      return decideLoop(runtime, loop.id, now, { batch });
    });
    let last: RunView | null = null;
    for (const f of fired) {
      try {
        last = await executeRun(runtime, loop, { runId: f.runId, slot: f.slot, scheduledFor: f.fireAt, trigger: 'schedule', queued: true, ...runOptions });
      } catch (error) {
        if (!(error instanceof ClaimLostError)) throw error;
      }
    }
    if (last) return last;
  }
  // Otherwise (not due, paused, stopped, or its due slot was skipped for overlap): an ad-hoc slot
  // of its own, which never touches the schedule.
  const runId = newId('run', now);
  return executeRun(runtime, loop, {
    runId,
    slot: `manual:${runId}`,
    scheduledFor: new Date(now).toISOString(),
    trigger: 'manual',
    ...runOptions,
  });
}
