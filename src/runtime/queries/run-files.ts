/**
 * Where a run's output is, and reading it back: `loops logs`' runtime side. Light on purpose (no
 * zod, xstate, rxjs or execa): it reads the projection tables and the files.
 *
 * - A loop run writes `<dataDir>/runs/<runId>/stdout.log` and `stderr.log`; a workflow step attempt
 *   `<dataDir>/runs/<wfRunId>/<stepId>/<attempt>/stdout.log` …
 * - Past the size cap the runner rotates a file like copytruncate (src/runtime/execution/output.ts): the last
 *   cap bytes go to `<file>.1` (overwritten at each rotation) and the file starts again empty;
 *   before the first rotation the beginning is copied to `<file>.head`. What a reader can show is
 *   `.1` then the file; what lies between `.head` and `.1` is gone.
 * - An output file that stayed empty is removed when the process ends.
 *
 * What `loops logs` shows of a run is run-output.ts; following the files as they grow,
 * follow-output.ts over follow-file.ts.
 */
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Target } from '../../events/catalog.js';
import { cached, type Db } from '../../events/db.js';
import { LoopsError, NotFoundError } from '../../events/errors.js';
import { runDir } from '../paths.js';
import { findLoop, findRun, listRuns, type LoopView, type RunView } from './loops.js';
import { findWorkflowRun, type WorkflowRunView } from './workflows.js';
import { shownRef } from './refs.js';

export type OutputStream = 'stdout' | 'stderr';

/** Loop-run statuses of a run that has not ended. */
export const LIVE_RUN_STATUSES: ReadonlySet<string> = new Set(['claimed', 'spawning', 'running']);

export function runHasEnded(status: string): boolean {
  return !LIVE_RUN_STATUSES.has(status);
}

/** A workflow run is `running` until it ends. */
export function workflowRunHasEnded(status: string): boolean {
  return status !== 'running';
}

/** The directory of one attempt of a workflow step. */
export function stepAttemptDir(dataDir: string, wfRunId: string, stepId: string, attempt: number): string {
  return join(runDir(dataDir, wfRunId), stepId, String(attempt));
}

/** What `loops logs <ref>` names: a loop run, or a workflow run (`loop` when named by its loop). */
export type LogsSubject =
  | { kind: 'run'; run: RunView; target: Target; loop: LoopView | null }
  | { kind: 'workflow'; wfRun: WorkflowRunView; loop: null };

/**
 * Resolves a run id (or unique prefix), a workflow run id (or unique prefix), or a loop (name, id or
 * unique id prefix: its latest run). Unknown → NotFoundError; several matches → AmbiguousError.
 */
export function resolveLogsSubject(db: Db, ref: string): LogsSubject {
  const run = orNull(() => findRun(db, ref));
  if (run) return { kind: 'run', run, target: runTarget(db, run.id), loop: null };
  const wfRun = orNull(() => findWorkflowRun(db, ref));
  if (wfRun) return { kind: 'workflow', wfRun, loop: null };
  let loop: LoopView;
  try {
    loop = findLoop(db, ref, { includeRemoved: true });
  } catch (error) {
    if (!(error instanceof NotFoundError)) throw error;
    // Keep findLoop's "did you mean <loop>?" when it has one.
    const near = error.hint?.startsWith('did you mean') ? error.hint.replace(/ \(loops list shows all loops\)$/, '') : null;
    throw new NotFoundError(`no run, workflow run or loop ${shownRef(ref)}`, {
      hint: `${near ? `${near} ` : ''}loops runs lists recent runs, loops workflows runs the workflow runs, loops list the loops`,
    });
  }
  const latest = listRuns(db, { loopId: loop.id, limit: 1 })[0];
  if (!latest) {
    throw new NotFoundError(`loop ${loop.name} has no runs yet`, { hint: `loops run-now ${loop.name} runs it` });
  }
  return { kind: 'run', run: latest, target: runTarget(db, latest.id), loop };
}

/** What `find` returns, or null when it throws NotFoundError. */
export function orNull<T>(find: () => T): T | null {
  try {
    return find();
  } catch (error) {
    if (error instanceof NotFoundError) return null;
    throw error;
  }
}

/** The target a run was claimed with (what it runs: a command, an agent CLI, a workflow). */
export function runTarget(db: Db, runId: string): Target {
  const row = cached<[string], { target: string }>(db, 'SELECT target FROM loop_runs WHERE id = ?').get(runId);
  if (!row) throw new NotFoundError(`no run with id ${JSON.stringify(runId)}`, { hint: 'loops runs lists recent runs' });
  return JSON.parse(row.target) as Target;
}

/** A loop run's current status, or throws when the row is gone. */
export function runStatus(db: Db, runId: string): string {
  const row = cached<[string], { status: string }>(db, 'SELECT status FROM loop_runs WHERE id = ?').get(runId);
  if (!row) throw new LoopsError('internal', `run ${runId} disappeared from the loop_runs table`);
  return row.status;
}

/** The workflow run a workflow loop's run started (found by its idempotency key), or null before it started. */
export function workflowRunOfLoopRun(db: Db, run: RunView): WorkflowRunView | null {
  const key = `loop:${run.loopId}:${run.slot}:${run.attempt}`;
  const row = cached<[string], { id: string }>(db, 'SELECT id FROM workflow_runs WHERE idempotency_key = ?').get(key);
  return row ? findWorkflowRun(db, row.id) : null;
}

/** The files of one output stream of a run (or step attempt), as they are now. */
export interface OutputFiles {
  stream: OutputStream;
  /** `<dir>/<stream>.log`, whether or not it exists. */
  path: string;
  /** Bytes in the file now (0 when it does not exist). */
  size: number;
  exists: boolean;
  /** `<file>.1`: the last cap bytes before the latest rotation. */
  rotated: { path: string; size: number } | null;
  /** `<file>.head`: the beginning, kept at the first rotation. */
  head: { path: string; size: number } | null;
}

function sizeOf(path: string): number | null {
  try {
    return statSync(path).size;
  } catch {
    return null;
  }
}

export function outputFiles(dir: string, stream: OutputStream): OutputFiles {
  const path = join(dir, `${stream}.log`);
  const size = sizeOf(path);
  const rotated = sizeOf(`${path}.1`);
  const head = sizeOf(`${path}.head`);
  return {
    stream,
    path,
    size: size ?? 0,
    exists: size !== null,
    rotated: rotated === null ? null : { path: `${path}.1`, size: rotated },
    head: head === null ? null : { path: `${path}.head`, size: head },
  };
}

/** Bytes of the output still in the files (`.1` and the file; not the head). */
export function keptBytes(files: OutputFiles): number {
  return (files.rotated?.size ?? 0) + files.size;
}

/**
 * Bytes the process wrote that are in no file (between the head and `.1`, plus what a rotation
 * lost), when the total written is known (`totalBytes`, from the run's end); 0 when not rotated.
 */
export function droppedBytes(files: OutputFiles, totalBytes: number | null): number | null {
  if (files.rotated === null) return 0;
  if (totalBytes === null) return null;
  const dropped = totalBytes - keptBytes(files);
  return dropped > 0 ? dropped : null;
}

/** Something that can be read at a position (a file by path, or a descriptor held open). */
export interface ByteSource {
  /** Bytes to read: [0, size). */
  size: number;
  read(buf: Buffer, offset: number, length: number, position: number): number;
}

/** A file opened for reading, with its size now; `close()` when done. */
export function openSource(path: string): (ByteSource & { close(): void }) | null {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return null;
  }
  const size = statSync(path).size;
  return {
    size,
    read: (buf, offset, length, position) => readSync(fd, buf, offset, length, position),
    close: () => closeSync(fd),
  };
}

export function descriptorSource(fd: number, size: number): ByteSource {
  return { size, read: (buf, offset, length, position) => readSync(fd, buf, offset, length, position) };
}

/** A position in a sequence of sources: source `index`, byte `offset` in it. */
export interface SourcePosition {
  index: number;
  offset: number;
}

const CHUNK = 64 * 1024;

/**
 * Where the last `lines` lines of the concatenated sources begin (a final newline does not start
 * another line). Reads backwards in 64 KiB chunks: the cost is that of the lines asked for.
 */
export function tailStart(sources: readonly ByteSource[], lines: number): SourcePosition {
  if (lines <= 0) return sources.length ? { index: sources.length - 1, offset: sources[sources.length - 1]!.size } : { index: 0, offset: 0 };
  const buf = Buffer.allocUnsafe(CHUNK);
  let needed = lines;
  let last = true; // the very last byte, if a newline, ends the last line
  for (let i = sources.length - 1; i >= 0; i--) {
    const source = sources[i]!;
    let end = source.size;
    while (end > 0) {
      const start = Math.max(0, end - CHUNK);
      const n = readFully(source, buf, end - start, start);
      for (let p = n - 1; p >= 0; p--) {
        if (buf[p] !== 0x0a) {
          last = false;
          continue;
        }
        if (last) {
          last = false;
          continue;
        }
        needed--;
        if (needed === 0) return { index: i, offset: start + p + 1 };
      }
      end = start;
    }
  }
  return { index: 0, offset: 0 };
}

function readFully(source: ByteSource, buf: Buffer, length: number, position: number): number {
  let got = 0;
  while (got < length) {
    const n = source.read(buf, got, length - got, position + got);
    if (n <= 0) break;
    got += n;
  }
  return got;
}

/** Reads the sources from `from` to their ends, in chunks of at most 1 MiB (each a fresh Buffer). */
export function readSources(sources: readonly ByteSource[], from: SourcePosition, onChunk: (chunk: Buffer) => void): number {
  let total = 0;
  for (const chunk of sourceChunks(sources, from)) {
    total += chunk.length;
    onChunk(chunk);
  }
  return total;
}

/** `readSources` as an iterator: each chunk is read when asked for. */
export function* sourceChunks(sources: readonly ByteSource[], from: SourcePosition): Generator<Buffer, void, undefined> {
  for (let i = from.index; i < sources.length; i++) {
    const source = sources[i]!;
    let pos = i === from.index ? from.offset : 0;
    while (pos < source.size) {
      const buf = Buffer.allocUnsafe(Math.min(1 << 20, source.size - pos));
      const n = source.read(buf, 0, buf.length, pos);
      if (n <= 0) break;
      pos += n;
      yield n === buf.length ? buf : buf.subarray(0, n);
    }
  }
}
