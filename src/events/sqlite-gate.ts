/**
 * A database file's writes in this process, serialised around its batches: the asynchronous store
 * interface over better-sqlite3's synchronous calls. The event store and the lease store — and
 * every runtime of this process on the same file — share one gate.
 */
import { resolve } from 'node:path';
import type { Db } from './db.js';
import type { Batch } from './types.js';

/**
 * The open batch on one database file in this process, if any. A write that belongs to another
 * batch (or to none) waits for it to end:
 *  - on the batch's own connection, a write slipped into its transaction would be committed — or
 *    rolled back — with it;
 *  - on another connection to the same file (a second runtime in this process), the write would
 *    wait for SQLite's write lock in a busy loop that blocks the event loop — which the batch
 *    needs to finish: a deadlock until `busy_timeout`.
 * Other processes wait for the lock as usual.
 */
export class WriteGate {
  private nextId = 1;
  open: { batch: Batch; done: Promise<void> } | null = null;

  /** True when a write of `batch` (or of none) must wait for the open batch to end. */
  blocks(batch: Batch | undefined): boolean {
    return this.open !== null && this.open.batch !== batch;
  }

  /** Runs `write` now when it may, else once the open batch ended (checked again then). */
  run<T>(batch: Batch | undefined, write: () => T): Promise<T> {
    return this.open !== null && this.open.batch !== batch ? this.open.done.then(() => this.run(batch, write)) : resolved(write);
  }

  /**
   * Opens a batch as soon as none is open; `end` closes it and wakes the writes waiting for it. The
   * check and the opening happen in one synchronous step: two batches started together take turns.
   */
  async begin(): Promise<{ batch: Batch; end: () => void }> {
    while (this.open !== null) await this.open.done;
    let end!: () => void;
    const done = new Promise<void>((resolve) => (end = resolve));
    const batch: Batch = { batchId: this.nextId++ };
    this.open = { batch, done };
    return {
      batch,
      end: () => {
        this.open = null;
        end();
      },
    };
  }
}

const fileGates = new Map<string, WriteGate>();
const memoryGates = new WeakMap<Db, WriteGate>();

/** The gate of `db`'s file (shared by every connection of this process to it; one per in-memory database). */
export function gateFor(db: Db): WriteGate {
  if (db.memory) {
    let gate = memoryGates.get(db);
    if (!gate) memoryGates.set(db, (gate = new WriteGate()));
    return gate;
  }
  const key = resolve(db.name);
  let gate = fileGates.get(key);
  if (!gate) fileGates.set(key, (gate = new WriteGate()));
  return gate;
}

/** A synchronous read or write as a promise (its error as a rejection). */
export function resolved<T>(read: () => T): Promise<T> {
  try {
    return Promise.resolve(read());
  } catch (error) {
    return Promise.reject(error);
  }
}
