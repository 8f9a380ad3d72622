/**
 * `loops diff <runA> <runB>`: two runs of the same loop or workflow replayed side by side, in
 * lockstep, to the first transition where they part ways — a different event type, a different
 * state after it, or other context fields changed (compared by path, in order: a run's id and
 * times differ in value every time, its shape does not) — and the context differences there.
 * Both streams are read a page at a time: memory stays flat in their length.
 */
import { UsageError } from '../../events/errors.js';
import type { EventStore, StoredEvent } from '../../events/types.js';
import { contextChanges, valueAt, type ContextChange } from '../../machines/context-diff.js';
import { streamPages, StreamReplay, type ReplayStep } from './replay.js';

/** One run as compared. */
export interface DiffSide {
  streamId: string;
  machine: { id: string; version: number };
  /** The loop (a run) or workflow (a workflow run) it belongs to; the stream itself for any other. */
  owner: string;
  /** Events replayed (up to the divergence, and one past it). */
  events: number;
  /** The first event whose replay does not match the log, if any (a determinism error). */
  mismatch: ReplayStep | null;
}

/** Why two runs part ways at a transition. */
export type DivergenceKind = 'type' | 'state' | 'fields' | 'length';

/** Where two runs part ways. */
export interface Divergence {
  /** The transition's number (1: the first event of each). */
  index: number;
  kind: DivergenceKind;
  /** Each run's step there (null: that run has no more events). */
  a: ReplayStep | null;
  b: ReplayStep | null;
  /** The fields either run changed there, with each run's value after it, where they differ. */
  fields: Array<{ path: string; a: unknown; b: unknown }>;
  /** Every context field that differs between the two runs after it (`before`: run A's value, `after`: run B's). */
  context: ContextChange[];
}

export interface RunDiff {
  a: DiffSide;
  b: DiffSide;
  /** Same shape: the same event types, states and changed fields, transition by transition. */
  identical: boolean;
  /** Transitions compared. */
  transitions: number;
  divergence: Divergence | null;
}

/** What a run belongs to: its loop or workflow, from its first event. */
function ownerOf(streamId: string, first: StoredEvent | undefined): string {
  const data = (first?.data ?? {}) as { loopId?: unknown; workflowId?: unknown };
  if (streamId.startsWith('run:') && typeof data.loopId === 'string') return `loop ${data.loopId}`;
  if (streamId.startsWith('wfrun:') && typeof data.workflowId === 'string') return `workflow ${data.workflowId}`;
  return streamId;
}

async function* eventsOf(log: EventStore, streamId: string): AsyncGenerator<StoredEvent> {
  for await (const page of streamPages(log, streamId, 1, 1000)) yield* page;
}

function pathsOf(step: ReplayStep): string {
  return step.changes.map((c) => c.path).join('\n');
}

/**
 * Replays two streams in lockstep to the first transition where they part ways. Streams of
 * different loops or workflows (or machines) are refused unless `force`.
 */
export async function diffRuns(log: EventStore, streamA: string, streamB: string, options: { force?: boolean } = {}): Promise<RunDiff> {
  const replayA = new StreamReplay(streamA, await log.streamInfo(streamA));
  const replayB = new StreamReplay(streamB, await log.streamInfo(streamB));
  const [firstA] = await log.readStreamPage(streamA, 1, 1);
  const [firstB] = await log.readStreamPage(streamB, 1, 1);
  const a: DiffSide = { streamId: streamA, machine: replayA.machine, owner: ownerOf(streamA, firstA), events: 0, mismatch: null };
  const b: DiffSide = { streamId: streamB, machine: replayB.machine, owner: ownerOf(streamB, firstB), events: 0, mismatch: null };
  if (!options.force && (a.machine.id !== b.machine.id || a.owner !== b.owner)) {
    const what = a.machine.id !== b.machine.id ? `a ${a.machine.id} stream and a ${b.machine.id} stream` : `runs of different ${a.owner.split(' ')[0]}s (${a.owner}, ${b.owner})`;
    throw new UsageError(`${streamA} and ${streamB} are ${what}`, { hint: 'loops diff compares two runs of the same loop or workflow; --force compares them anyway' });
  }
  const itA = eventsOf(log, streamA);
  const itB = eventsOf(log, streamB);
  let index = 0;
  let divergence: Divergence | null = null;
  try {
    for (;;) {
      const [nextA, nextB] = await Promise.all([itA.next(), itB.next()]);
      if (nextA.done && nextB.done) break;
      index += 1;
      const stepA = nextA.done ? null : replayA.step(nextA.value);
      const stepB = nextB.done ? null : replayB.step(nextB.value);
      const kind: DivergenceKind | null =
        !stepA || !stepB
          ? 'length'
          : stepA.type !== stepB.type
            ? 'type'
            : JSON.stringify(stepA.stateAfter) !== JSON.stringify(stepB.stateAfter)
              ? 'state'
              : pathsOf(stepA) !== pathsOf(stepB)
                ? 'fields'
                : null;
      if (kind) {
        divergence = { index, kind, a: stepA, b: stepB, ...differences(replayA, replayB, stepA, stepB) };
        break;
      }
    }
  } finally {
    await itA.return(undefined);
    await itB.return(undefined);
  }
  a.events = replayA.count;
  b.events = replayB.count;
  a.mismatch = replayA.firstMismatch;
  b.mismatch = replayB.firstMismatch;
  return { a, b, identical: divergence === null, transitions: index, divergence };
}

function differences(replayA: StreamReplay, replayB: StreamReplay, stepA: ReplayStep | null, stepB: ReplayStep | null): Pick<Divergence, 'fields' | 'context'> {
  const ctxA = replayA.snapshot.context as unknown;
  const ctxB = replayB.snapshot.context as unknown;
  const paths: string[] = [];
  for (const step of [stepA, stepB]) for (const c of step?.changes ?? []) if (!paths.includes(c.path)) paths.push(c.path);
  const fields: Divergence['fields'] = [];
  for (const path of paths) {
    const x = valueAt(ctxA, path);
    const y = valueAt(ctxB, path);
    if (JSON.stringify(x) !== JSON.stringify(y)) fields.push({ path, a: x, b: y });
  }
  return { fields, context: contextChanges(ctxA, ctxB) };
}
