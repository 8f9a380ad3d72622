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
import { checkProjections, ensureProjections, projectionHandler, rebuildProjections, verifyProjections, type PgProjection, type PgRebuildResult, type PgVerifyResult } from './projections.js';
import { migrate } from './schema.js';
import { namesFor } from './sql.js';

export { PgEventStore, type PgEventStoreOptions } from './pg-log.js';
export { PgLeaseStore } from './pg-leases.js';
export { pgPlaceholders } from './sql.js';
export { pgDdl } from './dialect.js';
export { checkSchemaName, type PgConnectOptions } from './connect.js';
export type { PgProjection, PgRebuildResult, PgTableDiff, PgVerifyResult } from './projections.js';

export interface PgStoreOptions extends PgConnectOptions, PgEventStoreOptions {
  /**
   * The projections this store keeps (src/projections' registry, passed in: the events layer does
   * not import it): their tables are created in the store's schema at open — or rebuilt from the
   * log when the version recorded there is not the one given — and every append runs them inline,
   * before the `handlers`. Their SQL is SQLite's, which must be SQL both accept (dialect.ts).
   */
  projections?: ReadonlyArray<PgProjection>;
  /**
   * Create the schema and its tables when the schema holds no loops log yet (default true). False:
   * such a schema is refused (`NotFoundError`) and nothing is created — for a store only read (the
   * source of `loops store copy`).
   */
  create?: boolean;
}

export interface PgStore {
  events: PgEventStore;
  leases: PgLeaseStore;
  /** The schema the store's tables are in. */
  schema: string;
  /** Ends the store (the event store's `end`): appends in flight settle, connections close. */
  end(): Promise<void>;
  /**
   * Drops and rebuilds the store's projections (all, or those named, by projection or table) from
   * the log, in one transaction that holds the log head (appends wait for it). After this store's
   * own writes in flight.
   */
  rebuildProjections(names?: ReadonlyArray<string>): Promise<PgRebuildResult>;
  /**
   * Rebuilds the store's projections from the log into temporary tables and compares them with the
   * live ones, row by row (`projections verify` on PostgreSQL): the first `limit` (10) differences
   * per table.
   */
  verifyProjections(options?: { limit?: number }): Promise<PgVerifyResult>;
}

/**
 * Opens the store: checks the URL and schema name, connects, creates the schema and its tables
 * (or migrates them), refuses a log written by a newer loops, creates the projections' tables (or
 * rebuilds the ones whose version moved), and starts following the log's other writers
 * (LISTEN/NOTIFY; polling while that is down). A server that cannot be reached, a
 * refused login, a missing database or missing rights are each a `LoopsError` saying what to do.
 */
export async function openPgStore(options: PgStoreOptions): Promise<PgStore> {
  const projections = options.projections ?? [];
  checkProjections(projections);
  const conn = new PgConnection(options);
  const names = namesFor(options.schema);
  let head: number;
  try {
    ({ head } = await migrate(conn, names, { create: options.create ?? true }));
    await ensureProjections(conn, names, projections);
  } catch (error) {
    await conn.pool.end().catch(() => {});
    throw error;
  }
  const core = new PgCore(conn, names);
  const handlers = projections.length > 0 ? [projectionHandler(projections), ...(options.handlers ?? [])] : options.handlers;
  const events = new PgEventStore(core, head, { ...options, handlers }, () => conn.pool.end());
  await events.start();
  return {
    events,
    leases: new PgLeaseStore(core),
    schema: options.schema,
    end: () => events.end(),
    rebuildProjections: async (only) => {
      // After this store's appends and batches so far, and before the ones made meanwhile (a
      // writing job: an open batch of this store holds the log head the rebuild waits for).
      await events.settled();
      return core.exclusive(async () => {
        await core.outsideBatch();
        try {
          return await rebuildProjections(conn, names, projections, only);
        } catch (error) {
          throw conn.statementError(error);
        }
      });
    },
    verifyProjections: async ({ limit } = {}) => {
      try {
        return await verifyProjections(conn, names, projections, limit);
      } catch (error) {
        throw conn.statementError(error);
      }
    },
  };
}
