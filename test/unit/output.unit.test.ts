import { existsSync, readFileSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HEAD_BYTES, maskFiles, OutputFile, ROTATE_CHASE, TailBuffer } from '../../src/runtime/execution/output.js';
import { SecretMasker } from '../../src/runtime/execution/secrets.js';
import { tempDir } from '../helpers/tmp.js';

describe('TailBuffer', () => {
  it('keeps everything while under the cap', () => {
    const t = new TailBuffer(100);
    t.push(Buffer.from('hello '));
    t.push(Buffer.from('world'));
    expect(t.toString()).toBe('hello world');
    expect(t.total).toBe(11);
  });

  it('keeps the last N bytes, across chunk boundaries', () => {
    const t = new TailBuffer(5);
    for (const part of ['abc', 'defg', 'hi', 'jklmnop']) t.push(Buffer.from(part));
    expect(t.toString()).toBe('lmnop');
    expect(t.total).toBe(16);
    const u = new TailBuffer(5);
    u.push(Buffer.from('0123456789'));
    expect(u.toString()).toBe('56789');
    u.push(Buffer.from('ab'));
    expect(u.toString()).toBe('789ab');
  });

  it('counts bytes, not characters, and never starts mid-character', () => {
    const t = new TailBuffer(5);
    t.push(Buffer.from('aé€😀')); // 1 + 2 + 3 + 4 bytes
    // The last 5 bytes are the final byte of € and the 4 bytes of 😀: the partial € is dropped.
    expect(t.toString()).toBe('😀');
    const u = new TailBuffer(4);
    u.push(Buffer.from('ééé')); // 6 bytes; last 4 = é é
    expect(u.toString()).toBe('éé');
    const v = new TailBuffer(3);
    v.push(Buffer.from('ééé')); // last 3 bytes start with a continuation byte
    expect(v.toString()).toBe('é');
  });

  it('a multi-byte character split across chunks is reassembled', () => {
    const bytes = Buffer.from('x€y');
    const t = new TailBuffer(10);
    t.push(bytes.subarray(0, 2));
    t.push(bytes.subarray(2));
    expect(t.toString()).toBe('x€y');
  });

  it('a cap of 0 keeps nothing but still counts', () => {
    const t = new TailBuffer(0);
    t.push(Buffer.from('abc'));
    expect(t.toString()).toBe('');
    expect(t.total).toBe(3);
  });

  it('property: the tail is the longest suffix within the cap that starts on a character boundary', () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: 'grapheme', maxLength: 20 }), { maxLength: 20 }),
        fc.integer({ min: 1, max: 64 }),
        fc.integer({ min: 1, max: 7 }),
        (parts, cap, split) => {
          const all = Buffer.from(parts.join(''));
          const t = new TailBuffer(cap);
          // Feed in arbitrary byte-sized chunks, cutting characters in half.
          for (let i = 0; i < all.length; i += split) t.push(all.subarray(i, i + split));
          const tail = t.toString();
          const full = all.toString('utf8');
          expect(t.total).toBe(all.length);
          expect(full.endsWith(tail)).toBe(true);
          expect(Buffer.byteLength(tail)).toBeLessThanOrEqual(cap);
          // No replacement character from a cut-in-half sequence (unless the input had one).
          if (!full.includes('\uFFFD')) expect(tail.includes('\uFFFD')).toBe(false);
          // Longest: adding the previous whole character would exceed the cap.
          if (tail.length < full.length) {
            const before = [...full.slice(0, full.length - tail.length)].pop()!;
            expect(Buffer.byteLength(before + tail)).toBeGreaterThan(cap);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('OutputFile keeps the beginning past the cap (<file>.head)', () => {
  const write = (f: OutputFile, text: string) => writeSync(f.writeFd, text);
  /** `count` numbered lines of exactly `width` bytes each (newline included). */
  const lines = (from: number, count: number, width: number, tag = 'line') =>
    Array.from({ length: count }, (_, i) => `${tag}-${String(from + i).padStart(6, '0')}-`.padEnd(width - 1, '.') + '\n').join('');

  it('writes the first 64 KiB, cut back to the last newline, at the first rotation, 0600', () => {
    const path = join(tempDir(), 'stdout.log');
    const f = new OutputFile(path, 80_000, new TailBuffer(1024));
    const text = lines(0, 100, 1000); // 100 000 bytes, a newline every 1000
    write(f, text);
    f.drain(); // past the cap: rotated
    f.close();
    expect(existsSync(`${path}.1`)).toBe(true);
    const head = readFileSync(`${path}.head`, 'utf8');
    // 64 KiB = 65 536 bytes: the last newline inside them ends line 65.
    expect(HEAD_BYTES).toBe(65_536);
    expect(head).toBe(text.slice(0, 65_000));
    expect(statSync(`${path}.head`).mode & 0o777).toBe(0o600);
    // The rotated part holds the end, as before.
    expect(readFileSync(`${path}.1`, 'utf8')).toBe(text.slice(-80_000));
  });

  it('keeps the whole head range when it holds no newline', () => {
    const path = join(tempDir(), 'out.log');
    const f = new OutputFile(path, 100, new TailBuffer(16), null, 40);
    write(f, 'x'.repeat(150));
    f.close();
    expect(readFileSync(`${path}.head`, 'utf8')).toBe('x'.repeat(40));
  });

  it('is written once: later rotations leave it alone, and an existing head is kept', () => {
    const path = join(tempDir(), 'out.log');
    const chunks: string[] = [];
    const f = new OutputFile(path, 50, new TailBuffer(1000), (c) => chunks.push(c.toString()), 30);
    write(f, 'first line\nsecond line\nthird line is long\nfourth\n'); // 49 bytes: under the cap
    f.drain();
    expect(existsSync(`${path}.head`)).toBe(false);
    write(f, 'fifth\n'); // 55 > 50: the first rotation
    f.drain();
    expect(readFileSync(`${path}.head`, 'utf8')).toBe('first line\nsecond line\n');
    for (let i = 0; i < 5; i++) {
      write(f, `later ${i} `.repeat(8) + '\n'); // > cap each time: a rotation per drain
      f.drain();
      expect(readFileSync(`${path}.1`, 'utf8')).toContain(`later ${i}`);
    }
    f.close();
    expect(readFileSync(`${path}.head`, 'utf8')).toBe('first line\nsecond line\n');
    expect(chunks.join('')).toContain('later 4');

    // A second OutputFile on the same file (a head already there) does not replace it.
    const g = new OutputFile(path, 10, new TailBuffer(100), null, 30);
    write(g, 'another beginning\nmore\n');
    g.close();
    expect(readFileSync(`${path}.1`, 'utf8')).toBe('ning\nmore\n');
    expect(readFileSync(`${path}.head`, 'utf8')).toBe('first line\nsecond line\n');
  });

  it('a rotation follows a writer faster than its copy only so far: .1 stays under cap × (1 + ROTATE_CHASE), the rest is counted', () => {
    const path = join(tempDir(), 'out.log');
    const cap = 64 * 1024;
    let f: OutputFile | null = null;
    let appended = 0;
    // The writer: every chunk the runner reads during the chase, it has already written 4 KiB more
    // (faster than the copy — without a bound the chase never ends).
    f = new OutputFile(path, cap, new TailBuffer(1024), () => {
      if (appended < 50 * cap) {
        writeSync(f!.writeFd, 'z'.repeat(4096));
        appended += 4096;
      }
    });
    writeSync(f.writeFd, 'a'.repeat(cap + 10));
    f.drain();
    expect(statSync(`${path}.1`).size).toBeLessThanOrEqual(cap * (1 + ROTATE_CHASE));
    expect(statSync(`${path}.1`).size).toBeGreaterThanOrEqual(cap);
    const written = cap + 10 + appended;
    f.close();
    // Every byte written is counted, the ones lost with the truncate too.
    expect(f.total).toBeGreaterThanOrEqual(written);
    expect(statSync(`${path}.1`).size + statSync(path).size).toBeLessThanOrEqual(cap * (2 + ROTATE_CHASE));
  });

  it('is not written when the file never rotated (under the cap, or no cap)', () => {
    const dir = tempDir();
    const small = new OutputFile(join(dir, 'small.log'), 1000, new TailBuffer(100));
    write(small, 'a little output\n');
    small.close();
    const uncapped = new OutputFile(join(dir, 'uncapped.log'), 0, new TailBuffer(100));
    write(uncapped, 'y'.repeat(200_000));
    uncapped.close();
    expect(readFileSync(join(dir, 'small.log'), 'utf8')).toBe('a little output\n');
    expect(statSync(join(dir, 'uncapped.log')).size).toBe(200_000);
    for (const f of ['small.log', 'uncapped.log']) {
      expect(existsSync(join(dir, `${f}.head`))).toBe(false);
      expect(existsSync(join(dir, `${f}.1`))).toBe(false);
    }
  });

  it('maskFiles masks the head like the other parts', () => {
    const path = join(tempDir(), 'out.log');
    const secret = 'hunter2-s3cr3t-value';
    const f = new OutputFile(path, 200, new TailBuffer(100), null, 64);
    write(f, `token=${secret}\n`);
    write(f, `${'.'.repeat(199)}\n`);
    write(f, `again ${secret}\n`);
    f.close();
    const parts = [`${path}.head`, `${path}.1`, path];
    expect(readFileSync(`${path}.head`, 'utf8')).toContain(secret);
    expect(parts.map((p) => readFileSync(p, 'utf8')).join('')).toContain(`again ${secret}`);
    maskFiles(path, new SecretMasker([secret]));
    for (const p of parts) expect(readFileSync(p, 'utf8')).not.toContain(secret);
    expect(readFileSync(`${path}.head`, 'utf8')).toMatch(/^token=\S+\n$/);
    expect(statSync(`${path}.head`).mode & 0o777).toBe(0o600);
  });

  it('maskFiles still works on a file with neither head nor rotated part', () => {
    const path = join(tempDir(), 'out.log');
    writeFileSync(path, 'pw=hunter2-s3cr3t-value\n', { mode: 0o600 });
    maskFiles(path, new SecretMasker(['hunter2-s3cr3t-value']));
    expect(readFileSync(path, 'utf8')).not.toContain('hunter2');
    expect(existsSync(`${path}.head`)).toBe(false);
  });
});
