/**
 * What the PostgreSQL event store and lease store share: the connection pool, the store's write
 * transactions, and its open batch.
 *
 * Where SQLite has one writer per file (`BEGIN IMMEDIATE`), PostgreSQL has row locks. Every
 * writing transaction of the store locks the one `log_head` row before its first write and holds
 * it to its commit, and takes its events' positions from it: positions are then gap-free and in
 * commit order (docs/design/postgres.md, item 1 (i)), and appends fleet-wide take turns as SQLite's
 * writers do. Taking it *first* is what keeps the other row locks (leases, streams, queued work)
 * free of deadlocks: two writing transactions never hold one of them each while waiting for the
 * other's. The standalone lease writes (one statement each, outside any transaction of ours) hold
 * one lease row for that statement only.
 *
 * In this process, the store's writing transactions take turns too (`exclusive`): the appends of a
 * group commit and a batch never race each other for the log head, and they commit in the order
 * they were made, as with SQLite.
 */
import type { Batch, StoredEvent } from '../types.js';
import type { Checkout, PgConnection, Queryable } from './connect.js';
import type { Names } from './sql.js';
import type { QueryResultRow } from 'pg';

/**
 * One writing transaction on one connection (a group commit's, or a batch's): its savepoints and
 * the positions its appends took from the log head, written back to `log_head` at its commit.
 */
export class WriteTx {
  /** The committed head when this transaction locked it; null until it did (it has written nothing yet). */
  headAtLock: number | null = null;
  /** The last position this transaction's appends used (the head it will commit). */
  head = 0;
  /** The log format its appends need (archiving raises it to 2); 0: unchanged. */
  format = 0;
  private savepoints = 0;
  /** A savepoint that succeeded, released with the next statement sent (one round trip less). */
  private toRelease: string | null = null;
  private chain: Promise<unknown> = Promise.resolve();

  constructor(
    readonly client: Checkout['client'],
    private readonly names: Names,
  ) {}

  /**
   * Runs `op` once the ops queued before it ended: one connection runs one statement sequence at a
   * time, so an append's SAVEPOINT … RELEASE never interleaves with another's (as SQLite's
   * synchronous appends never do).
   */
  run<T>(op: () => Promise<T>): Promise<T> {
    const next = this.chain.then(op, op);
    this.chain = next.catch(() => {});
    return next;
  }

  /** Resolves once every op queued so far has ended. */
  drained(): Promise<void> {
    return this.chain.then(() => undefined);
  }

  /** Locks the log head (first write of this transaction) and learns where positions continue. */
  async lockHead(): Promise<void> {
    if (this.headAtLock !== null) return;
    // Always before the transaction's first savepoint: a lock taken inside one would go with its rollback.
    const result = await this.client.query<{ position: number }>(`SELECT position FROM ${this.names.logHead} FOR UPDATE`);
    this.headAtLock = this.head = result.rows[0]!.position;
  }

  /** `BEGIN` and the head lock in one round trip (a group commit writes at once). */
  async beginLocked(): Promise<void> {
    const results = (await this.client.query(`BEGIN; SELECT position FROM ${this.names.logHead} FOR UPDATE`)) as unknown as Array<{ rows: Array<{ position: number }> }>;
    this.headAtLock = this.head = results[1]!.rows[0]!.position;
  }

  /**
   * Runs `fn` in a savepoint: when it fails, what it wrote is undone — and the positions and format
   * it took — and the transaction goes on (PostgreSQL aborts the whole transaction at an error
   * otherwise; docs/design/postgres.md, item 4).
   */
  async savepoint<T>(fn: () => Promise<T>): Promise<T> {
    const name = `loops_${++this.savepoints}`;
    await this.client.query(this.releasing(`SAVEPOINT ${name}`));
    const head = this.head;
    const format = this.format;
    try {
      const result = await fn();
      this.toRelease = name;
      return result;
    } catch (error) {
      this.head = head;
      this.format = format;
      // A connection that broke fails the statements after this one, and the commit, on its own.
      await this.client.query(`ROLLBACK TO SAVEPOINT ${name}; RELEASE SAVEPOINT ${name}`).catch(() => {});
      throw error;
    }
  }

  /** `sql` preceded by the pending RELEASE, if any (simple protocol: no parameters in `sql`). */
  private releasing(sql: string): string {
    const release = this.toRelease;
    this.toRelease = null;
    return release ? `RELEASE SAVEPOINT ${release}; ${sql}` : sql;
  }

  /**
   * Commits: the new head (and format) into `log_head`, and `NOTIFY` with the head as payload —
   * which PostgreSQL delivers at the commit, and only if it commits — in the same round trip.
   */
  async commit(): Promise<void> {
    const parts: string[] = [];
    if (this.headAtLock !== null && this.head !== this.headAtLock) {
      parts.push(`UPDATE ${this.names.logHead} SET position = ${this.head}${this.format ? `, format = GREATEST(format, ${this.format})` : ''}`);
      parts.push(`NOTIFY ${this.names.channel}, '${this.head}'`);
    }
    parts.push('COMMIT');
    this.toRelease = null;
    await this.client.query(parts.join('; '));
  }

  /** Rolls back; a connection that broke is closed by the caller (`release(error)`), which ends the transaction too. */
  async rollback(): Promise<void> {
    try {
      await this.client.query('ROLLBACK');
    } catch {
      // The connection is gone: the server rolled the transaction back when it lost it.
    }
  }
}

/** The batch open in this store: its transaction, and what waits for its commit. */
export interface OpenBatch {
  batch: Batch;
  tx: WriteTx;
  /** Callbacks for after the commit (`afterCommit`), dropped if it fails. */
  committed: Array<() => void>;
  /** Events appended in it, published after the commit. */
  events: StoredEvent[];
  /** The commit (or rollback) has begun: a write that comes now no longer joins it. */
  closing: boolean;
  done: Promise<void>;
}

export class PgCore {
  open: OpenBatch | null = null;
  private writer: Promise<unknown> = Promise.resolve();
  private nextBatchId = 1;
  private hasRunQueue = false;

  constructor(
    readonly conn: PgConnection,
    readonly names: Names,
  ) {}

  /** Runs `job` after every writing job queued before it in this store (group commits and batches take turns). */
  exclusive<T>(job: () => Promise<T>): Promise<T> {
    const next = this.writer.then(job, job);
    this.writer = next.catch(() => {});
    return next;
  }

  /** Opens a batch on `tx` (inside an `exclusive` job); `close` ends it and wakes the writes waiting for it. */
  openBatch(tx: WriteTx): { open: OpenBatch; close: () => void } {
    let end!: () => void;
    const done = new Promise<void>((resolve) => (end = resolve));
    const open: OpenBatch = { batch: { batchId: this.nextBatchId++ }, tx, committed: [], events: [], closing: false, done };
    this.open = open;
    return {
      open,
      close: () => {
        if (this.open === open) this.open = null;
        end();
      },
    };
  }

  /** The open batch when `batch` is its handle and it is still taking writes. */
  joined(batch: Batch | undefined): OpenBatch | null {
    const open = this.open;
    return batch !== undefined && open !== null && open.batch === batch && !open.closing ? open : null;
  }

  /** Waits until no batch is open: a write that is not part of it comes after it, as on SQLite's gate. */
  async outsideBatch(): Promise<void> {
    while (this.open !== null) await this.open.done;
  }

  /** A write of the open batch: after its earlier ops, with the log head locked first, in a savepoint of its own. */
  batchWrite<T>(open: OpenBatch, fn: (tx: WriteTx) => Promise<T>): Promise<T> {
    return open.tx.run(async () => {
      try {
        await open.tx.lockHead();
        return await open.tx.savepoint(() => fn(open.tx));
      } catch (error) {
        throw this.conn.statementError(error);
      }
    });
  }

  /**
   * A read. While a batch is open it runs on the batch's connection, after the batch's writes so
   * far — so it sees them, as every read on SQLite's one connection does (item 7 of the design
   * note: a pooled store keeps what joins a batch on its connection). Otherwise on the pool.
   */
  async read<R extends QueryResultRow>(name: string, text: string, values: unknown[]): Promise<R[]> {
    const open = this.open;
    try {
      if (open !== null && !open.closing) return (await open.tx.run(() => open.tx.client.query<R>({ name, text, values }))).rows;
      return (await this.conn.pool.query<R>({ name, text, values })).rows;
    } catch (error) {
      throw this.conn.statementError(error);
    }
  }

  /** The pool, for statements that stand alone (each its own transaction). */
  get pool(): Queryable {
    return this.conn.pool;
  }

  /**
   * Whether the schema has a `run_queue` table (the `queued` guard's): the run_queue projection's,
   * created at open when the store is given the projections (projections.ts); none otherwise. Only
   * a yes is remembered (a rebuild drops and recreates the table in one transaction).
   */
  async runQueueExists(q: Queryable): Promise<boolean> {
    if (this.hasRunQueue) return true;
    const result = await q.query<{ present: boolean }>('SELECT to_regclass($1) IS NOT NULL AS present', [this.names.runQueue]);
    this.hasRunQueue = result.rows[0]?.present === true;
    return this.hasRunQueue;
  }
}
