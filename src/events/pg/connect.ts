/**
 * Connecting to PostgreSQL: the PostgreSQL store's one use of the driver as a value (`pg`, chosen by
 * measurement over postgres.js: docs/design/postgres.md), the settings every connection gets, and
 * PostgreSQL's errors said the project's way (what, where, how to fix; never the password).
 *
 * Loaded only by `src/events/pg/index.ts` — never by the SQLite store or the CLI's commands — so a
 * process that does not use PostgreSQL never loads the driver.
 */
import pg from 'pg';
import type { Client, ClientConfig, Pool, PoolClient, QueryResult, QueryResultRow } from 'pg';
import { busyError } from '../db.js';
import { isConnectionLoss, LoopsError, ValidationError } from '../errors.js';

export interface PgConnectOptions {
  /** `postgres://user[:password]@host[:port]/database[?…]` (`postgresql://` too). */
  url: string;
  /**
   * The schema that holds loops' tables, created (with them) when missing: one fleet's log per
   * schema. Lower-case letters, digits and `_`, at most 48 characters (the channel name of
   * LISTEN/NOTIFY is derived from it and PostgreSQL identifiers stop at 63).
   */
  schema: string;
  /** Connections in the pool (default 10); the LISTEN connection is one more. */
  poolSize?: number;
  /**
   * How long a write waits for a row lock another writer holds before it fails with the busy
   * error (default 5000 ms: SQLite's busy_timeout). Appends serialise on the log head's row.
   */
  lockTimeoutMs?: number;
  /** How long connecting may take (default 10000 ms). */
  connectTimeoutMs?: number;
  /** `application_name` of the connections, as `pg_stat_activity` shows them (default `loops`). */
  applicationName?: string;
  /**
   * How long a connection may sit idle inside an open transaction before the server ends it
   * (default `IDLE_IN_TRANSACTION_MS`). Every writing transaction holds the log's head row until it
   * commits: a writer frozen inside one (SIGSTOP, a VM paused, a partition) would stall every
   * host's writes for as long as it is frozen. Ended, its transaction is rolled back and the head
   * freed; the writer, when it runs again, finds its connection lost and retries — fenced like any
   * late writer (found by npm run fleet's pause).
   */
  idleInTransactionMs?: number;
}

/** Something that runs a query: the pool (a statement in its own transaction) or one connection. */
export interface Queryable {
  query<R extends QueryResultRow = QueryResultRow>(config: { text: string; values?: unknown[]; name?: string }): Promise<QueryResult<R>>;
  query<R extends QueryResultRow = QueryResultRow>(text: string, values?: unknown[]): Promise<QueryResult<R>>;
}

/** A connection taken from the pool; `release` gives it back (destroyed when it broke). */
export interface Checkout {
  client: PoolClient;
  release(error?: unknown): void;
}

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,47}$/;
const INT8_OID = 20;

/** The pool of one store, the LISTEN connection's settings, and how to name the server in messages. */
/**
 * How long a session may sit idle inside an open transaction before the server ends it. Far longer
 * than any transaction of loops waits between its statements (they are computed in between, not
 * waited on), far shorter than the leases (15–30 s) that a frozen writer would otherwise outlive
 * while holding the fleet's writes.
 */
export const IDLE_IN_TRANSACTION_MS = 10_000;

export class PgConnection {
  readonly pool: Pool;
  readonly schema: string;
  /** `user@host:port/database`, never the password: for messages. */
  readonly where: string;
  readonly user: string;
  readonly database: string;
  private readonly config: ClientConfig;

  constructor(options: PgConnectOptions) {
    const { config, where, user, database } = clientConfig(options);
    this.schema = options.schema;
    this.where = where;
    this.user = user;
    this.database = database;
    this.config = config;
    this.pool = new pg.Pool({
      ...config,
      max: options.poolSize ?? 10,
      // An idle pool does not keep the process alive: a CLI that forgot `end()` still exits.
      allowExitOnIdle: true,
    });
    // An idle connection the server ended (a restart, pg_terminate_backend) is dropped by the pool
    // and the next query gets a new one; without a listener its 'error' would crash the process.
    this.pool.on('error', () => {});
  }

  /** A connection of the pool for a transaction; its errors while out (the server ending it) are kept, not thrown at the process. */
  async checkout(): Promise<Checkout> {
    let client: PoolClient;
    try {
      client = await this.pool.connect();
    } catch (error) {
      // A pool this store ended is the store closed (as a read says it), not a server to reach.
      throw this.closedError(error) ?? this.connectError(error);
    }
    let broken: unknown = null;
    const onError = (error: unknown) => {
      broken = error;
    };
    client.on('error', onError);
    let released = false;
    return {
      client,
      release: (error?: unknown) => {
        if (released) return;
        released = true;
        client.off('error', onError);
        // A connection that broke is not given back to the pool: it is closed. (One whose
        // transaction merely failed, a conflict, was rolled back and is as good as new.)
        const lost = broken ?? (error !== undefined && isConnectionLoss(error) ? error : null);
        client.release(lost === null ? undefined : (lost as Error));
      },
    };
  }

  /** A connection of its own, outside the pool (the LISTEN connection). */
  newClient(suffix: string): Client {
    return new pg.Client({ ...this.config, application_name: `${this.config.application_name ?? 'loops'} ${suffix}` });
  }

  /**
   * PostgreSQL's (or the network's) error while connecting or checking the schema, as the project's
   * error: what failed, where, and how to fix it.
   */
  connectError(error: unknown, doing = 'connect'): LoopsError {
    if (error instanceof LoopsError) return error;
    const e = error as { code?: string; message?: string };
    const code = e.code ?? '';
    // (Node's connection attempts to several addresses fail with an AggregateError without a message.)
    const message = e.message || code || String(error);
    if (['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'ECONNRESET'].includes(code) || /timeout|terminated unexpectedly/i.test(message)) {
      return new LoopsError('internal', `cannot reach PostgreSQL at ${this.where}: ${message}${code && !message.includes(code) ? ` (${code})` : ''}`, {
        cause: error,
        retryable: true,
        hint: 'check that the server is running and accepts connections on that host and port, and that the URL is right',
      });
    }
    if (code === '28P01' || code === '28000') {
      return new LoopsError('internal', `PostgreSQL at ${this.where} refused the connection: ${message}`, {
        cause: error,
        hint: `check the user and password in the URL, and the server's pg_hba.conf for user ${this.user}`,
      });
    }
    if (code === '3D000') {
      return new LoopsError('internal', `PostgreSQL at ${this.where}: database ${this.database} does not exist`, {
        cause: error,
        hint: `create it (createdb ${this.database}, or CREATE DATABASE ${this.database}) or name another one in the URL`,
      });
    }
    if (code === '42501') {
      return new LoopsError('internal', `PostgreSQL at ${this.where}: user ${this.user} may not ${doing} in schema ${this.schema}: ${message}`, {
        cause: error,
        hint: `as an administrator: GRANT CREATE ON DATABASE ${this.database} TO ${this.user} (so loops creates schema ${this.schema}), or create the schema for it: CREATE SCHEMA ${this.schema} AUTHORIZATION ${this.user}`,
      });
    }
    if (code === '53300') {
      return new LoopsError('busy', `PostgreSQL at ${this.where} has no connection slot left: ${message}`, {
        cause: error,
        retryable: true,
        hint: 'retry in a moment; with many daemons, lower poolSize or raise max_connections on the server',
      });
    }
    return new LoopsError('internal', `PostgreSQL at ${this.where}: cannot ${doing}: ${message}${code ? ` (${code})` : ''}`, { cause: error });
  }

  /**
   * An error of a statement of the store, as the project's: a lock waited for too long or a
   * deadlock is the busy error (retryable, as SQLite's busy); a lost connection says so. Anything
   * else (a projection's SQL error) is passed on as it is, as the SQLite store does.
   */
  statementError(error: unknown, committing = false): unknown {
    if (error instanceof LoopsError) return error;
    const code = (error as { code?: string }).code ?? '';
    // lock_not_available (lock_timeout), deadlock_detected, serialization_failure.
    if (code === '55P03' || code === '40P01' || code === '40001') return busyError(error);
    if (isConnectionLoss(error)) {
      const message = (error as Error).message;
      return committing
        ? new LoopsError('internal', `lost the connection to PostgreSQL at ${this.where} while committing: the transaction may or may not have been committed (${message})`, {
            cause: error,
            retryable: true,
            hint: 'reload the streams it wrote before retrying: a retry with the same expected version conflicts if it was committed',
          })
        : new LoopsError('internal', `lost the connection to PostgreSQL at ${this.where}: ${message}; nothing was committed`, {
            cause: error,
            retryable: true,
            hint: 'check that the server is running; retry in a moment',
          });
    }
    return this.closedError(error) ?? error;
  }

  /** The error of using this store after `end()`, said as such (null for any other error). */
  private closedError(error: unknown): LoopsError | null {
    if (!/Cannot use a pool after calling end/.test((error as Error | null)?.message ?? '')) return null;
    return new LoopsError('internal', `the PostgreSQL store (${this.where}, schema ${this.schema}) is closed`, { cause: error, hint: 'open it again' });
  }
}

export { isConnectionLoss } from '../errors.js';

/** The connection settings of `options`, checked: a bad URL or schema name is the user's to fix. */
function clientConfig(options: PgConnectOptions): { config: ClientConfig; where: string; user: string; database: string } {
  checkSchemaName(options.schema);
  let url: URL;
  try {
    url = new URL(options.url);
  } catch {
    throw new ValidationError(`the PostgreSQL URL ${JSON.stringify(redact(options.url))} is not a URL`, { hint: 'write it as postgres://user[:password]@host[:port]/database' });
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new ValidationError(`the PostgreSQL URL ${JSON.stringify(redact(options.url))} is not a postgres:// URL`, { hint: 'write it as postgres://user[:password]@host[:port]/database' });
  }
  const user = decodeURIComponent(url.username) || process.env.PGUSER || process.env.USER || 'postgres';
  const database = decodeURIComponent(url.pathname.replace(/^\//, '')) || user;
  const host = url.hostname || url.searchParams.get('host') || 'localhost';
  const where = `${user}@${host}:${url.port || '5432'}/${database}`;
  // Every connection gets the store's settings as startup options: the schema as search_path
  // (the inline projections' SQL names its tables without one) and the lock timeout. A URL's own
  // `options` are kept, after ours: the driver would otherwise let the URL's replace ours.
  const own = url.searchParams.get('options');
  url.searchParams.delete('options');
  const lockTimeoutMs = options.lockTimeoutMs ?? 5000;
  if (!Number.isInteger(lockTimeoutMs) || lockTimeoutMs < 0) throw new ValidationError(`lockTimeoutMs must be a whole number of milliseconds, not ${lockTimeoutMs}`);
  const idleMs = options.idleInTransactionMs ?? IDLE_IN_TRANSACTION_MS;
  if (!Number.isInteger(idleMs) || idleMs < 0) throw new ValidationError(`idleInTransactionMs must be a whole number of milliseconds, not ${idleMs}`);
  const config: ClientConfig = {
    connectionString: url.toString(),
    options: `-c search_path=${options.schema} -c lock_timeout=${lockTimeoutMs} -c idle_in_transaction_session_timeout=${idleMs}${own ? ` ${own}` : ''}`,
    application_name: options.applicationName ?? 'loops',
    connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
    // BIGINT (positions, versions, tokens, times) as JS numbers: exact up to 2^53, which a log
    // position or an epoch-ms time never reaches; the driver's default is a string.
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === INT8_OID ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format)) as never,
    },
  };
  return { config, where, user, database };
}

/** Throws unless `schema` may name a store's schema (`PgConnectOptions.schema`). */
export function checkSchemaName(schema: string): void {
  if (!SCHEMA_NAME.test(schema) || schema.startsWith('pg_')) {
    throw new ValidationError(`PostgreSQL schema name ${JSON.stringify(schema)} is not valid`, {
      hint: 'use lower-case letters, digits and _ (at most 48 characters, starting with a letter or _, not pg_)',
    });
  }
}

/** `url` without its password, for messages. */
export function redact(url: string): string {
  return url.replace(/(\/\/[^:/@]*:)[^@/]*@/, '$1***@');
}
