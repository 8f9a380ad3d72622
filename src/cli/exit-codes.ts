import type { LoopsErrorCode } from '../events/errors.js';

/** Documented exit codes (docs/cli.md). */
export const EXIT = {
  ok: 0,
  /** Something went wrong that is not the user's input (I/O, internal error, newer database). */
  error: 1,
  /** Bad input: unknown flag, missing or invalid value, unknown loop or run, name taken, impossible state change. */
  usage: 2,
  /** run-now: the run failed (non-zero exit, killed by a signal, could not start). */
  runFailed: 3,
  /** run-now: the run timed out. */
  runTimedOut: 4,
  /** run-now: the run was cancelled or abandoned. */
  runCancelled: 5,
  /** replay / projections verify: the log and the machine or the tables disagree. */
  mismatch: 6,
  /** The database is busy or another writer won a race; retrying may succeed. */
  busy: 75,
} as const;

export function exitCodeFor(code: LoopsErrorCode): number {
  switch (code) {
    case 'usage':
    case 'validation':
    case 'not_found':
    case 'ambiguous':
    case 'already_exists':
    case 'invalid_transition':
      return EXIT.usage;
    case 'determinism':
      return EXIT.mismatch;
    case 'busy':
    case 'conflict':
      return EXIT.busy;
    default:
      return EXIT.error;
  }
}

export function exitCodeForRunStatus(status: string): number {
  switch (status) {
    case 'succeeded':
      return EXIT.ok;
    case 'timed_out':
      return EXIT.runTimedOut;
    case 'cancelled':
    case 'abandoned':
      return EXIT.runCancelled;
    default:
      return EXIT.runFailed;
  }
}
