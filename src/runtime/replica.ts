/**
 * The local SQLite replica of a PostgreSQL log (issue 15, option (c) of docs/design/postgres.md):
 * a fleet's daemons share one log in PostgreSQL, and each host keeps a copy of it in a SQLite file
 * of its data directory — the same `events` and `streams` tables and the same projections, written
 * by the same code (`SqliteEventLog.appendStored`) — so every read (src/runtime/queries, admin
 * reads, the SDK, the CLI) stays a synchronous SQLite query, unchanged.
 *
 * `Replica` copies what the source committed after its head, a page at a time, each page in one
 * SQLite transaction that also moves `replica_head` (the last source position the copy holds):
 *  - The head is compared inside that transaction, under SQLite's write lock: several processes of
 *    one host sharing the file (a daemon and CLIs) catch up together without copying anything
 *    twice — one writes a page; the other finds the head moved past what it read, and skips it
 *    (or writes only the part after the head, which its page holds whole).
 *  - Positions come from the source's committed head: every position up to it is committed (the
 *    PostgreSQL store takes positions in commit order) or was deleted by archiving, so the head
 *    can move past a deleted tail and no event is ever skipped.
 *  - It follows the source's `events$` (which carries the other processes' events, through
 *    LISTEN/NOTIFY, or polling while that is down) and catches up at once, one catch-up at a time:
 *    events that arrive during one make one more (`catchUp`).
 *  - It records which log it copies (where, schema, and the log's identity), and refuses another
 *    one, a log whose head is behind its own (restored from a backup, or another database), and a
 *    log whose event at the last position it copied is not that event: its copy would silently
 *    diverge. It is only a cache: deleting the file makes it again from the log.
 *
 * `ReplicatedEventStore` is the event store a runtime on such a host uses: everything goes to the
 * source (the log), and an append or batch resolves only once the replica holds it
 * (read-your-writes: code that appends and then reads `runtime.db` sees its own write).
 */
import { BehaviorSubject, Subject, type Observable, type Subscription } from 'rxjs';
import { cached, openDatabase, writeTransaction, type Db } from '../events/db.js';
import { LoopsError } from '../events/errors.js';
import { SqliteEventLog, type ReplicaPage, type StreamRow } from '../events/sqlite-log.js';
import type { AppendOptions, AppendResult, Batch, EventStore, NewEvent, ReadAllOptions, SpaceReport, StoredEvent, StreamInfo } from '../events/types.js';
import { inlineHandler } from '../projections/registry.js';
import { staleProjections } from './store.js';

/** Events read from the source per page (and written per SQLite transaction). */
const PAGE = 1000;

/** A log a replica can copy: an event store that also gives its committed events as stored (`PgEventStore`). */
export interface ReplicaSource extends EventStore {
  /** `PgEventStore.replicaPage`. */
  replicaPage(after: number, limit: number, check?: number): Promise<ReplicaPage>;
}

export interface ReplicaOptions {
  /** The replica's SQLite file (created when missing). */
  file: string;
  source: ReplicaSource;
  /** Catch up whenever the source's `events$` brings an event the replica lacks (default true). */
  follow?: boolean;
  /** Catch up once while opening (default true). */
  catchUp?: boolean;
  /** Events per page (default 1000). */
  pageSize?: number;
  /** A catch-up nobody waits for (one `events$` started) failed; by default it is kept in `lastError`. */
  onError?: (error: unknown) => void;
  /** After a catch-up failed (the source unreachable, the file busy), try again this much later (default 1000 ms); never after a `ReplicaMismatchError`. */
  retryMs?: number;
}

/** The replica's own row: how far it holds the source's log, and which log that is. */
interface HeadRow {
  position: number;
  last_position: number | null;
  last_stream: string | null;
  last_version: number | null;
  source_where: string;
  source_schema: string;
  source_log: string;
}

/** The replica's table (made by the replica, not a migration of db.ts: a database that is not a replica never has it). */
const HEAD_TABLE = `
  CREATE TABLE IF NOT EXISTS replica_head (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    -- The last source position this copy holds: every event up to it is here (or was archived).
    position      INTEGER NOT NULL,
    -- The last event copied (its position, stream and version), to recognise the source's log by.
    last_position INTEGER,
    last_stream   TEXT,
    last_version  INTEGER,
    -- Which log: where (user@host:port/database, never a password), its schema, its identity.
    source_where  TEXT NOT NULL,
    source_schema TEXT NOT NULL,
    source_log    TEXT NOT NULL
  )`;

/** A replica that cannot follow its source (another log, one behind it): the file must be made again. */
export class ReplicaMismatchError extends LoopsError {
  constructor(file: string, message: string) {
    super('internal', `the local replica ${file} ${message}`, {
      hint: `stop the loops processes of this host and delete ${file} (and its -wal and -shm files): it is only a cache of the PostgreSQL log, made again from the log on the next start`,
    });
    this.name = 'ReplicaMismatchError';
  }
}

export class Replica {
  /** The replica's database: the read side of this host (queries, admin reads, the SDK, the CLI). */
  readonly db: Db;
  /** The local log `appendStored` writes through (with the projections); it takes no appends of its own. */
  readonly log: SqliteEventLog;
  /** What this process did: events copied, events it read but found copied by another process, pages read. */
  readonly stats = { applied: 0, skipped: 0, pages: 0 };
  /** The last error of a catch-up nobody waited for (one `events$` started), null once the replica moved on. */
  lastError: unknown = null;
  private readonly heads: BehaviorSubject<number>;
  private readonly source: ReplicaSource;
  private readonly file: string;
  private readonly pageSize: number;
  private readonly onError: ((error: unknown) => void) | undefined;
  private readonly retryMs: number;
  private retry: NodeJS.Timeout | null = null;
  private subscription: Subscription | null = null;
  private wanted = false;
  private driving: Promise<void> | null = null;
  private waiters: Array<{ resolve: (head: number) => void; reject: (error: unknown) => void }> = [];
  private closed = false;

  /**
   * Opens (or makes) the replica in `options.file`: the log's tables and every projection's
   * (rebuilt from the local events when a projection's version moved, as `openReader` does), the
   * replica's head; checks that the source is the log it copies; catches up; follows the source.
   */
  static async open(options: ReplicaOptions): Promise<Replica> {
    const db = openDatabase(options.file);
    let replica: Replica | null = null;
    try {
      const stale = staleProjections(db);
      if (stale.length > 0) {
        const { rebuildProjections } = await import('./admin/projections.js');
        rebuildProjections(db, stale);
      }
      writeTransaction(db, () => db.exec(HEAD_TABLE));
      replica = new Replica(db, options);
      await replica.claim();
      if (options.catchUp ?? true) await replica.catchUp();
      if (options.follow ?? true) replica.follow();
      return replica;
    } catch (error) {
      if (replica) replica.close();
      else db.close();
      throw error;
    }
  }

  private constructor(db: Db, options: ReplicaOptions) {
    this.db = db;
    this.file = options.file;
    this.source = options.source;
    this.pageSize = options.pageSize ?? PAGE;
    this.onError = options.onError;
    this.retryMs = options.retryMs ?? 1000;
    // Appended by its source, which validated them.
    this.log = new SqliteEventLog(db, { handlers: [inlineHandler()], validate: false });
    this.heads = new BehaviorSubject(this.readHead()?.position ?? 0);
  }

  /** The last source position this replica holds, as this process last saw it (other processes sharing the file may be further). */
  get head(): number {
    return this.heads.value;
  }

  /** `head` as it moves (here or, as this process learns of it, by another process on the file). */
  get head$(): Observable<number> {
    return this.heads.asObservable();
  }

  /**
   * Brings the replica up to the source's committed head. Resolves with the replica's head once a
   * catch-up that began after the call has ended — or at once, when `target` (a position) is
   * already held (by this process's or another's copying). Catch-ups take turns: the calls made
   * while one runs share the next.
   */
  catchUp(target?: number): Promise<number> {
    if (this.closed) return Promise.reject(this.closedError());
    if (target !== undefined) {
      const head = this.localHead();
      if (head >= target) return Promise.resolve(head);
    }
    return new Promise<number>((resolve, reject) => {
      this.waiters.push({ resolve, reject });
      this.request();
    });
  }

  /** Stops following the source and closes the database (a catch-up in flight stops at its next step, writing nothing more). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.retry !== null) clearTimeout(this.retry);
    this.retry = null;
    this.subscription?.unsubscribe();
    this.subscription = null;
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) waiter.reject(this.closedError());
    this.heads.complete();
    this.log.close();
    this.db.close();
  }

  /** `close`, once the catch-up in flight (if any) has ended. */
  async end(): Promise<void> {
    this.subscription?.unsubscribe();
    this.subscription = null;
    await this.driving?.catch(() => {});
    this.close();
  }

  /** Catch up whenever the source publishes an event this file lacks. */
  private follow(): void {
    this.subscription = this.source.events$.subscribe({
      next: (event: StoredEvent) => {
        if (!this.closed && event.position > this.localHead()) this.request();
      },
    });
  }

  /** One more catch-up after the one running (if any): the requests made meanwhile share it. */
  private request(): void {
    this.wanted = true;
    this.driving ??= this.drive();
  }

  private async drive(): Promise<void> {
    // After `request` has noted this drive as the running one (the `finally` below ends it).
    await Promise.resolve();
    try {
      while (this.wanted && !this.closed) {
        this.wanted = false;
        const waiters = this.waiters;
        this.waiters = [];
        try {
          const head = await this.run();
          this.lastError = null;
          for (const waiter of waiters) waiter.resolve(head);
        } catch (error) {
          for (const waiter of waiters) waiter.reject(error);
          if (waiters.length === 0) {
            this.lastError = error;
            this.onError?.(error);
          }
          // The source's events$ may have nothing more to say for a while: come back by ourselves.
          if (!(error instanceof ReplicaMismatchError) && !this.closed && this.retry === null) {
            this.retry = setTimeout(() => {
              this.retry = null;
              if (!this.closed) this.request();
            }, this.retryMs);
            this.retry.unref();
          }
        }
      }
    } finally {
      // In the same step as the loop's last check: a request from now on starts a new drive.
      this.driving = null;
    }
  }

  /** Copies pages until one ends at the source's head. */
  private async run(): Promise<number> {
    for (;;) {
      const local = this.readHead()!;
      const page = await this.source.replicaPage(local.position, this.pageSize, local.last_position ?? 0);
      if (this.closed) throw this.closedError();
      this.stats.pages++;
      this.checkSource(page, local);
      const whole = page.events.length < this.pageSize;
      // A page that ends before the limit holds everything up to the head (positions after its last event were archived).
      const upTo = whole ? page.head : page.events[page.events.length - 1]!.position;
      if (upTo > local.position) await this.log.gate.run(undefined, () => this.apply(local.position, upTo, page));
      if (whole) return this.head;
    }
  }

  /**
   * One page in one write transaction: compare the head (another process may have copied the page
   * meanwhile), write what is after it, move the head.
   */
  private apply(from: number, upTo: number, page: ReplicaPage): void {
    if (this.closed) throw this.closedError();
    const streams = new Map<string, StreamRow>(page.streams.map((row) => [row.stream_id, row]));
    const outcome = writeTransaction(this.db, () => {
      const head = this.readHead()!;
      if (head.position >= upTo) return { head: head.position, applied: 0, skipped: page.events.length };
      if (head.position < from) throw new ReplicaMismatchError(this.file, `went back from position ${from} to ${head.position} while it was being copied into`);
      const todo = head.position === from ? page.events : page.events.filter((event) => event.position > head.position);
      const written = this.log.appendStored(todo, streams);
      const last = todo[todo.length - 1];
      const moved = cached(
        this.db,
        `UPDATE replica_head SET position = ?, last_position = coalesce(?, last_position), last_stream = coalesce(?, last_stream), last_version = coalesce(?, last_version)
         WHERE id = 1 AND position = ?`,
      ).run(upTo, last?.position ?? null, last?.stream_id ?? null, last?.version ?? null, head.position);
      if (moved.changes !== 1) throw new Error(`replica head moved from ${head.position} inside its own write transaction`);
      return { head: upTo, applied: written.length, skipped: page.events.length - todo.length };
    });
    this.stats.applied += outcome.applied;
    this.stats.skipped += outcome.skipped;
    this.lastError = null;
    this.saw(outcome.head);
  }

  /** The page is of the log this replica copies, and that log is not behind the copy. */
  private checkSource(page: ReplicaPage, local: HeadRow): void {
    const { log } = page;
    if (log.schema !== local.source_schema || log.id !== local.source_log) {
      throw new ReplicaMismatchError(
        this.file,
        `is a copy of the log in schema ${local.source_schema} at ${local.source_where} (log ${local.source_log}), not of the one in schema ${log.schema} at ${log.where} (log ${log.id})`,
      );
    }
    if (page.head < local.position) {
      throw new ReplicaMismatchError(
        this.file,
        `holds the log up to position ${local.position}, but the log in schema ${log.schema} at ${log.where} ends at position ${page.head}: the log was restored from an older backup, or it is another log`,
      );
    }
    const check = page.check;
    if (local.last_position !== null && check !== null && (check.streamId !== local.last_stream || check.version !== local.last_version)) {
      throw new ReplicaMismatchError(
        this.file,
        `copied ${local.last_stream} version ${local.last_version} at position ${local.last_position}, but the log in schema ${log.schema} at ${log.where} holds ${check.streamId} version ${check.version} there: the log was restored from an older backup and written since, or it is another log`,
      );
    }
  }

  /**
   * Records the source this file copies, or checks it is the one recorded: the schema and the
   * log's identity must match; the address may change (the same log reached another way). A
   * database that holds events but is not a replica (a host's own SQLite log) is refused.
   */
  private async claim(): Promise<void> {
    const local = this.readHead();
    const page = await this.source.replicaPage(local?.position ?? 0, 0, local?.last_position ?? 0);
    const { log } = page;
    const row = writeTransaction(this.db, () => {
      const found = this.readHead();
      if (found) {
        if (found.source_where !== log.where && found.source_schema === log.schema && found.source_log === log.id) {
          cached(this.db, 'UPDATE replica_head SET source_where = ? WHERE id = 1').run(log.where);
          return this.readHead()!;
        }
        return found;
      }
      if (cached<[], { n: number }>(this.db, 'SELECT count(*) AS n FROM events').get()!.n > 0) {
        throw new ReplicaMismatchError(this.file, 'holds a log of its own (it is not a replica): it cannot become the copy of a PostgreSQL log');
      }
      cached(this.db, 'INSERT INTO replica_head (id, position, source_where, source_schema, source_log) VALUES (1, 0, ?, ?, ?)').run(log.where, log.schema, log.id);
      return this.readHead()!;
    });
    this.checkSource(page, row);
  }

  private readHead(): HeadRow | undefined {
    return cached<[], HeadRow>(
      this.db,
      'SELECT position, last_position, last_stream, last_version, source_where, source_schema, source_log FROM replica_head WHERE id = 1',
    ).get();
  }

  /** The head in the file (another process may have moved it), noted in `head`. */
  private localHead(): number {
    const head = this.readHead()?.position ?? 0;
    this.saw(head);
    return head;
  }

  private saw(head: number): void {
    if (head > this.heads.value && !this.closed) this.heads.next(head);
  }

  private closedError(): LoopsError {
    return new LoopsError('internal', `the local replica ${this.file} is closed`);
  }
}

/**
 * The event store of a runtime on a host with a replica: the source (the PostgreSQL log) for every
 * write and read, and an append (or a batch) resolves only once the replica holds it, so that code
 * reading `runtime.db` (the replica) right after an append sees it. `events$` is the source's: it
 * carries every process's events, and an event may arrive there before the replica holds it (use
 * `Replica.head$` to wait for that).
 *
 * The replica is not owned: `close` closes the source only.
 */
export class ReplicatedEventStore implements EventStore {
  /** Appends not yet settled, with their catching up (`settled`). */
  private readonly inflight = new Set<Promise<unknown>>();
  /** Batches opened through this store, with the last position their appends took. */
  private readonly batches = new Map<Batch, number>();

  /** The source's events, each published once the replica holds it (`relay`). */
  private readonly published = new Subject<StoredEvent>();
  readonly events$: Observable<StoredEvent> = this.published.asObservable();
  private readonly relayed: Subscription;
  /** Events waiting for the replica to hold them, in position order. */
  private waiting: StoredEvent[] = [];
  private draining = false;

  constructor(
    readonly source: EventStore,
    readonly replica: Replica,
  ) {
    this.relayed = source.events$.subscribe({ next: (event) => this.relay(event), complete: () => this.published.complete() });
  }

  /**
   * Publishes a source event once the replica holds it, in order: a subscriber reads `runtime.db`
   * when told of an event (the daemon's decision log, a cancel watch, tests), and finds it there —
   * as on SQLite, where the tables and the publication come from one commit. At once when the
   * replica holds it already (this process's appends: their catch-up ran first).
   */
  private relay(event: StoredEvent): void {
    if (this.waiting.length === 0 && !this.draining && this.replica.head >= event.position) {
      this.published.next(event);
      return;
    }
    this.waiting.push(event);
    if (!this.draining) void this.drain();
  }

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      while (this.waiting.length > 0) {
        const event = this.waiting[0]!;
        if (this.replica.head < event.position) {
          // A replica that cannot catch up (closed, the file failing) does not hold back the
          // news of a committed event: it is published, and the replica retries by itself.
          await this.replica.catchUp(event.position).catch(() => {});
        }
        this.waiting.shift();
        this.published.next(event);
      }
    } finally {
      this.draining = false;
    }
  }

  append(streamId: string, events: NewEvent[], options: AppendOptions): Promise<AppendResult> {
    const batch = options.batch;
    const promise = this.source.append(streamId, events, options).then(async (result) => {
      // In an open batch: not committed yet; the batch catches up after its commit.
      if (batch !== undefined && this.batches.has(batch)) {
        this.batches.set(batch, Math.max(this.batches.get(batch)!, result.position));
        return result;
      }
      await this.held(result.position, `the append to ${streamId}`);
      return result;
    });
    this.inflight.add(promise);
    const forget = () => this.inflight.delete(promise);
    promise.then(forget, forget);
    return promise;
  }

  async batch<T>(fn: (batch: Batch) => Promise<T>, within?: Batch): Promise<T> {
    // Joining a batch opened here: the outer call catches up after its commit.
    if (within !== undefined && this.batches.has(within)) return this.source.batch(fn, within);
    let opened: Batch | undefined;
    try {
      const result = await this.source.batch((batch) => {
        opened = batch;
        this.batches.set(batch, 0);
        return fn(batch);
      }, within);
      const position = opened === undefined ? 0 : this.batches.get(opened)!;
      if (position > 0) await this.held(position, 'the batch');
      return result;
    } finally {
      if (opened !== undefined) this.batches.delete(opened);
    }
  }

  /** The replica holds `position`; else the replica's error, saying that the write itself was committed. */
  private async held(position: number, what: string): Promise<void> {
    try {
      await this.replica.catchUp(position);
    } catch (error) {
      const cause = error as { message?: string; hint?: string };
      throw new LoopsError('internal', `${what} was committed to the log (position ${position}), but the local replica cannot show it: ${cause.message ?? String(error)}`, {
        cause: error,
        hint: cause.hint ?? 'do not repeat the write: it is in the log; reads on this host lag until the replica catches up',
      });
    }
  }

  afterCommit(fn: () => void, batch?: Batch): void {
    this.source.afterCommit(fn, batch);
  }

  /** Every append made before the call is committed (or failed) and, if committed, held by the replica. */
  async settled(): Promise<void> {
    await this.source.settled();
    await Promise.allSettled([...this.inflight]);
  }

  readStream(streamId: string, fromVersion?: number): Promise<StoredEvent[]> {
    return this.source.readStream(streamId, fromVersion);
  }

  readStreamPage(streamId: string, fromVersion: number, limit: number): Promise<StoredEvent[]> {
    return this.source.readStreamPage(streamId, fromVersion, limit);
  }

  readAll(options?: ReadAllOptions): Promise<StoredEvent[]> {
    return this.source.readAll(options);
  }

  streamInfo(streamId: string): Promise<StreamInfo | undefined> {
    return this.source.streamInfo(streamId);
  }

  headPosition(): Promise<number> {
    return this.source.headPosition();
  }

  streamsWithEvents(after: number, upTo: number, types: readonly string[]): Promise<string[]> {
    return this.source.streamsWithEvents(after, upTo, types);
  }

  /** The source's (nothing to give back on PostgreSQL), then the replica file's: archiving deletes events there too. */
  async reclaimSpace(options?: { full?: boolean }): Promise<SpaceReport> {
    await this.source.reclaimSpace(options);
    return this.replica.log.reclaimSpace(options);
  }

  close(): void {
    this.relayed.unsubscribe();
    this.waiting = [];
    this.published.complete();
    this.source.close();
  }
}
