/**
 * The writing runtime: a database, the event log with every projection inline, the clock and
 * this runner's identity. Every command that appends opens one of these.
 */
import type { Db } from '../events/db.js';
import { ValidationError } from '../events/errors.js';
import { SqliteEventLog } from '../events/sqlite-log.js';
import { SqliteLeaseStore } from '../events/sqlite-leases.js';
import type { EventStore, LeaseStore } from '../events/types.js';
import { inlineHandler } from '../projections/registry.js';
import { systemClock, type Clock } from './clock.js';
import { newId } from './ids.js';
import { resolveDataDir } from './paths.js';
import { SnapshotStore } from './snapshots.js';
import { Spawner } from './execution/spawner.js';
import { ensureDataDir, openSqliteReader } from './store.js';
import { chooseStore, type StoreChoice } from './store-choice.js';
import { hostId, hostLabels, learnHostBoot } from './host.js';
import { actedBy, type ActedBy } from './acting.js';
import type { Inspector } from './inspection.js';

export interface RuntimeOptions {
  dataDir?: string;
  clock?: Clock;
  /** Identity of this runner; defaults to `<host>:<pid>:<random>`. */
  runnerId?: string;
  /**
   * How processes are started: `inline` forks from this process; `helper` hands every fork to a
   * small spawner process (spawner.ts), which keeps a busy runner's thread free — the daemon and
   * workflow runs use it; `auto` (default) forks here until runs come one after another, then
   * through the helper (SpawnerUse `busy`): a fork copies this process's page tables, and every
   * page it then writes is copied once more, which from a process holding a database costs more
   * than the run's own work.
   */
  spawner?: 'inline' | 'helper' | 'auto';
  /** The trigger source its events record in `meta.by` (default: the process's, see acting.ts). */
  source?: string;
  /** An XState inspector (e.g. `@statelyai/inspect`'s `inspect`) told of every stream actor and recorded event (inspection.ts). */
  inspect?: Inspector;
  /** The store (default: what `LOOPS_STORE` names, store-choice.ts; SQLite when unset). */
  store?: StoreChoice;
  /** This runner's host labels, which `--runs-on` loops ask for (default: `LOOPS_HOST_LABELS`, host.ts). */
  labels?: string[];
}

export interface Runtime {
  dataDir: string;
  /** The projection tables' database, for the read side's queries. */
  db: Db;
  /** The event store: the one way to the log (src/events/sqlite-log.ts for SQLite). */
  log: EventStore;
  /** Leases with fencing tokens (src/events/sqlite-leases.ts): the one way to them. */
  leases: LeaseStore;
  clock: Clock;
  runnerId: string;
  /**
   * The labels this runner has (`loops daemon --labels`, `LOOPS_HOST_LABELS`; its host's id is one
   * too): it claims the work of loops pinned with `--runs-on` only when it has every label they name.
   */
  labels?: ReadonlyArray<string>;
  /** Who acts, recorded with every event this runtime appends (`meta.by`). */
  actedBy?: ActedBy;
  /** The spawner helper runs are started through, or null to start them from this process. */
  spawner: Spawner | null;
  /** Where restoring a stream may start instead of its first event (snapshots.ts). */
  snapshots?: SnapshotStore;
  /** The inspector its durable actors tell (RuntimeOptions.inspect). */
  inspect?: Inspector;
  /** Set when the store is shared by hosts (PostgreSQL): this host's id and the store's address (never a password). */
  fleet?: { hostId: string; where: string; schema: string };
  close(): void;
}

const SPAWNER_CHOICES: ReadonlyArray<string> = ['auto', 'inline', 'helper'];

/** Starts runs of `runtime` through a spawner helper from now on (and starts the helper now). */
export function useSpawnerHelper(runtime: Runtime): Spawner {
  if (!runtime.spawner) runtime.spawner = new Spawner();
  runtime.spawner.use = 'always';
  runtime.spawner.warm();
  return runtime.spawner;
}

/** Forks the runs of `runtime` from this process from now on (its helper, if any, is ended). */
export function useInlineSpawns(runtime: Runtime): void {
  runtime.spawner?.close();
  runtime.spawner = null;
}

/** The database, log and leases of a data directory on its store: its own SQLite file, or PostgreSQL with a local replica (pg-store.ts). */
async function openStoreParts(dataDir: string, choice: StoreChoice): Promise<{ db: Db; log: EventStore; leases: LeaseStore; close(): void }> {
  if (choice.kind === 'postgres') {
    ensureDataDir(dataDir);
    const { openPgParts } = await import('./pg-store.js');
    return openPgParts(dataDir, choice, { follow: true });
  }
  const reader = await openSqliteReader(dataDir);
  const log = new SqliteEventLog(reader.db, { handlers: [inlineHandler()] });
  return {
    db: reader.db,
    log,
    leases: new SqliteLeaseStore(reader.db),
    close() {
      log.close();
      reader.close();
    },
  };
}

export async function openRuntime(options: RuntimeOptions = {}): Promise<Runtime> {
  const clock = options.clock ?? systemClock;
  learnHostBoot();
  const dataDir = options.dataDir ?? resolveDataDir();
  // Checked before anything is opened: a bad LOOPS_HOST_LABELS (or spawner) leaves nothing open.
  const labels = options.labels ?? hostLabels();
  if (options.spawner !== undefined && !SPAWNER_CHOICES.includes(options.spawner)) {
    throw new ValidationError(`openRuntime: spawner ${JSON.stringify(options.spawner)} is not one of ${SPAWNER_CHOICES.join(', ')}`, {
      hint: "leave it out for 'auto' (the default): a lone run forked here, runs one after another through the helper",
    });
  }
  const choice = options.store ?? chooseStore(process.env, dataDir);
  const parts = await openStoreParts(dataDir, choice);
  const runnerId = options.runnerId ?? `${hostId()}:${process.pid}:${newId('r', clock.now()).slice(-6)}`;
  const runtime: Runtime = {
    dataDir,
    db: parts.db,
    log: parts.log,
    leases: parts.leases,
    clock,
    runnerId,
    labels,
    actedBy: actedBy(options.source),
    spawner: options.spawner === 'inline' ? null : new Spawner({ use: 'busy' }),
    snapshots: new SnapshotStore(parts.db),
    ...(options.inspect ? { inspect: options.inspect } : {}),
    ...(choice.kind === 'postgres' ? { fleet: { hostId: hostId(), where: choice.where, schema: choice.schema } } : {}),
    close() {
      runtime.spawner?.close();
      parts.close();
    },
  };
  if (options.spawner === 'helper') useSpawnerHelper(runtime);
  return runtime;
}
