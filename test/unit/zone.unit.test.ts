/**
 * zone.ts: wall clock ↔ UTC in IANA zones, checked on fixed facts (the 2026 transitions of a sample
 * of zones with 1 h, 30 min, :45 and no DST) and with properties around every transition.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalTimeZone, formatInZone, offsetOf, utcToWall, wallToUtc } from '../../src/scheduling/zone.js';

const MIN = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const u = (iso: string) => Date.parse(iso);
/** A wall time written as ISO without zone, as pseudo-UTC ms. */
const w = (local: string) => Date.parse(`${local}Z`);
const iso = (ms: number) => new Date(ms).toISOString();

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

interface Transition {
  at: number;
  before: number;
  after: number;
}

/** Offset changes in [from, to), found by a daily scan and bisection to the millisecond. */
function transitions(tz: string, from: number, to: number): Transition[] {
  const out: Transition[] = [];
  for (let t = from; t < to; t += DAY) {
    const before = offsetOf(t, tz);
    const after = offsetOf(t + DAY, tz);
    if (before === after) continue;
    let lo = t;
    let hi = t + DAY;
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      if (offsetOf(mid, tz) === before) lo = mid;
      else hi = mid;
    }
    out.push({ at: hi, before, after });
  }
  return out;
}

const RANGE_FROM = u('2025-01-01T00:00:00Z');
const RANGE_TO = u('2028-01-01T00:00:00Z');
const TRANSITIONS = new Map(ZONES.map((tz) => [tz, transitions(tz, RANGE_FROM, RANGE_TO)]));

/** Independent oracle: the earliest instant with the same wall time as `t` (DST shifts are multiples of 15 min, ≤ 3 h). */
function firstOccurrence(t: number, tz: string): number {
  const wall = utcToWall(t, tz);
  let first = t;
  for (let k = 1; k <= 12; k++) if (utcToWall(t - k * 15 * MIN, tz) === wall) first = t - k * 15 * MIN;
  return first;
}

/** Instants: uniform over the range, or within 3 h of one of the zone's transitions (half the time). */
const zoneAndInstant = fc.constantFrom(...ZONES).chain((tz) => {
  const near = TRANSITIONS.get(tz)!;
  const uniform = fc.integer({ min: RANGE_FROM, max: RANGE_TO - 1 });
  const arb =
    near.length === 0
      ? uniform
      : fc.oneof(
          uniform,
          fc.tuple(fc.constantFrom(...near), fc.integer({ min: -3 * HOUR, max: 3 * HOUR })).map(([tr, d]) => tr.at + d),
          fc.tuple(fc.constantFrom(...near), fc.integer({ min: -2, max: 2 })).map(([tr, d]) => tr.at + d * MIN),
        );
  return arb.map((t) => [tz, t] as const);
});

/** Wall times: near any instant above, or inside the skipped / repeated wall times of a transition. */
const zoneAndWall = fc.oneof(
  zoneAndInstant.chain(([tz, t]) => fc.integer({ min: -2 * HOUR, max: 2 * HOUR }).map((d) => [tz, utcToWall(t, tz) + d] as const)),
  fc
    .constantFrom(...ZONES.filter((tz) => TRANSITIONS.get(tz)!.length > 0))
    .chain((tz) => fc.tuple(fc.constant(tz), fc.constantFrom(...TRANSITIONS.get(tz)!)))
    .chain(([tz, tr]) => {
      const shift = Math.abs(tr.after - tr.before);
      const edge = utcToWall(tr.at - 1, tz);
      return fc.integer({ min: -shift, max: shift + 1 }).map((d) => [tz, edge + d] as const);
    }),
);

describe('the sample zones', () => {
  it('change offset in 2026 exactly where the tz database says', () => {
    const in2026 = (tz: string) =>
      transitions(tz, u('2026-01-01T00:00:00Z'), u('2027-01-01T00:00:00Z')).map((tr) => ({
        at: iso(tr.at),
        before: tr.before / MIN,
        after: tr.after / MIN,
      }));
    expect(in2026('Europe/Berlin')).toEqual([
      { at: '2026-03-29T01:00:00.000Z', before: 60, after: 120 },
      { at: '2026-10-25T01:00:00.000Z', before: 120, after: 60 },
    ]);
    expect(in2026('America/New_York')).toEqual([
      { at: '2026-03-08T07:00:00.000Z', before: -300, after: -240 },
      { at: '2026-11-01T06:00:00.000Z', before: -240, after: -300 },
    ]);
    expect(in2026('America/St_Johns')).toEqual([
      { at: '2026-03-08T05:30:00.000Z', before: -210, after: -150 },
      { at: '2026-11-01T04:30:00.000Z', before: -150, after: -210 },
    ]);
    // Lord Howe shifts by 30 minutes: 02:00 → 01:30 in April, 02:00 → 02:30 in October.
    expect(in2026('Australia/Lord_Howe')).toEqual([
      { at: '2026-04-04T15:00:00.000Z', before: 660, after: 630 },
      { at: '2026-10-03T15:30:00.000Z', before: 630, after: 660 },
    ]);
    // Chatham: +13:45 → +12:45 at 03:45 in April, back at 02:45 in September.
    expect(in2026('Pacific/Chatham')).toEqual([
      { at: '2026-04-04T14:00:00.000Z', before: 825, after: 765 },
      { at: '2026-09-26T14:00:00.000Z', before: 765, after: 825 },
    ]);
    for (const tz of ['America/Sao_Paulo', 'Asia/Kolkata', 'UTC']) expect(in2026(tz)).toEqual([]);
  });
});

describe('utcToWall / offsetOf', () => {
  it.each([
    ['Europe/Berlin', '2026-01-15T12:00:00.000Z', '2026-01-15T13:00:00.000', 60],
    ['Europe/Berlin', '2026-07-15T12:00:00.000Z', '2026-07-15T14:00:00.000', 120],
    ['America/New_York', '2026-01-15T12:00:00.000Z', '2026-01-15T07:00:00.000', -300],
    ['America/New_York', '2026-07-15T12:00:00.000Z', '2026-07-15T08:00:00.000', -240],
    ['America/Sao_Paulo', '2026-01-15T12:00:00.000Z', '2026-01-15T09:00:00.000', -180],
    ['America/Sao_Paulo', '2026-07-15T12:00:00.000Z', '2026-07-15T09:00:00.000', -180],
    ['Australia/Lord_Howe', '2026-01-15T12:00:00.000Z', '2026-01-15T23:00:00.000', 660],
    ['Australia/Lord_Howe', '2026-07-15T12:00:00.000Z', '2026-07-15T22:30:00.000', 630],
    ['Asia/Kolkata', '2026-07-15T12:00:00.000Z', '2026-07-15T17:30:00.000', 330],
    ['Pacific/Chatham', '2026-01-15T12:00:00.000Z', '2026-01-16T01:45:00.000', 825],
    ['Pacific/Chatham', '2026-07-15T12:00:00.000Z', '2026-07-16T00:45:00.000', 765],
    ['America/St_Johns', '2026-01-15T12:00:00.000Z', '2026-01-15T08:30:00.000', -210],
    ['America/St_Johns', '2026-07-15T12:00:00.000Z', '2026-07-15T09:30:00.000', -150],
    ['UTC', '2026-07-15T12:00:00.000Z', '2026-07-15T12:00:00.000', 0],
  ])('%s at %s reads %s (offset %i min)', (tz, instant, wall, offsetMin) => {
    expect(iso(utcToWall(u(instant), tz))).toBe(`${wall}Z`);
    expect(offsetOf(u(instant), tz)).toBe(offsetMin * MIN);
  });

  it('keeps the milliseconds, also before 1970', () => {
    expect(iso(utcToWall(u('2026-07-15T12:00:00.123Z'), 'Asia/Kolkata'))).toBe('2026-07-15T17:30:00.123Z');
    expect(iso(utcToWall(u('1969-12-31T23:59:59.250Z'), 'UTC'))).toBe('1969-12-31T23:59:59.250Z');
  });

  it('reads midnight as 00, never 24', () => {
    expect(iso(utcToWall(u('2026-07-14T22:00:00Z'), 'Europe/Berlin'))).toBe('2026-07-15T00:00:00.000Z');
  });
});

describe('wallToUtc', () => {
  it('converts ordinary wall times', () => {
    expect(iso(wallToUtc(w('2026-07-01T09:00'), 'Europe/Berlin'))).toBe('2026-07-01T07:00:00.000Z');
    expect(iso(wallToUtc(w('2026-01-01T09:00'), 'Europe/Berlin'))).toBe('2026-01-01T08:00:00.000Z');
    expect(iso(wallToUtc(w('2026-07-01T09:00'), 'Asia/Kolkata'))).toBe('2026-07-01T03:30:00.000Z');
    expect(iso(wallToUtc(w('2026-07-01T09:00'), 'Pacific/Chatham'))).toBe('2026-06-30T20:15:00.000Z');
    expect(iso(wallToUtc(w('2026-07-01T09:00:00.5'), 'UTC'))).toBe('2026-07-01T09:00:00.500Z');
  });

  it.each([
    // zone, nonexistent wall time, the first valid instant after the gap
    ['Europe/Berlin', '2026-03-29T02:00', '2026-03-29T01:00:00.000Z'],
    ['Europe/Berlin', '2026-03-29T02:30', '2026-03-29T01:00:00.000Z'],
    ['Europe/Berlin', '2026-03-29T02:59:59.999', '2026-03-29T01:00:00.000Z'],
    ['America/New_York', '2026-03-08T02:30', '2026-03-08T07:00:00.000Z'],
    ['America/St_Johns', '2026-03-08T02:30', '2026-03-08T05:30:00.000Z'],
    ['Australia/Lord_Howe', '2026-10-04T02:15', '2026-10-03T15:30:00.000Z'],
    ['Pacific/Chatham', '2026-09-27T03:00', '2026-09-26T14:00:00.000Z'],
  ])('%s: %s does not exist → the end of the gap, %s', (tz, wall, expected) => {
    expect(iso(wallToUtc(w(wall), tz))).toBe(expected);
  });

  it.each([
    // zone, repeated wall time, its first occurrence (the second is one shift later)
    ['Europe/Berlin', '2026-10-25T02:30', '2026-10-25T00:30:00.000Z'],
    ['America/New_York', '2026-11-01T01:30', '2026-11-01T05:30:00.000Z'],
    ['America/St_Johns', '2026-11-01T01:00', '2026-11-01T03:30:00.000Z'],
    ['Australia/Lord_Howe', '2026-04-05T01:45', '2026-04-04T14:45:00.000Z'],
    ['Pacific/Chatham', '2026-04-05T03:00', '2026-04-04T13:15:00.000Z'],
  ])('%s: %s exists twice → the first occurrence, %s', (tz, wall, expected) => {
    const first = wallToUtc(w(wall), tz);
    expect(iso(first)).toBe(expected);
    // It really is repeated: some later instant reads the same.
    const shift = offsetOf(first, tz) - offsetOf(first + 3 * HOUR, tz);
    expect(shift).toBeGreaterThan(0);
    expect(utcToWall(first + shift, tz)).toBe(w(wall));
  });

  it('the edges of the gap and the overlap', () => {
    const tz = 'Europe/Berlin';
    expect(iso(wallToUtc(w('2026-03-29T01:59:59.999'), tz))).toBe('2026-03-29T00:59:59.999Z');
    expect(iso(wallToUtc(w('2026-03-29T03:00'), tz))).toBe('2026-03-29T01:00:00.000Z');
    expect(iso(wallToUtc(w('2026-10-25T01:59:59.999'), tz))).toBe('2026-10-24T23:59:59.999Z');
    expect(iso(wallToUtc(w('2026-10-25T02:00'), tz))).toBe('2026-10-25T00:00:00.000Z');
    expect(iso(wallToUtc(w('2026-10-25T02:59:59.999'), tz))).toBe('2026-10-25T00:59:59.999Z');
    expect(iso(wallToUtc(w('2026-10-25T03:00'), tz))).toBe('2026-10-25T02:00:00.000Z');
  });

  it('property: utcToWall then wallToUtc is the identity, except in an overlap, where it is the first occurrence', () => {
    fc.assert(
      fc.property(zoneAndInstant, ([tz, t]) => {
        const wall = utcToWall(t, tz);
        const back = wallToUtc(wall, tz);
        expect(back).toBeLessThanOrEqual(t);
        expect(utcToWall(back, tz)).toBe(wall);
        expect(back).toBe(firstOccurrence(t, tz));
        if (back !== t) {
          // The second occurrence: the clocks went back by exactly t − back between the two.
          expect(offsetOf(back, tz) - offsetOf(t, tz)).toBe(t - back);
        }
      }),
      { numRuns: 400 },
    );
  });

  it('property: wallToUtc then utcToWall is the identity, except in a gap, where it is the gap end', () => {
    fc.assert(
      fc.property(zoneAndWall, ([tz, wall]) => {
        const t = wallToUtc(wall, tz);
        const read = utcToWall(t, tz);
        if (read === wall) {
          expect(t).toBe(firstOccurrence(t, tz));
          return;
        }
        // A gap: the wall time never exists; t is where the clocks jumped over it.
        expect(offsetOf(t, tz)).toBeGreaterThan(offsetOf(t - 1, tz));
        expect(utcToWall(t - 1, tz)).toBeLessThan(wall);
        expect(read).toBeGreaterThan(wall);
        expect(TRANSITIONS.get(tz)!.some((tr) => tr.at === t)).toBe(true);
      }),
      { numRuns: 400 },
    );
  });

  it('property: wallToUtc is non-decreasing', () => {
    fc.assert(
      fc.property(zoneAndWall, fc.integer({ min: 0, max: 3 * HOUR }), ([tz, a], d) => {
        expect(wallToUtc(a, tz)).toBeLessThanOrEqual(wallToUtc(a + d, tz));
      }),
      { numRuns: 300 },
    );
  });

  it('property: in zones without DST it is plain arithmetic', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(['UTC', 0], ['Asia/Kolkata', 330], ['America/Sao_Paulo', -180]),
        fc.integer({ min: RANGE_FROM, max: RANGE_TO }),
        ([tz, offsetMin], t) => {
          expect(utcToWall(t, tz)).toBe(t + offsetMin * MIN);
          expect(wallToUtc(t, tz)).toBe(t - offsetMin * MIN);
        },
      ),
      { numRuns: 100 },
    );
  });
});

describe('canonicalTimeZone / formatInZone', () => {
  it('knows IANA zones and rejects others', () => {
    for (const tz of ZONES) expect(canonicalTimeZone(tz)).not.toBeNull();
    expect(canonicalTimeZone('europe/berlin')).toBe('Europe/Berlin');
    expect(canonicalTimeZone('Mars/Olympus')).toBeNull();
    expect(canonicalTimeZone('')).toBeNull();
    expect(canonicalTimeZone('Europe/Berlin ')).toBeNull();
  });

  it('renders the wall time in the zone', () => {
    expect(formatInZone(u('2026-03-29T01:00:00Z'), 'Europe/Berlin')).toMatch(/^2026-03-29 03:00:00 /);
    expect(formatInZone(u('2026-03-29T00:59:59Z'), 'Europe/Berlin')).toMatch(/^2026-03-29 01:59:59 /);
    expect(formatInZone(u('2026-07-01T00:00:00Z'), 'Asia/Kolkata')).toMatch(/^2026-07-01 05:30:00 /);
    // The two readings of a repeated wall time differ in their suffix.
    const first = formatInZone(u('2026-10-25T00:30:00Z'), 'Europe/Berlin');
    const second = formatInZone(u('2026-10-25T01:30:00Z'), 'Europe/Berlin');
    expect(first.slice(0, 19)).toBe('2026-10-25 02:30:00');
    expect(second.slice(0, 19)).toBe('2026-10-25 02:30:00');
    expect(first).not.toBe(second);
  });
});
