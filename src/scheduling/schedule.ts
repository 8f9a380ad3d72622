/**
 * Building and validating a loop's schedule and timing from user input. Everything is checked
 * before anything is recorded; croner (through cron.ts) is only a calculator.
 */
import type { Schedule, Timing } from '../events/catalog.js';
import { UsageError, ValidationError } from '../events/errors.js';
import { CRON_RULES, parseCronPattern } from './cron.js';
import { parseFlagDuration } from '../events/durations.js';
import { isReboot, upcomingSlots } from './planner.js';
import { canonicalTimeZone, wallToUtc } from './zone.js';

export interface ScheduleFlags {
  every?: string | undefined;
  cron?: string | undefined;
  at?: string | undefined;
  manual?: boolean | undefined;
  /**
   * `@hasna/loops`' --dynamic: a run one minute after the previous one finished (the first one
   * minute from now) — stored as `every 1m`, anchor fixed-delay ({@link DYNAMIC_EVERY_MS}).
   */
  dynamic?: boolean | undefined;
  tz?: string | undefined;
  /** `fixed-rate` (default) or `fixed-delay`; only with `every`. */
  anchor?: string | undefined;
  jitter?: string | undefined;
  startsAt?: string | undefined;
  expiresAt?: string | undefined;
  maxRuns?: string | number | undefined;
}

export function systemTimeZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
}

/** Checks an IANA zone and returns its canonical spelling (`europe/berlin` → `Europe/Berlin`). */
export function validateTimeZone(tz: string): string {
  const canonical = canonicalTimeZone(tz);
  if (canonical === null) {
    throw new ValidationError(`--tz: unknown time zone ${JSON.stringify(tz)}`, {
      hint: 'use an IANA zone name such as Europe/Berlin, America/New_York or UTC',
    });
  }
  return canonical;
}

/** `--dynamic`'s cadence: the predecessor's default `minIntervalMs`, measured from each run's finish. */
export const DYNAMIC_EVERY_MS = 60_000;

/** Exactly one of --every, --cron, --at, --manual, --dynamic, with the timing flags, checked together. */
export function buildSchedule(flags: ScheduleFlags, nowMs: number, loopId = ''): { schedule: Schedule; timing: Timing } {
  const given = (['every', 'cron', 'at', 'manual', 'dynamic'] as const).filter((k) =>
    k === 'manual' || k === 'dynamic' ? flags[k] === true : flags[k] !== undefined,
  );
  if (given.length === 0) {
    throw new UsageError('a schedule is required: give one of --every, --cron, --at, --manual or --dynamic', {
      hint: "e.g. --every 15m, --cron '0 3 * * *', --at 2026-12-01T09:00, or --manual to run only on demand",
    });
  }
  if (given.length > 1) {
    throw new UsageError(`give only one schedule, got ${given.map((g) => `--${g}`).join(' and ')}`);
  }
  const kind = given[0]!;
  const tz = validateTimeZone(flags.tz ?? systemTimeZone());
  if (flags.anchor !== undefined && kind !== 'every') {
    throw new UsageError(
      `--anchor is only used with --every${kind === 'dynamic' ? ' (--dynamic is already fixed-delay: a run one minute after the previous one finished)' : ''}`,
      { hint: kind === 'dynamic' ? 'drop --anchor, or use --every <duration> --anchor fixed-delay for another cadence' : 'fixed-rate or fixed-delay applies to an interval' },
    );
  }
  if (kind === 'dynamic' && flags.jitter !== undefined) {
    throw new UsageError('--jitter does not apply to --dynamic', { hint: 'a --dynamic loop runs one minute after the previous run finished; drop --jitter' });
  }
  if (kind === 'manual') {
    for (const [flag, value] of [
      ['--jitter', flags.jitter],
      ['--starts-at', flags.startsAt],
      ['--expires-at', flags.expiresAt],
      ['--max-runs', flags.maxRuns],
    ] as const) {
      if (value !== undefined) throw new UsageError(`${flag} has no effect on a --manual loop`, { hint: 'drop it, or give a schedule' });
    }
  }
  const startsAt = flags.startsAt === undefined ? null : parseInstant(flags.startsAt, tz, '--starts-at');
  const expiresAt = flags.expiresAt === undefined ? null : parseInstant(flags.expiresAt, tz, '--expires-at');
  if (expiresAt !== null && expiresAt <= nowMs) {
    throw new ValidationError(`--expires-at: ${flags.expiresAt} is in the past`, { hint: 'give a time in the future' });
  }
  if (startsAt !== null && expiresAt !== null && expiresAt <= startsAt) {
    throw new ValidationError(`--expires-at (${flags.expiresAt}) must be after --starts-at (${flags.startsAt})`);
  }
  const maxRuns = flags.maxRuns === undefined ? null : positiveInt(flags.maxRuns, '--max-runs');
  const jitterMs = flags.jitter === undefined ? null : parseFlagDuration(flags.jitter, '--jitter');

  let schedule: Schedule;
  switch (kind) {
    case 'every': {
      const everyMs = parseFlagDuration(flags.every!, '--every');
      const anchor = flags.anchor ?? 'fixed-rate';
      if (anchor !== 'fixed-rate' && anchor !== 'fixed-delay') {
        throw new ValidationError(`--anchor: unknown value ${JSON.stringify(anchor)}`, { hint: 'use fixed-rate or fixed-delay' });
      }
      if (jitterMs !== null && anchor === 'fixed-delay') {
        throw new ValidationError('--jitter does not apply to --anchor fixed-delay', {
          hint: 'a fixed-delay loop waits --every after each run finishes; drop --jitter or use fixed-rate',
        });
      }
      if (jitterMs !== null && jitterMs >= everyMs) {
        throw new ValidationError(`--jitter (${flags.jitter}) must be shorter than --every (${flags.every})`, {
          hint: 'a jitter as long as the interval would let slots overtake each other',
        });
      }
      // Slots count from --starts-at when given, else from now.
      schedule = { kind: 'every', everyMs, anchorAt: new Date(startsAt ?? nowMs).toISOString(), anchor };
      break;
    }
    case 'dynamic':
      schedule = { kind: 'every', everyMs: DYNAMIC_EVERY_MS, anchorAt: new Date(startsAt ?? nowMs).toISOString(), anchor: 'fixed-delay' };
      break;
    case 'cron': {
      const expr = flags.cron!.trim();
      parseCronPattern(expr, '--cron', CRON_RULES);
      // New loops record the rules they are created under, so a later change of rules never alters them.
      schedule = { kind: 'cron', expr, tz, rules: CRON_RULES };
      break;
    }
    case 'at': {
      const at = parseInstant(flags.at!, tz, '--at');
      if (at <= nowMs) throw new ValidationError(`--at: ${flags.at} is in the past`, { hint: 'give a time in the future' });
      schedule = { kind: 'at', at: new Date(at).toISOString() };
      break;
    }
    default:
      schedule = { kind: 'manual' };
  }
  const timing: Timing = {
    tz,
    jitterMs,
    startsAt: startsAt === null ? null : new Date(startsAt).toISOString(),
    expiresAt: expiresAt === null ? null : new Date(expiresAt).toISOString(),
    maxRuns,
  };
  if (schedule.kind === 'cron' && jitterMs !== null) {
    // Like --every: a jitter as long as the gap between two slots would let them overtake each other.
    const slots = upcomingSlots({ id: loopId, schedule, timing: { ...timing, jitterMs: null } }, nowMs, 200);
    let gap = Infinity;
    for (let i = 1; i < slots.length; i++) gap = Math.min(gap, Date.parse(slots[i]!.slot) - Date.parse(slots[i - 1]!.slot));
    if (jitterMs >= gap) {
      throw new ValidationError(`--jitter (${flags.jitter}) must be shorter than the shortest gap between two slots of --cron (${gap / 1000}s)`, {
        hint: 'a jitter that long would let slots overtake each other',
      });
    }
  }
  if (schedule.kind !== 'manual' && !isReboot(schedule) && upcomingSlots({ id: loopId, schedule, timing }, nowMs, 1).length === 0) {
    const what = schedule.kind === 'cron' ? `--cron: ${JSON.stringify(schedule.expr)}` : `--${schedule.kind}`;
    throw new ValidationError(`${what} never fires${expiresAt !== null ? ` before --expires-at ${flags.expiresAt}` : ''}`, {
      hint:
        schedule.kind === 'cron'
          ? 'check the day-of-month and month fields (e.g. 31 in February), and --starts-at / --expires-at'
          : 'check --starts-at and --expires-at',
    });
  }
  return { schedule, timing };
}

function positiveInt(value: string | number, flag: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0 || (typeof value === 'string' && !/^\d+$/.test(value.trim()))) {
    throw new ValidationError(`${flag} must be a positive whole number, got ${JSON.stringify(value)}`);
  }
  return n;
}

/**
 * Parses an ISO-8601 time. With an offset (`Z`, `+02:00`) it is absolute; without one it is a
 * wall-clock time in `tz` (a time skipped by DST means the first valid instant after it).
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
  return wallToUtc(utc, tz);
}
