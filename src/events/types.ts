/**
 * Shapes shared by every layer: an event as it is appended, as it is stored, and the
 * `EventStore` and `LeaseStore` contracts. Nothing here knows about machines or projections.
 */
import type { Observable } from 'rxjs';

/** JSON-serialisable value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Who caused an event: the runner that appended it, and what it was caused by. */
export interface EventMeta {
  /** Id of the runner process (CLI or daemon) that appended the event. */
  runnerId?: string;
  /** Position or id of the event or command this event was caused by. */
  causationId?: string;
  /** Id shared by every event that belongs to one user command or run. */
  correlationId?: string;
  /** Lease fencing token the appender held, when the stream is leased. */
  leaseToken?: number;
  /** Who acted: trigger source, OS user, host and loops version (src/runtime/acting.ts). */
  by?: { source: string; user: string; host: string; loops: string };
  /**
   * What the event changed in its machine's context: path → hash of the new value
   * (src/machines/context-diff.ts), so replay can say in which field it differs. Absent on events
   * appended before loops recorded it, and on events appended outside a machine.
   */
  ctx?: Record<string, string>;
}

/** An event about to be appended. */
export interface NewEvent<T extends string = string, D = unknown> {
  type: T;
  data: D;
  /** ISO-8601 UTC instant from the injected clock. */
  at: string;
  meta?: EventMeta;
  /** The machine state value after this event, recorded so replay can check itself. */
  state?: Json;
}

/** An event as stored in the log. */
export interface StoredEvent<T extends string = string, D = unknown> {
  /** Global, gap-free-per-commit position in the whole log. */
  position: number;
  streamId: string;
  /** 1, 2, 3, … within the stream. */
  version: number;
  type: T;
  /** Schema version of the event type. */
  v: number;
  data: D;
  meta: EventMeta;
  at: string;
  state: Json | null;
}

/** One SQL statement a projection wants executed inside the append transaction. */
export interface SqlStatement {
  sql: string;
  params: ReadonlyArray<string | number | null>;
}

/** Something run inside the append transaction for each appended event (an inline projection). */
export type InlineHandler = (event: StoredEvent) => ReadonlyArray<SqlStatement>;

export interface StreamInfo {
  streamId: string;
  kind: string;
  version: number;
  machineId: string | null;
  machineVersion: number | null;
  createdAt: string;
  updatedAt: string;
}

/** A lease with its fencing token (`expiresAt` in epoch ms). */
export interface Lease {
  name: string;
  holder: string;
  token: number;
  expiresAt: number;
}

/**
 * A precondition of an append, as data the store checks inside the append's own transaction (so a
 * store on another database checks it the same way): the compare-and-set on the stream's version
 * is always there; these add leases and queued work.
 */
export type AppendGuard =
  /** Take the lease (or take it over from a holder whose lease expired); `expectToken: 1` for a stream's first. `release`: give it back in the same transaction. */
  | { kind: 'take-lease'; name: string; holder: string; ttlMs: number; expectToken?: number; release?: boolean }
  /** The fence: this holder still holds the lease with this token, unexpired. `release`: give it back with the events (the stream ends). */
  | { kind: 'lease-held'; name: string; holder: string; token: number; release?: boolean }
  /** Queued work (the run queue) is still unclaimed and not dropped. */
  | { kind: 'queued'; runId: string };

/**
 * One transaction several writes share (`EventStore.batch`): an opaque handle passed to the appends
 * and lease writes that belong to it. A write without it waits until no batch is open, so nothing
 * joins a batch by accident (a store on a pooled database runs the batch on one connection).
 */
export interface Batch {
  readonly batchId: number;
}

/**
 * Leases, through one interface (src/events/sqlite-leases.ts for SQLite). Asynchronous, like the
 * event store: a store on a networked database implements it without changing callers. `batch`:
 * the write belongs to that open batch (its transaction).
 */
export interface LeaseStore {
  /** Takes a lease (or takes it over once expired); a live holder refuses (retryable conflict). */
  take(name: string, holder: string, ttlMs: number, nowMs: number, batch?: Batch): Promise<Lease>;
  /** Extends a held lease; `LeaseLostError` when it is not held with that token any more. */
  renew(lease: Lease, ttlMs: number, nowMs: number): Promise<Lease>;
  release(lease: Pick<Lease, 'name' | 'holder' | 'token'>): Promise<void>;
  /** Gives up whatever token of `name` this holder has. */
  releaseByHolder(name: string, holder: string): Promise<void>;
  /** Expires every lease of a holder that is provably gone. */
  expireHolder(holder: string, nowMs: number, batch?: Batch): Promise<void>;
  get(name: string): Promise<LeaseInfo | null>;
  /**
   * The leases whose name starts with `prefix` (`run:`, `runner:`, `notice:`, `wfrun:`) and that are
   * live at `nowMs`, by name: how the read side asks which runs, runners and notices are held, with
   * one read, without joining the store's lease table to the projections (a store may keep leases
   * apart from the tables the reads run on).
   */
  live(prefix: string, nowMs: number): Promise<ReadonlyMap<string, LeaseInfo>>;
}

/** A lease as read back: its holder, fencing token and expiry (epoch ms). */
export interface LeaseInfo {
  holder: string;
  token: number;
  expiresAt: number;
}

/** A row of a store's lease table, live or not (`loops store copy` copies them: fencing tokens go on where they were). */
export interface LeaseRecord extends LeaseInfo {
  name: string;
}

export interface AppendOptions {
  /** Version the stream must be at (0 for a new stream). A mismatch throws `ConcurrencyConflictError`. */
  expectedVersion: number;
  /** Checked in order inside the transaction, before anything is written. */
  guards?: ReadonlyArray<AppendGuard>;
  /** The appender's clock (epoch ms), for the guards' lease times (default: the events' `at`). */
  nowMs?: number;
  /** The leases the guards took, once committed and before the events are published. */
  onLeases?: (leases: Record<string, Lease>) => void;
  /** Stream kind (`loop`, `run`, …); required when creating a stream. */
  kind?: string;
  /** Machine that owns the stream, recorded on creation so old streams replay on the machine that wrote them. */
  machine?: { id: string; version: number };
  /** The open batch this append belongs to (see `EventStore.batch`). */
  batch?: Batch;
  /**
   * Archiving (`loops prune --archive`): the appended event is the stream's `stream.archived`
   * tombstone, and the stream's events up to this version (its whole history before it) are
   * deleted in the same transaction, after it is appended (so no position is ever reused).
   */
  archivedThrough?: number;
}

export interface AppendResult {
  streamId: string;
  /** Stream version after the append. */
  version: number;
  /** Global position of the last appended event. */
  position: number;
  events: StoredEvent[];
  /** Leases the guards took, by name. */
  leases: Record<string, Lease>;
}

export interface ReadAllOptions {
  fromPosition?: number;
  limit?: number;
}

/**
 * The event store: the one way the runtime and the CLI reach the log. Asynchronous, so that a store
 * on a networked database (PostgreSQL, for fleets) implements it without changing callers; the
 * SQLite store does its work synchronously inside: the appends made outside a batch in one turn of
 * the event loop are committed together at its end (group commit), a batch's at the batch's end.
 */
export interface EventStore {
  /** Compare-and-set on the stream's version, the guards, the events and their projections: one transaction. */
  append(streamId: string, events: NewEvent[], options: AppendOptions): Promise<AppendResult>;
  /**
   * Runs `fn` in one transaction: the appends (and lease writes) it makes with the handle share one
   * commit; each append keeps its own savepoint, so one that fails (a conflict) undoes only itself.
   * The events are published after the commit — none if `fn` throws. `within`: join that open batch.
   */
  batch<T>(fn: (batch: Batch) => Promise<T>, within?: Batch): Promise<T>;
  /** Runs `fn` once what was appended is committed: at once, or after the commit of `batch` when it is open (never if it fails). */
  afterCommit(fn: () => void, batch?: Batch): void;
  /**
   * Resolves once every append made before the call is committed or has failed. Appends made
   * outside a batch in one turn of the event loop are committed together at its end (group
   * commit); an append's own promise already settles after its commit.
   */
  settled(): Promise<void>;
  readStream(streamId: string, fromVersion?: number): Promise<StoredEvent[]>;
  /** Up to `limit` events of a stream from `fromVersion` on, in version order: one page, for reads whose memory must not grow with the stream (replay). */
  readStreamPage(streamId: string, fromVersion: number, limit: number): Promise<StoredEvent[]>;
  readAll(options?: ReadAllOptions): Promise<StoredEvent[]>;
  streamInfo(streamId: string): Promise<StreamInfo | undefined>;
  /** Highest position in the log (0 when empty). */
  headPosition(): Promise<number>;
  /**
   * The streams that got an event of one of `types` at a position in (`after`, `upTo`] — appended
   * by any process (how a runner learns of a cancel request made elsewhere).
   */
  streamsWithEvents(after: number, upTo: number, types: readonly string[]): Promise<string[]>;
  /** Events appended through this store, after their transaction committed (subscribe to follow them). */
  readonly events$: Observable<StoredEvent>;
  /**
   * Gives the space that deleted events (archiving) left inside the store back to the file system:
   * a little at a time, between other writers, where the store can do so; `full`: all at once, by
   * rewriting the store (exclusive for its duration: only with no other writer about).
   */
  reclaimSpace(options?: { full?: boolean }): Promise<SpaceReport>;
  close(): void;
}

export interface SpaceReport {
  /** Bytes given back to the file system. */
  freedBytes: number;
  /** Bytes still free inside the store (reused by later writes). */
  freeBytes: number;
  /** False when the store can give space back only with `full` (a SQLite database created before incremental vacuum). */
  incremental: boolean;
}
