import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { UsageError, ValidationError } from '../../src/events/errors.js';
import { describeSchedule } from '../../src/runtime/describe.js';
import { buildSchedule, nextDue, offsetOf, parseInstant, validateTimeZone } from '../../src/runtime/schedule.js';

const NOW = Date.parse('2026-06-15T10:00:00.000Z');

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
    expect(buildSchedule({ every: '15m', tz: 'UTC' }, NOW)).toEqual({ kind: 'every', everyMs: 900_000, anchorAt: '2026-06-15T10:00:00.000Z' });
  });

  it('--cron keeps the expression (trimmed) and the time zone', () => {
    expect(buildSchedule({ cron: '  0 3 * * *  ', tz: 'Europe/Berlin' }, NOW)).toEqual({ kind: 'cron', expr: '0 3 * * *', tz: 'Europe/Berlin' });
    expect(buildSchedule({ cron: '*/15 * * * * *', tz: 'UTC' }, NOW)).toMatchObject({ kind: 'cron' });
    expect(buildSchedule({ cron: '0 3 * * MON-FRI', tz: 'UTC' }, NOW)).toMatchObject({ kind: 'cron' });
  });

  it.each([
    ['* * *', /has 3 field\(s\); expected 5/],
    ['* * * * * * *', /has 7 field\(s\)/],
    ['61 * * * *', /--cron: invalid expression "61 \* \* \* \*".*minute/],
    ['a b c d e', /--cron: invalid expression/],
    ['0 25 * * *', /--cron: invalid expression/],
  ])('--cron %j is a ValidationError (%s)', (expr, message) => {
    const error = errorOf(() => buildSchedule({ cron: expr, tz: 'UTC' }, NOW));
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.message).toMatch(message);
    expect(error.hint).toBeTruthy();
  });

  it('--at with a zone-less time is wall time in --tz', () => {
    expect(buildSchedule({ at: '2026-07-01T09:00', tz: 'Europe/Berlin' }, NOW)).toEqual({ kind: 'at', at: '2026-07-01T07:00:00.000Z' });
  });

  it('--at in the past (or now) is rejected', () => {
    const past = errorOf(() => buildSchedule({ at: '2026-06-15T09:59Z', tz: 'UTC' }, NOW));
    expect(past).toBeInstanceOf(ValidationError);
    expect(past.message).toMatch(/--at: .* is in the past/);
    expect(() => buildSchedule({ at: '2026-06-15T10:00:00Z', tz: 'UTC' }, NOW)).toThrow(/in the past/);
    expect(buildSchedule({ at: '2026-06-15T10:00:01Z', tz: 'UTC' }, NOW)).toEqual({ kind: 'at', at: '2026-06-15T10:00:01.000Z' });
  });

  it('--manual', () => {
    expect(buildSchedule({ manual: true, tz: 'UTC' }, NOW)).toEqual({ kind: 'manual' });
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

  it('a bad --every names the flag', () => {
    expect(() => buildSchedule({ every: '10', tz: 'UTC' }, NOW)).toThrow(/^--every: invalid duration "10"/);
  });
});

describe('nextDue', () => {
  it('every: the anchor while before it, then strictly after the reference on the anchor grid', () => {
    const s = { kind: 'every' as const, everyMs: 60_000, anchorAt: '2026-06-15T10:00:00.000Z' };
    expect(nextDue(s, NOW - 5000)).toBe('2026-06-15T10:00:00.000Z');
    expect(nextDue(s, NOW)).toBe('2026-06-15T10:01:00.000Z');
    expect(nextDue(s, NOW + 59_999)).toBe('2026-06-15T10:01:00.000Z');
    expect(nextDue(s, NOW + 60_000)).toBe('2026-06-15T10:02:00.000Z');
  });

  it('every: property — result is on the grid, strictly after the reference, at most one interval later', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 86_400_000 }), fc.integer({ min: -10 * 86_400_000, max: 10 * 86_400_000 }), (everyMs, offset) => {
        const s = { kind: 'every' as const, everyMs, anchorAt: new Date(NOW).toISOString() };
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
    expect(describeSchedule({ kind: 'every', everyMs: 900_000, anchorAt: '2026-01-01T00:00:00Z' })).toBe('every 15m');
    expect(describeSchedule({ kind: 'every', everyMs: 1500, anchorAt: '2026-01-01T00:00:00Z' })).toBe('every 1500ms');
    expect(describeSchedule({ kind: 'cron', expr: '0 3 * * *', tz: 'Europe/Berlin' })).toBe('cron 0 3 * * * (Europe/Berlin)');
    expect(describeSchedule({ kind: 'at', at: '2026-07-01T07:00:00.000Z' })).toBe('at 2026-07-01T07:00:00.000Z');
    expect(describeSchedule({ kind: 'manual' })).toBe('manual');
  });
});
