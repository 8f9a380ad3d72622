/**
 * `loops replay`: rebuilds every intermediate state of a stream from the log alone, on the
 * machine version that wrote it, and checks each against what the event recorded — the state
 * value, and (events appended since loops records it, `meta.ctx`) the hash of every context field
 * it changed, so a divergence is named down to the event and the field. Actions produced while
 * folding are listed, never executed.
 *
 * `StreamReplay` replays one event at a time and keeps only the current snapshot: the CLI pages
 * through the log (`streamPages`) and writes each step as it goes, so a replay's memory is flat in
 * the number of events. `replayEvents` / `replayStream` collect the steps of a whole stream.
 */
import type { AnyMachineSnapshot, AnyStateMachine } from 'xstate';
import type { EventData } from '../../events/catalog.js';
import { DeterminismError, NotFoundError } from '../../events/errors.js';
import type { EventMeta, EventStore, Json, StoredEvent, StreamInfo } from '../../events/types.js';
import { contextChanges, fieldHashes, firstFieldMismatch, hashValue, valueAt, type ContextChange } from '../../machines/context-diff.js';
import { ARCHIVED, initialSnapshot, stateOf, step as foldStep } from '../../machines/fold.js';
import { getMachine } from '../../machines/registry.js';
import { archivedHistory } from './replay-archive.js';

export type { ContextChange } from '../../machines/context-diff.js';
export { tombstoneOf } from './replay-archive.js';

/** The first context field whose replayed change differs from the one the event recorded. */
export interface FieldMismatch {
  /** `attempts`, or `steps.lint` inside a keyed map. */
  path: string;
  /** The hash the log recorded for the field's new value (null: the log says it did not change; `-`: removed). */
  recordedHash: string | null;
  /** The hash of the replayed value (null: replay did not change it). */
  replayedHash: string | null;
  /** The recorded value, when it can be known: the value before the event (when the log says it kept it), or removed. */
  recorded?: unknown;
  /** The replayed value after the event (absent: removed). */
  replayed?: unknown;
}

export interface ReplayStep {
  version: number;
  position: number;
  type: string;
  at: string;
  stateBefore: Json;
  stateAfter: Json;
  recordedState: Json | null;
  /** The machine accepted the event and reproduced its recorded state and field changes. */
  matches: boolean;
  accepted: boolean;
  /** The context fields the event changed (`contextChanges`: a workflow run's steps one by one, `steps.<id>`). */
  changes: ContextChange[];
  /** Effects the machine asked for at this step (listed, not executed). */
  actions: string[];
  /** False for an event appended before loops recorded its context changes (`meta.ctx`): checked on the state only. */
  contextChecked: boolean;
  /** Where the replayed context change first differs from the recorded one. */
  fieldMismatch?: FieldMismatch;
  /** Who acted (`meta.by`), when the event records it. */
  by?: EventMeta['by'];
  /** A `stream.archived` step: where the history before it went. */
  archived?: Pick<ArchivedData, 'file' | 'sha256' | 'fromVersion' | 'toVersion' | 'events'>;
}

export interface ReplayResult {
  streamId: string;
  machine: { id: string; version: number };
  steps: ReplayStep[];
  ok: boolean;
  /** First version whose replayed state (or field change) differs from the recorded one. */
  firstMismatch: number | null;
}

/** What a `stream.archived` tombstone says (the catalogue's payload). */
export type ArchivedData = EventData<'stream.archived'>;

/** The machine a stream was written by; a clear error when there is none this loops knows. */
export function machineOf(streamId: string, info: StreamInfo | undefined): { ref: { id: string; version: number }; machine: AnyStateMachine } {
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
  return { ref, machine };
}

/**
 * One stream's replay, an event at a time: `step(event)` folds it through the machine, compares
 * the state and the field hashes with the recorded ones and returns the step. Holds only the
 * current snapshot (`snapshot`: the state and whole context after the last event).
 */
export class StreamReplay {
  readonly streamId: string;
  readonly machine: { id: string; version: number };
  private readonly definition: AnyStateMachine;
  /** The state and context after the last event stepped (the initial state before any). */
  snapshot: AnyMachineSnapshot;
  /** The snapshot before the last event stepped. */
  previous: AnyMachineSnapshot;
  /** Events stepped so far. */
  count = 0;
  /** The first step that did not match, once there is one. */
  firstMismatch: ReplayStep | null = null;
  /** Versions of the events checked on the state only (no `meta.ctx`): the first and the last. */
  unrecorded: { from: number; to: number; events: number } | null = null;

  constructor(streamId: string, info: StreamInfo | undefined) {
    const { ref, machine } = machineOf(streamId, info);
    this.streamId = streamId;
    this.machine = ref;
    this.definition = machine;
    this.snapshot = initialSnapshot(machine);
    this.previous = this.snapshot;
  }

  /** Replays one event (the next of the stream) and checks it. */
  step(event: StoredEvent): ReplayStep {
    const s = foldStep(this.definition, this.snapshot, event);
    const stateAfter = stateOf(s.after);
    const changes = contextChanges(s.before.context, s.after.context);
    const recorded = event.meta?.ctx;
    const fieldMismatch = s.accepted && recorded ? mismatchOf(recorded, changes, s.before.context, s.after.context) : undefined;
    const matches = s.accepted && (event.state === null || sameState(event.state, stateAfter)) && !fieldMismatch;
    const result: ReplayStep = {
      version: event.version,
      position: event.position,
      type: event.type,
      at: event.at,
      stateBefore: stateOf(s.before),
      stateAfter,
      recordedState: event.state,
      matches,
      accepted: s.accepted,
      changes,
      actions: actionNames(s.actions),
      contextChecked: recorded !== undefined,
      ...(fieldMismatch ? { fieldMismatch } : {}),
      ...(event.meta?.by ? { by: event.meta.by } : {}),
      ...(event.type === ARCHIVED ? { archived: whereArchived(event.data as ArchivedData) } : {}),
    };
    if (!recorded) {
      this.unrecorded = this.unrecorded
        ? { ...this.unrecorded, to: event.version, events: this.unrecorded.events + 1 }
        : { from: event.version, to: event.version, events: 1 };
    }
    if (!matches && !this.firstMismatch) this.firstMismatch = result;
    this.previous = this.snapshot;
    this.snapshot = s.after;
    this.count += 1;
    return result;
  }

  /** True while every step so far matched. */
  get ok(): boolean {
    return this.firstMismatch === null;
  }
}

function sameState(recorded: Json, replayed: Json): boolean {
  return recorded === replayed || (typeof recorded === 'object' && JSON.stringify(recorded) === JSON.stringify(replayed));
}

function actionNames(actions: ReadonlyArray<{ type: string }>): string[] {
  const out: string[] = [];
  for (const a of actions) if (!a.type.startsWith('xstate.')) out.push(a.type);
  return out;
}

function mismatchOf(recorded: Record<string, string>, changes: ContextChange[], before: unknown, after: unknown): FieldMismatch | undefined {
  const found = firstFieldMismatch(recorded, fieldHashes(changes));
  if (!found) return undefined;
  const prior = valueAt(before, found.path);
  const replayed = valueAt(after, found.path);
  const out: FieldMismatch = { path: found.path, recordedHash: found.recorded, replayedHash: found.replayed };
  // The recorded value is known when the log says the field kept its value, or was removed, or
  // when its hash is the one of the value before the event.
  if (found.recorded === null || found.recorded === hashValue(prior)) {
    if (prior !== undefined) out.recorded = prior;
  }
  if (replayed !== undefined) out.replayed = replayed;
  return out;
}

function whereArchived({ file, sha256, fromVersion, toVersion, events }: ArchivedData): NonNullable<ReplayStep['archived']> {
  return { file, sha256, fromVersion, toVersion, events };
}

/**
 * The replay of a stream whose owner (`info`, undefined when there is no such stream) and events
 * were read by the caller: folds them through the machine that wrote them and checks every
 * replayed state and field change against the recorded ones. Runs nothing. (For a bundle or an
 * export: the steps with `matches` and, at the first mismatch, `fieldMismatch`.)
 */
export function replayEvents(streamId: string, info: StreamInfo | undefined, events: readonly StoredEvent[]): ReplayResult {
  const replay = new StreamReplay(streamId, info);
  const steps = events.map((event) => replay.step(event));
  return { streamId, machine: replay.machine, steps, ok: replay.ok, firstMismatch: replay.firstMismatch?.version ?? null };
}

/** Events read a page at a time (`pageSize` rows), in version order, from `fromVersion` on. */
export async function* streamPages(log: EventStore, streamId: string, fromVersion = 1, pageSize = 2000): AsyncGenerator<StoredEvent[]> {
  let next = fromVersion;
  for (;;) {
    const page = await log.readStreamPage(streamId, next, pageSize);
    if (page.length) yield page;
    if (page.length < pageSize) return;
    next = page[page.length - 1]!.version + 1;
  }
}

/** A whole stream, replayed (its steps collected: for a stream of any length, step a `StreamReplay` over `streamPages`). */
export async function replayStream(log: EventStore, streamId: string): Promise<ReplayResult> {
  const info = await log.streamInfo(streamId);
  return replayEvents(streamId, info, info ? await log.readStream(streamId) : []);
}

/**
 * The replay of an archived stream with its history read back from the archive file: the file's
 * sha256 must be the one its tombstone recorded, and the versions it holds for the stream exactly
 * the ones the tombstone says it moved. The tombstone is then replayed after them as a check: the
 * state they fold to must be the state it recorded. `file`: where the archive is now (default: where
 * the tombstone says, under `dataDir`).
 */
export async function replayArchived(log: EventStore, dataDir: string, streamId: string, file?: string): Promise<ReplayResult & { file: string }> {
  const found = await archivedHistory(log, dataDir, streamId, file);
  return { ...replayEvents(streamId, found.info, [...found.history, ...found.live]), file: found.file };
}

const FAILED: ReadonlySet<unknown> = new Set(['failed', 'timed_out']);

/**
 * What failed at this step, or null: the stream's state became `failed` or `timed_out` (a run, a
 * workflow run), or a field holding a status did — a workflow run's step whose status became
 * `failed` or `timed_out`, or `retrying` (an attempt failed and another is due). Decided from the
 * state and the context change alone, so it holds for any machine.
 */
export function failureAt(step: Pick<ReplayStep, 'stateBefore' | 'stateAfter' | 'changes'>): string | null {
  if (FAILED.has(step.stateAfter) && step.stateAfter !== step.stateBefore) return `${stateText(step.stateAfter)}`;
  for (const change of step.changes) {
    const before = statusOf(change.before);
    const after = statusOf(change.after);
    if (after !== before && (FAILED.has(after) || after === 'retrying')) return `${change.path} ${String(after)}`;
  }
  return null;
}

function statusOf(value: unknown): unknown {
  if (typeof value === 'object' && value !== null && 'status' in value) return (value as { status: unknown }).status;
  return undefined;
}

function stateText(state: Json): string {
  return typeof state === 'string' ? state : JSON.stringify(state);
}

/** The error a replay that diverged at `step` exits with (6). */
export function divergenceError(streamId: string, machine: { id: string; version: number }, step: ReplayStep): DeterminismError {
  return new DeterminismError(`replay of ${streamId} diverges at version ${step.version} (${step.type}): ${whyMismatch(step)}`, step.version, {
    hint: `the machine ${machine.id}@${machine.version} changed behaviour without a version bump, or the log was edited`,
  });
}

/** Why a step did not match, in one phrase. */
export function whyMismatch(step: ReplayStep): string {
  if (!step.accepted) return `the machine does not accept ${step.type} in state ${JSON.stringify(step.stateBefore)}`;
  if (step.recordedState !== null && !sameState(step.recordedState, step.stateAfter)) {
    return `replayed state ${JSON.stringify(step.stateAfter)} but the log recorded ${JSON.stringify(step.recordedState)}`;
  }
  const m = step.fieldMismatch;
  if (!m) return 'it matches';
  const replayed = m.replayedHash === null ? 'left it unchanged' : `changed it to ${shortJson(m.replayed)}`;
  const recorded =
    m.recordedHash === null
      ? 'the log recorded no change'
      : m.recordedHash === '-'
        ? 'the log recorded it removed'
        : `the log recorded a change to another value (hash ${m.recordedHash}${'recorded' in m ? `, the value before: ${shortJson(m.recorded)}` : ''})`;
  return `field ${m.path}: replay ${replayed}, ${recorded}`;
}

function shortJson(value: unknown): string {
  const text = value === undefined ? 'nothing' : (JSON.stringify(value) ?? String(value));
  return text.length > 200 ? `${text.slice(0, 199)}… (${text.length} characters)` : text;
}

/** The error of a replay that did not match (its first mismatching step). */
export function determinismError(result: ReplayResult): DeterminismError {
  return divergenceError(result.streamId, result.machine, result.steps.find((s) => !s.matches)!);
}
