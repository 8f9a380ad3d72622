/**
 * Leases with fencing tokens — the documented operational exception to "every table is a
 * projection". A lease is held by one holder until it expires; each new acquisition increments
 * the token, so a holder that lost its lease is fenced out of recording outcomes.
 */
import { cached, writeTransaction, type Db } from '../events/db.js';
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
  return writeTransaction(db, () => takeLease(db, name, holder, ttlMs, nowMs));
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

// ── a stream's lease, held by the runner that executes it ──

/** What `HeldLease` needs of a runtime (kept structural: leases.ts sits below runtime.ts). */
interface LeaseHost {
  db: Db;
  runnerId: string;
  clock: { now(): number; setTimeout(fn: () => void, ms: number): unknown; clearTimeout(handle: never): void };
}

/**
 * The lease of a stream a runner executes — a loop run, a workflow run — and its fencing: the one
 * implementation of take, take over, renew, fence and release. Every append the runner makes to
 * the stream carries `fence()`: inside its transaction it checks that this runner still holds this
 * token (a runner that lost its lease records nothing) and releases the lease with the event that
 * ends the stream.
 */
export class HeldLease {
  private lease: Lease | null = null;
  private timer: unknown = null;

  constructor(
    private readonly host: LeaseHost,
    readonly name: string,
    readonly ttlMs: number,
  ) {}

  /** The fencing token held, or null before the lease was taken. */
  get token(): number | null {
    return this.lease?.token ?? null;
  }

  /**
   * A precondition for the append that starts the stream: takes the lease, which must be new (its
   * first token) — a stream id two runners try to start is started by one of them only.
   */
  takeNew(onTaken?: (lease: Lease) => void): () => void {
    return () => {
      const taken = takeLease(this.host.db, this.name, this.host.runnerId, this.ttlMs, this.host.clock.now());
      if (taken.token !== 1) throw new LeaseLostError(`${this.name} was started by another runner`);
      this.lease = taken;
      onTaken?.(taken);
    };
  }

  /**
   * Takes the lease over from a runner that is gone (its lease expired or was expired for it): a
   * new token fences the old runner out. In its own transaction, or inside the caller's as a
   * precondition (`takeOverIn`). Throws a retryable conflict while another runner holds it.
   */
  takeOver(): Lease {
    this.lease = writeTransaction(this.host.db, () => takeLease(this.host.db, this.name, this.host.runnerId, this.ttlMs, this.host.clock.now()));
    return this.lease;
  }

  /** `takeOver` as a precondition of an append (atomic with the events that need it). */
  takeOverIn(): () => void {
    return () => {
      this.lease = takeLease(this.host.db, this.name, this.host.runnerId, this.ttlMs, this.host.clock.now());
    };
  }

  /**
   * Options for every later append: fenced by this token, releasing the lease with the event that
   * ends the stream, caught up and retried when another process appended first (a cancel request).
   */
  fence(): { precondition: (next: { status: string }) => void; meta: { leaseToken?: number }; retryOnConflict: true } {
    return {
      precondition: (next) => {
        if (!this.lease) throw new LeaseLostError(`${this.name}: no lease held by ${this.host.runnerId}`);
        assertLeaseHeld(this.host.db, this.lease, this.host.clock.now());
        if (next.status === 'done') releaseLease(this.host.db, this.lease);
      },
      meta: this.lease ? { leaseToken: this.lease.token } : {},
      retryOnConflict: true,
    };
  }

  /** Renews the lease every third of its lifetime until `stop()`; a lost lease stops renewing (the next fenced append reports it). */
  keepAlive(): void {
    if (this.timer !== null) return;
    const beat = () => {
      this.timer = this.host.clock.setTimeout(() => {
        if (!this.lease) return;
        try {
          this.lease = renewLease(this.host.db, this.lease, this.ttlMs, this.host.clock.now());
          beat();
        } catch {
          this.timer = null;
        }
      }, Math.max(1, Math.floor(this.ttlMs / 3)));
    };
    beat();
  }

  stop(): void {
    if (this.timer !== null) this.host.clock.clearTimeout(this.timer as never);
    this.timer = null;
  }

  /** Gives the lease up now (a takeover that records the end at once). */
  release(): void {
    this.stop();
    if (this.lease) releaseLease(this.host.db, this.lease);
  }
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
