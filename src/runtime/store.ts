/**
 * Opening a data directory: the database, the projection tables (created, or rebuilt when a
 * projection's version moved), and — for commands that write — the event log with the inline
 * projections. `openReader` is the light path for read-only commands (no zod, rxjs or xstate).
 */
import { chmodSync, existsSync, mkdirSync } from 'node:fs';
import { openDatabase, type Db } from '../events/db.js';
import { PROJECTION_VERSIONS, retiredProjections } from '../projections/versions.js';
import { databaseFile, resolveDataDir } from './paths.js';
import { chooseStore } from './store-choice.js';

export interface Reader {
  dataDir: string;
  db: Db;
  close(): void;
}

export function ensureDataDir(dataDir: string): void {
  if (!existsSync(dataDir)) mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  else chmodSync(dataDir, 0o700);
}

/**
 * Opens the data directory's database and makes sure every projection table is current. On a
 * PostgreSQL store (`LOOPS_STORE`, store-choice.ts): its local replica, caught up with the log
 * first (one read of what it lacks), for the read to see every host's writes.
 */
export async function openReader(dataDir: string = resolveDataDir()): Promise<Reader> {
  ensureDataDir(dataDir);
  const choice = chooseStore(process.env, dataDir);
  if (choice.kind === 'postgres') {
    const { openPgParts } = await import('./pg-store.js');
    const parts = await openPgParts(dataDir, choice, { follow: false });
    // Caught up: the database connection is not needed for reading.
    await parts.store.end();
    return { dataDir, db: parts.db, close: () => parts.replica.close() };
  }
  return openSqliteReader(dataDir);
}

/** The data directory's own SQLite database (the embedded store), every projection current. */
export async function openSqliteReader(dataDir: string): Promise<Reader> {
  ensureDataDir(dataDir);
  const db = openDatabase(databaseFile(dataDir));
  const stale = staleProjections(db);
  if (stale.length > 0) {
    const { rebuildProjections } = await import('./admin/projections.js');
    try {
      rebuildProjections(db, stale);
    } catch (error) {
      db.close();
      const { LoopsError } = await import('../events/errors.js');
      throw new LoopsError('internal', `could not rebuild ${stale.join(', ')} from the log: ${(error as Error).message}`, {
        cause: error,
        hint: 'the log may hold events this version cannot read; LOOPS_DEBUG=1 shows details, and the log itself is untouched',
      });
    }
  }
  return { dataDir, db, close: () => db.close() };
}

/** Names of projections whose tables are missing or were built by another version. */
export function staleProjections(db: Db): string[] {
  const rows = db.prepare<[], { name: string; version: number }>('SELECT name, version FROM projections').all();
  const built = new Map(rows.map((r) => [r.name, r.version]));
  const stale = Object.entries(PROJECTION_VERSIONS)
    .filter(([name, version]) => built.get(name) !== version)
    .map(([name]) => name);
  // A retired projection still recorded: the rebuild drops its tables.
  if (stale.length === 0 && retiredProjections.some((r) => built.has(r.name))) stale.push(Object.keys(PROJECTION_VERSIONS)[0]!);
  return stale;
}
