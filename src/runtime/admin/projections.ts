/**
 * `projections rebuild` (drop, recreate, replay the whole log) and `projections verify`
 * (rebuild into a scratch database and compare with the live tables row by row, in key order).
 */
import Database from 'better-sqlite3';
import { cached, writeTransaction, type Db } from '../../events/db.js';
import { iterateEvents } from '../../events/sqlite-log.js';
import type { StoredEvent } from '../../events/types.js';
import { inlineHandler, projections as allProjections, retiredProjections } from '../../projections/registry.js';
import type { Projection } from '../../projections/types.js';

type Row = Record<string, unknown>;

/** Every event of the log, in position order (the store's iterator). */
const eventsOf = (db: Db) => iterateEvents(db);

function select(names?: ReadonlyArray<string>): Projection[] {
  if (!names) return [...allProjections];
  return allProjections.filter((p) => names.includes(p.name) || p.tables.some((t) => names.includes(t.name)));
}

/** Applies `events` to `target` for the given projections (the caller owns the transaction). */
function apply(target: Db, source: Iterable<StoredEvent>, list: Projection[]): number {
  const handler = inlineHandler(list);
  let count = 0;
  for (const event of source) {
    count += 1;
    for (const statement of handler(event)) cached(target, statement.sql).run(...statement.params);
  }
  return count;
}

function createTables(db: Db, list: Projection[]): void {
  for (const projection of list) {
    for (const table of projection.tables) db.exec(`DROP TABLE IF EXISTS ${table.name}`);
    for (const ddl of projection.ddl) db.exec(ddl);
  }
}

export interface RebuildResult {
  projections: string[];
  events: number;
  rows: Record<string, number>;
}

/** Drops and rebuilds projections from the log in one transaction. */
export function rebuildProjections(db: Db, names?: ReadonlyArray<string>): RebuildResult {
  const list = select(names);
  // One write transaction (BEGIN IMMEDIATE): a lock held past the busy timeout is the busy error (exit 75).
  return writeTransaction(db, (): RebuildResult => {
      for (const retired of retiredProjections) {
        for (const table of retired.tables) db.exec(`DROP TABLE IF EXISTS ${table}`);
        db.prepare('DELETE FROM projections WHERE name = ?').run(retired.name);
      }
      createTables(db, list);
      const events = apply(db, eventsOf(db), list);
      const upsert = db.prepare(
        'INSERT INTO projections (name, version) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET version = excluded.version',
      );
      const rows: Record<string, number> = {};
      for (const projection of list) {
        upsert.run(projection.name, projection.version);
        for (const table of projection.tables) {
          rows[table.name] = (db.prepare(`SELECT COUNT(*) AS n FROM ${table.name}`).get() as { n: number }).n;
        }
      }
      return { projections: list.map((p) => p.name), events, rows };
    });
}

export interface TableDiff {
  table: string;
  liveRows: number;
  rebuiltRows: number;
  /** Up to `limit` human-readable differences. */
  differences: string[];
}

export interface VerifyResult {
  ok: boolean;
  events: number;
  tables: TableDiff[];
}

/**
 * Rebuilds every projection into a scratch database and compares it with the live tables.
 *
 * Memory stays flat in the size of the log: the scratch database is a temporary file (SQLite's
 * private temp database, deleted on close) whose pages live in its bounded page cache, the events
 * are read in pages, and both sides of each table are walked together in key order (`orderBy`, a
 * unique key), one row of each at a time. Everything is read in one read transaction of the live
 * database, so the tables are compared with the events of the same instant even while a daemon
 * appends.
 */
/** The page cache of each side while verifying (negative: KiB). */
const VERIFY_CACHE_KIB = -2000;

export function verifyProjections(db: Db, limit = 10): VerifyResult {
  const list = select();
  const scratch = new Database('');
  const snapshot = !db.inTransaction;
  // Both sides are read once, in order: a small page cache serves that as well as the default 16 MB
  // (better-sqlite3's), and keeps the peak low. The live connection's is restored afterwards.
  const cacheSize = db.pragma('cache_size', { simple: true }) as number;
  try {
    db.pragma(`cache_size = ${VERIFY_CACHE_KIB}`);
    scratch.pragma(`cache_size = ${VERIFY_CACHE_KIB}`);
    // Nothing to recover: a crash loses only the scratch file.
    scratch.pragma('journal_mode = OFF');
    scratch.pragma('synchronous = OFF');
    createTables(scratch, list);
    if (snapshot) db.exec('BEGIN');
    const events = scratch.transaction(() => apply(scratch, eventsOf(db), list))();
    const tables: TableDiff[] = [];
    for (const projection of list) {
      for (const table of projection.tables) {
        if (!db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(table.name)) {
          // A dropped (or never created) table is a difference to report, not a crash.
          const rebuiltRows = (scratch.prepare(`SELECT COUNT(*) AS n FROM ${table.name}`).get() as { n: number }).n;
          tables.push({ table: table.name, liveRows: 0, rebuiltRows, differences: ['the table is missing from the database: loops projections rebuild recreates it from the log'] });
          continue;
        }
        tables.push(compareTable(db, scratch, table.name, table.orderBy, limit));
      }
    }
    return { ok: tables.every((t) => t.differences.length === 0), events, tables };
  } finally {
    if (snapshot && db.inTransaction) db.exec('COMMIT');
    db.pragma(`cache_size = ${cacheSize}`);
    scratch.close();
  }
}

/**
 * Walks the live and the rebuilt rows of a table together in key order (a merge join on `key`,
 * one column or a comma-separated composite key), holding one row of each side. The differences:
 * rows missing from the live table and changed columns, in key order, then rows only in the live
 * table, in key order; the first `limit` of them, and `…` when there were more.
 */
function compareTable(live: Db, rebuilt: Db, table: string, key: string, limit: number): TableDiff {
  const columns = key.split(',').map((c) => c.trim());
  const keyOf = (row: Row) => columns.map((c) => String(row[c])).join('/');
  const order = (a: Row, b: Row) => {
    for (const c of columns) {
      const d = compareSqlite(a[c], b[c]);
      if (d !== 0) return d;
    }
    return 0;
  };
  // Two bounded lists (rebuilt side first, as before): never more than limit + 1 lines are kept.
  const changed: string[] = [];
  const liveOnly: string[] = [];
  let found = 0;
  const note = (into: string[], line: string) => {
    found += 1;
    if (into.length <= limit) into.push(line);
  };
  const liveRows = live.prepare(`SELECT * FROM ${table} ORDER BY ${key}`).iterate() as IterableIterator<Row>;
  const rebuiltRows = rebuilt.prepare(`SELECT * FROM ${table} ORDER BY ${key}`).iterate() as IterableIterator<Row>;
  let liveCount = 0;
  let rebuiltCount = 0;
  try {
    let l = liveRows.next();
    let r = rebuiltRows.next();
    while (!l.done || !r.done) {
      const d = l.done ? 1 : r.done ? -1 : order(l.value, r.value);
      if (d < 0) {
        note(liveOnly, `${table} ${key}=${keyOf(l.value as Row)}: in the live table but not in the log`);
        liveCount += 1;
        l = liveRows.next();
      } else if (d > 0) {
        note(changed, `${table} ${key}=${keyOf(r.value as Row)}: missing from the live table`);
        rebuiltCount += 1;
        r = rebuiltRows.next();
      } else {
        const row = r.value as Row;
        const other = l.value as Row;
        for (const column of new Set([...Object.keys(row), ...Object.keys(other)])) {
          if (JSON.stringify(row[column]) !== JSON.stringify(other[column])) {
            note(changed, `${table} ${key}=${keyOf(row)}: ${column} is ${short(other[column])} live, ${short(row[column])} rebuilt from the log`);
          }
        }
        liveCount += 1;
        rebuiltCount += 1;
        l = liveRows.next();
        r = rebuiltRows.next();
      }
    }
  } finally {
    liveRows.return?.();
    rebuiltRows.return?.();
  }
  const differences = [...changed, ...liveOnly].slice(0, limit);
  if (found > limit) differences.push('…');
  return { table, liveRows: liveCount, rebuiltRows: rebuiltCount, differences };
}

/** SQLite's order of two values under the BINARY collation: NULL, numbers, text (UTF-8 bytes), blobs. */
function compareSqlite(a: unknown, b: unknown): number {
  if (a === b) return 0;
  const rank = (v: unknown) => (v === null || v === undefined ? 0 : typeof v === 'number' || typeof v === 'bigint' ? 1 : typeof v === 'string' ? 2 : 3);
  const ra = rank(a);
  const rb = rank(b);
  if (ra !== rb) return ra - rb;
  if (ra === 0) return 0;
  if (ra === 1) return (a as number) < (b as number) ? -1 : (a as number) > (b as number) ? 1 : 0;
  if (ra === 2) return Buffer.compare(Buffer.from(a as string), Buffer.from(b as string));
  return Buffer.compare(a as Buffer, b as Buffer);
}

function short(value: unknown): string {
  const text = JSON.stringify(value) ?? 'undefined';
  return text.length > 60 ? `${text.slice(0, 57)}…` : text;
}
