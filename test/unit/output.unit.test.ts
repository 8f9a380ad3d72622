import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TailBuffer } from '../../src/runtime/output.js';

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
