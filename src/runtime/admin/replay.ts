/**
 * `loops replay`: rebuilds every intermediate state of a stream from the log alone, on the
 * machine version that wrote it, and checks each against the state recorded with the event.
 * Actions produced while folding are listed, never executed.
 */
import { DeterminismError, NotFoundError } from '../../events/errors.js';
import type { EventStore, Json, StoredEvent, StreamInfo } from '../../events/types.js';
import { fold, stateOf } from '../../machines/fold.js';
import { getMachine } from '../../machines/registry.js';

export interface ContextChange {
  key: string;
  before: unknown;
  after: unknown;
}

export interface ReplayStep {
  version: number;
  position: number;
  type: string;
  at: string;
  stateBefore: Json;
  stateAfter: Json;
  recordedState: Json | null;
  matches: boolean;
  accepted: boolean;
  changes: ContextChange[];
  /** Effects the machine asked for at this step (listed, not executed). */
  actions: string[];
}

export interface ReplayResult {
  streamId: string;
  machine: { id: string; version: number };
  steps: ReplayStep[];
  ok: boolean;
  /** First version whose replayed state differs from the recorded one. */
  firstMismatch: number | null;
}

export async function replayStream(log: EventStore, streamId: string): Promise<ReplayResult> {
  const info = await log.streamInfo(streamId);
  return replayEvents(streamId, info, info ? await log.readStream(streamId) : []);
}

/**
 * The replay of a stream whose owner (`info`, undefined when there is no such stream) and events
 * were read by the caller: folds them through the machine that wrote them and checks every
 * replayed state against the recorded one. Runs nothing.
 */
export function replayEvents(streamId: string, info: StreamInfo | undefined, events: readonly StoredEvent[]): ReplayResult {
  if (!info) throw new NotFoundError(`no stream ${streamId} in the log`);
  if (info.machineId === null || info.machineVersion === null) {
    throw new NotFoundError(`stream ${streamId} has no machine to replay it with`);
  }
  const ref = { id: info.machineId, version: info.machineVersion };
  const machine = getMachine(ref);
  if (!machine) {
    throw new NotFoundError(`stream ${streamId} was written by machine ${ref.id}@${ref.version}, which this loops does not know`, {
      hint: 'upgrade loops to replay it',
    });
  }
  const { steps } = fold(machine, [...events]);
  const result: ReplayStep[] = steps.map((s, i) => {
    const event = events[i]!;
    const stateAfter = stateOf(s.after);
    const matches = s.accepted && (event.state === null || JSON.stringify(event.state) === JSON.stringify(stateAfter));
    return {
      version: event.version,
      position: event.position,
      type: event.type,
      at: event.at,
      stateBefore: stateOf(s.before),
      stateAfter,
      recordedState: event.state,
      matches,
      accepted: s.accepted,
      changes: diffContext(s.before.context as Record<string, unknown>, s.after.context as Record<string, unknown>),
      actions: s.actions.map((a) => a.type).filter((t) => !t.startsWith('xstate.')),
    };
  });
  const mismatch = result.find((s) => !s.matches);
  return { streamId, machine: ref, steps: result, ok: !mismatch, firstMismatch: mismatch?.version ?? null };
}

export function determinismError(result: ReplayResult): DeterminismError {
  const step = result.steps.find((s) => !s.matches)!;
  const why = step.accepted
    ? `replayed state ${JSON.stringify(step.stateAfter)} but the log recorded ${JSON.stringify(step.recordedState)}`
    : `the machine does not accept ${step.type} in state ${JSON.stringify(step.stateBefore)}`;
  return new DeterminismError(`replay of ${result.streamId} diverges at version ${step.version} (${step.type}): ${why}`, step.version, {
    hint: `the machine ${result.machine.id}@${result.machine.version} changed behaviour without a version bump, or the log was edited`,
  });
}

function diffContext(before: Record<string, unknown>, after: Record<string, unknown>): ContextChange[] {
  const changes: ContextChange[] = [];
  for (const key of new Set([...Object.keys(before ?? {}), ...Object.keys(after ?? {})])) {
    if (JSON.stringify(before?.[key]) !== JSON.stringify(after?.[key])) {
      changes.push({ key, before: before?.[key], after: after?.[key] });
    }
  }
  return changes;
}
