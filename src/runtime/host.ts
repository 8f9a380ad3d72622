/**
 * Facts about the host the pure layers are given: its boot (for `@reboot` loops,
 * src/scheduling/boot.ts), read once per process as now − uptime. `LOOPS_TEST_BOOT_TIME` (an ISO
 * instant; tests only) stands in for a boot.
 */
import { hostname, uptime } from 'node:os';
import { hostBootMs, setHostBoot } from '../scheduling/boot.js';
import { parseLabels } from '../events/names.js';

/** Tells the scheduler when the host booted, unless it knows already (a test may have set it). */
export function learnHostBoot(env: NodeJS.ProcessEnv = process.env): void {
  if (hostBootMs() !== null) return;
  const forced = env.LOOPS_TEST_BOOT_TIME ? Date.parse(env.LOOPS_TEST_BOOT_TIME) : NaN;
  setHostBoot(Number.isNaN(forced) ? Math.round(Date.now() - uptime() * 1000) : forced);
}

/**
 * This host's identity in runner ids (`<host>:<pid>:<random>`), and so in every claim and lease: a
 * runner's liveness is judged only on the host it names (process-info.ts, `runnerGone`).
 * `LOOPS_HOST_ID` sets it — how a fleet names its hosts, and how tests run several "hosts" on one
 * machine — else the host name: readable in logs and `daemon status`, and, unlike a machine id,
 * not shared by the containers cloned from one image.
 */
export function hostId(env: NodeJS.ProcessEnv = process.env): string {
  const id = env.LOOPS_HOST_ID?.trim();
  return id ? id : hostname();
}

/** The host of a runner id `<host>:<pid>:<random>` (null for an id of another shape). */
export function runnerHost(runnerId: string): string | null {
  const parts = runnerId.split(':');
  return parts.length >= 3 ? parts.slice(0, -2).join(':') : null;
}

/**
 * This host's labels, which loops pinned with `--runs-on` ask for: `LOOPS_HOST_LABELS`
 * (comma-separated; `loops daemon --labels` sets it), else none. The host's id is a label too,
 * without being listed: `--runs-on <host>` pins a loop to one host.
 */
export function hostLabels(env: NodeJS.ProcessEnv = process.env): string[] {
  const given = env.LOOPS_HOST_LABELS?.trim();
  return given ? parseLabels(given, 'LOOPS_HOST_LABELS') : [];
}

/** Whether a runner on `host` with `labels` may run a loop pinned to `runsOn` (null: any runner): it has each of them. */
export function runsOnMet(runsOn: ReadonlyArray<string> | null, host: string, labels: ReadonlyArray<string>): boolean {
  return runsOn === null || runsOn.every((label) => label === host || labels.includes(label));
}

/** Whether this runner (its host is the one its id names) may run a loop pinned to `runsOn`. */
export function runnerMayRun(runner: { runnerId: string; labels?: ReadonlyArray<string> }, runsOn: ReadonlyArray<string> | null): boolean {
  return runsOnMet(runsOn, runnerHost(runner.runnerId) ?? hostId(), runner.labels ?? []);
}
