/**
 * `slot_decisions`: every decision the scheduler recorded about a loop's slots — fired, skipped,
 * coalesced into a later slot, or missed — one row per event (a range of slots for coalesced and
 * missed). `loops why` reads it.
 */
import { OVERLAP } from '../events/policies.js';
import type { StoredEvent } from '../events/types.js';
import { defineProjection, sql, streamKey } from './types.js';
import { PROJECTION_VERSIONS } from './versions.js';

const loopIdOf = (event: StoredEvent) => streamKey(event, 'loop');

/** One decision row, keyed by the event's position. `from`..`to` is the slot range it is about. */
function decision(
  event: StoredEvent,
  kind: 'fired' | 'buffered' | 'skipped' | 'coalesced' | 'missed' | 'retry' | 'dropped',
  from: string,
  to: string,
  count: number,
  fireAt: string | null,
  runId: string | null,
  reason: string | null,
  into: string | null,
) {
  return sql(
    `INSERT INTO slot_decisions (position, loop_id, decision, slot_from, slot_to, count, fire_at, run_id, reason, into_slot, at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    event.position,
    loopIdOf(event),
    kind,
    from,
    to,
    count,
    fireAt,
    runId,
    reason,
    into,
    event.at,
  );
}

export const slotDecisionsProjection = defineProjection({
  name: 'slot_decisions',
  // v2: retries scheduled for a slot; v3: dropped work.
  // v4: the index slot_decisions_recent (no row changes): `loops why <loop>` reads a loop's newest
  //     decisions without sorting all of them.
  version: PROJECTION_VERSIONS.slot_decisions,
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
    // A loop's decisions newest first (position is the rowid, so this is (loop_id, position)).
    `CREATE INDEX IF NOT EXISTS slot_decisions_recent ON slot_decisions (loop_id)`,
  ],
  tables: [{ name: 'slot_decisions', orderBy: 'position' }],
  on: {
    'slot.fired': (e) => {
      const d = e.data;
      return [decision(e, 'fired', d.slot, d.slot, 1, d.fireAt, d.runId, d.late ? 'caught up after missed slots' : null, null)];
    },
    'slot.buffered': (e) => {
      const d = e.data;
      const why =
        OVERLAP.policies[d.policy].cancelsGoing
          ? `overlap cancel-other: cancelling ${d.cancels.join(', ') || 'nothing'}`
          : `overlap ${d.policy}: waiting for ${d.blockedBy ?? 'the running run'}`;
      return [decision(e, 'buffered', d.slot, d.slot, 1, d.fireAt, d.runId, why, null)];
    },
    'slot.skipped': (e) => [decision(e, 'skipped', e.data.slot, e.data.slot, 1, e.data.fireAt, e.data.blockedBy, e.data.reason, null)],
    'slot.coalesced': (e) => [decision(e, 'coalesced', e.data.from, e.data.to, e.data.count, null, null, 'catch-up latest', e.data.into)],
    'slot.missed': (e) => [decision(e, 'missed', e.data.from, e.data.to, e.data.count, null, null, e.data.reason, null)],
    'slot.retry_scheduled': (e) => {
      const d = e.data;
      return [decision(e, 'retry', d.slot, d.slot, 1, d.dueAt, d.runId, `attempt ${d.attempt} after ${d.after} ${d.reason}`, null)];
    },
    'slot.dropped': (e) => {
      const d = e.data;
      return [decision(e, 'dropped', d.slot, d.slot, 1, null, d.runId, `attempt ${d.attempt} not run: ${d.reason}`, null)];
    },
  },
});

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
export const runQueueProjection = defineProjection({
  name: 'run_queue',
  version: PROJECTION_VERSIONS.run_queue,
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
  on: {
    'slot.fired': (e) => [queued(e, e.data.runId, 'fired', e.data.slot, 1, e.data.fireAt)],
    'slot.buffered': (e) => [queued(e, e.data.runId, 'buffered', e.data.slot, 1, e.data.fireAt)],
    'slot.retry_scheduled': (e) => [queued(e, e.data.runId, 'retry', e.data.slot, e.data.attempt, e.data.dueAt)],
    'slot.dropped': (e) => [sql('DELETE FROM run_queue WHERE run_id = ?', e.data.runId)],
    'run.claimed': (e) => [sql('DELETE FROM run_queue WHERE run_id = ?', e.data.runId)],
    // A rebuild no longer sees an archived run's run.claimed: its tombstone takes the work off the queue.
    'stream.archived': (e) => (e.streamId.startsWith('run:') ? [sql('DELETE FROM run_queue WHERE run_id = ?', streamKey(e, 'run'))] : []),
    // Logs written before slot.dropped existed: a stopped, archived or removed loop's buffered
    // slots were given up with it (its fired slots and retries waited for a resume).
    'loop.stopped': (e) => [bufferedDropped(e)],
    'loop.archived': (e) => [bufferedDropped(e)],
    'loop.removed': (e) => [bufferedDropped(e)],
  },
});

function queued(event: StoredEvent, runId: string, kind: 'fired' | 'buffered' | 'retry', slot: string, attempt: number, dueAt: string) {
  return sql(
    'INSERT INTO run_queue (run_id, loop_id, kind, slot, attempt, due_at, position, decided_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    runId,
    loopIdOf(event),
    kind,
    slot,
    attempt,
    dueAt,
    event.position,
    event.meta.runnerId ?? null,
  );
}

function bufferedDropped(event: StoredEvent) {
  return sql("DELETE FROM run_queue WHERE loop_id = ? AND kind = 'buffered'", loopIdOf(event));
}
