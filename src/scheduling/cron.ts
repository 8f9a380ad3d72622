/**
 * Cron next-fire times with standard (Vixie) wall-clock semantics in any IANA zone. croner is
 * the calculator for the pattern (fields, names, macros, ranges, steps, day-of-month OR
 * day-of-week), evaluated on wall-clock time; `zone.ts` maps wall time to instants:
 *  - a time that does not exist (the DST gap) fires at the first valid instant after it;
 *  - a time that exists twice (the DST overlap) fires once, at its first occurrence.
 * Patterns are parsed once and kept (parsing costs ~60 µs, a next-run ~10 µs).
 *
 * Pure, croner included: it is used only as a calculator — built `paused` (it never arms a timer)
 * and always asked `nextRun(reference)` with the reference time given by the caller, so it never
 * reads the clock. The same pattern and instant give the same answer on every replay.
 */
import { Cron } from 'croner';
import { ValidationError } from '../events/errors.js';
import { utcToWall, wallToUtc } from './zone.js';

const patterns = new Map<string, Cron>();

/** Parses (and caches) a cron pattern; throws a ValidationError naming the problem. */
export function parseCronPattern(expr: string, flag = '--cron'): Cron {
  let cron = patterns.get(expr);
  if (cron) return cron;
  const fields = expr.trim().split(/\s+/).length;
  if (!expr.trim().startsWith('@') && (fields < 5 || fields > 6)) {
    throw new ValidationError(`${flag}: ${JSON.stringify(expr)} has ${fields} field(s); expected 5 (or 6 with seconds)`, {
      hint: "minute hour day-of-month month day-of-week, e.g. '0 3 * * *'",
    });
  }
  if (expr.includes('?')) {
    // croner replaces `?` with the current time when the pattern is parsed: the schedule would change with every restart.
    throw new ValidationError(`${flag}: "?" is not supported in ${JSON.stringify(expr)}`, {
      hint: "use * for any value, e.g. '0 3 * * MON' rather than '0 3 ? * MON'",
    });
  }
  try {
    // Evaluated on wall-clock time read as UTC; the zone is applied by wallToUtc. `utcOffset: 0`
    // rather than `timezone: 'UTC'`: the same times, without croner's per-call Intl work (~40× faster).
    cron = new Cron(expr.trim(), { utcOffset: 0, paused: true });
  } catch (error) {
    throw new ValidationError(`${flag}: invalid expression ${JSON.stringify(expr)}: ${(error as Error).message}`, {
      hint: "minute hour day-of-month month day-of-week, e.g. '*/15 * * * *' or '0 3 * * MON-FRI'",
    });
  }
  patterns.set(expr, cron);
  return cron;
}

/** The first fire instant strictly after `afterMs` for `expr` in `tz`, or null if there is none. */
export function nextCronFire(expr: string, tz: string, afterMs: number): number | null {
  const cron = parseCronPattern(expr);
  // wallToUtc is non-decreasing and the wall time at `afterMs` maps to an instant ≤ `afterMs`, so no
  // earlier wall time can fire after it: start from the wall time now.
  let cursor = utcToWall(afterMs, tz);
  // In the second pass of a DST overlap the repeated wall times already fired (first occurrence):
  // start from the last wall time that maps to `afterMs` or before (the end of the overlap).
  if (wallToUtc(cursor, tz) < afterMs) {
    let hi = cursor + 3 * 3_600_000; // past the overlap: the largest DST shift is 2 h
    while (hi - cursor > 1) {
      const mid = Math.floor((cursor + hi) / 2);
      if (wallToUtc(mid, tz) <= afterMs) cursor = mid;
      else hi = mid;
    }
  }
  for (let guard = 0; guard < 1000; guard++) {
    const next = cron.nextRun(new Date(cursor));
    if (!next) return null;
    const wall = next.getTime();
    const instant = wallToUtc(wall, tz);
    if (instant > afterMs) return instant;
    cursor = wall;
  }
  return null;
}
