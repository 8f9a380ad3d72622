/**
 * `loops verify` as a function: the log's invariants checked (src/runtime/admin/invariants.ts),
 * with how much was read. Reads only; nothing is written.
 */
import type { Db } from '../../events/db.js';
import { SqliteEventLog } from '../../events/sqlite-log.js';
import { findViolations } from './invariants.js';

/** What `loops verify --json` prints. */
export interface VerifyReport {
  /** True when every invariant holds. */
  ok: boolean;
  /** Events in the log. */
  events: number;
  /** Streams in the log. */
  streams: number;
  /** One line per violation (docs/RELIABILITY.md says what each means). */
  violations: string[];
}

/** Checks every invariant of the log in `db`; `processes`: also that no process a run started is alive. */
export function verifyLog(db: Db, options: { processes?: boolean } = {}): VerifyReport {
  const events = db.prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM events').get()!.n;
  const streams = db.prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM streams').get()!.n;
  const violations = findViolations(db, new SqliteEventLog(db, { handlers: [] }), { processes: options.processes === true });
  return { ok: violations.length === 0, events, streams, violations };
}
