/**
 * `loops daemon status --fleet`: every runner of the store, from the leases (one read per kind):
 * each host's daemon (its `daemon:<host>` lease on a shared store, `daemon` on SQLite) with the
 * runs whose leases it holds, other runners holding runs (a `run-now` on some host), and the work
 * fired but not claimed yet. On PostgreSQL it also says whether other hosts' events arrive by
 * LISTEN/NOTIFY or by reading the head while that connection is down.
 */
import { runnerHost } from '../host.js';
import type { Runtime } from '../runtime.js';

export interface FleetRunner {
  /** The host the runner runs on (the first part of its runner id: LOOPS_HOST_ID or the host name). */
  host: string;
  runnerId: string;
  /** `daemon`, or `runner` for one holding runs without a daemon lease (a `run-now`, a `tick`). */
  kind: 'daemon' | 'runner';
  /** When its daemon lease runs out unless renewed (a live daemon renews it every third of its lifetime); null for a runner. */
  leaseUntil: string | null;
  /** Runs whose lease it holds now, oldest id first. */
  runs: string[];
}

export interface FleetStatus {
  /** Where the log is: `sqlite` (this data directory's database) or the PostgreSQL URL (no password) and schema. */
  store: { kind: 'sqlite' } | { kind: 'postgres'; where: string; schema: string; listening: boolean | null };
  runners: FleetRunner[];
  /** Fired slots and retries due now that no runner has claimed yet. */
  waiting: number;
}

/** The fleet as the store sees it now. */
export async function fleetStatus(runtime: Runtime): Promise<FleetStatus> {
  const now = runtime.clock.now();
  const [daemons, runs] = await Promise.all([runtime.leases.live('daemon', now), runtime.leases.live('run:', now)]);
  const byHolder = new Map<string, string[]>();
  for (const [name, lease] of runs) byHolder.set(lease.holder, [...(byHolder.get(lease.holder) ?? []), name.slice('run:'.length)]);
  const runners: FleetRunner[] = [];
  for (const [name, lease] of daemons) {
    if (name !== 'daemon' && !name.startsWith('daemon:')) continue;
    runners.push({ host: hostOf(lease.holder), runnerId: lease.holder, kind: 'daemon', leaseUntil: new Date(lease.expiresAt).toISOString(), runs: (byHolder.get(lease.holder) ?? []).sort() });
    byHolder.delete(lease.holder);
  }
  for (const [holder, ids] of byHolder) runners.push({ host: hostOf(holder), runnerId: holder, kind: 'runner', leaseUntil: null, runs: ids.sort() });
  runners.sort((a, b) => a.host.localeCompare(b.host) || a.kind.localeCompare(b.kind) || a.runnerId.localeCompare(b.runnerId));
  const waiting = runtime.db
    .prepare<[string], { n: number }>("SELECT count(*) AS n FROM run_queue q JOIN loops l ON l.id = q.loop_id WHERE q.kind != 'buffered' AND q.due_at <= ? AND l.status IN ('active', 'expired')")
    .get(new Date(now).toISOString())!.n;
  const source = (runtime.log as { source?: { listening?: unknown } }).source;
  const store: FleetStatus['store'] = runtime.fleet
    ? { kind: 'postgres', where: runtime.fleet.where, schema: runtime.fleet.schema, listening: typeof source?.listening === 'boolean' ? source.listening : null }
    : { kind: 'sqlite' };
  return { store, runners, waiting };
}

const hostOf = (runnerId: string): string => runnerHost(runnerId) ?? runnerId;
