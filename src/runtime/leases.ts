/**
 * Leases with fencing tokens — the documented operational exception to "every table is a
 * projection". A lease is held by one holder until it expires; each new acquisition increments
 * the token, so a holder that lost its lease is fenced out of recording outcomes.
 */
import { cached, type Db } from '../events/db.js';
import { LeaseLostError, LoopsError } from '../events/errors.js';

export interface Lease {
  name: string;
  holder: string;
  token: number;
  expiresAt: number;
}

interface LeaseRow {
  name: string;
  holder: string;
  token: number;
  expires_at: string;
}

/** Takes (or re-takes, when expired) a lease in its own transaction. */
export function acquireLease(db: Db, name: string, holder: string, ttlMs: number, nowMs: number): Lease {
  return db.transaction(() => takeLease(db, name, holder, ttlMs, nowMs)).immediate();
}

/** Takes a lease inside the caller's transaction (e.g. atomically with the events that need it). */
export function takeLease(db: Db, name: string, holder: string, ttlMs: number, nowMs: number): Lease {
  const row = cached<[string], LeaseRow>(db, 'SELECT * FROM leases WHERE name = ?').get(name);
  const expiresAt = nowMs + ttlMs;
  if (row && row.holder !== holder && Date.parse(row.expires_at) > nowMs) {
    throw new LoopsError('conflict', `${name} is leased by ${row.holder} until ${row.expires_at}`, {
      retryable: true,
      hint: 'another runner is executing it; wait for it to finish or for its lease to expire',
    });
  }
  const token = (row?.token ?? 0) + 1;
  cached(
    db,
    `INSERT INTO leases (name, holder, token, expires_at) VALUES (?, ?, ?, ?)
     ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, token = excluded.token, expires_at = excluded.expires_at`,
  ).run(name, holder, token, new Date(expiresAt).toISOString());
  return { name, holder, token, expiresAt };
}

/** Extends a held lease; throws `LeaseLostError` when someone else holds it now. */
export function renewLease(db: Db, lease: Lease, ttlMs: number, nowMs: number): Lease {
  const expiresAt = nowMs + ttlMs;
  const info = cached(db, 'UPDATE leases SET expires_at = ? WHERE name = ? AND holder = ? AND token = ?')
    .run(new Date(expiresAt).toISOString(), lease.name, lease.holder, lease.token);
  if (info.changes !== 1) {
    throw new LeaseLostError(`lease ${lease.name} (token ${lease.token}) was lost`);
  }
  return { ...lease, expiresAt };
}

/** Fencing check, run inside an append transaction: the caller must still hold this token. */
export function assertLeaseHeld(db: Db, lease: Lease, nowMs: number): void {
  const row = cached<[string], LeaseRow>(db, 'SELECT * FROM leases WHERE name = ?').get(lease.name);
  if (!row || row.holder !== lease.holder || row.token !== lease.token) {
    throw new LeaseLostError(
      `lease ${lease.name} is no longer held by ${lease.holder} (token ${lease.token}); not recording the outcome`,
    );
  }
  if (Date.parse(row.expires_at) < nowMs) {
    throw new LeaseLostError(`lease ${lease.name} expired at ${row.expires_at}; not recording the outcome`);
  }
}

export function releaseLease(db: Db, lease: Lease): void {
  cached(db, 'DELETE FROM leases WHERE name = ? AND holder = ? AND token = ?').run(lease.name, lease.holder, lease.token);
}

// ── runner leases ──

/** How long a runner's claim on the work it decided outlives it (renewed every third). */
export const RUNNER_LEASE_TTL_MS = 30_000;

export function runnerLeaseName(runnerId: string): string {
  return `runner:${runnerId}`;
}

/** Takes (or renews) this runner's lease: the work it decides is its own to run while it lives. */
export function holdRunnerLease(runtime: { db: Db; runnerId: string; clock: { now(): number } }, ttlMs = RUNNER_LEASE_TTL_MS): void {
  takeLease(runtime.db, runnerLeaseName(runtime.runnerId), runtime.runnerId, ttlMs, runtime.clock.now());
}
