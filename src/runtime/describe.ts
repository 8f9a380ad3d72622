import type { Schedule } from '../events/catalog.js';

/** A short human description of a schedule, e.g. `every 15m`, `cron 0 3 * * * (Europe/Berlin)`. */
export function describeSchedule(schedule: Schedule): string {
  switch (schedule.kind) {
    case 'every':
      return `every ${formatEvery(schedule.everyMs)}`;
    case 'cron':
      return `cron ${schedule.expr} (${schedule.tz})`;
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
