import { ValidationError } from './errors.js';

const UNITS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};

/**
 * The longest duration loops takes (100 years): longer ones are typos, and past the range of a
 * date (and of a timer) they would fail where they are used, not where they were given.
 */
export const MAX_DURATION_MS = 5200 * UNITS.w!;

/**
 * Parses `500ms`, `90s`, `15m`, `1h30m`, `2d`, `1w` (units may be combined, largest first).
 * A bare number is rejected: `--older-than 30` is ambiguous. At most `max` ({@link MAX_DURATION_MS};
 * a look-back window — `--since`, `--older-than` — checks its own range and passes Infinity).
 */
export function parseDuration(input: string, flag = 'duration', max = MAX_DURATION_MS): number {
  return parse(input, flag, max, false);
}

/**
 * Like {@link parseDuration}, and a bare number is milliseconds (`5000` = 5 s, `1.5` = 2 ms
 * rounded), as `@hasna/loops` read every duration: for the flags its users pass (`--every`,
 * `--timeout`, `--retry-delay`, `--lease`, … of `create`). Look-back windows and workflow files
 * keep refusing a bare number.
 */
export function parseFlagDuration(input: string, flag = 'duration', max = MAX_DURATION_MS): number {
  return parse(input, flag, max, true);
}

function parse(input: string, flag: string, max: number, bareMs: boolean): number {
  const trimmed = input.trim().toLowerCase();
  const text = bareMs && /^\d+(?:\.\d+)?$/.test(trimmed) ? `${trimmed}ms` : trimmed;
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d|w)/gy;
  let total = 0;
  let matched = 0;
  let lastUnit = Infinity;
  let m: RegExpExecArray | null;
  while ((m = re.exec(text)) !== null) {
    const unit = UNITS[m[2]!]!;
    if (unit >= lastUnit) break;
    lastUnit = unit;
    total += Number(m[1]) * unit;
    matched = re.lastIndex;
  }
  if (text === '' || matched !== text.length) {
    throw new ValidationError(`${flag}: invalid duration ${JSON.stringify(input)}`, {
      hint: bareMs
        ? 'use a number with a unit, e.g. 500ms, 90s, 15m, 1h30m, 2d, or a bare number of milliseconds (5000)'
        : 'use a number with a unit, e.g. 500ms, 90s, 15m, 1h30m, 2d',
    });
  }
  const ms = Math.round(total);
  if (ms <= 0) throw new ValidationError(`${flag}: duration must be greater than zero, got ${JSON.stringify(input)}`);
  if (ms > max) throw new ValidationError(`${flag}: ${JSON.stringify(input)} is longer than 5200w (100 years), the longest duration loops takes`);
  return ms;
}

/** 90000 → `1m30s`; 1500 → `1.5s`; 250 → `250ms`. */
export function formatDuration(ms: number): string {
  if (Math.round(ms) < 1000) return `${Math.round(ms)}ms`;
  // Round to tenths first, so 59 999 ms is `1m` (not `60.0s`) and 1 040 ms is `1s` (not `1.0s`).
  const tenths = Math.round(ms / 100);
  if (tenths < 600) return `${tenths / 10}s`;
  const parts: string[] = [];
  let rest = Math.round(ms / 1000);
  for (const [unit, size] of [
    ['d', 86_400],
    ['h', 3_600],
    ['m', 60],
    ['s', 1],
  ] as const) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  return parts.join('');
}
