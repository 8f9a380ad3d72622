import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Schedule } from '../../src/events/catalog.js';
import { UsageError, ValidationError } from '../../src/events/errors.js';
import { describeSchedule } from '../../src/scheduling/describe.js';
import { jitterFor, nextFireAt, nextNominal, upcomingSlots } from '../../src/scheduling/planner.js';
import { buildSchedule, DYNAMIC_EVERY_MS, parseInstant, systemTimeZone, validateTimeZone, type ScheduleFlags } from '../../src/scheduling/schedule.js';
import { offsetOf } from '../../src/scheduling/zone.js';
import { timing } from '../helpers/events.js';

const NOW = Date.parse('2026-06-15T10:00:00.000Z');
const HOUR = 3_600_000;
const iso = (ms: number) => new Date(ms).toISOString();

/** What `nextDue` used to be: the next fire time of a bare schedule (no bounds, no jitter), as ISO. */
function nextDue(schedule: Schedule, afterMs: number): string | null {
  const fire = nextFireAt({ id: 'loop_1', schedule, timing: timing() }, afterMs);
  const nominal = nextNominal(schedule, afterMs);
  expect(fire).toBe(nominal === null ? null : iso(nominal));
  return fire;
}

/** The timing of a loop with no timing flags. */
const noTiming = (tz: string) => timing({ tz });

function errorOf(fn: () => unknown): Error & { code?: string; hint?: string } {
  try {
    fn();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected an error');
}

describe('buildSchedule', () => {
  it('--every becomes an interval anchored at now', () => {
    expect(buildSchedule({ every: '15m', tz: 'UTC' }, NOW)).toEqual({
      schedule: { kind: 'every', everyMs: 900_000, anchorAt: '2026-06-15T10:00:00.000Z', anchor: 'fixed-rate' },
      timing: noTiming('UTC'),
    });
  });

  it('--cron keeps the expression (trimmed), the time zone and the cron rules it is created under', () => {
    expect(buildSchedule({ cron: '  0 3 * * *  ', tz: 'Europe/Berlin' }, NOW)).toEqual({
      schedule: { kind: 'cron', expr: '0 3 * * *', tz: 'Europe/Berlin', rules: 2 },
      timing: noTiming('Europe/Berlin'),
    });
    expect(buildSchedule({ cron: '*/15 * * * * *', tz: 'UTC' }, NOW).schedule).toMatchObject({ kind: 'cron' });
    expect(buildSchedule({ cron: '* * * * * *', tz: 'UTC' }, NOW).schedule).toMatchObject({ kind: 'cron' });
    expect(buildSchedule({ cron: '0 3 * * MON-FRI', tz: 'UTC' }, NOW).schedule).toMatchObject({ kind: 'cron' });
    expect(buildSchedule({ cron: '@daily', tz: 'UTC' }, NOW).schedule).toMatchObject({ kind: 'cron', expr: '@daily' });
  });

  it.each([
    ['* * *', /has 3 field\(s\); expected 5/],
    ['* * * * * * *', /has 7 field\(s\)/],
    ['61 * * * *', /--cron: invalid expression "61 \* \* \* \*".*minute/],
    ['a b c d e', /--cron: invalid expression/],
    ['0 25 * * *', /--cron: invalid expression/],
    ['0 3 ? * MON', /--cron: "\?" is not supported/],
    ['0 0 31 2 *', /^--cron: "0 0 31 2 \*" never fires$/],
  ])('--cron %j is a ValidationError (%s)', (expr, message) => {
    const error = errorOf(() => buildSchedule({ cron: expr, tz: 'UTC' }, NOW));
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.message).toMatch(message);
    expect(error.hint).toBeTruthy();
  });

  it('--at with a zone-less time is wall time in --tz', () => {
    expect(buildSchedule({ at: '2026-07-01T09:00', tz: 'Europe/Berlin' }, NOW)).toEqual({
      schedule: { kind: 'at', at: '2026-07-01T07:00:00.000Z' },
      timing: noTiming('Europe/Berlin'),
    });
  });

  it('--at in the past (or now) is rejected', () => {
    const past = errorOf(() => buildSchedule({ at: '2026-06-15T09:59Z', tz: 'UTC' }, NOW));
    expect(past).toBeInstanceOf(ValidationError);
    expect(past.message).toMatch(/--at: .* is in the past/);
    expect(() => buildSchedule({ at: '2026-06-15T10:00:00Z', tz: 'UTC' }, NOW)).toThrow(/in the past/);
    expect(buildSchedule({ at: '2026-06-15T10:00:01Z', tz: 'UTC' }, NOW).schedule).toEqual({ kind: 'at', at: '2026-06-15T10:00:01.000Z' });
  });

  it('--manual', () => {
    expect(buildSchedule({ manual: true, tz: 'UTC' }, NOW)).toEqual({ schedule: { kind: 'manual' }, timing: noTiming('UTC') });
  });

  it('needs exactly one schedule flag', () => {
    const none = errorOf(() => buildSchedule({}, NOW));
    expect(none).toBeInstanceOf(UsageError);
    expect(none.message).toMatch(/a schedule is required/);
    expect(errorOf(() => buildSchedule({ manual: false }, NOW))).toBeInstanceOf(UsageError);
    const two = errorOf(() => buildSchedule({ every: '1m', cron: '* * * * *' }, NOW));
    expect(two).toBeInstanceOf(UsageError);
    expect(two.message).toMatch(/--every and --cron/);
  });

  it('an unknown time zone is a ValidationError naming --tz', () => {
    const error = errorOf(() => buildSchedule({ every: '1m', tz: 'Mars/Olympus' }, NOW));
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.message).toMatch(/--tz: unknown time zone "Mars\/Olympus"/);
    expect(validateTimeZone('America/New_York')).toBe('America/New_York');
  });

  it('without --tz the system zone is recorded', () => {
    expect(buildSchedule({ every: '1m' }, NOW).timing.tz).toBe(systemTimeZone());
  });

  it('a bad --every names the flag', () => {
    expect(() => buildSchedule({ every: '10 s', tz: 'UTC' }, NOW)).toThrow(/^--every: invalid duration "10 s"/);
  });

  it('a bare --every is milliseconds, as @hasna/loops read it (--every 5000 = 5s)', () => {
    expect(buildSchedule({ every: '5000', tz: 'UTC' }, NOW).schedule).toMatchObject({ kind: 'every', everyMs: 5000, anchor: 'fixed-rate' });
  });

  it('--dynamic: one minute after each finish, the first a minute from now (the predecessor\'s dynamic schedule)', () => {
    const { schedule, timing } = buildSchedule({ dynamic: true, tz: 'UTC' }, NOW);
    expect(schedule).toEqual({ kind: 'every', everyMs: DYNAMIC_EVERY_MS, anchorAt: iso(NOW), anchor: 'fixed-delay' });
    expect(DYNAMIC_EVERY_MS).toBe(60_000);
    expect(timing.jitterMs).toBeNull();
    expect(buildSchedule({ dynamic: true, expiresAt: '2026-07-01T09:00Z', tz: 'UTC' }, NOW).timing.expiresAt).toBe('2026-07-01T09:00:00.000Z');
  });

  it.each<[ScheduleFlags, RegExp]>([
    [{ dynamic: true, every: '1m' }, /^give only one schedule, got --every and --dynamic/],
    [{ dynamic: true, cron: '* * * * *' }, /^give only one schedule, got --cron and --dynamic/],
    [{ dynamic: true, anchor: 'fixed-rate' }, /^--anchor is only used with --every \(--dynamic is already fixed-delay/],
    [{ dynamic: true, jitter: '5s' }, /^--jitter does not apply to --dynamic/],
  ])('--dynamic refuses %j', (flags, message) => {
    const error = errorOf(() => buildSchedule({ ...flags, tz: 'UTC' }, NOW));
    expect(error).toBeInstanceOf(UsageError);
    expect(error.message).toMatch(message);
  });
});

describe('buildSchedule: timing flags', () => {
  it('--anchor: fixed-rate by default, fixed-delay when asked', () => {
    expect(buildSchedule({ every: '5m', tz: 'UTC' }, NOW).schedule).toMatchObject({ anchor: 'fixed-rate' });
    expect(buildSchedule({ every: '5m', anchor: 'fixed-rate', tz: 'UTC' }, NOW).schedule).toMatchObject({ anchor: 'fixed-rate' });
    expect(buildSchedule({ every: '5m', anchor: 'fixed-delay', tz: 'UTC' }, NOW).schedule).toEqual({
      kind: 'every',
      everyMs: 300_000,
      anchorAt: iso(NOW),
      anchor: 'fixed-delay',
    });
  });

  it.each([
    [{ cron: '0 3 * * *' }],
    [{ at: '2026-07-01T09:00Z' }],
    [{ manual: true }],
  ])('--anchor without --every is a UsageError (%j)', (flags) => {
    const error = errorOf(() => buildSchedule({ ...flags, anchor: 'fixed-rate', tz: 'UTC' }, NOW));
    expect(error).toBeInstanceOf(UsageError);
    expect(error.message).toMatch(/^--anchor is only used with --every/);
  });

  it('an unknown --anchor is a ValidationError', () => {
    const error = errorOf(() => buildSchedule({ every: '5m', anchor: 'sliding', tz: 'UTC' }, NOW));
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.message).toMatch(/^--anchor: unknown value "sliding"/);
    expect(error.hint).toMatch(/fixed-rate or fixed-delay/);
  });

  it('--jitter: recorded in ms; with --every it must be shorter than the interval', () => {
    expect(buildSchedule({ every: '1m', jitter: '30s', tz: 'UTC' }, NOW).timing.jitterMs).toBe(30_000);
    expect(buildSchedule({ every: '1m', jitter: '59999ms', tz: 'UTC' }, NOW).timing.jitterMs).toBe(59_999);
    expect(buildSchedule({ cron: '0 3 * * *', jitter: '2h', tz: 'UTC' }, NOW).timing.jitterMs).toBe(2 * HOUR);
    expect(buildSchedule({ at: '2026-07-01T09:00Z', jitter: '5m', tz: 'UTC' }, NOW).timing.jitterMs).toBe(300_000);
    for (const jitter of ['1m', '60s', '2m', '1h']) {
      const error = errorOf(() => buildSchedule({ every: '1m', jitter, tz: 'UTC' }, NOW));
      expect(error).toBeInstanceOf(ValidationError);
      expect(error.message).toBe(`--jitter (${jitter}) must be shorter than --every (1m)`);
      expect(error.hint).toBeTruthy();
    }
    expect(buildSchedule({ every: '1m', jitter: '10', tz: 'UTC' }, NOW).timing.jitterMs).toBe(10);
    expect(() => buildSchedule({ every: '1m', jitter: '10 s', tz: 'UTC' }, NOW)).toThrow(/^--jitter: invalid duration "10 s"/);
    expect(() => buildSchedule({ every: '1m', jitter: '0s', tz: 'UTC' }, NOW)).toThrow(/^--jitter: /);
  });

  it('--starts-at / --expires-at: local times in --tz, recorded as instants', () => {
    const { timing: t } = buildSchedule(
      { cron: '0 3 * * *', startsAt: '2026-07-01T09:00', expiresAt: '2026-12-24T00:00', tz: 'Europe/Berlin' },
      NOW,
    );
    expect(t).toEqual({
      tz: 'Europe/Berlin',
      jitterMs: null,
      startsAt: '2026-07-01T07:00:00.000Z',
      expiresAt: '2026-12-23T23:00:00.000Z',
      maxRuns: null,
    });
    expect(() => buildSchedule({ every: '1m', startsAt: 'soon', tz: 'UTC' }, NOW)).toThrow(/^--starts-at: invalid time "soon"/);
    expect(() => buildSchedule({ every: '1m', expiresAt: '2026-02-30T00:00', tz: 'UTC' }, NOW)).toThrow(/^--expires-at: /);
  });

  it('--expires-at in the past (or now) is a ValidationError', () => {
    for (const expiresAt of ['2026-06-15T09:00Z', '2026-06-15T10:00:00Z']) {
      const error = errorOf(() => buildSchedule({ every: '1m', expiresAt, tz: 'UTC' }, NOW));
      expect(error).toBeInstanceOf(ValidationError);
      expect(error.message).toBe(`--expires-at: ${expiresAt} is in the past`);
    }
  });

  it('--expires-at at or before --starts-at is a ValidationError', () => {
    for (const expiresAt of ['2026-07-01T00:00Z', '2026-06-20T00:00Z']) {
      const error = errorOf(() => buildSchedule({ every: '1m', startsAt: '2026-07-01T00:00Z', expiresAt, tz: 'UTC' }, NOW));
      expect(error).toBeInstanceOf(ValidationError);
      expect(error.message).toBe(`--expires-at (${expiresAt}) must be after --starts-at (2026-07-01T00:00Z)`);
    }
  });

  it('--max-runs: a positive whole number', () => {
    expect(buildSchedule({ every: '1m', maxRuns: '3', tz: 'UTC' }, NOW).timing.maxRuns).toBe(3);
    expect(buildSchedule({ every: '1m', maxRuns: 3, tz: 'UTC' }, NOW).timing.maxRuns).toBe(3);
    expect(buildSchedule({ every: '1m', maxRuns: ' 12 ', tz: 'UTC' }, NOW).timing.maxRuns).toBe(12);
    for (const maxRuns of ['0', '-1', '1.5', 'abc', '3x', '1e2', '', 0, -4, 2.5, Number.NaN]) {
      const error = errorOf(() => buildSchedule({ every: '1m', maxRuns, tz: 'UTC' }, NOW));
      expect(error, JSON.stringify(maxRuns)).toBeInstanceOf(ValidationError);
      expect(error.message).toMatch(/^--max-runs must be a positive whole number, got /);
    }
  });

  it.each([
    ['--jitter', { jitter: '5s' }],
    ['--starts-at', { startsAt: '2026-07-01T00:00Z' }],
    ['--expires-at', { expiresAt: '2026-07-01T00:00Z' }],
    ['--max-runs', { maxRuns: '3' }],
  ])('%s with --manual is a UsageError', (flag, flags) => {
    const error = errorOf(() => buildSchedule({ manual: true, ...flags, tz: 'UTC' }, NOW));
    expect(error).toBeInstanceOf(UsageError);
    expect(error.message).toBe(`${flag} has no effect on a --manual loop`);
    expect(error.hint).toBeTruthy();
  });

  it('a schedule that never fires within its bounds is a ValidationError', () => {
    const cases: [Parameters<typeof buildSchedule>[0], RegExp][] = [
      [{ every: '1h', expiresAt: '2026-06-15T10:30Z' }, /^--every never fires before --expires-at 2026-06-15T10:30Z$/],
      [{ cron: '0 3 * * *', expiresAt: '2026-06-16T02:59Z' }, /^--cron: "0 3 \* \* \*" never fires before --expires-at/],
      [{ cron: '0 3 * * *', startsAt: '2026-06-20T03:00:01Z', expiresAt: '2026-06-21T02:00Z' }, /^--cron: .* never fires before --expires-at/],
      [{ at: '2026-07-01T09:00Z', expiresAt: '2026-07-01T08:59Z' }, /^--at never fires before --expires-at/],
      [{ at: '2026-07-01T09:00Z', startsAt: '2026-07-01T09:00:01Z' }, /^--at never fires$/],
    ];
    for (const [flags, message] of cases) {
      const error = errorOf(() => buildSchedule({ ...flags, tz: 'UTC' }, NOW));
      expect(error, JSON.stringify(flags)).toBeInstanceOf(ValidationError);
      expect(error.message).toMatch(message);
      expect(error.hint).toBeTruthy();
    }
    // Just inside the bounds is fine: a slot exactly at expires-at counts.
    expect(() => buildSchedule({ every: '1h', expiresAt: '2026-06-15T11:00Z', tz: 'UTC' }, NOW)).not.toThrow();
    expect(() => buildSchedule({ at: '2026-07-01T09:00Z', startsAt: '2026-07-01T09:00Z', tz: 'UTC' }, NOW)).not.toThrow();
  });

  it('--every with --starts-at is anchored at starts-at: the first slot is starts-at itself', () => {
    const loop = { id: 'loop_1', ...buildSchedule({ every: '15m', startsAt: '2026-07-01T09:00', tz: 'Europe/Berlin' }, NOW, 'loop_1') };
    expect(loop.schedule).toEqual({ kind: 'every', everyMs: 900_000, anchorAt: '2026-07-01T07:00:00.000Z', anchor: 'fixed-rate' });
    expect(nextFireAt(loop, NOW)).toBe('2026-07-01T07:00:00.000Z');
    expect(upcomingSlots(loop, NOW, 3).map((p) => p.slot)).toEqual([
      '2026-07-01T07:00:00.000Z',
      '2026-07-01T07:15:00.000Z',
      '2026-07-01T07:30:00.000Z',
    ]);
    // A starts-at in the past still sets the grid; the next slot is on it.
    const past = buildSchedule({ every: '1h', startsAt: '2026-06-15T08:20Z', tz: 'UTC' }, NOW);
    expect(past.schedule).toMatchObject({ anchorAt: '2026-06-15T08:20:00.000Z' });
    expect(nextFireAt({ id: 'loop_1', ...past }, NOW)).toBe('2026-06-15T10:20:00.000Z');
  });

  it('all together: the planned fire times respect every bound and the jitter', () => {
    const built = buildSchedule(
      { every: '10m', jitter: '1m', startsAt: '2026-06-16T00:00Z', expiresAt: '2026-06-16T01:00Z', maxRuns: '4', tz: 'UTC' },
      NOW,
      'loop_7',
    );
    const planned = upcomingSlots({ id: 'loop_7', ...built }, NOW, 100);
    expect(planned.map((p) => p.slot)).toEqual(['00:00', '00:10', '00:20', '00:30'].map((hm) => `2026-06-16T${hm}:00.000Z`));
    for (const p of planned) expect(Date.parse(p.fireAt) - Date.parse(p.slot)).toBe(jitterFor('loop_7', p.slot, 60_000));
  });
});

describe('next due time (planner.nextNominal / nextFireAt)', () => {
  it('every: the anchor while before it, then strictly after the reference on the anchor grid', () => {
    const s = { kind: 'every' as const, everyMs: 60_000, anchorAt: '2026-06-15T10:00:00.000Z', anchor: 'fixed-rate' as const };
    expect(nextDue(s, NOW - 5000)).toBe('2026-06-15T10:00:00.000Z');
    expect(nextDue(s, NOW)).toBe('2026-06-15T10:01:00.000Z');
    expect(nextDue(s, NOW + 59_999)).toBe('2026-06-15T10:01:00.000Z');
    expect(nextDue(s, NOW + 60_000)).toBe('2026-06-15T10:02:00.000Z');
  });

  it('every: property — result is on the grid, strictly after the reference, at most one interval later', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 86_400_000 }), fc.integer({ min: -10 * 86_400_000, max: 10 * 86_400_000 }), (everyMs, offset) => {
        const s = { kind: 'every' as const, everyMs, anchorAt: new Date(NOW).toISOString(), anchor: 'fixed-rate' as const };
        const after = NOW + offset;
        const due = Date.parse(nextDue(s, after)!);
        expect(due).toBeGreaterThan(after);
        if (after < NOW) expect(due).toBe(NOW);
        expect((due - NOW) % everyMs).toBe(0);
        if (after >= NOW) expect(due - after).toBeLessThanOrEqual(everyMs);
      }),
      { numRuns: 300 },
    );
  });

  it('cron: computed in the loop time zone, strictly after the reference', () => {
    const s = { kind: 'cron' as const, expr: '0 3 * * *', tz: 'Europe/Berlin' };
    // 03:00 Berlin in summer (CEST, +2) is 01:00Z.
    expect(nextDue(s, Date.parse('2026-07-01T00:59:59.999Z'))).toBe('2026-07-01T01:00:00.000Z');
    expect(nextDue(s, Date.parse('2026-07-01T01:00:00.000Z'))).toBe('2026-07-02T01:00:00.000Z');
    // In winter (CET, +1) it is 02:00Z.
    expect(nextDue(s, Date.parse('2026-01-10T12:00:00Z'))).toBe('2026-01-11T02:00:00.000Z');
    expect(nextDue({ kind: 'cron', expr: '30 9 * * *', tz: 'America/New_York' }, Date.parse('2026-01-15T00:00:00Z'))).toBe(
      '2026-01-15T14:30:00.000Z',
    );
  });

  it('cron across the spring-forward gap still fires once that day', () => {
    // Europe/Berlin springs forward on 2026-03-29 at 02:00 → 03:00.
    const s = { kind: 'cron' as const, expr: '0 4 * * *', tz: 'Europe/Berlin' };
    expect(nextDue(s, Date.parse('2026-03-28T12:00:00Z'))).toBe('2026-03-29T02:00:00.000Z');
    expect(nextDue(s, Date.parse('2026-03-29T02:00:00Z'))).toBe('2026-03-30T02:00:00.000Z');
  });

  it('cron that can never fire has no next due time', () => {
    expect(nextDue({ kind: 'cron', expr: '0 0 31 2 *', tz: 'UTC' }, NOW)).toBeNull();
  });

  it('at: due while in the future, then never again', () => {
    const s = { kind: 'at' as const, at: '2026-06-15T11:00:00.000Z' };
    expect(nextDue(s, NOW)).toBe('2026-06-15T11:00:00.000Z');
    expect(nextDue(s, Date.parse(s.at))).toBeNull();
  });

  it('manual: never due', () => {
    expect(nextDue({ kind: 'manual' }, NOW)).toBeNull();
  });
});

describe('parseInstant', () => {
  it('converts wall time in a zone to UTC', () => {
    expect(new Date(parseInstant('2026-07-01T09:00', 'Europe/Berlin', '--at')).toISOString()).toBe('2026-07-01T07:00:00.000Z');
    expect(new Date(parseInstant('2026-01-01T09:00', 'Europe/Berlin', '--at')).toISOString()).toBe('2026-01-01T08:00:00.000Z');
    expect(new Date(parseInstant('2026-01-15T09:00', 'America/New_York', '--at')).toISOString()).toBe('2026-01-15T14:00:00.000Z');
    expect(new Date(parseInstant('2026-07-15T09:00', 'America/New_York', '--at')).toISOString()).toBe('2026-07-15T13:00:00.000Z');
    expect(new Date(parseInstant('2026-07-01T09:00', 'Asia/Kolkata', '--at')).toISOString()).toBe('2026-07-01T03:30:00.000Z');
    expect(new Date(parseInstant('2026-07-01 09:00:30.5', 'UTC', '--at')).toISOString()).toBe('2026-07-01T09:00:30.500Z');
    expect(new Date(parseInstant('2026-07-01', 'Europe/Berlin', '--at')).toISOString()).toBe('2026-06-30T22:00:00.000Z');
  });

  it('a local time skipped by DST is the first instant after the gap; a repeated one its first occurrence', () => {
    expect(iso(parseInstant('2026-03-29T02:30', 'Europe/Berlin', '--at'))).toBe('2026-03-29T01:00:00.000Z');
    expect(iso(parseInstant('2026-03-08T02:30', 'America/New_York', '--at'))).toBe('2026-03-08T07:00:00.000Z');
    expect(iso(parseInstant('2026-10-25T02:30', 'Europe/Berlin', '--at'))).toBe('2026-10-25T00:30:00.000Z');
    expect(iso(parseInstant('2026-11-01T01:30', 'America/New_York', '--at'))).toBe('2026-11-01T05:30:00.000Z');
    // An explicit offset picks either reading.
    expect(iso(parseInstant('2026-11-01T01:30-05:00', 'America/New_York', '--at'))).toBe('2026-11-01T06:30:00.000Z');
  });

  it('an explicit offset wins over the zone', () => {
    expect(new Date(parseInstant('2026-07-01T09:00Z', 'Europe/Berlin', '--at')).toISOString()).toBe('2026-07-01T09:00:00.000Z');
    expect(new Date(parseInstant('2026-07-01T09:00+02:00', 'UTC', '--at')).toISOString()).toBe('2026-07-01T07:00:00.000Z');
    expect(new Date(parseInstant('2026-07-01T09:00-0530', 'UTC', '--at')).toISOString()).toBe('2026-07-01T14:30:00.000Z');
  });

  it('wall time → UTC → wall time round-trips outside DST transitions (property)', () => {
    const zones = ['Europe/Berlin', 'America/New_York', 'Australia/Sydney', 'Asia/Tokyo', 'America/Sao_Paulo', 'UTC'];
    fc.assert(
      fc.property(
        fc.constantFrom(...zones),
        fc.integer({ min: Date.parse('2025-01-01T00:00:00Z') / 60_000, max: Date.parse('2030-01-01T00:00:00Z') / 60_000 }),
        (tz, minutes) => {
          const instant = minutes * 60_000;
          // Format the instant as wall time in tz, parse it back: the same instant, unless ambiguous (fall back).
          const wall = instant + offsetOf(instant, tz);
          const text = new Date(wall).toISOString().slice(0, 16);
          const back = parseInstant(text, tz, '--at');
          const ambiguous = offsetOf(instant - 3_600_000, tz) !== offsetOf(instant + 3_600_000, tz);
          if (!ambiguous) expect(back).toBe(instant);
          else expect(Math.abs(back - instant)).toBeLessThanOrEqual(3_600_000);
        },
      ),
      { numRuns: 300 },
    );
  });

  it.each(['tomorrow', '2026-13-01T09:00', '2026-02-30T09:00', '2026-07-01T24:00', '2026-07-01T09:60', '2026-07-01T09', '01/07/2026'])(
    'rejects %j naming the flag',
    (input) => {
      const error = errorOf(() => parseInstant(input, 'UTC', '--at'));
      expect(error).toBeInstanceOf(ValidationError);
      expect(error.message).toMatch(/^--at: /);
    },
  );
});

describe('describeSchedule', () => {
  it('says what a schedule does in a few words', () => {
    expect(describeSchedule({ kind: 'every', everyMs: 900_000, anchorAt: '2026-01-01T00:00:00Z', anchor: 'fixed-rate' })).toBe('every 15m');
    expect(describeSchedule({ kind: 'every', everyMs: 1500, anchorAt: '2026-01-01T00:00:00Z', anchor: 'fixed-rate' })).toBe('every 1500ms');
    expect(describeSchedule({ kind: 'cron', expr: '0 3 * * *', tz: 'Europe/Berlin' })).toBe('cron 0 3 * * * (Europe/Berlin)');
    expect(describeSchedule({ kind: 'at', at: '2026-07-01T07:00:00.000Z' })).toBe('at 2026-07-01T07:00:00.000Z');
    expect(describeSchedule({ kind: 'manual' })).toBe('manual');
  });
});

describe('validateTimeZone', () => {
  it('records the canonical spelling of a zone', () => {
    expect(validateTimeZone('europe/berlin')).toBe('Europe/Berlin');
    expect(validateTimeZone('europe/berlin')).toBe('Europe/Berlin'); // remembered: the same again
    expect(() => validateTimeZone('Mars/Olympus')).toThrow(/unknown time zone/);
    expect(() => validateTimeZone('Mars/Olympus')).toThrow(/unknown time zone/); // never remembered
    const { schedule, timing: t } = buildSchedule({ cron: '0 3 * * *', tz: 'america/new_york' }, Date.parse('2026-06-15T10:00:00Z'));
    expect(schedule).toMatchObject({ kind: 'cron', tz: 'America/New_York' });
    expect(t.tz).toBe('America/New_York');
  });
});
