/**
 * The PostgreSQL lease store, and the append guards as PostgreSQL checks them: the same contract
 * as sqlite-leases.ts (same errors, same messages), made safe for writers that do not take turns.
 *
 * SQLite's take reads the lease, decides, then writes: right under its single writer, wrong under
 * PostgreSQL's READ COMMITTED, where two takers of an expired lease would both compute the same
 * next token — two holders, one token, fencing broken. Here (docs/design/postgres.md, items 2-3):
 *  - take is one statement, `INSERT … ON CONFLICT DO UPDATE … WHERE` the holder is the same or the
 *    lease expired, `RETURNING token`: PostgreSQL locks the row, re-checks the condition on its
 *    newest version after waiting for a concurrent taker, and bumps the token it finds. No row
 *    back = a live holder: the conflict SQLite's store reports.
 *  - the fence (`lease-held`) and `queued` read their row `FOR UPDATE`: a takeover or a competing
 *    claim waits for this transaction's commit, or this one waits for theirs and then sees the new
 *    token (the row is gone, for a claim) — never both committed on the same token.
 * Times are the appender's clock (`nowMs`), as on SQLite, so tests inject theirs. A fleet's clock
 * skew (design note, item 5) is for a later session: a host whose clock runs ahead takes over early.
 */
import { ClaimLostError, LeaseLostError, LoopsError } from '../errors.js';
import type { AppendGuard, Batch, Lease, LeaseInfo, LeaseRecord, LeaseStore } from '../types.js';
import type { Queryable } from './connect.js';
import type { PgCore } from './core.js';
import { selectLease, type Names } from './sql.js';

interface LeaseRow {
  holder: string;
  token: number;
  expires_at: number;
}

/** Takes (or takes over, once expired) a lease: one statement, atomic under concurrent takers. */
async function take(q: Queryable, names: Names, name: string, holder: string, ttlMs: number, nowMs: number): Promise<Lease> {
  const expiresAt = nowMs + ttlMs;
  const taken = await q.query<{ token: number }>({
    name: 'loops_lease_take',
    text: `INSERT INTO ${names.leases} AS l (name, holder, token, expires_at) VALUES ($1, $2, 1, $3)
           ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, token = l.token + 1, expires_at = EXCLUDED.expires_at
           WHERE l.holder = EXCLUDED.holder OR l.expires_at <= $4
           RETURNING token`,
    values: [name, holder, expiresAt, nowMs],
  });
  const row = taken.rows[0];
  if (row) return { name, holder, token: row.token, expiresAt };
  // Refused: a live holder. Read who, for the message (the same as SQLite's store gives).
  const current = (await q.query<LeaseRow>({ ...selectLease(names), values: [name] })).rows[0];
  const by = current ? `${current.holder} until ${new Date(current.expires_at).toISOString()}` : 'another runner';
  throw new LoopsError('conflict', `${name} is leased by ${by}`, {
    retryable: true,
    hint: 'another runner is executing it; wait for it to finish or for its lease to expire',
  });
}

/** The fencing check, with the lease's row locked to this transaction's end. */
async function assertHeld(q: Queryable, names: Names, lease: Pick<Lease, 'name' | 'holder' | 'token'>, nowMs: number): Promise<void> {
  const current = (await q.query<LeaseRow>({ name: 'loops_lease_lock', text: `SELECT holder, token, expires_at FROM ${names.leases} WHERE name = $1 FOR UPDATE`, values: [lease.name] })).rows[0];
  if (!current || current.holder !== lease.holder || current.token !== lease.token) {
    throw new LeaseLostError(`lease ${lease.name} is no longer held by ${lease.holder} (token ${lease.token}); not recording the outcome`);
  }
  if (current.expires_at < nowMs) {
    throw new LeaseLostError(`lease ${lease.name} expired at ${new Date(current.expires_at).toISOString()}; not recording the outcome`);
  }
}

async function release(q: Queryable, names: Names, lease: Pick<Lease, 'name' | 'holder' | 'token'>): Promise<void> {
  await q.query({ name: 'loops_lease_release', text: `DELETE FROM ${names.leases} WHERE name = $1 AND holder = $2 AND token = $3`, values: [lease.name, lease.holder, lease.token] });
}

/**
 * Applies an append's guards inside its transaction, in order; throws (aborting the append) when
 * one does not hold. Returns the leases taken, by name.
 */
export async function applyGuards(q: Queryable, core: PgCore, guards: readonly AppendGuard[], nowMs: number): Promise<Record<string, Lease>> {
  const names = core.names;
  const taken: Record<string, Lease> = {};
  for (const guard of guards) {
    switch (guard.kind) {
      case 'take-lease': {
        const lease = await take(q, names, guard.name, guard.holder, guard.ttlMs, nowMs);
        if (guard.expectToken !== undefined && lease.token !== guard.expectToken) {
          throw new LeaseLostError(`${guard.name} was started by another runner`);
        }
        taken[guard.name] = lease;
        if (guard.release) await release(q, names, lease);
        break;
      }
      case 'lease-held':
        await assertHeld(q, names, guard, nowMs);
        if (guard.release) await release(q, names, guard);
        break;
      case 'queued': {
        // run_queue is a projection's table: there once the store is opened with the projections.
        if (!(await core.runQueueExists(q))) {
          throw new LoopsError('internal', `the PostgreSQL store cannot check that run ${guard.runId} is still queued: schema ${names.schema} has no run_queue table`, {
            hint: "open the store with the project's projections (openPgStore's `projections`): they create run_queue",
          });
        }
        const queued = await q.query({ name: 'loops_queued_lock', text: `SELECT 1 FROM ${names.runQueue} WHERE run_id = $1 FOR UPDATE`, values: [guard.runId] });
        if (queued.rowCount === 0) throw new ClaimLostError(guard.runId, 'it is no longer queued (another runner claimed it, or it was dropped)');
        break;
      }
    }
  }
  return taken;
}

export class PgLeaseStore implements LeaseStore {
  constructor(private readonly core: PgCore) {}

  /** A write: in the open batch it belongs to, or on its own once no batch is open (as SQLite's gate). */
  private async write<T>(batch: Batch | undefined, fn: (q: Queryable) => Promise<T>): Promise<T> {
    const open = this.core.joined(batch);
    if (open) return this.core.batchWrite(open, (tx) => fn(tx.client));
    await this.core.outsideBatch();
    try {
      return await fn(this.core.pool);
    } catch (error) {
      throw this.core.conn.statementError(error);
    }
  }

  take(name: string, holder: string, ttlMs: number, nowMs: number, batch?: Batch): Promise<Lease> {
    return this.write(batch, (q) => take(q, this.core.names, name, holder, ttlMs, nowMs));
  }

  renew(lease: Lease, ttlMs: number, nowMs: number): Promise<Lease> {
    return this.write(undefined, async (q) => {
      const expiresAt = nowMs + ttlMs;
      const result = await q.query({
        name: 'loops_lease_renew',
        // GREATEST: renewals sent close together (a heartbeat per third of the lease) may commit out
        // of order on a pool's connections; an older one never shortens the lease.
        text: `UPDATE ${this.core.names.leases} SET expires_at = GREATEST(expires_at, $1) WHERE name = $2 AND holder = $3 AND token = $4`,
        values: [expiresAt, lease.name, lease.holder, lease.token],
      });
      if (result.rowCount !== 1) throw new LeaseLostError(`lease ${lease.name} (token ${lease.token}) was lost`);
      return { ...lease, expiresAt };
    });
  }

  release(lease: Pick<Lease, 'name' | 'holder' | 'token'>): Promise<void> {
    return this.write(undefined, (q) => release(q, this.core.names, lease));
  }

  releaseByHolder(name: string, holder: string): Promise<void> {
    return this.write(undefined, async (q) => {
      await q.query({ name: 'loops_lease_release_holder', text: `DELETE FROM ${this.core.names.leases} WHERE name = $1 AND holder = $2`, values: [name, holder] });
    });
  }

  expireHolder(holder: string, nowMs: number, batch?: Batch): Promise<void> {
    return this.write(batch, async (q) => {
      await q.query({
        name: 'loops_lease_expire_holder',
        text: `UPDATE ${this.core.names.leases} SET expires_at = $1 WHERE holder = $2 AND expires_at > $1`,
        values: [nowMs, holder],
      });
    });
  }

  async get(name: string): Promise<LeaseInfo | null> {
    const { name: statement, text } = selectLease(this.core.names);
    const row = (await this.core.read<LeaseRow>(statement, text, [name]))[0];
    return row ? { holder: row.holder, token: row.token, expiresAt: row.expires_at } : null;
  }

  /** Every row of the lease table, live or not, by name (`loops store copy`). */
  async all(): Promise<LeaseRecord[]> {
    const rows = await this.core.read<LeaseRow & { name: string }>('loops_lease_all', `SELECT name, holder, token, expires_at FROM ${this.core.names.leases} ORDER BY name COLLATE "C"`, []);
    return rows.map((r) => ({ name: r.name, holder: r.holder, token: r.token, expiresAt: r.expires_at }));
  }

  /**
   * Writes another store's lease rows (`all`) as they are (`loops store copy`), in one statement
   * (in the open batch given, or on its own): a lease this store holds with a higher token is
   * kept (fencing tokens never go back). Returns how many rows were written.
   */
  copyIn(records: ReadonlyArray<LeaseRecord>, batch?: Batch): Promise<number> {
    if (records.length === 0) return Promise.resolve(0);
    return this.write(batch, async (q) => {
      const result = await q.query({
        text: `INSERT INTO ${this.core.names.leases} AS l (name, holder, token, expires_at)
               SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])
               ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, token = EXCLUDED.token, expires_at = EXCLUDED.expires_at
               WHERE EXCLUDED.token > l.token`,
        values: [records.map((r) => r.name), records.map((r) => r.holder), records.map((r) => r.token), records.map((r) => r.expiresAt)],
      });
      return result.rowCount ?? 0;
    });
  }

  async live(prefix: string, nowMs: number): Promise<ReadonlyMap<string, LeaseInfo>> {
    if (prefix === '') throw new Error('LeaseStore.live: a prefix is required');
    // The prefix as a range of the primary key (as sqlite-leases.ts): no LIKE escaping. `COLLATE "C"`: byte order, whatever the database's collation.
    const end = prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
    const rows = await this.core.read<LeaseRow & { name: string }>(
      'loops_lease_live',
      `SELECT name, holder, token, expires_at FROM ${this.core.names.leases} WHERE name COLLATE "C" >= $1 AND name COLLATE "C" < $2 AND expires_at > $3`,
      [prefix, end, nowMs],
    );
    return new Map(rows.map((r) => [r.name, { holder: r.holder, token: r.token, expiresAt: r.expires_at }]));
  }
}
