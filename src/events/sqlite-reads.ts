/**
 * The SQLite store's reads of the log for the read side — commands that open the database without
 * the writing event log (light: no zod, rxjs or xstate — `loops list` loads this), and the SQLite
 * store's own (`SqliteEventLog.streamsWithEvents`, what a runner's cancel watch asks). Reads that
 * return stored events (upcast through the catalogue) are in sqlite-log.ts.
 * Every SQL on `events` lives in one of the two: the dialect in one place.
 */
import { cached, type Db } from './db.js';

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



/** Up to `limit` stream ids that start with `prefix`, in order (resolving an id prefix the user typed). */
export function streamIdsWithPrefix(db: Db, prefix: string, limit: number): string[] {
  return cached<[string, string, number], { id: string }>(db, 'SELECT stream_id AS id FROM streams WHERE stream_id >= ? AND stream_id < ? ORDER BY stream_id LIMIT ?')
    .all(prefix, `${prefix}\uffff`, limit)
    .map((r) => r.id);
}
