/**
 * The PostgreSQL store (issue 15: a fleet of daemons on one log): `openPgStore` opens the event
 * store and the lease store on one schema of one database.
 *
 * Its own entry, imported only where PostgreSQL is chosen: src/events/index.ts does not re-export
 * it, so no command that uses SQLite loads the driver (the cold-start budget,
 * test/int/cold-start-budget.int.test.ts).
 */
import { PgConnection, type PgConnectOptions } from './connect.js';
import { PgCore } from './core.js';
import { PgEventStore, type PgEventStoreOptions } from './pg-log.js';
import { PgLeaseStore } from './pg-leases.js';
import { migrate } from './schema.js';
import { namesFor } from './sql.js';

export { PgEventStore, type PgEventStoreOptions } from './pg-log.js';
export { PgLeaseStore } from './pg-leases.js';
export { pgPlaceholders } from './sql.js';
export type { PgConnectOptions } from './connect.js';

export interface PgStoreOptions extends PgConnectOptions, PgEventStoreOptions {}

export interface PgStore {
  events: PgEventStore;
  leases: PgLeaseStore;
  /** The schema the store's tables are in. */
  schema: string;
  /** Ends the store (the event store's `end`): appends in flight settle, connections close. */
  end(): Promise<void>;
}

/**
 * Opens the store: checks the URL and schema name, connects, creates the schema and its tables
 * (or migrates them), refuses a log written by a newer loops, and starts following the log's
 * other writers (LISTEN/NOTIFY; polling while that is down). A server that cannot be reached, a
 * refused login, a missing database or missing rights are each a `LoopsError` saying what to do.
 */
export async function openPgStore(options: PgStoreOptions): Promise<PgStore> {
  const conn = new PgConnection(options);
  const names = namesFor(options.schema);
  let head: number;
  try {
    ({ head } = await migrate(conn, names));
  } catch (error) {
    await conn.pool.end().catch(() => {});
    throw error;
  }
  const core = new PgCore(conn, names);
  const events = new PgEventStore(core, head, options, () => conn.pool.end());
  await events.start();
  return { events, leases: new PgLeaseStore(core), schema: options.schema, end: () => events.end() };
}
