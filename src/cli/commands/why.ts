import { findLoop } from '../../runtime/queries/loops.js';
import { parseInstant } from '../../scheduling/schedule.js';
import { openReader } from '../../runtime/store.js';
import { explainSlot, recentDecisions } from '../../runtime/admin/why.js';
import { intOption, JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { paint, printJson, statusColor, table, when } from '../render.js';

const spec: CommandSpec = {
  name: 'why',
  summary: "Explain from the log what happened to a loop's slots: fired, skipped, coalesced or missed, and why.",
  description: [
    'Without --at: the most recent decisions. With --at: the slot at (or just before) that time —',
    'which decision it got and why, or why it got none (paused, stopped, not due yet, no scheduler ran).',
    'Times without an offset are read in the loop zone.',
  ].join('\n'),
  positionals: [{ name: 'loop', required: true, description: 'loop name or id' }],
  options: {
    at: { type: 'string', value: '<time>', description: 'the time to explain, e.g. 2026-12-01T03:00' },
    limit: { type: 'string', short: 'n', value: '<n>', description: 'how many recent decisions (default 10)' },
    json: JSON_OPTION,
  },
  examples: ['loops why backup', "loops why backup --at '2026-12-01T03:00'", 'loops why backup --json'],
};

const why: CliCommand = {
  spec,
  async run({ values, positionals }, ctx) {
    const limit = intOption(spec, 'limit', values.limit, 10);
    const reader = await openReader(ctx.dataDir);
    try {
      const loop = findLoop(reader.db, positionals[0]!, { includeRemoved: true });
      if (values.at !== undefined) {
        const atMs = parseInstant(values.at as string, loop.timing.tz, '--at');
        const result = explainSlot(reader.db, loop, atMs, ctx.now);
        if (ctx.json) printJson(ctx, result);
        else ctx.out.write(`${paint(ctx.color, 'bold', loop.name)}: ${result.explanation}\n`);
        return EXIT.ok;
      }
      const decisions = recentDecisions(reader.db, loop.id, limit, loop.runsOn);
      if (ctx.json) {
        printJson(ctx, decisions);
        return EXIT.ok;
      }
      if (decisions.length === 0) {
        ctx.err.write(`No slot of ${loop.name} has been decided yet${loop.nextRunAt ? ` (next due ${loop.nextRunAt})` : ''}.\n`);
        return EXIT.ok;
      }
      ctx.out.write(
        table(
          ['SLOT', 'DECISION', 'WHY', 'RUN', 'DECIDED'],
          decisions.map((d) => [
            d.count > 1 ? `${d.from} … ${d.to} (${d.count})` : d.from,
            paint(ctx.color, d.decision === 'fired' ? 'green' : 'yellow', d.decision),
            d.waitingFor ?? (d.decision === 'coalesced' ? `catch-up latest → ${d.into}` : (d.reason ?? (d.decision === 'fired' ? 'due' : ''))),
            d.runId ? `${d.runId}${d.runStatus ? ` ${paint(ctx.color, statusColor(d.runStatus), d.runStatus)}` : ''}` : '-',
            when(d.decidedAt, ctx),
          ]),
          ctx.color,
        ),
      );
      return EXIT.ok;
    } finally {
      reader.close();
    }
  },
};

export const commands: Record<string, CliCommand> = { why };
