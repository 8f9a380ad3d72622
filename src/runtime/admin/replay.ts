/**
 * `loops replay`: rebuilds every intermediate state of a stream from the log alone, on the
 * machine version that wrote it, and checks each against the state recorded with the event.
 * Actions produced while folding are listed, never executed.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EventData } from '../../events/catalog.js';
import { DeterminismError, NotFoundError } from '../../events/errors.js';
import type { EventStore, Json, StoredEvent, StreamInfo } from '../../events/types.js';
import { ARCHIVED, fold, stateOf } from '../../machines/fold.js';
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
  /** A `stream.archived` step: where the history before it went. */
  archived?: Pick<ArchivedData, 'file' | 'sha256' | 'fromVersion' | 'toVersion' | 'events'>;
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

/** What a `stream.archived` tombstone says (the catalogue's payload). */
export type ArchivedData = EventData<'stream.archived'>;

function whereArchived({ file, sha256, fromVersion, toVersion, events }: ArchivedData): NonNullable<ReplayStep['archived']> {
  return { file, sha256, fromVersion, toVersion, events };
}

/** A stream's tombstone, when its history was archived (its first event). */
export function tombstoneOf(events: readonly StoredEvent[]): ArchivedData | null {
  const first = events[0];
  return first?.type === ARCHIVED ? (first.data as ArchivedData) : null;
}

/**
 * The replay of an archived stream with its history read back from the archive file: the file's
 * sha256 must be the one its tombstone recorded, and the versions it holds for the stream exactly
 * the ones the tombstone says it moved. The tombstone is then replayed after them as a check: the
 * state they fold to must be the state it recorded. `file`: where the archive is now (default: where
 * the tombstone says, under `dataDir`).
 */
export async function replayArchived(log: EventStore, dataDir: string, streamId: string, file?: string): Promise<ReplayResult & { file: string }> {
  const info = await log.streamInfo(streamId);
  const live = info ? await log.readStream(streamId) : [];
  const tombstone = tombstoneOf(live);
  if (!info || !tombstone) throw new NotFoundError(info ? `${streamId} is not archived: its whole history is in the log` : `no stream ${streamId} in the log`);
  const path = file ?? join(dataDir, tombstone.file);
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (error) {
    throw new NotFoundError(`cannot read the archive of ${streamId}: ${(error as Error).message}`, {
      hint: `its versions ${tombstone.fromVersion}-${tombstone.toVersion} were archived to ${tombstone.file}; give its new place with --archive-file`,
    });
  }
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  if (sha256 !== tombstone.sha256) {
    throw new DeterminismError(`archive ${path} is not the file ${streamId} was archived to: its sha256 is ${sha256}, the tombstone recorded ${tombstone.sha256}`, tombstone.fromVersion, {
      hint: 'the file was changed or replaced; restore it from a backup',
    });
  }
  const history: StoredEvent[] = [];
  const lines = bytes.toString('utf8').split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i]) continue;
    let entry: { event?: StoredEvent };
    try {
      entry = JSON.parse(lines[i]!) as { event?: StoredEvent };
    } catch {
      throw new DeterminismError(`archive ${path}, line ${i + 1}: not JSON`, tombstone.fromVersion);
    }
    if (entry.event?.streamId === streamId) history.push(entry.event);
  }
  const versions = history.map((e) => e.version);
  const expected = Array.from({ length: tombstone.events }, (_, i) => tombstone.fromVersion + i);
  if (JSON.stringify(versions) !== JSON.stringify(expected)) {
    throw new DeterminismError(`archive ${path} holds versions ${versions.join(',') || 'none'} of ${streamId}, the tombstone says ${tombstone.fromVersion}-${tombstone.toVersion}`, tombstone.fromVersion);
  }
  return { ...replayEvents(streamId, info, [...history, ...live]), file: path };
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
      ...(event.type === ARCHIVED ? { archived: whereArchived(event.data as ArchivedData) } : {}),
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
