import type { Schedule, Timing } from '../events/catalog.js';

/** A short human description of a schedule, e.g. `every 15m`, `cron 0 3 * * * (Europe/Berlin)`. */
export function describeSchedule(schedule: Schedule): string {
  switch (schedule.kind) {
    case 'every':
      return `every ${formatEvery(schedule.everyMs)}${schedule.anchor === 'fixed-delay' ? ' after each finish' : ''}`;
    case 'cron':
      return schedule.expr.trim().toLowerCase() === '@reboot' ? 'at each boot of the host (@reboot)' : `cron ${schedule.expr} (${schedule.tz})`;
    case 'at':
      return `at ${schedule.at}`;
    case 'manual':
      return 'manual';
  }
}

function formatEvery(ms: number): string {
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

/** The timing bounds in words, e.g. `jitter 30s, until 2026-12-24T00:00:00.000Z, at most 10 runs`; '' when none. */
export function describeTiming(timing: Timing): string {
  const parts: string[] = [];
  if (timing.jitterMs) parts.push(`jitter ${formatEvery(timing.jitterMs)}`);
  if (timing.startsAt) parts.push(`from ${timing.startsAt}`);
  if (timing.expiresAt) parts.push(`until ${timing.expiresAt}`);
  if (timing.maxRuns) parts.push(`at most ${timing.maxRuns} run${timing.maxRuns === 1 ? '' : 's'}`);
  return parts.join(', ');
}
