/**
 * The host's boot, for `@reboot` loops: the instant the running system booted. A boot is a slot
 * of such a loop (its id is that instant), so the planner decides it like any other — once, by the
 * same compare-and-set on the loop's stream — and a daemon restarted within one boot finds it
 * decided already.
 *
 * Read once per process (a process never outlives its boot) as now − uptime; two processes of one
 * boot may read it a second or so apart, which `REBOOT_TOLERANCE_MS` absorbs.
 * `LOOPS_TEST_BOOT_TIME` (an ISO instant; tests only) stands in for a boot.
 */
import { uptime } from 'node:os';

/** Two readings of one boot differ by less than this; two boots are further apart. */
export const REBOOT_TOLERANCE_MS = 60_000;

let cached: number | null = null;

/** When the host booted (ms since the epoch). */
export function bootTimeMs(): number {
  if (cached !== null) return cached;
  const forced = process.env.LOOPS_TEST_BOOT_TIME;
  const parsed = forced ? Date.parse(forced) : NaN;
  cached = Number.isNaN(parsed) ? Math.round(Date.now() - uptime() * 1000) : parsed;
  return cached;
}

/** Tests: pretend the host booted at `ms` (null: read it again). */
export function setBootTimeForTests(ms: number | null): void {
  cached = ms;
}
