/**
 * `daemon.log`, kept to a size: the daemon writes its log lines through `DaemonLog`, which rotates
 * the file when the next line would take it past the cap (10 MiB by default): `daemon.log.2` →
 * `daemon.log.3`, `daemon.log.1` → `daemon.log.2`, a copy of `daemon.log` → `daemon.log.1`, then
 * `daemon.log` is truncated to 0 (`DAEMON_LOG_GENERATIONS` old files are kept).
 *
 * Why copy-and-truncate, not rename: `loops daemon start` (and a LaunchAgent) hands the daemon the
 * file as its stdout and stderr, so a crash, a Node warning or an uncaught error is in the log too.
 * Those descriptors cannot be re-pointed from JavaScript; after a rename they would write to
 * `daemon.log.1`, then to a deleted file. Truncating keeps them on `daemon.log`: they were opened
 * O_APPEND, so the next write lands at the new end. The daemon's own lines are written
 * synchronously from its one thread, so none is written between the copy and the truncation and
 * none is lost; only bytes another process writes to the same descriptors in that instant (the
 * spawner helper's stderr, on a crash) could be.
 *
 * Rotation happens only when the daemon's stdout *is* `daemon.log` (same device and inode) and,
 * on Linux, was opened O_APPEND (a `>` redirect would leave a hole of zeros after the truncation):
 * in a terminal, under systemd (the journal) or redirected elsewhere, lines are written as they are.
 */
import { closeSync, copyFileSync, existsSync, fstatSync, ftruncateSync, openSync, readFileSync, readSync, renameSync, statSync, chmodSync } from 'node:fs';
import { UsageError } from '../../events/errors.js';

export const DEFAULT_DAEMON_LOG_MAX_BYTES = 10 * 1024 * 1024;
/** Old files kept: `daemon.log.1` (newest) … `daemon.log.3`. */
export const DAEMON_LOG_GENERATIONS = 3;
/** A smaller cap would rotate at every few lines. */
export const MIN_DAEMON_LOG_MAX_BYTES = 1024;

const UNITS: Record<string, number> = { '': 1, b: 1, k: 1024, kb: 1024, kib: 1024, m: 1024 ** 2, mb: 1024 ** 2, mib: 1024 ** 2, g: 1024 ** 3, gb: 1024 ** 3, gib: 1024 ** 3 };

/**
 * A size: bytes (`1048576`) or with a binary unit (`512K`, `10M`, `10MiB`, `1G`); `0` means never
 * rotate. At least 1 KiB otherwise.
 */
export function parseLogSize(input: string, flag: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(input);
  const unit = m ? UNITS[m[2]!.toLowerCase()] : undefined;
  const hint = 'e.g. 10M, 512K, 1G or a number of bytes; 0 never rotates';
  if (!m || unit === undefined) throw new UsageError(`${flag}: ${JSON.stringify(input)} is not a size`, { hint });
  const bytes = Math.round(Number(m[1]) * unit);
  if (bytes !== 0 && bytes < MIN_DAEMON_LOG_MAX_BYTES) {
    throw new UsageError(`${flag}: ${JSON.stringify(input)} is under the 1 KiB minimum`, { hint });
  }
  return bytes;
}

/** The cap: `--log-max-size`, else `LOOPS_DAEMON_LOG_MAX_BYTES`, else 10 MiB. */
export function daemonLogMaxBytes(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): number {
  if (flag !== undefined) return parseLogSize(flag, '--log-max-size');
  const fromEnv = env.LOOPS_DAEMON_LOG_MAX_BYTES;
  if (fromEnv !== undefined && fromEnv.trim() !== '') return parseLogSize(fromEnv, 'LOOPS_DAEMON_LOG_MAX_BYTES');
  return DEFAULT_DAEMON_LOG_MAX_BYTES;
}

/** Linux: whether descriptor `fd` of this process was opened O_APPEND; elsewhere (not knowable) true. */
function openedForAppend(fd: number): boolean {
  if (process.platform !== 'linux') return true;
  try {
    const flags = /^flags:\s*([0-7]+)/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))?.[1];
    return flags === undefined ? true : (parseInt(flags, 8) & 0o2000) !== 0;
  } catch {
    return true;
  }
}

export interface DaemonLogOptions {
  /** `daemon.log` in the data directory. */
  path: string;
  /** Rotate when a line would take the file past this many bytes; 0: never. */
  maxBytes: number;
  /**
   * Writes text to the daemon's stdout, synchronously, throwing when it cannot (a full disk):
   * the line is then held and written later (see `DaemonLog.line`).
   */
  write: (text: string) => void;
  /** The descriptor `write` writes to (default 1). */
  fd?: number;
  generations?: number;
}

/** At most this much of the log is held in memory while it cannot be written. */
const HELD_MAX_BYTES = 1024 * 1024;

export class DaemonLog {
  private readonly fd: number;
  private readonly generations: number;
  /** Set once: stdout is `daemon.log`, opened for appending. */
  private rotating: boolean | null = null;
  /** Why it does not rotate although stdout is daemon.log (said once, in the log). */
  private warned = false;
  rotations = 0;
  /** Lines that could not be written when they were logged (the disk full), oldest first. */
  private held: string[] = [];
  private heldBytes = 0;
  /** Held lines dropped past the cap, and the error that held them. */
  private dropped = 0;
  private heldBecause: string | null = null;

  constructor(private readonly options: DaemonLogOptions) {
    this.fd = options.fd ?? 1;
    this.generations = Math.max(1, options.generations ?? DAEMON_LOG_GENERATIONS);
  }

  /** Writes one line (a newline is added), rotating the file first when it would pass the cap. */
  line(text: string): void {
    const out = `${text}\n`;
    try {
      this.rotateIfNeeded(Buffer.byteLength(out));
    } catch (error) {
      // A log that cannot rotate must not stop the daemon: say so once, and go on writing.
      if (!this.warned) {
        this.warned = true;
        this.write(`${new Date().toISOString()} daemon.log: could not rotate it: ${(error as Error).message}; it keeps growing\n`);
      }
    }
    this.write(out);
  }

  /**
   * Writes `out`, after any lines held before it. A line that cannot be written (the disk full) is
   * held — at most HELD_MAX_BYTES, the oldest dropped and counted past that — and written, with a
   * line saying so, at the first write that succeeds: the log keeps its order and says what
   * happened while it could not be written, instead of the daemon dying of an unwritable stdout.
   */
  private write(out: string): void {
    if (this.held.length || this.dropped) {
      const header = `${new Date().toISOString()} daemon.log: the ${this.held.length} line(s) below could not be written when they were logged (${this.heldBecause ?? 'write failed'})${this.dropped ? `; ${this.dropped} older one(s) were dropped` : ''}\n`;
      try {
        this.options.write(header + this.held.join(''));
        this.held = [];
        this.heldBytes = 0;
        this.dropped = 0;
        this.heldBecause = null;
      } catch (error) {
        this.hold(out, error);
        return;
      }
    }
    try {
      this.options.write(out);
    } catch (error) {
      this.hold(out, error);
    }
  }

  private hold(out: string, error: unknown): void {
    this.heldBecause ??= (error as Error).message;
    this.held.push(out);
    this.heldBytes += out.length;
    while (this.heldBytes > HELD_MAX_BYTES && this.held.length > 1) {
      this.heldBytes -= this.held.shift()!.length;
      this.dropped += 1;
    }
  }

  /** True when this process's stdout is the log file (and rotation is on). */
  private enabled(): boolean {
    if (this.rotating !== null) return this.rotating;
    this.rotating = false;
    if (this.options.maxBytes <= 0) return false;
    try {
      const out = fstatSync(this.fd);
      const file = statSync(this.options.path);
      if (!out.isFile() || out.dev !== file.dev || out.ino !== file.ino) return false;
    } catch {
      return false;
    }
    if (!openedForAppend(this.fd)) {
      this.write(`${new Date().toISOString()} daemon.log: stdout was not opened for appending (>> rather than >), so it is not rotated\n`);
      return false;
    }
    this.rotating = true;
    return true;
  }

  /** Rotates when the file plus `incoming` bytes would pass the cap (and the file is not empty). */
  rotateIfNeeded(incoming = 0): boolean {
    if (!this.enabled()) return false;
    const size = fstatSync(this.fd).size;
    if (size === 0 || size + incoming <= this.options.maxBytes) return false;
    this.rotate();
    return true;
  }

  /**
   * Copy, truncate, shift the old generations, then rename the copy to `.1`. While the copy is
   * under its temporary name a rotation is under way (followers wait for it to end); once it is
   * `.1`, `.1` is exactly the old file and `daemon.log` starts again.
   */
  private rotate(): void {
    const { path } = this.options;
    const tmp = rotationTemp(path);
    copyFileSync(path, tmp);
    chmodSync(tmp, 0o600);
    ftruncateSync(this.fd, 0);
    for (let g = this.generations - 1; g >= 1; g--) {
      if (existsSync(`${path}.${g}`)) renameSync(`${path}.${g}`, `${path}.${g + 1}`);
    }
    renameSync(tmp, `${path}.1`);
    this.rotations += 1;
  }
}

/** The copy of the log while a rotation is under way. */
function rotationTemp(path: string): string {
  return `${path}.1.tmp`;
}

/** A rotation is under way (its copy exists, and is recent: a stale one from a crash is ignored). */
function rotating(path: string): boolean {
  try {
    return Date.now() - statSync(rotationTemp(path)).mtimeMs < 10_000;
  } catch {
    return false;
  }
}

/** An identity of a file that changes when a rotation replaces it. */
function identity(path: string): string | null {
  try {
    const st = statSync(path, { bigint: true });
    return `${st.dev}:${st.ino}`;
  } catch {
    return null;
  }
}

function readRange(path: string, from: number, to: number): Buffer {
  if (to <= from) return Buffer.alloc(0);
  const fd = openSync(path, 'r');
  try {
    const buf = Buffer.alloc(to - from);
    let got = 0;
    while (got < buf.length) {
      const n = readSync(fd, buf, got, buf.length - got, from + got);
      if (n <= 0) break;
      got += n;
    }
    return buf.subarray(0, got);
  } finally {
    closeSync(fd);
  }
}

function sizeOf(path: string): number | null {
  try {
    return statSync(path).size;
  } catch {
    return null;
  }
}

/**
 * The last `n` lines of the log: from `daemon.log`, and from `daemon.log.1` before it when the
 * current file (just rotated) holds fewer. Returns the bytes and the size of `daemon.log` read.
 */
export function daemonLogTail(path: string, n: number): { text: string; offset: number } {
  const current = existsSync(path) ? readFileSync(path) : Buffer.alloc(0);
  const lines = (buf: Buffer) => (buf.length ? buf.toString('utf8').replace(/\n$/, '').split('\n') : []);
  let out = lines(current);
  if (out.length < n && existsSync(`${path}.1`)) out = [...lines(readFileSync(`${path}.1`)), ...out];
  out = out.slice(-n);
  return { text: out.length ? `${out.join('\n')}\n` : '', offset: current.length };
}

/**
 * Follows `daemon.log` across rotations (`loops daemon logs -f`): at each `poll()` it prints what
 * was appended since the last one. A rotation — `daemon.log.1` replaced, or the file shorter than
 * what was read — is noticed and the end of the old file, which the rotation copied to `.1`, is
 * printed first (the bytes of `.1` after the offset read), then the new file from its start.
 * Lost only when two rotations happen between two polls (the daemon writes 2 × the cap meanwhile).
 */
export class DaemonLogFollower {
  private offset: number;
  private rotatedId: string | null;

  constructor(
    private readonly path: string,
    /** Bytes of `daemon.log` already printed. */
    offset: number,
  ) {
    this.offset = offset;
    this.rotatedId = identity(`${path}.1`);
  }

  poll(onChunk: (chunk: Buffer) => void): void {
    // Mid-rotation the file may be truncated before `.1` holds its copy: look again once it does
    // (the rename that ends the rotation is itself a change in the directory, so another poll
    // comes). The same when a rotation ran while we looked.
    if (rotating(this.path)) return;
    const id = identity(`${this.path}.1`);
    let size = sizeOf(this.path) ?? 0;
    if (rotating(this.path) || identity(`${this.path}.1`) !== id) return;
    if (id !== this.rotatedId) {
      // Rotated since the last poll: `.1` is the old file as it was when it was truncated.
      if (id !== null) {
        const old = sizeOf(`${this.path}.1`) ?? 0;
        if (old > this.offset) onChunk(readRange(`${this.path}.1`, this.offset, old));
      }
      this.rotatedId = id;
      this.offset = 0;
    } else if (size < this.offset) {
      // Truncated by someone else: start again from its beginning.
      this.offset = 0;
    }
    size = Math.max(size, sizeOf(this.path) ?? 0);
    if (size > this.offset) {
      const chunk = readRange(this.path, this.offset, size);
      this.offset += chunk.length;
      if (chunk.length) onChunk(chunk);
    }
  }
}
