/**
 * The SQLite lease store: leases with fencing tokens in the `leases` table — the documented
 * operational exception to "every table is a projection". A lease is held by one holder until it
 * expires; each new acquisition increments the token, so a holder that lost its lease is fenced
 * out of recording outcomes.
 *
 * Two ways in, one implementation: `SqliteLeaseStore` (take, renew, release … each in its own
 * transaction, or inside the caller's), and the guards an append carries as data
 * (`AppendGuard`, applied by `applyGuards` inside the append's transaction: take a lease, check
 * one is still held, release it with the events that end a stream, check queued work is still
 * unclaimed). A store for another database implements the same guards in its own transaction.
 */
import { cached, writeTransaction, type Db } from './db.js';
import { ClaimLostError, LeaseLostError, LoopsError } from './errors.js';
import type { AppendGuard, Batch, Lease, LeaseInfo, LeaseRecord, LeaseStore } from './types.js';
import { gateFor, resolved, type WriteGate } from './sqlite-gate.js';

interface LeaseRow {
  name: string;
  holder: string;
  token: number;
  expires_at: string;
}

function row(db: Db, name: string): LeaseRow | undefined {
  return cached<[string], LeaseRow>(db, 'SELECT * FROM leases WHERE name = ?').get(name);
}

/** Takes (or takes over, once expired) a lease inside the caller's transaction. */
function take(db: Db, name: string, holder: string, ttlMs: number, nowMs: number): Lease {
  const current = row(db, name);
  const expiresAt = nowMs + ttlMs;
  if (current && current.holder !== holder && Date.parse(current.expires_at) > nowMs) {
    throw new LoopsError('conflict', `${name} is leased by ${current.holder} until ${current.expires_at}`, {
      retryable: true,
      hint: 'another runner is executing it; wait for it to finish or for its lease to expire',
    });
  }
  const token = (current?.token ?? 0) + 1;
  cached(
    db,
    `INSERT INTO leases (name, holder, token, expires_at) VALUES (?, ?, ?, ?)
     ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, token = excluded.token, expires_at = excluded.expires_at`,
  ).run(name, holder, token, new Date(expiresAt).toISOString());
  return { name, holder, token, expiresAt };
}

/** The fencing check: `lease` is still held by its holder with its token, and not expired. */
function assertHeld(db: Db, lease: Pick<Lease, 'name' | 'holder' | 'token'>, nowMs: number): void {
  const current = row(db, lease.name);
  if (!current || current.holder !== lease.holder || current.token !== lease.token) {
    throw new LeaseLostError(`lease ${lease.name} is no longer held by ${lease.holder} (token ${lease.token}); not recording the outcome`);
  }
  if (Date.parse(current.expires_at) < nowMs) {
    throw new LeaseLostError(`lease ${lease.name} expired at ${current.expires_at}; not recording the outcome`);
  }
}

function release(db: Db, lease: Pick<Lease, 'name' | 'holder' | 'token'>): void {
  cached(db, 'DELETE FROM leases WHERE name = ? AND holder = ? AND token = ?').run(lease.name, lease.holder, lease.token);
}

/**
 * Applies an append's guards inside its transaction, in order; throws (aborting the append) when
 * one does not hold. Returns the leases taken, by name.
 */
export function applyGuards(db: Db, guards: readonly AppendGuard[], nowMs: number): Record<string, Lease> {
  const taken: Record<string, Lease> = {};
  for (const guard of guards) {
    switch (guard.kind) {
      case 'take-lease': {
        const lease = take(db, guard.name, guard.holder, guard.ttlMs, nowMs);
        if (guard.expectToken !== undefined && lease.token !== guard.expectToken) {
          throw new LeaseLostError(`${guard.name} was started by another runner`);
        }
        taken[guard.name] = lease;
        if (guard.release) release(db, lease);
        break;
      }
      case 'lease-held':
        assertHeld(db, guard, nowMs);
        if (guard.release) release(db, guard);
        break;
      case 'queued':
        if (!cached(db, 'SELECT 1 FROM run_queue WHERE run_id = ?').get(guard.runId)) {
          throw new ClaimLostError(guard.runId, 'it is no longer queued (another runner claimed it, or it was dropped)');
        }
        break;
    }
  }
  return taken;
}

export class SqliteLeaseStore implements LeaseStore {
  /** A lease write waits at the database file's gate for a batch it is not part of (sqlite-gate.ts). */
  private readonly gate: WriteGate;

  constructor(private readonly db: Db) {
    this.gate = gateFor(db);
  }

  take(name: string, holder: string, ttlMs: number, nowMs: number, batch?: Batch): Promise<Lease> {
    return this.gate.run(batch, () => writeTransaction(this.db, () => take(this.db, name, holder, ttlMs, nowMs)));
  }

  renew(lease: Lease, ttlMs: number, nowMs: number): Promise<Lease> {
    return this.gate.run(undefined, () => {
      const expiresAt = nowMs + ttlMs;
      // max(): a renewal never shortens the lease (as on PostgreSQL, where renewals may commit out of order).
      const info = cached(this.db, 'UPDATE leases SET expires_at = max(expires_at, ?) WHERE name = ? AND holder = ? AND token = ?').run(
        new Date(expiresAt).toISOString(),
        lease.name,
        lease.holder,
        lease.token,
      );
      if (info.changes !== 1) throw new LeaseLostError(`lease ${lease.name} (token ${lease.token}) was lost`);
      return { ...lease, expiresAt };
    });
  }

  release(lease: Pick<Lease, 'name' | 'holder' | 'token'>): Promise<void> {
    return this.gate.run(undefined, () => release(this.db, lease));
  }

  releaseByHolder(name: string, holder: string): Promise<void> {
    return this.gate.run(undefined, () => {
      cached(this.db, 'DELETE FROM leases WHERE name = ? AND holder = ?').run(name, holder);
    });
  }

  expireHolder(holder: string, nowMs: number, batch?: Batch): Promise<void> {
    return this.gate.run(batch, () => {
      const nowIso = new Date(nowMs).toISOString();
      cached(this.db, 'UPDATE leases SET expires_at = ? WHERE holder = ? AND expires_at > ?').run(nowIso, holder, nowIso);
    });
  }

  get(name: string): Promise<LeaseInfo | null> {
    return resolved(() => {
      const current = row(this.db, name);
      return current ? { holder: current.holder, token: current.token, expiresAt: Date.parse(current.expires_at) } : null;
    });
  }

  /** Every row of the lease table, live or not, by name (`loops store copy`). */
  all(): Promise<LeaseRecord[]> {
    return resolved(() =>
      cached<[], LeaseRow>(this.db, 'SELECT * FROM leases ORDER BY name')
        .all()
        .map((r) => ({ name: r.name, holder: r.holder, token: r.token, expiresAt: Date.parse(r.expires_at) })),
    );
  }

  /**
   * Writes another store's lease rows (`all`) as they are (`loops store copy`), in one transaction
   * (or the open batch's): a lease this store holds with a higher token is kept (fencing tokens
   * never go back). Returns how many rows were written.
   */
  copyIn(records: ReadonlyArray<LeaseRecord>, batch?: Batch): Promise<number> {
    return this.gate.run(batch, () =>
      writeTransaction(this.db, () => {
        const put = cached(
          this.db,
          `INSERT INTO leases (name, holder, token, expires_at) VALUES (?, ?, ?, ?)
           ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, token = excluded.token, expires_at = excluded.expires_at
           WHERE excluded.token > leases.token`,
        );
        let written = 0;
        for (const r of records) written += put.run(r.name, r.holder, r.token, new Date(r.expiresAt).toISOString()).changes;
        return written;
      }),
    );
  }

  live(prefix: string, nowMs: number): Promise<ReadonlyMap<string, LeaseInfo>> {
    return resolved(() => {
      if (prefix === '') throw new Error('LeaseStore.live: a prefix is required');
      // A prefix as a range of the primary key (name >= prefix AND name < prefix with its last character raised): no LIKE escaping, and an index range.
      const end = prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
      const rows = cached<[string, string, string], LeaseRow>(this.db, 'SELECT * FROM leases WHERE name >= ? AND name < ? AND expires_at > ?').all(
        prefix,
        end,
        new Date(nowMs).toISOString(),
      );
      return new Map(rows.map((r) => [r.name, { holder: r.holder, token: r.token, expiresAt: Date.parse(r.expires_at) }]));
    });
  }
}
