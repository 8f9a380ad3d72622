import type { SqlStatement, StoredEvent } from '../events/types.js';

/** A table computed from events: pure `evolve(event) → SQL`, registered with a name and version. */
export interface Projection {
  name: string;
  /** Bump when the tables or evolve change: the runtime rebuilds a projection whose version moved. */
  version: number;
  /** DDL creating the projection's tables and indexes: the single source for them. */
  ddl: ReadonlyArray<string>;
  /** Tables owned, each with the columns that order its rows deterministically (for verify). */
  tables: ReadonlyArray<{ name: string; orderBy: string }>;
  /** Event types this projection reacts to. */
  handles: ReadonlySet<string>;
  evolve(event: StoredEvent): SqlStatement[];
}

export function sql(text: string, ...params: Array<string | number | null>): SqlStatement {
  return { sql: text, params };
}

/** The recorded machine state of an event as a status string. */
export function stateName(event: StoredEvent): string | null {
  return typeof event.state === 'string' ? event.state : event.state === null ? null : JSON.stringify(event.state);
}
