import { SqliteEventLog } from '../../events/sqlite-log.js';
import { resolveStream } from '../../runtime/queries/log-events.js';
import { openReader } from '../../runtime/store.js';
import { intOption, JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { paint, printJson, statusColor, table, truncate } from '../render.js';

const eventsSpec: CommandSpec = {
  name: 'events',
  summary: "Print the event stream of a run or a loop, in order: every fact loops recorded.",
  positionals: [{ name: 'run-or-loop', required: true, description: 'run id (or unique prefix), or loop name or id, or a stream id (host:<id>, account:<id>, …)' }],
  options: {
    limit: { type: 'string', short: 'n', value: '<n>', description: 'only the first n events (default: all)' },
    json: JSON_OPTION,
  },
  examples: ['loops events run_01m8pavs3mv5h5nscgtr49', 'loops events backup --json', 'loops events host:gpu-box', 'loops workflows events wfrun_01m8pb2k4x --limit 20'],
};

function summarize(data: unknown): string {
  if (data === null || typeof data !== 'object') return JSON.stringify(data);
  const parts = Object.entries(data as Record<string, unknown>)
    .filter(([, v]) => v !== null && v !== '' && !(Array.isArray(v) && v.length === 0))
    .map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : String(v)}`);
  return parts.join(' ');
}

const events: CliCommand = {
  spec: eventsSpec,
  async run({ positionals, values }, ctx) {
    const limit = intOption(eventsSpec, 'limit', values.limit, Infinity);
    const reader = await openReader(ctx.dataDir);
    const log = new SqliteEventLog(reader.db);
    try {
      const streamId = await resolveStream(reader.db, log, positionals[0]!);
      const list = (await log.readStream(streamId)).slice(0, limit);
      if (ctx.json) {
        printJson(ctx, list);
        return EXIT.ok;
      }
      ctx.out.write(paint(ctx.color, 'gray', `${streamId} — ${list.length} event(s)\n`));
      const width = Math.max(40, (process.stdout.columns ?? 160) - 80);
      ctx.out.write(
        table(
          ['VER', 'AT', 'TYPE', 'STATE', 'DATA'],
          list.map((e) => [
            String(e.version),
            e.at,
            e.type,
            paint(ctx.color, statusColor(typeof e.state === 'string' ? e.state : null), typeof e.state === 'string' ? e.state : JSON.stringify(e.state)),
            truncate(summarize(e.data), ctx.out.isTTY ? width : 400),
          ]),
          ctx.color,
        ),
      );
      return EXIT.ok;
    } finally {
      log.close();
      reader.close();
    }
  },
};

export const commands: Record<string, CliCommand> = { events };
