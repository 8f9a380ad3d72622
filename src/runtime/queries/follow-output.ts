/**
 * The engine behind `loops logs -f`: follows a run's output (or a workflow run's, step attempt by
 * step attempt) while it goes, until the run ends — read from the log — or the caller stops it.
 * An async iterator of events; the caller only renders them (src/cli/commands/logs.ts).
 *
 * Every `pollMs` (200 ms) it looks at the subject again (one read of the projections), then at
 * the files: once the run has ended, its files are complete, so the last poll reads them to the
 * end. A stream is followed through the runner's rotations (follow-file.ts); units that start
 * while it follows (a step attempt, a workflow loop's workflow run) are followed from their start.
 */
import type { Db } from '../../events/db.js';
import type { SecretMasker } from '../execution/secrets.js';
import { FileCursor } from './follow-file.js';
import { outputFiles, resolveLogsSubject, type ByteSource, type OutputFiles, type OutputStream } from './run-files.js';
import { LiveMasker, outputChunks, outputMasker, outputTracker, type OutputUnit, type OutputView } from './run-output.js';

const POLL_MS = 200;

/** What following reports, in order. Per unit: `unit`, then per stream `output`… `settled`; later `output`, `idle`, `lost`; last `closed`. */
export type FollowEvent =
  /** A unit is followed from now on (`atStart`: it was there when following began); its streams' files as they are. */
  | { type: 'unit'; unit: OutputUnit; atStart: boolean; files: OutputFiles[] }
  /** Bytes of a stream (masked, for a run not ended). */
  | { type: 'output'; unit: OutputUnit; stream: OutputStream; chunk: Buffer }
  /** A stream's files, as they were when its unit was first looked at, were given (at the start, from `tail`). */
  | { type: 'settled'; unit: OutputUnit; stream: OutputStream; atStart: boolean; files: OutputFiles }
  /** The units there at the start were given; following goes on (unless `view.ended`). */
  | { type: 'caught-up'; view: OutputView }
  /** A poll found nothing new on this stream; `released`: bytes the masker held back and let go now. */
  | { type: 'idle'; unit: OutputUnit; stream: OutputStream; released: Buffer }
  /** The stream was rotated between two polls and some of what it held before is missing. */
  | { type: 'lost'; unit: OutputUnit; stream: OutputStream }
  /** The stream is over (the run ended, or following stopped): everything was given. */
  | { type: 'closed'; unit: OutputUnit; stream: OutputStream }
  /** The last event: the subject as last seen; `aborted` when `signal` stopped following first. */
  | { type: 'done'; view: OutputView; aborted: boolean };

export interface FollowOutputOptions {
  /** The streams to follow, in this order for each unit. */
  streams: readonly OutputStream[];
  /** At the start, only the last `tail` lines of each stream (null: all). Units that start later are given whole. */
  tail?: number | null;
  /** Masks the run's secrets (from `outputMasker`); null when the run ended or has none. */
  masker?: SecretMasker | null;
  /** Stops following (the run goes on). */
  signal?: AbortSignal;
  pollMs?: number;
}

const EMPTY: ByteSource = { size: 0, read: () => 0 };

interface Followed {
  unit: OutputUnit;
  stream: OutputStream;
  cursor: FileCursor;
  masker: LiveMasker | null;
}

/**
 * Follows the subject `look` looks at, from `first` (its first look): what the files hold (the
 * last `tail` lines at the start), then what is appended, until the subject has ended. A stream
 * that shrinks was rotated: reading goes on from its start, after what `.1` holds that was not
 * read.
 */
export async function* followOutput(look: () => OutputView, first: OutputView, options: FollowOutputOptions): AsyncGenerator<FollowEvent, void, undefined> {
  const { streams, signal } = options;
  const pollMs = options.pollMs ?? POLL_MS;
  const followed = new Map<string, Followed>();

  /** Starts following a unit: what its files hold (the last `tail` lines at the start), then what comes. */
  function* add(unit: OutputUnit, atStart: boolean): Generator<FollowEvent> {
    const entries: Followed[] = streams.map((stream) => ({
      unit,
      stream,
      cursor: new FileCursor(outputFiles(unit.dir, stream).path),
      masker: options.masker ? new LiveMasker(options.masker) : null,
    }));
    for (const e of entries) e.cursor.open();
    yield { type: 'unit', unit, atStart, files: entries.map((e) => outputFiles(unit.dir, e.stream)) };
    for (const e of entries) {
      // Not open yet: nothing to give now (the cursor reads it from its start once it appears).
      const current = e.cursor.take() ?? EMPTY;
      const chunks = outputChunks(unit.dir, e.stream, { tail: atStart ? (options.tail ?? null) : null, head: false }, current);
      let next = chunks.next();
      for (; !next.done; next = chunks.next()) yield* give(e, next.value);
      const files = next.value;
      if (e.masker) yield* give(e, e.masker.release(), false);
      yield { type: 'settled', unit, stream: e.stream, atStart, files };
      followed.set(`${unit.key}|${e.stream}`, e);
    }
  }

  try {
    for (const unit of first.units) yield* add(unit, true);
    let view = first;
    yield { type: 'caught-up', view };
    let aborted = false;
    while (!view.ended) {
      await sleep(pollMs, signal);
      if (signal?.aborted) {
        aborted = true;
        break;
      }
      // The status first, then the files: once the run has ended, its files are complete.
      view = look();
      // What the units followed so far wrote, then the units that started since.
      const known = [...followed.values()];
      for (const e of known) {
        const chunks: Buffer[] = [];
        const result = e.cursor.poll((chunk) => chunks.push(chunk));
        for (const chunk of chunks) yield* give(e, chunk);
        if (result === 'lost') yield { type: 'lost', unit: e.unit, stream: e.stream };
        if (chunks.length === 0) yield { type: 'idle', unit: e.unit, stream: e.stream, released: e.masker ? e.masker.release() : Buffer.alloc(0) };
      }
      for (const unit of view.units) if (!known.some((f) => f.unit.key === unit.key)) yield* add(unit, false);
    }
    for (const e of followed.values()) {
      if (e.masker) yield* give(e, e.masker.flush(), false);
      yield { type: 'closed', unit: e.unit, stream: e.stream };
    }
    yield { type: 'done', view, aborted };
  } finally {
    for (const e of followed.values()) e.cursor.close();
  }
}

/** A chunk read (masked when there is a masker, unless `mask` is false: already masked); nothing when it comes out empty. */
function* give(e: Followed, chunk: Buffer, mask = true): Generator<FollowEvent> {
  const data = mask && e.masker ? e.masker.push(chunk) : chunk;
  if (data.length) yield { type: 'output', unit: e.unit, stream: e.stream, chunk: data };
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** What `followRunOutput` follows, and how. */
export interface FollowRunOutputOptions extends Omit<FollowOutputOptions, 'streams' | 'masker'> {
  /** Default: both. */
  streams?: readonly OutputStream[];
  /** Workflow runs: only this step (its last attempt at the start and later ones, or `attempt`). */
  step?: string | null;
  attempt?: number | null;
}

/**
 * Follows what `ref` names — a run id or prefix, a workflow run id or prefix, or a loop (its
 * latest run) — until it ends: `followOutput` on its units, its secrets masked.
 */
export async function* followRunOutput(db: Db, dataDir: string, ref: string, options: FollowRunOutputOptions = {}): AsyncGenerator<FollowEvent, void, undefined> {
  const subject = resolveLogsSubject(db, ref);
  const look = outputTracker(db, dataDir, subject, { step: options.step ?? null, attempt: options.attempt ?? null, follow: true });
  const first = look();
  yield* followOutput(look, first, { ...options, streams: options.streams ?? ['stdout', 'stderr'], masker: outputMasker(db, subject, first) });
}
