/**
 * Given/then for projections, on a real in-memory SQLite:
 *
 *   projectionSpec(runQueueProjection)
 *     .given('loop:loop_1', loopEv.created(), slotEv.fired({ runId: 'run_1' }))
 *     .expectRows('run_queue', [{ run_id: 'run_1', kind: 'fired' }])
 *     .given('run:run_1', runEv.claimed())
 *     .expectRows('run_queue', []);
 *
 * `projectionSpec(...projections)` opens a fresh ':memory:' database with the DDL of those
 * projections (every registered one when none is named) and applies only their handlers, as the
 * log's inline handler does. `given(streamId, ...events)` stores the events the way the log does:
 * global positions in the order given, versions 1, 2, 3 … per stream (a later `given` on the same
 * stream goes on from where it stopped), the schema version of each type from the catalogue, and
 * the machine state after each event from a fold of the whole stream through the machine of its
 * kind (`loop:`, `run:`, `workflow:`, `wfrun:`, `account:`, `retention:`). Every event must be accepted by that
 * machine: a rejected one would never be in a real log, and its recorded state would be made up.
 *
 * Then read the tables: `rows` / `row` for plain assertions, `expectRows` / `expectRow` to match
 * rows partially (the columns given), in the order the projection's `tables` entry sets.
 */
import Database from 'better-sqlite3';
import { expect } from 'vitest';
import type { AnyStateMachine } from 'xstate';
import { eventSchemas, isEventType } from '../../src/events/catalog.js';
import type { EventMeta, StoredEvent } from '../../src/events/types.js';
import { fold, stateOf } from '../../src/machines/fold.js';
import { accountMachine } from '../../src/machines/account.js';
import { retentionMachine } from '../../src/machines/retention.js';
import { noticeMachine } from '../../src/machines/notice.js';
import { loopMachine } from '../../src/machines/loop.js';
import { runMachine } from '../../src/machines/run.js';
import { workflowMachine } from '../../src/machines/workflow.js';
import { workflowRunMachine } from '../../src/machines/workflow-run.js';
import { inlineHandler, projections as registered } from '../../src/projections/registry.js';
import type { Projection } from '../../src/projections/types.js';
import type { MachineInput } from './machine.js';

export type Row = Record<string, unknown>;
type SqlValue = string | number | null;

/** An event to store: a machine input (see events.ts), optionally with the meta the appender recorded. */
export interface GivenEvent extends MachineInput {
  meta?: EventMeta;
}

/** The machine that owns each kind of stream (the part of the stream id before `:`). */
const machines: Record<string, AnyStateMachine> = {
  loop: loopMachine,
  run: runMachine,
  workflow: workflowMachine,
  wfrun: workflowRunMachine,
  account: accountMachine,
  retention: retentionMachine,
  notice: noticeMachine,
};

export class ProjectionSpec {
  readonly db: Database.Database;
  /** Every event stored so far, in position order. */
  readonly events: StoredEvent[] = [];
  private readonly projections: ReadonlyArray<Projection>;
  private readonly apply: ReturnType<typeof inlineHandler>;
  private readonly streams = new Map<string, GivenEvent[]>();

  constructor(projections: ReadonlyArray<Projection>) {
    this.projections = projections;
    this.apply = inlineHandler(projections);
    this.db = new Database(':memory:');
    for (const projection of projections) for (const ddl of projection.ddl) this.db.exec(ddl);
  }

  /** Stores `events` on `streamId` after what it already holds, and applies the projections to each. */
  given(streamId: string, ...events: GivenEvent[]): this {
    const kind = streamId.slice(0, streamId.indexOf(':'));
    const machine = machines[kind];
    if (!machine) throw new Error(`projectionSpec: no machine for stream ${JSON.stringify(streamId)} (kinds: ${Object.keys(machines).join(', ')})`);
    const before = this.streams.get(streamId) ?? [];
    const all = [...before, ...events];
    const { steps } = fold(machine, all);
    for (const [i, event] of events.entries()) {
      const version = before.length + i + 1;
      const step = steps[version - 1]!;
      if (!step.accepted) {
        throw new Error(`projectionSpec: ${streamId} v${version} ${event.type} is rejected by ${machine.id} in state ${JSON.stringify(stateOf(step.before))}`);
      }
      const stored: StoredEvent = {
        position: this.events.length + 1,
        streamId,
        version,
        type: event.type,
        v: isEventType(event.type) ? eventSchemas[event.type].v : 1,
        data: event.data,
        meta: event.meta ?? {},
        at: event.at,
        state: stateOf(step.after),
      };
      // One transaction per event, as an append: an event whose statements fail leaves nothing.
      this.db.transaction(() => {
        for (const statement of this.apply(stored)) this.db.prepare(statement.sql).run(...statement.params);
      })();
      this.events.push(stored);
      this.streams.set(streamId, all.slice(0, version));
    }
    return this;
  }

  /** `given`, returning the events it stored. */
  store(streamId: string, ...events: GivenEvent[]): StoredEvent[] {
    const from = this.events.length;
    this.given(streamId, ...events);
    return this.events.slice(from);
  }

  /** The events stored on one stream. */
  stream(streamId: string): StoredEvent[] {
    return this.events.filter((e) => e.streamId === streamId);
  }

  /** The last event stored. */
  get last(): StoredEvent {
    const event = this.events.at(-1);
    if (!event) throw new Error('projectionSpec: no event was given');
    return event;
  }

  /**
   * The rows of `table` whose columns equal `where` (null: IS NULL), in the order the owning
   * projection sets (or `orderBy`), with every column or the ones named.
   */
  rows(table: string, where: Row = {}, options: { orderBy?: string; columns?: ReadonlyArray<string> } = {}): Row[] {
    const entries = Object.entries(where);
    const clause = entries.map(([column, value]) => (value === null ? `${column} IS NULL` : `${column} = ?`)).join(' AND ');
    const params = entries.filter(([, value]) => value !== null).map(([, value]) => value as SqlValue);
    const columns = options.columns ? options.columns.join(', ') : '*';
    const orderBy = options.orderBy ?? this.orderOf(table);
    return this.db.prepare(`SELECT ${columns} FROM ${table}${clause ? ` WHERE ${clause}` : ''} ORDER BY ${orderBy}`).all(...params) as Row[];
  }

  /** The one row of `table` whose columns equal `where` (fails unless there is exactly one). */
  row(table: string, where: Row = {}): Row {
    const rows = this.rows(table, where);
    expect(rows, `rows of ${table} where ${JSON.stringify(where)}`).toHaveLength(1);
    return rows[0]!;
  }

  /** The rows of `table` (those matching `where`) are exactly as many as `expected`, each matching its columns. */
  expectRows(table: string, expected: ReadonlyArray<Row>, where: Row = {}): this {
    expect(this.rows(table, where), `rows of ${table}${Object.keys(where).length ? ` where ${JSON.stringify(where)}` : ''}`)
      .toMatchObject([...expected]);
    return this;
  }

  /** The one row of `table` matching `where` has the columns of `expected`. */
  expectRow(table: string, where: Row, expected: Row): this {
    expect(this.row(table, where)).toMatchObject(expected);
    return this;
  }

  private orderOf(table: string): string {
    for (const projection of [...this.projections, ...registered]) {
      const owned = projection.tables.find((t) => t.name === table);
      if (owned) return owned.orderBy;
    }
    return 'rowid';
  }
}

/** A spec over `projections` (every registered projection when none is named), on a fresh database. */
export function projectionSpec(...projections: Projection[]): ProjectionSpec {
  return new ProjectionSpec(projections.length > 0 ? projections : registered);
}

/** `given(...)` on a spec over every registered projection. */
export function given(streamId: string, ...events: GivenEvent[]): ProjectionSpec {
  return projectionSpec().given(streamId, ...events);
}
