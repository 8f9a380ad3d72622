/**
 * `loops store copy`: a log copied from one store into another — a host's SQLite database into a
 * PostgreSQL schema (to move it onto a fleet), or a PostgreSQL log into a SQLite database (to
 * leave one) — verbatim, in one transaction, then verified.
 *
 * - **One mechanism each way, the replica's.** The source is read a page at a time by
 *   `replicaPage` (the PostgreSQL store's, which the replica copies by, and SQLite's twin): the
 *   events as stored (JSON text, never upcast), with their streams' rows. The destination writes
 *   them with `appendStored` (SQLite's, the replica's writer, and PostgreSQL's twin, which shares
 *   the append's statements): every event at its position, with its id, stream, version, schema
 *   version, data, meta, time and state as they were; each stream's row with its kind and machine
 *   (archived streams begin at their tombstone, as in the source); the projections written inline,
 *   as appends write them; the log's head moved to the last position, its format raised when it
 *   holds tombstones. The lease table goes with it (`copyIn`), so fencing tokens go on where they
 *   were.
 * - **All or nothing.** Everything is written in one transaction of the destination (its
 *   `batch`), whose first write checks that the destination's log is empty (`expectedHead` 0) and
 *   each next one that nobody else wrote meanwhile: a failure or a crash rolls it all back — a new
 *   file is deleted, a schema keeps loops' empty tables — and nothing is ever half-written.
 * - **Then verified.** Once committed: both logs read again, each event and each stream row
 *   hashed (sha256) and counted on both sides; the destination's projections rebuilt from its log
 *   and compared with its tables (`projections verify`). A SQLite source is read in one read
 *   transaction throughout (its snapshot); a PostgreSQL source is refused while a daemon of the
 *   fleet holds its lease (a log being written cannot be verified against its copy).
 * - **Refusals** (`UsageError`, exit 2) before anything is written: a destination that holds a
 *   log, a source with none, a daemon running on this data directory, the same store at both ends,
 *   two SQLite ends (`loops backup` copies a SQLite database), a malformed URL or schema name.
 *   Passwords are never shown: stores are named by their URL without it.
 * - `switch`: once verified, the data directory uses the destination — it remembers the
 *   PostgreSQL store (`store.json`, its replica made now), or forgets it for its own `loops.db`.
 */
import { createHash } from 'node:crypto';
import { existsSync, rmSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { openDatabase, type Db } from '../../events/db.js';
import { LoopsError, UsageError } from '../../events/errors.js';
import { SqliteLeaseStore } from '../../events/sqlite-leases.js';
import { SqliteEventLog, type EventRow, type ReplicaPage, type StoredAppendOptions, type StreamRow } from '../../events/sqlite-log.js';
import type { Batch, LeaseRecord } from '../../events/types.js';
import type { PgStore } from '../../events/pg/index.js';
import { inlineHandler, projections } from '../../projections/registry.js';
import { runningDaemon } from '../daemon/daemon-info.js';
import { databaseFile } from '../paths.js';
import { chooseStore, forgetStore, hidePassword, parseStore, storeUrl, type StoreChoice } from '../store-choice.js';
import { ensureDataDir, staleProjections } from '../store.js';
import { rebuildProjections, verifyProjections, type TableDiff } from './projections.js';

/** Events per page read from the source (and per `appendStored`). */
const PAGE = 1000;

type PgChoice = Extract<StoreChoice, { kind: 'postgres' }>;

/** One end of a copy: a SQLite file (`own`: this data directory's `loops.db`), or a PostgreSQL schema. */
export type StoreEnd = { kind: 'sqlite'; file: string; own: boolean } | PgChoice;

/** A store as the report names it: its kind, and its file or URL (never a password). */
export interface StoreLabel {
  kind: 'sqlite' | 'postgres';
  store: string;
}

export interface StoreCopyOptions {
  /** The destination: a PostgreSQL URL (`?schema=…`, default `loops`), `sqlite` (this data directory's `loops.db`) or `sqlite:<file>`. */
  to: string;
  /** The source, in the same forms; default: the store this data directory uses (`LOOPS_STORE`, `store.json`, else its `loops.db`). */
  from?: string;
  /** Once verified, make the data directory use the destination. */
  switch?: boolean;
  /** The environment the default source is chosen from (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  /** Now (epoch ms), for the liveness of a fleet's daemon leases (default the system clock). */
  nowMs?: number;
  /** Events per page (default 1000). */
  pageSize?: number;
}

/** One side's log, read back after the copy: counts and sha256 of its events and streams. */
export interface LogDigest {
  events: number;
  sha256: string;
  /** The last position. */
  head: number;
  streams: number;
  streamsSha256: string;
}

export interface StoreCopyReport {
  from: StoreLabel;
  to: StoreLabel;
  /** Events copied. */
  events: number;
  /** Streams copied. */
  streams: number;
  /** Rows of the lease table copied. */
  leases: number;
  /** The last position copied (the destination's head). */
  head: number;
  /** The sha256 of the copied events (each as stored: position, stream, version, type, v, data, meta, at, state). */
  sha256: string;
  source: LogDigest;
  destination: LogDigest;
  verified: { events: boolean; streams: boolean; projections: boolean };
  /** The destination's projections against a rebuild from its log (`projections verify`). */
  projections: { ok: boolean; events: number; tables: TableDiff[] };
  /** Everything verified. */
  ok: boolean;
  /** The data directory now uses the destination (`switch`). */
  switched: boolean;
  /** What to do next, in words. */
  next: string[];
  elapsedMs: number;
}

/** Where a store came from, for messages: `--to`, `--from`. */
type Flag = '--to' | '--from';

/** `raw` as a store end (`sqlite`, `sqlite:<file>`, `postgres://…`). */
export function parseStoreEnd(raw: string, flag: Flag, dataDir: string): StoreEnd {
  const value = raw.trim();
  if (value === 'sqlite') return { kind: 'sqlite', file: databaseFile(dataDir), own: true };
  if (/^sqlite:/i.test(value)) {
    let path = value.slice('sqlite:'.length);
    if (path.startsWith('//')) path = path.slice(2);
    if (path === '') throw new UsageError(`${flag} sqlite: names no file`, { hint: `write ${flag} sqlite:<file> (a new file, or a loops database with no events), or ${flag} sqlite for this data directory's loops.db` });
    if (path === '~' || path.startsWith('~/')) path = homedir() + path.slice(1);
    const file = resolve(path);
    return { kind: 'sqlite', file, own: file === databaseFile(dataDir) };
  }
  if (!/^postgres(ql)?:\/\//i.test(value)) {
    throw new UsageError(`${flag}: ${JSON.stringify(hidePassword(value))} is not a store loops knows`, {
      hint: `give a PostgreSQL URL (${flag} 'postgres://user@host:5432/database?schema=loops'), sqlite (this data directory's loops.db) or sqlite:<file>`,
    });
  }
  return parseStore(value, flag) as PgChoice;
}

function label(end: StoreEnd): StoreLabel {
  return end.kind === 'sqlite' ? { kind: 'sqlite', store: end.file } : { kind: 'postgres', store: storeUrl(end) };
}

function sameStore(a: StoreEnd, b: StoreEnd): boolean {
  if (a.kind === 'sqlite' && b.kind === 'sqlite') return a.file === b.file;
  if (a.kind === 'postgres' && b.kind === 'postgres') return storeUrl(a) === storeUrl(b);
  return false;
}

/** The store this data directory uses now, as an end. */
function currentStore(dataDir: string, env: NodeJS.ProcessEnv): StoreEnd {
  const choice = chooseStore(env, dataDir);
  return choice.kind === 'sqlite' ? { kind: 'sqlite', file: databaseFile(dataDir), own: true } : choice;
}

/** The source's side of a copy. */
interface Source {
  page(after: number, limit: number): Promise<ReplicaPage>;
  leases(): Promise<LeaseRecord[]>;
  close(): Promise<void>;
}

/** The destination's side of a copy. */
interface Destination {
  batch<T>(fn: (batch: Batch) => Promise<T>): Promise<T>;
  appendStored(rows: ReadonlyArray<EventRow>, streams: ReadonlyMap<string, StreamRow>, options: StoredAppendOptions): Promise<unknown>;
  copyLeases(records: ReadonlyArray<LeaseRecord>, batch: Batch): Promise<number>;
  page(after: number, limit: number): Promise<ReplicaPage>;
  verify(): Promise<{ ok: boolean; events: number; tables: TableDiff[] }>;
  /** What undoing a failed copy leaves, for the message. */
  leftAfterFailure: string;
  /** Ends the connection; `failed`: the copy was rolled back (a file made for it is deleted). */
  close(failed: boolean): Promise<void>;
}

const pgModule = () => import('../../events/pg/index.js');

/** A daemon running on the data directory of a SQLite file (its `loops.db`), refused. */
function refuseDaemon(dataDir: string, why: string): void {
  const daemon = runningDaemon(dataDir);
  if (daemon) {
    throw new UsageError(`loops store copy: a daemon (pid ${daemon.pid}) is running on ${dataDir}, ${why}`, {
      hint: 'loops daemon stop, copy, then loops daemon start (with --switch it starts on the new store)',
    });
  }
}

async function openSource(end: StoreEnd, nowMs: number): Promise<Source> {
  if (end.kind === 'sqlite') {
    if (!existsSync(end.file) || statSync(end.file).size === 0) {
      throw new UsageError(`loops store copy: there is no log to copy at ${end.file}`, {
        hint: end.own ? 'is LOOPS_DATA_DIR the data directory you meant? (--from names another store)' : 'give the path of a loops database',
      });
    }
    const db = openDatabase(end.file);
    // One read transaction for the whole copy and its verification: the source's snapshot.
    db.exec('BEGIN');
    const log = new SqliteEventLog(db, { validate: false, groupCommit: false });
    const leases = new SqliteLeaseStore(db);
    let open = true;
    return {
      page: (after, limit) => log.replicaPage(after, limit),
      leases: () => leases.all(),
      close: async () => {
        if (!open) return;
        open = false;
        if (db.inTransaction) db.exec('COMMIT');
        log.close();
        db.close();
      },
    };
  }
  const { openPgStore } = await pgModule();
  const store = await openPgStore({ url: end.url, schema: end.schema, create: false, follow: false, poolSize: 2 });
  try {
    const daemons = await store.leases.live('daemon', nowMs);
    if (daemons.size > 0) {
      const which = [...daemons].map(([name, lease]) => `${name} (${lease.holder}, until ${new Date(lease.expiresAt).toISOString()})`).join(', ');
      throw new UsageError(`loops store copy: ${daemons.size === 1 ? 'a daemon is' : `${daemons.size} daemons are`} running on ${storeUrl(end)}: ${which}`, {
        hint: 'stop them first (loops daemon stop on each host): a log being written cannot be verified against its copy',
      });
    }
  } catch (error) {
    await store.end().catch(() => {});
    throw error;
  }
  return {
    page: (after, limit) => store.events.replicaPage(after, limit),
    leases: () => store.leases.all(),
    close: () => store.end(),
  };
}

async function openDestination(end: StoreEnd): Promise<Destination> {
  if (end.kind === 'sqlite') return openSqliteDestination(end);
  const { openPgStore } = await pgModule();
  const store: PgStore = await openPgStore({ url: end.url, schema: end.schema, projections, follow: false, poolSize: 2 });
  try {
    const head = await store.events.headPosition();
    if (head > 0) {
      throw new UsageError(`loops store copy: ${storeUrl(end)} already holds a log (up to position ${head})`, {
        hint: `copy into a schema of its own (?schema=<new name> in the URL), or drop this one first if its log is not needed (DROP SCHEMA ${end.schema} CASCADE deletes it for every host)`,
      });
    }
  } catch (error) {
    await store.end().catch(() => {});
    throw error;
  }
  return {
    batch: (fn) => store.events.batch(fn),
    appendStored: (rows, streams, options) => store.events.appendStored(rows, streams, options),
    copyLeases: (records, batch) => store.leases.copyIn(records, batch),
    page: (after, limit) => store.events.replicaPage(after, limit),
    verify: () => store.verifyProjections(),
    leftAfterFailure: `schema ${end.schema} keeps loops' empty tables`,
    close: () => store.end(),
  };
}

function openSqliteDestination(end: Extract<StoreEnd, { kind: 'sqlite' }>): Destination {
  const made = !existsSync(end.file);
  if (made) {
    if (end.own) ensureDataDir(dirname(end.file));
    else if (!existsSync(dirname(end.file))) throw new UsageError(`loops store copy: directory ${dirname(end.file)} does not exist`, { hint: 'create it first' });
  }
  const db: Db = openDatabase(end.file);
  let log: SqliteEventLog;
  try {
    const events = (db.prepare('SELECT count(*) AS n FROM events').get() as { n: number }).n;
    if (events > 0) {
      throw new UsageError(`loops store copy: ${end.file} already holds a log (${events} events)`, {
        hint: end.own
          ? `move it away first (mv ${end.file} ${end.file}.before-copy, with its -wal and -shm files), or copy into a new file: --to sqlite:<file>`
          : 'copy into a new file (--to sqlite:<file>), or delete this one if its log is not needed',
      });
    }
    const stale = staleProjections(db);
    if (stale.length > 0) rebuildProjections(db, stale);
    log = new SqliteEventLog(db, { handlers: [inlineHandler()], validate: false, groupCommit: false });
  } catch (error) {
    db.close();
    if (made) removeDatabase(end.file);
    throw error;
  }
  const leases = new SqliteLeaseStore(db);
  return {
    batch: (fn) => log.batch(fn),
    appendStored: async (rows, streams, options) => log.appendStored(rows, streams, options),
    copyLeases: (records, batch) => leases.copyIn(records, batch),
    page: (after, limit) => log.replicaPage(after, limit),
    verify: async () => verifyProjections(db),
    leftAfterFailure: made ? `${end.file} was deleted` : `${end.file} is as it was`,
    close: async (failed) => {
      log.close();
      db.close();
      if (failed && made) removeDatabase(end.file);
    },
  };
}

function removeDatabase(file: string): void {
  for (const suffix of ['', '-wal', '-shm']) rmSync(file + suffix, { force: true });
}

/**
 * Reads a log back a page at a time up to position `upTo`, hashing each event as stored and each
 * stream's row (as read with its last event).
 */
async function digest(page: (after: number, limit: number) => Promise<ReplicaPage>, upTo: number, pageSize: number): Promise<LogDigest> {
  const events = createHash('sha256');
  const streams = new Map<string, string>();
  let count = 0;
  let head = 0;
  for (;;) {
    const read = await page(head, pageSize);
    const rows = read.events.filter((e) => e.position <= upTo);
    const rowsOf = new Map(read.streams.map((s) => [s.stream_id, s]));
    for (const e of rows) {
      events.update(`${JSON.stringify([e.position, e.stream_id, e.version, e.type, e.v, e.data, e.meta, e.at, e.state])}\n`);
      count += 1;
      head = e.position;
      const s = rowsOf.get(e.stream_id);
      streams.set(e.stream_id, s ? JSON.stringify([s.stream_id, s.kind, s.version, s.machine_id, s.machine_version, s.created_at, s.updated_at]) : 'missing');
    }
    if (read.events.length < pageSize || rows.length < read.events.length) break;
  }
  const ordered = createHash('sha256');
  for (const id of [...streams.keys()].sort()) ordered.update(`${streams.get(id)}\n`);
  return { events: count, sha256: events.digest('hex'), head, streams: streams.size, streamsSha256: ordered.digest('hex') };
}

/** A failure of the copy's transaction, said as what it means here: nothing was written. */
function copyFailed(error: unknown, to: StoreLabel, left: string): unknown {
  if (!(error instanceof Error)) return error;
  const inner = error instanceof LoopsError ? error : null;
  const diverged = /^events copied from another log/.test(error.message);
  const message = `loops store copy: copying into ${to.store} failed and was rolled back, nothing was written (${left}): ${error.message.replace(/^loops store copy: /, '')}`;
  const hint = diverged
    ? 'the source changed while it was read (a process wrote to it), or its log is damaged (loops verify checks it): stop its writers and copy again'
    : (inner?.hint ?? 'fix the cause and copy again');
  return new LoopsError(inner?.code ?? 'internal', message, { cause: error, hint, retryable: inner?.retryable ?? false });
}

/** Copies the log (see the header). */
export async function copyStore(dataDir: string, options: StoreCopyOptions): Promise<StoreCopyReport> {
  const started = performance.now();
  const env = options.env ?? process.env;
  const pageSize = options.pageSize ?? PAGE;
  const to = parseStoreEnd(options.to, '--to', dataDir);
  const current = currentStore(dataDir, env);
  const fromEnd: StoreEnd = options.from !== undefined ? parseStoreEnd(options.from, '--from', dataDir) : current;
  const fromLabel = label(fromEnd);
  const toLabel = label(to);
  if (sameStore(fromEnd, to)) {
    throw new UsageError(`loops store copy: the source and the destination are the same store (${toLabel.store})`, {
      hint: options.from === undefined ? 'this data directory uses that store now: --to names another one (or --from another source)' : 'name two different stores',
    });
  }
  if (fromEnd.kind === 'sqlite' && to.kind === 'sqlite') {
    throw new UsageError('loops store copy: both ends are SQLite databases', { hint: `loops backup <file> copies a SQLite database (and loops restore <file> puts it in a data directory)` });
  }
  if (options.switch && to.kind === 'sqlite' && !to.own) {
    throw new UsageError(`loops store copy: --switch makes this data directory use the destination, which ${to.file} cannot be (a data directory's own database is its loops.db)`, {
      hint: '--to sqlite copies into this data directory\'s loops.db; or copy without --switch',
    });
  }
  // Both ends' names checked before anything is opened (a destination schema is created when opened).
  if (fromEnd.kind === 'postgres' || to.kind === 'postgres') {
    const { checkSchemaName } = await pgModule();
    for (const end of [fromEnd, to]) if (end.kind === 'postgres') checkSchemaName(end.schema);
  }
  // A daemon writing to the source (its log could not be verified against the copy), or on a
  // data directory whose store the copy writes or switches.
  if (sameStore(fromEnd, current)) refuseDaemon(dataDir, 'writing to the source');
  else if (options.switch || (to.kind === 'sqlite' && to.own)) refuseDaemon(dataDir, 'whose store the copy would change');
  for (const end of [fromEnd, to]) {
    if (end.kind === 'sqlite' && !end.own && basename(end.file) === 'loops.db') refuseDaemon(dirname(end.file), `whose loops.db is ${end === to ? 'the destination' : 'the source'}`);
  }

  const source = await openSource(fromEnd, options.nowMs ?? Date.now());
  let destination: Destination | null = null;
  try {
    const first = await source.page(0, pageSize);
    if (first.events.length === 0) {
      throw new UsageError(`loops store copy: ${fromLabel.store} holds no events: nothing to copy`, {
        hint: options.from === undefined ? 'is LOOPS_DATA_DIR the data directory you meant? (--from names another source)' : 'check the source you named',
      });
    }
    destination = await openDestination(to);
    const dest = destination;

    // The copy: one transaction of the destination.
    let copied = 0;
    let head = 0;
    let leases = 0;
    const streams = new Set<string>();
    try {
      await dest.batch(async (batch) => {
        let page = first;
        for (;;) {
          if (page.events.length > 0) {
            await dest.appendStored(page.events, new Map(page.streams.map((s) => [s.stream_id, s])), { batch, expectedHead: head });
            copied += page.events.length;
            head = page.events[page.events.length - 1]!.position;
            for (const e of page.events) streams.add(e.stream_id);
          }
          if (page.events.length < pageSize) break;
          page = await source.page(head, pageSize);
        }
        leases = await dest.copyLeases(await source.leases(), batch);
      });
    } catch (error) {
      const left = dest.leftAfterFailure;
      destination = null;
      await dest.close(true).catch(() => {});
      throw copyFailed(error, toLabel, left);
    }

    // Verified once committed: both logs read back, then the destination's projections.
    let sourceDigest: LogDigest;
    let destDigest: LogDigest;
    let verified: Awaited<ReturnType<Destination['verify']>>;
    try {
      sourceDigest = await digest((after, limit) => source.page(after, limit), head, pageSize);
      destDigest = await digest((after, limit) => dest.page(after, limit), Number.MAX_SAFE_INTEGER, pageSize);
      verified = await dest.verify();
    } catch (error) {
      const inner = error instanceof LoopsError ? error : null;
      throw new LoopsError(inner?.code ?? 'internal', `loops store copy: ${copied} events were copied into ${toLabel.store} and committed, but verifying the copy failed: ${(error as Error).message}`, {
        cause: error,
        hint: `check the copy with loops projections verify on it (the source is untouched), or drop it and copy again${inner?.hint ? ` (${inner.hint})` : ''}`,
      });
    }
    const eventsOk = sourceDigest.events === copied && destDigest.events === copied && sourceDigest.sha256 === destDigest.sha256 && destDigest.head === head;
    const streamsOk = sourceDigest.streams === destDigest.streams && sourceDigest.streamsSha256 === destDigest.streamsSha256;
    const ok = eventsOk && streamsOk && verified.ok;
    await source.close();
    await dest.close(false);
    destination = null;

    let switched = false;
    if (ok && options.switch) {
      await switchTo(dataDir, to);
      switched = true;
    }
    return {
      from: fromLabel,
      to: toLabel,
      events: copied,
      streams: streams.size,
      leases,
      head,
      sha256: destDigest.sha256,
      source: sourceDigest,
      destination: destDigest,
      verified: { events: eventsOk, streams: streamsOk, projections: verified.ok },
      projections: { ok: verified.ok, events: verified.events, tables: verified.tables },
      ok,
      switched,
      next: nextSteps(dataDir, to, { ok, switched, env }),
      elapsedMs: Math.round(performance.now() - started),
    };
  } finally {
    await source.close().catch(() => {});
    await destination?.close(false).catch(() => {});
  }
}

/** `switch`: the data directory uses the destination from now on. */
async function switchTo(dataDir: string, to: StoreEnd): Promise<void> {
  if (to.kind === 'sqlite') {
    forgetStore(dataDir);
    return;
  }
  try {
    // As a first command on the store does: remembered (store.json), and this host's replica made.
    const { openPgParts } = await import('../pg-store.js');
    const parts = await openPgParts(dataDir, to, { follow: false });
    parts.close();
    await parts.store.end();
  } catch (error) {
    const inner = error instanceof LoopsError ? error : null;
    throw new LoopsError(inner?.code ?? 'internal', `loops store copy: the copy into ${storeUrl(to)} is done and verified, but this data directory could not switch to it: ${(error as Error).message}`, {
      cause: error,
      hint: inner?.hint ?? `LOOPS_STORE='${storeUrl(to)}' loops list switches it once the cause is fixed`,
    });
  }
}

/** What to do next, in words. */
function nextSteps(dataDir: string, to: StoreEnd, state: { ok: boolean; switched: boolean; env: NodeJS.ProcessEnv }): string[] {
  if (!state.ok) {
    return [
      to.kind === 'postgres'
        ? `the copy in ${storeUrl(to)} differs from its source (the source is untouched): drop it (DROP SCHEMA ${to.schema} CASCADE) and copy again; LOOPS_DEBUG=1 shows more`
        : `the copy in ${to.file} differs from its source (the source is untouched): delete it and copy again`,
    ];
  }
  const lines: string[] = [];
  if (state.switched) {
    lines.push(
      to.kind === 'postgres'
        ? `${dataDir} now uses ${storeUrl(to)} (store.json; its SQLite loops.db is kept as it was: LOOPS_STORE=sqlite reads it); start the daemon again: loops daemon start`
        : `${dataDir} now uses its own loops.db again (store.json removed); start the daemon again: loops daemon start`,
    );
    if (state.env.LOOPS_STORE !== undefined && state.env.LOOPS_STORE !== '') lines.push('LOOPS_STORE is set in this environment: it overrides what the data directory remembers; unset it');
    return lines;
  }
  if (to.kind === 'postgres') {
    lines.push(`to move this data directory onto it: loops daemon start --store '${storeUrl(to)}' (or LOOPS_STORE='${storeUrl(to)}' with any command): the data directory then remembers it`);
    lines.push(`other hosts join with the same URL; this data directory's loops.db is untouched`);
  } else if (to.own) {
    lines.push(`to use it: delete ${dataDir}/store.json (LOOPS_STORE=sqlite uses it for one command)`);
  } else {
    lines.push(`to use it: LOOPS_DATA_DIR=<a new directory> loops restore ${to.file}`);
  }
  return lines;
}
