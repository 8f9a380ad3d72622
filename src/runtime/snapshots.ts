/**
 * Stream snapshots: where folding a stream may start instead of its first event, so restoring a
 * long-lived stream (a loop firing every 10 s has 50,000 events within a week) costs the events
 * since its last snapshot, not its whole history. A scheduling pass then costs the same for a loop
 * with 100,000 events as for a new one.
 *
 * Snapshots are derived from the log and never its source of truth: `replay` and `projections
 * verify` always fold from the first event, and a snapshot is used only by the machine id and
 * version that wrote it (a machine change that alters history bumps the version, which retires
 * every snapshot it made). Two tiers:
 *  - in memory, per runtime: the live state of every stream this process folded or appended to
 *    (what the daemon keeps between passes), updated only after the transaction that wrote it
 *    committed;
 *  - in the `stream_snapshots` table, every `SNAPSHOT_EVERY` events, for the next process (a
 *    `loops tick`, a restarted daemon). It is a cache: created on first use, not part of the log
 *    format, ignored by a loops that does not know it, and safe to delete.
 */
import type { AnyMachineSnapshot, AnyStateMachine } from 'xstate';
import { cached, type Db } from '../events/db.js';
import { gateFor } from '../events/sqlite-gate.js';
import type { MachineRef } from '../machines/registry.js';

/** A persisted snapshot is written when this many events were folded since the last one. */
export const SNAPSHOT_EVERY = 500;
/** Streams whose live state is kept in memory at most (least recently used first out). */
export const MEMORY_LIMIT = 20_000;
/**
 * The shape of a persisted snapshot: `{ value, context }` of the machine snapshot. 2: a workflow
 * run's `steps` is an array of entries (it was a map keyed by step id); a snapshot of another
 * format is ignored (the stream folds from its first event, and the next snapshot is written anew).
 */
const FORMAT = 2;

export interface StreamSnapshot {
  ref: MachineRef;
  /** The stream version the snapshot is the state after. */
  version: number;
  snapshot: AnyMachineSnapshot;
}

interface Entry extends StreamSnapshot {
  /** The version of the last persisted snapshot of this stream (0: none). */
  persisted: number;
}

const DDL = `CREATE TABLE IF NOT EXISTS stream_snapshots (
  stream_id       TEXT PRIMARY KEY,
  version         INTEGER NOT NULL,
  machine_id      TEXT    NOT NULL,
  machine_version INTEGER NOT NULL,
  format          INTEGER NOT NULL,
  state           TEXT    NOT NULL
) WITHOUT ROWID`;

interface Row {
  version: number;
  machine_id: string;
  machine_version: number;
  format: number;
  state: string;
}

export class SnapshotStore {
  private readonly memory = new Map<string, Entry>();
  private ready = false;
  /** Events folded to restore streams (not counting appends): what a pass cost, for tests and benchmarks. */
  folded = 0;

  constructor(private readonly db: Db) {}

  private table(): boolean {
    if (!this.ready) {
      try {
        this.db.exec(DDL);
        this.ready = true;
      } catch {
        return false; // read-only or busy: snapshots are an optimisation
      }
    }
    return true;
  }

  /**
   * The newest snapshot of `streamId` made by machine `ref` at or below `atMostVersion`: the one in
   * memory, else the persisted one, else null.
   */
  get(streamId: string, ref: MachineRef, machine: AnyStateMachine, atMostVersion: number): StreamSnapshot | null {
    const live = this.memory.get(streamId);
    if (live && sameRef(live.ref, ref) && live.version <= atMostVersion) {
      // Most recently used goes last.
      this.memory.delete(streamId);
      this.memory.set(streamId, live);
      return live;
    }
    if (!this.table()) return null;
    const row = cached<[string], Row>(this.db, 'SELECT version, machine_id, machine_version, format, state FROM stream_snapshots WHERE stream_id = ?').get(streamId);
    if (!row || row.format !== FORMAT || row.machine_id !== ref.id || row.machine_version !== ref.version || row.version > atMostVersion) return null;
    const { value, context } = JSON.parse(row.state) as { value: unknown; context: unknown };
    const snapshot = machine.resolveState({ value: value as never, context: context as never }) as AnyMachineSnapshot;
    const entry: Entry = { ref, version: row.version, snapshot, persisted: row.version };
    this.put(streamId, entry);
    return entry;
  }

  /**
   * The state of `streamId` after `version` (committed): kept in memory, and persisted when
   * `SNAPSHOT_EVERY` events have passed since the last persisted one.
   */
  remember(streamId: string, ref: MachineRef, version: number, snapshot: AnyMachineSnapshot): void {
    const before = this.memory.get(streamId);
    if (before && sameRef(before.ref, ref) && before.version > version) return; // a newer one is known
    let persisted = before && sameRef(before.ref, ref) ? before.persisted : 0;
    // Not while another connection of this process holds a batch open: the write would wait for
    // its lock in a loop that blocks the batch from finishing (the next remember tries again).
    const blocked = gateFor(this.db).open !== null && !this.db.inTransaction;
    if (version - persisted >= SNAPSHOT_EVERY && !blocked && this.table()) {
      try {
        cached(
          this.db,
          `INSERT INTO stream_snapshots (stream_id, version, machine_id, machine_version, format, state) VALUES (?, ?, ?, ?, ?, ?)
           ON CONFLICT (stream_id) DO UPDATE SET version = excluded.version, machine_id = excluded.machine_id,
             machine_version = excluded.machine_version, format = excluded.format, state = excluded.state
           WHERE excluded.version > stream_snapshots.version OR excluded.machine_version != stream_snapshots.machine_version`,
        ).run(streamId, version, ref.id, ref.version, FORMAT, JSON.stringify({ value: snapshot.value, context: snapshot.context }));
        persisted = version;
      } catch {
        // busy or read-only: the next one tries again
      }
    }
    this.put(streamId, { ref, version, snapshot, persisted });
  }

  /** Forgets every snapshot (in memory and persisted). */
  clear(): void {
    this.memory.clear();
    if (this.table()) this.db.exec('DELETE FROM stream_snapshots');
  }

  private put(streamId: string, entry: Entry): void {
    this.memory.delete(streamId);
    this.memory.set(streamId, entry);
    if (this.memory.size > MEMORY_LIMIT) this.memory.delete(this.memory.keys().next().value!);
  }
}

function sameRef(a: MachineRef, b: MachineRef): boolean {
  return a.id === b.id && a.version === b.version;
}
