/**
 * The projections on PostgreSQL (issue 15): the project's read model as tables in the store's
 * schema, kept by the same evolve functions as on SQLite — passed in by the caller (`openPgStore`'s
 * `projections`; the events layer does not import src/projections) — so the same log gives the
 * same rows in both (test/int/pg-projections.int.test.ts holds the golden logs to that).
 *
 *  - **At open** (`ensureProjections`), under the schema's migration lock (schema.ts
 *    `migrateLock`): a projection whose tables are missing, or whose recorded version (the
 *    schema's `projections` table) is not the one given, is rebuilt — its tables dropped,
 *    created from its DDL (dialect.ts `pgDdl`), and every event of the log replayed through its
 *    evolve in position order — in one transaction that holds the log head's row lock (core.ts),
 *    so no append of any process interleaves: the tables it commits are the log's up to the
 *    head. Appends waiting for that lock longer than their lock timeout fail busy (retryable).
 *    An opener waits for another's rebuild (no lock timeout on that transaction).
 *  - **Inline** (`projectionHandler`): each appended event's statements, in the append's
 *    transaction (pg-log.ts), as on SQLite.
 *  - **Rebuild** (`rebuildProjections`): the open's rebuild, on demand.
 *  - **Verify** (`verifyProjections`): the counterpart of SQLite's `projections verify`
 *    (src/runtime/admin/projections.ts): the projections rebuilt from the log into temporary
 *    tables — which the projections' unqualified table names find before the schema's, so their
 *    statements run unchanged — and compared with the live tables row by row in key order, in one
 *    REPEATABLE READ transaction (the events and the live tables of one instant, while the fleet
 *    appends), rolled back at the end (the temporary tables go with it). Memory stays flat: the
 *    events are read in pages and both sides of a table are walked by cursors.
 *
 * Retired projections (SQLite's `retiredProjections`) are not handled here: no PostgreSQL schema
 * has ever had one.
 */
import type { QueryResultRow } from 'pg';
import { LoopsError } from '../errors.js';
import { rowToEvent, type EventRow } from '../sqlite-log.js';
import type { InlineHandler, SqlStatement, StoredEvent } from '../types.js';
import { isConnectionLoss, type Checkout, type PgConnection } from './connect.js';
import { checkIdentifier, pgDdl } from './dialect.js';
import { migrateLock } from './schema.js';
import { EVENT_COLUMNS, ident, pgPlaceholders, type Names } from './sql.js';

/** A projection as the PostgreSQL store takes it: src/projections' `Projection` fits. */
export interface PgProjection {
  name: string;
  version: number;
  /** DDL creating its tables and indexes, in SQLite's dialect (translated by dialect.ts). */
  ddl: ReadonlyArray<string>;
  /** Its tables, each with the columns that order its rows deterministically (a unique key: verify). */
  tables: ReadonlyArray<{ name: string; orderBy: string }>;
  handles: ReadonlySet<string>;
  evolve(event: StoredEvent): ReadonlyArray<SqlStatement>;
}

export interface PgRebuildResult {
  projections: string[];
  events: number;
  rows: Record<string, number>;
}

/** A table compared by verify (the shape of SQLite's `TableDiff`). */
export interface PgTableDiff {
  table: string;
  liveRows: number;
  rebuiltRows: number;
  /** Up to `limit` human-readable differences, then `…` when there were more. */
  differences: string[];
}

/** What verify found (the shape of SQLite's `VerifyResult`). */
export interface PgVerifyResult {
  ok: boolean;
  /** Events replayed. */
  events: number;
  tables: PgTableDiff[];
}

/** Events read per page while replaying; rows fetched per page while comparing. */
const PAGE = 1000;

/** One inline handler for the projections, in their order (registry.ts `inlineHandler`'s twin). */
export function projectionHandler(list: ReadonlyArray<PgProjection>): InlineHandler {
  return (event) => {
    const out: SqlStatement[] = [];
    for (const projection of list) {
      if (projection.handles.has(event.type)) out.push(...projection.evolve(event));
    }
    return out;
  };
}

/** Checks the projections' table and key names (they are put in SQL), that no two share a name or a table, and that none owns a table of the store's. */
export function checkProjections(list: ReadonlyArray<PgProjection>): void {
  const names = new Set<string>();
  const tables = new Set<string>();
  for (const projection of list) {
    if (names.has(projection.name)) throw new LoopsError('internal', `projection ${projection.name} is given twice`);
    names.add(projection.name);
    for (const table of projection.tables) {
      checkIdentifier(table.name, `projection ${projection.name}'s table`);
      // A rebuild drops a projection's tables: never the log's.
      if (STORE_TABLES.has(table.name)) throw new LoopsError('internal', `projection ${projection.name} names the store's own table ${table.name}`);
      if (tables.has(table.name)) throw new LoopsError('internal', `table ${table.name} belongs to two projections`);
      tables.add(table.name);
      for (const column of keyColumns(table.orderBy)) checkIdentifier(column, `table ${table.name}'s orderBy column`);
    }
  }
}

/** The store's own tables (schema.ts), which no projection may own. */
const STORE_TABLES: ReadonlySet<string> = new Set(['events', 'streams', 'projections', 'leases', 'log_head', 'loops_migrations']);

const keyColumns = (orderBy: string) => orderBy.split(',').map((c) => c.trim());

/**
 * At open: creates the projections' tables, or rebuilds the ones whose version moved (or whose
 * tables are missing) from the log, under the schema's migration lock. Returns the names rebuilt.
 */
export async function ensureProjections(conn: PgConnection, names: Names, list: ReadonlyArray<PgProjection>): Promise<string[]> {
  if (list.length === 0) return [];
  const out = await conn.checkout();
  const { client } = out;
  let stale: PgProjection[] = [];
  try {
    // Read first without the lock: the usual open finds every projection current and writes nothing.
    if ((await staleProjections(client, names, list)).length === 0) {
      out.release();
      return [];
    }
    await client.query('BEGIN');
    try {
      // Waits for another opener's rebuild however long it takes (the store's lock timeout is for appends).
      await client.query('SET LOCAL lock_timeout = 0');
      await migrateLock(client, names);
      stale = await staleProjections(client, names, list);
      if (stale.length > 0) await rebuildIn(client, names, stale);
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    }
    out.release();
    return stale.map((p) => p.name);
  } catch (error) {
    out.release(error);
    throw rebuildError(conn, names, stale.length ? stale : list, error);
  }
}

/**
 * Drops and rebuilds projections (all of `list`, or those named in `only`, by projection or table
 * name) from the log, in one transaction holding the log head: no append interleaves.
 */
export async function rebuildProjections(conn: PgConnection, names: Names, list: ReadonlyArray<PgProjection>, only?: ReadonlyArray<string>): Promise<PgRebuildResult> {
  const chosen = only ? list.filter((p) => only.includes(p.name) || p.tables.some((t) => only.includes(t.name))) : [...list];
  const out = await conn.checkout();
  const { client } = out;
  try {
    await client.query('BEGIN');
    let result: PgRebuildResult;
    try {
      await migrateLock(client, names);
      result = await rebuildIn(client, names, chosen);
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    }
    out.release();
    return result;
  } catch (error) {
    out.release(error);
    throw rebuildError(conn, names, chosen, error);
  }
}

/** The projections of `list` whose tables are missing or were built by another version (or none). */
async function staleProjections(client: Checkout['client'], names: Names, list: ReadonlyArray<PgProjection>): Promise<PgProjection[]> {
  const recorded = new Map((await client.query<{ name: string; version: number }>(`SELECT name, version FROM ${names.projections}`)).rows.map((r) => [r.name, r.version]));
  const present = await tablesIn(client, names.schema);
  return list.filter((p) => recorded.get(p.name) !== p.version || p.tables.some((t) => !present.has(t.name)));
}

/** The tables of `schema`, by name. */
async function tablesIn(client: Checkout['client'], schema: string): Promise<Set<string>> {
  const rows = await client.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')`,
    [schema],
  );
  return new Set(rows.rows.map((r) => r.name));
}

/** Inside a transaction (its caller's): lock the log head, drop, create, replay the whole log, record the versions. */
async function rebuildIn(client: Checkout['client'], names: Names, list: ReadonlyArray<PgProjection>): Promise<PgRebuildResult> {
  await client.query(`SET LOCAL search_path TO ${ident(names.schema)}`);
  // The appends' lock (core.ts): held to this transaction's end, so the tables it commits are
  // exactly the log's up to the head, and appends after it apply their events on top of them.
  await client.query(`SELECT position FROM ${names.logHead} FOR UPDATE`);
  for (const projection of list) {
    for (const table of projection.tables) await client.query(`DROP TABLE IF EXISTS ${ident(names.schema)}.${ident(table.name)}`);
  }
  for (const projection of list) {
    for (const ddl of projection.ddl) await client.query(pgDdl(ddl));
  }
  const events = await replay(client, names, list);
  const rows: Record<string, number> = {};
  for (const projection of list) {
    await client.query(`INSERT INTO ${names.projections} (name, version) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET version = excluded.version`, [
      projection.name,
      projection.version,
    ]);
    for (const table of projection.tables) {
      rows[table.name] = (await client.query<{ n: number }>(`SELECT count(*)::bigint AS n FROM ${ident(names.schema)}.${ident(table.name)}`)).rows[0]!.n;
    }
  }
  return { projections: list.map((p) => p.name), events, rows };
}

/**
 * Every event of the log, in position order and read in pages, through the projections' evolve;
 * their statements run on `client` (its transaction). Returns how many events were replayed.
 */
async function replay(client: Checkout['client'], names: Names, list: ReadonlyArray<PgProjection>): Promise<number> {
  const handler = projectionHandler(list);
  let after = 0;
  let count = 0;
  for (;;) {
    const page = (await client.query<EventRow>(`SELECT ${EVENT_COLUMNS} FROM ${names.events} WHERE position > $1 ORDER BY position LIMIT ${PAGE}`, [after])).rows;
    for (const row of page) {
      const event = rowToEvent(row);
      try {
        for (const statement of handler(event)) await client.query(pgPlaceholders(statement.sql), [...statement.params]);
      } catch (error) {
        if (isConnectionLoss(error)) throw error;
        throw new LoopsError('internal', `event ${event.position} (${event.streamId} version ${event.version}, ${event.type}): ${(error as Error).message}`, { cause: error });
      }
      count += 1;
    }
    if (page.length < PAGE) return count;
    after = page[page.length - 1]!.position;
  }
}

/** A rebuild that failed, said the way SQLite's store says it (store.ts); a lost server is the connection's error. */
function rebuildError(conn: PgConnection, names: Names, list: ReadonlyArray<PgProjection>, error: unknown): unknown {
  if (isConnectionLoss(error) || (error as { code?: string }).code === '42501') return conn.connectError(error, 'create or rebuild the projections’ tables');
  const what = list.map((p) => p.name).join(', ');
  return new LoopsError('internal', `PostgreSQL at ${conn.where}, schema ${names.schema}: could not rebuild ${what} from the log: ${(error as Error).message ?? String(error)}`, {
    cause: error,
    hint: 'the log may hold events this version cannot read; LOOPS_DEBUG=1 shows details, and the log itself is untouched',
  });
}

/**
 * Rebuilds every projection of `list` from the log into temporary tables and compares them with
 * the live tables, row by row in key order (`orderBy`): rows missing from the live table and
 * changed columns, then rows only in the live table — the first `limit` of them per table.
 */
export async function verifyProjections(conn: PgConnection, names: Names, list: ReadonlyArray<PgProjection>, limit = 10): Promise<PgVerifyResult> {
  const out = await conn.checkout();
  const { client } = out;
  try {
    // One snapshot for the events and the live tables; not READ ONLY (temporary tables are written).
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    try {
      await client.query(`SET LOCAL search_path TO ${ident(names.schema)}`);
      for (const projection of list) {
        for (const ddl of projection.ddl) await client.query(pgDdl(ddl, { temp: true }));
      }
      const events = await replay(client, names, list);
      const live = await tablesIn(client, names.schema);
      const tables: PgTableDiff[] = [];
      for (const projection of list) {
        for (const table of projection.tables) {
          if (!live.has(table.name)) {
            const rebuiltRows = (await client.query<{ n: number }>(`SELECT count(*)::bigint AS n FROM pg_temp.${ident(table.name)}`)).rows[0]!.n;
            tables.push({ table: table.name, liveRows: 0, rebuiltRows, differences: ['the table is missing from the schema: a rebuild of its projection recreates it from the log'] });
            continue;
          }
          tables.push(await compareTable(client, `${ident(names.schema)}.${ident(table.name)}`, `pg_temp.${ident(table.name)}`, table.name, table.orderBy, limit));
        }
      }
      await client.query('ROLLBACK');
      out.release();
      return { ok: tables.every((t) => t.differences.length === 0), events, tables };
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    }
  } catch (error) {
    out.release(error);
    if (isConnectionLoss(error)) throw conn.connectError(error, 'verify the projections');
    throw error;
  }
}

type Row = Record<string, unknown>;

/** PostgreSQL's text types: ordered by `COLLATE "C"` (bytes, as SQLite's BINARY and `compareKeys`). */
const TEXT_TYPES = new Set([25, 1042, 1043]);

/** A merge join of the live and the rebuilt rows of a table in key order, one page of each at a time (SQLite's compareTable). */
async function compareTable(client: Checkout['client'], liveName: string, rebuiltName: string, table: string, key: string, limit: number): Promise<PgTableDiff> {
  const columns = keyColumns(key);
  const fields = (await client.query(`SELECT * FROM ${rebuiltName} LIMIT 0`)).fields;
  const text = new Set(fields.filter((f) => TEXT_TYPES.has(f.dataTypeID)).map((f) => f.name));
  const order = columns.map((c) => `${ident(c)}${text.has(c) ? ' COLLATE "C"' : ''} NULLS FIRST`).join(', ');
  const keyOf = (row: Row) => columns.map((c) => String(row[c])).join('/');
  const changed: string[] = [];
  const liveOnly: string[] = [];
  let found = 0;
  const note = (into: string[], line: string) => {
    found += 1;
    if (into.length <= limit) into.push(line);
  };
  const liveRows = await Cursor.open(client, 'loops_verify_live', `SELECT * FROM ${liveName} ORDER BY ${order}`);
  const rebuiltRows = await Cursor.open(client, 'loops_verify_rebuilt', `SELECT * FROM ${rebuiltName} ORDER BY ${order}`);
  let liveCount = 0;
  let rebuiltCount = 0;
  let l = await liveRows.next();
  let r = await rebuiltRows.next();
  while (l !== undefined || r !== undefined) {
    const d = l === undefined ? 1 : r === undefined ? -1 : compareKeys(l, r, columns);
    if (d < 0) {
      note(liveOnly, `${table} ${key}=${keyOf(l!)}: in the live table but not in the log`);
      liveCount += 1;
      l = await liveRows.next();
    } else if (d > 0) {
      note(changed, `${table} ${key}=${keyOf(r!)}: missing from the live table`);
      rebuiltCount += 1;
      r = await rebuiltRows.next();
    } else {
      for (const column of new Set([...Object.keys(r!), ...Object.keys(l!)])) {
        if (JSON.stringify(r![column]) !== JSON.stringify(l![column])) {
          note(changed, `${table} ${key}=${keyOf(r!)}: ${column} is ${short(l![column])} live, ${short(r![column])} rebuilt from the log`);
        }
      }
      liveCount += 1;
      rebuiltCount += 1;
      l = await liveRows.next();
      r = await rebuiltRows.next();
    }
  }
  await liveRows.close();
  await rebuiltRows.close();
  const differences = [...changed, ...liveOnly].slice(0, limit);
  if (found > limit) differences.push('…');
  return { table, liveRows: liveCount, rebuiltRows: rebuiltCount, differences };
}

/** A cursor of the transaction, read a page at a time. */
class Cursor {
  private rows: Row[] = [];
  private at = 0;
  private ended = false;

  private constructor(
    private readonly client: Checkout['client'],
    private readonly name: string,
  ) {}

  static async open(client: Checkout['client'], name: string, query: string): Promise<Cursor> {
    await client.query(`DECLARE ${name} NO SCROLL CURSOR FOR ${query}`);
    return new Cursor(client, name);
  }

  async next(): Promise<Row | undefined> {
    if (this.at < this.rows.length) return this.rows[this.at++];
    if (this.ended) return undefined;
    this.rows = (await this.client.query<QueryResultRow>(`FETCH ${PAGE} FROM ${this.name}`)).rows;
    this.at = 0;
    if (this.rows.length < PAGE) this.ended = true;
    return this.rows.length > 0 ? this.rows[this.at++] : undefined;
  }

  async close(): Promise<void> {
    await this.client.query(`CLOSE ${this.name}`);
  }
}

/** The order of two rows by their key columns, as the SQL orders them: NULL first, numbers, text by its UTF-8 bytes. */
function compareKeys(a: Row, b: Row, columns: readonly string[]): number {
  for (const c of columns) {
    const d = compareValues(a[c], b[c]);
    if (d !== 0) return d;
  }
  return 0;
}

function compareValues(a: unknown, b: unknown): number {
  if (a === b) return 0;
  const rank = (v: unknown) => (v === null || v === undefined ? 0 : typeof v === 'number' ? 1 : 2);
  const ra = rank(a);
  const rb = rank(b);
  if (ra !== rb) return ra - rb;
  if (ra === 0) return 0;
  if (ra === 1) return (a as number) < (b as number) ? -1 : (a as number) > (b as number) ? 1 : 0;
  return Buffer.compare(Buffer.from(String(a)), Buffer.from(String(b)));
}

function short(value: unknown): string {
  const text = JSON.stringify(value) ?? 'undefined';
  return text.length > 60 ? `${text.slice(0, 57)}…` : text;
}
