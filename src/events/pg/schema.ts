/**
 * The PostgreSQL store's tables, in numbered migrations applied in order and recorded in the
 * schema's `loops_migrations` table (the single DDL source for them, as `migrations` in db.ts is
 * for SQLite), and the log format check.
 *
 * The columns mirror SQLite's (db.ts) so an event is the same bytes in both: `data`, `meta` and
 * `state` are the JSON text loops wrote (TEXT, not JSONB, which would reorder keys and respell
 * numbers), `at` and the streams' times the ISO text of the appender's clock. Differences, each
 * for a reason:
 *  - `events.position` is assigned by the store from `log_head` (below), not by a sequence: a
 *    sequence value is taken at INSERT, so a transaction that commits late would put a lower
 *    position behind a higher one a reader has already passed (docs/design/postgres.md, item 1).
 *  - `leases.expires_at` is epoch milliseconds (BIGINT), not ISO text: the take and the fence
 *    compare it in SQL, and text comparison in PostgreSQL follows the database's collation.
 *  - `log_head` is new: the last position used and the log format, one row, locked by every
 *    writing transaction until its commit — PostgreSQL's stand-in for SQLite's single writer.
 *  - the schema holds three functions SQLite has built in, for the projections' SQL (dialect.ts).
 * The projections' own tables are not migrations: they are created (and rebuilt when a
 * projection's version moves) by projections.ts, under the same advisory lock (`migrateLock`).
 */
import { FormatVersionError, NotFoundError } from '../errors.js';
import { LOG_FORMAT_VERSION } from '../db.js';
import type { Checkout, PgConnection } from './connect.js';
import { SQLITE_FUNCTIONS } from './dialect.js';
import { ident, type Names } from './sql.js';

/** Numbered migrations, run with the store's schema as search_path; index i migrates i to i+1. */
const migrations: ReadonlyArray<string> = [
  `
  CREATE TABLE events (
    -- From log_head, in the appending transaction: gap-free and in commit order.
    position  BIGINT  PRIMARY KEY,
    stream_id TEXT    NOT NULL,
    version   BIGINT  NOT NULL,
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
    version         BIGINT  NOT NULL,
    machine_id      TEXT,
    machine_version INTEGER,
    created_at      TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL
  );
  -- Projection bookkeeping: which version of each projection built its tables.
  CREATE TABLE projections (
    name    TEXT PRIMARY KEY,
    version INTEGER NOT NULL
  );
  -- Operational, not a projection (documented exception): leases with fencing tokens.
  CREATE TABLE leases (
    name       TEXT   PRIMARY KEY,
    holder     TEXT   NOT NULL,
    token      BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
  );
  -- One row: the last position used, and the log format (db.ts, LOG_FORMAT_VERSION).
  CREATE TABLE log_head (
    id       BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (id),
    position BIGINT  NOT NULL,
    format   INTEGER NOT NULL
  );
  INSERT INTO log_head (position, format) VALUES (0, 1);
  `,
  // The SQLite functions the projections' SQL uses (dialect.ts): julianday, scalar max, group_concat.
  SQLITE_FUNCTIONS,
];

/**
 * Creates the schema and applies the migrations it lacks, one process at a time (an advisory lock
 * per schema: two daemons starting together do not both migrate). Returns the log head and format.
 */
export async function migrate(conn: PgConnection, names: Names, options: { create?: boolean } = {}): Promise<{ head: number; format: number }> {
  let out: Checkout;
  try {
    out = await conn.checkout();
  } catch (error) {
    throw conn.connectError(error);
  }
  const { client } = out;
  try {
    const applied = await appliedMigrations(client, names);
    if (applied === 0 && options.create === false) {
      throw new NotFoundError(`PostgreSQL at ${conn.where}: schema ${names.schema} holds no loops log`, {
        hint: 'check the schema name (?schema=… in the URL; default loops) and the database: loops makes a log only in a store it writes to',
      });
    }
    if (applied !== migrations.length) {
      await client.query('BEGIN');
      try {
        await migrateLock(client, names);
        // Checked before CREATE SCHEMA: creating needs the CREATE right on the database, using an existing one does not.
        const exists = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [names.schema]);
        if (exists.rowCount === 0) await client.query(`CREATE SCHEMA ${ident(names.schema)}`);
        await client.query(`CREATE TABLE IF NOT EXISTS ${names.migrations} (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`);
        // Read again under the lock: another process may have migrated meanwhile.
        const inside = await appliedMigrations(client, names);
        refuseNewer(conn, inside, 'schema');
        await client.query(`SET LOCAL search_path TO ${ident(names.schema)}`);
        for (let i = inside; i < migrations.length; i++) {
          await client.query(migrations[i]!);
          await client.query(`INSERT INTO ${names.migrations} (version) VALUES ($1)`, [i + 1]);
        }
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {});
        throw error;
      }
    }
    const head = await client.query<{ position: number; format: number }>(`SELECT position, format FROM ${names.logHead}`);
    const row = head.rows[0];
    if (!row) throw new FormatVersionError(`PostgreSQL at ${conn.where}, schema ${names.schema}: the log head row is missing`, { hint: 'the schema was edited by hand: restore it from a backup' });
    refuseNewer(conn, row.format, 'log');
    out.release();
    return { head: row.position, format: row.format };
  } catch (error) {
    out.release(error);
    if (error instanceof FormatVersionError || error instanceof NotFoundError) throw error;
    throw conn.connectError(error, 'create or read loops’ tables');
  }
}

/**
 * The advisory lock, per schema, that one process holds while it changes the schema's tables (the
 * migrations here, the projections' tables in projections.ts), to its transaction's end.
 */
export async function migrateLock(client: Checkout['client'], names: Names): Promise<void> {
  await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`loops migrate ${names.schema}`]);
}

/** How many migrations the schema has had (0 when it or its table does not exist yet). */
async function appliedMigrations(client: Checkout['client'], names: Names): Promise<number> {
  const table = await client.query<{ present: boolean }>('SELECT to_regclass($1) IS NOT NULL AS present', [names.migrations]);
  if (!table.rows[0]?.present) return 0;
  const result = await client.query<{ n: number | null }>(`SELECT max(version) AS n FROM ${names.migrations}`);
  return result.rows[0]?.n ?? 0;
}

/** A schema migrated, or a log written, by a newer loops is refused, as db.ts refuses a newer database file. */
function refuseNewer(conn: PgConnection, found: number, what: 'schema' | 'log'): void {
  const known = what === 'schema' ? migrations.length : LOG_FORMAT_VERSION;
  if (found > known) {
    throw new FormatVersionError(
      `PostgreSQL at ${conn.where}, schema ${conn.schema}: the ${what === 'schema' ? 'tables are at migration' : 'log uses format'} ${found}, but this loops understands only up to ${known}`,
      { hint: 'upgrade loops (npm i -g loops@latest) on this host, or use another schema' },
    );
  }
}
