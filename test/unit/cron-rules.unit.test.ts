/**
 * Cron rules 2 (cron.ts): Vixie cron's DST semantics — a wildcard job (minute or hour field
 * starting with `*`) fires only at wall times that exist and on both passes of a repeated hour, a
 * fixed-time job moves to the end of a gap and fires once in a repeated hour, a jump of more than
 * 3 h (a skipped calendar day) skips the jobs inside — every crontab(5) macro, day-of-month steps
 * across month ends; rules 1 (loops created before) unchanged. The last block runs the reference
 * checker of scripts/check-cron.mjs (`npm run check:cron`) in its short mode on a few zones.
 */
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/events/errors.js';
import { CRON_MACROS, isWildcardCron, nextCronFire, parseCronPattern, type CronRules } from '../../src/scheduling/cron.js';
import { nextNominal, upcomingSlots } from '../../src/scheduling/planner.js';
import { buildSchedule } from '../../src/scheduling/schedule.js';
import { transitionsIn, utcToWall } from '../../src/scheduling/zone.js';
// @ts-expect-error -- a plain .mjs script without types
import * as checker from '../../scripts/check-cron.mjs';

const u = (iso: string) => Date.parse(iso);

/** Fires in (from, to] as `local HH:MM=UTC HH:MM` (or with the local date when `dates`). */
function fires(expr: string, tz: string, from: string, to: string, rules: CronRules = 2, dates = false): string[] {
  const out: string[] = [];
  let cursor = u(from);
  for (;;) {
    const next = nextCronFire(expr, tz, cursor, rules);
    if (next === null || next > u(to)) return out;
    const wall = new Date(utcToWall(next, tz)).toISOString();
    out.push(`${dates ? wall.slice(5, 16).replace('T', ' ') : wall.slice(11, 16)}=${new Date(next).toISOString().slice(11, 16)}Z`);
    cursor = next;
  }
}

describe('Vixie DST rules (rules 2)', () => {
  // New York 2026: 02:00–02:59 EST do not exist on 8 March (07:00Z); 01:00–01:59 happen twice on 1 November (05:00Z EDT, 06:00Z EST).
  it('an hourly job fires on both passes of the repeated hour (rules 1 fired once)', () => {
    expect(fires('0 * * * *', 'America/New_York', '2026-11-01T03:30:00Z', '2026-11-01T08:00:00Z')).toEqual([
      '00:00=04:00Z',
      '01:00=05:00Z',
      '01:00=06:00Z',
      '02:00=07:00Z',
      '03:00=08:00Z',
    ]);
    expect(fires('0 * * * *', 'America/New_York', '2026-11-01T03:30:00Z', '2026-11-01T08:00:00Z', 1)).toEqual([
      '00:00=04:00Z',
      '01:00=05:00Z',
      '02:00=07:00Z',
      '03:00=08:00Z',
    ]);
    // From inside the second pass, the rest of it still fires.
    expect(new Date(nextCronFire('*/20 * * * *', 'America/New_York', u('2026-11-01T06:10:00Z'), 2)!).toISOString()).toBe('2026-11-01T06:20:00.000Z');
    // From inside the first pass, the second pass of an earlier time comes after the rest of the first pass.
    expect(fires('*/20 * * * *', 'America/New_York', '2026-11-01T05:30:00Z', '2026-11-01T07:00:00Z')).toEqual([
      '01:40=05:40Z',
      '01:00=06:00Z',
      '01:20=06:20Z',
      '01:40=06:40Z',
      '02:00=07:00Z',
    ]);
  });

  it('an hourly job fires at no nonexistent time: nothing extra at the end of the gap (rules 1 fired one)', () => {
    expect(fires('30 * * * *', 'America/New_York', '2026-03-08T05:00:00Z', '2026-03-08T09:00:00Z')).toEqual(['00:30=05:30Z', '01:30=06:30Z', '03:30=07:30Z', '04:30=08:30Z']);
    expect(fires('30 * * * *', 'America/New_York', '2026-03-08T05:00:00Z', '2026-03-08T09:00:00Z', 1)).toContain('03:00=07:00Z');
    // Lord Howe moves 30 minutes: 02:00 → 02:30 on 2026-10-04 (15:30Z). No 02:00, and no fire at 02:30 for it.
    expect(fires('0 * * * *', 'Australia/Lord_Howe', '2026-10-03T13:30:00Z', '2026-10-03T16:30:00Z')).toEqual(['01:00=14:30Z', '03:00=16:00Z']);
    expect(fires('0 * * * *', 'Australia/Lord_Howe', '2026-10-03T13:30:00Z', '2026-10-03T16:30:00Z', 1)).toEqual([
      '01:00=14:30Z',
      '02:30=15:30Z',
      '03:00=16:00Z',
    ]);
    // A minute wildcard with a fixed hour is a wildcard job too (Vixie's MIN_STAR): the skipped hour is skipped.
    expect(fires('*/15 2 * * *', 'America/New_York', '2026-03-08T05:00:00Z', '2026-03-09T05:00:00Z')).toEqual([]);
  });

  it('a fixed-time job moves to the first instant after a gap, and fires once in a repeated hour', () => {
    expect(fires('30 2 * * *', 'America/New_York', '2026-03-08T05:00:00Z', '2026-03-09T09:00:00Z')).toEqual(['03:00=07:00Z', '02:30=06:30Z']);
    expect(fires('30 1 * * *', 'America/New_York', '2026-11-01T03:00:00Z', '2026-11-02T09:00:00Z')).toEqual(['01:30=05:30Z', '01:30=06:30Z']);
    // Several skipped minutes of one fixed job still fire once.
    expect(fires('0,15,30 2 * * *', 'Europe/Berlin', '2026-03-29T00:00:00Z', '2026-03-29T03:00:00Z')).toEqual(['03:00=01:00Z']);
    expect(fires('45 1 * * *', 'Australia/Lord_Howe', '2026-04-04T00:00:00Z', '2026-04-06T00:00:00Z')).toEqual(['01:45=14:45Z', '01:45=15:15Z']);
  });

  it('a jump of more than 3 hours skips the jobs inside it: a skipped calendar day is not a one-hour gap', () => {
    // Pacific/Apia went from 2011-12-29 23:59:59 (-10) to 2011-12-31 00:00 (+14): Friday 30 December never happened.
    const apia = transitionsIn('Pacific/Apia', 2011).find((t) => t.after - t.before === 24 * 3_600_000);
    expect(apia && new Date(apia.at).toISOString()).toBe('2011-12-30T10:00:00.000Z');
    expect(fires('0 9 * * *', 'Pacific/Apia', '2011-12-28T00:00:00Z', '2011-12-31T00:00:00Z', 2, true)).toEqual([
      '12-28 09:00=19:00Z',
      '12-29 09:00=19:00Z',
      '12-31 09:00=19:00Z',
    ]);
    // Rules 1 fired it at the jump (and so everything else due in the lost day).
    expect(fires('0 9 * * *', 'Pacific/Apia', '2011-12-28T00:00:00Z', '2012-01-01T00:00:00Z', 1, true)).toContain('12-31 00:00=10:00Z');
    expect(fires('0 9 * * FRI', 'Pacific/Apia', '2011-12-20T00:00:00Z', '2012-01-10T00:00:00Z', 2, true)).toEqual(['12-23 09:00=19:00Z', '01-06 09:00=19:00Z']);
    expect(fires('0 * * * *', 'Pacific/Apia', '2011-12-30T08:30:00Z', '2011-12-30T11:30:00Z', 2, true)).toEqual([
      '12-29 23:00=09:00Z',
      '12-31 00:00=10:00Z',
      '12-31 01:00=11:00Z',
    ]);
    // Kwajalein, 1993: Saturday 21 August never happened (-12 → +12).
    expect(fires('30 12 * * *', 'Pacific/Kwajalein', '1993-08-19T12:00:00Z', '1993-08-23T00:00:00Z', 2, true)).toEqual([
      '08-19 12:30=00:30Z',
      '08-20 12:30=00:30Z',
      '08-22 12:30=00:30Z',
    ]);
  });
});

describe('macros and day-of-month steps', () => {
  it('every crontab(5) macro, @midnight included, is its five fields', () => {
    expect(Object.keys(CRON_MACROS).sort()).toEqual(['@annually', '@daily', '@hourly', '@midnight', '@monthly', '@weekly', '@yearly']);
    for (const [macro, fields] of Object.entries(CRON_MACROS)) {
      // A year and a month (an hourly job: the days around the November change).
      const [from, to] = macro === '@hourly' ? ['2026-10-31T00:00:00Z', '2026-11-03T00:00:00Z'] : ['2026-01-01T00:00:00Z', '2027-02-01T00:00:00Z'];
      for (const tz of ['UTC', 'Europe/Berlin', 'America/New_York']) {
        expect(fires(macro, tz, from, to), `${macro} in ${tz}`).toEqual(fires(fields, tz, from, to));
      }
      expect(isWildcardCron(macro)).toBe(macro === '@hourly');
    }
    expect(buildSchedule({ cron: '@midnight', tz: 'Europe/Berlin' }, u('2026-06-01T00:00:00Z')).schedule).toEqual({
      kind: 'cron',
      expr: '@midnight',
      tz: 'Europe/Berlin',
      rules: 2,
    });
    // @reboot: once per boot of the host (test/int/reboot.int.test.ts), never refused as "never fires".
    expect(buildSchedule({ cron: '@reboot', tz: 'UTC' }, u('2026-06-01T00:00:00Z')).schedule).toEqual({ kind: 'cron', expr: '@reboot', tz: 'UTC', rules: 2 });
    expect(() => parseCronPattern('@fortnightly')).toThrow(ValidationError);
    expect(() => parseCronPattern('@fortnightly')).toThrow(/unknown macro/);
  });

  it('day-of-month steps and lists reach the first days of a month after a short one (croner 9.1.0 skipped 1 March)', () => {
    expect(fires('0 0 */10 * *', 'UTC', '2026-02-15T00:00:00Z', '2026-03-15T00:00:00Z', 2, true)).toEqual(['02-21 00:00=00:00Z', '03-01 00:00=00:00Z', '03-11 00:00=00:00Z']);
    expect(fires('0 0 */10 * *', 'UTC', '2026-02-15T00:00:00Z', '2026-03-15T00:00:00Z', 1, true)).not.toContain('03-01 00:00=00:00Z');
    expect(fires('0 12 1,16,31 * *', 'Europe/Berlin', '2026-02-20T00:00:00Z', '2026-05-02T00:00:00Z', 2, true)).toEqual([
      '03-01 12:00=11:00Z',
      '03-16 12:00=11:00Z',
      '03-31 12:00=10:00Z',
      '04-01 12:00=10:00Z',
      '04-16 12:00=10:00Z',
      '05-01 12:00=10:00Z',
    ]);
    expect(fires('0 0 */3 * *', 'UTC', '2028-02-27T00:00:00Z', '2028-03-05T00:00:00Z', 2, true)).toEqual(['02-28 00:00=00:00Z', '03-01 00:00=00:00Z', '03-04 00:00=00:00Z']);
  });

  it('the planner reads the rules off the schedule: absent is rules 1, as stored loops were created', () => {
    const after = u('2026-11-01T04:30:00Z');
    const v1 = { kind: 'cron' as const, expr: '0 * * * *', tz: 'America/New_York' };
    const v2 = { ...v1, rules: 2 as const };
    expect(new Date(nextNominal(v1, u('2026-11-01T05:00:00Z'))!).toISOString()).toBe('2026-11-01T07:00:00.000Z');
    expect(new Date(nextNominal(v2, u('2026-11-01T05:00:00Z'))!).toISOString()).toBe('2026-11-01T06:00:00.000Z');
    const timing = { tz: 'America/New_York', jitterMs: null, startsAt: null, expiresAt: null, maxRuns: null };
    expect(upcomingSlots({ id: 'l', schedule: v2, timing }, after, 3).map((s) => s.slot)).toEqual([
      '2026-11-01T05:00:00.000Z',
      '2026-11-01T06:00:00.000Z',
      '2026-11-01T07:00:00.000Z',
    ]);
  });
});

describe('day of month and day of week (Vixie DOM_STAR / DOW_STAR)', () => {
  const fires = (expr: string, rules: CronRules, n: number) => {
    const out: string[] = [];
    let t = u('2026-06-01T00:00:00Z');
    for (let i = 0; i < n; i++) {
      t = nextCronFire(expr, 'UTC', t, rules)!;
      out.push(new Date(t).toISOString().slice(0, 10));
    }
    return out;
  };
  it('either only when both are restricted; both when one starts with * (rules 2); rules 1 keeps croner\'s either', () => {
    // From 1 June 2026 (exclusive): Mondays that are a 1st, 11th, 21st or 31st are 31 Aug and 21 Sep.
    expect(fires('0 0 */10 * MON', 2, 2)).toEqual(['2026-08-31', '2026-09-21']);
    expect(fires('0 0 */10 * MON', 1, 4)).toEqual(['2026-06-08', '2026-06-11', '2026-06-15', '2026-06-21']);
    // Both restricted: either, under both rules.
    expect(fires('0 0 13 * FRI', 2, 3)).toEqual(['2026-06-05', '2026-06-12', '2026-06-13']);
    expect(fires('0 0 13 * FRI', 1, 3)).toEqual(['2026-06-05', '2026-06-12', '2026-06-13']);
    // One exactly *: the other alone.
    expect(fires('0 0 * * MON', 2, 2)).toEqual(['2026-06-08', '2026-06-15']);
    expect(fires('0 0 1 * *', 2, 2)).toEqual(['2026-07-01', '2026-08-01']);
  });
});

describe('the reference checker (npm run check:cron), short mode', () => {
  it('agrees with the planner ±2 days around every 2026 transition of New York, Lord Howe, Chatham and the skipped day of Apia', () => {
    for (const [tz, years] of [
      ['America/New_York', [2026, 2026]],
      ['Australia/Lord_Howe', [2026, 2026]],
      ['Pacific/Chatham', [2026, 2026]],
      ['Pacific/Apia', [2011, 2011]],
    ] as const) {
      const spans = checker.shortSpans(tz, years);
      expect(spans.length, tz).toBeGreaterThan(0);
      const { fires: count, mismatches } = checker.compareZone(nextNominal, tz, spans);
      expect(mismatches, tz).toEqual([]);
      expect(count).toBeGreaterThan(100);
    }
  });

  it('tells rules 1 from Vixie: the checker finds the differences', () => {
    const v1 = (s: { kind: 'cron'; expr: string; tz: string }, after: number) => nextNominal({ kind: 'cron', expr: s.expr, tz: s.tz }, after);
    const { mismatches } = checker.compareZone(v1, 'America/New_York', checker.shortSpans('America/New_York', [2026, 2026]), ['0 * * * *', '30 * * * *']);
    expect(mismatches.map((m: { expr: string; only: string; at: number }) => `${m.expr} ${m.only} ${new Date(m.at).toISOString()}`).sort()).toEqual([
      '0 * * * * reference 2026-11-01T06:00:00.000Z',
      '30 * * * * loops 2026-03-08T07:00:00.000Z',
      '30 * * * * reference 2026-11-01T06:30:00.000Z',
    ]);
  });
});
