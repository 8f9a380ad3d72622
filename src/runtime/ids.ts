/** Sortable, url-safe ids: a prefix, 10 chars of time (ms, Crockford base32) and 12 random chars. */
import { randomFillSync } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
const RANDOM_CHARS = 12;

// Random bytes drawn from the system's generator 3 KiB at a time: one call per 256 ids, not one
// (and a Buffer) per id. Each byte is used once; 256 is a multiple of 32, so `b % 32` is uniform.
const pool = Buffer.alloc(RANDOM_CHARS * 256);
let offset = pool.length;

export function newId(prefix: string, nowMs: number): string {
  let time = '';
  let t = nowMs;
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32]! + time;
    t = Math.floor(t / 32);
  }
  if (offset + RANDOM_CHARS > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  let rand = '';
  for (let i = 0; i < RANDOM_CHARS; i++) rand += ALPHABET[pool[offset + i]! % 32]!;
  offset += RANDOM_CHARS;
  return `${prefix}_${time}${rand}`;
}
