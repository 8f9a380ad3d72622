/**
 * Shapes shared by every layer: an event as it is appended, as it is stored, and the
 * `EventLog` contract. Nothing here knows about machines or projections.
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

export interface AppendOptions {
  /** Version the stream must be at (0 for a new stream). A mismatch throws `ConcurrencyConflictError`. */
  expectedVersion: number;
  /** Stream kind (`loop`, `run`, …); required when creating a stream. */
  kind?: string;
  /** Machine that owns the stream, recorded on creation so old streams replay on the machine that wrote them. */
  machine?: { id: string; version: number };
  /**
   * Checked inside the transaction before anything is written (e.g. a lease fence).
   * Throwing aborts the append.
   */
  precondition?: () => void;
}

export interface AppendResult {
  streamId: string;
  /** Stream version after the append. */
  version: number;
  /** Global position of the last appended event. */
  position: number;
  events: StoredEvent[];
}

export interface ReadAllOptions {
  fromPosition?: number;
  limit?: number;
}

export interface EventLog {
  append(streamId: string, events: NewEvent[], options: AppendOptions): AppendResult;
  readStream(streamId: string, fromVersion?: number): StoredEvent[];
  readAll(options?: ReadAllOptions): StoredEvent[];
  streamInfo(streamId: string): StreamInfo | undefined;
  /** Highest position in the log (0 when empty). */
  headPosition(): number;
  /** Events appended through this log instance, after their transaction committed. */
  readonly events$: Observable<StoredEvent>;
}
