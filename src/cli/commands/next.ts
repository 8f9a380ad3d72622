import { UsageError } from '../../events/errors.js';
import { describeSchedule } from '../../scheduling/describe.js';
import { findLoop } from '../../runtime/queries/loops.js';
import { openReader } from '../../runtime/store.js';
import { nextFires } from '../../runtime/queries/next-fires.js';
import { intOption, JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { paint, printJson, relativeTime, table } from '../render.js';

const spec: CommandSpec = {
  name: 'next',
  summary: "Preview a loop's next fire times (zone, bounds and jitter applied). Runs nothing.",
  description: 'Each row: the slot (its nominal time), when it fires (slot + jitter), and that time in the loop zone.',
  positionals: [{ name: 'loop', required: true, description: 'loop name or id' }],
  options: {
    count: { type: 'string', short: 'n', value: '<n>', description: 'how many (default 5, at most 1000)' },
    json: JSON_OPTION,
  },
  examples: ['loops next backup', 'loops next backup -n 20 --json'],
};

const next: CliCommand = {
  spec,
  async run({ values, positionals }, ctx) {
    const count = intOption(spec, 'count', values.count, 5);
    if (count > 1000) throw new UsageError('loops next: --count must be at most 1000');
    const reader = await openReader(ctx.dataDir);
    try {
      const loop = findLoop(reader.db, positionals[0]!);
      const active = loop.status === 'active';
      const fixedDelay = loop.schedule.kind === 'every' && loop.schedule.anchor === 'fixed-delay';
      const rows = nextFires(loop, ctx.now, count);
      if (ctx.json) {
        printJson(ctx, rows);
        return EXIT.ok;
      }
      if (!active) {
        ctx.err.write(`${loop.name} is ${loop.status}: it does not fire until resumed (loops resume ${loop.name})\n`);
        return EXIT.ok;
      }
      if (rows.length === 0) {
        ctx.err.write(
          fixedDelay
            ? `${loop.name} (${describeSchedule(loop.schedule)}) is running; its next slot is set when that run ends\n`
            : `${loop.name} (${describeSchedule(loop.schedule)}) does not fire again\n`,
        );
        return EXIT.ok;
      }
      const jitter = loop.timing.jitterMs !== null;
      ctx.out.write(
        table(
          ['#', ...(jitter ? ['SLOT'] : []), 'FIRES AT (UTC)', `LOCAL (${loop.timing.tz})`, 'IN'],
          rows.map((r, i) => [
            String(i + 1),
            ...(jitter ? [r.slot] : []),
            r.fireAt,
            r.local,
            paint(ctx.color, 'gray', relativeTime(r.fireAt, ctx.now)),
          ]),
          ctx.color,
        ),
      );
      if (loop.schedule.kind === 'every' && loop.schedule.anchor === 'fixed-delay') {
        ctx.err.write('fixed-delay: each later slot is due --every after the previous run finishes\n');
      }
      return EXIT.ok;
    } finally {
      reader.close();
    }
  },
};

export const commands: Record<string, CliCommand> = { next };
