/**
 * `loops replay <run>`: every transition of a stream rebuilt from the log alone and checked — the
 * sequence (text, or JSON Lines with --json), the full state at one point (--at), up to the first
 * failure (--until-failure), or an interactive stepper on a terminal. Events are read a page at a
 * time and each step is written as it is replayed: memory stays flat in the stream's length.
 */
import { UsageError, NotFoundError } from '../../events/errors.js';
import { SqliteEventLog } from '../../events/sqlite-log.js';
import type { StoredEvent } from '../../events/types.js';
import { divergenceError, failureAt, streamPages, StreamReplay, type ReplayStep } from '../../runtime/admin/replay.js';
import { archivedHistory } from '../../runtime/admin/replay-archive.js';
import { openReader } from '../../runtime/store.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { paint } from '../render.js';
import { stateText, stepLines, tailOf } from '../replay-render.js';
import { runStepper, type StepperEntry } from '../replay-stepper.js';
import { resolveStream } from '../../runtime/queries/log-events.js';

const replaySpec: CommandSpec = {
  name: 'replay',
  summary: 'Rebuild every state of a run from the log alone and check it against the recorded states.',
  description: [
    "Folds the run's events through the machine version that wrote them and prints each transition:",
    'version, event, time, state before -> after, the context fields it changed, the effects it asked',
    'for (never executed). Each event is checked: the state it recorded, and the hash of every context',
    'field it changed (events from loops versions that did not record them: the state only).',
    'Exit code 0 when everything matches, 6 (determinism error) at the first event and field that differ.',
    '',
    'On a terminal (stdin and stdout), an interactive stepper: → l j n space next, ← h k p back,',
    'g first, G last, q quit. Piped, or with --json (JSON Lines, one object per transition): the sequence.',
    '',
    'A run archived by loops prune --archive starts with its stream.archived event; --archive replays',
    'the moved events from the archive file first (its sha256 checked against the one recorded), then',
    'checks that they lead to the state the archive recorded.',
  ].join('\n'),
  positionals: [{ name: 'run', required: true, description: 'run id (or unique prefix); a workflow run id; a loop name or id replays the loop' }],
  options: {
    at: { type: 'string', value: '<version|time>', description: 'print only the full state (state, whole context, event) at that version, or after the last event at or before that ISO time' },
    'until-failure': { type: 'boolean', description: 'stop at the first failing transition (the run, or a step, failed or timed out)' },
    archive: { type: 'boolean', description: 'an archived run: replay its archived events from the archive file too' },
    'archive-file': { type: 'string', value: '<file>', description: 'where the archive file is now, if it was moved (implies --archive)' },
    json: JSON_OPTION,
  },
  examples: [
    'loops replay run_01m8pavs3mv5h5nscgtr49',
    'loops replay wfrun_01m8pb2k4x --until-failure',
    'loops replay run_01m8pavs3mv5h5nscgtr49 --at 4 --json',
    'loops replay run_01m8pavs3mv5h5nscgtr49 --archive',
  ],
};

/** Output written in chunks of about 64 KB, waiting when the reader is slower (a pipe). */
class Chunked {
  private parts: string[] = [];
  private size = 0;
  constructor(private readonly out: NodeJS.WritableStream) {}
  async write(text: string): Promise<void> {
    this.parts.push(text);
    this.size += text.length;
    if (this.size >= 65536) await this.flush();
  }
  async flush(): Promise<void> {
    if (!this.parts.length) return;
    const text = this.parts.join('');
    this.parts = [];
    this.size = 0;
    if (!this.out.write(text)) await new Promise<void>((resolve) => this.out.once('drain', () => resolve()));
  }
}

/** A `--at` target: a version (a whole number) or an instant (ISO time). */
function parseAt(value: string): { version: number } | { time: number; text: string } {
  if (/^\d+$/.test(value)) return { version: Number(value) };
  const time = Date.parse(value);
  if (Number.isNaN(time)) {
    throw new UsageError(`--at ${JSON.stringify(value)} is neither a version nor an ISO time`, { hint: 'e.g. --at 4, or --at 2026-12-01T03:00:00Z' });
  }
  return { time, text: value };
}

/** The JSON line of a step: what it changed, never whole contexts. */
function stepJson(step: ReplayStep): string {
  return JSON.stringify(step) + '\n';
}

async function* pagesOf(ctx: CliContext, log: SqliteEventLog, streamId: string, values: Record<string, unknown>): AsyncGenerator<StoredEvent[]> {
  const file = values['archive-file'];
  if (values.archive === true || typeof file === 'string') {
    const found = await archivedHistory(log, ctx.dataDir, streamId, typeof file === 'string' ? file : undefined);
    yield found.history;
    yield found.live;
  } else yield* streamPages(log, streamId);
}

const replay: CliCommand = {
  spec: replaySpec,
  async run({ positionals, values }, ctx) {
    if (values.at !== undefined && values['until-failure'] === true) throw new UsageError('--at and --until-failure do not go together', { hint: 'give one of them' });
    const at = typeof values.at === 'string' ? parseAt(values.at) : null;
    const reader = await openReader(ctx.dataDir);
    const log = new SqliteEventLog(reader.db);
    try {
      const streamId = await resolveStream(reader.db, log, positionals[0]!);
      const replay = new StreamReplay(streamId, await log.streamInfo(streamId));
      const pages = pagesOf(ctx, log, streamId, values);
      if (at) return await printAt(ctx, replay, pages, at);
      const untilFailure = values['until-failure'] === true;
      const stdin = process.stdin as NodeJS.ReadStream;
      if (!ctx.json && ctx.out.isTTY === true && stdin.isTTY === true && ctx.out === process.stdout) {
        return await stepper(ctx, replay, pages, untilFailure, stdin);
      }
      return await sequence(ctx, replay, pages, untilFailure);
    } finally {
      log.close();
      reader.close();
    }
  },
};

/** The sequence: each step written as it is replayed. */
async function sequence(ctx: CliContext, replay: StreamReplay, pages: AsyncIterable<StoredEvent[]>, untilFailure: boolean): Promise<number> {
  const c = ctx.color;
  const out = new Chunked(ctx.out);
  if (!ctx.json) await out.write(`${paint(c, 'bold', replay.streamId)} on ${replay.machine.id}@${replay.machine.version}\n\n`);
  let failure: { step: ReplayStep; what: string } | null = null;
  let noted = false;
  outer: for await (const page of pages) {
    for (const event of page) {
      const step = replay.step(event);
      if (ctx.json) await out.write(stepJson(step));
      else {
        if (step.archived && replay.count === 1) {
          const a = step.archived;
          await out.write(paint(c, 'gray', `  v${a.fromVersion}–v${a.toVersion}  ${a.events} event(s) archived to ${a.file} (sha256 ${a.sha256.slice(0, 12)}…); --archive replays them\n`));
        }
        if (!step.contextChecked && !noted) {
          noted = true;
          await out.write(paint(c, 'gray', `  (from v${step.version}: context changes not recorded before this loops version — checked on the state only)\n`));
        }
        await out.write(stepLines(step, c).join('\n') + '\n');
      }
      const what = untilFailure ? failureAt(step) : null;
      if (what) {
        failure = { step, what };
        break outer;
      }
    }
  }
  if (!ctx.json) {
    const checked = replay.unrecorded ? `; ${replay.unrecorded.events} checked on the state only` : '';
    if (untilFailure) {
      await out.write(failure ? `\n${paint(c, 'red', 'first failure')} at v${failure.step.version} (${failure.step.type}): ${failure.what}\n` : `\nno failing transition in ${replay.count} event(s)\n`);
    }
    const first = replay.firstMismatch;
    await out.write(
      first
        ? `\n${paint(c, 'red', 'mismatch')} at version ${first.version} (${first.type})\n`
        : `\n${paint(c, 'green', 'ok')}: every replayed state matches the log (${replay.count} event(s)${checked})\n`,
    );
  }
  await out.flush();
  if (replay.firstMismatch) throw divergenceError(replay.streamId, replay.machine, replay.firstMismatch);
  return EXIT.ok;
}

/** `--at`: the full state after the target event, nothing else. */
async function printAt(ctx: CliContext, replay: StreamReplay, pages: AsyncIterable<StoredEvent[]>, at: { version: number } | { time: number; text: string }): Promise<number> {
  let last: StoredEvent | null = null;
  outer: for await (const page of pages) {
    for (const event of page) {
      if ('version' in at ? event.version > at.version : Date.parse(event.at) > at.time) break outer;
      replay.step(event);
      last = event;
    }
  }
  if (!last || ('version' in at && last.version !== at.version)) {
    const what = 'version' in at ? `version ${at.version}` : `an event at or before ${at.text}`;
    throw new NotFoundError(`${replay.streamId} has no ${what}`, {
      hint: last ? `its last version is ${last.version}` : 'the stream starts later: loops events lists its versions and times',
    });
  }
  const state = { streamId: replay.streamId, machine: replay.machine, version: last.version, type: last.type, at: last.at, state: replay.snapshot.value, context: replay.snapshot.context, event: last };
  if (ctx.json) ctx.out.write(JSON.stringify(state, null, 2) + '\n');
  else {
    const c = ctx.color;
    ctx.out.write(
      [
        `${paint(c, 'bold', replay.streamId)} at v${last.version} (${last.type}, ${last.at}) on ${replay.machine.id}@${replay.machine.version}`,
        '',
        `${paint(c, 'bold', 'state')}    ${stateText(replay.snapshot.value)}`,
        `${paint(c, 'bold', 'event')}    ${JSON.stringify({ type: last.type, at: last.at, data: last.data, meta: last.meta }, null, 2).replace(/\n/g, '\n         ')}`,
        `${paint(c, 'bold', 'context')}  ${JSON.stringify(replay.snapshot.context, null, 2).replace(/\n/g, '\n         ')}`,
        '',
      ].join('\n'),
    );
  }
  if (replay.firstMismatch) throw divergenceError(replay.streamId, replay.machine, replay.firstMismatch);
  return EXIT.ok;
}

/** On a terminal: the steps (changes only, and the tails their events carry), then the stepper. */
async function stepper(ctx: CliContext, replay: StreamReplay, pages: AsyncIterable<StoredEvent[]>, untilFailure: boolean, stdin: NodeJS.ReadStream): Promise<number> {
  const entries: StepperEntry[] = [];
  outer: for await (const page of pages) {
    for (const event of page) {
      const step = replay.step(event);
      entries.push({ step, tail: tailOf(event.data) });
      if (untilFailure && failureAt(step)) break outer;
    }
  }
  const stdout = process.stdout;
  const mismatch = entries.findIndex((e) => !e.step.matches);
  await runStepper(entries, { input: stdin, output: ctx.out }, {
    title: `${replay.streamId} on ${replay.machine.id}@${replay.machine.version}`,
    color: ctx.color,
    columns: stdout.columns || 100,
    rows: stdout.rows || 30,
    // At the failure (--until-failure) or the first mismatch; else at the start.
    start: mismatch >= 0 ? mismatch : untilFailure ? entries.length - 1 : 0,
  });
  if (replay.firstMismatch) throw divergenceError(replay.streamId, replay.machine, replay.firstMismatch);
  return EXIT.ok;
}

export const commands: Record<string, CliCommand> = { replay };
