/**
 * The host's boot, for `@reboot` loops: the instant the running system booted. A boot is a slot of
 * such a loop (its id is that instant), so the planner decides it like any other — once, by the
 * same compare-and-set on the loop's stream — and a daemon restarted within one boot finds it
 * decided. The planner stays pure: the runtime reads the boot once per process (a process never
 * outlives its boot: runtime/host.ts) and sets it here; until then no boot is known and `@reboot`
 * loops have no slot. Two processes of one boot may read it a second or so apart, which
 * `REBOOT_TOLERANCE_MS` absorbs.
 */

/** Two readings of one boot differ by less than this; two boots are further apart. */
export const REBOOT_TOLERANCE_MS = 60_000;

let boot: number | null = null;

/** When the host booted (ms since the epoch), once the runtime has said; null before. */
export function hostBootMs(): number | null {
  return boot;
}

/** Sets the host's boot (the runtime, once per process; tests, to stand in for a reboot; null: unknown). */
export function setHostBoot(ms: number | null): void {
  boot = ms;
}
