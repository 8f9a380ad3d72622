/**
 * Output capture with bounded memory: `TailBuffer` keeps the last N bytes of a stream (bytes, not
 * characters); `OutputFile` is a run's output file: the process writes its output straight into a
 * file it holds open (so it never depends on the runner being alive to read a pipe), and the
 * runner follows that file for the tail, live output and the size cap.
 */
import {
  closeSync,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  readSync,
  renameSync,
  statSync,
  truncateSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { dirname } from 'node:path';
import { StreamMasker, type SecretMasker } from './secrets.js';

/** How much of the beginning of a run's output file is kept past the cap (`<file>.head`). */
export const HEAD_BYTES = 64 * 1024;

/** How far past the cap a rotation follows a process still writing into `<file>.1`, as a share
 *  of the cap: `.1` holds at most cap × (1 + this). */
export const ROTATE_CHASE = 1 / 16;

/** How many times one read tries a rotation that a process outruns (writes more than the chase
 *  takes while `.1` is copied) before it truncates all the same (see `OutputFile.drain`). */
export const ROTATE_PASSES = 3;

export class TailBuffer {
  private chunks: Buffer[] = [];
  private held = 0;
  /** Total bytes ever pushed. */
  total = 0;

  constructor(readonly capBytes: number) {}

  push(chunk: Buffer): void {
    this.total += chunk.length;
    if (this.capBytes <= 0) return;
    if (chunk.length >= this.capBytes) {
      this.chunks = [chunk.subarray(chunk.length - this.capBytes)];
      this.held = this.capBytes;
      return;
    }
    this.chunks.push(chunk);
    this.held += chunk.length;
    while (this.held - this.chunks[0]!.length >= this.capBytes) {
      this.held -= this.chunks.shift()!.length;
    }
  }

  /** The tail as UTF-8, starting at a character boundary. */
  toString(): string {
    let buf = Buffer.concat(this.chunks);
    if (buf.length > this.capBytes) buf = buf.subarray(buf.length - this.capBytes);
    let start = 0;
    // Skip UTF-8 continuation bytes (10xxxxxx) cut in half by the byte cap.
    if (this.total > buf.length) {
      while (start < buf.length && start < 4 && (buf[start]! & 0xc0) === 0x80) start++;
    }
    return buf.subarray(start).toString('utf8');
  }
}


/**
 * A run's output file that the process itself writes to (its stdout or stderr is this file,
 * opened `O_APPEND`), followed by the runner. Because no pipe connects the process to the runner,
 * a runner that dies (`kill -9`, a daemon restart) does not kill the process with SIGPIPE on its
 * next write, and the output goes on into the file for whoever adopts the run.
 *
 * The runner reads what was appended by polling the file's size (see `follow`) and once more when
 * the process ends. It keeps
 * the tail in memory and, past the cap, rotates like logrotate's `copytruncate`: the last `cap`
 * bytes are copied to `<file>.1` and the file is truncated, and the process goes on appending at
 * its start. Bytes written between the rotation's last size check and the truncation
 * (microseconds) are lost from the files; bytes it read are never truncated before the newest of
 * them are kept (see `rotate`), so the end, which is what a failed run's reader needs, is kept
 * however late a starved runner comes to the cap. The cap is checked on every
 * read, so a file can briefly exceed it by what the process writes between two reads; once the
 * run has ended the two files hold at most cap × (2 + `ROTATE_CHASE`). When nothing is following (no
 * live output), a burst larger than the tail is skipped rather than read, so following costs
 * at most the tail's size per read however much the process writes.
 *
 * The beginning survives the cap: just before the first rotation, the file's first `headBytes`
 * (cut back to the last newline in that range, when there is one) are copied to `<file>.head`,
 * once — later rotations leave it alone. It holds what a process says first (an agent CLI's
 * session id and model, what a command was starting to do).
 */
export class OutputFile {
  /** The descriptor to hand to the child (`O_APPEND`): the runner's read descriptor, which it
   *  keeps until `close()`. -1 when opened without a writer (another process opens the file to write). */
  readonly writeFd: number;
  private readFd: number;
  private offset = 0;
  private rotatedBytes = 0;
  private poll: NodeJS.Timeout | null = null;
  private writerOpen = true;
  private closed = false;

  constructor(
    readonly path: string,
    readonly capBytes: number,
    readonly tail: TailBuffer,
    private readonly onChunk: ((chunk: Buffer) => void) | null = null,
    readonly headBytes = HEAD_BYTES,
    /** `writer: false`: no descriptor for a child (the spawner helper opens the file itself);
     *  `dirReady`: the directory exists (saves the runner a mkdir per file). */
    options: { writer?: boolean; dirReady?: boolean } = {},
  ) {
    if (!options.dirReady) mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    if (options.writer === false) {
      // One open that creates the file as well (reads are positional, so O_APPEND does not matter).
      this.writeFd = -1;
      this.writerOpen = false;
      this.readFd = openSync(path, 'a+', 0o600);
    } else {
      // One descriptor for both: the child appends through it (O_APPEND), the runner reads at its
      // own positions (pread), so neither moves the other — two opens and two closes fewer per file.
      this.readFd = openSync(path, 'a+', 0o600);
      this.writeFd = this.readFd;
    }
  }

  /**
   * Starts following: polls the file's size (one fstat) every 100 ms while someone watches the
   * output live, else every second, and sooner after a large burst so the cap holds for a process
   * that writes fast. (Not `fs.watch`: inotify on Node 20's libuv aborts the process when a watched
   * file is closed under it — `uv__inotify_read: Assertion size > 0`.)
   */
  follow(): void {
    const tick = () => {
      this.poll = null;
      if (this.closed) return;
      const before = this.total;
      this.drain();
      const burst = this.total - before;
      const next = burst > this.capBytes / 8 ? 20 : this.onChunk ? 100 : 1000;
      this.poll = setTimeout(tick, next);
      this.poll.unref();
    };
    this.poll = setTimeout(tick, this.onChunk ? 100 : 1000);
    this.poll.unref();
  }

  /** Closes the runner's copy of the write descriptor (the child keeps its own). Once only: a
   *  descriptor number closed twice may by then belong to another file. */
  releaseWriter(): void {
    if (!this.writerOpen) return;
    this.writerOpen = false;
    // The runner's copy is its read descriptor too (see the constructor): closed with it.
    if (this.writeFd !== this.readFd) closeSync(this.writeFd);
  }

  /** Bytes the process wrote so far (including rotated ones). */
  get total(): number {
    return this.rotatedBytes + this.offset;
  }

  /** Reads everything appended since the last read. */
  drain(): void {
    if (this.closed) return;
    // A rotation the process outran (see `rotate`) leaves the file as it is: what it wrote is read
    // on here, and the rotation is done again from the new end (at most `ROTATE_PASSES` in all).
    for (let pass = 1; ; pass++) {
      this.readAppended();
      if (!(this.capBytes > 0 && this.offset > this.capBytes)) return;
      if (this.rotate(pass >= ROTATE_PASSES)) return;
    }
  }

  private readAppended(): void {
    let size = fstatSync(this.readFd).size;
    if (size < this.offset) this.offset = size; // truncated by someone else
    if (size > this.offset && this.onChunk === null && size - this.offset > this.tail.capBytes) {
      // Nobody watches live: only the tail of this burst matters.
      const skip = size - this.offset - this.tail.capBytes;
      this.tail.total += skip;
      this.offset += skip;
    }
    const buf = Buffer.allocUnsafe(Math.min(1 << 20, Math.max(0, size - this.offset)));
    while (size > this.offset) {
      const n = readSync(this.readFd, buf, 0, Math.min(buf.length, size - this.offset), this.offset);
      if (n <= 0) break;
      const chunk = Buffer.from(buf.subarray(0, n));
      this.offset += n;
      this.tail.push(chunk);
      this.onChunk?.(chunk);
      // Looks again for more only while under the cap: past it the rotation comes first, or a
      // process writing faster than this loop reads would keep it here and the file growing.
      if (this.offset >= size && !(this.capBytes > 0 && this.offset > this.capBytes)) size = fstatSync(this.readFd).size;
    }
  }

  /**
   * Keeps the last `cap` bytes read so far (and what arrives while they are copied) in `<file>.1`
   * and empties the file. Returns false, the file left as it is, when the process outran the chase
   * and `last` is not set (see below).
   */
  private rotate(last: boolean): boolean {
    if (this.rotatedBytes === 0) this.keepHead();
    const from = Math.max(0, this.offset - this.capBytes);
    const end = this.offset + Math.max(1, Math.floor(this.capBytes * ROTATE_CHASE));
    const out = openSync(`${this.path}.1`, 'w', 0o600);
    try {
      const buf = Buffer.allocUnsafe(Math.min(1 << 20, this.offset - from));
      for (let pos = from; pos < this.offset; ) {
        const n = readSync(this.readFd, buf, 0, Math.min(buf.length, this.offset - pos), pos);
        if (n <= 0) break;
        writeSync(out, buf, 0, n);
        pos += n;
      }
      // What the process wrote during the copy is read now — it is output like any other — and
      // kept in `.1` too, until the file stops growing: only bytes written between that last size
      // check and the truncate below are lost (copytruncate's window), not a whole copy's worth.
      // The chase is bounded (`ROTATE_CHASE` of the cap): a process that writes faster than this
      // loop copies would otherwise keep it here and `.1` growing past the cap (seen under load:
      // 48 MB in the two files of a 16 MiB cap).
      for (let size = fstatSync(this.readFd).size; size > this.offset && this.offset < end; size = fstatSync(this.readFd).size) {
        const n = readSync(this.readFd, buf, 0, Math.min(buf.length, size - this.offset, end - this.offset), this.offset);
        if (n <= 0) break;
        const chunk = Buffer.from(buf.subarray(0, n));
        writeSync(out, chunk);
        this.offset += n;
        this.tail.push(chunk);
        this.onChunk?.(chunk);
      }
    } finally {
      closeSync(out);
    }
    const size = fstatSync(this.readFd).size;
    // The chase stopped at its bound with bytes still unread: they are the NEWEST the process wrote
    // — its last lines when it ended during the copy, as it does when the runner, starved of CPU,
    // meets the cap late — and a truncate now would take the end of the output from the file, from
    // `.1` and from the tail at once. The invariant restored: a truncate takes no byte newer than
    // the last one kept (every byte the file held at this last size check is in `.1` and the tail),
    // so the newest output is always kept, but for the copytruncate window after this check. So
    // the file is left as it is instead: `drain` reads on (the tail gets the end) and the next
    // pass rewrites `.1` with the last cap bytes up to the new end. Only a process that outruns
    // `ROTATE_PASSES` passes in a row — it writes faster than the runner copies, so it is most
    // likely still writing — has the bytes past the last chase dropped (counted below): that bounds
    // the file's growth and the work of one read.
    if (size > this.offset && this.offset >= end && !last) return false;
    // Bytes the chase left behind still count in the run's output size (and the tail's total).
    const lost = Math.max(0, size - this.offset);
    truncateSync(this.path, 0);
    this.tail.total += lost;
    this.rotatedBytes += this.offset + lost;
    this.offset = 0;
    return true;
  }

  /**
   * Before the first rotation: the file's first `headBytes`, cut back to the last newline in them
   * (a whole line or nothing is cut), into `<file>.head`. Created exclusively: a head already there
   * (an earlier runner's, for the same file) is the real beginning and is kept.
   */
  private keepHead(): void {
    if (this.headBytes <= 0) return;
    const buf = Buffer.allocUnsafe(Math.min(this.headBytes, this.offset));
    let got = 0;
    while (got < buf.length) {
      const n = readSync(this.readFd, buf, got, buf.length - got, got);
      if (n <= 0) break;
      got += n;
    }
    if (got === 0) return;
    const newline = buf.lastIndexOf(0x0a, got - 1);
    const keep = newline >= 0 ? newline + 1 : got;
    let out: number;
    try {
      out = openSync(`${this.path}.head`, 'wx', 0o600);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') return;
      throw error;
    }
    try {
      writeSync(out, buf, 0, keep);
    } finally {
      closeSync(out);
    }
  }

  /** Final read, then stops following. An empty file that never rotated is removed. */
  close(): void {
    if (this.closed) return;
    this.drain();
    this.closed = true;
    if (this.poll) clearTimeout(this.poll);
    this.releaseWriter();
    closeSync(this.readFd);
    if (this.rotatedBytes === 0 && this.offset === 0) {
      try {
        if (statSync(this.path).size === 0) unlinkSync(this.path);
      } catch {
        // gone already
      }
    }
  }
}

/** The last `bytes` of a run's output file (and its rotated predecessor), and the total size. */
export function tailOfOutput(file: string, bytes = 64 * 1024): { text: string; total: number } {
  const tail = new TailBuffer(bytes);
  let total = 0;
  for (const part of [`${file}.1`, file]) {
    if (!existsSync(part)) continue;
    const size = statSync(part).size;
    total += size;
    const start = Math.max(0, size - bytes);
    const buf = Buffer.alloc(size - start);
    const fd = openSync(part, 'r');
    try {
      readSync(fd, buf, 0, buf.length, start);
    } finally {
      closeSync(fd);
    }
    tail.total += start; // bytes before the part we read still count (a cut character is skipped)
    tail.push(buf);
  }
  return { text: tail.toString(), total };
}

/**
 * Rewrites a run's output file (and its rotated part and kept head) with every secret masked,
 * through a streaming masker (a secret split across two reads is still masked), then renames it
 * into place.
 */
export function maskFiles(file: string, masker: SecretMasker): void {
  for (const part of [`${file}.head`, `${file}.1`, file]) {
    if (!existsSync(part)) continue;
    const tmp = `${part}.masking`;
    const input = openSync(part, 'r');
    const output = openSync(tmp, 'w', 0o600);
    try {
      const stream = new StreamMasker(masker);
      const buf = Buffer.allocUnsafe(1 << 20);
      for (let pos = 0; ; ) {
        const n = readSync(input, buf, 0, buf.length, pos);
        if (n <= 0) break;
        pos += n;
        const out = stream.push(Buffer.from(buf.subarray(0, n)));
        if (out.length) writeSync(output, out);
      }
      const rest = stream.flush();
      if (rest.length) writeSync(output, rest);
    } finally {
      closeSync(input);
      closeSync(output);
    }
    renameSync(tmp, part);
  }
}
