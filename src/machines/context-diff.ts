/**
 * What one event changed in a machine's context, and a short hash of each changed field — the one
 * mechanism both sides use: the runtime records the hashes with every event it appends
 * (`meta.ctx`), and replay recomputes them from the events alone and says at which event and in
 * which field it first differs.
 *
 * Fields are the context's top-level keys; a key whose value is a plain object on both sides (a
 * workflow run's `steps`, keyed by step id) is compared entry by entry, as `steps.lint`. XState's
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

function differs(a: unknown, b: unknown): boolean {
  return a !== b && JSON.stringify(a) !== JSON.stringify(b);
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
    if (isPlainObject(x) && isPlainObject(y)) {
      for (const entry of keysOf(x, y)) {
        if (differs(x[entry], y[entry])) changes.push({ path: `${key}.${entry}`, before: x[entry], after: y[entry] });
      }
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
  return isPlainObject(map) ? map[path.slice(dot + 1)] : undefined;
}

/**
 * cyrb53 (a public-domain 53-bit string hash) of a value's JSON, as 14 hex digits: cheap, in pure
 * JavaScript, and wide enough to tell two replayed values apart. It checks determinism; it is not a
 * defence against tampering (an exported bundle's sha256 chain is).
 */
export function hashValue(value: unknown): string {
  if (value === undefined) return '-';
  const text = JSON.stringify(value);
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
