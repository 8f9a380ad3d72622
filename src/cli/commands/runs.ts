import { findLoop, listRuns } from '../../runtime/queries/loops.js';
import { openReader } from '../../runtime/store.js';
import { intOption, JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { agentUsage, durationText, paint, printJson, statusColor, table, truncate, when } from '../render.js';

const STATUSES = ['claimed', 'spawning', 'running', 'succeeded', 'failed', 'timed_out', 'cancelled', 'abandoned'];

const spec: CommandSpec = {
  name: 'runs',
  summary: 'List runs, newest first, for all loops or one.',
  positionals: [{ name: 'loop', required: false, description: 'only runs of this loop (name or id)' }],
  options: {
    limit: { type: 'string', short: 'n', value: '<n>', description: 'show at most n runs (default 20)' },
    status: { type: 'string', value: '<status>', description: `only runs with this status (${STATUSES.join(', ')})` },
    'show-output': { type: 'boolean', description: "then each run's stdout and stderr under a header (loops logs <run>)" },
    json: JSON_OPTION,
  },
  examples: ['loops runs', 'loops runs backup --limit 5', 'loops runs backup -n 3 --show-output', 'loops runs --status failed --json'],
};

const runs: CliCommand = {
  spec,
  async run({ values, positionals }, ctx) {
    const limit = intOption(spec, 'limit', values.limit, 20);
    const status = values.status as string | undefined;
    if (status !== undefined && !STATUSES.includes(status)) {
      const { UsageError } = await import('../../events/errors.js');
      throw new UsageError(`loops runs: unknown status ${JSON.stringify(status)}`, { hint: `use one of ${STATUSES.join(', ')}` });
    }
    const reader = await openReader(ctx.dataDir);
    try {
      const loop = positionals[0] ? findLoop(reader.db, positionals[0], { includeRemoved: true }) : undefined;
      const list = listRuns(reader.db, { limit, ...(loop ? { loopId: loop.id } : {}), ...(status ? { status } : {}) });
      if (ctx.json) {
        printJson(ctx, list);
        return EXIT.ok;
      }
      if (list.length === 0) {
        ctx.err.write(loop ? `No runs of ${loop.name} yet (loops run-now ${loop.name} runs it).\n` : 'No runs yet.\n');
        return EXIT.ok;
      }
      // Agent runs also show what the CLI used: tokens in/out and cost.
      const agents = list.some((r) => r.agent !== null);
      ctx.out.write(
        table(
          ['RUN', 'LOOP', 'STATUS', 'TRIGGER', 'ATTEMPT', 'STARTED', 'DURATION', 'EXIT', ...(agents ? ['TOKENS/COST'] : []), 'ERROR'],
          list.map((r) => [
            r.id,
            r.loopName,
            paint(ctx.color, statusColor(r.status), r.status),
            // The run of an --on-failure command (loops show <run> says whose failure it told).
            r.slot.startsWith('hook:') ? 'on-failure' : r.trigger,
            String(r.attempt),
            when(r.startedAt ?? r.claimedAt, ctx),
            durationText(r.durationMs),
            r.exitCode === null ? (r.signal ?? '-') : String(r.exitCode),
            ...(agents ? [agentUsage(r.agent)] : []),
            r.error ? truncate(r.error, 60) : '',
          ]),
          ctx.color,
        ),
      );
      // --show-output (the predecessor's flag): each run's output, newest first, as loops logs prints it.
      if (values['show-output'] === true) {
        const { commands } = await import('./logs.js');
        for (const r of list) {
          ctx.out.write(`\n${paint(ctx.color, 'bold', `── ${r.id} · ${r.loopName} · ${r.status} ──`)}\n`);
          await commands.logs!.run({ values: {}, positionals: [r.id] }, ctx);
        }
      }
      return EXIT.ok;
    } finally {
      reader.close();
    }
  },
};

export const commands: Record<string, CliCommand> = { runs };
