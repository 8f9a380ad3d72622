/**
 * Terminal views of a workflow run: a Gantt-style timeline (`loops workflows show`), the live step
 * list redrawn while `loops workflows run` is attached to a TTY, the critical path both use, and
 * the line summing what a run's agent steps reported and where each step attempt ran, with which
 * environment's names (`loops workflows inspect`).
 *
 * Everything here is pure: no I/O and no clock. The caller passes `now` (used for steps that are
 * still running), the terminal width and whether colour is allowed.
 */
import { formatDuration } from '../events/durations.js';
import type { SpawnRecord } from '../runtime/queries/spawn-record.js';
import { paint, type Color } from './render.js';
import { envSummary } from './run-view.js';

/** One step of a workflow run, as the views need it. */
export interface ViewStep {
  id: string;
  /** Ids of the steps this one depends on (unknown ids are ignored). */
  needs: string[];
  /** pending | waiting | running | succeeded | failed | timed_out | cancelled | skipped | abandoned */
  status: string;
  /** Epoch ms of the first attempt's start; null when the step never started. */
  startedAt: number | null;
  /** Epoch ms of the last attempt's end; null while running or when it never started. */
  endedAt: number | null;
  attempts: number;
  exitCode: number | null;
  continueOnError?: boolean;
}

/** Statuses whose wall time is still growing (a running attempt, or a retry back-off). */
const LIVE = new Set(['running', 'waiting']);

/**
 * The wall-time span of a step, or null when it has none (never started, or skipped). Live steps
 * end at `now` even when `endedAt` is set: that is the end of an earlier attempt.
 */
function spanOf(step: ViewStep, now: number): [number, number] | null {
  if (step.startedAt === null || step.status === 'skipped') return null;
  const end = LIVE.has(step.status) || step.endedAt === null ? now : step.endedAt;
  return [step.startedAt, Math.max(step.startedAt, end)];
}

function wallTime(step: ViewStep, now: number): number {
  const span = spanOf(step, now);
  return span ? span[1] - span[0] : 0;
}

/**
 * The longest chain of dependencies through the DAG, weighted by each step's wall time
 * (`endedAt` − `startedAt`, or `now` − `startedAt` while running; 0 for steps that never started).
 * Returns the step ids from the first to the last step of the chain; ties are broken by file
 * order (the order of `steps`), both for the chain's last step and for each predecessor.
 * Unknown `needs` are ignored and a dependency cycle cannot loop forever. `[]` for no steps.
 */
export function criticalPath(steps: ViewStep[], now: number): string[] {
  const index = new Map<string, number>();
  steps.forEach((step, i) => {
    if (!index.has(step.id)) index.set(step.id, i);
  });
  const best = new Map<number, { total: number; prev: number | null }>();
  const visiting = new Set<number>();

  const visit = (i: number): number => {
    const known = best.get(i);
    if (known) return known.total;
    if (visiting.has(i)) return 0; // a cycle: the caller validated the DAG, so just stop here
    visiting.add(i);
    const step = steps[i]!;
    const needs = [...new Set(step.needs.map((id) => index.get(id)).filter((n): n is number => n !== undefined && n !== i))];
    needs.sort((a, b) => a - b);
    let prev: number | null = null;
    let prevTotal = -1;
    for (const need of needs) {
      const total = visit(need);
      if (total > prevTotal) {
        prev = need;
        prevTotal = total;
      }
    }
    visiting.delete(i);
    const total = wallTime(step, now) + Math.max(prevTotal, 0);
    best.set(i, { total, prev });
    return total;
  };

  let last: number | null = null;
  let lastTotal = -1;
  steps.forEach((_, i) => {
    const total = visit(i);
    if (index.get(steps[i]!.id) === i && total > lastTotal) {
      last = i;
      lastTotal = total;
    }
  });

  const path: string[] = [];
  const seen = new Set<number>();
  for (let i: number | null = last; i !== null && !seen.has(i); i = best.get(i)?.prev ?? null) {
    seen.add(i);
    path.unshift(steps[i]!.id);
  }
  return path;
}

/** The colour of a status (bars, glyphs and status words); undefined = plain. */
function tone(status: string): Color | undefined {
  switch (status) {
    case 'succeeded':
      return 'green';
    case 'failed':
    case 'timed_out':
      return 'red';
    case 'cancelled':
    case 'abandoned':
      return 'yellow';
    case 'running':
    case 'waiting':
      return 'cyan';
    case 'skipped':
    case 'pending':
      return 'dim';
    default:
      return undefined;
  }
}

/** A run of text with an optional colour; lines are built from these so widths ignore ANSI. */
interface Segment {
  text: string;
  color?: Color | undefined;
}

function len(text: string): number {
  return [...text].length;
}

/** `text` cut to `max` code points, ending with `ellipsis` when cut. */
function fit(text: string, max: number, ellipsis: string): string {
  const chars = [...text];
  if (chars.length <= max) return text;
  if (max <= 0) return '';
  if (max <= len(ellipsis)) return chars.slice(0, max).join('');
  return chars.slice(0, max - len(ellipsis)).join('') + ellipsis;
}

function padEnd(text: string, width: number): string {
  return text + ' '.repeat(Math.max(0, width - len(text)));
}

function padStart(text: string, width: number): string {
  return ' '.repeat(Math.max(0, width - len(text))) + text;
}

/**
 * Joins segments into one line: trailing blanks dropped, cut to `max` code points (with an
 * ellipsis) when `max` is a number, and painted only when `color` is on.
 */
function emit(segments: Segment[], color: boolean, max: number | null, ellipsis: string): string {
  const segs = segments.map((s) => ({ ...s }));
  while (segs.length > 0) {
    const tail = segs[segs.length - 1]!;
    tail.text = tail.text.replace(/\s+$/, '');
    if (tail.text !== '') break;
    segs.pop();
  }
  const total = segs.reduce((sum, s) => sum + len(s.text), 0);
  if (max !== null && total > max) {
    let room = Math.max(0, max - len(ellipsis));
    const cut: Segment[] = [];
    for (const s of segs) {
      if (room <= 0) break;
      const chars = [...s.text];
      cut.push({ text: chars.slice(0, room).join(''), color: s.color });
      room -= Math.min(room, chars.length);
    }
    cut.push({ text: fit(ellipsis, max, '') });
    segs.splice(0, segs.length, ...cut);
  }
  return segs.map((s) => (s.color && s.text !== '' ? paint(color, s.color, s.text) : s.text)).join('');
}

/** Round numbers for axis ticks, in ms. */
const TICK_STEPS = [
  1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000,
  900_000, 1_800_000, 3_600_000, 7_200_000, 10_800_000, 21_600_000, 43_200_000, 86_400_000, 172_800_000, 604_800_000,
];

/**
 * The axis under the bars, `cells` wide: `0s` at the left, the total at the right, and round
 * intermediate ticks (each at the cell where its time starts) when they fit, joined by a rule.
 */
function axis(total: number, cells: number, rule: string): string {
  const end = total > 0 ? formatDuration(total) : '';
  if (end === '') return '0s';
  if (2 + 1 + len(end) > cells) return padStart(fit(end, cells, ''), cells);
  const endAt = cells - len(end);
  const fill = (from: number, to: number): string => {
    const gap = to - from;
    return gap >= 3 ? ` ${rule.repeat(gap - 2)} ` : ' '.repeat(Math.max(0, gap));
  };
  const GAP = 5; // at least ` ─── ` between two labels
  const place = (step: number): Array<[number, string]> | null => {
    const labels: Array<[number, string]> = [[0, '0s']];
    for (let t = step; t < total; t += step) {
      const at = Math.round((t * cells) / total);
      const text = formatDuration(t);
      const [prevAt, prevText] = labels[labels.length - 1]!;
      if (at < prevAt + len(prevText) + GAP) return null; // too crowded: try a bigger step
      if (at + len(text) + GAP > endAt) break; // would crowd the total: stop before it
      labels.push([at, text]);
    }
    return labels;
  };
  let labels: Array<[number, string]> = [[0, '0s']];
  for (const step of TICK_STEPS) {
    if (step >= total) break;
    const placed = place(step);
    if (placed) {
      labels = placed;
      break;
    }
  }
  let line = '';
  for (const [at, text] of labels) line += fill(len(line), at) + text;
  return line + fill(len(line), endAt) + end;
}

/**
 * A Gantt chart of a workflow run: one row per step (file order) on a shared time axis from the
 * earliest start to the latest end (or `now` for running steps).
 *
 * Each row is the step id (padded to the longest; `*` after the ids on the critical path), the bar
 * area (`█` where the step ran, `·` elsewhere; `#`/`.` when `unicode` is false), then the duration
 * and status. Steps that never started (or were skipped) have no bar and show `-` and their
 * status. Every step that ran gets at least one cell, however short. Under the rows: an axis line
 * (`0s ─── 5s ─── 12.3s`) and a legend naming the critical path with its total wall time.
 *
 * The bar area is what is left of `width`, but never fewer than 10 cells; when `width` ≥ 40 no
 * line is longer than `width` (long ids are cut). Without `color` there are no ANSI escapes.
 * Returns `[]` for no steps; without any started step there is no axis and no legend.
 */
export function renderTimeline(
  steps: ViewStep[],
  opts: { width: number; now: number; color: boolean; unicode?: boolean },
): string[] {
  if (steps.length === 0) return [];
  const { now, color } = opts;
  const width = Number.isFinite(opts.width) ? Math.floor(opts.width) : 80;
  const g =
    opts.unicode === false
      ? { bar: '#', dot: '.', rule: '-', arrow: '->', ellipsis: '~' }
      : { bar: '█', dot: '·', rule: '─', arrow: '→', ellipsis: '…' };

  const spans = steps.map((step) => spanOf(step, now));
  const started = spans.filter((s): s is [number, number] => s !== null);
  const t0 = started.length ? Math.min(...started.map((s) => s[0])) : now;
  const t1 = started.length ? Math.max(...started.map((s) => s[1])) : now;
  const total = t1 - t0;

  const path = started.length ? criticalPath(steps, now) : [];
  const onPath = new Set(path);
  const marker = path.length ? 1 : 0;

  const durations = spans.map((s) => (s ? formatDuration(s[1] - s[0]) : '-'));
  const durW = Math.max(...durations.map(len));
  const rights = steps.map((step, i) => `${padStart(durations[i]!, durW)}  ${step.status}`);
  let rightW = Math.max(...rights.map(len));
  let idW = Math.max(...steps.map((s) => len(s.id))) + marker;

  let cells = width - idW - rightW - 4;
  const limit = width >= 40 ? width : null;
  if (cells < 10) {
    cells = 10;
    if (limit !== null) {
      // Make room by cutting the ids (keeping at least a few characters), then the statuses.
      idW = Math.min(idW, Math.max(Math.min(idW, 4 + marker), limit - rightW - cells - 4));
      rightW = Math.min(rightW, limit - idW - cells - 4);
    }
  }

  const lines: string[] = [];
  steps.forEach((step, i) => {
    const mark = onPath.has(step.id) ? '*' : ' '.repeat(marker);
    const id = padEnd(fit(step.id, idW - marker, g.ellipsis) + mark, idW);
    const segments: Segment[] = [{ text: id }, { text: '  ' }];
    const span = spans[i];
    if (span) {
      let from = total > 0 ? Math.round(((span[0] - t0) * cells) / total) : 0;
      let to = total > 0 ? Math.round(((span[1] - t0) * cells) / total) : 1;
      from = Math.min(Math.max(from, 0), cells - 1);
      to = Math.min(Math.max(to, from + 1), cells);
      segments.push(
        { text: g.dot.repeat(from), color: 'dim' },
        { text: g.bar.repeat(to - from), color: tone(step.status) },
        { text: g.dot.repeat(cells - to), color: 'dim' },
      );
    } else {
      segments.push({ text: g.dot.repeat(cells), color: 'dim' });
    }
    const right = fit(rights[i]!, rightW, g.ellipsis);
    const plain = Math.min(durW + 2, right.length); // the duration and the gap stay uncoloured
    segments.push({ text: '  ' }, { text: right.slice(0, plain) }, { text: right.slice(plain), color: tone(step.status) });
    lines.push(emit(segments, color, limit, g.ellipsis));
  });

  if (started.length) {
    lines.push(emit([{ text: ' '.repeat(idW + 2) }, { text: axis(total, cells, g.rule), color: 'dim' }], color, limit, g.ellipsis));
  }
  if (path.length) {
    const length = path.reduce((sum, id) => sum + wallTime(steps.find((s) => s.id === id)!, now), 0);
    lines.push(
      emit(
        [{ text: '*', color: 'bold' }, { text: ` critical path: ${path.join(` ${g.arrow} `)} (${formatDuration(length)})`, color: 'dim' }],
        color,
        limit,
        g.ellipsis,
      ),
    );
  }
  return lines;
}

/** Braille spinner frames for running steps. */
const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

function glyph(status: string, frame: number): string {
  switch (status) {
    case 'succeeded':
      return '✓';
    case 'failed':
      return '✗';
    case 'timed_out':
      return '⏱';
    case 'cancelled':
    case 'abandoned':
      return '⊘';
    case 'skipped':
      return '–';
    case 'running': {
      const n = Number.isFinite(frame) ? Math.trunc(frame) : 0;
      return SPINNER[((n % SPINNER.length) + SPINNER.length) % SPINNER.length]!;
    }
    default:
      return '·';
  }
}

/**
 * The live step list shown while `loops workflows run` is attached to a TTY, redrawn each frame:
 * one line per step (file order) with a status glyph (✓ succeeded, ✗ failed, ⏱ timed out,
 * ⊘ cancelled or abandoned, – skipped, · pending or waiting, and a braille spinner for running
 * steps, whose frame is chosen by `frame`), the id, the status, the wall time so far (`now` −
 * `startedAt` while running), `attempt N` when a step is past its first attempt, and the exit code
 * of a failed step. Lines are cut to `width` (when positive) so a redraw never wraps; without
 * `color` there are no ANSI escapes. Returns `[]` for no steps.
 */
export function renderLiveSteps(
  steps: ViewStep[],
  opts: { now: number; frame: number; color: boolean; width: number },
): string[] {
  if (steps.length === 0) return [];
  const { now, frame, color } = opts;
  const limit = Number.isFinite(opts.width) && opts.width > 0 ? Math.floor(opts.width) : null;

  const rows = steps.map((step) => {
    const span = spanOf(step, now);
    const extras: string[] = [];
    if (step.attempts > 1) extras.push(`attempt ${step.attempts}`);
    if (step.status === 'failed' && step.exitCode !== null && step.exitCode !== 0) extras.push(`exit ${step.exitCode}`);
    return { step, duration: span ? formatDuration(span[1] - span[0]) : '', extra: extras.join('  ') };
  });
  const statusW = Math.max(...steps.map((s) => len(s.status)));
  const durW = Math.max(...rows.map((r) => len(r.duration)));
  const extraW = Math.max(...rows.map((r) => len(r.extra)));
  let idW = Math.max(...steps.map((s) => len(s.id)));
  if (limit !== null) {
    const fixed = 2 + 2 + statusW + (durW ? 2 + durW : 0) + (extraW ? 2 + extraW : 0);
    idW = Math.min(idW, Math.max(4, limit - fixed));
  }

  return rows.map(({ step, duration, extra }) => {
    const tint = tone(step.status);
    const segments: Segment[] = [
      { text: glyph(step.status, frame), color: tint },
      { text: ` ${padEnd(fit(step.id, idW, '…'), idW)}  ` },
      { text: padEnd(step.status, statusW), color: tint },
    ];
    if (durW) segments.push({ text: `  ${padStart(duration, durW)}` });
    if (extra) segments.push({ text: '  ' }, { text: extra, color: 'dim' });
    return emit(segments, color, limit, '…');
  });
}

/** What agent CLIs reported, summed (the shape of `AgentTotals` in src/runtime/queries/workflows.ts). */
export interface AgentTotalsLike {
  reports: number;
  tokens: { input: number | null; output: number | null };
  costUsd: number | null;
  costReports: number;
}

/**
 * One line for what a run's agent steps reported, e.g. `cost $0.0843, tokens 1.2k in / 340 out,
 * 2 agent attempts`; a cost that not every attempt reported says so (`cost $0.0421 (1 of 2
 * reported one)`), no cost at all is `no cost reported`, and tokens nobody reported are left out.
 * Formatted like the TOKENS/COST cells (1.2k, `$` with four decimals).
 */
export function agentTotalsText(t: AgentTotalsLike): string {
  const k = (n: number | null) => (n === null ? '?' : n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n));
  const parts = [
    t.costUsd === null
      ? 'no cost reported'
      : `cost $${t.costUsd.toFixed(4)}${t.costReports < t.reports ? ` (${t.costReports} of ${t.reports} reported one)` : ''}`,
  ];
  if (t.tokens.input !== null || t.tokens.output !== null) parts.push(`tokens ${k(t.tokens.input)} in / ${k(t.tokens.output)} out`);
  parts.push(`${t.reports} agent attempt${t.reports === 1 ? '' : 's'}`);
  return parts.join(', ');
}

/**
 * Where each step attempt's process started and with which environment (names only), as its
 * `step.spawned` recorded them (`records` by `<stepId>#<attempt>`), for `loops workflows inspect`:
 *
 *     ── where each attempt ran ──
 *     build#1  cwd /srv/app/releases/42
 *              env set PATH, 7 LOOPS_* · secret API_TOKEN · 41 inherited
 *
 * In step order, then attempt order. Empty (no heading) when no attempt has a record: a run
 * recorded before they were prints as it did.
 */
export function stepSpawnLines(
  steps: ReadonlyArray<{ stepId: string; attempts: ReadonlyArray<{ attempt: number }> }>,
  records: ReadonlyMap<string, SpawnRecord>,
  color: boolean,
): string[] {
  const rows: Array<{ label: string; record: SpawnRecord }> = [];
  for (const step of steps) {
    for (const a of step.attempts) {
      const record = records.get(`${step.stepId}#${a.attempt}`);
      if (record) rows.push({ label: `${step.stepId}#${a.attempt}`, record });
    }
  }
  if (rows.length === 0) return [];
  const width = Math.max(...rows.map((r) => len(r.label))) + 2;
  const lines = [paint(color, 'dim', '── where each attempt ran ──')];
  for (const { label, record } of rows) {
    const parts = [...(record.cwd !== null ? [`cwd ${record.cwd}`] : []), ...(record.env !== null ? [`env ${envSummary(record.env)}`] : [])];
    parts.forEach((part, i) => lines.push(`${i === 0 ? padEnd(label, width - 2) + '  ' : ' '.repeat(width)}${part}`));
  }
  return lines;
}
