/**
 * Building and validating schedules, and computing the next due time. croner is used only as a
 * calculator, always with an explicit reference time.
 */
import { Cron } from 'croner';
import type { Schedule } from '../events/catalog.js';
import { UsageError, ValidationError } from '../events/errors.js';
import { parseDuration } from './durations.js';

export interface ScheduleFlags {
  every?: string | undefined;
  cron?: string | undefined;
  at?: string | undefined;
  manual?: boolean | undefined;
  tz?: string | undefined;
}

export function systemTimeZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
}

export function validateTimeZone(tz: string): string {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return tz;
  } catch {
    throw new ValidationError(`--tz: unknown time zone ${JSON.stringify(tz)}`, {
      hint: 'use an IANA zone name such as Europe/Berlin, America/New_York or UTC',
    });
  }
}

/** Exactly one of --every, --cron, --at, --manual, turned into a stored schedule. */
export function buildSchedule(flags: ScheduleFlags, nowMs: number): Schedule {
  const given = (['every', 'cron', 'at', 'manual'] as const).filter((k) =>
    k === 'manual' ? flags.manual === true : flags[k] !== undefined,
  );
  if (given.length === 0) {
    throw new UsageError('a schedule is required: give one of --every, --cron, --at or --manual', {
      hint: "e.g. --every 15m, --cron '0 3 * * *', --at 2026-12-01T09:00, or --manual to run only on demand",
    });
  }
  if (given.length > 1) {
    throw new UsageError(`give only one schedule, got ${given.map((g) => `--${g}`).join(' and ')}`);
  }
  const tz = validateTimeZone(flags.tz ?? systemTimeZone());
  switch (given[0]) {
    case 'every':
      return { kind: 'every', everyMs: parseDuration(flags.every!, '--every'), anchorAt: new Date(nowMs).toISOString() };
    case 'cron': {
      const expr = flags.cron!.trim();
      const next = parseCron(expr, tz).nextRun(new Date(nowMs));
      if (!next) {
        throw new ValidationError(`--cron: ${JSON.stringify(expr)} never fires`, {
          hint: 'check the day-of-month and month fields (e.g. 31 in February)',
        });
      }
      return { kind: 'cron', expr, tz };
    }
    case 'at': {
      const at = parseInstant(flags.at!, tz, '--at');
      if (at <= nowMs) {
        throw new ValidationError(`--at: ${flags.at} is in the past`, { hint: 'give a time in the future' });
      }
      return { kind: 'at', at: new Date(at).toISOString() };
    }
    default:
      return { kind: 'manual' };
  }
}

function parseCron(expr: string, tz: string): Cron {
  const fields = expr.split(/\s+/).length;
  if (!expr.startsWith('@') && (fields < 5 || fields > 6)) {
    throw new ValidationError(`--cron: ${JSON.stringify(expr)} has ${fields} field(s); expected 5 (or 6 with seconds)`, {
      hint: "minute hour day-of-month month day-of-week, e.g. '0 3 * * *'",
    });
  }
  try {
    return new Cron(expr, { timezone: tz, paused: true });
  } catch (error) {
    throw new ValidationError(`--cron: invalid expression ${JSON.stringify(expr)}: ${(error as Error).message}`, {
      hint: "minute hour day-of-month month day-of-week, e.g. '*/15 * * * *' or '0 3 * * MON-FRI'",
    });
  }
}

/** The first due instant strictly after `afterMs`, or null when the schedule never fires again. */
export function nextDue(schedule: Schedule, afterMs: number): string | null {
  switch (schedule.kind) {
    case 'every': {
      const anchor = Date.parse(schedule.anchorAt);
      const k = afterMs < anchor ? 0 : Math.floor((afterMs - anchor) / schedule.everyMs) + 1;
      return new Date(anchor + k * schedule.everyMs).toISOString();
    }
    case 'cron': {
      const next = parseCron(schedule.expr, schedule.tz).nextRun(new Date(afterMs));
      return next ? next.toISOString() : null;
    }
    case 'at':
      return Date.parse(schedule.at) > afterMs ? schedule.at : null;
    case 'manual':
      return null;
  }
}

/**
 * Parses an ISO-8601 time. With an offset (`Z`, `+02:00`) it is absolute; without one it is a
 * wall-clock time in `tz`.
 */
export function parseInstant(input: string, tz: string, flag: string): number {
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?)?(Z|[+-]\d{2}:?\d{2})?$/i.exec(
    input.trim(),
  );
  if (!m) {
    throw new ValidationError(`${flag}: invalid time ${JSON.stringify(input)}`, {
      hint: 'use ISO-8601, e.g. 2026-12-01T09:00 (in the loop time zone) or 2026-12-01T08:00Z',
    });
  }
  const [, y, mo, d, h = '00', mi = '00', s = '00', ms = '0', offset] = m;
  const fields = [Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s), Number(ms.padEnd(3, '0'))] as const;
  const utc = Date.UTC(...fields);
  const check = new Date(utc);
  if (check.getUTCMonth() !== fields[1] || check.getUTCDate() !== fields[2] || fields[3] > 23 || fields[4] > 59 || fields[5] > 59) {
    throw new ValidationError(`${flag}: ${JSON.stringify(input)} is not a valid date and time`);
  }
  if (offset) {
    if (offset.toUpperCase() === 'Z') return utc;
    const sign = offset.startsWith('-') ? -1 : 1;
    const digits = offset.slice(1).replace(':', '');
    return utc - sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2))) * 60_000;
  }
  return zonedToUtc(utc, tz);
}

/** Converts a wall-clock time (given as if it were UTC) in `tz` to a real UTC instant. */
export function zonedToUtc(wallAsUtc: number, tz: string): number {
  let guess = wallAsUtc - offsetOf(wallAsUtc, tz);
  const second = wallAsUtc - offsetOf(guess, tz);
  if (second !== guess) guess = second;
  return guess;
}

/** The zone's UTC offset in ms at instant `utcMs`. */
export function offsetOf(utcMs: number, tz: string): number {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone: tz,
    hourCycle: 'h23',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  }).formatToParts(new Date(utcMs));
  const get = (type: string) => Number(parts.find((p) => p.type === type)?.value);
  const asUtc = Date.UTC(get('year'), get('month') - 1, get('day'), get('hour'), get('minute'), get('second'));
  return asUtc - (utcMs - (utcMs % 1000));
}
