import { openReader } from '../../runtime/store.js';
import type { LoopStats, RunStats, StatsReport } from '../../runtime/admin/stats.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliContext, CliCommand } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { durationText, paint, printJson, relativeTime, table, type Color } from '../render.js';

const spec: CommandSpec = {
  name: 'stats',
  summary: 'Sum runs, failures, duration, tokens and cost per loop.',
  description: [
    'For each loop (every loop not removed, and removed loops with runs in the window; or the one named),',
    'over the runs claimed or started since --since: runs by outcome, success rate (succeeded / ended runs),',
    'total and median duration of ended runs, and for agent loops the turns, tokens and cost the CLIs',
    'reported. A workflow loop adds those of the agent steps of its workflow runs (STEPS: the agent step',
    'attempts that ended, in the workflow runs started since --since). A cost is summed only over the',
    'runs and step attempts whose CLI reported one; how many did is shown.',
  ].join('\n'),
  positionals: [{ name: 'loop', required: false, description: 'only this loop (name, id or unique id prefix; removed loops too)' }],
  options: {
    since: {
      type: 'string',
      value: '<time|duration>',
      description: 'only runs from this time on: an ISO time (no offset = system zone) or how long ago (7d, 24h); default all time',
    },
    json: JSON_OPTION,
  },
  examples: ['loops stats', 'loops stats --since 7d', 'loops stats nightly-review --since 2026-05-01 --json'],
};

const stats: CliCommand = {
  spec,
  async run({ values, positionals }, ctx) {
    const { parseSince, runStats } = await import('../../runtime/admin/stats.js');
    const since = typeof values.since === 'string' ? await parseSince(values.since, ctx.now) : null;
    const reader = await openReader(ctx.dataDir);
    let report: StatsReport;
    try {
      report = runStats(reader.db, { loop: positionals[0], since });
    } finally {
      reader.close();
    }
    if (ctx.json) {
      printJson(ctx, report);
      return EXIT.ok;
    }
    if (report.loops.length === 0) {
      ctx.err.write(since ? `No loops with runs since ${since}.\n` : 'No loops yet (loops create command … creates one).\n');
      return EXIT.ok;
    }
    ctx.out.write(render(report, ctx));
    return EXIT.ok;
  },
};

/**
 * Two tables: runs and their outcomes for every loop, then (when there were any) the agent loops and
 * workflow loops with agent steps: their agent runs, agent step attempts, turns, tokens, cost, models.
 */
export function render(report: StatsReport, ctx: Pick<CliContext, 'now' | 'color'>): string {
  const { since, loops, total } = report;
  const window = since ? `Since ${relativeTime(since, ctx.now)} (${since})` : 'All time';
  const head = `${window}: ${count(total.runs, 'run')} in ${count(total.loops, 'loop')}`;
  const withTotal = loops.length > 1;
  const rowsOf = <T>(cells: (s: RunStats, label: string) => T) => [
    ...loops.map((l) => cells(l, label(l))),
    ...(withTotal ? [cells(total, 'TOTAL')] : []),
  ];

  const runHeaders = ['LOOP', 'RUNS', 'OK', 'FAILED', 'TIMED OUT', 'CANCELLED', 'ABANDONED', 'RUNNING', 'SUCCESS', 'TOTAL TIME', 'MEDIAN'];
  const runRows = rowsOf((s, name) => [
    name,
    num(s.runs),
    num(s.succeeded),
    num(s.failed),
    num(s.timedOut),
    num(s.cancelled),
    num(s.abandoned),
    num(s.running),
    s.successRate === null ? '-' : percent(s.successRate),
    durationText(s.totalDurationMs),
    durationText(s.medianDurationMs),
  ]);
  const colors: Array<Color | null> = [null, null, 'green', 'red', 'red', 'yellow', 'red', 'cyan'];
  const parts = [head, '', table(runHeaders, paintCounts(rightAlign(runHeaders, runRows, 1, 10), colors, ctx.color), ctx.color)];
  if (total.outputPruned > 0) {
    // Counted all the same; only their output is gone (`loops logs` says so for each).
    const which = total.outputPruned === 1 ? 'its outcome is' : 'their outcomes are';
    parts.push(`The output of ${count(total.outputPruned, 'run')} of these was removed by loops prune; ${which} counted above.\n`);
  }

  const agentLoops = loops.filter((l) => l.agent.runs > 0 || l.agent.steps > 0);
  if (agentLoops.length > 0) {
    // STEPS (agent step attempts of workflow loops) only when there are any.
    const steps = total.agent.steps > 0;
    const agentHeaders = ['AGENT LOOP', 'RUNS', ...(steps ? ['STEPS'] : []), 'TURNS', 'INPUT', 'OUTPUT', 'CACHE READ', 'CACHE WRITE', 'COST', 'MODELS'];
    const agentRow = (s: RunStats, name: string) => [
      name,
      num(s.agent.runs),
      ...(steps ? [num(s.agent.steps)] : []),
      num(s.agent.turns),
      num(s.agent.tokens.input),
      num(s.agent.tokens.output),
      num(s.agent.tokens.cacheRead),
      num(s.agent.tokens.cacheWrite),
      costCell(s),
      seenText(s),
    ];
    const agentRows = [...agentLoops.map((l) => agentRow(l, label(l))), ...(agentLoops.length > 1 ? [agentRow(total, 'TOTAL')] : [])];
    parts.push(table(agentHeaders, rightAlign(agentHeaders, agentRows, 1, steps ? 8 : 7), ctx.color));
    const { costRuns } = total.agent;
    const reported = reporters(total);
    const what = total.agent.steps === 0 ? count(reported, 'agent run') : `${num(reported)} agent runs and step attempts`;
    const costNote =
      costRuns === reported
        ? ''
        : costRuns === 0
          ? ` No ${total.agent.steps === 0 ? 'run' : 'run or step'} reported a cost.`
          : ` The cost is summed over the ${num(costRuns)} of ${what} that reported one.`;
    parts.push(`Tokens and cost as the agent CLIs reported them.${costNote}\n`);
  }
  return parts.join('\n');
}

function label(l: LoopStats): string {
  return l.status === 'removed' ? `${l.name} (removed)` : l.name;
}

function count(n: number, noun: string): string {
  return `${num(n)} ${noun}${n === 1 ? '' : 's'}`;
}

/** 12345 → `12,345`; null → `-`. */
export function num(n: number | null): string {
  return n === null ? '-' : n.toLocaleString('en-US', { maximumFractionDigits: 0 });
}

/** One decimal; never 100% while a run did not succeed (0.9996 → `99.9%`), nor 0% while one did. */
export function percent(rate: number): string {
  if (rate >= 1) return '100%';
  if (rate <= 0) return '0%';
  const tenths = Math.min(99.9, Math.max(0.1, Math.round(rate * 1000) / 10));
  return `${Number.isInteger(tenths) ? tenths : tenths.toFixed(1)}%`;
}

/** 0.0421335 → `$0.0421`; 1234.5 → `$1,234.5000`; below a hundredth of a cent → `<$0.0001`. */
export function usd(amount: number): string {
  if (amount > 0 && amount < 0.00005) return '<$0.0001';
  return `$${amount.toLocaleString('en-US', { minimumFractionDigits: 4, maximumFractionDigits: 4 })}`;
}

/** Agent runs and agent step attempts: what might have reported a cost. */
function reporters(s: RunStats): number {
  return s.agent.runs + s.agent.steps;
}

function costCell(s: RunStats): string {
  const { costUsd, costRuns } = s.agent;
  if (costUsd === null) return '-';
  return costRuns < reporters(s) ? `${usd(costUsd)} (${num(costRuns)} of ${num(reporters(s))})` : usd(costUsd);
}

/** `claude: claude-sonnet-4-5, claude-opus-4-1; codex` (models grouped under their provider). */
function seenText(s: RunStats): string {
  const byProvider = new Map<string, string[]>();
  for (const { provider, model } of s.agent.seen) {
    const models = byProvider.get(provider) ?? [];
    if (model !== null) models.push(model);
    byProvider.set(provider, models);
  }
  const text = [...byProvider].map(([provider, models]) => (models.length ? `${provider}: ${models.join(', ')}` : provider)).join('; ');
  return text || '-';
}

/** Right-aligns columns from..to (numbers) under their headers (table() pads on the right). */
function rightAlign(headers: string[], rows: string[][], from: number, to: number): string[][] {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => [...(r[i] ?? '')].length)));
  return rows.map((r) => r.map((c, i) => (i >= from && i <= to ? c.padStart(widths[i]!) : c)));
}

/** Colours a non-zero count (green successes, red failures, …); the padding is already in place. */
function paintCounts(rows: string[][], colors: Array<Color | null>, enabled: boolean): string[][] {
  if (!enabled) return rows;
  return rows.map((r) =>
    r.map((c, i) => {
      const color = colors[i];
      return color && !/^\s*0$/.test(c) ? paint(enabled, color, c) : c;
    }),
  );
}

export const commands: Record<string, CliCommand> = { stats };
