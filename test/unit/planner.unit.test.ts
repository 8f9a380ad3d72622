/**
 * planner.ts: nominal slots of each schedule kind, deterministic jitter, and the bounds
 * (starts-at, expires-at, max-runs) — pure functions, so the scheduler, `loops next` and a replay
 * agree. Examples plus properties over random schedules and bounds.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Schedule, Timing } from '../../src/events/catalog.js';
import { jitterFor, nextFireAt, nextNominal, upcomingSlots, type Plannable } from '../../src/scheduling/planner.js';
import { timing } from '../helpers/events.js';

const MIN = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const BASE = Date.parse('2026-06-15T10:00:00.000Z');
const u = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString();

const every = (everyMs: number, anchorAt = BASE): Schedule => ({ kind: 'every', everyMs, anchorAt: iso(anchorAt), anchor: 'fixed-rate' });
const loop = (schedule: Schedule, t: Partial<Timing> = {}, id = 'loop_1'): Plannable => ({ id, schedule, timing: timing(t) });
const slotsOf = (l: Plannable, after: number, count: number, runsSoFar = 0) => upcomingSlots(l, after, count, runsSoFar).map((s) => s.slot);

/** Reference FNV-1a (32 bit) over UTF-16 code units. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

/** The documented jitter: the hash of "loopId|slot", in whole seconds when the jitter is a second or more. */
function referenceJitter(loopId: string, slot: string, jitterMs: number): number {
  const hash = fnv1a(`${loopId}|${slot}`);
  return jitterMs % 1000 === 0 ? (hash % (jitterMs / 1000)) * 1000 : hash % jitterMs;
}

describe('nextNominal', () => {
  it('every (fixed-rate): the anchor while before it, then the next grid point strictly after', () => {
    const s = every(MIN);
    expect(nextNominal(s, BASE - 5000)).toBe(BASE);
    expect(nextNominal(s, BASE - 1)).toBe(BASE);
    expect(nextNominal(s, BASE)).toBe(BASE + MIN);
    expect(nextNominal(s, BASE + 59_999)).toBe(BASE + MIN);
    expect(nextNominal(s, BASE + MIN)).toBe(BASE + 2 * MIN);
    expect(nextNominal(s, BASE + 10 * DAY + 1)).toBe(BASE + 10 * DAY + MIN);
  });

  it('every: property — on the grid, strictly after, at most one interval later', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 7 * DAY }),
        fc.integer({ min: -30 * DAY, max: 30 * DAY }),
        fc.integer({ min: -30 * DAY, max: 30 * DAY }),
        (everyMs, anchorOffset, afterOffset) => {
          const anchor = BASE + anchorOffset;
          const after = BASE + afterOffset;
          const next = nextNominal(every(everyMs, anchor), after)!;
          expect(next).toBeGreaterThan(after);
          expect((next - anchor) % everyMs).toBe(0);
          expect(next).toBeGreaterThanOrEqual(anchor);
          if (after >= anchor) expect(next - after).toBeLessThanOrEqual(everyMs);
          else expect(next).toBe(anchor);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('cron: in its zone, strictly after', () => {
    const s: Schedule = { kind: 'cron', expr: '0 3 * * *', tz: 'Europe/Berlin' };
    expect(iso(nextNominal(s, u('2026-07-01T00:59:59.999Z'))!)).toBe('2026-07-01T01:00:00.000Z');
    expect(iso(nextNominal(s, u('2026-07-01T01:00:00.000Z'))!)).toBe('2026-07-02T01:00:00.000Z');
    expect(nextNominal({ kind: 'cron', expr: '0 0 31 2 *', tz: 'UTC' }, BASE)).toBeNull();
  });

  it('at: once, while in the future', () => {
    const s: Schedule = { kind: 'at', at: iso(BASE + HOUR) };
    expect(nextNominal(s, BASE)).toBe(BASE + HOUR);
    expect(nextNominal(s, BASE + HOUR - 1)).toBe(BASE + HOUR);
    expect(nextNominal(s, BASE + HOUR)).toBeNull();
  });

  it('manual: never', () => {
    expect(nextNominal({ kind: 'manual' }, BASE)).toBeNull();
  });
});

describe('jitterFor', () => {
  const slot = iso(BASE);

  it('is FNV-1a of "loopId|slot" — a stable formula, since replays recompute it', () => {
    expect(fnv1a('')).toBe(0x811c9dc5);
    expect(fnv1a('a')).toBe(0xe40c292c);
    expect(fnv1a('foobar')).toBe(0xbf9cf968);
    expect(jitterFor('loop_1', slot, 30_000)).toBe((fnv1a(`loop_1|${slot}`) % 30) * 1000);
    expect(jitterFor('loop_1', slot, 700)).toBe(fnv1a(`loop_1|${slot}`) % 700);
  });

  it('is whole seconds for a whole-second jitter, milliseconds otherwise (1999 ms is not always 0)', () => {
    const slots = Array.from({ length: 50 }, (_, i) => iso(BASE + i * MIN));
    expect(slots.every((s) => jitterFor('loop_1', s, 90_000) % 1000 === 0)).toBe(true);
    expect(slots.some((s) => jitterFor('loop_1', s, 90_500) % 1000 !== 0)).toBe(true);
    expect(slots.some((s) => jitterFor('loop_1', s, 1999) !== 0)).toBe(true);
    expect(slots.some((s) => jitterFor('loop_1', s, 999) % 1000 !== 0)).toBe(true);
  });

  it('no jitter is zero', () => {
    expect(jitterFor('loop_1', slot, null)).toBe(0);
    expect(jitterFor('loop_1', slot, 0)).toBe(0);
    expect(jitterFor('loop_1', slot, 1)).toBe(0);
  });

  it('property: deterministic, in [0, jitter), the documented formula', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 30 }), fc.integer({ min: 0, max: 4_000_000_000_000 }), fc.integer({ min: 1, max: 7 * DAY }), (id, t, j) => {
        const s = iso(t);
        const a = jitterFor(id, s, j);
        expect(Number.isInteger(a)).toBe(true);
        expect(a).toBeGreaterThanOrEqual(0);
        expect(a).toBeLessThan(j);
        expect(jitterFor(id, s, j)).toBe(a);
        expect(a).toBe(referenceJitter(id, s, j));
        if (j % 1000 === 0) expect(a % 1000).toBe(0);
      }),
      { numRuns: 300 },
    );
  });

  it('spreads across slots and loops', () => {
    const slots = Array.from({ length: 200 }, (_, i) => iso(BASE + i * MIN));
    const values = slots.map((s) => jitterFor('loop_1', s, MIN));
    expect(new Set(values).size).toBeGreaterThan(50); // of the 60 whole seconds
    // Roughly uniform: both halves of the range are used.
    expect(values.filter((v) => v < MIN / 2).length).toBeGreaterThan(60);
    expect(values.filter((v) => v >= MIN / 2).length).toBeGreaterThan(60);
    const otherLoop = slots.map((s) => jitterFor('loop_2', s, MIN));
    expect(otherLoop.filter((v, i) => v !== values[i]).length).toBeGreaterThan(180);
  });
});

describe('upcomingSlots', () => {
  it('every: consecutive grid points; fireAt = slot without jitter', () => {
    expect(upcomingSlots(loop(every(MIN)), BASE + 90_000, 3)).toEqual([
      { slot: iso(BASE + 2 * MIN), fireAt: iso(BASE + 2 * MIN) },
      { slot: iso(BASE + 3 * MIN), fireAt: iso(BASE + 3 * MIN) },
      { slot: iso(BASE + 4 * MIN), fireAt: iso(BASE + 4 * MIN) },
    ]);
    expect(upcomingSlots(loop(every(MIN)), BASE, 0)).toEqual([]);
  });

  it('jitter delays fireAt, never the slot (the slot stays the identity)', () => {
    const l = loop(every(HOUR), { jitterMs: 10 * MIN });
    const planned = upcomingSlots(l, BASE, 50);
    expect(planned.map((p) => p.slot)).toEqual(slotsOf(loop(every(HOUR)), BASE, 50));
    for (const p of planned) {
      const delay = Date.parse(p.fireAt) - Date.parse(p.slot);
      expect(delay).toBe(jitterFor('loop_1', p.slot, 10 * MIN));
      expect(delay).toBeGreaterThanOrEqual(0);
      expect(delay).toBeLessThan(10 * MIN);
    }
    expect(new Set(planned.map((p) => Date.parse(p.fireAt) - Date.parse(p.slot))).size).toBeGreaterThan(40);
    // Same loop, same slots: same times (a replay agrees); another loop: different ones.
    expect(upcomingSlots(l, BASE, 50)).toEqual(planned);
    expect(upcomingSlots({ ...l, id: 'loop_2' }, BASE, 50).map((p) => p.fireAt)).not.toEqual(planned.map((p) => p.fireAt));
  });

  it('starts-at: no slot before it; on the grid a slot exactly at it', () => {
    const startsAt = BASE + DAY;
    expect(slotsOf(loop(every(HOUR, startsAt), { startsAt: iso(startsAt) }), BASE, 2)).toEqual([iso(startsAt), iso(startsAt + HOUR)]);
    // Grid anchored elsewhere: the first grid point at or after starts-at.
    expect(slotsOf(loop(every(HOUR), { startsAt: iso(BASE + 90 * MIN) }), BASE, 2)).toEqual([iso(BASE + 2 * HOUR), iso(BASE + 3 * HOUR)]);
    expect(slotsOf(loop(every(HOUR), { startsAt: iso(BASE + 2 * HOUR) }), BASE, 1)).toEqual([iso(BASE + 2 * HOUR)]);
    // Once past starts-at it no longer matters.
    expect(slotsOf(loop(every(HOUR), { startsAt: iso(BASE - DAY) }), BASE + 30 * MIN, 1)).toEqual([iso(BASE + HOUR)]);
    // Cron: the first fire at or after starts-at.
    const cron: Schedule = { kind: 'cron', expr: '0 3 * * *', tz: 'UTC' };
    expect(slotsOf(loop(cron, { startsAt: '2026-06-20T03:00:00.000Z' }), BASE, 2)).toEqual(['2026-06-20T03:00:00.000Z', '2026-06-21T03:00:00.000Z']);
    expect(slotsOf(loop(cron, { startsAt: '2026-06-20T03:00:00.001Z' }), BASE, 1)).toEqual(['2026-06-21T03:00:00.000Z']);
  });

  it('expires-at: a slot exactly at it is the last one', () => {
    const l = loop(every(HOUR), { expiresAt: iso(BASE + 3 * HOUR) });
    expect(slotsOf(l, BASE, 10)).toEqual([iso(BASE + HOUR), iso(BASE + 2 * HOUR), iso(BASE + 3 * HOUR)]);
    expect(slotsOf(l, BASE + 3 * HOUR, 10)).toEqual([]);
    expect(nextFireAt(l, BASE + 3 * HOUR)).toBeNull();
    expect(slotsOf(loop(every(HOUR), { expiresAt: iso(BASE + 3 * HOUR - 1) }), BASE, 10)).toHaveLength(2);
    // With jitter, expiry bounds the slot, not its jittered fire time.
    const jittered = upcomingSlots(loop(every(HOUR), { expiresAt: iso(BASE + HOUR), jitterMs: 30 * MIN }), BASE, 10);
    expect(jittered.map((p) => p.slot)).toEqual([iso(BASE + HOUR)]);
  });

  it('max-runs: counts the runs already made', () => {
    const l = loop(every(MIN), { maxRuns: 3 });
    expect(slotsOf(l, BASE, 10)).toHaveLength(3);
    expect(slotsOf(l, BASE, 10, 1)).toEqual([iso(BASE + MIN), iso(BASE + 2 * MIN)]);
    expect(slotsOf(l, BASE, 1, 1)).toHaveLength(1);
    expect(slotsOf(l, BASE, 10, 3)).toEqual([]);
    expect(slotsOf(l, BASE, 10, 7)).toEqual([]);
    expect(nextFireAt(l, BASE, 3)).toBeNull();
    expect(nextFireAt(l, BASE, 2)).toBe(iso(BASE + MIN));
  });

  it('starts-at, expires-at and max-runs together: whichever bound is reached first', () => {
    const l = loop(every(HOUR), { startsAt: iso(BASE + 2 * HOUR), expiresAt: iso(BASE + 10 * HOUR), maxRuns: 5 });
    expect(slotsOf(l, BASE, 100)).toEqual([2, 3, 4, 5, 6].map((h) => iso(BASE + h * HOUR)));
    expect(slotsOf(l, BASE + 7 * HOUR, 100, 1)).toEqual([8, 9, 10].map((h) => iso(BASE + h * HOUR)));
  });

  it('cron in a zone, across a DST change', () => {
    const l = loop({ kind: 'cron', expr: '30 2 * * *', tz: 'Europe/Berlin' }, { tz: 'Europe/Berlin' });
    expect(slotsOf(l, u('2026-03-27T12:00:00Z'), 3)).toEqual([
      '2026-03-28T01:30:00.000Z', // 02:30 CET
      '2026-03-29T01:00:00.000Z', // 02:30 does not exist: 03:00 CEST
      '2026-03-30T00:30:00.000Z', // 02:30 CEST
    ]);
  });

  it('at: one slot, jittered like any other, then none', () => {
    const at = BASE + HOUR;
    const l = loop({ kind: 'at', at: iso(at) }, { jitterMs: MIN });
    const planned = upcomingSlots(l, BASE, 5);
    expect(planned).toHaveLength(1);
    expect(planned[0]!.slot).toBe(iso(at));
    expect(planned[0]!.fireAt).toBe(iso(at + jitterFor('loop_1', iso(at), MIN)));
    expect(upcomingSlots(l, at, 5)).toEqual([]);
    // An `at` before starts-at or after expires-at never fires.
    expect(slotsOf(loop({ kind: 'at', at: iso(at) }, { startsAt: iso(at + 1) }), BASE, 5)).toEqual([]);
    expect(slotsOf(loop({ kind: 'at', at: iso(at) }, { expiresAt: iso(at - 1) }), BASE, 5)).toEqual([]);
  });

  it('manual: nothing, ever', () => {
    expect(upcomingSlots(loop({ kind: 'manual' }), BASE, 10)).toEqual([]);
    expect(nextFireAt(loop({ kind: 'manual' }), BASE)).toBeNull();
  });
});

describe('upcomingSlots properties', () => {
  const schedule: fc.Arbitrary<Schedule> = fc.oneof(
    { weight: 4, arbitrary: fc.tuple(fc.integer({ min: 1000, max: DAY }), fc.integer({ min: -10 * DAY, max: 10 * DAY })).map(([e, a]) => every(e, BASE + a)) },
    {
      weight: 2,
      arbitrary: fc
        .tuple(
          fc.constantFrom('*/15 * * * *', '0 3 * * *', '30 2 * * *', '0 9 * * MON-FRI', '0 0 1 * *', '*/20 * * * * *'),
          fc.constantFrom('UTC', 'Europe/Berlin', 'America/New_York', 'Australia/Lord_Howe', 'Pacific/Chatham'),
        )
        .map(([expr, tz]) => ({ kind: 'cron' as const, expr, tz })),
    },
    { weight: 1, arbitrary: fc.integer({ min: -5 * DAY, max: 20 * DAY }).map((d) => ({ kind: 'at' as const, at: iso(BASE + d) })) },
    { weight: 1, arbitrary: fc.constant({ kind: 'manual' as const }) },
  );

  const plannable: fc.Arbitrary<Plannable> = fc
    .record({
      id: fc.constantFrom('loop_1', 'loop_2', 'loop_xyz'),
      schedule,
      startsAt: fc.option(fc.integer({ min: -5 * DAY, max: 10 * DAY }), { nil: null }),
      length: fc.option(fc.integer({ min: 1, max: 20 * DAY }), { nil: null }),
      maxRuns: fc.option(fc.integer({ min: 1, max: 12 }), { nil: null }),
      jitter: fc.option(fc.integer({ min: 1, max: HOUR }), { nil: null }),
    })
    .map(({ id, schedule: s, startsAt, length, maxRuns, jitter }) => {
      const start = startsAt === null ? null : BASE + startsAt;
      const expiresAt = length === null ? null : (start ?? BASE) + length;
      // As buildSchedule enforces: a jitter shorter than the interval.
      const jitterMs = jitter === null ? null : s.kind === 'every' ? Math.min(jitter, s.everyMs - 1) : jitter;
      return loop(s, { startsAt: start === null ? null : iso(start), expiresAt: expiresAt === null ? null : iso(expiresAt), maxRuns, jitterMs }, id);
    });

  const query = fc.record({
    after: fc.integer({ min: -6 * DAY, max: 12 * DAY }).map((d) => BASE + d),
    count: fc.integer({ min: 0, max: 15 }),
    runsSoFar: fc.integer({ min: 0, max: 14 }),
  });

  it('every slot is within the bounds, strictly increasing, after the reference; at most count and maxRuns − runsSoFar', () => {
    fc.assert(
      fc.property(plannable, query, (l, { after, count, runsSoFar }) => {
        const planned = upcomingSlots(l, after, count, runsSoFar);
        const { startsAt, expiresAt, maxRuns, jitterMs } = l.timing;
        expect(planned.length).toBeLessThanOrEqual(count);
        if (maxRuns !== null) expect(planned.length).toBeLessThanOrEqual(Math.max(0, maxRuns - runsSoFar));
        let previous = after;
        for (const { slot, fireAt } of planned) {
          const t = Date.parse(slot);
          expect(t).toBeGreaterThan(previous);
          if (startsAt !== null) expect(t).toBeGreaterThanOrEqual(Date.parse(startsAt));
          if (expiresAt !== null) expect(t).toBeLessThanOrEqual(Date.parse(expiresAt));
          const delay = Date.parse(fireAt) - t;
          expect(delay).toBe(jitterFor(l.id, slot, jitterMs));
          expect(delay).toBeGreaterThanOrEqual(0);
          if (jitterMs !== null) expect(delay).toBeLessThan(jitterMs);
          else expect(delay).toBe(0);
          previous = t;
        }
        if (l.schedule.kind === 'every' && jitterMs !== null) {
          // A jitter shorter than the interval keeps fire times in slot order.
          const fires = planned.map((p) => Date.parse(p.fireAt));
          expect(fires).toEqual([...fires].sort((a, b) => a - b));
        }
        expect(nextFireAt(l, after, runsSoFar)).toBe(upcomingSlots(l, after, 1, runsSoFar)[0]?.fireAt ?? null);
      }),
      { numRuns: 300 },
    );
  });

  it('nothing is skipped: the slots are the consecutive nominal times from max(after, starts-at), stopping only at a bound', () => {
    fc.assert(
      fc.property(plannable, query, (l, { after, count, runsSoFar }) => {
        const planned = slotsOf(l, after, count, runsSoFar).map(Date.parse);
        const { startsAt, expiresAt, maxRuns } = l.timing;
        const from = startsAt === null ? after : Math.max(after, Date.parse(startsAt) - 1);
        let cursor = from;
        for (const t of planned) {
          expect(t).toBe(nextNominal(l.schedule, cursor));
          cursor = t;
        }
        const left = maxRuns === null ? Infinity : Math.max(0, maxRuns - runsSoFar);
        if (planned.length < Math.min(count, left)) {
          // Stopped early: the schedule has nothing more within expires-at.
          const next = nextNominal(l.schedule, cursor);
          expect(next === null || (expiresAt !== null && next > Date.parse(expiresAt))).toBe(true);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('planning is consistent: a shorter plan is a prefix, and planning again after each slot continues the same list', () => {
    fc.assert(
      fc.property(plannable, query, fc.integer({ min: 0, max: 5 }), (l, { after, count, runsSoFar }, fewer) => {
        const planned = upcomingSlots(l, after, count, runsSoFar);
        expect(upcomingSlots(l, after, Math.max(0, count - fewer), runsSoFar)).toEqual(planned.slice(0, Math.max(0, count - fewer)));
        planned.forEach((p, i) => {
          // After the i-th slot has run: one more run made, reference moved to that slot.
          const rest = upcomingSlots(l, Date.parse(p.slot), count - i - 1, runsSoFar + i + 1);
          expect(rest).toEqual(planned.slice(i + 1));
        });
      }),
      { numRuns: 100 },
    );
  });
});
