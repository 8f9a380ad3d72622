/**
 * A run left by a runner that stopped, written the way `executeRun` on that runner writes it —
 * claimed under its lease, the spawn intent, and (for a process) `process.spawned` — and stopped
 * there. The recovery suites (recovery, secrets) build their stranded runs with it.
 */
import { currentMachines } from '../../src/machines/registry.js';
import { DurableActor } from '../../src/runtime/actor.js';
import { bootId } from '../../src/runtime/execution/process-info.js';
import { newId } from '../../src/runtime/ids.js';
import type { LoopView } from '../../src/runtime/queries/loops.js';
import type { Runtime } from '../../src/runtime/runtime.js';

/** How far the runner got: claimed, the spawn requested, or a process recorded (`bootId` defaults to this boot's). */
export type StrandStage = 'claimed' | 'spawning' | { pid: number; startTime: string | null; bootId?: string | null };

/** `ids`: the run's id and slot, when the caller chose them (a hook run's, claimed by its notice first). */
export async function strandRun(
  old: Runtime,
  loop: Pick<LoopView, 'id' | 'name' | 'target' | 'policies'>,
  stage: StrandStage,
  ttlMs = 30_000,
  timeoutAt: string | null = null,
  ids?: { runId: string; slot: string },
): Promise<string> {
  const now = old.clock.now();
  const runId = ids?.runId ?? newId('run', now);
  const streamId = `run:${runId}`;
  const actor = DurableActor.create(old, streamId, 'run', currentMachines.run);
  await actor.record(
    'run.claimed',
    {
      runId,
      loopId: loop.id,
      loopName: loop.name,
      slot: ids?.slot ?? `manual:${runId}`,
      scheduledFor: new Date(now).toISOString(),
      attempt: 1,
      trigger: 'manual',
      target: loop.target,
      policies: loop.policies,
      runnerId: old.runnerId,
      leaseToken: 1,
    },
    { guards: [{ kind: 'take-lease', name: streamId, holder: old.runnerId, ttlMs }], meta: { leaseToken: 1 } },
  );
  if (stage === 'claimed') return runId;
  const command = loop.target.kind === 'command' ? loop.target.command : 'true';
  await actor.record('process.spawn_requested', { command, args: [], shell: true, cwd: null, envKeys: [], timeoutAt });
  if (stage === 'spawning') return runId;
  await actor.record('process.spawned', { pid: stage.pid, pgid: stage.pid, startTime: stage.startTime, bootId: stage.bootId === undefined ? bootId() : stage.bootId });
  return runId;
}
