/**
 * What one event changed in a machine's context, and a short hash of each changed field — the one
 * mechanism both sides use: the runtime records the hashes with every event it appends
 * (`meta.ctx`), and replay recomputes them from the events alone and says at which event and in
 * which field it first differs.
 *
 * Fields are the context's top-level keys; a keyed collection is compared entry by entry, as
 * `steps.lint`: a key whose value is a plain object on both sides (entries by key), or an array of
 * plain objects that each name their string `id` on both sides (a workflow run's `steps`: the id is
 * the entry's path, and the entry's value is the rest of it — so a map keyed by id and a list of
 * entries naming their id hash the same). XState's
 * `assign` keeps the references of what it did not touch, so an unchanged field is skipped without
 * serialising it: the cost is linear in what changed, not in the size of the context.
 *
 * Pure: no Node.js module, so it runs wherever the machines do (a browser, another XState app).
 */

export interface ContextChange {
  /** `key`, or `key.entry` inside a keyed map. */
  path: string;
  before: unknown;
  after: unknown;
}

/** What an event records of its context change: path → hash of the new value (`-`: removed). */
export type FieldHashes = Record<string, string>;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/**
 * An array of plain objects that name their string `id` (vacuously so when empty). A context's
 * arrays hold one kind of element, so the first one tells: checking every element of a 500-step
 * run's steps at every event would cost more than the rest of the comparison.
 */
function isKeyedList(value: unknown): value is Array<{ id: string }> {
  if (!Array.isArray(value)) return false;
  const first: unknown = value[0];
  return first === undefined || (isPlainObject(first) && typeof first.id === 'string');
}

/** A keyed list's entry without its id (its value as a change shows and hashes it). */
function entryValue(entry: { id: string } | undefined): unknown {
  if (entry === undefined) return undefined;
  const { id: _id, ...rest } = entry;
  return rest;
}

/** A keyed list's changes, entry by entry: in before's order, then the new entries. */
function listChanges(key: string, x: Array<{ id: string }>, y: Array<{ id: string }>, changes: ContextChange[]): void {
  const aligned = x.length === y.length && x.every((entry, i) => entry.id === y[i]!.id);
  if (aligned) {
    // The usual case (the same steps, one of them changed): compared by position, in linear time.
    for (let i = 0; i < x.length; i++) {
      if (x[i] !== y[i] && !sameJson(x[i], y[i])) changes.push({ path: `${key}.${y[i]!.id}`, before: entryValue(x[i]), after: entryValue(y[i]) });
    }
    return;
  }
  const before = new Map(x.map((entry) => [entry.id, entry]));
  const after = new Map(y.map((entry) => [entry.id, entry]));
  for (const id of keysOf(Object.fromEntries(before), Object.fromEntries(after))) {
    if (differs(before.get(id), after.get(id))) changes.push({ path: `${key}.${id}`, before: entryValue(before.get(id)), after: entryValue(after.get(id)) });
  }
}

/**
 * Whether two values serialise to the same JSON — what `differs` asks — without serialising them
 * when they are objects of the same keys in the same order (a step entry whose status changed
 * differs at its first fields): the exact JSON comparison is the fallback for anything else.
 */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (isPlainObject(a) && isPlainObject(b)) {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    if (ka.length !== kb.length) return JSON.stringify(a) === JSON.stringify(b);
    for (let i = 0; i < ka.length; i++) {
      const k = ka[i]!;
      if (k !== kb[i]) return JSON.stringify(a) === JSON.stringify(b);
      const x = a[k];
      const y = b[k];
      if (x === y) continue;
      if (typeof x === 'object' && x !== null && typeof y === 'object' && y !== null) {
        if (!sameJson(x, y)) return false;
        continue;
      }
      // Unequal primitives: the same JSON only for the odd ones (NaN and null, undefined and a function).
      if (typeof x === 'string' || typeof y === 'string' || typeof x === 'boolean' || typeof y === 'boolean') return false;
      if (JSON.stringify(x) !== JSON.stringify(y)) return false;
    }
    return true;
  }
  return JSON.stringify(a) === JSON.stringify(b);
}

function differs(a: unknown, b: unknown): boolean {
  return a !== b && !sameJson(a, b);
}

/** The fields that differ between two contexts, in key order (before's keys, then new ones). */
export function contextChanges(before: unknown, after: unknown): ContextChange[] {
  if (before === after) return [];
  const a = (isPlainObject(before) ? before : {}) as Record<string, unknown>;
  const b = (isPlainObject(after) ? after : {}) as Record<string, unknown>;
  const changes: ContextChange[] = [];
  const visit = (key: string) => {
    const x = a[key];
    const y = b[key];
    if (x === y) return;
    if (Array.isArray(x) && Array.isArray(y) && x.length === 0 && y.length === 0) return;
    if (isPlainObject(x) && isPlainObject(y)) {
      for (const entry of keysOf(x, y)) {
        if (differs(x[entry], y[entry])) changes.push({ path: `${key}.${entry}`, before: x[entry], after: y[entry] });
      }
    } else if (isKeyedList(x) && isKeyedList(y) && (x.length > 0 || y.length > 0)) {
      listChanges(key, x, y, changes);
    } else if (differs(x, y)) changes.push({ path: key, before: x, after: y });
  };
  for (const key of keysOf(a, b)) visit(key);
  return changes;
}

function keysOf(a: Record<string, unknown>, b: Record<string, unknown>): string[] {
  const keys = Object.keys(a);
  for (const key of Object.keys(b)) if (!(key in a)) keys.push(key);
  return keys;
}

/** The value at a change's path in a context (for a check that names the field). */
export function valueAt(context: unknown, path: string): unknown {
  if (!isPlainObject(context)) return undefined;
  const dot = path.indexOf('.');
  if (dot < 0) return context[path];
  const map = context[path.slice(0, dot)];
  const entry = path.slice(dot + 1);
  if (isKeyedList(map)) return entryValue(map.find((e) => e.id === entry));
  return isPlainObject(map) ? map[entry] : undefined;
}

/**
 * cyrb53 (a public-domain 53-bit string hash) of a value's JSON, as 14 hex digits: cheap, in pure
 * JavaScript, and wide enough to tell two replayed values apart. It checks determinism; it is not a
 * defence against tampering (an exported bundle's sha256 chain is).
 */
export function hashValue(value: unknown): string {
  if (value === undefined) return '-';
  return hashText(JSON.stringify(value));
}

function hashText(text: string): string {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(16).padStart(14, '0');
}

/** The hashes an event records for its changes. */
export function fieldHashes(changes: readonly ContextChange[]): FieldHashes {
  const out: FieldHashes = {};
  for (const change of changes) out[change.path] = hashValue(change.after);
  return out;
}

/**
 * Compares the hashes replay computed with the ones the event recorded: the first field that
 * differs (changed in one and not the other, or to another value), or null when they agree.
 */
export function firstFieldMismatch(recorded: FieldHashes, replayed: FieldHashes): { path: string; recorded: string | null; replayed: string | null } | null {
  for (const path of Object.keys(recorded)) {
    if (recorded[path] !== replayed[path]) return { path, recorded: recorded[path]!, replayed: replayed[path] ?? null };
  }
  for (const path of Object.keys(replayed)) {
    if (!(path in recorded)) return { path, recorded: null, replayed: replayed[path]! };
  }
  return null;
}
