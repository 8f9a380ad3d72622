/**
 * A data directory on a PostgreSQL store (store-choice.ts): the shared log, projections and leases
 * in the database, and this host's SQLite replica of them in the data directory (replica.ts), which
 * every read of the runtime, the SDK and the CLI runs on. Imported only when `LOOPS_STORE` names
 * PostgreSQL: no SQLite command loads the driver.
 */
import { join } from 'node:path';
import type { Db } from '../events/db.js';
import type { EventStore, LeaseStore } from '../events/types.js';
import { openPgStore, type PgStore } from '../events/pg/index.js';
import { projections } from '../projections/registry.js';
import { Replica, ReplicatedEventStore } from './replica.js';
import { rememberStore, replicaFileName, type StoreChoice } from './store-choice.js';

export interface PgParts {
  /** The replica's database: what the read side queries. */
  db: Db;
  /** Appends go to PostgreSQL and resolve once the replica holds them. */
  log: EventStore;
  leases: LeaseStore;
  store: PgStore;
  replica: Replica;
  close(): void;
}

/**
 * Opens the PostgreSQL store (creating or migrating its schema and projections) and this data
 * directory's replica of it, caught up. `follow`: keep the replica following other processes'
 * events (a runtime); a read command catches up once and reads.
 */
export async function openPgParts(dataDir: string, choice: Extract<StoreChoice, { kind: 'postgres' }>, options: { follow: boolean }): Promise<PgParts> {
  const store = await openPgStore({ url: choice.url, schema: choice.schema, projections, follow: options.follow });
  let replica: Replica;
  try {
    replica = await Replica.open({ file: join(dataDir, replicaFileName(choice.schema)), source: store.events, follow: options.follow });
  } catch (error) {
    await store.end().catch(() => {});
    throw error;
  }
  // Later commands on this data directory use the same store without LOOPS_STORE.
  rememberStore(dataDir, choice);
  const log = new ReplicatedEventStore(store.events, replica);
  return {
    db: replica.db,
    log,
    leases: store.leases,
    store,
    replica,
    close() {
      replica.close();
      log.close();
    },
  };
}
