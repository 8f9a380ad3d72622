/**
 * `slot_decisions`: every decision the scheduler recorded about a loop's slots — fired, skipped,
 * coalesced into a later slot, or missed — one row per event (a range of slots for coalesced and
 * missed). `loops why` reads it.
 */
import type { EventData } from '../events/catalog.js';
import type { StoredEvent } from '../events/types.js';
import { sql, type Projection } from './types.js';

export const slotDecisionsProjection: Projection = {
  name: 'slot_decisions',
  // v2: retries scheduled for a slot.
  version: 2,
  ddl: [
    `CREATE TABLE IF NOT EXISTS slot_decisions (
      position  INTEGER PRIMARY KEY,
      loop_id   TEXT NOT NULL,
      decision  TEXT NOT NULL,
      slot_from TEXT NOT NULL,
      slot_to   TEXT NOT NULL,
      count     INTEGER NOT NULL,
      fire_at   TEXT,
      run_id    TEXT,
      reason    TEXT,
      into_slot TEXT,
      at        TEXT NOT NULL
    )`,
    `CREATE INDEX IF NOT EXISTS slot_decisions_loop ON slot_decisions (loop_id, slot_to)`,
  ],
  tables: [{ name: 'slot_decisions', orderBy: 'position' }],
  handles: new Set(['slot.fired', 'slot.buffered', 'slot.skipped', 'slot.coalesced', 'slot.missed', 'slot.retry_scheduled']),
  evolve(event: StoredEvent) {
    const loopId = event.streamId.slice('loop:'.length);
    const insert = (
      decision: string,
      from: string,
      to: string,
      count: number,
      fireAt: string | null,
      runId: string | null,
      reason: string | null,
      into: string | null,
    ) =>
      sql(
        `INSERT INTO slot_decisions (position, loop_id, decision, slot_from, slot_to, count, fire_at, run_id, reason, into_slot, at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        event.position,
        loopId,
        decision,
        from,
        to,
        count,
        fireAt,
        runId,
        reason,
        into,
        event.at,
      );
    switch (event.type) {
      case 'slot.fired': {
        const d = event.data as EventData<'slot.fired'>;
        return [insert('fired', d.slot, d.slot, 1, d.fireAt, d.runId, d.late ? 'caught up after missed slots' : null, null)];
      }
      case 'slot.buffered': {
        const d = event.data as EventData<'slot.buffered'>;
        const why =
          d.policy === 'cancel-other'
            ? `overlap cancel-other: cancelling ${d.cancels.join(', ') || 'nothing'}`
            : `overlap ${d.policy}: waiting for ${d.blockedBy ?? 'the running run'}`;
        return [insert('buffered', d.slot, d.slot, 1, d.fireAt, d.runId, why, null)];
      }
      case 'slot.skipped': {
        const d = event.data as EventData<'slot.skipped'>;
        return [insert('skipped', d.slot, d.slot, 1, d.fireAt, d.blockedBy, d.reason, null)];
      }
      case 'slot.coalesced': {
        const d = event.data as EventData<'slot.coalesced'>;
        return [insert('coalesced', d.from, d.to, d.count, null, null, 'catch-up latest', d.into)];
      }
      case 'slot.missed': {
        const d = event.data as EventData<'slot.missed'>;
        return [insert('missed', d.from, d.to, d.count, null, null, d.reason, null)];
      }
      case 'slot.retry_scheduled': {
        const d = event.data as EventData<'slot.retry_scheduled'>;
        return [insert('retry', d.slot, d.slot, 1, d.dueAt, d.runId, `attempt ${d.attempt} after ${d.after} ${d.reason}`, null)];
      }
      default:
        return [];
    }
  },
};

/**
 * `pending_retries`: retries scheduled and not yet started — the scheduler's durable deadlines
 * for them (a row leaves when its run is claimed).
 */
export const pendingRetriesProjection: Projection = {
  name: 'pending_retries',
  version: 1,
  ddl: [
    `CREATE TABLE IF NOT EXISTS pending_retries (
      run_id   TEXT PRIMARY KEY,
      loop_id  TEXT NOT NULL,
      slot     TEXT NOT NULL,
      attempt  INTEGER NOT NULL,
      due_at   TEXT NOT NULL,
      after    TEXT NOT NULL
    ) WITHOUT ROWID`,
    `CREATE INDEX IF NOT EXISTS pending_retries_due ON pending_retries (due_at)`,
  ],
  tables: [{ name: 'pending_retries', orderBy: 'run_id' }],
  handles: new Set(['slot.retry_scheduled', 'run.claimed']),
  evolve(event: StoredEvent) {
    if (event.type === 'slot.retry_scheduled') {
      const d = event.data as EventData<'slot.retry_scheduled'>;
      return [
        sql(
          'INSERT INTO pending_retries (run_id, loop_id, slot, attempt, due_at, after) VALUES (?, ?, ?, ?, ?, ?)',
          d.runId,
          event.streamId.slice('loop:'.length),
          d.slot,
          d.attempt,
          d.dueAt,
          d.after,
        ),
      ];
    }
    const d = event.data as EventData<'run.claimed'>;
    return [sql('DELETE FROM pending_retries WHERE run_id = ?', d.runId)];
  },
};

/**
 * `buffered_slots`: slots that came due while a run of their loop was going and wait for it
 * (overlap buffer-one, buffer-all, cancel-other). A row leaves when its run is claimed, or when the
 * loop is stopped, archived or removed (a stopped loop starts again from now).
 */
export const bufferedSlotsProjection: Projection = {
  name: 'buffered_slots',
  version: 1,
  ddl: [
    `CREATE TABLE IF NOT EXISTS buffered_slots (
      run_id   TEXT PRIMARY KEY,
      loop_id  TEXT NOT NULL,
      slot     TEXT NOT NULL,
      fire_at  TEXT NOT NULL,
      position INTEGER NOT NULL
    ) WITHOUT ROWID`,
    `CREATE INDEX IF NOT EXISTS buffered_slots_loop ON buffered_slots (loop_id, position)`,
  ],
  tables: [{ name: 'buffered_slots', orderBy: 'run_id' }],
  handles: new Set(['slot.buffered', 'run.claimed', 'loop.stopped', 'loop.archived', 'loop.removed']),
  evolve(event: StoredEvent) {
    switch (event.type) {
      case 'slot.buffered': {
        const d = event.data as EventData<'slot.buffered'>;
        return [
          sql(
            'INSERT INTO buffered_slots (run_id, loop_id, slot, fire_at, position) VALUES (?, ?, ?, ?, ?)',
            d.runId,
            event.streamId.slice('loop:'.length),
            d.slot,
            d.fireAt,
            event.position,
          ),
        ];
      }
      case 'run.claimed':
        return [sql('DELETE FROM buffered_slots WHERE run_id = ?', (event.data as EventData<'run.claimed'>).runId)];
      default:
        return [sql('DELETE FROM buffered_slots WHERE loop_id = ?', event.streamId.slice('loop:'.length))];
    }
  },
};
