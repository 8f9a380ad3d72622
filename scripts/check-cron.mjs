#!/usr/bin/env node
/**
 * npm run check:cron — a minute-by-minute reference check of loops' cron schedules.
 *
 * The reference is independent of src/scheduling: its own small cron matcher (five fields, names,
 * ranges, steps, lists, the crontab(5) macros, day-of-month OR day-of-week), its own zone reading
 * (Intl.DateTimeFormat, once per real minute), and Vixie cron's own procedure rather than its
 * result: it walks real time one minute at a time, keeps cron's "virtual time" (the last wall-clock
 * minute it handled) and does what cron.c does with the difference —
 *   +1 minute: every job matching the new minute fires;
 *   forward, at most 3 h skipped: wildcard jobs (minute or hour field starting with `*`) matching
 *     the new minute fire; fixed-time jobs matching any skipped minute or the new one fire, once;
 *   back by at most 3 h: only wildcard jobs matching the minute fire; virtual time waits;
 *   a jump of more than 3 h either way: every job matching the new minute fires, nothing else.
 * loops' planner (`nextNominal` of a `rules: 2` cron schedule, from dist/) is iterated over the
 * same span and the two lists of instants must be equal.
 *
 *   node scripts/check-cron.mjs            every month of 2024–2027 (Pacific/Apia: 2010–2013)
 *   node scripts/check-cron.mjs --short    ±2 days around every transition (what CI runs)
 *
 * Prints a table, one row per zone; exits 1 on any mismatch (the first ones are listed).
 */
import { pathToFileURL } from 'node:url';

const MIN = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const MAX_SHIFT_MIN = 180;

export const ZONES = [
  { tz: 'America/New_York', years: [2024, 2027] },
  { tz: 'Europe/London', years: [2024, 2027] },
  { tz: 'Australia/Lord_Howe', years: [2024, 2027] }, // 30-minute DST
  { tz: 'Asia/Kathmandu', years: [2024, 2027] }, // +5:45
  { tz: 'Australia/Eucla', years: [2024, 2027] }, // +8:45
  { tz: 'Asia/Kolkata', years: [2024, 2027] }, // +5:30
  { tz: 'Pacific/Chatham', years: [2024, 2027] }, // +12:45 / +13:45
  { tz: 'Pacific/Apia', years: [2010, 2013] }, // 2011-12-30 never happened
  { tz: 'Pacific/Kwajalein', years: [1992, 1994] }, // 1993-08-21 never happened
];

export const PATTERNS = [
  '0 * * * *',
  '*/15 * * * *',
  '30 * * * *',
  '*/10 2 * * *',
  '30 2 * * *',
  '0 3 * * *',
  '45 1 * * *',
  '15 2,3 * * *',
  '*/20 1-3 * * *',
  '0 0 * * *',
  '@midnight',
  '@hourly',
  '@daily',
  '@weekly',
  '@monthly',
  '0 0 */10 * *',
  '0 12 1,16,31 * *',
  '0 9 * * MON-FRI',
  '30 0 * * SAT',
  // Day of month and day of week: either when both are restricted, both when one starts with `*`.
  '0 0 13 * FRI',
  '30 2 */10 * MON',
];

// ── the reference ────────────────────────────────────────────────────────────

const MACROS = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};
const MONTHS = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
const DAYS = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];

function field(spec, min, max, names = [], base = 0) {
  const value = (v) => (names.includes(v.toUpperCase()) ? names.indexOf(v.toUpperCase()) + base : Number(v));
  const out = new Set();
  for (const item of spec.split(',')) {
    const [range, stepText] = item.split('/');
    const step = stepText === undefined ? 1 : Number(stepText);
    let lo = min;
    let hi = max;
    if (range !== '*') {
      const [a, b] = range.split('-');
      lo = value(a);
      hi = b === undefined ? (stepText === undefined ? lo : max) : value(b);
    }
    for (let v = lo; v <= hi; v += step) out.add(v);
  }
  return out;
}

/** A job: does wall minute `w` (pseudo-UTC ms) match, and is it a wildcard job (Vixie MIN_STAR | HR_STAR)? */
export function job(expr) {
  const text = MACROS[expr.trim().toLowerCase()] ?? expr.trim();
  const [mi, h, dom, mon, dow] = text.split(/\s+/);
  const M = field(mi, 0, 59);
  const H = field(h, 0, 23);
  const D = field(dom, 1, 31);
  const Mo = field(mon, 1, 12, MONTHS, 1);
  const W = field(dow, 0, 7, DAYS);
  if (W.has(7)) W.add(0);
  // Vixie: day-of-month OR day-of-week only when both are restricted (neither starts with `*`).
  const either = !dom.startsWith('*') && !dow.startsWith('*');
  return {
    wild: mi.startsWith('*') || h.startsWith('*'),
    matches(w) {
      const d = new Date(w);
      if (!M.has(d.getUTCMinutes()) || !H.has(d.getUTCHours()) || !Mo.has(d.getUTCMonth() + 1)) return false;
      const a = D.has(d.getUTCDate());
      const b = W.has(d.getUTCDay());
      return either ? a || b : a && b;
    },
  };
}

const formatters = new Map();
/** Wall-clock minute in `tz` at instant `t`, as pseudo-UTC ms: straight from Intl. */
function wallMinute(t, tz) {
  let f = formatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', { timeZone: tz, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric' });
    formatters.set(tz, f);
  }
  const p = Object.fromEntries(f.formatToParts(new Date(t)).map((x) => [x.type, x.value]));
  return Date.UTC(Number(p.year), Number(p.month) - 1, Number(p.day), Number(p.hour), Number(p.minute));
}

/**
 * Reference fires of each job in [from, to) (whole minutes, UTC ms), by Vixie's procedure. The walk
 * starts a day early so virtual time is settled when the span begins.
 */
export function referenceFires(exprs, tz, from, to) {
  const jobs = exprs.map(job);
  const fires = exprs.map(() => []);
  let t = Math.floor((from - DAY) / MIN) * MIN;
  let vt = wallMinute(t, tz);
  // The offset is read at each quarter hour; when it is the same at both ends, it is constant inside.
  let quarterEnd = -Infinity;
  let quarterOffset = null;
  for (t += MIN; t < to; t += MIN) {
    if (t >= quarterEnd) {
      const q = Math.floor(t / (15 * MIN)) * 15 * MIN;
      quarterEnd = q + 15 * MIN;
      const a = wallMinute(q, tz) - q;
      quarterOffset = a === wallMinute(quarterEnd, tz) - quarterEnd ? a : null;
    }
    const now = quarterOffset === null ? wallMinute(t, tz) : t + quarterOffset;
    const diff = (now - vt) / MIN;
    const record = (i) => {
      if (t >= from) fires[i].push(t);
    };
    if (diff === 1) {
      jobs.forEach((j, i) => j.matches(now) && record(i));
      vt = now;
    } else if (diff > 1 && diff - 1 <= MAX_SHIFT_MIN) {
      jobs.forEach((j, i) => {
        if (j.wild) {
          if (j.matches(now)) record(i);
          return;
        }
        for (let m = vt + MIN; m <= now; m += MIN) {
          if (j.matches(m)) {
            record(i);
            return;
          }
        }
      });
      vt = now;
    } else if (diff <= 0 && 1 - diff <= MAX_SHIFT_MIN) {
      jobs.forEach((j, i) => j.wild && j.matches(now) && record(i));
    } else {
      jobs.forEach((j, i) => j.matches(now) && record(i));
      vt = now;
    }
  }
  return fires;
}

// ── loops' planner ───────────────────────────────────────────────────────────

export function plannerFires(nextNominal, expr, tz, from, to) {
  const schedule = { kind: 'cron', expr, tz, rules: 2 };
  const out = [];
  let cursor = from - 1;
  for (;;) {
    const next = nextNominal(schedule, cursor);
    if (next === null || next >= to) return out;
    out.push(next);
    cursor = next;
  }
}

/** Offset changes of `tz` in [from, to), to the minute (read by Intl every hour, then minute by minute). */
export function transitionsOf(tz, from, to) {
  const out = [];
  let prev = wallMinute(from, tz) - from;
  for (let t = from + HOUR; t < to; t += HOUR) {
    const off = wallMinute(t, tz) - t;
    if (off !== prev) {
      let m = t - HOUR + MIN;
      while (wallMinute(m, tz) - m === prev) m += MIN;
      out.push({ at: m, shiftMin: (off - prev) / MIN });
      prev = off;
    }
  }
  return out;
}

/**
 * Compares reference and planner over `spans` ([from, to) pairs) of one zone. Returns
 * `{ fires, mismatches: [{ expr, only: 'reference' | 'loops', at }] }`.
 */
export function compareZone(nextNominal, tz, spans, patterns = PATTERNS) {
  let fires = 0;
  const mismatches = [];
  for (const [from, to] of spans) {
    const ref = referenceFires(patterns, tz, from, to);
    patterns.forEach((expr, i) => {
      const ours = plannerFires(nextNominal, expr, tz, from, to);
      fires += ours.length;
      const a = new Set(ref[i]);
      const b = new Set(ours);
      for (const t of ref[i]) if (!b.has(t)) mismatches.push({ expr, only: 'reference', at: t });
      for (const t of ours) if (!a.has(t)) mismatches.push({ expr, only: 'loops', at: t });
    });
  }
  return { fires, mismatches };
}

/** Spans of ±2 days around each transition in the zone's years (merged when they touch). */
export function shortSpans(tz, [y0, y1]) {
  const spans = [];
  for (const { at } of transitionsOf(tz, Date.UTC(y0, 0, 1), Date.UTC(y1 + 1, 0, 1))) {
    const from = Math.floor((at - 2 * DAY) / MIN) * MIN;
    const to = at + 2 * DAY;
    const last = spans[spans.length - 1];
    if (last && from <= last[1]) last[1] = to;
    else spans.push([from, to]);
  }
  return spans;
}

/** One span per month of the zone's years (a year at a time would hold the whole walk in memory). */
export function monthSpans([y0, y1]) {
  const spans = [];
  for (let y = y0; y <= y1; y++) for (let m = 0; m < 12; m++) spans.push([Date.UTC(y, m, 1), Date.UTC(y, m + 1, 1)]);
  return spans;
}

async function main() {
  const short = process.argv.includes('--short');
  const { nextNominal } = await import(new URL('../dist/scheduling/planner.js', import.meta.url).href);
  const rows = [];
  let failed = 0;
  const started = Date.now();
  for (const zone of ZONES) {
    const t0 = Date.now();
    const spans = short ? shortSpans(zone.tz, zone.years) : monthSpans(zone.years);
    const transitions = transitionsOf(zone.tz, Date.UTC(zone.years[0], 0, 1), Date.UTC(zone.years[1] + 1, 0, 1));
    const { fires, mismatches } = compareZone(nextNominal, zone.tz, spans);
    failed += mismatches.length;
    const shifts = [...new Set(transitions.map((t) => `${t.shiftMin > 0 ? '+' : ''}${t.shiftMin}m`))].join(' ');
    rows.push([zone.tz, `${zone.years[0]}–${zone.years[1]}`, String(transitions.length), shifts || '-', String(spans.length), String(fires), String(mismatches.length), `${((Date.now() - t0) / 1000).toFixed(1)}s`]);
    for (const m of mismatches.slice(0, 5)) {
      console.error(`mismatch ${zone.tz} ${JSON.stringify(m.expr)}: ${new Date(m.at).toISOString()} only in ${m.only}`);
    }
  }
  const head = ['zone', 'years', 'transitions', 'shifts', 'spans', 'fires', 'mismatches', 'time'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r) => r.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd();
  console.log(`${short ? 'short: ±2 days around every transition' : 'every month'}, ${PATTERNS.length} patterns`);
  console.log(line(head));
  for (const r of rows) console.log(line(r));
  console.log(`${failed === 0 ? 'ok' : `${failed} mismatch(es)`} in ${((Date.now() - started) / 1000).toFixed(1)}s`);
  process.exitCode = failed === 0 ? 0 : 1;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
