import type { RunView } from '../../runtime/queries/loops.js';
import { openRuntime } from '../../runtime/runtime.js';
import { parseLabels } from '../../events/names.js';
import { tick } from '../../runtime/daemon/pass.js';
import { intOption, JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { EXIT, exitCodeForRunStatus } from '../exit-codes.js';
import { durationText, paint, printJson, statusColor } from '../render.js';

const spec: CommandSpec = {
  name: 'tick',
  summary: 'Run one scheduling pass in the foreground: decide every due slot, run what fires, wait.',
  description: [
    'For cron-style use without a daemon (e.g. `* * * * * loops tick` in crontab). Every decision —',
    'fired, skipped for overlap, coalesced or missed by the catch-up policy — is recorded on the',
    "loop's stream (loops why explains them). Two ticks at once never decide a slot twice.",
    'Exit code: 0 when every run succeeded (or nothing was due), else that of the worst run (3, 4, 5).',
  ].join('\n'),
  positionals: [],
  options: {
    concurrency: { type: 'string', value: '<n>', description: 'loops whose runs execute at once (default 4)' },
    labels: {
      type: 'string',
      multiple: true,
      value: '<labels>',
      description: "this runner's labels, comma-separated: it runs loops created with --runs-on naming them (default $LOOPS_HOST_LABELS)",
    },
    json: JSON_OPTION,
  },
  examples: ['loops tick', 'loops tick --json'],
};

function describe(type: string, data: Record<string, unknown>): string {
  switch (type) {
    case 'slot.fired':
      return `${data.slot} fired → ${data.runId}${data.late ? ' (late: caught up)' : ''}`;
    case 'slot.skipped':
      return `${data.slot} skipped: ${data.reason}${data.blockedBy ? ` (${data.blockedBy} still running)` : ''}`;
    case 'slot.coalesced':
      return `${data.count} missed slot(s) ${data.from} … ${data.to} coalesced into ${data.into}`;
    case 'slot.missed':
      return `${data.count} slot(s) ${data.from} … ${data.to} missed: ${data.reason}`;
    case 'loop.expired':
      return `expired (${data.reason})`;
    case 'slot.dropped':
      return `${data.slot} (run ${data.runId}) dropped: ${data.reason}`;
    default:
      return type;
  }
}

function worst(runs: RunView[]): number {
  return runs.reduce<number>((code, run) => Math.max(code, exitCodeForRunStatus(run.status)), EXIT.ok);
}

const tickCommand: CliCommand = {
  spec,
  async run({ values }, ctx: CliContext) {
    const concurrency = intOption(spec, 'concurrency', values.concurrency, 4);
    const labels = values.labels !== undefined ? parseLabels(values.labels as string[], '--labels') : undefined;
    const runtime = await openRuntime({ dataDir: ctx.dataDir, clock: ctx.clock, ...(labels ? { labels } : {}) });
    const controller = new AbortController();
    const onSignal = (signal: NodeJS.Signals) => controller.abort(`interrupted by ${signal}`);
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    try {
      const result = await tick(runtime, {
        concurrency,
        signal: controller.signal,
        onDecision: ctx.json
          ? undefined
          : (loopName, event) => ctx.out.write(`${paint(ctx.color, 'bold', loopName)}  ${describe(event.type, event.data as Record<string, unknown>)}\n`),
        onStart: ctx.json
          ? undefined
          : (item) =>
              ctx.out.write(
                `${paint(ctx.color, 'bold', item.loopName)}  ${
                  item.kind === 'retry'
                    ? `retry of ${item.slot} (attempt ${item.attempt}) due → ${item.runId}`
                    : item.kind === 'buffered'
                      ? `buffered slot ${item.slot} starts → ${item.runId}`
                      : item.runsOn
                        ? `${item.slot} fired for a runner labelled ${item.runsOn.join(',')} → ${item.runId}`
                        : `${item.slot} fired earlier, not started (its runner stopped) → ${item.runId}`
                }\n`,
              ),
        onRun: ctx.json
          ? undefined
          : (run) =>
              (run.status === 'succeeded' ? ctx.out : ctx.err).write(
                `${paint(ctx.color, 'bold', run.loopName)}  run ${run.id} ${paint(ctx.color, statusColor(run.status), run.status)} in ${durationText(run.durationMs)}${run.error ? ` (${run.error})` : ''}\n`,
              ),
      });
      if (ctx.json) printJson(ctx, result);
      else if (result.decisions.length === 0 && result.started.length === 0) ctx.err.write('nothing due\n');
      for (const name of result.conflicts) ctx.err.write(`loops: ${name}: another scheduler decided its due slots first\n`);
      return worst(result.runs);
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      runtime.close();
    }
  },
};

export const commands: Record<string, CliCommand> = { tick: tickCommand };
