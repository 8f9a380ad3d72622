import type { Db } from '../../events/db.js';
import { NotFoundError } from '../../events/errors.js';
import { SqliteEventLog } from '../../events/sqlite-log.js';
import type { EventStore } from '../../events/types.js';
import { streamIdsWithPrefix } from '../../events/sqlite-reads.js';
import { findLoop, findRun } from '../../runtime/queries/loops.js';
import { shownRef } from '../../runtime/queries/refs.js';
import { openReader } from '../../runtime/store.js';
import { intOption, JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { paint, printJson, statusColor, table, truncate } from '../render.js';

/** A run or workflow run id (or unique prefix), a loop name or id, or a raw stream id (`run:…`, `loop:…`, `wfrun:…`, `workflow:…`, `account:…`, `retention:output`). */
export async function resolveStream(db: Db, log: EventStore, arg: string): Promise<string> {
  if (/^(run|loop|wfrun|workflow|account|retention):/.test(arg)) {
    if (!(await log.streamInfo(arg))) throw new NotFoundError(`no stream ${shownRef(arg)} in the log`);
    return arg;
  }
  if (arg.startsWith('run_')) return `run:${findRun(db, arg).id}`;
  if (arg.startsWith('wfrun_')) {
    // A workflow run id or a unique prefix of one.
    const rows = streamIdsWithPrefix(db, `wfrun:${arg}`, 2);
    if (rows.length === 1) return rows[0]!;
    throw rows.length === 0
      ? new NotFoundError(`no workflow run ${shownRef(arg)}`, { hint: 'loops workflows runs lists workflow run ids' })
      : new NotFoundError(`${shownRef(arg)} is the prefix of several workflow runs`, { hint: 'give more of the id' });
  }
  try {
    return `loop:${findLoop(db, arg, { includeRemoved: true }).id}`;
  } catch (error) {
    if (!(error instanceof NotFoundError)) throw error;
  }
  try {
    return `run:${findRun(db, arg).id}`;
  } catch (error) {
    if (error instanceof NotFoundError) {
      throw new NotFoundError(`no run or loop matches ${shownRef(arg)}`, {
        hint: 'loops runs lists run ids; loops list lists loops',
      });
    }
    throw error;
  }
}

const eventsSpec: CommandSpec = {
  name: 'events',
  summary: "Print the event stream of a run or a loop, in order: every fact loops recorded.",
  positionals: [{ name: 'run-or-loop', required: true, description: 'run id (or unique prefix), or loop name or id' }],
  options: {
    limit: { type: 'string', short: 'n', value: '<n>', description: 'only the first n events (default: all)' },
    json: JSON_OPTION,
  },
  examples: ['loops events run_01m8pavs3mv5h5nscgtr49', 'loops events backup --json', 'loops workflows events wfrun_01m8pb2k4x --limit 20'],
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
