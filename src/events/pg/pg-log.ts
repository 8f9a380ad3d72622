/**
 * The PostgreSQL implementation of `EventStore`: the contract of sqlite-log.ts, for a fleet of
 * processes on several hosts writing one log (issue 15; the plan: docs/design/postgres.md).
 *
 * Append = one transaction: lock the log head (core.ts), check the guards (pg-leases.ts: row
 * locks), compare-and-set the stream's version, insert the events at the next positions, run the
 * inline projections, commit — with `NOTIFY` for the other processes. Only after the commit are
 * the events published on `events$` (follow.ts, which also brings other processes' events).
 *
 * Group commit, as SQLite's: the appends made outside a batch while this store's previous write
 * was in flight (at least those of one turn of the event loop) are committed together, in one
 * transaction, each in its own savepoint — one that fails (a conflict, a guard) undoes only itself
 * and rejects only its own promise; every promise settles after the commit that made it durable.
 *
 * A batch is a transaction on one connection of the pool, held open across its callback's awaits
 * (item 7 of the design note): its appends and lease writes run on that connection in order, each
 * in a savepoint; reads made while it is open run there too, and see its writes, as on SQLite.
 * Writes that do not belong to it wait for its end.
 *
 * The appender's clock (`nowMs`, else the events' `at`) judges lease expiry, as on SQLite, so
 * tests inject clocks; a fleet's clock skew (item 5) is handled in a later session.
 */
import { Subject, type Observable } from 'rxjs';
import { ARCHIVED_FORMAT_VERSION } from '../db.js';
import { ConcurrencyConflictError, ValidationError } from '../errors.js';
import { faultPoint } from '../faults.js';
import {
  archivedEventCount,
  checkArchivedCount,
  prepareEvents,
  rowToEvent,
  rowToStreamInfo,
  storedConflict,
  storedExpectation,
  storedGroups,
  storedStreamRow,
  type EventRow,
  type NewStreamRow,
  type PendingAppend,
  type PreparedEvent,
  type StoredAppendOptions,
  type StreamRow,
} from '../sqlite-log.js';
import type {
  AppendOptions,
  AppendResult,
  Batch,
  EventStore,
  InlineHandler,
  NewEvent,
  ReadAllOptions,
  SpaceReport,
  StoredEvent,
  StreamInfo,
} from '../types.js';
import type { Queryable } from './connect.js';
import { WriteTx, type OpenBatch, type PgCore } from './core.js';
import { Follower, type FollowOptions } from './follow.js';
import { applyGuards } from './pg-leases.js';
import type { ReplicaPage } from '../sqlite-log.js';
import { EVENT_COLUMNS, pgPlaceholders, selectHead } from './sql.js';

/** Rows per INSERT of events (9 parameters each; PostgreSQL takes at most 65535 per statement). */
const INSERT_ROWS = 1000;

export interface PgEventStoreOptions extends FollowOptions {
  /**
   * Inline projections, run inside the append transaction for every appended event. Their
   * statements are SQLite's (`?` placeholders, numbered here for PostgreSQL): they must be SQL both
   * accept (dialect.ts). The project's projections are given to `openPgStore` as `projections`
   * (which creates their tables and runs them before these); `handlers` are for others (tests).
   */
  handlers?: ReadonlyArray<InlineHandler>;
  /** Validate payloads against the catalogue before appending (default true). */
  validate?: boolean;
}

/** An appended event as its row (its JSON as the text SQLite's store writes too). */
function storedRow(e: StoredEvent): EventRow {
  return {
    position: e.position,
    stream_id: e.streamId,
    version: e.version,
    type: e.type,
    v: e.v,
    data: JSON.stringify(e.data),
    meta: JSON.stringify(e.meta),
    at: e.at,
    state: e.state === null ? null : JSON.stringify(e.state),
  };
}

export class PgEventStore implements EventStore {
  /** Commits and appends per commit since this store was opened (group commit's effect, as SqliteEventLog's). */
  readonly commitStats = { commits: 0, appends: 0 };
  private readonly subject = new Subject<StoredEvent>();
  readonly events$: Observable<StoredEvent> = this.subject.asObservable();
  private readonly follower: Follower;
  private readonly handlers: ReadonlyArray<InlineHandler>;
  private readonly validate: boolean;
  private pending: PendingAppend[] = [];
  private flushScheduled = false;
  /** Appends not yet settled (`settled`). */
  private readonly inflight = new Set<Promise<unknown>>();
  private ended: Promise<void> | null = null;

  constructor(
    private readonly core: PgCore,
    head: number,
    options: PgEventStoreOptions = {},
    private readonly onEnd: () => Promise<void> = async () => {},
  ) {
    this.handlers = options.handlers ?? [];
    this.validate = options.validate ?? true;
    this.follower = new Follower(core.conn, core.names, this.subject, head, options);
  }

  /** Starts following other processes' events (LISTEN, or polling when that fails). */
  start(): Promise<void> {
    return this.follower.start();
  }

  /** True while other processes' events arrive by LISTEN/NOTIFY; false while the head is polled instead (or not following). */
  get listening(): boolean {
    return this.follower.listening;
  }

  /** `listening` as it changes. */
  get listening$(): Observable<boolean> {
    return this.follower.listening$;
  }

  /** The LISTEN connection's backend pid (pg_stat_activity), null while it is down. */
  get listenerPid(): number | null {
    return this.follower.listenerPid;
  }

  append(streamId: string, events: NewEvent[], options: AppendOptions): Promise<AppendResult> {
    let prepared: PreparedEvent[];
    try {
      prepared = prepareEvents(streamId, events, this.validate);
    } catch (error) {
      return Promise.reject(error);
    }
    const open = this.core.joined(options.batch);
    const promise = open
      ? this.appendInBatch(open, streamId, prepared, options)
      : new Promise<AppendResult>((resolve, reject) => {
          this.pending.push({ streamId, prepared, options, resolve, reject });
          this.scheduleFlush();
        });
    this.inflight.add(promise);
    const forget = () => this.inflight.delete(promise);
    promise.then(forget, forget);
    return promise;
  }

  private appendInBatch(open: OpenBatch, streamId: string, prepared: PreparedEvent[], options: AppendOptions): Promise<AppendResult> {
    faultPoint('before-append');
    return this.core.batchWrite(open, async (tx) => {
      const result = await this.appendIn(tx, streamId, prepared, options);
      this.commitStats.appends++;
      if (options.onLeases && Object.keys(result.leases).length) options.onLeases(result.leases);
      open.events.push(...result.events);
      return result;
    });
  }

  /** After every microtask of this turn: the appends its callbacks make join the group. */
  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  /** Queues the commit of the appends waiting now (and of any made before it starts) behind this store's writes. */
  private flush(): void {
    if (this.pending.length === 0) return;
    void this.core.exclusive(() => this.commitGroup());
  }

  /**
   * Commits the waiting appends: one transaction, a savepoint each when there are several. A
   * failure of the transaction itself (no connection, the lock not granted, the commit failing)
   * rejects them all and writes none. Promises settle, and events are published, in the order the
   * appends were made.
   */
  private async commitGroup(): Promise<void> {
    const group = this.pending;
    this.pending = [];
    if (group.length === 0) return;
    const outcomes: Array<{ ok: true; result: AppendResult } | { ok: false; error: unknown }> = [];
    let tx: WriteTx | null = null;
    try {
      const out = await this.core.conn.checkout().catch((error: unknown) => {
        throw this.core.conn.statementError(error);
      });
      tx = new WriteTx(out.client, this.core.names);
      try {
        await tx.beginLocked();
        for (const item of group) {
          faultPoint('before-append');
          const active = tx;
          try {
            const run = () => this.appendIn(active, item.streamId, item.prepared, item.options);
            outcomes.push({ ok: true, result: group.length === 1 ? await run() : await tx.savepoint(run) });
          } catch (error) {
            if (group.length === 1) throw error;
            outcomes.push({ ok: false, error: this.core.conn.statementError(error) });
          }
        }
        if (outcomes.some((o) => o.ok)) await this.commit(tx);
        else await tx.rollback();
        out.release();
      } catch (error) {
        await tx.rollback();
        out.release(error);
        throw error;
      }
    } catch (error) {
      const failure = this.core.conn.statementError(error);
      for (const item of group) item.reject(failure);
      return;
    }
    if (outcomes.some((o) => o.ok)) this.commitStats.commits++;
    const published: StoredEvent[] = [];
    group.forEach((item, i) => {
      const outcome = outcomes[i]!;
      if (!outcome.ok) return;
      this.commitStats.appends++;
      if (item.options.onLeases && Object.keys(outcome.result.leases).length) item.options.onLeases(outcome.result.leases);
      published.push(...outcome.result.events);
    });
    await this.follower.publishLocal(tx.headAtLock, published);
    group.forEach((item, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) item.resolve(outcome.result);
      else item.reject(outcome.error);
    });
  }

  /** COMMIT, its failure said the project's way (a lost connection: the outcome is unknown). */
  private async commit(tx: WriteTx): Promise<void> {
    try {
      await tx.commit();
    } catch (error) {
      throw this.core.conn.statementError(error, true);
    }
  }

  /**
   * Resolves once every append made before the call is committed or has failed: the group
   * waiting now and the one in flight, and the appends of an open batch so far.
   */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.inflight]);
  }

  /**
   * Runs `fn` in one transaction on one connection: the appends and lease writes it makes with the
   * batch handle share one commit, each in its own savepoint. The events are published after the
   * commit — none if it fails. `within` an open batch, `fn` joins it.
   */
  async batch<T>(fn: (batch: Batch) => Promise<T>, within?: Batch): Promise<T> {
    if (within !== undefined && this.core.joined(within)) return fn(within);
    // Appends made before the batch began are committed first, in their own group.
    this.flush();
    return this.core.exclusive(async () => {
      const out = await this.core.conn.checkout().catch((error: unknown) => {
        throw this.core.conn.statementError(error);
      });
      const tx = new WriteTx(out.client, this.core.names);
      const { open, close } = this.core.openBatch(tx);
      let result: T;
      try {
        try {
          // The log head is locked at the batch's first write, not here: a batch that only reads
          // (or has not written yet) does not hold up the fleet's appends.
          await tx.client.query('BEGIN');
          result = await fn(open.batch);
          // Writes of the batch its callback did not wait for are part of it.
          await tx.drained();
          faultPoint('mid-batch');
          open.closing = true;
          await this.commit(tx);
          this.commitStats.commits++;
          out.release();
        } catch (error) {
          open.closing = true;
          await tx.drained();
          await tx.rollback();
          out.release(error);
          throw this.core.conn.statementError(error);
        }
      } finally {
        close();
      }
      for (const after of open.committed) after();
      await this.follower.publishLocal(tx.headAtLock, open.events);
      return result;
    });
  }

  /**
   * Runs `fn` once what was appended so far is committed: at once outside a batch, after the
   * batch's commit inside one, never if it fails.
   */
  afterCommit(fn: () => void, batch?: Batch): void {
    const open = this.core.open;
    if (batch !== undefined && open !== null && open.batch === batch) open.committed.push(fn);
    else fn();
  }

  /** One append inside `tx` (its savepoint or its whole transaction), translating PostgreSQL's errors into the log's. */
  private async appendIn(tx: WriteTx, streamId: string, prepared: PreparedEvent[], options: AppendOptions): Promise<AppendResult> {
    try {
      return await this.appendInTransaction(tx, streamId, prepared, options);
    } catch (error) {
      // (stream_id, version) taken: the compare-and-set below makes this unreachable unless the
      // tables were changed behind the store's back; it is still the conflict it means.
      const e = error as { code?: string; constraint?: string };
      if (e.code === '23505' && /stream_id/.test(e.constraint ?? '')) {
        throw new ConcurrencyConflictError(streamId, options.expectedVersion, await this.committedVersion(this.core.pool, streamId).catch(() => options.expectedVersion));
      }
      throw this.core.conn.statementError(error);
    }
  }

  private async appendInTransaction(tx: WriteTx, streamId: string, prepared: PreparedEvent[], options: AppendOptions): Promise<AppendResult> {
    const q = tx.client;
    const leases = options.guards?.length ? await applyGuards(q, this.core, options.guards, options.nowMs ?? Date.parse(prepared[0]!.at)) : {};
    const actual = await this.compareAndSet(q, streamId, prepared, options);
    const stored: StoredEvent[] = [];
    let version = actual;
    for (const event of prepared) {
      version += 1;
      tx.head += 1;
      stored.push({ position: tx.head, streamId, version, type: event.type, v: event.v, data: event.data, meta: event.meta, at: event.at, state: event.state });
    }
    await this.insertEventRows(q, stored.map(storedRow));
    // After the events' rows: a projection never reads the events table (src/projections), so
    // running them after all the append's rows rather than after each is the same.
    for (const event of stored) await this.applyHandlers(q, event);
    if (options.archivedThrough !== undefined) await this.deleteArchived(tx, streamId, prepared, options.archivedThrough);
    return { streamId, version, position: tx.head, events: stored, leases };
  }

  /**
   * Writes events another log already stored (`loops store copy`: src/runtime/admin/store-copy.ts),
   * verbatim — positions, versions, types, schema versions, the JSON as the text it was stored
   * as, times and states — as this store's own appends would have written them: SQLite's
   * `SqliteEventLog.appendStored` on PostgreSQL, with the same steps (`storedGroups`,
   * `storedExpectation`) and the same writes as `append` (the stream's compare-and-set, the event
   * rows, the inline projections, the archive delete). In the open batch given in `options` (a
   * savepoint of its transaction), else in a transaction of its own; the log head is locked and
   * moved to the last position written, and the log format raised when a tombstone is written.
   * Events that do not continue this log (a position not after its head, a head that is not
   * `expectedHead`, a version that is not its stream's next) are refused and nothing is written.
   * Nothing is published on `events$`. Returns the events written (upcast, as reads give them).
   */
  async appendStored(rows: ReadonlyArray<EventRow>, streams: ReadonlyMap<string, StreamRow>, options: StoredAppendOptions = {}): Promise<StoredEvent[]> {
    const open = this.core.joined(options.batch);
    if (!open) return this.batch((batch) => this.appendStored(rows, streams, { ...options, batch }));
    return this.core.batchWrite(open, (tx) => this.storedIn(tx, rows, streams, options.expectedHead));
  }

  private async storedIn(tx: WriteTx, rows: ReadonlyArray<EventRow>, streams: ReadonlyMap<string, StreamRow>, expectedHead: number | undefined): Promise<StoredEvent[]> {
    const q = tx.client;
    const groups = storedGroups(rows, tx.head, expectedHead);
    if (groups.length === 0) return [];
    const written: StoredEvent[] = [];
    for (const group of groups) {
      const { streamId, tombstone } = group;
      const { expected, missing } = storedExpectation(group, tombstone ? await this.committedVersion(q, streamId) : 0);
      const last = group.rows[group.rows.length - 1]!;
      try {
        await this.advanceStream(q, streamId, expected, last.version, last.at, () => storedStreamRow(group, streams));
      } catch (error) {
        throw storedConflict(group, error);
      }
      await this.insertEventRows(q, group.rows);
      for (const event of group.events) await this.applyHandlers(q, event);
      if (tombstone) {
        const { event } = tombstone;
        await this.deleteArchived(tx, streamId, [{ type: event.type, v: event.v, data: event.data, meta: event.meta, at: event.at, state: event.state }], tombstone.through!, missing);
      }
      written.push(...group.events);
    }
    tx.head = rows[rows.length - 1]!.position;
    return written;
  }

  /**
   * The compare-and-set on the stream's version for an append (item 4 of the design note; the
   * statements: `advanceStream`). Returns the version the stream was at.
   */
  private async compareAndSet(q: Queryable, streamId: string, prepared: PreparedEvent[], options: AppendOptions): Promise<number> {
    const expected = options.expectedVersion;
    await this.advanceStream(q, streamId, expected, expected + prepared.length, prepared[prepared.length - 1]!.at, async () => {
      if (!options.kind) {
        const actual = await this.committedVersion(q, streamId);
        if (actual !== 0) throw new ConcurrencyConflictError(streamId, expected, actual);
        throw new ValidationError(`creating stream ${streamId} needs a kind`);
      }
      return { kind: options.kind, machineId: options.machine?.id ?? null, machineVersion: options.machine?.version ?? null, createdAt: prepared[0]!.at };
    });
    return expected;
  }

  /**
   * The compare-and-set on a stream's version, shared by `append` and `appendStored` (as SQLite's
   * `advanceStream`): an UPDATE on the expected version, which PostgreSQL re-checks on the row's
   * newest version after waiting for a concurrent writer of it; a new stream's row (from
   * `create()`, asked only then) inserted unless one exists. The stream is moved to `next`.
   */
  private async advanceStream(q: Queryable, streamId: string, expected: number, next: number, updatedAt: string, create: () => NewStreamRow | Promise<NewStreamRow>): Promise<void> {
    let changed: number | null;
    if (expected === 0) {
      const row = await create();
      // ON CONFLICT DO NOTHING rather than the unique violation (23505): a second creator waits
      // for the first's commit, then finds its row and inserts nothing — and its transaction is
      // not aborted, so a group's other appends go on without a rollback.
      changed = (
        await q.query({
          name: 'loops_stream_create',
          text: `INSERT INTO ${this.core.names.streams} (stream_id, kind, version, machine_id, machine_version, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (stream_id) DO NOTHING`,
          values: [streamId, row.kind, next, row.machineId, row.machineVersion, row.createdAt, updatedAt],
        })
      ).rowCount;
    } else {
      changed = (
        await q.query({
          name: 'loops_stream_bump',
          text: `UPDATE ${this.core.names.streams} SET version = $1, updated_at = $2 WHERE stream_id = $3 AND version = $4`,
          values: [next, updatedAt, streamId, expected],
        })
      ).rowCount;
    }
    if (changed !== 1) throw new ConcurrencyConflictError(streamId, expected, await this.committedVersion(q, streamId));
  }

  private async committedVersion(q: Queryable, streamId: string): Promise<number> {
    const row = (await q.query<{ version: number }>({ name: 'loops_stream_version', text: `SELECT version FROM ${this.core.names.streams} WHERE stream_id = $1`, values: [streamId] })).rows[0];
    return row?.version ?? 0;
  }

  /**
   * Event rows as stored (the JSON as text): an append's (`storedRow`: the text SQLite's store
   * writes, JSON.stringify, so both hold the same bytes) or another log's (`appendStored`),
   * `INSERT_ROWS` per statement.
   */
  private async insertEventRows(q: Queryable, rows: ReadonlyArray<EventRow>): Promise<void> {
    for (let i = 0; i < rows.length; i += INSERT_ROWS) {
      const part = rows.slice(i, i + INSERT_ROWS);
      const values: unknown[] = [];
      const tuples: string[] = [];
      for (const r of part) {
        const n = values.length;
        tuples.push(`($${n + 1}, $${n + 2}, $${n + 3}, $${n + 4}, $${n + 5}, $${n + 6}, $${n + 7}, $${n + 8}, $${n + 9})`);
        values.push(r.position, r.stream_id, r.version, r.type, r.v, r.data, r.meta, r.at, r.state);
      }
      await q.query({ name: `loops_events_insert_${part.length}`, text: `INSERT INTO ${this.core.names.events} (${EVENT_COLUMNS}) VALUES ${tuples.join(', ')}`, values });
    }
  }

  /** Runs the inline projections for one event (inside the append's transaction). */
  private async applyHandlers(q: Queryable, event: StoredEvent): Promise<void> {
    for (const handler of this.handlers) {
      for (const statement of handler(event)) await q.query(pgPlaceholders(statement.sql), [...statement.params]);
    }
  }

  /**
   * The history a `stream.archived` tombstone replaces: deleted, and the log's format raised to say
   * so (at the commit, in `log_head`). `missing`: how many of those events this log never had
   * (`appendStored`: its source had deleted them before they were read).
   */
  private async deleteArchived(tx: WriteTx, streamId: string, prepared: PreparedEvent[], through: number, missing = 0): Promise<void> {
    const expected = archivedEventCount(streamId, prepared, through);
    const deleted = (await tx.client.query({ name: 'loops_archive_delete', text: `DELETE FROM ${this.core.names.events} WHERE stream_id = $1 AND version <= $2`, values: [streamId, through] })).rowCount ?? 0;
    checkArchivedCount(streamId, through, deleted, expected === undefined ? undefined : expected - missing);
    tx.format = Math.max(tx.format, ARCHIVED_FORMAT_VERSION);
  }

  /**
   * PostgreSQL gives the space of deleted rows (archiving) back to the tables by itself
   * (autovacuum), for later rows to reuse; returning it to the file system takes VACUUM FULL, an
   * exclusive lock on the fleet's log for its duration — not something a store method should do
   * to the other hosts. Nothing is measured or freed here: zeros, `incremental` (there is no
   * older layout to convert, as with SQLite).
   */
  async reclaimSpace(): Promise<SpaceReport> {
    return { freedBytes: 0, freeBytes: 0, incremental: true };
  }

  async readStream(streamId: string, fromVersion = 1): Promise<StoredEvent[]> {
    const rows = await this.core.read<EventRow>(
      'loops_read_stream',
      `SELECT ${EVENT_COLUMNS} FROM ${this.core.names.events} WHERE stream_id = $1 AND version >= $2 ORDER BY version`,
      [streamId, fromVersion],
    );
    return rows.map(rowToEvent);
  }

  async readStreamPage(streamId: string, fromVersion: number, limit: number): Promise<StoredEvent[]> {
    const rows = await this.core.read<EventRow>(
      'loops_read_stream_page',
      `SELECT ${EVENT_COLUMNS} FROM ${this.core.names.events} WHERE stream_id = $1 AND version >= $2 ORDER BY version LIMIT $3`,
      [streamId, fromVersion, limit],
    );
    return rows.map(rowToEvent);
  }

  async readAll(options: ReadAllOptions = {}): Promise<StoredEvent[]> {
    // LIMIT NULL is no limit.
    const rows = await this.core.read<EventRow>(
      'loops_read_all',
      `SELECT ${EVENT_COLUMNS} FROM ${this.core.names.events} WHERE position > $1 ORDER BY position LIMIT $2`,
      [options.fromPosition ?? 0, options.limit ?? null],
    );
    return rows.map(rowToEvent);
  }

  async streamInfo(streamId: string): Promise<StreamInfo | undefined> {
    const row = (await this.core.read<StreamRow>('loops_stream_info', `SELECT stream_id, kind, version, machine_id, machine_version, created_at, updated_at FROM ${this.core.names.streams} WHERE stream_id = $1`, [streamId]))[0];
    return row ? rowToStreamInfo(row) : undefined;
  }

  /**
   * The last position used. Committed positions are gap-free, so this is the committed head;
   * inside an open batch that wrote, its own appends' too (as SQLite's store answers on its one
   * connection).
   */
  async headPosition(): Promise<number> {
    const open = this.core.open;
    if (open !== null && !open.closing && open.tx.headAtLock !== null) {
      const tx = open.tx;
      return tx.run(async () => tx.head);
    }
    const { name, text } = selectHead(this.core.names);
    return (await this.core.read<{ position: number }>(name, text, []))[0]?.position ?? 0;
  }

  /**
   * How far this host's clock is from the database server's: the server's clock read in one round
   * trip, less this host's clock at its midpoint (positive: the server is ahead), with the round
   * trip's length (the measure is good to half of it). Leases and due times use each writing host's
   * clock (docs/scaling.md), so a fleet's hosts are compared through the server's.
   */
  async clockOffset(nowMs: () => number = Date.now): Promise<{ offsetMs: number; rttMs: number }> {
    const before = nowMs();
    const rows = await this.core.read<{ ms: number }>('loops_clock', 'SELECT (extract(epoch from clock_timestamp()) * 1000)::float8 AS ms', []);
    const after = nowMs();
    return { offsetMs: Math.round(rows[0]!.ms - (before + after) / 2), rttMs: after - before };
  }

  async streamsWithEvents(after: number, upTo: number, types: readonly string[]): Promise<string[]> {
    const rows = await this.core.read<{ stream: string }>(
      'loops_streams_with_events',
      `SELECT DISTINCT stream_id AS stream FROM ${this.core.names.events} WHERE position > $1 AND position <= $2 AND type = ANY($3)`,
      [after, upTo, [...types]],
    );
    return rows.map((r) => r.stream);
  }

  /**
   * For a local replica of this log (src/runtime/replica.ts), in one statement (one round trip,
   * one snapshot, so every position up to the head it reads is committed in it, or was archived):
   * the committed head; up to `limit` events after `after` and up to that head, as stored (JSON
   * text, not upcast), with the rows of their streams; which log this is (where, schema, and the
   * time its tables were made, which a schema dropped and made again does not share); and the
   * stream and version of the event at `check`. Always on the pool, never an open batch's
   * connection: only what is committed.
   */
  async replicaPage(after: number, limit: number, check = 0): Promise<ReplicaPage> {
    const { names, conn } = this.core;
    type Row = { head: number; log: string | null; check_stream: string | null; check_version: number | null } & { [K in keyof EventRow]: EventRow[K] | null } & {
      [K in keyof StreamRow as `s_${K}`]: StreamRow[K];
    };
    let rows: Row[];
    try {
      rows = (
        await conn.pool.query<Row>({
          name: 'loops_replica_page',
          text: `SELECT h.position AS head,
                   (SELECT extract(epoch FROM m.applied_at)::text FROM ${names.migrations} m WHERE m.version = 1) AS log,
                   c.stream_id AS check_stream, c.version AS check_version,
                   e.position, e.stream_id, e.version, e.type, e.v, e.data, e.meta, e.at, e.state,
                   s.stream_id AS s_stream_id, s.kind AS s_kind, s.version AS s_version, s.machine_id AS s_machine_id,
                   s.machine_version AS s_machine_version, s.created_at AS s_created_at, s.updated_at AS s_updated_at
                 FROM ${names.logHead} h
                 LEFT JOIN ${names.events} c ON c.position = $1
                 LEFT JOIN LATERAL (
                   SELECT * FROM ${names.events} WHERE position > $2 AND position <= h.position ORDER BY position LIMIT $3
                 ) e ON true
                 LEFT JOIN ${names.streams} s ON s.stream_id = e.stream_id
                 ORDER BY e.position`,
          values: [check, after, limit],
        })
      ).rows;
    } catch (error) {
      throw conn.statementError(error);
    }
    const top = rows[0]!;
    const events: EventRow[] = [];
    const streams = new Map<string, StreamRow>();
    for (const r of rows) {
      if (r.position === null) continue;
      events.push({ position: r.position, stream_id: r.stream_id!, version: r.version!, type: r.type!, v: r.v!, data: r.data!, meta: r.meta!, at: r.at!, state: r.state });
      if (r.s_stream_id !== null && !streams.has(r.s_stream_id)) {
        streams.set(r.s_stream_id, { stream_id: r.s_stream_id, kind: r.s_kind, version: r.s_version, machine_id: r.s_machine_id, machine_version: r.s_machine_version, created_at: r.s_created_at, updated_at: r.s_updated_at });
      }
    }
    return {
      log: { where: conn.where, schema: names.schema, id: top.log ?? '' },
      head: top.head,
      check: top.check_stream === null ? null : { streamId: top.check_stream, version: top.check_version! },
      events,
      streams: [...streams.values()],
    };
  }

  /**
   * Ends the store: waits for the appends in flight and an open batch, stops following, closes the
   * pool, completes `events$`. `close()` starts the same without waiting; the process does not
   * hang on the store either way (an idle pool and the LISTEN connection do not keep it alive).
   */
  end(): Promise<void> {
    this.ended ??= (async () => {
      await this.settled();
      await this.core.outsideBatch();
      await this.core.exclusive(async () => {});
      await this.follower.close();
      await this.onEnd();
      this.subject.complete();
    })();
    return this.ended;
  }

  close(): void {
    void this.end().catch(() => {});
  }
}
