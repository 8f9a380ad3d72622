/**
 * Masking of secret values in output, run files and event payloads. Pure: no I/O, no clock.
 *
 * A `SecretMasker` is built once from the secret values of a run (`secretValues(env, names)`); it
 * expands each value into the forms it is likely to appear in (`secretForms`) and compiles them all
 * into one Aho-Corasick automaton: one pass over the input with a constant amount of work per
 * character however many secrets and forms there are (50 MB in a few hundred milliseconds).
 *
 * Semantics, the same for strings (`mask`), buffers (`maskBuffer`) and streams (`StreamMasker`):
 * every occurrence of every form is found, including occurrences that overlap or nest; the bytes
 * they cover are grouped into runs of occurrences that overlap one another, and each run is
 * replaced by one mask (`***`). So a secret that contains another, or two secrets that overlap,
 * are masked whole rather than leaving the part of one that sticks out of the other; two secrets
 * side by side (touching, not overlapping) give two masks.
 *
 * Buffers are scanned as bytes (each form as its UTF-8 bytes), so the bytes around a match are
 * never touched: a multi-byte character next to a secret stays intact, and invalid UTF-8 passes
 * through unchanged.
 *
 * Over 500 lines on purpose: one algorithm — the forms a secret takes, the automaton that finds
 * them, and the string, buffer and stream faces over its one scan — read together.
 */

import { isSecretName, MIN_SECRET_LENGTH, NOT_SECRET, secretByConvention } from '../../events/secret-names.js';

export { isSecretName, MIN_SECRET_LENGTH, secretByConvention };

/** The default replacement for a masked secret. */
export const DEFAULT_MASK = '***';

/**
 * The forms of a secret value that are masked:
 * - the raw value;
 * - its JSON-string-escaped form (as `JSON.stringify` writes it, without the quotes), the same with
 *   non-ASCII characters as `\uXXXX` (as Python's `json.dumps` writes it), and escaped twice (a
 *   JSON document inside a JSON string, as agent CLIs print tool results);
 * - its percent-encoded form (of the UTF-8 bytes), as `encodeURIComponent`, RFC 3986, Python's
 *   `quote`, `URLSearchParams` and PHP's `urlencode` write it (they disagree on `!~*'()/`), with
 *   `%20` or `+` for a space, with upper- or lower-case hex digits;
 * - its base64 (of the UTF-8 bytes), standard and url-safe alphabets, with and without padding; and,
 *   for each of the three alignments a value can have inside a longer base64 string (preceded by 0,
 *   1 or 2 bytes modulo 3, e.g. `user:secret` in a Basic auth header), the characters of that
 *   string that depend only on the value's bytes, so a secret embedded in longer base64 is caught.
 *
 * Values shorter than 4 characters (`MIN_SECRET_LENGTH`, counted in code points) are not masked at
 * all — too many false positives — and neither is any form shorter than that.
 * Not caught: base64 wrapped over several lines (`base64` without `-w0` wraps at 76 characters), other
 * encodings (hex, gzip, …), and any transformation of the value (a prefix of it, a different case).
 */
export function secretForms(value: string): string[] {
  if ([...value].length < MIN_SECRET_LENGTH) return [];
  const forms = new Set<string>([value]);

  const json = JSON.stringify(value).slice(1, -1);
  forms.add(json);
  forms.add(json.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`));
  forms.add(JSON.stringify(json).slice(1, -1));

  for (const form of percentForms(value)) forms.add(form);

  const bytes = Buffer.from(value, 'utf8');
  const padded = bytes.toString('base64');
  const unpadded = padded.replace(/=+$/, '');
  const base64: string[] = [padded, unpadded];
  for (let offset = 0; offset < 3; offset++) base64.push(embeddedBase64(bytes, offset));
  for (const b of base64) {
    forms.add(b);
    forms.add(b.replace(/\+/g, '-').replace(/\//g, '_'));
  }

  return [...forms].filter((f) => [...f].length >= MIN_SECRET_LENGTH).sort((a, b) => b.length - a.length);
}

/**
 * Characters that percent-encoders leave as they are besides [A-Za-z0-9], as they disagree on them:
 * `encodeURIComponent`; RFC 3986 unreserved (Go, curl); Python's `quote` (keeps `/`); WHATWG
 * `application/x-www-form-urlencoded` (`URLSearchParams`); PHP's `urlencode`.
 */
const PERCENT_KEEP = ["-_.!~*'()", '-_.~', '-_.~/', '-_.*', '-_.'];

/** The percent-encoded forms of `value` (UTF-8), for each encoder above, with `%20` or `+` for a
 *  space and upper- or lower-case hex digits. */
function percentForms(value: string): string[] {
  if (/\p{Cs}/u.test(value)) return []; // a lone surrogate has no UTF-8 form
  const bytes = Buffer.from(value, 'utf8');
  const forms = new Set<string>();
  for (const keep of PERCENT_KEEP) {
    for (const plus of [false, true]) {
      for (const lower of [false, true]) {
        let out = '';
        for (const b of bytes) {
          const c = String.fromCharCode(b);
          if (/[A-Za-z0-9]/.test(c) || (b < 0x80 && keep.includes(c))) out += c;
          else if (plus && c === ' ') out += '+';
          else {
            const hex = b.toString(16).padStart(2, '0');
            out += `%${lower ? hex : hex.toUpperCase()}`;
          }
        }
        forms.add(out);
      }
    }
  }
  return [...forms];
}

/**
 * The base64 characters that depend only on `bytes` when they are preceded by `offset` (0–2) other
 * bytes in their 3-byte group and followed by unknown bytes: each group of 3 bytes is 4 characters
 * of 6 bits; a character that mixes bits of the value with bits of its neighbours is dropped.
 */
function embeddedBase64(bytes: Buffer, offset: number): string {
  const shifted = Buffer.concat([Buffer.alloc(offset), bytes]);
  const encoded = shifted.toString('base64').replace(/=+$/, '');
  // Leading: with offset 1 the value's bits start at bit 8, so characters 0 and 1 (bits 0–11) hold
  // bits of the byte before it; with offset 2 at bit 16, so characters 0–2 (bits 0–17) do.
  const head = offset === 0 ? 0 : offset + 1;
  // Trailing: a last group of 1 or 2 bytes ends in a character mixing its bits with the next byte's.
  const tail = shifted.length % 3 === 0 ? 0 : 1;
  return encoded.slice(head, encoded.length - tail);
}

/** Dense transition rows are kept for trie nodes up to this depth… */
const DENSE_DEPTH = 8;
/** …within this many table entries (4 bytes each). Deeper nodes follow sparse links. */
const DENSE_ENTRIES = 1 << 20;

/**
 * An Aho-Corasick automaton over a set of words (UTF-16 code units, or bytes): one pass over the
 * input, a constant amount of work per unit whatever the number of words, reporting at each
 * position the longest word that ends there. Input units are first mapped to an alphabet of the
 * units that occur in the words (0 for any other); the nodes near the root, where a scan spends
 * nearly all its time, have a dense row of transitions, the deeper ones (mostly chains, one child
 * each) a child link and their failure link. Memory is linear in the words' total length.
 */
class Automaton {
  private readonly cls: Uint16Array;
  private readonly alphabet: number;
  /** Node → offset of its dense row in `delta`, or -1. */
  private readonly row: Int32Array;
  private readonly delta: Int32Array;
  private readonly fail: Int32Array;
  /** Node → length of the longest word ending there (0: none). */
  private readonly out: Int32Array;
  /** Node → (first) child's letter and node, or -1. */
  private readonly kidCls: Int32Array;
  private readonly kidNode: Int32Array;
  /** Nodes with more than one child → all their children. */
  private readonly more = new Map<number, Map<number, number>>();

  constructor(words: readonly string[], units: number) {
    const cls = new Uint16Array(units);
    let alphabet = 1;
    for (const w of words) {
      for (let i = 0; i < w.length; i++) {
        const u = w.charCodeAt(i);
        if (cls[u] === 0) cls[u] = alphabet++;
      }
    }
    this.cls = cls;
    this.alphabet = alphabet;

    // The trie.
    const kidCls: number[] = [-1];
    const kidNode: number[] = [-1];
    const depth: number[] = [0];
    const term: number[] = [0];
    for (const w of words) {
      let n = 0;
      for (let i = 0; i < w.length; i++) {
        const c = cls[w.charCodeAt(i)]!;
        let t = this.childOf(kidCls, kidNode, n, c);
        if (t < 0) {
          t = kidCls.length;
          kidCls.push(-1);
          kidNode.push(-1);
          depth.push(depth[n]! + 1);
          term.push(0);
          if (kidCls[n] === -1) {
            kidCls[n] = c;
            kidNode[n] = t;
          } else {
            let m = this.more.get(n);
            if (m === undefined) {
              m = new Map([[kidCls[n]!, kidNode[n]!]]);
              this.more.set(n, m);
            }
            m.set(c, t);
          }
        }
        n = t;
      }
      term[n] = 1;
    }
    const nodes = kidCls.length;
    this.kidCls = Int32Array.from(kidCls);
    this.kidNode = Int32Array.from(kidNode);
    this.fail = new Int32Array(nodes);
    this.out = new Int32Array(nodes);
    this.row = new Int32Array(nodes).fill(-1);
    let shallow = 0;
    for (const d of depth) if (d <= DENSE_DEPTH) shallow++;
    const denseRows = Math.max(1, Math.min(shallow, Math.floor(DENSE_ENTRIES / alphabet)));
    this.delta = new Int32Array(denseRows * alphabet);

    // Failure links, outputs and dense rows, breadth first: a node's failure link is shallower,
    // so it is done before the node; a dense node's failure link is dense too (dense nodes are
    // the first ones in this order, up to a depth).
    const queue = new Int32Array(nodes);
    let tail = 1;
    let rows = 0;
    for (let head = 0; head < tail; head++) {
      const n = queue[head]!;
      if (n !== 0) this.out[n] = term[n] === 1 ? depth[n]! : this.out[this.fail[n]!]!;
      const children = this.childrenOf(n);
      for (const [c, t] of children) {
        this.fail[t] = n === 0 ? 0 : this.step(this.fail[n]!, c);
        queue[tail++] = t;
      }
      if (rows < denseRows && depth[n]! <= DENSE_DEPTH) {
        const r = rows++ * alphabet;
        this.row[n] = r;
        const failRow = n === 0 ? -1 : this.row[this.fail[n]!]!;
        for (let c = 0; c < alphabet; c++) this.delta[r + c] = failRow < 0 ? 0 : this.delta[failRow + c]!;
        for (const [c, t] of children) this.delta[r + c] = t;
      }
    }
  }

  private childOf(kidCls: ArrayLike<number>, kidNode: ArrayLike<number>, n: number, c: number): number {
    if (kidCls[n] === c) return kidNode[n]!;
    return this.more.get(n)?.get(c) ?? -1;
  }

  private childrenOf(n: number): Iterable<[number, number]> {
    const m = this.more.get(n);
    if (m !== undefined) return m;
    return this.kidCls[n]! >= 0 ? [[this.kidCls[n]!, this.kidNode[n]!]] : [];
  }

  /** The transition from a node without a dense row (or any node). */
  private step(node: number, c: number): number {
    let n = node;
    for (;;) {
      const r = this.row[n]!;
      if (r >= 0) return this.delta[r + c]!;
      const t = this.childOf(this.kidCls, this.kidNode, n, c);
      if (t >= 0) return t;
      n = this.fail[n]!;
    }
  }

  /** Runs over `s` from `node`; `found(end, length)` for the longest word ending before `end`. */
  runText(s: string, node: number, found: (end: number, length: number) => void): number {
    const { cls, row, delta, out } = this;
    let n = node;
    for (let i = 0, len = s.length; i < len; i++) {
      const c = cls[s.charCodeAt(i)]!;
      const r = row[n]!;
      n = r >= 0 ? delta[r + c]! : this.step(n, c);
      const o = out[n]!;
      if (o !== 0) found(i + 1, o);
    }
    return n;
  }

  /** The same over bytes (an automaton built with 256 units). */
  runBytes(b: Uint8Array, node: number, found: (end: number, length: number) => void): number {
    const { cls, row, delta, out } = this;
    let n = node;
    for (let i = 0, len = b.length; i < len; i++) {
      const c = cls[b[i]!]!;
      const r = row[n]!;
      n = r >= 0 ? delta[r + c]! : this.step(n, c);
      const o = out[n]!;
      if (o !== 0) found(i + 1, o);
    }
    return n;
  }
}

/** How a scan cuts and joins its input type (string or Buffer). */
interface Chunks<T> {
  length(x: T): number;
  slice(x: T, from: number, to: number): T;
  join(parts: T[]): T;
  concat(a: T, b: T): T;
  empty: T;
}

const textChunks: Chunks<string> = {
  length: (x) => x.length,
  slice: (x, from, to) => x.slice(from, to),
  join: (parts) => (parts.length === 1 ? parts[0]! : parts.join('')),
  concat: (a, b) => a + b,
  empty: '',
};

const byteChunks: Chunks<Buffer> = {
  length: (x) => x.length,
  slice: (x, from, to) => (from === 0 && to === x.length ? x : x.subarray(from, to)),
  join: (parts) => (parts.length === 1 ? parts[0]! : Buffer.concat(parts)),
  concat: (a, b) => (a.length === 0 ? b : Buffer.concat([a, b])),
  empty: Buffer.alloc(0),
};

/**
 * The masking of one stream (a one-shot mask is a stream fed once, finally). Occurrences come from
 * the automaton in order of their end; `starts`/`ends` hold the groups of overlapping occurrences
 * not yet fully output (disjoint, in order), merged as occurrences arrive. After each chunk,
 * everything before `limit` is final — any later occurrence ends after the input seen so far, so
 * starts at or after (input length + 1 − longest form) — and is output: text as is, each group as
 * one mask (a group that straddles the limit is masked at once and remembered as such).
 * What is kept is the input from the limit on: at most (longest form − 1) units.
 */
class Scan<T> {
  private node = 0;
  /** Units consumed so far. */
  private pos = 0;
  /** Units output (as text or inside a mask) so far; `held` is the input from here to `pos`. */
  private emitted = 0;
  private held: T;
  private readonly starts: number[] = [];
  private readonly ends: number[] = [];
  private readonly masked: boolean[] = [];
  private head = 0;
  private readonly found = (end: number, length: number) => this.add(this.base + end - length, this.base + end);
  private base = 0;

  constructor(
    private readonly ac: Automaton,
    private readonly run: (ac: Automaton, chunk: T, node: number, found: (end: number, length: number) => void) => number,
    private readonly chunks: Chunks<T>,
    private readonly mask: T,
    private readonly maxLen: number,
  ) {
    this.held = chunks.empty;
  }

  private add(start: number, end: number): void {
    const { starts, ends, masked } = this;
    let s = start;
    let m = false;
    while (starts.length > this.head && ends[ends.length - 1]! > start) {
      s = Math.min(s, starts.pop()!);
      ends.pop();
      m = masked.pop()! || m;
    }
    starts.push(s);
    ends.push(end);
    masked.push(m);
  }

  feed(chunk: T, final: boolean): T {
    const { chunks } = this;
    this.base = this.pos;
    this.node = this.run(this.ac, chunk, this.node, this.found);
    this.pos += chunks.length(chunk);
    const limit = final ? this.pos : Math.max(this.emitted, this.pos + 1 - this.maxLen);
    const data = chunks.concat(this.held, chunk);
    const at = this.emitted; // `data` starts here
    const parts: T[] = [];
    const { starts, ends, masked } = this;
    while (this.head < starts.length && starts[this.head]! < limit) {
      const h = this.head;
      if (starts[h]! > this.emitted) parts.push(chunks.slice(data, this.emitted - at, starts[h]! - at));
      if (!masked[h]) {
        parts.push(this.mask);
        masked[h] = true;
      }
      this.emitted = Math.max(this.emitted, Math.min(ends[h]!, limit));
      if (ends[h]! > limit) break;
      this.head++;
    }
    if (this.head === starts.length) {
      starts.length = ends.length = masked.length = this.head = 0;
    }
    if (this.emitted < limit) {
      parts.push(chunks.slice(data, this.emitted - at, limit - at));
      this.emitted = limit;
    }
    this.held = chunks.slice(data, limit - at, chunks.length(data));
    return parts.length === 0 ? chunks.empty : chunks.join(parts);
  }

  /** The input kept back (to copy it when it points into a caller's buffer). */
  keep(copy: (x: T) => T): void {
    this.held = copy(this.held);
  }
}

const runText = (ac: Automaton, chunk: string, node: number, found: (end: number, length: number) => void) =>
  ac.runText(chunk, node, found);
const runBytes = (ac: Automaton, chunk: Buffer, node: number, found: (end: number, length: number) => void) =>
  ac.runBytes(chunk, node, found);

export class SecretMasker {
  /** Every form masked, longest first. */
  readonly forms: readonly string[];
  /** The length of the longest form, in UTF-16 units and in UTF-8 bytes (0 when empty). */
  readonly maxFormLength: number;
  readonly maxFormBytes: number;
  readonly empty: boolean;
  private textAutomaton: Automaton | null = null;

  constructor(
    values: Iterable<string>,
    readonly maskText: string = DEFAULT_MASK,
  ) {
    const forms = new Set<string>();
    for (const value of values) for (const form of secretForms(value)) forms.add(form);
    this.forms = [...forms].sort((a, b) => b.length - a.length);
    this.empty = this.forms.length === 0;
    this.maxFormLength = this.forms[0]?.length ?? 0;
    this.maxFormBytes = this.forms.reduce((max, f) => Math.max(max, Buffer.byteLength(f, 'utf8')), 0);
  }

  /** Masks every form of every secret in `text`. A value that contains another is masked whole. */
  mask(text: string): string {
    if (this.empty || text.length < MIN_SECRET_LENGTH) return text;
    this.textAutomaton ??= new Automaton(this.forms, 0x10000);
    return new Scan(this.textAutomaton, runText, textChunks, this.maskText, this.maxFormLength).feed(text, true);
  }

  /** Masks the UTF-8 bytes of the forms in `buf`; returns `buf` itself when nothing matched. */
  maskBuffer(buf: Buffer): Buffer {
    if (this.empty || buf.length < MIN_SECRET_LENGTH) return buf;
    return byteScan(this).feed(buf, true);
  }
}

const byteAutomata = new WeakMap<SecretMasker, { ac: Automaton; mask: Buffer }>();

/** A scan of bytes for `masker`: its forms as UTF-8 bytes. */
function byteScan(masker: SecretMasker): Scan<Buffer> {
  let entry = byteAutomata.get(masker);
  if (entry === undefined) {
    const words = masker.forms.map((f) => Buffer.from(f, 'utf8').toString('latin1'));
    entry = { ac: new Automaton(words, 0x100), mask: Buffer.from(masker.maskText, 'utf8') };
    byteAutomata.set(masker, entry);
  }
  return new Scan(entry.ac, runBytes, byteChunks, entry.mask, masker.maxFormBytes);
}

/**
 * Masks a byte stream chunk by chunk, with the same result as `maskBuffer` on the whole stream:
 * it holds back at most (longest form − 1) bytes, so a secret split across chunks is still masked,
 * and `flush()` returns the rest at the end. Memory is bounded by the longest form plus the chunk.
 * Output chunks may split a multi-byte character, as input chunks may; their concatenation is
 * the masked stream, and may share memory with the input chunk (a masker without secrets passes
 * chunks through as they are); what is held back is copied.
 */
export class StreamMasker {
  private scan: Scan<Buffer> | null;

  constructor(private readonly masker: SecretMasker) {
    this.scan = masker.empty ? null : byteScan(masker);
  }

  push(chunk: Buffer): Buffer {
    if (this.scan === null) return chunk;
    const out = this.scan.feed(chunk, false);
    this.scan.keep((held) => Buffer.from(held)); // not a view of the caller's buffer
    return out;
  }

  flush(): Buffer {
    if (this.scan === null) return Buffer.alloc(0);
    const out = this.scan.feed(Buffer.alloc(0), true);
    this.scan = byteScan(this.masker);
    return out;
  }
}

/**
 * The secret values of an environment: those of the variables named in `names` (whatever their
 * value), and those of the variables `isSecretName()` says (`names` counting as extra names) except
 * trivial values like `true`/`false`/`null`; values shorter than 4 characters are skipped. A value
 * with surrounding whitespace also gives its trimmed value. Unique, in the environment's order.
 */
export function secretValues(env: Record<string, string | undefined>, names?: Iterable<string>): string[] {
  const explicit = new Set<string>();
  for (const n of names ?? []) explicit.add(n.toUpperCase());
  const out = new Set<string>();
  // Names first, values only of the variables that can hold a secret: reading every value of
  // process.env (a call into the environment per variable) cost a run ~45 µs; its names ~10 µs.
  for (const name of Object.keys(env)) {
    const named = explicit.size > 0 && explicit.has(name.toUpperCase());
    if (!named && !isSecretName(name)) continue;
    const value = env[name];
    if (value === undefined) continue;
    if (!named && !secretByConvention(name, value)) continue;
    for (const v of [value, value.trim()]) {
      if ([...v].length < MIN_SECRET_LENGTH) continue;
      if (!named && NOT_SECRET.has(v.toLowerCase())) continue;
      out.add(v);
    }
  }
  return [...out];
}

/**
 * Masks secrets inside any JSON-like value, for event payloads: strings in objects and arrays,
 * recursively (keys untouched); Buffers are masked as bytes; numbers, booleans, null and other
 * objects are returned as they are. Returns a copy where anything changed; never mutates `value`.
 */
export function maskDeep<T>(value: T, masker: SecretMasker): T {
  if (masker.empty) return value;
  const seen = new Map<object, unknown>();
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return masker.mask(v);
    if (v === null || typeof v !== 'object') return v;
    if (Buffer.isBuffer(v)) return masker.maskBuffer(v);
    if (seen.has(v)) return seen.get(v);
    if (Array.isArray(v)) {
      const out: unknown[] = [];
      seen.set(v, out);
      for (const item of v) out.push(walk(item));
      return out;
    }
    const proto = Object.getPrototypeOf(v) as unknown;
    if (proto !== Object.prototype && proto !== null) return v;
    const out: Record<string, unknown> = proto === null ? Object.create(null) : {};
    seen.set(v, out);
    for (const [k, item] of Object.entries(v)) out[k] = walk(item);
    return out;
  };
  return walk(value) as T;
}
