/**
 * The better-sqlite3 implementation of `EventStore`.
 *
 * Append = one `BEGIN IMMEDIATE` transaction: compare-and-set the stream version, insert the
 * events, run every inline projection, commit. Only after the commit are the events published on
 * `events$`. The store's interface is asynchronous (a PostgreSQL store implements the same one);
 * inside, the work is synchronous.
 *
 * Group commit: appends made outside a batch in the same turn of the event loop — the claims,
 * spawns and exits of runs that start or end together, whichever actors make them — are committed
 * together at the end of that turn, in one transaction, each in its own savepoint: one that fails
 * (a conflict, a guard) undoes only itself and rejects only its own promise. Every append's
 * promise settles after the commit that made it durable, so an effect that waits for its event
 * still runs only once the event is in the log; a crash before that commit loses only appends
 * nobody was told about yet (docs/architecture.md, *Group commit*).
 *
 * A batch is a transaction held open across its callback's awaits; `WriteGate` makes every write
 * that does not belong to it wait for its end, so nothing joins it by accident.
 *
 * Over 500 lines on purpose: one concern, the log's writes — append, group commit, batch, archive
 * and `appendStored` (events another log stored: the replica's and `loops store copy`'s writer) —
 * which share one stream compare-and-set, one insert and one archive path; the rules `appendStored`
 * shares with the PostgreSQL store (storedGroups, storedExpectation…) are exported from here so
 * both stores apply the same ones. Split, the paths that must write alike would drift apart.
 */
import { faultPoint } from './faults.js';
import { Subject } from 'rxjs';
import type { Transaction } from 'better-sqlite3';
import { ARCHIVED_FORMAT_VERSION, busyError, cached, isBusy, type Db } from './db.js';
import { applyGuards } from './sqlite-leases.js';
import { gateFor, resolved, type WriteGate } from './sqlite-gate.js';
import { streamsWithEvents } from './sqlite-reads.js';
import { schemaVersion, upcast, validateEventData } from './catalog.js';
import { ConcurrencyConflictError, LoopsError, ValidationError } from './errors.js';
import type {
  AppendOptions,
  AppendResult,
  Batch,
  EventMeta,
  EventStore,
  InlineHandler,
  Json,
  NewEvent,
  ReadAllOptions,
  StoredEvent,
  SpaceReport,
  StreamInfo,
} from './types.js';

/** Pages given back per write transaction by `reclaimSpace` (4 KiB each: 8 MiB, a few ms). */
const RECLAIM_PAGES = 2048;

export interface EventRow {
  position: number;
  stream_id: string;
  version: number;
  type: string;
  v: number;
  data: string;
  meta: string;
  at: string;
  state: string | null;
}

/** A `streams` row, as both stores read it. */
export interface StreamRow {
  stream_id: string;
  kind: string;
  version: number;
  machine_id: string | null;
  machine_version: number | null;
  created_at: string;
  updated_at: string;
}

/** What a new stream's row holds besides its version and update time (`advanceStream`, both stores). */
export interface NewStreamRow {
  kind: string;
  machineId: string | null;
  machineVersion: number | null;
  createdAt: string;
}

/**
 * What a local replica of a log (src/runtime/replica.ts) reads from its source in one go
 * (`PgEventStore.replicaPage`), for `SqliteEventLog.appendStored`.
 */
export interface ReplicaPage {
  /** Which log this is: where (never a password), its schema, and an identity that a new log of the same name does not share. */
  log: { where: string; schema: string; id: string };
  /** The committed head when the page was read: every position up to it is committed, or deleted by archiving. */
  head: number;
  /** The event at the position asked to check, when there is one there (a replica recognising the log it copied). */
  check: { streamId: string; version: number } | null;
  /** Committed events after the position asked for and up to `head`, in position order, as stored (JSON text, not upcast). */
  events: EventRow[];
  /** The rows of those events' streams (their kind and machine: events do not carry them). */
  streams: StreamRow[];
}

/** Options of `appendStored` (both stores). */
export interface StoredAppendOptions {
  /** The open batch the events belong to (`EventStore.batch`): written in its transaction. */
  batch?: Batch;
  /**
   * The position this log's head must be at (0: the log is empty), checked inside the transaction:
   * a compare-and-set on the whole log, for a copy that must continue nothing but itself
   * (`loops store copy`). A log at another head is a conflict, and nothing is written.
   */
  expectedHead?: number;
}

const ARCHIVED = 'stream.archived';

/** Events stored elsewhere (`appendStored`) that do not continue this log: the copy and its source diverged. */
function diverged(what: string): LoopsError {
  return new LoopsError('internal', `events copied from another log do not continue this database's copy of it: ${what}`, {
    hint: 'this database is a replica that no longer matches its source: delete the replica file (it is only a cache) and loops makes it again from the log',
  });
}

/** `appendStored`'s log compare-and-set (`expectedHead`) failed. */
function headMoved(expected: number, actual: number): LoopsError {
  return new LoopsError('conflict', `the log is at position ${actual}, not ${expected}: another process wrote to it`, {
    retryable: true,
    hint: 'nothing was written; write events stored elsewhere only into a log nobody else writes',
  });
}

/**
 * One step of `appendStored` (both stores): a run of consecutive events of one stream, as an
 * append made them, or a `stream.archived` tombstone alone.
 */
export interface StoredGroup {
  streamId: string;
  rows: EventRow[];
  /** The rows as reads give them (upcast), for the inline projections. */
  events: StoredEvent[];
  /** The group is a tombstone: the versions it archived (up to `through`). */
  tombstone: { event: StoredEvent; through: number | undefined } | null;
}

/**
 * `appendStored`'s plan, shared by both stores: `rows` split into groups (`StoredGroup`), checked
 * to come after position `head` (this log's) in position order — nothing is written otherwise.
 */
export function storedGroups(rows: ReadonlyArray<EventRow>, head: number, expectedHead?: number): StoredGroup[] {
  if (expectedHead !== undefined && head !== expectedHead) throw headMoved(expectedHead, head);
  const groups: StoredGroup[] = [];
  let after = head;
  for (let i = 0; i < rows.length; ) {
    const first = rows[i]!;
    // One stream's consecutive events, as an append would have made them; a tombstone alone.
    let j = i + 1;
    if (first.type !== ARCHIVED) {
      while (j < rows.length && rows[j]!.stream_id === first.stream_id && rows[j]!.type !== ARCHIVED && rows[j]!.version === rows[j - 1]!.version + 1) j++;
    }
    const group = rows.slice(i, j);
    i = j;
    for (const row of group) {
      if (row.position <= after) throw diverged(`event ${row.position} (${row.stream_id} version ${row.version}) does not come after position ${after}`);
      after = row.position;
    }
    const events = group.map(rowToEvent);
    const tombstone = first.type === ARCHIVED ? { event: events[0]!, through: (events[0]!.data as { toVersion?: number }).toVersion } : null;
    groups.push({ streamId: first.stream_id, rows: group, events, tombstone });
  }
  return groups;
}

/**
 * A group's compare-and-set (both stores): the version its stream must be at here, and — for a
 * tombstone, given the stream's version here (`actual`) — how many of the events it archived this
 * log never had (its source had deleted them before they were read).
 */
export function storedExpectation(group: StoredGroup, actual: number): { expected: number; missing: number } {
  const first = group.rows[0]!;
  if (!group.tombstone) return { expected: first.version - 1, missing: 0 };
  const through = group.tombstone.through;
  if (through === undefined || first.version !== through + 1 || actual > through) {
    throw diverged(`the tombstone of ${group.streamId} at position ${first.position} (version ${first.version}, for versions up to ${through}) does not follow its version ${actual} here`);
  }
  return { expected: actual, missing: through - actual };
}

/** A new stream's row for a group (both stores): its kind and machine from the source's `streams` row. */
export function storedStreamRow(group: StoredGroup, streams: ReadonlyMap<string, StreamRow>): NewStreamRow {
  const first = group.rows[0]!;
  const source = streams.get(group.streamId);
  if (!source) throw diverged(`stream ${group.streamId} (event ${first.position}) has no row in the source's streams`);
  return { kind: source.kind, machineId: source.machine_id, machineVersion: source.machine_version, createdAt: first.version === 1 ? first.at : source.created_at };
}

/** A group's compare-and-set that failed, said as the divergence it is (both stores). */
export function storedConflict(group: StoredGroup, error: unknown): unknown {
  if (!(error instanceof ConcurrencyConflictError)) return error;
  const first = group.rows[0]!;
  return diverged(`event ${first.position} is version ${first.version} of ${group.streamId}, which is at version ${error.actualVersion} here`);
}

/** An event of an append, checked against the catalogue and given its schema version (`prepareEvents`). */
export interface PreparedEvent {
  type: string;
  v: number;
  data: unknown;
  meta: EventMeta;
  at: string;
  state: Json | null;
}

/**
 * An append's events, checked against the catalogue (when `validate`) and given their schema
 * versions: every store's first step, before its transaction (shared with the PostgreSQL store).
 */
export function prepareEvents(streamId: string, events: NewEvent[], validate: boolean): PreparedEvent[] {
  if (events.length === 0) throw new ValidationError(`nothing to append to ${streamId}`);
  return events.map((event): PreparedEvent => ({
    type: event.type,
    v: schemaVersion(event.type),
    data: validate ? validateEventData(event.type, event.data) : event.data,
    meta: event.meta ?? {},
    at: event.at,
    state: event.state === undefined ? null : event.state,
  }));
}

/**
 * Archiving (`archivedThrough`): how many events the stream's `stream.archived` tombstone says it
 * replaces. Throws unless the append is exactly that one tombstone, for versions up to `through`.
 */
export function archivedEventCount(streamId: string, prepared: PreparedEvent[], through: number): number | undefined {
  const tombstone = prepared[0]!;
  const data = tombstone.data as { fromVersion?: number; toVersion?: number; events?: number };
  if (prepared.length !== 1 || tombstone.type !== 'stream.archived' || data.toVersion !== through) {
    throw new ValidationError(`archiving ${streamId}: the one event appended must be its stream.archived tombstone for versions up to ${through}`);
  }
  return data.events;
}

/** Archiving: the delete removed exactly the events the tombstone says (`archivedEventCount`). */
export function checkArchivedCount(streamId: string, through: number, deleted: number, expected: number | undefined): void {
  if (deleted !== expected) {
    throw new ValidationError(`archiving ${streamId}: ${deleted} event(s) found up to version ${through}, the tombstone says ${expected}`);
  }
}

export function rowToStreamInfo(row: StreamRow): StreamInfo {
  return {
    streamId: row.stream_id,
    kind: row.kind,
    version: row.version,
    machineId: row.machine_id,
    machineVersion: row.machine_version,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export function rowToEvent(row: EventRow): StoredEvent {
  return {
    position: row.position,
    streamId: row.stream_id,
    version: row.version,
    type: row.type,
    v: row.v,
    data: upcast(row.type, row.v, parseColumn(row, 'data', row.data)),
    meta: parseColumn(row, 'meta', row.meta) as EventMeta,
    at: row.at,
    state: row.state === null ? null : (parseColumn(row, 'state', row.state) as Json),
  };
}

/** A stored JSON column; a damaged one names the event it belongs to (and fails closed). */
function parseColumn(row: EventRow, column: string, text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new LoopsError('internal', `the log is damaged: the ${column} of event ${row.position} (${row.stream_id} version ${row.version}, ${row.type}) is not valid JSON`, {
      hint: 'the database was edited or damaged: loops doctor checks it; restore loops.db from a backup',
    });
  }
}

export interface SqliteEventLogOptions {
  /** Inline projections, run inside the append transaction for every appended event. */
  handlers?: ReadonlyArray<InlineHandler>;
  /** Validate payloads against the catalogue before appending (default true). */
  validate?: boolean;
  /**
   * Commit the appends of one event-loop turn together (default true). Off, an append outside a
   * batch is committed before its promise is returned, one transaction each.
   */
  groupCommit?: boolean;
}

/** An append waiting for its turn's group commit (the PostgreSQL store's too). */
export interface PendingAppend {
  streamId: string;
  prepared: PreparedEvent[];
  options: AppendOptions;
  resolve: (result: AppendResult) => void;
  reject: (error: unknown) => void;
}

export class SqliteEventLog implements EventStore {
  /** Every writer of this database file in this process waits at it for an open batch (sqlite-gate.ts). */
  readonly gate: WriteGate;
  readonly db: Db;
  private readonly handlers: ReadonlyArray<InlineHandler>;
  private readonly validate: boolean;
  private readonly groupCommit: boolean;
  /** Appends of this turn, committed together by `commitPending` (group commit). */
  private pending: PendingAppend[] = [];
  private flushScheduled = false;
  /** Settles when the group waiting now is committed (`settled`). */
  private groupDone: { promise: Promise<void>; resolve: () => void } | null = null;
  /** Commits and appends per commit since this log was opened (group commit's effect, for benches and `daemon status`). */
  readonly commitStats = { commits: 0, appends: 0 };
  private readonly subject = new Subject<StoredEvent>();
  readonly events$ = this.subject.asObservable();

  private readonly selectStream;
  private readonly insertStream;
  private readonly bumpStream;
  private readonly insertEvent;
  private readonly selectStreamEvents;
  private readonly selectAll;
  private readonly selectHead;
  /** Built once: `db.transaction()` is not free, and append is the hot path. */
  private readonly appendTx;
  private readonly storedTx;

  constructor(db: Db, options: SqliteEventLogOptions = {}) {
    this.db = db;
    this.gate = gateFor(db);
    this.handlers = options.handlers ?? [];
    this.validate = options.validate ?? true;
    this.groupCommit = options.groupCommit ?? true;
    this.selectStream = db.prepare<[string], StreamRow>('SELECT * FROM streams WHERE stream_id = ?');
    this.insertStream = db.prepare(
      `INSERT INTO streams (stream_id, kind, version, machine_id, machine_version, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
    );
    this.bumpStream = db.prepare(
      'UPDATE streams SET version = ?, updated_at = ? WHERE stream_id = ? AND version = ?',
    );
    // The position is null for this log's own appends (SQLite gives the next rowid), given for
    // events stored elsewhere first (`appendStored`).
    this.insertEvent = db.prepare(
      `INSERT INTO events (position, stream_id, version, type, v, data, meta, at, state)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.selectStreamEvents = db.prepare<[string, number], EventRow>(
      'SELECT * FROM events WHERE stream_id = ? AND version >= ? ORDER BY version',
    );
    this.selectAll = db.prepare<[number, number], EventRow>(
      'SELECT * FROM events WHERE position > ? ORDER BY position LIMIT ?',
    );
    this.selectHead = db.prepare<[], { head: number }>('SELECT position AS head FROM events ORDER BY position DESC LIMIT 1');
    this.appendTx = db.transaction((streamId: string, prepared: PreparedEvent[], options: AppendOptions) =>
      this.appendInTransaction(streamId, prepared, options),
    );
    this.storedTx = db.transaction((rows: ReadonlyArray<EventRow>, streams: ReadonlyMap<string, StreamRow>, expectedHead: number | undefined) =>
      this.storedInTransaction(rows, streams, expectedHead),
    );
  }

  append(streamId: string, events: NewEvent[], options: AppendOptions): Promise<AppendResult> {
    if (options.batch !== undefined || !this.groupCommit) {
      return this.gate.run(options.batch, () => this.appendSync(streamId, events, options));
    }
    let prepared: PreparedEvent[];
    try {
      prepared = this.prepare(streamId, events);
    } catch (error) {
      return Promise.reject(error);
    }
    return new Promise<AppendResult>((resolve, reject) => {
      this.pending.push({ streamId, prepared, options, resolve, reject });
      if (this.flushScheduled) return;
      this.flushScheduled = true;
      let resolveGroup!: () => void;
      this.groupDone = { promise: new Promise<void>((r) => (resolveGroup = r)), resolve: resolveGroup };
      // After every microtask of this turn: the appends its callbacks make join the group.
      setImmediate(() => {
        void this.gate.run(undefined, () => this.commitPending());
      });
    });
  }

  /** `append`, synchronously: the SQLite fast path (for tools that hold this store itself). */
  appendSync(streamId: string, events: NewEvent[], options: AppendOptions): AppendResult {
    if (this.gate.blocks(options.batch)) throw new Error(`append to ${streamId} while another batch is open`);
    const prepared = this.prepare(streamId, events);
    // Appends of this turn still waiting for their group go first: the log keeps the order they were made in.
    if (options.batch === undefined) this.commitPending();
    faultPoint('before-append');
    const result = this.appendPrepared(streamId, prepared, options, () => this.appendTx.immediate(streamId, prepared, options));
    if (!this.batched) this.commitStats.commits++;
    this.commitStats.appends++;
    this.published(result, options);
    return result;
  }

  private prepare(streamId: string, events: NewEvent[]): PreparedEvent[] {
    return prepareEvents(streamId, events, this.validate);
  }

  /** Runs one append's transaction (or savepoint), translating SQLite's errors into the log's. */
  private appendPrepared(streamId: string, prepared: PreparedEvent[], options: AppendOptions, run: () => AppendResult): AppendResult {
    try {
      return run();
    } catch (error) {
      if (isBusy(error)) throw busyError(error);
      if ((error as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE' && /events/.test(String(error))) {
        const actual = this.selectStream.get(streamId)?.version ?? 0;
        throw new ConcurrencyConflictError(streamId, options.expectedVersion, actual);
      }
      throw error;
    }
  }

  /** An append is durable (or joined the open batch): its leases to the caller, its events to `events$` (at the batch's commit). */
  private published(result: AppendResult, options: AppendOptions): void {
    if (options.onLeases && Object.keys(result.leases).length) options.onLeases(result.leases);
    if (this.batched) this.batched.push(...result.events);
    else for (const event of result.events) this.subject.next(event);
  }

  /**
   * Commits the appends waiting for this turn's group: one transaction, a savepoint each. A failed
   * append (conflict, guard, constraint) rolls back its savepoint and rejects its own promise; a
   * failure of the transaction itself (the lock not granted, the commit failing) rejects them all
   * and writes none. Promises settle, and events are published, in the order the appends were made.
   */
  private commitPending(): void {
    this.flushScheduled = false;
    const group = this.pending;
    const done = this.groupDone;
    this.groupDone = null;
    if (group.length === 0) return done?.resolve();
    this.pending = [];
    try {
      this.commitGroup(group);
    } finally {
      done?.resolve();
    }
  }

  /**
   * Resolves once every append made before the call is committed (or has failed): the end of the
   * turn's group commit. For callers that move a simulated clock, or read the database directly,
   * after appends they did not await.
   */
  settled(): Promise<void> {
    return this.groupDone?.promise ?? Promise.resolve();
  }

  private commitGroup(group: PendingAppend[]): void {
    if (group.length === 1) {
      const item = group[0]!;
      let result: AppendResult;
      try {
        faultPoint('before-append');
        result = this.appendPrepared(item.streamId, item.prepared, item.options, () => this.appendTx.immediate(item.streamId, item.prepared, item.options));
      } catch (error) {
        item.reject(error);
        return;
      }
      this.commitStats.commits++;
      this.commitStats.appends++;
      this.published(result, item.options);
      item.resolve(result);
      return;
    }
    const outcomes: Array<{ ok: true; result: AppendResult } | { ok: false; error: unknown }> = [];
    try {
      this.beginImmediate();
      try {
        for (const item of group) {
          faultPoint('before-append');
          try {
            // Inside the open transaction, better-sqlite3 runs the transaction function as a savepoint.
            outcomes.push({ ok: true, result: this.appendPrepared(item.streamId, item.prepared, item.options, () => this.appendTx(item.streamId, item.prepared, item.options)) });
          } catch (error) {
            outcomes.push({ ok: false, error });
          }
        }
        this.db.exec('COMMIT');
      } catch (error) {
        if (this.db.inTransaction) this.db.exec('ROLLBACK');
        throw isBusy(error) ? busyError(error) : error;
      }
    } catch (error) {
      for (const item of group) item.reject(error);
      return;
    }
    this.commitStats.commits++;
    group.forEach((item, i) => {
      const outcome = outcomes[i]!;
      if (!outcome.ok) return item.reject(outcome.error);
      this.commitStats.appends++;
      this.published(outcome.result, item.options);
      item.resolve(outcome.result);
    });
  }

  /** `BEGIN IMMEDIATE`; one that waited out busy_timeout for another connection's lock is the log's busy error. */
  private beginImmediate(): void {
    try {
      this.db.exec('BEGIN IMMEDIATE');
    } catch (error) {
      throw isBusy(error) ? busyError(error) : error;
    }
  }

  /** Callbacks waiting for the open `batch()` to commit (dropped if it fails). */
  private committed: Array<() => void> | null = null;

  /**
   * Runs `fn` once what was appended so far is committed: at once outside `batch()`, after the
   * batch's commit inside one, never if the batch fails. For caches of what the log says (stream
   * snapshots), which must not learn of appends a failed batch rolled back.
   */
  afterCommit(fn: () => void, batch?: Batch): void {
    if (this.committed && batch !== undefined && this.gate.open?.batch === batch) this.committed.push(fn);
    else fn();
  }

  /** Events appended inside `batch()`, published once it commits. */
  private batched: StoredEvent[] | null = null;

  /**
   * Runs `fn` in one transaction: the appends it makes with the batch handle share one commit (one
   * fsync) instead of one each; each keeps its own savepoint, so an append that fails (a conflict)
   * undoes only itself. The appended events are published after the commit, as usual — none if it
   * fails. `within` an open batch, `fn` joins it.
   */
  async batch<T>(fn: (batch: Batch) => Promise<T>, within?: Batch): Promise<T> {
    if (within !== undefined && this.gate.open?.batch === within) return fn(within);
    const { batch, end } = await this.gate.begin();
    // Appends of this turn made before the batch began are committed first, in their own group.
    this.commitPending();
    this.batched = [];
    this.committed = [];
    let events: StoredEvent[] = [];
    let after: Array<() => void> = [];
    let result: T;
    try {
      this.beginImmediate();
      try {
        result = await fn(batch);
        faultPoint('mid-batch');
        this.db.exec('COMMIT');
        this.commitStats.commits++;
      } catch (error) {
        if (this.db.inTransaction) this.db.exec('ROLLBACK');
        throw isBusy(error) ? busyError(error) : error;
      }
      events = this.batched;
      after = this.committed;
    } finally {
      this.batched = null;
      this.committed = null;
      end();
    }
    for (const fn of after) fn();
    for (const event of events) this.subject.next(event);
    return result;
  }

  private appendInTransaction(streamId: string, prepared: PreparedEvent[], options: AppendOptions): AppendResult {
    const leases = options.guards?.length ? applyGuards(this.db, options.guards, options.nowMs ?? Date.parse(prepared[0]!.at)) : {};
    const actual = options.expectedVersion;
    this.advanceStream(streamId, actual, actual + prepared.length, prepared[prepared.length - 1]!.at, () => {
      if (!options.kind) throw new ValidationError(`creating stream ${streamId} needs a kind`);
      return { kind: options.kind, machineId: options.machine?.id ?? null, machineVersion: options.machine?.version ?? null, createdAt: prepared[0]!.at };
    });
    const stored: StoredEvent[] = [];
    let version = actual;
    for (const event of prepared) {
      version += 1;
      const position = this.insertEventRow({
        position: null,
        stream_id: streamId,
        version,
        type: event.type,
        v: event.v,
        data: JSON.stringify(event.data),
        meta: JSON.stringify(event.meta),
        at: event.at,
        state: event.state === null ? null : JSON.stringify(event.state),
      });
      const storedEvent: StoredEvent = { position, streamId, version, type: event.type, v: event.v, data: event.data, meta: event.meta, at: event.at, state: event.state };
      this.applyHandlers(storedEvent);
      stored.push(storedEvent);
    }
    if (options.archivedThrough !== undefined) this.deleteArchived(streamId, prepared, options.archivedThrough);
    return { streamId, version, position: stored[stored.length - 1]!.position, events: stored, leases };
  }

  /**
   * The compare-and-set on a stream's version, shared by this log's appends and `appendStored`: the
   * stream must be at `expected` (0: not exist yet), and is moved to `next`, updated `updatedAt`; a
   * new stream's row is made from `create()` (asked only then). Moving an existing stream is one
   * statement, the write itself the compare; the row is read only to say what it was instead.
   */
  private advanceStream(streamId: string, expected: number, next: number, updatedAt: string, create: () => NewStreamRow): void {
    if (expected !== 0) {
      if (this.bumpStream.run(next, updatedAt, streamId, expected).changes === 1) return;
      throw new ConcurrencyConflictError(streamId, expected, this.selectStream.get(streamId)?.version ?? 0);
    }
    const actual = this.selectStream.get(streamId)?.version ?? 0;
    if (actual !== 0) throw new ConcurrencyConflictError(streamId, expected, actual);
    const row = create();
    this.insertStream.run(streamId, row.kind, next, row.machineId, row.machineVersion, row.createdAt, updatedAt);
  }

  /** One event's row (its position null: the next rowid); returns its position. */
  private insertEventRow(row: Omit<EventRow, 'position'> & { position: number | null }): number {
    const info = this.insertEvent.run(row.position, row.stream_id, row.version, row.type, row.v, row.data, row.meta, row.at, row.state);
    return Number(info.lastInsertRowid);
  }

  /**
   * The history a `stream.archived` tombstone replaces: deleted, and the log's format raised to say
   * so. `missing`: how many of those events this log never had (`appendStored`: its source had
   * already deleted them when they were read), which the delete cannot find.
   */
  private deleteArchived(streamId: string, prepared: PreparedEvent[], through: number, missing = 0): void {
    const expected = archivedEventCount(streamId, prepared, through);
    const deleted = this.db.prepare('DELETE FROM events WHERE stream_id = ? AND version <= ?').run(streamId, through).changes;
    checkArchivedCount(streamId, through, deleted, expected === undefined ? undefined : expected - missing);
    if ((this.db.pragma('user_version', { simple: true }) as number) < ARCHIVED_FORMAT_VERSION) {
      this.db.pragma(`user_version = ${ARCHIVED_FORMAT_VERSION}`);
    }
  }

  /**
   * Writes events another log already stored (a local replica of a PostgreSQL log:
   * src/runtime/replica.ts; `loops store copy`: src/runtime/admin/store-copy.ts), verbatim —
   * their positions, versions, types, schema versions, data, meta, times and states, the JSON as
   * the text it was stored as (never upcast and written back) — in one transaction (a savepoint
   * inside the caller's, or the open batch's given in `options`), as this log's own appends would
   * have written them: each run of consecutive events of one stream (as an append made them)
   * passes the compare-and-set on the stream's version, a new stream's row is made (its kind and
   * machine from `streams`, the source's rows, since events do not carry them; created at its
   * first event's time), every inline projection runs for every event, and a `stream.archived`
   * tombstone deletes the stream's history as an append with `archivedThrough` does. A tombstone
   * may follow a gap in the stream's versions: the source deleted that history before it was
   * read (the rows the projections need come with the tombstone). `PgEventStore.appendStored` is
   * the same on PostgreSQL (the steps shared: `storedGroups`, `storedExpectation`).
   *
   * Events that do not continue this log — a version that is not the stream's next, a position not
   * after this log's last, a head that is not `expectedHead` — are refused (the copy diverged from
   * its source), and nothing is written.
   *
   * Nothing is published on `events$`: these events were published by the store that wrote them
   * (the PostgreSQL store's `events$` carries every process's), and with several processes sharing
   * one replica file only the one that copies an event would publish it here. Returns the events
   * written (upcast, as reads give them). A log fed this way takes no appends of its own.
   */
  appendStored(rows: ReadonlyArray<EventRow>, streams: ReadonlyMap<string, StreamRow>, options: StoredAppendOptions = {}): StoredEvent[] {
    if (this.gate.blocks(options.batch)) throw new Error('appendStored while another batch is open');
    if (rows.length === 0) {
      if (options.expectedHead !== undefined && this.headPositionSync() !== options.expectedHead) throw headMoved(options.expectedHead, this.headPositionSync());
      return [];
    }
    try {
      return this.storedTx.immediate(rows, streams, options.expectedHead);
    } catch (error) {
      throw isBusy(error) ? busyError(error) : error;
    }
  }

  private storedInTransaction(rows: ReadonlyArray<EventRow>, streams: ReadonlyMap<string, StreamRow>, expectedHead: number | undefined): StoredEvent[] {
    const written: StoredEvent[] = [];
    for (const group of storedGroups(rows, this.headPositionSync(), expectedHead)) {
      const { streamId, tombstone } = group;
      const { expected, missing } = storedExpectation(group, tombstone ? (this.selectStream.get(streamId)?.version ?? 0) : 0);
      const last = group.rows[group.rows.length - 1]!;
      try {
        this.advanceStream(streamId, expected, last.version, last.at, () => storedStreamRow(group, streams));
      } catch (error) {
        throw storedConflict(group, error);
      }
      group.rows.forEach((row, k) => {
        this.insertEventRow(row);
        this.applyHandlers(group.events[k]!);
      });
      if (tombstone) {
        const { event } = tombstone;
        this.deleteArchived(streamId, [{ type: event.type, v: event.v, data: event.data, meta: event.meta, at: event.at, state: event.state }], tombstone.through!, missing);
      }
      written.push(...group.events);
    }
    return written;
  }

  /**
   * What another log needs to copy this one (`loops store copy`; the shape of
   * `PgEventStore.replicaPage`), read in one read transaction (a savepoint of the caller's, whose
   * snapshot it then reads): the head; up to `limit` events after `after`, as stored (JSON text,
   * not upcast), with the rows of their streams; the stream and version of the event at `check`.
   * A SQLite log has no identity beyond its file (`log.id` is empty): not a source for a replica.
   */
  replicaPage(after: number, limit: number, check = 0): Promise<ReplicaPage> {
    return resolved(() => this.replicaPageSync(after, limit, check));
  }

  /** `replicaPage`, synchronously. */
  replicaPageSync(after: number, limit: number, check = 0): ReplicaPage {
    this.pageTx ??= this.db.transaction((after: number, limit: number, check: number): ReplicaPage => {
      const db = this.db;
      const head = this.headPositionSync();
      const at = check > 0 ? cached<[number], { stream_id: string; version: number }>(db, 'SELECT stream_id, version FROM events WHERE position = ?').get(check) : undefined;
      const events = cached<[number, number, number], EventRow>(db, 'SELECT * FROM events WHERE position > ? AND position <= ? ORDER BY position LIMIT ?').all(after, head, limit);
      const ids = [...new Set(events.map((e) => e.stream_id))];
      const streams = ids.length === 0 ? [] : cached<[string], StreamRow>(db, 'SELECT * FROM streams WHERE stream_id IN (SELECT value FROM json_each(?)) ORDER BY stream_id').all(JSON.stringify(ids));
      return { log: { where: db.name, schema: 'main', id: '' }, head, check: at ? { streamId: at.stream_id, version: at.version } : null, events, streams };
    });
    return this.pageTx.deferred(after, limit, check);
  }

  private pageTx: Transaction<(after: number, limit: number, check: number) => ReplicaPage> | undefined;

  /**
   * SQLite keeps the pages deleted rows free inside the file. A database created with incremental
   * auto-vacuum (every one since archiving exists; db.ts) gives them back `RECLAIM_PAGES` per write
   * transaction, yielding between them, until none is free (or another writer holds the lock: the
   * rest is reused by later writes). `full` runs VACUUM, which also switches an older database to
   * incremental auto-vacuum — it rewrites the file under the write lock, so only with no other writer.
   */
  async reclaimSpace(options: { full?: boolean } = {}): Promise<SpaceReport> {
    const pageSize = this.db.pragma('page_size', { simple: true }) as number;
    const pages = () => this.db.pragma('page_count', { simple: true }) as number;
    const free = () => this.db.pragma('freelist_count', { simple: true }) as number;
    const before = pages();
    if (options.full) {
      await this.gate.run(undefined, () => {
        try {
          this.db.pragma('auto_vacuum = INCREMENTAL');
          this.db.exec('VACUUM');
        } catch (error) {
          throw isBusy(error) ? busyError(error) : error;
        }
      });
    } else if ((this.db.pragma('auto_vacuum', { simple: true }) as number) === 2) {
      while (free() > 0) {
        try {
          await this.gate.run(undefined, () => this.db.pragma(`incremental_vacuum(${RECLAIM_PAGES})`));
        } catch (error) {
          if (isBusy(error)) break;
          throw error;
        }
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
    // (VACUUM may end a page or two larger than it began: nothing was given back then.)
    return { freedBytes: Math.max(0, before - pages()) * pageSize, freeBytes: free() * pageSize, incremental: (this.db.pragma('auto_vacuum', { simple: true }) as number) === 2 };
  }

  /** Runs the inline projections for one event (inside the caller's transaction). */
  applyHandlers(event: StoredEvent): void {
    for (const handler of this.handlers) {
      for (const statement of handler(event)) cached(this.db, statement.sql).run(...statement.params);
    }
  }

  readStream(streamId: string, fromVersion = 1): Promise<StoredEvent[]> {
    return resolved(() => this.readStreamSync(streamId, fromVersion));
  }

  readStreamSync(streamId: string, fromVersion = 1): StoredEvent[] {
    return this.selectStreamEvents.all(streamId, fromVersion).map(rowToEvent);
  }

  readStreamPage(streamId: string, fromVersion: number, limit: number): Promise<StoredEvent[]> {
    return resolved(() => this.readStreamPageSync(streamId, fromVersion, limit));
  }

  /** `readStreamPage`, synchronously. */
  readStreamPageSync(streamId: string, fromVersion: number, limit: number): StoredEvent[] {
    return cached<[string, number, number], EventRow>(this.db, 'SELECT * FROM events WHERE stream_id = ? AND version >= ? ORDER BY version LIMIT ?')
      .all(streamId, fromVersion, limit)
      .map(rowToEvent);
  }

  readAll(options: ReadAllOptions = {}): Promise<StoredEvent[]> {
    return resolved(() => this.readAllSync(options));
  }

  readAllSync(options: ReadAllOptions = {}): StoredEvent[] {
    return this.selectAll
      .all(options.fromPosition ?? 0, options.limit ?? Number.MAX_SAFE_INTEGER)
      .map(rowToEvent);
  }

  *iterateAll(fromPosition = 0, batch = 1000): Generator<StoredEvent> {
    let position = fromPosition;
    for (;;) {
      const rows = this.selectAll.all(position, batch);
      for (const row of rows) yield rowToEvent(row);
      if (rows.length < batch) return;
      position = rows[rows.length - 1]!.position;
    }
  }

  streamInfo(streamId: string): Promise<StreamInfo | undefined> {
    return resolved(() => this.streamInfoSync(streamId));
  }

  streamInfoSync(streamId: string): StreamInfo | undefined {
    const row = this.selectStream.get(streamId);
    return row ? rowToStreamInfo(row) : undefined;
  }

  streamsWithEvents(after: number, upTo: number, types: readonly string[]): Promise<string[]> {
    return resolved(() => streamsWithEvents(this.db, after, upTo, types));
  }

  headPosition(): Promise<number> {
    return resolved(() => this.headPositionSync());
  }

  headPositionSync(): number {
    return this.selectHead.get()?.head ?? 0;
  }

  /** Completes `events$`; the database handle is owned by the caller. */
  close(): void {
    this.subject.complete();
  }
}

// ── reads of stored events for the read side (the catalogue upcasts them) ──

/** Every event from `fromPosition` on, in position order, read `batch` rows at a time (upcast). */
export function* iterateEvents(db: Db, fromPosition = 0, batch = 2000): Generator<StoredEvent> {
  const stmt = cached<[number, number], EventRow>(db, 'SELECT * FROM events WHERE position > ? ORDER BY position LIMIT ?');
  let position = fromPosition;
  for (;;) {
    const rows = stmt.all(position, batch);
    for (const row of rows) yield rowToEvent(row);
    if (rows.length < batch) return;
    position = rows[rows.length - 1]!.position;
  }
}

/** A stream's owner (machine id and version) and all its events, upcast; null when there is no such stream. */
export function readStreamWithMachine(db: Db, streamId: string): { machine: { id: string; version: number } | null; events: StoredEvent[] } | null {
  const stream = cached<[string], { id: string | null; version: number | null }>(db, 'SELECT machine_id AS id, machine_version AS version FROM streams WHERE stream_id = ?').get(streamId);
  if (!stream) return null;
  const events = cached<[string], EventRow>(db, 'SELECT * FROM events WHERE stream_id = ? ORDER BY version').all(streamId).map(rowToEvent);
  return { machine: stream.id !== null && stream.version !== null ? { id: stream.id, version: stream.version } : null, events };
}
