/**
 * Facts about the host the pure layers are given: its boot (for `@reboot` loops,
 * src/scheduling/boot.ts), read once per process as now − uptime. `LOOPS_TEST_BOOT_TIME` (an ISO
 * instant; tests only) stands in for a boot.
 */
import { uptime } from 'node:os';
import { hostBootMs, setHostBoot } from '../scheduling/boot.js';

/** Tells the scheduler when the host booted, unless it knows already (a test may have set it). */
export function learnHostBoot(env: NodeJS.ProcessEnv = process.env): void {
  if (hostBootMs() !== null) return;
  const forced = env.LOOPS_TEST_BOOT_TIME ? Date.parse(env.LOOPS_TEST_BOOT_TIME) : NaN;
  setHostBoot(Number.isNaN(forced) ? Math.round(Date.now() - uptime() * 1000) : forced);
}
