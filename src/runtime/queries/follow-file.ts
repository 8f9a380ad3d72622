/**
 * Following a file that its writer appends to and rotates by copy and truncate into `<file>.1`:
 * one cursor for a run's output files (`loops logs -f`, rotated by the runner:
 * src/runtime/execution/output.ts) and for daemon.log (`loops daemon logs -f`, rotated by the
 * daemon: src/runtime/daemon/log-file.ts).
 *
 * Both writers copy, then truncate the file in place (a descriptor held on it stays valid). They
 * differ in what `.1` is while and after they copy, which the cursor is told (`wholeRotations`):
 * - the runner rewrites `.1` in place with the last cap bytes, then truncates: a `.1` may be seen
 *   half written, and holds the end of the old file only;
 * - the daemon copies the whole file to `.1.tmp` (its mark of a rotation under way), truncates,
 *   and renames the copy to `.1`: a `.1` seen is the whole old file.
 */
import { closeSync, fstatSync, openSync, statSync } from 'node:fs';
import { descriptorSource, openSource, readSources, type ByteSource } from './run-files.js';

/** What a cursor keeps of the bytes it read last, to find its place in `.1` after a rotation. */
const RECENT_BYTES = 4096;
/** Older generations (`.2`, `.3`, …) a recovery looks through; it stops at the first missing. */
const MAX_GENERATIONS = 9;
/** A `.1.tmp` older than this is left over from a crash, not a rotation under way. */
const STALE_ROTATION_MS = 10_000;

export interface FileCursorOptions {
  /**
   * Bytes of the file the caller already gave (read by path): the cursor reads on from there once
   * the file exists. Without it, `take()` gives the caller the file as it is when first read.
   */
  from?: number;
  /**
   * The writer renames whole copies into place as `.1` (daemon.log): a `.1` that appears while
   * nothing was read from the file yet holds only unread bytes, and is read whole. (A run's `.1` is
   * written in place and may be half written then: it is not read before the file was.)
   */
  wholeRotations?: boolean;
}

/**
 * Follows one file: holds it open (a run's output file is replaced by its masked rewrite when the
 * process ends; the descriptor keeps the bytes) and reads what was appended at each `poll()`.
 *
 * Across a rotation — the file shrank, or `.1` changed and the bytes last read are no longer where
 * they were — it reads on from the file's start, after recovering what it had not read yet from
 * `.1`: the bytes there after the last 4 KiB it read. While a rotation is under way (`.1.tmp`
 * exists), or `.1` changes while it looks, it looks again at the next poll. Lost, and reported as
 * such: bytes the writer never copied (a run's output written between the runner's last read and
 * the truncation), and, for a run's output (which keeps no `.2`), everything between two rotations
 * that both happened between two polls (or when the last bytes read are not found, e.g. masked
 * since). daemon.log keeps `.2` and `.3`: up to three rotations between two polls lose nothing.
 * Bytes the runner dropped that the cursor had read while it copied (it read on past the end of
 * `.1`) are not lost: `.1` is placed by where the cursor stood before the rotation began.
 */
export class FileCursor {
  private fd: number | null = null;
  /** Bytes of the file read so far. */
  offset = 0;
  /** The last bytes read from the file as it is now: at most 4 KiB, ending at `offset`. */
  private recent: Buffer = Buffer.alloc(0);
  /**
   * `offset` and `recent` at the end of the last poll that saw no rotation under way (`.1` as seen
   * last, and still so once it had read): where it stood before the bytes a rotation copies, or drops.
   */
  private settled: { offset: number; recent: Buffer } = { offset: 0, recent: this.recent };
  private rotatedId: string | null;

  constructor(
    readonly path: string,
    private readonly options: FileCursorOptions = {},
  ) {
    this.rotatedId = rotatedIdentity(`${path}.1`);
    // Started from an offset: the bytes before it are remembered now, before a rotation moves them.
    if (options.from !== undefined) this.open();
  }

  /** Opens the file if it exists by now. */
  open(): boolean {
    if (this.fd !== null) return true;
    try {
      this.fd = openSync(this.path, 'r');
    } catch {
      return false;
    }
    const from = this.options.from ?? 0;
    if (from > 0) {
      this.offset = from;
      this.remember(readRange(this.fd, Math.max(0, from - RECENT_BYTES), from), true);
      this.settled = { offset: this.offset, recent: this.recent };
    }
    return true;
  }

  /** The file as it is now, for a first read by the caller; the cursor then stands at its end. */
  take(): ByteSource | null {
    if (this.fd === null) return null;
    const size = statFd(this.fd);
    this.offset = size;
    this.remember(readRange(this.fd, Math.max(0, size - RECENT_BYTES), size), true);
    this.settled = { offset: this.offset, recent: this.recent };
    return descriptorSource(this.fd, size);
  }

  /**
   * Reads what was appended since the last read (and, after a rotation, what `.1` holds that was
   * not read). Returns `lost` when a rotation happened and the bytes before it could not be
   * recovered.
   */
  poll(onChunk: (chunk: Buffer) => void): 'ok' | 'lost' {
    if (!this.open()) return 'ok';
    const fd = this.fd!;
    const rotatedPath = `${this.path}.1`;
    // A rotation under way (its copy not in place yet), or one that ran while we looked: the
    // next poll looks again.
    if (rotating(this.path)) return 'ok';
    const id = rotatedIdentity(rotatedPath);
    let size = statFd(fd);
    if (rotating(this.path) || rotatedIdentity(rotatedPath) !== id) return 'ok';
    let result: 'ok' | 'lost' = 'ok';
    const changed = id !== this.rotatedId && id !== null;
    const rotated = size < this.offset || (changed && (this.offset > 0 ? !this.stillThere(size) : this.options.wholeRotations === true));
    if (rotated) {
      // (A run's `.1` rewritten but the file not truncated yet: looked at again at the next poll.)
      const seen = this.rotatedId;
      this.rotatedId = id;
      if (!this.recover(onChunk, seen)) result = 'lost';
      this.offset = 0;
      this.recent = Buffer.alloc(0);
      this.settled = { offset: 0, recent: this.recent };
      size = statFd(fd);
    }
    if (size > this.offset) {
      this.offset += readSources([descriptorSource(fd, size)], { index: 0, offset: this.offset }, (chunk) => {
        this.remember(chunk, false);
        onChunk(chunk);
      });
    }
    // Where it stands now, unless a rotation got under way while it looked and read: a rotation
    // that starts later copies, or drops, only bytes after this.
    if ((rotated || !changed) && rotatedIdentity(rotatedPath) === id) this.settled = { offset: this.offset, recent: this.recent };
    return result;
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }

  /** The bytes last read are still at the end of what was read: the file was not truncated. */
  private stillThere(size: number): boolean {
    if (size < this.offset) return false;
    const now = readRange(this.fd!, this.offset - this.recent.length, this.offset);
    return now.equals(this.recent);
  }

  /**
   * Emits what `.1` holds after the bytes last read; false when they are not found there. A writer
   * that keeps older generations (daemon.log: `.2`, `.3`) may have rotated more than once since the
   * last poll: the bytes last read are then looked for in the older ones, and what follows them is
   * emitted, oldest first. With nothing read from the file (`wholeRotations` only), the generations
   * newer than the `.1` seen last (`seen`: it was rotated away since) are all unread.
   */
  private recover(onChunk: (chunk: Buffer) => void, seen: string | null): boolean {
    if (this.recent.length === 0) {
      if (!this.options.wholeRotations) return true;
      const unread: string[] = [];
      let found = seen === null;
      for (let generation = 1; generation <= MAX_GENERATIONS; generation++) {
        const path = `${this.path}.${generation}`;
        const id = rotatedIdentity(path);
        if (id === null) break;
        if (id === seen) {
          found = true;
          break;
        }
        unread.push(path);
      }
      for (const path of unread.reverse()) {
        const whole = readWhole(path);
        if (whole?.length) onChunk(whole);
      }
      return found;
    }
    const newer: Buffer[] = [];
    for (let generation = 1; generation <= MAX_GENERATIONS; generation++) {
      const rotated = readWhole(`${this.path}.${generation}`);
      if (rotated === null) break;
      const at = rotated.lastIndexOf(this.recent);
      if (at >= 0) {
        const rest = rotated.subarray(at + this.recent.length);
        if (rest.length) onChunk(Buffer.from(rest));
        for (const older of newer.reverse()) if (older.length) onChunk(older);
        return true;
      }
      if (generation === 1) {
        // Read past the rotation point already (bytes written after the runner's last read)? Then
        // `.1` ends inside what was read, and nothing is missing: its end is in `recent`, or, read
        // further past it than that (the runner dropped what came past its chase, or in its window,
        // and the cursor had read it while it copied), `.1` holds where the cursor stood before the
        // rotation and ends before `offset`. (The first place it is found there: the end furthest on.)
        const end = rotated.subarray(Math.max(0, rotated.length - 256));
        if (end.length > 0 && this.recent.indexOf(end) >= 0) return true;
        const before = this.settled;
        const at = before.recent.length > 0 ? rotated.indexOf(before.recent) : -1;
        if (at >= 0 && before.offset + (rotated.length - at - before.recent.length) <= this.offset) return true;
      }
      newer.push(rotated);
    }
    return false;
  }

  private remember(chunk: Buffer, replace: boolean): void {
    const joined = replace ? chunk : Buffer.concat([this.recent, chunk]);
    this.recent = Buffer.from(joined.subarray(Math.max(0, joined.length - RECENT_BYTES)));
  }
}

/** An identity of `<file>.1` that changes when a rotation rewrites or replaces it (and that a rename keeps). */
function rotatedIdentity(path: string): string | null {
  try {
    const st = statSync(path, { bigint: true });
    return `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}`;
  } catch {
    return null;
  }
}

/** A rotation is under way: its copy exists under its temporary name, and is recent (a stale one from a crash is ignored). */
function rotating(path: string): boolean {
  try {
    return Date.now() - statSync(`${path}.1.tmp`).mtimeMs < STALE_ROTATION_MS;
  } catch {
    return false;
  }
}

/** The whole of a file, or null when there is none. */
function readWhole(path: string): Buffer | null {
  const source = openSource(path);
  if (!source) return null;
  try {
    return readRange(null, 0, source.size, source);
  } finally {
    source.close();
  }
}

function statFd(fd: number): number {
  return fstatSync(fd).size;
}

/** Bytes [from, to) of a descriptor (or a source). */
function readRange(fd: number | null, from: number, to: number, source?: ByteSource): Buffer {
  const buf = Buffer.alloc(Math.max(0, to - from));
  const src = source ?? descriptorSource(fd!, to);
  let got = 0;
  while (got < buf.length) {
    const n = src.read(buf, got, buf.length - got, from + got);
    if (n <= 0) break;
    got += n;
  }
  return got === buf.length ? buf : buf.subarray(0, got);
}
