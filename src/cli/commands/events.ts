import type { Db } from '../../events/db.js';
import { NotFoundError } from '../../events/errors.js';
import { SqliteEventLog } from '../../events/sqlite-log.js';
import type { EventStore } from '../../events/types.js';
import { streamIdsWithPrefix } from '../../events/sqlite-reads.js';
import { findLoop, findRun } from '../../runtime/queries/loops.js';
import { shownRef } from '../../runtime/queries/refs.js';
import { determinismError, replayArchived, replayStream } from '../../runtime/admin/replay.js';
import { openReader } from '../../runtime/store.js';
import { intOption, JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
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

const replaySpec: CommandSpec = {
  name: 'replay',
  summary: 'Rebuild every state of a run from the log alone and check it against the recorded states.',
  description: [
    "Folds the run's events through the machine version that wrote them and prints each step:",
    'version, event, time, state before -> after and what changed. Never runs anything.',
    'Exit code 0 when every replayed state equals the recorded one, 6 (determinism error) otherwise.',
    '',
    'A run archived by loops prune --archive starts with its stream.archived event; --archive replays',
    'the moved events from the archive file first (its sha256 checked against the one recorded), then',
    'checks that they lead to the state the archive recorded.',
  ].join('\n'),
  positionals: [{ name: 'run', required: true, description: 'run id (or unique prefix); a loop name or id replays the loop' }],
  options: {
    archive: { type: 'boolean', description: "an archived run: replay its archived events from the archive file too" },
    'archive-file': { type: 'string', value: '<file>', description: 'where the archive file is now, if it was moved (implies --archive)' },
    json: JSON_OPTION,
  },
  examples: ['loops replay run_01m8pavs3mv5h5nscgtr49', 'loops replay run_01m8pavs3mv5h5nscgtr49 --archive'],
};

function valueText(v: unknown): string {
  if (v === undefined) return '∅';
  return truncate(typeof v === 'string' ? JSON.stringify(v) : (JSON.stringify(v) ?? 'undefined'), 70);
}

function renderReplay(ctx: CliContext, result: Awaited<ReturnType<typeof replayStream>>): void {
  const c = ctx.color;
  ctx.out.write(
    `${paint(c, 'bold', result.streamId)} on ${result.machine.id}@${result.machine.version}: ${result.steps.length} event(s)\n\n`,
  );
  for (const s of result.steps) {
    const before = typeof s.stateBefore === 'string' ? s.stateBefore : JSON.stringify(s.stateBefore);
    const after = typeof s.stateAfter === 'string' ? s.stateAfter : JSON.stringify(s.stateAfter);
    const mark = s.matches ? paint(c, 'green', '✓') : paint(c, 'red', '✗');
    if (s.archived && result.steps[0] === s) {
      // The archived history is not here: say where it is.
      const data = s.archived;
      ctx.out.write(
        paint(c, 'gray', `  v${data.fromVersion}–v${data.toVersion}  ${data.events} event(s) archived to ${data.file} (sha256 ${data.sha256.slice(0, 12)}…); --archive replays them\n`),
      );
    }
    ctx.out.write(
      `${mark} v${s.version}  ${s.at}  ${paint(c, 'bold', s.type)}  ${before} → ${paint(c, statusColor(after), after)}\n`,
    );
    for (const change of s.changes) {
      ctx.out.write(`      ${change.key}: ${valueText(change.before)} → ${valueText(change.after)}\n`);
    }
    if (s.actions.length) ctx.out.write(paint(c, 'gray', `      effects: ${s.actions.join(', ')} (not executed)\n`));
    if (!s.matches) {
      ctx.out.write(paint(c, 'red', `      recorded state was ${JSON.stringify(s.recordedState)}\n`));
    }
  }
  ctx.out.write(
    result.ok
      ? `\n${paint(c, 'green', 'ok')}: every replayed state matches the log\n`
      : `\n${paint(c, 'red', 'mismatch')} at version ${result.firstMismatch}\n`,
  );
}

const replay: CliCommand = {
  spec: replaySpec,
  async run({ positionals, values }, ctx) {
    const reader = await openReader(ctx.dataDir);
    const log = new SqliteEventLog(reader.db);
    try {
      const streamId = await resolveStream(reader.db, log, positionals[0]!);
      const file = values['archive-file'];
      const result =
        values.archive === true || typeof file === 'string'
          ? await replayArchived(log, ctx.dataDir, streamId, typeof file === 'string' ? file : undefined)
          : await replayStream(log, streamId);
      if (ctx.json) printJson(ctx, result.steps);
      else renderReplay(ctx, result);
      if (!result.ok) throw determinismError(result);
      return EXIT.ok;
    } finally {
      log.close();
      reader.close();
    }
  },
};

export const commands: Record<string, CliCommand> = { events, replay };
