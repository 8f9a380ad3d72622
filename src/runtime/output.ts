/**
 * Output capture with bounded memory: `TailBuffer` keeps the last N bytes of a stream (bytes, not
 * characters), and `CappedFile` writes a stream to disk keeping at most about 2 × cap bytes on
 * disk by rotating `<file>` to `<file>.1`, so the end of the output is always kept.
 */
import { closeSync, mkdirSync, openSync, renameSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

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

export class CappedFile {
  /** Opened on the first write (a silent command creates no file), with its directory (0700). */
  private fd: number | null = null;
  private written = 0;

  constructor(
    readonly path: string,
    readonly capBytes: number,
  ) {}

  write(chunk: Buffer): void {
    if (this.capBytes <= 0) return;
    if (this.fd === null) {
      mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 });
      this.fd = openSync(this.path, 'w', 0o600);
    }
    if (this.written + chunk.length > this.capBytes && this.written > 0) {
      closeSync(this.fd);
      renameSync(this.path, `${this.path}.1`);
      this.fd = openSync(this.path, 'w', 0o600);
      this.written = 0;
    }
    writeSync(this.fd, chunk);
    this.written += chunk.length;
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}
