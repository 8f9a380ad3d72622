/**
 * `projections rebuild` (drop, recreate, replay the whole log) and `projections verify`
 * (rebuild into a scratch in-memory database and compare with the live tables row by row).
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

/** Rebuilds every projection into a scratch database and compares it with the live tables. */
export function verifyProjections(db: Db, limit = 10): VerifyResult {
  const list = select();
  const scratch = new Database(':memory:');
  try {
    createTables(scratch, list);
    const events = scratch.transaction(() => apply(scratch, eventsOf(db), list))();
    const tables: TableDiff[] = [];
    for (const projection of list) {
      for (const table of projection.tables) {
        const rebuiltCount = () => (scratch.prepare(`SELECT COUNT(*) AS n FROM ${table.name}`).get() as { n: number }).n;
        if (!db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(table.name)) {
          // A dropped (or never created) table is a difference to report, not a crash.
          tables.push({ table: table.name, liveRows: 0, rebuiltRows: rebuiltCount(), differences: ['the table is missing from the database: loops projections rebuild recreates it from the log'] });
          continue;
        }
        const live = db.prepare(`SELECT * FROM ${table.name} ORDER BY ${table.orderBy}`).all() as Row[];
        const rebuilt = scratch.prepare(`SELECT * FROM ${table.name} ORDER BY ${table.orderBy}`).all() as Row[];
        tables.push(diffRows(table.name, table.orderBy, live, rebuilt, limit));
      }
    }
    return { ok: tables.every((t) => t.differences.length === 0), events, tables };
  } finally {
    scratch.close();
  }
}

function diffRows(table: string, key: string, live: Row[], rebuilt: Row[], limit: number): TableDiff {
  // `orderBy` is one column or a comma-separated list (a composite key).
  const columns = key.split(',').map((c) => c.trim());
  const keyOf = (row: Row) => columns.map((c) => String(row[c])).join('/');
  const liveByKey = new Map(live.map((r) => [keyOf(r), r]));
  const rebuiltByKey = new Map(rebuilt.map((r) => [keyOf(r), r]));
  const differences: string[] = [];
  const push = (line: string) => {
    if (differences.length < limit) differences.push(line);
    else if (differences.length === limit) differences.push('…');
  };
  for (const [k, row] of rebuiltByKey) {
    const other = liveByKey.get(k);
    if (!other) {
      push(`${table} ${key}=${k}: missing from the live table`);
      continue;
    }
    for (const column of new Set([...Object.keys(row), ...Object.keys(other)])) {
      if (JSON.stringify(row[column]) !== JSON.stringify(other[column])) {
        push(`${table} ${key}=${k}: ${column} is ${short(other[column])} live, ${short(row[column])} rebuilt from the log`);
      }
    }
  }
  for (const k of liveByKey.keys()) {
    if (!rebuiltByKey.has(k)) push(`${table} ${key}=${k}: in the live table but not in the log`);
  }
  return { table, liveRows: live.length, rebuiltRows: rebuilt.length, differences };
}

function short(value: unknown): string {
  const text = JSON.stringify(value) ?? 'undefined';
  return text.length > 60 ? `${text.slice(0, 57)}…` : text;
}
