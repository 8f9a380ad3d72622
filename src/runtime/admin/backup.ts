/**
 * `loops backup <file>` and `loops restore <file>`.
 *
 * - **Backup** is `VACUUM INTO`: one read transaction, so a consistent snapshot of the log and its
 *   tables while the daemon goes on writing (WAL: writers are not blocked), compacted as it is
 *   copied. The file is created 0600 (never over an existing one) and checked before the command
 *   says it is done: `PRAGMA integrity_check`, its log format, its events counted.
 * - **Restore** puts such a file in place of the data directory's `loops.db`, after checking it the
 *   same way (a format newer than this loops is refused with the version to install). It refuses to
 *   replace a live store: not while a daemon runs, and not over a log that holds events unless
 *   `force` (the old database is then kept beside it, never deleted). The copy is written to a
 *   temporary file, fsynced and renamed into place; the tables are then rebuilt from the restored
 *   log if they differ from it.
 * - Archive files (`archive/`) and run output folders are not in the backup: copy the data
 *   directory's `archive/` with it if you keep archives (docs/cli.md).
 */
import { closeSync, copyFileSync, existsSync, fsyncSync, openSync, renameSync, statSync, chmodSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { LOG_FORMAT_VERSION } from '../../events/db.js';
import { FormatVersionError, LoopsError, UsageError } from '../../events/errors.js';
import { runningDaemon } from '../daemon/daemon-info.js';
import { databaseFile } from '../paths.js';
import { ensureDataDir, openReader } from '../store.js';
import { rebuildProjections, verifyProjections } from './projections.js';

export interface BackupReport {
  file: string;
  bytes: number;
  events: number;
  /** The log format of the copy. */
  format: number;
}

export interface RestoreReport {
  file: string;
  events: number;
  format: number;
  /** Where the database it replaced was moved (`force`), or null. */
  replaced: string | null;
  /** True when the tables differed from the restored log and were rebuilt from it. */
  rebuilt: boolean;
}

/** Opens `file` read-only and checks it is a sound loops database; returns its events and format. */
function inspect(file: string, what: string): { events: number; format: number } {
  let db: Database.Database;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
  } catch (error) {
    throw new UsageError(`${what}: cannot open ${file}: ${(error as Error).message}`, { hint: 'give the path of a file loops backup wrote' });
  }
  try {
    let integrity: string;
    let format: number;
    try {
      integrity = (db.pragma('integrity_check', { simple: true }) as string) ?? 'unknown';
      format = db.pragma('user_version', { simple: true }) as number;
    } catch (error) {
      throw new UsageError(`${what}: ${file} is not a SQLite database (${(error as Error).message})`, { hint: 'give the path of a file loops backup wrote' });
    }
    if (integrity !== 'ok') {
      throw new LoopsError('internal', `${what}: ${file} is damaged (integrity check: ${integrity.split('\n')[0]})`, { hint: 'use another backup' });
    }
    if (format > LOG_FORMAT_VERSION) {
      throw new FormatVersionError(`${what}: ${file} uses log format ${format}, but this loops understands only up to ${LOG_FORMAT_VERSION}`, {
        hint: 'install the loops that wrote it, or a newer one (npm i -g loops@latest)',
      });
    }
    const hasEvents = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'").get() !== undefined;
    if (format < 1 || !hasEvents) throw new UsageError(`${what}: ${file} is not a loops database (no event log in it)`, { hint: 'give the path of a file loops backup wrote' });
    return { events: (db.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number }).n, format };
  } finally {
    db.close();
  }
}

const absolute = (file: string) => (isAbsolute(file) ? file : resolve(file));

/** Writes a consistent copy of the data directory's log and tables to `target` (a new file). */
export async function backup(dataDir: string, target: string): Promise<BackupReport> {
  const file = absolute(target);
  if (existsSync(file)) throw new UsageError(`loops backup: ${file} exists`, { hint: 'give a new file name; a backup never overwrites a file' });
  if (!existsSync(dirname(file))) throw new UsageError(`loops backup: directory ${dirname(file)} does not exist`, { hint: 'create it first' });
  const reader = await openReader(dataDir);
  const before = process.umask(0o077);
  try {
    reader.db.prepare('VACUUM INTO ?').run(file);
  } catch (error) {
    throw new LoopsError('internal', `loops backup: cannot write ${file}: ${(error as Error).message}`, { cause: error, hint: 'check the space and permissions there' });
  } finally {
    process.umask(before);
    reader.close();
  }
  chmodSync(file, 0o600);
  const { events, format } = inspect(file, 'loops backup');
  return { file, bytes: statSync(file).size, events, format };
}

/** Puts the backup `source` in place of the data directory's database (see the header). */
export async function restore(dataDir: string, source: string, options: { force?: boolean; now?: number } = {}): Promise<RestoreReport> {
  const file = absolute(source);
  const { events, format } = inspect(file, 'loops restore');
  const daemon = runningDaemon(dataDir);
  if (daemon) {
    throw new UsageError(`loops restore: a daemon (pid ${daemon.pid}) is running on ${dataDir}`, { hint: 'loops daemon stop, then restore, then loops daemon start' });
  }
  ensureDataDir(dataDir);
  const live = databaseFile(dataDir);
  let replaced: string | null = null;
  if (existsSync(live) && statSync(live).size > 0) {
    const current = inspectLive(live);
    if (current > 0 && !options.force) {
      throw new UsageError(`loops restore: ${live} already holds a log (${current} events)`, {
        hint: 'restore into an empty data directory (LOOPS_DATA_DIR=… loops restore FILE), or add --force to keep the current database beside it and restore over it',
      });
    }
    replaced = `${live}.before-restore-${new Date(options.now ?? Date.now()).toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z')}`;
    for (const suffix of ['', '-wal', '-shm']) if (existsSync(live + suffix)) renameSync(live + suffix, replaced + suffix);
  }
  const tmp = `${live}.restoring`;
  copyFileSync(file, tmp);
  chmodSync(tmp, 0o600);
  const fd = openSync(tmp, 'r+');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, live);
  const dirFd = openSync(dataDir, 'r');
  try {
    fsyncSync(dirFd);
  } finally {
    closeSync(dirFd);
  }
  // The tables are projections of the log: rebuilt from the restored log when they differ from it.
  const reader = await openReader(dataDir);
  let rebuilt = false;
  try {
    if (!verifyProjections(reader.db).ok) {
      rebuildProjections(reader.db);
      rebuilt = true;
    }
  } finally {
    reader.close();
  }
  return { file, events, format, replaced, rebuilt };
}

/** Events in the data directory's current database (0 when it has no log yet). */
function inspectLive(file: string): number {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const has = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'").get() !== undefined;
    return has ? (db.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number }).n : 0;
  } finally {
    db.close();
  }
}

