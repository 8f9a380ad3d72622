/**
 * The audit bundle's format (`loops export`, `loops verify <bundle>`; docs/audit.md): JSON Lines,
 * each line the canonical JSON of one entry (`canonicalJson`), so a line has exactly one spelling
 * and any changed byte is either a changed value or a line that is no longer canonical. Line 1 is the header, then the chained entries (events, step outputs, output files),
 * then the trailer. Every line but the trailer carries `prev` (the hash of the line before; "" for
 * the header) and `hash` = sha256(prev + canonical JSON of the entry without `prev` and `hash`).
 */
import { createHash } from 'node:crypto';
import type { EventMeta, Json } from '../../events/types.js';

/** The format's name, in every header. */
export const BUNDLE_FORMAT = 'loops-bundle';
/** The format's version; a reader refuses a newer one. */
export const BUNDLE_FORMAT_VERSION = 1;

/** One stream the bundle holds events of, and the machine that wrote it. */
export interface BundleStream {
  streamId: string;
  kind: string;
  machineId: string | null;
  machineVersion: number | null;
  createdAt: string;
  updatedAt: string;
  /** The versions the bundle holds: fromVersion..toVersion, every one. */
  fromVersion: number;
  toVersion: number;
  events: number;
}

/** What was exported: a run, a workflow run, or a loop with its runs since `since`. */
export interface BundleSubject {
  kind: 'run' | 'wfrun' | 'loop';
  id: string;
  /** The loop's or workflow's name. */
  name: string | null;
  since: string | null;
}

export interface BundleHeader {
  kind: 'header';
  format: typeof BUNDLE_FORMAT;
  formatVersion: number;
  createdAt: string;
  loops: string;
  subject: BundleSubject;
  streams: BundleStream[];
  /**
   * The definitions the subject ran with: the workflow spec versions its workflow runs pinned, and
   * the loop definition events (loop.created, loop.rescheduled) of the loops its runs belong to.
   */
  definitions: {
    workflows: Array<{ workflowId: string; name: string | null; version: number }>;
    loops: Array<{ loopId: string; events: Array<{ version: number; type: string; at: string; data: Json }> }>;
  };
  /**
   * Masking (each form of a secret value replaced by `***`): `secrets` distinct values looked for,
   * `events` and `files` how many of each masking changed.
   */
  masked: { secrets: number; events: number; files: number };
}

/** One event of a stream, as the log stored it (its data masked). */
export interface BundleEvent {
  kind: 'event';
  stream: string;
  version: number;
  type: string;
  v: number;
  /** Its position in the exporting log (positions differ between logs; kept for reference). */
  position: number;
  at: string;
  data: Json;
  meta: EventMeta;
  state: Json | null;
  /**
   * Context fields whose recorded hash (`meta.ctx`) cannot be checked because masking changed
   * their value; empty when masking changed nothing the machine keeps.
   */
  unchecked: string[];
}

/** The outputs a workflow step's last attempt gave ($LOOPS_OUTPUT), as the tables hold them. */
export interface BundleOutputs {
  kind: 'outputs';
  wfRunId: string;
  stepId: string;
  attempt: number;
  outputs: Record<string, string>;
}

/** One output file of a run or step attempt, relative to the data directory (`runs/<id>/…`). */
export interface BundleFile {
  kind: 'file';
  /** `run:<id>` or `wfrun:<id>`: whose output it is. */
  stream: string;
  path: string;
  size: number;
  /** sha256 of the bytes as exported (masked). */
  sha256: string;
  encoding: 'utf8' | 'base64';
  content: string;
}

export type BundleEntry = BundleEvent | BundleOutputs | BundleFile;

export interface BundleTrailer {
  kind: 'trailer';
  /** Chained lines after the header. */
  count: number;
  /** The hash of the last chained line (the header's when there is none). */
  head: string;
}

/** A chained line as stored: the entry (or header) with its place in the chain. */
export type Chained<T> = T & { prev: string; hash: string };

/**
 * A value's one spelling in a bundle: JSON as `JSON.stringify` writes it — no whitespace, the
 * shortest number forms, one escape per character, object keys in the order they were given (the
 * order the log stored an event's data in: replay hashes context fields with it, so it is kept,
 * not sorted). A line is canonical when it equals the canonical JSON of what it parses to, so no
 * two spellings of one value can share a hash.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value) ?? 'null';
}

export function sha256Hex(text: string | Buffer): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The hash a line carries: sha256 over `prev` and the canonical JSON of its body. */
export function chainHash(prev: string, body: object): string {
  return sha256Hex(prev + canonicalJson(body));
}

/** The body a line's hash is over: the line without `prev` and `hash`. */
export function bodyOf(line: Record<string, unknown>): Record<string, unknown> {
  const { prev: _prev, hash: _hash, ...body } = line;
  return body;
}

/** Chains `body` after `prev`: the line's object and its text (no newline). */
export function chain<T extends object>(prev: string, body: T): { line: Chained<T>; text: string; hash: string } {
  const hash = chainHash(prev, body);
  const line = { ...body, prev, hash } as Chained<T>;
  return { line, text: canonicalJson(line), hash };
}
