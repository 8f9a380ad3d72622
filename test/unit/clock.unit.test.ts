import { describe, expect, it } from 'vitest';
import { SimulatedClock, isoNow } from '../../src/runtime/clock.js';
import { newId } from '../../src/runtime/ids.js';

describe('SimulatedClock', () => {
  it('only moves when told to', () => {
    const clock = new SimulatedClock('2026-01-01T00:00:00.000Z');
    expect(isoNow(clock)).toBe('2026-01-01T00:00:00.000Z');
    expect(clock.monotonic()).toBe(0);
    clock.advance(1500);
    expect(isoNow(clock)).toBe('2026-01-01T00:00:01.500Z');
    expect(clock.monotonic()).toBe(1500);
  });

  it('fires due timers in due order, with the clock at each timer’s due time', () => {
    const clock = new SimulatedClock(0);
    const fired: Array<[string, number]> = [];
    clock.setTimeout(() => fired.push(['b', clock.monotonic()]), 200);
    clock.setTimeout(() => fired.push(['a', clock.monotonic()]), 100);
    const late = clock.setTimeout(() => fired.push(['late', clock.monotonic()]), 1000);
    clock.advance(150);
    expect(fired).toEqual([['a', 100]]);
    clock.advance(100);
    expect(fired).toEqual([
      ['a', 100],
      ['b', 200],
    ]);
    clock.clearTimeout(late);
    clock.advance(10_000);
    expect(fired.map(([n]) => n)).toEqual(['a', 'b']);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('a timer armed by a timer within the same advance fires too', () => {
    const clock = new SimulatedClock(0);
    const fired: number[] = [];
    clock.setTimeout(() => {
      fired.push(clock.monotonic());
      clock.setTimeout(() => fired.push(clock.monotonic()), 50);
    }, 100);
    clock.advance(200);
    expect(fired).toEqual([100, 150]);
    expect(clock.now()).toBe(200);
  });

  it('jumpWall moves wall time only', () => {
    const clock = new SimulatedClock(1000);
    clock.jumpWall(-500);
    expect(clock.now()).toBe(500);
    expect(clock.monotonic()).toBe(0);
  });
});

describe('newId', () => {
  it('is prefixed, time-sortable and unique', () => {
    const a = newId('run', 1_000);
    const b = newId('run', 2_000);
    expect(a).toMatch(/^run_[0-9a-z]{22}$/);
    expect(a < b).toBe(true);
    // Past several refills of the random pool (256 ids each): no id repeats.
    expect(new Set(Array.from({ length: 1000 }, () => newId('x', 5))).size).toBe(1000);
  });
});
