/**
 * Opening the SQLite database that holds the log: file permissions, pragmas, the numbered
 * migrations of the log's own tables (the single DDL source for them), and the log format check.
 * Deliberately light (no zod, no rxjs) so read-only CLI commands start fast.
 */
import Database from 'better-sqlite3';
import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import { BusyError, FormatVersionError, LoopsError } from './errors.js';

export type Db = Database.Database;

/**
 * The highest log format this build reads. A database with a higher number is refused.
 *  - 1: the tables below; every stream holds every event it was given, from version 1.
 *  - 2: a stream may begin with `stream.archived` (its earlier events moved to an archive file by
 *    `loops prune --archive`). Only archiving raises a database to 2, so a loops that reads only 1
 *    keeps working on a data directory until the first archive, and refuses it afterwards (it
 *    would fold an archived stream from its first remaining event).
 */
export const LOG_FORMAT_VERSION = 2;
/** The format archiving raises a database to (in the archive's transaction). */
export const ARCHIVED_FORMAT_VERSION = 2;

/** Numbered migrations for the log's own tables; index i migrates format i to i+1. */
const migrations: ReadonlyArray<string> = [
  `
  CREATE TABLE events (
    -- The rowid: assigned in commit order, never reused because events are never deleted.
    position  INTEGER PRIMARY KEY,
    stream_id TEXT    NOT NULL,
    version   INTEGER NOT NULL,
    type      TEXT    NOT NULL,
    v         INTEGER NOT NULL,
    data      TEXT    NOT NULL,
    meta      TEXT    NOT NULL,
    at        TEXT    NOT NULL,
    state     TEXT,
    UNIQUE (stream_id, version)
  );
  CREATE TABLE streams (
    stream_id       TEXT PRIMARY KEY,
    kind            TEXT    NOT NULL,
    version         INTEGER NOT NULL,
    machine_id      TEXT,
    machine_version INTEGER,
    created_at      TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL
  ) WITHOUT ROWID;
  -- Projection bookkeeping: which version of each projection built its tables.
  CREATE TABLE projections (
    name    TEXT PRIMARY KEY,
    version INTEGER NOT NULL
  );
  -- Operational, not a projection (documented exception): leases with fencing tokens.
  CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT    NOT NULL,
    token      INTEGER NOT NULL,
    expires_at TEXT    NOT NULL
  ) WITHOUT ROWID;
  `,
];

const statementCache = new WeakMap<Db, Map<string, Database.Statement>>();

/** A prepared statement cached per database handle: `prepare` costs tens of µs, hot paths call it often. */
export function cached<P extends unknown[] = unknown[], R = unknown>(db: Db, sql: string): Database.Statement<P, R> {
  let perDb = statementCache.get(db);
  if (!perDb) {
    perDb = new Map();
    statementCache.set(db, perDb);
  }
  let stmt = perDb.get(sql);
  if (!stmt) {
    stmt = db.prepare(sql);
    perDb.set(sql, stmt);
  }
  return stmt as unknown as Database.Statement<P, R>;
}

/** SQLite's "busy": another connection holds the lock for longer than busy_timeout (any SQLITE_BUSY_* extended code too). */
export function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^SQLITE_BUSY(_|$)/.test(code);
}

/** The error every write that finds the database locked for too long gives (exit 75 in the CLI). */
export function busyError(cause: unknown): BusyError {
  return new BusyError('the database is busy (another loops process holds the write lock)', { cause, hint: 'retry in a moment' });
}

/**
 * Runs `fn` in one write transaction (`BEGIN IMMEDIATE`: the write lock is taken at once, so two
 * writers never deadlock upgrading), mapping a lock held too long to the documented busy error.
 * Inside an open transaction it joins it (a savepoint).
 */
export function writeTransaction<T>(db: Db, fn: () => T): T {
  try {
    return db.transaction(fn).immediate();
  } catch (error) {
    if (isBusy(error)) throw busyError(error);
    throw error;
  }
}

export interface OpenOptions {
  /** Open read-only: no migrations, no file creation. */
  readonly?: boolean;
  /** `busy_timeout` in ms (default 5000). */
  busyTimeoutMs?: number;
}

/** Opens (creating when needed) the database at `file`, with a 0700 directory and 0600 files. */
export function openDatabase(file: string, options: OpenOptions = {}): Db {
  const memory = file === ':memory:';
  if (!memory) {
    const dir = dirname(file);
    if (!existsSync(dir)) mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (!existsSync(file)) {
      // Create the file ourselves so it is 0600 from the first byte.
      closeSync(openSync(file, 'a', 0o600));
    }
  }
  let db: Db;
  try {
    db = new Database(file, { fileMustExist: !memory });
  } catch (error) {
    throw new LoopsError('internal', `cannot open database ${file}: ${(error as Error).message}`, {
      cause: error,
      hint: 'check that the data directory is readable and writable (LOOPS_DATA_DIR)',
    });
  }
  db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 5000}`);
  // Before anything is changed in it (the journal mode is a write).
  if ((db.pragma('user_version', { simple: true }) as number) === 0) refuseForeign(db, file);
  // A new database gives pages freed by deletions (loops prune --archive) back to the file system
  // on request (PRAGMA incremental_vacuum), a few at a time. Only possible before the first table
  // exists: older databases switch with one full VACUUM (loops prune --vacuum).
  if (!options.readonly && (db.pragma('page_count', { simple: true }) as number) === 0) db.pragma('auto_vacuum = INCREMENTAL');
  if (!memory) {
    db.pragma('journal_mode = WAL');
    for (const suffix of ['-wal', '-shm']) {
      if (existsSync(file + suffix)) chmodSync(file + suffix, 0o600);
    }
  }
  // better-sqlite3 leaves WAL at NORMAL, which can lose the last commits on power loss.
  db.pragma('synchronous = FULL');
  // A group commit opens a savepoint per append (and a batch one around several). SQLite keeps the
  // pages a savepoint would restore in memory up to 64 KiB, then moves them to a temporary file it
  // creates (in /var/tmp), writes page by page and deletes at the end of the transaction: a daemon
  // firing 100 loops at once made ~10 such files and ~4,000 writes to them. Kept in memory instead:
  // at most the pages one transaction changes, a few MiB for a pass of 100 loops.
  if (!options.readonly) db.pragma('temp_store = MEMORY');
  db.pragma('foreign_keys = ON');
  migrate(db, file);
  return db;
}

/**
 * A database loops did not make (format 0, but tables in it) is never written into: above all the
 * predecessor's (`@hasna/loops` keeps `loops.db` in the directory its own LOOPS_DATA_DIR names, so
 * a user who kept that variable points loops at it).
 *
 * Called once `user_version` read 0. Another loops process may have created the database since
 * (`loops daemon start` and `loops create` run at once on a new data directory): it creates the
 * tables and sets the format in one transaction, so tables seen now with the format still 0 are
 * foreign — the format is read again after the tables, never trusted from before them.
 */
export function refuseForeign(db: Db, file: string): void {
  const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").all() as Array<{ name: string }>).map((r) => r.name);
  if (tables.length === 0) return;
  if ((db.pragma('user_version', { simple: true }) as number) !== 0) return;
  db.close();
  if (tables.includes('daemon_lease') && tables.includes('loop_runs')) {
    throw new FormatVersionError(`${file} is a database of @hasna/loops (the predecessor), not of loops: loops keeps its own and never writes into it`, {
      hint: `point LOOPS_DATA_DIR at a new directory (or unset it), then bring it across with: loops import hasna-loops --db ${file}`,
    });
  }
  throw new FormatVersionError(`${file} is not a loops database (it holds tables loops did not make: ${tables.slice(0, 5).join(', ')}${tables.length > 5 ? ', …' : ''})`, {
    hint: 'point LOOPS_DATA_DIR at a directory of its own',
  });
}

function migrate(db: Db, file: string): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  if (current > LOG_FORMAT_VERSION) {
    db.close();
    throw new FormatVersionError(
      `database ${file} uses log format ${current}, but this loops understands only up to ${LOG_FORMAT_VERSION}`,
      { hint: 'upgrade loops (npm i -g loops@latest) or point LOOPS_DATA_DIR at another directory' },
    );
  }
  // Formats above the migrations' (2) differ in what the log may hold, not in its tables.
  if (current >= migrations.length) return;
  try {
    db.transaction(() => {
      // Re-read inside the write lock: another process may have migrated meanwhile.
      const inside = db.pragma('user_version', { simple: true }) as number;
      if (inside >= migrations.length) return;
      for (let i = inside; i < migrations.length; i++) {
        db.exec(migrations[i]!);
      }
      db.pragma(`user_version = ${migrations.length}`);
    }).immediate();
  } catch (error) {
    if ((error as { code?: string }).code === 'SQLITE_BUSY') {
      throw new BusyError(`database ${file} is busy`, { cause: error, hint: 'retry in a moment' });
    }
    throw error;
  }
}
