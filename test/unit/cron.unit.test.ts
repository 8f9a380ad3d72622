/**
 * cron.ts: pattern syntax (through croner) and next-fire times with Vixie wall-clock semantics in
 * IANA zones — a nonexistent local time fires at the first valid instant after it, a repeated one
 * fires once (its first occurrence). Checked on the 2026 DST changes and by properties against an
 * independent minute-by-minute oracle.
 */
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { ValidationError } from '../../src/events/errors.js';
import { nextCronFire, parseCronPattern } from '../../src/scheduling/cron.js';
import { offsetOf, utcToWall } from '../../src/scheduling/zone.js';

const SEC = 1000;
const MIN = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const u = (iso: string) => Date.parse(iso);
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

const ZONES = [
  'Europe/Berlin',
  'America/New_York',
  'America/Sao_Paulo',
  'Australia/Lord_Howe',
  'Asia/Kolkata',
  'Pacific/Chatham',
  'UTC',
  'America/St_Johns',
] as const;

/** All fires in (from, to], by iterating nextCronFire. */
function firesBetween(expr: string, tz: string, from: number, to: number): number[] {
  const out: number[] = [];
  let cursor = from;
  for (;;) {
    const next = nextCronFire(expr, tz, cursor);
    if (next === null || next > to) return out;
    out.push(next);
    cursor = next;
  }
}

/** `HH:MM` (and `:SS` when not zero) of an instant's wall time. */
function hhmm(t: number, tz: string): string {
  const s = new Date(utcToWall(t, tz)).toISOString();
  return s.slice(17, 19) === '00' ? s.slice(11, 16) : s.slice(11, 19);
}

function errorOf(fn: () => unknown): Error & { hint?: string } {
  try {
    fn();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected an error');
}

// ── an independent reference: a small cron matcher and DST transitions ──────────────────────────

const MONTHS = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
const DAYS = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];
const MACROS: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@hourly': '0 * * * *',
};

function fieldSet(spec: string, min: number, max: number, names: string[] = [], nameBase = 0): Set<number> {
  const value = (v: string) => {
    const i = names.indexOf(v.toUpperCase());
    return i >= 0 ? i + nameBase : Number(v);
  };
  const out = new Set<number>();
  for (const item of spec.split(',')) {
    const [range, stepText] = item.split('/');
    const step = stepText === undefined ? 1 : Number(stepText);
    let lo = min;
    let hi = max;
    if (range !== '*') {
      const [a, b] = range!.split('-');
      lo = value(a!);
      hi = b === undefined ? (stepText === undefined ? lo : max) : value(b);
    }
    for (let v = lo; v <= hi; v += step) out.add(v);
  }
  return out;
}

interface Matcher {
  (wall: number): boolean;
  seconds: boolean;
}

/** Vixie semantics: day-of-month OR day-of-week when both are restricted (our patterns avoid `*​/n` there). */
function matcher(expr: string): Matcher {
  const parts = (MACROS[expr.trim().toLowerCase()] ?? expr).trim().split(/\s+/);
  const seconds = parts.length === 6;
  const [sec, minute, hour, dom, month, dow] = seconds ? parts : ['0', ...parts];
  const S = fieldSet(sec!, 0, 59);
  const Mi = fieldSet(minute!, 0, 59);
  const H = fieldSet(hour!, 0, 23);
  const D = fieldSet(dom!, 1, 31);
  const Mo = fieldSet(month!, 1, 12, MONTHS, 1);
  const W = fieldSet(dow!, 0, 7, DAYS);
  if (W.has(7)) W.add(0);
  const domStar = dom === '*';
  const dowStar = dow === '*';
  const fn = (wall: number) => {
    const d = new Date(wall);
    if (d.getUTCMilliseconds() !== 0 || !S.has(d.getUTCSeconds()) || !Mi.has(d.getUTCMinutes()) || !H.has(d.getUTCHours())) return false;
    if (!Mo.has(d.getUTCMonth() + 1)) return false;
    const domOk = D.has(d.getUTCDate());
    const dowOk = W.has(d.getUTCDay());
    return domStar || dowStar ? domOk && dowOk : domOk || dowOk;
  };
  return Object.assign(fn, { seconds });
}

interface Transition {
  at: number;
  before: number;
  after: number;
}

function transitions(tz: string, from: number, to: number): Transition[] {
  const out: Transition[] = [];
  for (let t = from; t < to; t += DAY) {
    const before = offsetOf(t, tz);
    if (before === offsetOf(t + DAY, tz)) continue;
    let lo = t;
    let hi = t + DAY;
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      if (offsetOf(mid, tz) === before) lo = mid;
      else hi = mid;
    }
    out.push({ at: hi, before, after: offsetOf(hi, tz) });
  }
  return out;
}

const RANGE_FROM = u('2025-06-01T00:00:00Z');
const RANGE_TO = u('2027-06-01T00:00:00Z');
const TRANSITIONS = new Map(ZONES.map((tz) => [tz, transitions(tz, RANGE_FROM, RANGE_TO)]));

/** True when `t` is in the second pass of a DST overlap (its wall time was already read, at most 3 h earlier). */
function secondPass(t: number, tz: string): boolean {
  const shift = offsetOf(t - 3 * HOUR, tz) - offsetOf(t, tz);
  return shift > 0 && utcToWall(t - shift, tz) === utcToWall(t, tz);
}

/** The wall times skipped by a gap that ends exactly at instant `t` ([start, end) as pseudo-UTC ms), if any. */
function gapEndingAt(t: number, tz: string): [number, number] | null {
  const before = utcToWall(t - 1, tz) + 1;
  const after = utcToWall(t, tz);
  return after > before ? [before, after] : null;
}

/** Reference fires of a minute-resolution pattern in (from, to], minute by minute. */
function oracleFires(expr: string, tz: string, from: number, to: number): number[] {
  const match = matcher(expr);
  const out: number[] = [];
  let s = Math.floor(from / MIN) * MIN + MIN;
  let prev = utcToWall(s - MIN, tz);
  for (; s <= to; s += MIN) {
    const wall = utcToWall(s, tz);
    let fires = match(wall) && !secondPass(s, tz);
    // The clocks jumped over (prev, wall): a matching skipped minute fires here, at the end of the gap.
    for (let m = prev + MIN; !fires && m < wall; m += MIN) fires = match(m);
    if (fires) out.push(s);
    prev = wall;
  }
  return out;
}

// ── tests ───────────────────────────────────────────────────────────────────────────────────────

describe('parseCronPattern', () => {
  it('parses once and keeps the pattern', () => {
    expect(parseCronPattern('0 3 * * *')).toBe(parseCronPattern('0 3 * * *'));
  });

  it.each([
    ['* * *', /^--cron: "\* \* \*" has 3 field\(s\); expected 5/],
    ['* * * * * * *', /has 7 field\(s\)/],
    ['', /has 1 field\(s\)/],
    ['61 * * * *', /^--cron: invalid expression "61 \* \* \* \*".*minute/],
    ['0 25 * * *', /invalid expression.*hour/],
    ['0 0 32 * *', /invalid expression/],
    ['0 0 * 13 *', /invalid expression/],
    ['0 0 * * 8', /invalid expression/],
    ['*/0 * * * *', /invalid expression/],
    ['5-1 * * * *', /invalid expression/],
    ['a b c d e', /invalid expression/],
    ['@reboot', /invalid expression/],
    ['@daily extra', /invalid expression/],
    // croner would read `?` as "the time the pattern was parsed": not deterministic, so refused.
    ['0 0 ? * MON', /"\?" is not supported/],
    ['? ? * * *', /"\?" is not supported/],
  ])('%j is a ValidationError (%s)', (expr, message) => {
    const error = errorOf(() => parseCronPattern(expr));
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.message).toMatch(message);
    expect(error.hint).toBeTruthy();
  });

  it('names the given flag', () => {
    expect(() => parseCronPattern('* *', '--when')).toThrow(/^--when: /);
  });
});

describe('nextCronFire: pattern syntax', () => {
  const from = u('2026-01-01T00:00:00Z'); // a Thursday
  const list = (expr: string, n: number, tz = 'UTC', after = from) => {
    const out: string[] = [];
    let cursor = after;
    for (let i = 0; i < n; i++) {
      const next = nextCronFire(expr, tz, cursor);
      if (next === null) break;
      out.push(iso(next)!);
      cursor = next;
    }
    return out;
  };

  it('is strictly after the reference, to the millisecond', () => {
    expect(iso(nextCronFire('0 3 * * *', 'UTC', u('2026-01-01T02:59:59.999Z')))).toBe('2026-01-01T03:00:00.000Z');
    expect(iso(nextCronFire('0 3 * * *', 'UTC', u('2026-01-01T03:00:00.000Z')))).toBe('2026-01-02T03:00:00.000Z');
    expect(iso(nextCronFire('0 3 * * *', 'UTC', u('2026-01-01T03:00:00.001Z')))).toBe('2026-01-02T03:00:00.000Z');
  });

  it('steps and lists: */15, 0,45, 9-17/4', () => {
    expect(list('*/15 * * * *', 5)).toEqual([
      '2026-01-01T00:15:00.000Z',
      '2026-01-01T00:30:00.000Z',
      '2026-01-01T00:45:00.000Z',
      '2026-01-01T01:00:00.000Z',
      '2026-01-01T01:15:00.000Z',
    ]);
    expect(list('0,45 1 * * *', 3)).toEqual(['2026-01-01T01:00:00.000Z', '2026-01-01T01:45:00.000Z', '2026-01-02T01:00:00.000Z']);
    expect(list('0 9-17/4 * * *', 4)).toEqual([
      '2026-01-01T09:00:00.000Z',
      '2026-01-01T13:00:00.000Z',
      '2026-01-01T17:00:00.000Z',
      '2026-01-02T09:00:00.000Z',
    ]);
  });

  it('day and month names: MON-FRI, JAN, sat,sun, 7 is Sunday', () => {
    // 2026-01-01 is a Thursday: Thu 1, Fri 2, then Monday 5.
    expect(list('0 9 * * MON-FRI', 3)).toEqual(['2026-01-01T09:00:00.000Z', '2026-01-02T09:00:00.000Z', '2026-01-05T09:00:00.000Z']);
    expect(list('0 9 * * sat,sun', 3)).toEqual(['2026-01-03T09:00:00.000Z', '2026-01-04T09:00:00.000Z', '2026-01-10T09:00:00.000Z']);
    expect(list('0 0 * * 7', 1)).toEqual(list('0 0 * * SUN', 1));
    expect(list('0 0 1 JAN *', 2)).toEqual(['2027-01-01T00:00:00.000Z', '2028-01-01T00:00:00.000Z']);
    expect(list('0 12 1 MAR-APR *', 3)).toEqual(['2026-03-01T12:00:00.000Z', '2026-04-01T12:00:00.000Z', '2027-03-01T12:00:00.000Z']);
  });

  it('macros: @hourly, @daily, @weekly, @monthly, @yearly, @annually', () => {
    for (const [macro, expansion] of Object.entries(MACROS)) {
      for (const tz of ['UTC', 'Europe/Berlin']) expect(list(macro, 4, tz)).toEqual(list(expansion, 4, tz));
    }
    expect(list('@daily', 1, 'Europe/Berlin')).toEqual(['2026-01-01T23:00:00.000Z']); // local midnight
    expect(list('@weekly', 1)).toEqual(['2026-01-04T00:00:00.000Z']); // Sunday
    expect(list('@DAILY', 1)).toEqual(list('@daily', 1));
  });

  it('six fields: the first is seconds', () => {
    const after = u('2026-06-15T10:00:00.250Z');
    expect(iso(nextCronFire('* * * * * *', 'UTC', after))).toBe('2026-06-15T10:00:01.000Z');
    expect(iso(nextCronFire('*/5 * * * * *', 'UTC', after))).toBe('2026-06-15T10:00:05.000Z');
    expect(iso(nextCronFire('30 0 3 * * *', 'UTC', after))).toBe('2026-06-16T03:00:30.000Z');
    expect(firesBetween('*/10 * * * * *', 'Europe/Berlin', after, after + MIN)).toHaveLength(6);
    expect(list('15,45 * * * * *', 3)).toEqual(['2026-01-01T00:00:15.000Z', '2026-01-01T00:00:45.000Z', '2026-01-01T00:01:15.000Z']);
  });

  it('day-of-month OR day-of-week when both are restricted; either alone when the other is *', () => {
    // Fridays (2, 9, 16) and the 13th (a Tuesday).
    expect(list('0 0 13 * FRI', 5)).toEqual([
      '2026-01-02T00:00:00.000Z',
      '2026-01-09T00:00:00.000Z',
      '2026-01-13T00:00:00.000Z',
      '2026-01-16T00:00:00.000Z',
      '2026-01-23T00:00:00.000Z',
    ]);
    expect(list('0 0 13 * *', 2)).toEqual(['2026-01-13T00:00:00.000Z', '2026-02-13T00:00:00.000Z']);
    expect(list('0 0 * * FRI', 2)).toEqual(['2026-01-02T00:00:00.000Z', '2026-01-09T00:00:00.000Z']);
    expect(list('0 0 1,15 * MON', 4)).toEqual([
      '2026-01-05T00:00:00.000Z',
      '2026-01-12T00:00:00.000Z',
      '2026-01-15T00:00:00.000Z',
      '2026-01-19T00:00:00.000Z',
    ]);
  });

  it('a date that never exists never fires; a rare one does', () => {
    expect(nextCronFire('0 0 31 2 *', 'UTC', from)).toBeNull();
    expect(nextCronFire('0 0 30 2 *', 'Europe/Berlin', from)).toBeNull();
    expect(iso(nextCronFire('0 0 29 2 *', 'UTC', from))).toBe('2028-02-29T00:00:00.000Z');
    expect(iso(nextCronFire('0 0 31 * *', 'UTC', u('2026-04-01T00:00:00Z')))).toBe('2026-05-31T00:00:00.000Z');
  });

  it('is computed in the zone', () => {
    expect(iso(nextCronFire('0 3 * * *', 'Europe/Berlin', u('2026-07-01T00:59:59.999Z')))).toBe('2026-07-01T01:00:00.000Z');
    expect(iso(nextCronFire('0 3 * * *', 'Europe/Berlin', u('2026-01-10T12:00:00Z')))).toBe('2026-01-11T02:00:00.000Z');
    expect(iso(nextCronFire('30 9 * * *', 'America/New_York', u('2026-01-15T00:00:00Z')))).toBe('2026-01-15T14:30:00.000Z');
    expect(iso(nextCronFire('0 9 * * *', 'Asia/Kolkata', u('2026-01-15T00:00:00Z')))).toBe('2026-01-15T03:30:00.000Z');
    expect(iso(nextCronFire('0 9 * * *', 'Pacific/Chatham', u('2026-07-15T00:00:00Z')))).toBe('2026-07-15T20:15:00.000Z');
    // The day-of-week is the local one: Monday 00:30 in Kolkata is Sunday 19:00 UTC.
    expect(iso(nextCronFire('30 0 * * MON', 'Asia/Kolkata', u('2026-01-01T00:00:00Z')))).toBe('2026-01-04T19:00:00.000Z');
  });
});

describe('nextCronFire across the 2026 DST changes', () => {
  /** Fires during the local calendar day `date` in `tz`. */
  const onLocalDay = (expr: string, tz: string, from: string, to: string) =>
    firesBetween(expr, tz, u(from) - 1, u(to) - 1).map((t) => `${hhmm(t, tz)}=${iso(t)}`);

  describe.each([
    // zone, local spring day [start, end), its skipped hour, local fall day [start, end), its repeated hour
    ['Europe/Berlin', ['2026-03-28T23:00:00Z', '2026-03-29T22:00:00Z'], 2, ['2026-10-24T22:00:00Z', '2026-10-25T23:00:00Z'], 2],
    ['America/New_York', ['2026-03-08T05:00:00Z', '2026-03-09T04:00:00Z'], 2, ['2026-11-01T04:00:00Z', '2026-11-02T05:00:00Z'], 1],
  ] as const)('%s', (tz, spring, skipped, fall, repeated) => {
    it("'30 2 * * *' fires once on the spring-forward day, at 03:00 local (the end of the gap)", () => {
      const fires = onLocalDay('30 2 * * *', tz, spring[0], spring[1]);
      expect(fires).toHaveLength(1);
      expect(fires[0]).toMatch(/^03:00=/);
      const day = firesBetween('30 2 * * *', tz, u(spring[0]) - 1, u(spring[1]) - 1)[0]!;
      expect(offsetOf(day - 1, tz)).toBeLessThan(offsetOf(day, tz)); // exactly where the clocks jumped
    });

    it("'30 2 * * *' fires once on the fall-back day, at the first 02:30", () => {
      const fires = firesBetween('30 2 * * *', tz, u(fall[0]) - 1, u(fall[1]) - 1);
      expect(fires).toHaveLength(1);
      expect(hhmm(fires[0]!, tz)).toBe('02:30');
      // If 02:30 is repeated (Berlin), the fire is the earlier reading: one hour before the later one.
      const later = fires[0]! + HOUR;
      if (utcToWall(later, tz) === utcToWall(fires[0]!, tz)) expect(fires).not.toContain(later);
    });

    it(`'0 * * * *' fires 23 times on the spring-forward day (no ${skipped}:00) and 24 on the fall-back day (${repeated}:00 once)`, () => {
      const springFires = firesBetween('0 * * * *', tz, u(spring[0]) - 1, u(spring[1]) - 1);
      expect(springFires).toHaveLength(23);
      const springHours = springFires.map((t) => new Date(utcToWall(t, tz)).getUTCHours());
      expect(springHours).toEqual([...Array(24).keys()].filter((h) => h !== skipped));

      const fallFires = firesBetween('0 * * * *', tz, u(fall[0]) - 1, u(fall[1]) - 1);
      expect(fallFires).toHaveLength(24);
      expect(fallFires.map((t) => new Date(utcToWall(t, tz)).getUTCHours())).toEqual([...Array(24).keys()]);
      // The day is 25 hours long: exactly one hour of it has no fire (the second pass of the repeated hour).
      const silent = fallFires.map((t, i) => (fallFires[i + 1] ?? u(fall[1])) - t).filter((gap) => gap !== HOUR);
      expect(silent).toEqual([2 * HOUR]);
    });

    it(`'30 ${repeated} * * *' fires at the first ${repeated}:30 only`, () => {
      const fires = firesBetween(`30 ${repeated} * * *`, tz, u(fall[0]) - 1, u(fall[1]) - 1);
      expect(fires).toHaveLength(1);
      expect(offsetOf(fires[0]!, tz)).toBe(offsetOf(u(fall[0]), tz)); // still on summer time
    });
  });

  it('Berlin, exact instants around the changes', () => {
    const tz = 'Europe/Berlin';
    // Spring: 02:00–02:59 do not exist; everything in them fires once at 03:00 CEST (01:00Z).
    expect(onLocalDay('*/15 * * * *', tz, '2026-03-29T00:40:00Z', '2026-03-29T01:31:00Z')).toEqual([
      '01:45=2026-03-29T00:45:00.000Z',
      '03:00=2026-03-29T01:00:00.000Z',
      '03:15=2026-03-29T01:15:00.000Z',
      '03:30=2026-03-29T01:30:00.000Z',
    ]);
    expect(iso(nextCronFire('0 4 * * *', tz, u('2026-03-28T12:00:00Z')))).toBe('2026-03-29T02:00:00.000Z');
    expect(iso(nextCronFire('0 4 * * *', tz, u('2026-03-29T02:00:00Z')))).toBe('2026-03-30T02:00:00.000Z');
    // Fall: 02:00–02:59 happen twice (00:00Z–00:59Z CEST, 01:00Z–01:59Z CET); each fires at its first reading.
    expect(onLocalDay('*/30 * * * *', tz, '2026-10-24T23:40:00Z', '2026-10-25T02:01:00Z')).toEqual([
      '02:00=2026-10-25T00:00:00.000Z',
      '02:30=2026-10-25T00:30:00.000Z',
      '03:00=2026-10-25T02:00:00.000Z',
    ]);
  });

  it('from inside the second pass of an overlap, the repeated times do not fire again', () => {
    const tz = 'America/New_York'; // 2026-11-01: 01:00–01:59 EDT (05:00Z–05:59Z), then again EST (06:00Z–06:59Z)
    for (const after of ['2026-11-01T06:00:00.000Z', '2026-11-01T06:15:00.000Z', '2026-11-01T06:59:59.999Z']) {
      expect(iso(nextCronFire('*/15 * * * *', tz, u(after)))).toBe('2026-11-01T07:00:00.000Z');
      expect(iso(nextCronFire('* * * * * *', tz, u(after)))).toBe('2026-11-01T07:00:00.000Z');
      expect(iso(nextCronFire('30 1 * * *', tz, u(after)))).toBe('2026-11-02T06:30:00.000Z');
    }
    // Just before the clocks go back, the next fire is the next new wall time.
    expect(iso(nextCronFire('* * * * * *', tz, u('2026-11-01T05:59:59.000Z')))).toBe('2026-11-01T07:00:00.000Z');
    expect(iso(nextCronFire('*/15 * * * *', tz, u('2026-11-01T05:50:00.000Z')))).toBe('2026-11-01T07:00:00.000Z');
  });

  it.each([
    // 30-minute DST: 02:00 → 02:30 on 2026-10-04, 02:00 → 01:30 on 2026-04-05.
    ['Australia/Lord_Howe', '15 2 * * *', '2026-10-03T00:00:00Z', ['02:30=2026-10-03T15:30:00.000Z', '02:15=2026-10-04T15:15:00.000Z']],
    ['Australia/Lord_Howe', '45 1 * * *', '2026-04-04T00:00:00Z', ['01:45=2026-04-04T14:45:00.000Z', '01:45=2026-04-05T15:15:00.000Z']],
    // Chatham, at :45: 02:45 → 03:45 on 2026-09-27, 03:45 → 02:45 on 2026-04-05.
    ['Pacific/Chatham', '0 3 * * *', '2026-09-25T20:00:00Z', ['03:45=2026-09-26T14:00:00.000Z', '03:00=2026-09-27T13:15:00.000Z']],
    ['Pacific/Chatham', '0 3 * * *', '2026-04-03T20:00:00Z', ['03:00=2026-04-04T13:15:00.000Z', '03:00=2026-04-05T14:15:00.000Z']],
    // St. John's, at :30 UTC.
    ['America/St_Johns', '30 2 * * *', '2026-03-07T12:00:00Z', ['03:00=2026-03-08T05:30:00.000Z', '02:30=2026-03-09T05:00:00.000Z']],
    ['America/St_Johns', '30 1 * * *', '2026-10-31T12:00:00Z', ['01:30=2026-11-01T04:00:00.000Z', '01:30=2026-11-02T05:00:00.000Z']],
  ])('%s %j from %s: %j', (tz, expr, from, expected) => {
    const fires = firesBetween(expr, tz, u(from), u(from) + 2 * DAY);
    expect(fires.map((t) => `${hhmm(t, tz)}=${iso(t)}`)).toEqual(expected);
  });

  it('zones without DST are plain arithmetic all year', () => {
    expect(firesBetween('0 0 * * *', 'America/Sao_Paulo', u('2026-01-01T00:00:00Z'), u('2027-01-01T00:00:00Z')).every((t) => new Date(t).getUTCHours() === 3)).toBe(true);
    expect(firesBetween('0 12 * * *', 'Asia/Kolkata', u('2026-03-01T00:00:00Z'), u('2026-12-01T00:00:00Z')).every((t) => iso(t)!.endsWith('T06:30:00.000Z'))).toBe(true);
  });
});

describe('nextCronFire properties', () => {
  const minute = fc.constantFrom('0', '30', '*/15', '0,45', '5-10', '*/7', '15,30');
  const hour = fc.constantFrom('*', '*', '2', '1-3', '*/5', '0,12', '1', '3', '2-4');
  const dom = fc.constantFrom('*', '*', '*', '1', '13', '1-7', '10,20');
  const month = fc.constantFrom('*', '*', '*', '3,4,9,10,11', 'MAR-NOV', '11');
  const dow = fc.constantFrom('*', '*', '*', 'MON-FRI', 'SUN', '0', '5', 'SAT,SUN', '1-3');
  const fiveFields = fc.tuple(minute, hour, dom, month, dow).map((f) => f.join(' '));
  const pattern = fc.oneof(
    { weight: 6, arbitrary: fiveFields },
    { weight: 1, arbitrary: fc.constantFrom(...Object.keys(MACROS)) },
    { weight: 1, arbitrary: fc.constantFrom('*/20 * * * * *', '0 */10 * * * *', '30 0,30 1-3 * * *', '* * * * * *') },
  );

  /** A zone and an instant: uniform over two years, or within a day of one of the zone's transitions. */
  const zoneAndInstant = fc.constantFrom(...ZONES).chain((tz) => {
    const near = TRANSITIONS.get(tz)!;
    const uniform = fc.integer({ min: RANGE_FROM, max: RANGE_TO });
    const arb =
      near.length === 0
        ? uniform
        : fc.oneof(uniform, fc.tuple(fc.constantFrom(...near), fc.integer({ min: -DAY, max: DAY })).map(([tr, d]) => tr.at + d));
    return arb.map((t) => [tz, t] as const);
  });

  it('iterated: > after, strictly increasing, each fire matches the pattern or ends a gap that skipped a match', () => {
    fc.assert(
      fc.property(pattern, zoneAndInstant, (expr, [tz, after]) => {
        const match = matcher(expr);
        let cursor = after;
        for (let i = 0; i < 12; i++) {
          const next = nextCronFire(expr, tz, cursor);
          expect(next, `${expr} in ${tz} after ${iso(cursor)}`).not.toBeNull(); // every generated pattern fires at least yearly
          if (next === null) return;
          expect(next).toBeGreaterThan(cursor);
          const wall = utcToWall(next, tz);
          if (!match(wall)) {
            const gap = gapEndingAt(next, tz);
            expect(gap, `${expr} in ${tz}: ${iso(next)} (${iso(wall)} local) neither matches nor ends a gap`).not.toBeNull();
            const step = match.seconds ? SEC : MIN;
            let skippedMatch = false;
            for (let m = gap![0]; !skippedMatch && m < gap![1]; m += step) skippedMatch = match(m);
            expect(skippedMatch).toBe(true);
          } else {
            // A matching wall time fires at its first reading only.
            expect(secondPass(next, tz)).toBe(false);
          }
          cursor = next;
        }
      }),
      { numRuns: 150 },
    );
  });

  it('equals a minute-by-minute reference over a window around DST changes (nothing missed, nothing doubled)', () => {
    fc.assert(
      fc.property(fiveFields, zoneAndInstant, (expr, [tz, from]) => {
        const to = from + 26 * HOUR;
        expect(firesBetween(expr, tz, from, to).map(iso)).toEqual(oracleFires(expr, tz, from, to).map(iso));
      }),
      { numRuns: 40 },
    );
  });
});

describe('purity', () => {
  it('never reads the clock: the answer depends only on the pattern, zone and reference time', () => {
    const reference = u('2026-03-29T00:30:00Z');
    const expected = nextCronFire('30 2 * * *', 'Europe/Berlin', reference);
    vi.useFakeTimers();
    try {
      for (const now of ['1999-01-01T00:00:00Z', '2026-03-29T01:00:00Z', '2090-07-01T12:00:00Z']) {
        vi.setSystemTime(new Date(now));
        // A fresh pattern each time too: parsing must not capture "now" either.
        expect(nextCronFire('30 2 * * *', 'Europe/Berlin', reference)).toBe(expected);
        expect(nextCronFire(`30 2 * * * `, 'Europe/Berlin', reference)).toBe(expected);
      }
    } finally {
      vi.useRealTimers();
    }
    expect(iso(expected)).toBe('2026-03-29T01:00:00.000Z');
  });
});
