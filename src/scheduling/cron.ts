/**
 * Cron next-fire times on the wall clock of any IANA zone. croner is the calculator for the pattern
 * (fields, names, ranges, steps, day-of-month OR day-of-week; the crontab(5) macros are expanded
 * here, `@midnight` included), evaluated on wall-clock time; what a job does when the zone's clock
 * changes depends on the rules its loop was created under (`CronRules`, recorded on the schedule):
 *  - rules 2, Vixie cron: wildcard jobs (minute or hour field starting with `*`) fire only at wall
 *    times that exist and on both passes of a repeated hour; fixed-time jobs fire once at the end of
 *    a DST gap and once (first pass) in a repeated hour; a jump over 3 h skips the jobs inside it.
 *    Stretches of constant offset come from the zone's transition table (zone.ts), cached per year;
 *  - rules 1 (loops created before): every job fixed-time — a nonexistent time fires at the first
 *    valid instant after it, a repeated one once, at its first occurrence.
 * docs/schedules.md says it in plain words; scripts/check-cron.mjs checks rules 2 minute by minute.
 * Patterns are parsed once and kept (parsing costs ~60 µs, a next-run ~10 µs).
 *
 * Pure, croner included: it is used only as a calculator — built `paused` (it never arms a timer)
 * and always asked `nextRun(reference)` with the reference time given by the caller, so it never
 * reads the clock. The same pattern and instant give the same answer on every replay.
 */
import { Cron } from 'croner';
import { ValidationError } from '../events/errors.js';
import { firstTransition, lastTransition, offsetOf, utcToWall, wallToUtc } from './zone.js';

const patterns = new Map<string, Cron>();

/**
 * crontab(5)'s macros. `@reboot` is not a time: it fires once per boot of the host (the daemon's
 * concern, see `isRebootExpr`); `nextCronFire` gives it no wall-clock slot.
 */
export const CRON_MACROS: Readonly<Record<string, string>> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

/** The five fields a macro stands for (`@midnight` → `0 0 * * *`); any other text unchanged. */
export function expandMacro(expr: string): string {
  return CRON_MACROS[expr.trim().toLowerCase()] ?? expr;
}

/** True for `@reboot`: once per boot of the host, not a wall-clock pattern. */
export function isRebootExpr(expr: string): boolean {
  return expr.trim().toLowerCase() === '@reboot';
}

const REBOOT_PLACEHOLDER = '0 0 31 2 *'; // never matches: @reboot has no wall-clock slot

/**
 * Parses (and caches) a cron pattern; throws a ValidationError naming the problem. `@reboot` is
 * accepted under rules 2 only (loops created before it existed never hold it).
 */
export function parseCronPattern(expr: string, flag = '--cron', rules: CronRules = 1): Cron {
  if (isRebootExpr(expr)) {
    if (rules < 2) {
      throw new ValidationError(`${flag}: invalid expression ${JSON.stringify(expr)}: @reboot is not a time pattern`, {
        hint: '@reboot fires once per boot of the host; it is only accepted when a loop is created',
      });
    }
    return parseCronPattern(REBOOT_PLACEHOLDER, flag);
  }
  const key = `${rules}|${expr}`;
  let cron = patterns.get(key);
  if (cron) return cron;
  const text = expandMacro(expr.trim());
  const fields = text.trim().split(/\s+/).length;
  if (text.trim().startsWith('@')) {
    throw new ValidationError(`${flag}: invalid expression ${JSON.stringify(expr)}: unknown macro`, {
      hint: `use one of ${Object.keys(CRON_MACROS).join(', ')}, or five fields such as '0 3 * * *'`,
    });
  }
  if (fields < 5 || fields > 6) {
    throw new ValidationError(`${flag}: ${JSON.stringify(expr)} has ${fields} field(s); expected 5 (or 6 with seconds)`, {
      hint: "minute hour day-of-month month day-of-week, e.g. '0 3 * * *'",
    });
  }
  if (text.includes('?')) {
    // croner replaces `?` with the current time when the pattern is parsed: the schedule would change with every restart.
    throw new ValidationError(`${flag}: "?" is not supported in ${JSON.stringify(expr)}`, {
      hint: "use * for any value, e.g. '0 3 * * MON' rather than '0 3 ? * MON'",
    });
  }
  try {
    // Evaluated on wall-clock time read as UTC; the zone is applied by wallToUtc. `utcOffset: 0`
    // rather than `timezone: 'UTC'`: the same times, without croner's per-call Intl work (~40× faster).
    cron = new Cron(text.trim(), { utcOffset: 0, paused: true, legacyMode: eitherDay(text, rules) });
  } catch (error) {
    throw new ValidationError(`${flag}: invalid expression ${JSON.stringify(expr)}: ${(error as Error).message}`, {
      hint: "minute hour day-of-month month day-of-week, e.g. '*/15 * * * *' or '0 3 * * MON-FRI'",
    });
  }
  patterns.set(key, cron);
  return cron;
}

/**
 * Whether day-of-month and day-of-week mean "either" (croner's legacy mode) rather than "both".
 * Vixie cron (rules 2): either only when both fields are restricted — neither starts with `*` —
 * so a day-of-month step over `*` (every tenth day) with day-of-week MON is a Monday that is the
 * 1st, 11th, 21st or 31st (Vixie's DOM_STAR), not every Monday plus those days. Rules 1 keeps croner's reading (either unless one field is exactly `*`).
 */
function eitherDay(text: string, rules: CronRules): boolean {
  if (rules < 2) return true;
  const f = text.trim().split(/\s+/);
  const [dom, dow] = f.length === 6 ? [f[3]!, f[5]!] : [f[2]!, f[4]!];
  return !dom.startsWith('*') && !dow.startsWith('*');
}

/**
 * The cron rules a loop was created under (recorded on its schedule as `rules`; absent = 1), so a
 * stored loop keeps the meaning it was created with:
 *  - 1 (loops 0.1): every job is a fixed-time job across DST — a nonexistent time fires at the first
 *    valid instant after the gap, a repeated one once (its first occurrence);
 *  - 2: Vixie cron's rules (see `nextCronFire`), `@midnight`, and skipped calendar days.
 */
export type CronRules = 1 | 2;
/** The rules new cron loops are created with. */
export const CRON_RULES = 2 as const satisfies CronRules;

/** A wall-clock jump larger than this is a clock change, not DST (Vixie's and Debian's cron): the jobs inside are skipped. */
export const MAX_DST_SHIFT_MS = 3 * 3_600_000;

/**
 * Vixie's MIN_STAR / HR_STAR: a job whose minute or hour field starts with `*` (`0 * * * *`,
 * `*​/15 * * * *`, `@hourly`) is a "wildcard" job — across DST it fires only at wall times that
 * exist, on both passes of a repeated hour. Any other job is a fixed-time job.
 */
export function isWildcardCron(expr: string): boolean {
  const text = expandMacro(expr.trim());
  const fields = text.split(/\s+/);
  const [minute, hour] = fields.length === 6 ? fields.slice(1) : fields;
  return (minute ?? '').startsWith('*') || (hour ?? '').startsWith('*');
}

/**
 * The first fire instant strictly after `afterMs` for `expr` in `tz`, or null if there is none.
 *
 * Rules 2 (Vixie cron, in plain words): wall-clock times are matched in the loop's zone, and when
 * the zone's clock changes,
 *  - a clock that jumps forward by at most 3 hours (DST starts): a fixed-time job due in the skipped
 *    times fires once at the first instant after the jump; a wildcard job (minute or hour field
 *    starting with `*`) fires only at wall times that exist;
 *  - a clock that goes back by at most 3 hours (DST ends): a fixed-time job fires once, on the first
 *    pass; a wildcard job fires on both passes of the repeated times;
 *  - a jump of more than 3 hours (a zone moving across the date line, which can skip a whole
 *    calendar day): the skipped times fire nothing; repeated times fire again for every job.
 */
export function nextCronFire(expr: string, tz: string, afterMs: number, rules: CronRules = 1): number | null {
  if (rules === 1) return nextFirstOccurrence(expr, tz, afterMs);
  const cron = parseCronPattern(expr, '--cron', rules);
  if (isRebootExpr(expr)) return null;
  const wild = isWildcardCron(expr);
  // The current stretch of constant offset: instants after `from`, read with `offset`.
  let from = afterMs;
  let offset = offsetOf(afterMs, tz);
  // Times repeated after a recent step back of at most 3 h: [repeatFrom, repeatTo) in wall time.
  const recent = lastTransition(tz, afterMs - MAX_DST_SHIFT_MS, afterMs);
  let repeatTo = recent && recent.before > recent.after ? recent.at + recent.before : -Infinity;
  let repeatShift = recent ? recent.before - recent.after : 0;
  let bound = from + offset; // wall times strictly after this one
  for (let guard = 0; guard < 100_000; guard++) {
    const w = nextWall(cron, bound);
    if (w === null) return null;
    const candidate = w - offset;
    const change = firstTransition(tz, from, candidate);
    if (change === null) {
      const repeated = w < repeatTo && repeatShift > 0 && repeatShift <= MAX_DST_SHIFT_MS;
      if (!repeated || wild) return candidate;
      bound = w;
      continue;
    }
    // The clock changes at `change.at`, at or before the candidate.
    const shift = change.after - change.before;
    if (shift > 0 && shift <= MAX_DST_SHIFT_MS && !wild) {
      // DST gap: a fixed-time job due in the skipped wall times [at + before, at + after) fires at `at`.
      const skipped = nextWall(cron, change.at + change.before - 1);
      if (skipped !== null && skipped < change.at + change.after) return change.at;
    }
    from = change.at;
    offset = change.after;
    repeatTo = shift < 0 ? change.at + change.before : -Infinity;
    repeatShift = -shift;
    bound = change.at + change.after - 1;
  }
  return null;
}

/**
 * The first wall time after `afterWall` that matches. Works around croner 9.1.0 skipping the first
 * days of a month after a short one (`*​/10` → 1, 11, 21, 31: from 21 February it looks for the 31st,
 * overflows into March and misses 1 March; also `1,16,31`, `L` with a day-of-week, …): when the
 * answer lies in a later month, the search is repeated from the end of the month before it, where
 * there is nothing to overflow. Rules 2 only: rules 1 keeps croner's answers as they were.
 */
function nextWall(cron: Cron, afterWall: number): number | null {
  let best = cron.nextRun(new Date(afterWall))?.getTime() ?? null;
  let from = afterWall;
  for (let guard = 0; guard < 48 && best !== null; guard++) {
    const d = new Date(from);
    const monthEnd = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) - 1;
    if (best <= monthEnd) break;
    const retry = cron.nextRun(new Date(monthEnd))?.getTime() ?? null;
    if (retry !== null && retry < best) best = retry;
    from = monthEnd + 1;
  }
  return best;
}

/** Rules 1: every job fixed-time, first occurrence of a repeated time, a skipped time at the end of its gap. */
function nextFirstOccurrence(expr: string, tz: string, afterMs: number): number | null {
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
