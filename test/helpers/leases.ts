/**
 * Leases in tests, through the store's LeaseStore (on PostgreSQL the leases live in the shared
 * schema, not in the host's replica that `runtime.db` reads): every lease there is (`leaseRows`),
 * and waiting for a renewal (`leaseRenewedPast`).
 */
import type { LeaseInfo, LeaseStore } from '../../src/events/types.js';

/**
 * Waiting for a lease renewal, which appends no event: a heartbeat armed on a simulated clock fires
 * when the clock jumps, and its write reaches the lease store a moment later (on PostgreSQL, a
 * round trip). Bounded polling of the store's own state, never a sleep standing in for it.
 */

export async function leaseRenewedPast(runtime: { leases: LeaseStore }, name: string, nowMs: number, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const lease = await runtime.leases.get(name);
    if (lease && lease.expiresAt > nowMs) return;
    if (Date.now() > deadline) throw new Error(`lease ${name} was not renewed past ${new Date(nowMs).toISOString()} within ${timeoutMs} ms (${lease ? `expires ${new Date(lease.expiresAt).toISOString()}` : 'no lease'})`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** The lease names' families: runs, runners, daemons (`daemon`, `daemon:<host>` on a shared store), notices, workflow runs. */
export const LEASE_FAMILIES = ['daemon', 'notice:', 'run:', 'runner:', 'wfrun:'] as const;

export interface LeaseRow extends LeaseInfo {
  name: string;
}

/**
 * Every lease the store has — live or run out, but not released — by name: the lease table read
 * through the store's own interface (`live` since the epoch, one read per family), so a test reads
 * it alike on SQLite (the data directory's `leases` table) and on PostgreSQL (the shared schema's;
 * the host's replica has none).
 */
export async function leaseRows(runtime: { leases: LeaseStore }, families: readonly string[] = LEASE_FAMILIES): Promise<LeaseRow[]> {
  const rows: LeaseRow[] = [];
  for (const family of families) {
    for (const [name, lease] of await runtime.leases.live(family, 0)) rows.push({ name, ...lease });
  }
  return rows.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
