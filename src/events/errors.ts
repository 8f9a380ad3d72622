/**
 * The error taxonomy of loops. Every error a user can see is a `LoopsError` with a stable `code`,
 * a one-line message, and a `hint` saying how to fix it. The CLI maps `code` to an exit code.
 */
export type LoopsErrorCode =
  | 'usage'
  | 'validation'
  | 'not_found'
  | 'ambiguous'
  | 'already_exists'
  | 'conflict'
  | 'invalid_transition'
  | 'lease_lost'
  | 'busy'
  | 'format_version'
  | 'determinism'
  | 'internal';

export interface LoopsErrorOptions {
  hint?: string | undefined;
  cause?: unknown;
  retryable?: boolean;
  details?: Record<string, unknown>;
}

export class LoopsError extends Error {
  readonly code: LoopsErrorCode;
  readonly hint: string | undefined;
  readonly retryable: boolean;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: LoopsErrorCode, message: string, options: LoopsErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'LoopsError';
    this.code = code;
    this.hint = options.hint;
    this.retryable = options.retryable ?? false;
    this.details = options.details;
  }
}

/** Bad flags, bad arguments, bad values: the user can fix the command line. */
export class UsageError extends LoopsError {
  constructor(message: string, options: LoopsErrorOptions = {}) {
    super('usage', message, options);
    this.name = 'UsageError';
  }
}

/** Input that parsed but is not valid (a field, a duration, a cron expression, a directory). */
export class ValidationError extends LoopsError {
  constructor(message: string, options: LoopsErrorOptions = {}) {
    super('validation', message, options);
    this.name = 'ValidationError';
  }
}

export class NotFoundError extends LoopsError {
  constructor(message: string, options: LoopsErrorOptions = {}) {
    super('not_found', message, options);
    this.name = 'NotFoundError';
  }
}

export class AmbiguousError extends LoopsError {
  constructor(message: string, options: LoopsErrorOptions = {}) {
    super('ambiguous', message, options);
    this.name = 'AmbiguousError';
  }
}

export class AlreadyExistsError extends LoopsError {
  constructor(message: string, options: LoopsErrorOptions = {}) {
    super('already_exists', message, options);
    this.name = 'AlreadyExistsError';
  }
}

/** An append whose expected stream version is stale: someone else appended first. */
export class ConcurrencyConflictError extends LoopsError {
  readonly streamId: string;
  readonly expectedVersion: number;
  readonly actualVersion: number;
  constructor(streamId: string, expectedVersion: number, actualVersion: number) {
    super(
      'conflict',
      `stream ${streamId} is at version ${actualVersion}, expected ${expectedVersion}: another writer appended first`,
      { retryable: true, hint: 'reload the stream and retry the command' },
    );
    this.name = 'ConcurrencyConflictError';
    this.streamId = streamId;
    this.expectedVersion = expectedVersion;
    this.actualVersion = actualVersion;
  }
}

/**
 * Claiming queued work lost to another runner: it claimed the run first, or the work was dropped
 * (its loop stopped). Nothing was recorded; the caller moves on.
 */
export class ClaimLostError extends ConcurrencyConflictError {
  constructor(runId: string, why: string) {
    super(`run:${runId}`, 0, 1);
    this.name = 'ClaimLostError';
    this.message = `run ${runId} was not claimed: ${why}`;
  }
}

/** The machine does not accept this event in its current state (e.g. pausing a paused loop). */
export class InvalidTransitionError extends LoopsError {
  constructor(message: string, options: LoopsErrorOptions = {}) {
    super('invalid_transition', message, options);
    this.name = 'InvalidTransitionError';
  }
}

/** A runner tried to record an outcome for a run whose lease it no longer holds. */
export class LeaseLostError extends LoopsError {
  constructor(message: string, options: LoopsErrorOptions = {}) {
    super('lease_lost', message, options);
    this.name = 'LeaseLostError';
  }
}

export class BusyError extends LoopsError {
  constructor(message: string, options: LoopsErrorOptions = {}) {
    super('busy', message, { retryable: true, ...options });
    this.name = 'BusyError';
  }
}

/** The database was written by a newer loops whose log format this version cannot read. */
export class FormatVersionError extends LoopsError {
  constructor(message: string, options: LoopsErrorOptions = {}) {
    super('format_version', message, options);
    this.name = 'FormatVersionError';
  }
}

/** Replaying the log through the machine disagrees with the states recorded in the log. */
export class DeterminismError extends LoopsError {
  readonly version: number;
  constructor(message: string, version: number, options: LoopsErrorOptions = {}) {
    super('determinism', message, options);
    this.name = 'DeterminismError';
    this.version = version;
  }
}

export function isLoopsError(error: unknown): error is LoopsError {
  return error instanceof LoopsError;
}

/**
 * The unique constraint a store's error says a write violated — SQLite's `UNIQUE constraint failed:
 * loops.live_name`, PostgreSQL's 23505 on `loops_live_name` — as the text naming it, or null for any
 * other error: how the runtime tells a name or key taken by a concurrent writer, on either store.
 */
export function uniqueViolation(error: unknown): string | null {
  const e = error as { code?: unknown; constraint?: unknown; message?: unknown } | null;
  if (e === null || typeof e !== 'object') return null;
  if (e.code === 'SQLITE_CONSTRAINT_UNIQUE' || e.code === 'SQLITE_CONSTRAINT_PRIMARYKEY') return String(e.message ?? '');
  if (e.code === '23505') return typeof e.constraint === 'string' ? e.constraint : String(e.message ?? '');
  return null;
}

/**
 * A database server or the network ended the connection, or never let one be made (PostgreSQL's
 * 08xxx and 57P0x codes, socket errors): the write did not happen, or — while committing — may
 * have; the same write may succeed once the server is back (storage-fault.ts).
 */
export function isConnectionLoss(error: unknown): boolean {
  const e = error as { code?: string; message?: string };
  const code = e.code ?? '';
  return (
    code.startsWith('08') ||
    code === '57P01' || // admin_shutdown (pg_terminate_backend)
    code === '57P02' ||
    code === '57P03' ||
    code === '25P03' || // idle_in_transaction_session_timeout: the session ended, its transaction rolled back
    ['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT'].includes(code) ||
    /Connection terminated|connection is closed|Client has encountered a connection error/i.test(e.message ?? '')
  );
}
