import type { EventData, EventType } from '../events/catalog.js';
import type { SqlStatement, StoredEvent } from '../events/types.js';

/** A table computed from events: pure `evolve(event) → SQL`, registered with a name and version. */
export interface Projection {
  name: string;
  /** Bump when the tables or evolve change: the runtime rebuilds a projection whose version moved. */
  version: number;
  /** DDL creating the projection's tables and indexes: the single source for them. */
  ddl: ReadonlyArray<string>;
  /** Tables owned, each with the columns that order its rows deterministically (for verify). */
  tables: ReadonlyArray<ProjectionTable>;
  /** Event types this projection reacts to. */
  handles: ReadonlySet<string>;
  evolve(event: StoredEvent): SqlStatement[];
}

/** A table a projection owns. */
export interface ProjectionTable {
  name: string;
  /** Columns that order its rows deterministically (for verify). */
  orderBy: string;
  /**
   * Rows that belong to one stream of `kind`, found by `key` = the stream's id: when the stream is
   * archived they travel in its `stream.archived` tombstone — with the `slim` columns set to these
   * values (bulky ones, e.g. output tails, which the archive file keeps) — and this projection puts
   * them in place of its rows (a rebuild no longer has the events that made them).
   */
  perStream?: { kind: string; key: string; slim?: Readonly<Record<string, string | number | null>> };
}

/** A stored event of type `T`, its payload typed by the catalogue. */
export type ProjectionEvent<T extends EventType = EventType> = StoredEvent<T, EventData<T>>;

/** What a projection does with one event type. */
export type ProjectionHandler<T extends EventType> = (event: ProjectionEvent<T>) => SqlStatement[];

/** Handlers keyed by event type: each receives the event typed by its key. */
export type ProjectionHandlers = { readonly [T in EventType]?: ProjectionHandler<T> };

export interface ProjectionDefinition {
  name: string;
  version: number;
  ddl: ReadonlyArray<string>;
  tables: ReadonlyArray<ProjectionTable>;
  /** One handler per event type handled; `handles` is the set of these keys. */
  on: ProjectionHandlers;
  /** Statements run after the handler's for every event handled (e.g. a check of the recorded state). */
  after?: (event: StoredEvent) => SqlStatement[];
}

type AnyHandler = (event: StoredEvent) => SqlStatement[];

/**
 * A projection from a map of handlers keyed by event type: `handles` is the map's keys and
 * `evolve` dispatches by the event's type (an event of no key gives no statement).
 *
 *   defineProjection({ name, version, ddl, tables, on: { 'run.claimed': (e) => [sql('…', e.data.runId)] } })
 */
export function defineProjection(definition: ProjectionDefinition): Projection {
  const { name, version, ddl, tables, on, after } = definition;
  // The one place an event's payload is taken to be its type's: every event in the log was
  // validated against the catalogue when it was appended (and is upcast to the current shape when
  // read), so an event of type T carries EventData<T>.
  const handlers = new Map<string, AnyHandler>();
  for (const [type, handler] of Object.entries(on) as Array<[string, AnyHandler | undefined]>) {
    if (handler) handlers.set(type, handler);
  }
  const restored = tables.filter((t) => t.perStream);
  if (restored.length) {
    const own = handlers.get(ARCHIVED);
    handlers.set(ARCHIVED, (event) => restoreRows(restored, event).concat(own ? own(event) : []));
  }
  return {
    name,
    version,
    ddl,
    tables,
    handles: new Set(handlers.keys()),
    evolve(event: StoredEvent): SqlStatement[] {
      const handler = handlers.get(event.type);
      if (!handler) return [];
      const out = handler(event);
      // A tombstone stands for events the projection already saw (live) or restores their rows
      // (rebuild): nothing more happens to the stream then.
      return after && event.type !== ARCHIVED ? out.concat(after(event)) : out;
    },
  };
}

const ARCHIVED = 'stream.archived';
const COLUMN = /^[a-z_][a-z0-9_]*$/;

/**
 * The rows an archived stream's tombstone carries for these tables, put in place of the stream's
 * rows there: live, the rows the deleted events made, slimmed; in a rebuild, inserted. A DELETE of
 * the stream's rows (by its `key`) then an INSERT per row — SQL both SQLite and PostgreSQL accept
 * (SQLite's INSERT OR REPLACE is not PostgreSQL's), and the same rows as that gave: the tombstone
 * holds every row of the stream in each table it names, every column. Column names come from the
 * log, so each is checked to be a plain identifier before it reaches SQL.
 */
function restoreRows(tables: ReadonlyArray<ProjectionTable>, event: StoredEvent): SqlStatement[] {
  const [kind] = event.streamId.split(':', 1);
  const rows = (event.data as { rows: Record<string, Array<Record<string, string | number | null>>> }).rows;
  const out: SqlStatement[] = [];
  for (const table of tables) {
    const perStream = table.perStream!;
    const carried = rows[table.name];
    if (perStream.kind !== kind || carried === undefined) continue;
    out.push(sql(`DELETE FROM ${table.name} WHERE ${perStream.key} = ?`, event.streamId.slice(kind!.length + 1)));
    for (const row of carried) {
      const columns = Object.keys(row);
      const bad = columns.find((c) => !COLUMN.test(c));
      if (bad !== undefined || columns.length === 0) {
        throw new Error(`stream.archived of ${event.streamId} (position ${event.position}): ${table.name} row has a bad column ${JSON.stringify(bad)}`);
      }
      out.push(sql(`INSERT INTO ${table.name} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`, ...columns.map((c) => row[c]!)));
    }
  }
  return out;
}

export function sql(text: string, ...params: Array<string | number | null>): SqlStatement {
  return { sql: text, params };
}

/** The recorded machine state of an event as a status string. */
export function stateName(event: StoredEvent): string | null {
  return typeof event.state === 'string' ? event.state : event.state === null ? null : JSON.stringify(event.state);
}

/** The id in a stream id `<kind>:<id>`. */
export function streamKey(event: StoredEvent, kind: string): string {
  return event.streamId.slice(kind.length + 1);
}
