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
  // v2: retries scheduled for a slot; v3: dropped work.
  version: 3,
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
  handles: new Set(['slot.fired', 'slot.buffered', 'slot.skipped', 'slot.coalesced', 'slot.missed', 'slot.retry_scheduled', 'slot.dropped']),
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
      case 'slot.dropped': {
        const d = event.data as EventData<'slot.dropped'>;
        return [insert('dropped', d.slot, d.slot, 1, null, d.runId, `attempt ${d.attempt} not run: ${d.reason}`, null)];
      }
      default:
        return [];
    }
  },
};

/**
 * `run_queue`: claimable work — every run a decision promised and nobody has claimed yet: a fired
 * slot, a buffered slot (it also waits for its loop to have no run going) and a scheduled retry,
 * each due at its `due_at`. Deciding and claiming are separate durable steps: whoever passes next
 * (the daemon, `loops tick`, `run-now` of a due loop) claims what is due, so a slot fired by a
 * runner that died before starting it is not lost. A row leaves when its run is claimed or when
 * the work is dropped (`slot.dropped`: its loop stopped, or it was stranded past its catch-up).
 * `decided_by` is the runner that recorded the decision: while that runner lives the work is its
 * to run; once it is gone the work is stranded and the catch-up policy says whether it still runs.
 */
export const runQueueProjection: Projection = {
  name: 'run_queue',
  version: 1,
  ddl: [
    `CREATE TABLE IF NOT EXISTS run_queue (
      run_id     TEXT PRIMARY KEY,
      loop_id    TEXT NOT NULL,
      kind       TEXT NOT NULL,
      slot       TEXT NOT NULL,
      attempt    INTEGER NOT NULL,
      due_at     TEXT NOT NULL,
      position   INTEGER NOT NULL,
      decided_by TEXT
    ) WITHOUT ROWID`,
    `CREATE INDEX IF NOT EXISTS run_queue_due ON run_queue (due_at, position)`,
    `CREATE INDEX IF NOT EXISTS run_queue_loop ON run_queue (loop_id, position)`,
  ],
  tables: [{ name: 'run_queue', orderBy: 'run_id' }],
  handles: new Set(['slot.fired', 'slot.buffered', 'slot.retry_scheduled', 'slot.dropped', 'run.claimed', 'loop.stopped', 'loop.archived', 'loop.removed']),
  evolve(event: StoredEvent) {
    const loopId = event.streamId.slice('loop:'.length);
    const insert = (runId: string, kind: string, slot: string, attempt: number, dueAt: string) =>
      sql(
        'INSERT INTO run_queue (run_id, loop_id, kind, slot, attempt, due_at, position, decided_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
        runId,
        loopId,
        kind,
        slot,
        attempt,
        dueAt,
        event.position,
        event.meta.runnerId ?? null,
      );
    switch (event.type) {
      case 'slot.fired': {
        const d = event.data as EventData<'slot.fired'>;
        return [insert(d.runId, 'fired', d.slot, 1, d.fireAt)];
      }
      case 'slot.buffered': {
        const d = event.data as EventData<'slot.buffered'>;
        return [insert(d.runId, 'buffered', d.slot, 1, d.fireAt)];
      }
      case 'slot.retry_scheduled': {
        const d = event.data as EventData<'slot.retry_scheduled'>;
        return [insert(d.runId, 'retry', d.slot, d.attempt, d.dueAt)];
      }
      case 'slot.dropped':
        return [sql('DELETE FROM run_queue WHERE run_id = ?', (event.data as EventData<'slot.dropped'>).runId)];
      case 'run.claimed':
        return [sql('DELETE FROM run_queue WHERE run_id = ?', (event.data as EventData<'run.claimed'>).runId)];
      default:
        // Logs written before slot.dropped existed: a stopped, archived or removed loop's
        // buffered slots were given up with it (its fired slots and retries waited for a resume).
        return [sql("DELETE FROM run_queue WHERE loop_id = ? AND kind = 'buffered'", loopId)];
    }
  },
};
