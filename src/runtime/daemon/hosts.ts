/**
 * Runner hosts and their labels (`--runs-on`): each daemon records on its host's stream
 * (`host:<hostId>`) that it started — its runner id, pid, boot and labels — in the transaction that
 * takes its daemon lease, and that it stopped. Whether a runner is alive is its lease's to say; its
 * labels are the log's. Together they answer who may run a pinned loop's work now
 * (`eligibleRunners`), which the pass uses to judge work nobody can claim, and `why` and
 * `daemon status --fleet` show.
 */
import { NotFoundError } from '../../events/errors.js';
import type { Batch } from '../../events/types.js';
import { currentMachines } from '../../machines/registry.js';
import { DurableActor } from '../actor.js';
import { bootId } from '../execution/process-info.js';
import { hostId, runnerHost, runsOnMet } from '../host.js';
import { runnerLeaseName } from '../leases.js';
import type { Runtime } from '../runtime.js';
import { knownHosts } from '../queries/hosts.js';

/** The host this runtime's runner runs on (the one its runner id names). */
function hostOf(runtime: Pick<Runtime, 'runnerId'>): string {
  return runnerHost(runtime.runnerId) ?? hostId();
}

/** Records that this runtime's daemon started on its host with its labels (in `batch`: the one taking the daemon lease). */
export async function recordHostStarted(runtime: Runtime, version: string, batch: Batch, clockOffsetMs: number | null = null): Promise<void> {
  const host = hostOf(runtime);
  const streamId = `host:${host}`;
  const data = {
    hostId: host,
    runnerId: runtime.runnerId,
    labels: [...(runtime.labels ?? [])],
    pid: process.pid,
    bootId: bootId(),
    version,
    ...(clockOffsetMs !== null ? { clockOffsetMs } : {}),
  };
  let actor: DurableActor;
  try {
    actor = await DurableActor.load(runtime, streamId, {}, currentMachines.host);
  } catch (error) {
    if (!(error instanceof NotFoundError)) throw error;
    actor = DurableActor.create(runtime, streamId, 'host', currentMachines.host);
  }
  await actor.record('host.started', data, { batch });
}

/** Records that this runtime's daemon stopped (nothing when another daemon of the host started since). */
export async function recordHostStopped(runtime: Runtime, reason: string): Promise<void> {
  const actor = await DurableActor.load(runtime, `host:${hostOf(runtime)}`, {}, currentMachines.host);
  const data = { runnerId: runtime.runnerId, reason };
  if (actor.accepts('host.stopped', data)) await actor.record('host.stopped', data);
}

/** A runner alive now (its runner lease live) and the labels it runs loops for. */
export interface LiveRunner {
  runnerId: string;
  host: string;
  /** Its labels: those its daemon started with (none for a runner without a daemon, a `tick`); its host's id is one too. */
  labels: string[];
}

/**
 * The runners alive now (their runner leases live: every daemon and every pass holds one), each
 * with its labels — a daemon's from its host's stream, this runtime's own from itself.
 */
export async function liveRunners(runtime: Runtime, nowMs: number): Promise<LiveRunner[]> {
  const leases = await runtime.leases.live(runnerLeaseName(''), nowMs);
  const byRunner = new Map(knownHosts(runtime.db).map((h) => [h.runnerId, h.labels]));
  const runners: LiveRunner[] = [];
  for (const lease of leases.values()) {
    const labels = lease.holder === runtime.runnerId ? [...(runtime.labels ?? [])] : (byRunner.get(lease.holder) ?? []);
    runners.push({ runnerId: lease.holder, host: runnerHost(lease.holder) ?? lease.holder, labels });
  }
  return runners;
}

/** Of `runners`, those that may run a loop pinned to `runsOn`. */
export function eligibleRunners(runners: ReadonlyArray<LiveRunner>, runsOn: ReadonlyArray<string>): LiveRunner[] {
  return runners.filter((r) => runsOnMet(runsOn, r.host, r.labels));
}

/**
 * On a shared store, how far this host's clock is from the database server's (`clockOffset` of
 * the PostgreSQL store behind the runtime's log), or null on SQLite or when it cannot be read.
 */
export async function measureClock(runtime: Runtime): Promise<{ offsetMs: number; rttMs: number } | null> {
  const source = (runtime.log as { source?: { clockOffset?: (now: () => number) => Promise<{ offsetMs: number; rttMs: number }> } }).source;
  if (!runtime.fleet || typeof source?.clockOffset !== 'function') return null;
  try {
    return await source.clockOffset(() => runtime.clock.now());
  } catch {
    return null; // the daemon's start finds out for itself if the store is unreachable
  }
}
