/**
 * `loops list`: a module of its own, so that listing loads the loops query and the renderer only
 * — not what `show` and the state commands need (the agent provider table, run files and views,
 * notices, workflow queries): a cold `list --json` is what scripts call (issue 14, bench:cold).
 */
import { describeSchedule } from '../../scheduling/describe.js';
import { UsageError } from '../../events/errors.js';
import { listLoops } from '../../runtime/queries/loops.js';
import { openReader } from '../../runtime/store.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { paint, printJson, statusColor, table, when } from '../render.js';

/** Every status a loop can be in (the loop machine's states, src/machines/loop.ts). */
const LOOP_STATUSES = ['active', 'paused', 'stopped', 'expired', 'archived', 'removed'] as const;

const listSpec: CommandSpec = {
  name: 'list',
  summary: 'List loops with their status, schedule, next and last run.',
  positionals: [],
  options: {
    all: { type: 'boolean', short: 'a', description: 'include removed loops' },
    status: { type: 'string', value: '<status>', description: `only loops in this status: ${LOOP_STATUSES.join(', ')} (several: active,paused)` },
    json: JSON_OPTION,
  },
};

/** `--status active,paused` → the statuses, each checked. */
function statusFilter(value: unknown): Set<string> | null {
  if (typeof value !== 'string') return null;
  const wanted = value.split(',').map((s) => s.trim().toLowerCase());
  for (const status of wanted) {
    if (!(LOOP_STATUSES as readonly string[]).includes(status)) {
      throw new UsageError(`loops list: --status ${JSON.stringify(status)} is not a loop status`, { hint: `use one of ${LOOP_STATUSES.join(', ')} (several separated by commas)` });
    }
  }
  return new Set(wanted);
}

export const list: CliCommand = {
  spec: listSpec,
  async run({ values }, ctx) {
    const reader = await openReader(ctx.dataDir);
    try {
      const statuses = statusFilter(values.status);
      const loops = listLoops(reader.db, { all: values.all === true || statuses?.has('removed') === true }).filter(
        (l) => statuses === null || statuses.has(l.status),
      );
      if (ctx.json) {
        printJson(ctx, loops);
        return EXIT.ok;
      }
      if (loops.length === 0 && statuses !== null) {
        ctx.err.write(`No ${[...statuses].join(' or ')} loops.\n`);
        return EXIT.ok;
      }
      if (loops.length === 0) {
        ctx.err.write("No loops yet. Create one with: loops create command <name> --cmd '<command>' --every 1h\n");
        return EXIT.ok;
      }
      const rows = loops.map((l) => [
        paint(ctx.color, 'bold', l.name),
        paint(ctx.color, statusColor(l.status), l.status),
        describeSchedule(l.schedule),
        when(l.nextRunAt, ctx),
        l.lastRun ? `${paint(ctx.color, statusColor(l.lastRun.status), l.lastRun.status ?? '-')} ${when(l.lastRun.at, ctx)}` : '-',
        paint(ctx.color, 'gray', l.id),
      ]);
      ctx.out.write(table(['NAME', 'STATUS', 'SCHEDULE', 'NEXT RUN', 'LAST RUN', 'ID'], rows, ctx.color));
      return EXIT.ok;
    } finally {
      reader.close();
    }
  },
};

export const commands: Record<string, CliCommand> = { list };
