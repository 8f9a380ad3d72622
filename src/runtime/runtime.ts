/**
 * The writing runtime: a database, the event log with every projection inline, the clock and
 * this runner's identity. Every command that appends opens one of these.
 */
import { hostname } from 'node:os';
import type { Db } from '../events/db.js';
import { SqliteEventLog } from '../events/sqlite-log.js';
import { inlineHandler } from '../projections/registry.js';
import { systemClock, type Clock } from './clock.js';
import { newId } from './ids.js';
import { resolveDataDir } from './paths.js';
import { openReader } from './store.js';

export interface RuntimeOptions {
  dataDir?: string;
  clock?: Clock;
  /** Identity of this runner; defaults to `<host>:<pid>:<random>`. */
  runnerId?: string;
}

export interface Runtime {
  dataDir: string;
  db: Db;
  log: SqliteEventLog;
  clock: Clock;
  runnerId: string;
  close(): void;
}

export async function openRuntime(options: RuntimeOptions = {}): Promise<Runtime> {
  const clock = options.clock ?? systemClock;
  const reader = await openReader(options.dataDir ?? resolveDataDir());
  const log = new SqliteEventLog(reader.db, { handlers: [inlineHandler()] });
  const runnerId = options.runnerId ?? `${hostname()}:${process.pid}:${newId('r', clock.now()).slice(-6)}`;
  return {
    dataDir: reader.dataDir,
    db: reader.db,
    log,
    clock,
    runnerId,
    close() {
      log.close();
      reader.close();
    },
  };
}
