/**
 * Waiting for a lease renewal, which appends no event: a heartbeat armed on a simulated clock fires
 * when the clock jumps, and its write reaches the lease store a moment later (on PostgreSQL, a
 * round trip). Bounded polling of the store's own state, never a sleep standing in for it.
 */
import type { LeaseStore } from '../../src/events/types.js';

export async function leaseRenewedPast(runtime: { leases: LeaseStore }, name: string, nowMs: number, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const lease = await runtime.leases.get(name);
    if (lease && lease.expiresAt > nowMs) return;
    if (Date.now() > deadline) throw new Error(`lease ${name} was not renewed past ${new Date(nowMs).toISOString()} within ${timeoutMs} ms (${lease ? `expires ${new Date(lease.expiresAt).toISOString()}` : 'no lease'})`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
