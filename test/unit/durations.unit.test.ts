import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/events/errors.js';
import { formatDuration, parseDuration, parseFlagDuration } from '../../src/events/durations.js';

describe('parseDuration', () => {
  it.each([
    ['500ms', 500],
    ['1s', 1000],
    ['90s', 90_000],
    ['15m', 900_000],
    ['1h', 3_600_000],
    ['1h30m', 5_400_000],
    ['2d', 172_800_000],
    ['1w', 604_800_000],
    ['1.5s', 1500],
    ['1.5h', 5_400_000],
    ['1m500ms', 60_500],
    ['1d2h3m4s5ms', 93_784_005],
    ['  10M ', 600_000],
  ])('%j → %d ms', (input, ms) => {
    expect(parseDuration(input)).toBe(ms);
  });

  it.each(['', '   ', '30', '-5m', 'm', '5 m', '5x', '1s1m', '1m1m', '5mm', 'abc', '1h 30m', '1e3s', '.5s'])(
    'rejects %j with a ValidationError naming the flag',
    (input) => {
      let caught: unknown;
      try {
        parseDuration(input, '--timeout');
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(ValidationError);
      expect((caught as ValidationError).code).toBe('validation');
      expect((caught as Error).message).toMatch(/^--timeout: /);
    },
  );

  it('rejects a zero duration', () => {
    expect(() => parseDuration('0s')).toThrow(/greater than zero/);
    expect(() => parseDuration('0.0001s')).toThrow(/greater than zero/);
  });

  it('a bare number gets a hint with examples', () => {
    try {
      parseDuration('30', '--every');
      expect.unreachable();
    } catch (error) {
      expect((error as ValidationError).hint).toMatch(/15m/);
    }
  });
});

describe('formatDuration', () => {
  it.each([
    [0, '0ms'],
    [250, '250ms'],
    [999, '999ms'],
    [1000, '1s'],
    [1500, '1.5s'],
    [59_000, '59s'],
    [60_000, '1m'],
    [90_000, '1m30s'],
    [3_600_000, '1h'],
    [5_400_000, '1h30m'],
    [86_400_000, '1d'],
    [90_061_000, '1d1h1m1s'],
  ])('%d ms → %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it('rounds up to the next unit instead of printing 60.0s or 1000ms', () => {
    expect(formatDuration(59_999)).toBe('1m');
    expect(formatDuration(59_960)).toBe('1m');
    expect(formatDuration(999.6)).toBe('1s');
  });

  it('round-trips through parseDuration for whole seconds and sub-second ms', () => {
    fc.assert(
      fc.property(fc.oneof(fc.integer({ min: 1, max: 999 }), fc.integer({ min: 1, max: 10_000_000 }).map((s) => s * 1000)), (ms) => {
        expect(parseDuration(formatDuration(ms))).toBe(ms);
      }),
      { numRuns: 300 },
    );
  });

  it('output always parses back to within rounding of the input', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10 * 86_400_000 }), (ms) => {
        const back = parseDuration(formatDuration(ms));
        const tolerance = ms < 1000 ? 0 : ms < 60_000 ? 50 : 500;
        expect(Math.abs(back - ms)).toBeLessThanOrEqual(tolerance);
      }),
      { numRuns: 300 },
    );
  });
});

describe('parseFlagDuration (the flags @hasna/loops users pass)', () => {
  it.each([
    ['5000', 5000],
    [' 250 ', 250],
    ['1.5', 2],
    ['90s', 90_000],
    ['1h30m', 5_400_000],
  ])('%j → %d ms (a bare number is milliseconds, as the predecessor read it)', (input, ms) => {
    expect(parseFlagDuration(input, '--every')).toBe(ms);
  });

  it.each(['', '0', '-5', '5 s', '1e3', 'abc', '.5'])('rejects %j naming the flag', (input) => {
    expect(() => parseFlagDuration(input, '--every')).toThrow(/^--every: /);
  });

  it('says a bare number is milliseconds in its hint; parseDuration (look-back windows, workflow files) still refuses one', () => {
    let caught: unknown;
    try {
      parseFlagDuration('soon', '--every');
    } catch (error) {
      caught = error;
    }
    expect((caught as ValidationError).hint).toMatch(/bare number of milliseconds \(5000\)/);
    expect(() => parseDuration('5000', '--older-than')).toThrow(/^--older-than: invalid duration "5000"/);
  });
});
