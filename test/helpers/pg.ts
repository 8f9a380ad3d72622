/**
 * PostgreSQL for tests of the PostgreSQL store: the server's URL (`LOOPS_TEST_PG_URL`, default the
 * machine's own, trust auth), whether it answers (a prerequisite: test/helpers/prerequisite.ts —
 * skipped loudly locally, a failure under CI), a schema per store under test, dropped afterwards
 * (`pgLog`: stores on one, ended when the test ends).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { onTestFinished } from 'vitest';
import { openPgStore, type PgStore, type PgStoreOptions } from '../../src/events/pg/index.js';

export const DEFAULT_PG_URL = 'postgres://postgres@127.0.0.1:5432/test';
export const PG_URL = process.env.LOOPS_TEST_PG_URL ?? DEFAULT_PG_URL;

/** True when the server answers `SELECT 1` within a few seconds, else why not (for `requirePrerequisite`). */
export async function pgReachable(url = PG_URL): Promise<true | string> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch (error) {
    const e = error as { code?: string; message?: string };
    return `no PostgreSQL at ${url.replace(/(\/\/[^:/@]*:)[^@/]*@/, '$1***@')} (${e.code ?? ''} ${e.message ?? String(error)}); start one or set LOOPS_TEST_PG_URL`;
  } finally {
    await client.end().catch(() => {});
  }
}

/** A schema name no other test run uses: `loops_test_<random>`. */
export function testSchemaName(): string {
  return `loops_test_${randomBytes(6).toString('hex')}`;
}

/** PostgreSQL stores on one schema of a test's own (`pgLog`). */
export interface PgLog {
  schema: string;
  /** Another store on the schema (as another process on the same log), with `more` over the log's options. */
  open(more?: Partial<PgStoreOptions>): Promise<PgStore>;
}

/**
 * PostgreSQL stores on one new schema (as several processes on one log), with `options`: ended and
 * the schema dropped when the test ends. The schema is added to `schemas`, the test file's, whose
 * `afterAll` drops any left over.
 */
export function pgLog(schemas: string[], options: Partial<PgStoreOptions> = {}): PgLog {
  const schema = testSchemaName();
  schemas.push(schema);
  const stores: PgStore[] = [];
  onTestFinished(async () => {
    for (const store of stores) await store.end();
    await dropSchemas([schema]);
  });
  return {
    schema,
    open: async (more = {}) => {
      const store = await openPgStore({ url: PG_URL, schema, ...options, ...more });
      stores.push(store);
      return store;
    },
  };
}

/** One connection of the test's own, for what the test does behind the store's back (DDL, pg_stat_activity, pg_terminate_backend). */
export async function adminClient(url = PG_URL): Promise<pg.Client> {
  // BIGINT as a number, as the store reads it (so its rows compare with SQLite's).
  const types = { getTypeParser: (oid: number, format?: 'text' | 'binary') => (oid === 20 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format)) };
  const client = new pg.Client({ connectionString: url, types: types as never });
  client.on('error', () => {});
  await client.connect();
  return client;
}

/** Drops the schemas (and everything in them). */
export async function dropSchemas(schemas: readonly string[], url = PG_URL): Promise<void> {
  if (schemas.length === 0) return;
  const client = await adminClient(url);
  try {
    for (const schema of schemas) await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}

/**
 * Bounded polling of the database's own state, which sends no event (a backend waiting for a lock,
 * as pg_stat_activity shows it). Never for the store's own progress: await its promises or events$.
 */
export async function waitForDb(cond: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Backends of `applicationName` waiting for a lock now. */
export async function lockWaiters(admin: pg.Client, applicationName: string): Promise<number> {
  const result = await admin.query<{ n: string }>(
    "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
    [applicationName],
  );
  return Number(result.rows[0]!.n);
}

/**
 * The rows of `schema`.`table` in the order SQLite gives them for `orderBy` (a comma-separated key):
 * text keys by their bytes (`COLLATE "C"`, SQLite's BINARY, whatever the database's collation),
 * NULL first. BIGINT columns come back as numbers when `client` is `adminClient`'s.
 */
export async function tableRows(client: pg.Client, schema: string, table: string, orderBy: string): Promise<Array<Record<string, unknown>>> {
  const name = `"${schema}"."${table}"`;
  const fields = (await client.query(`SELECT * FROM ${name} LIMIT 0`)).fields;
  const text = new Set(fields.filter((f) => f.dataTypeID === 25).map((f) => f.name));
  const order = orderBy
    .split(',')
    .map((c) => c.trim())
    .map((c) => `"${c}"${text.has(c) ? ' COLLATE "C"' : ''} NULLS FIRST`)
    .join(', ');
  return (await client.query(`SELECT * FROM ${name} ORDER BY ${order}`)).rows as Array<Record<string, unknown>>;
}
