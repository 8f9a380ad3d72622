/**
 * Faults of the machine, not of the work: the disk is full, the database stays locked by another
 * connection beyond its busy timeout, the file system reports an I/O error or turned read-only, or
 * the database server cannot be reached (PostgreSQL restarting, the network down: `unreachable`).
 * A write that fails for one of these did not happen (its transaction was rolled back), and the
 * same write may succeed later: the runtime retries it with back-off instead of giving up on the
 * run (DurableActor.recordOrFail) and the daemon reports itself degraded while they last
 * (daemon.ts). Anything else is a real error and is reported as before.
 */
import { isConnectionLoss, LoopsError } from '../events/errors.js';

export type StorageFaultKind = 'disk_full' | 'busy' | 'io' | 'unreachable';

export interface StorageFault {
  kind: StorageFaultKind;
  /** One line for a log or `daemon status`: what the machine said. */
  reason: string;
}

const DISK_FULL = new Set(['SQLITE_FULL', 'ENOSPC', 'EDQUOT']);
const IO = new Set(['EIO', 'EROFS']);

/** The storage fault behind `error` (its cause chain included), or null when it is none. */
export function storageFault(error: unknown): StorageFault | null {
  for (let e: unknown = error, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    const message = (e as { message?: unknown }).message;
    const text = typeof message === 'string' ? message : String(e);
    if (e instanceof LoopsError && e.code === 'busy') {
      return { kind: 'busy', reason: 'the database is locked by another connection beyond the busy timeout' };
    }
    if (isConnectionLoss(e)) return { kind: 'unreachable', reason: `the database cannot be reached (${typeof code === 'string' ? `${code}: ` : ''}${text})` };
    if (typeof code !== 'string') continue;
    if (DISK_FULL.has(code)) return { kind: 'disk_full', reason: `disk full (${code}: ${text})` };
    if (/^SQLITE_BUSY(_|$)/.test(code)) return { kind: 'busy', reason: 'the database is locked by another connection beyond the busy timeout' };
    if (IO.has(code) || /^SQLITE_(IOERR|READONLY)(_|$)/.test(code)) return { kind: 'io', reason: `I/O error (${code}: ${text})` };
  }
  return null;
}
