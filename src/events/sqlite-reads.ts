/**
 * The SQLite store's reads of the log for the read side — commands that open the database without
 * the writing event log (light: no zod, rxjs or xstate) and the runtime's watchers. Every SQL on
 * `events` outside the append lives here or in sqlite-log.ts: the dialect in one place.
 */
import { cached, type Db } from './db.js';
import { rowToEvent, type EventRow } from './sqlite-log.js';
import type { StoredEvent } from './types.js';

/** How many events the log holds. */
export function countEvents(db: Db): number {
  return cached<[], { n: number }>(db, 'SELECT COUNT(*) AS n FROM events').get()!.n;
}

/** Events of one stream whose type starts with `typePrefix` (e.g. `loop.`), in version order, raw (not upcast). */
export function streamEventsOfType(db: Db, streamId: string, typePrefix: string): Array<{ type: string; at: string; data: string }> {
  return cached<[string, string], { type: string; at: string; data: string }>(
    db,
    "SELECT type, at, data FROM events WHERE stream_id = ? AND type LIKE ? || '%' ORDER BY version",
  ).all(streamId, typePrefix);
}

/** The streams that got an event of one of `types` at a position in (`after`, `upTo`]. */
export function streamsWithEvents(db: Db, after: number, upTo: number, types: readonly string[]): string[] {
  const list = types.map((t) => `'${t.replace(/'/g, "''")}'`).join(', ');
  return cached<[number, number], { stream: string }>(db, `SELECT DISTINCT stream_id AS stream FROM events WHERE position > ? AND position <= ? AND type IN (${list})`)
    .all(after, upTo)
    .map((r) => r.stream);
}

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

/** Up to `limit` stream ids that start with `prefix`, in order (resolving an id prefix the user typed). */
export function streamIdsWithPrefix(db: Db, prefix: string, limit: number): string[] {
  return cached<[string, string, number], { id: string }>(db, 'SELECT stream_id AS id FROM streams WHERE stream_id >= ? AND stream_id < ? ORDER BY stream_id LIMIT ?')
    .all(prefix, `${prefix}\uffff`, limit)
    .map((r) => r.id);
}
