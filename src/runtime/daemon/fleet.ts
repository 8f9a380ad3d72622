/**
 * `loops daemon status --fleet`: every runner of the store, from the leases (one read per kind):
 * each host's daemon (its `daemon:<host>` lease on a shared store, `daemon` on SQLite) with the
 * runs whose leases it holds, other runners holding runs (a `run-now` on some host), and the work
 * fired but not claimed yet. On PostgreSQL it also says whether other hosts' events arrive by
 * LISTEN/NOTIFY or by reading the head while that connection is down.
 */
import { runnerHost } from '../host.js';
import { knownHosts } from '../queries/hosts.js';
import { DAEMON_LEASE_TTL_MS } from './daemon.js';
import { eligibleRunners, liveRunners } from './hosts.js';
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
  /** The labels its daemon started with (`--labels`; its host's id is one too, not listed); none for a runner. */
  labels: string[];
  /** When it last renewed its daemon lease (the lease's expiry less its time-to-live); null for a runner. */
  heartbeatAt: string | null;
  /** The database server's clock less this host's, measured when its daemon started (null: not measured — SQLite, or a runner). */
  clockOffsetMs: number | null;
}

/** A host known to the store whose daemon is not live now. */
export interface FleetHostDown {
  host: string;
  labels: string[];
  /** `stopped`: its daemon recorded its stop; `gone`: it recorded none and its lease ran out (killed, crashed, cut off). */
  status: 'stopped' | 'gone';
  /** When its last daemon started, and stopped (null when it recorded no stop). */
  startedAt: string;
  stoppedAt: string | null;
}

/** Work of loops pinned with `--runs-on` that no live runner may claim: it waits for one, or for its catch-up policy. */
export interface FleetPinnedWaiting {
  runsOn: string[];
  /** Fired slots and retries due now, of loops pinned to exactly these labels. */
  waiting: number;
  loops: string[];
}

export interface FleetStatus {
  /** Where the log is: `sqlite` (this data directory's database) or the PostgreSQL URL (no password) and schema. */
  store: { kind: 'sqlite' } | { kind: 'postgres'; where: string; schema: string; listening: boolean | null };
  runners: FleetRunner[];
  /** Fired slots and retries due now that no runner has claimed yet. */
  waiting: number;
  /** Hosts known to the store (a daemon started there once) whose daemon is not live. */
  down: FleetHostDown[];
  /** Of the waiting work, that of pinned loops no live runner has the labels for. */
  noRunner: FleetPinnedWaiting[];
}

/** The fleet as the store sees it now. */
export async function fleetStatus(runtime: Runtime): Promise<FleetStatus> {
  const now = runtime.clock.now();
  const [daemons, runs] = await Promise.all([runtime.leases.live('daemon', now), runtime.leases.live('run:', now)]);
  const byHolder = new Map<string, string[]>();
  for (const [name, lease] of runs) byHolder.set(lease.holder, [...(byHolder.get(lease.holder) ?? []), name.slice('run:'.length)]);
  const runners: FleetRunner[] = [];
  const hosts = knownHosts(runtime.db);
  const byRunner = new Map(hosts.map((h) => [h.runnerId, h]));
  const liveHosts = new Set<string>();
  for (const [name, lease] of daemons) {
    if (name !== 'daemon' && !name.startsWith('daemon:')) continue;
    runners.push({
      host: hostOf(lease.holder),
      runnerId: lease.holder,
      kind: 'daemon',
      leaseUntil: new Date(lease.expiresAt).toISOString(),
      runs: (byHolder.get(lease.holder) ?? []).sort(),
      labels: byRunner.get(lease.holder)?.labels ?? [],
      heartbeatAt: new Date(lease.expiresAt - DAEMON_LEASE_TTL_MS).toISOString(),
      clockOffsetMs: byRunner.get(lease.holder)?.clockOffsetMs ?? null,
    });
    liveHosts.add(hostOf(lease.holder));
    byHolder.delete(lease.holder);
  }
  for (const [holder, ids] of byHolder) runners.push({ host: hostOf(holder), runnerId: holder, kind: 'runner', leaseUntil: null, runs: ids.sort(), labels: [], heartbeatAt: null, clockOffsetMs: null });
  const down: FleetHostDown[] = hosts
    .filter((h) => !liveHosts.has(h.id))
    .map((h) => ({ host: h.id, labels: h.labels, status: h.status === 'down' ? ('stopped' as const) : ('gone' as const), startedAt: h.startedAt, stoppedAt: h.stoppedAt }));
  runners.sort((a, b) => a.host.localeCompare(b.host) || a.kind.localeCompare(b.kind) || a.runnerId.localeCompare(b.runnerId));
  const due = runtime.db
    .prepare<[string], { runsOn: string | null; name: string; n: number }>(
      `SELECT l.runs_on AS runsOn, l.name, count(*) AS n FROM run_queue q JOIN loops l ON l.id = q.loop_id
       WHERE q.kind != 'buffered' AND q.due_at <= ? AND l.status IN ('active', 'expired') GROUP BY l.id, l.runs_on, l.name ORDER BY l.name`,
    )
    .all(new Date(now).toISOString());
  const waiting = due.reduce((sum, row) => sum + row.n, 0);
  const live = due.some((row) => row.runsOn !== null) ? await liveRunners(runtime, now) : [];
  const noRunner = new Map<string, FleetPinnedWaiting>();
  for (const row of due) {
    if (row.runsOn === null) continue;
    const runsOn = JSON.parse(row.runsOn) as string[];
    if (eligibleRunners(live, runsOn).length > 0) continue;
    const entry = noRunner.get(row.runsOn) ?? { runsOn, waiting: 0, loops: [] };
    entry.waiting += row.n;
    entry.loops.push(row.name);
    noRunner.set(row.runsOn, entry);
  }
  const source = (runtime.log as { source?: { listening?: unknown } }).source;
  const store: FleetStatus['store'] = runtime.fleet
    ? { kind: 'postgres', where: runtime.fleet.where, schema: runtime.fleet.schema, listening: typeof source?.listening === 'boolean' ? source.listening : null }
    : { kind: 'sqlite' };
  return { store, runners, waiting, down, noRunner: [...noRunner.values()] };
}

const hostOf = (runnerId: string): string => runnerHost(runnerId) ?? runnerId;
