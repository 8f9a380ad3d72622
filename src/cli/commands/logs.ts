/**
 * `loops logs <run | loop | wfrun>`: print a run's output from its files, or follow it while the
 * run goes (like `docker logs -f`), then exit with the run's outcome. Arguments and rendering only:
 * what to show and reading it is src/runtime/queries/run-output.ts, following it (files through
 * rotation, the run's end from the log) src/runtime/queries/follow-output.ts. Never writes.
 */
import { existsSync } from 'node:fs';
import { UsageError } from '../../events/errors.js';
import { TranscriptRenderer, thousands, type RenderedLine } from '../agent-report/index.js';
import { followOutput } from '../../runtime/queries/follow-output.js';
import { outputJson } from '../../runtime/queries/output-json.js';
import { droppedBytes, keptBytes, outputFiles, resolveLogsSubject, type LogsSubject, type OutputFiles, type OutputStream } from '../../runtime/queries/run-files.js';
import { outputMasker, outputTracker, readOutputMasked, type OutputUnit, type OutputView } from '../../runtime/queries/run-output.js';
import type { SecretMasker } from '../../runtime/execution/secrets.js';
import { openReader } from '../../runtime/store.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { EXIT, exitCodeForRunStatus } from '../exit-codes.js';
import { paint, printJson, relativeTime, type Color } from '../render.js';

/** Polls a partial line may wait for its newline before it is printed anyway (when streams interleave). */
const PARTIAL_POLLS = 5;

const spec: CommandSpec = {
  name: 'logs',
  summary: "Print a run's output, or follow it while the run goes.",
  description: [
    'A run id (or unique prefix), a loop name or id (its latest run), or a workflow run id (each',
    'step attempt in step order, under a header; --step for one step). stdout, then stderr, with a',
    'header each when both have output; --stdout / --stderr print one stream\'s bytes as they are.',
    '',
    '--follow prints new output as it comes until the run ends, then exits with its outcome:',
    '0 succeeded, 3 failed, 4 timed out, 5 cancelled or abandoned (Ctrl-C: 130, the run goes on).',
    'Output past the 16 MiB cap is rotated: the last 16 MiB stay, the first 64 KiB are kept aside',
    '(--head prints them); stderr says how much was dropped.',
    'Agent runs: --pretty renders the CLI\'s JSONL as short lines (default on a terminal); --raw',
    'prints the bytes.',
  ].join('\n'),
  positionals: [{ name: 'run', required: true, description: 'run id or prefix, loop name or id (latest run), or workflow run id' }],
  options: {
    follow: { type: 'boolean', short: 'f', description: 'keep printing new output until the run ends; exit with its outcome' },
    tail: { type: 'string', short: 'n', value: '<n>', description: 'only the last n lines of each stream (default: all)' },
    stdout: { type: 'boolean', description: 'only stdout, raw (no header)' },
    stderr: { type: 'boolean', description: 'only stderr, raw (no header)' },
    head: { type: 'boolean', description: 'print the beginning kept when the output was rotated (<file>.head)' },
    step: { type: 'string', value: '<id>', description: 'workflow runs: only this step' },
    attempt: { type: 'string', value: '<n>', description: 'with --step: this attempt (default: the last)' },
    pretty: { type: 'boolean', description: "agent runs: render the CLI's JSONL as readable lines (default on a terminal)" },
    raw: { type: 'boolean', description: 'agent runs: print the JSONL as it is' },
    json: JSON_OPTION,
  },
  examples: [
    'loops logs backup',
    'loops logs run_01J… --stderr -n 50',
    'loops logs backup -f',
    'loops logs wfrun_01J… --step test --attempt 2',
    'loops logs review --pretty',
    'loops logs run_01J… --json | jq -r .stdout.text',
  ],
};

interface Options {
  ref: string;
  follow: boolean;
  tail: number | null;
  streams: OutputStream[];
  head: boolean;
  step: string | null;
  attempt: number | null;
  /** Render agent transcripts (resolved from --pretty / --raw / the terminal). */
  pretty: boolean;
  json: boolean;
}

function options(values: Record<string, unknown>, positionals: string[], ctx: CliContext): Options {
  const bad = (message: string, hint: string) => new UsageError(`loops logs: ${message}`, { hint });
  const follow = values.follow === true;
  if (follow && ctx.json) throw bad('--json cannot be used with --follow', 'drop --follow for a snapshot as JSON, or --json to follow as text');
  if (values.pretty && values.raw) throw bad('--pretty and --raw do not go together', 'choose one');
  if (values.head && follow) throw bad('--head cannot be used with --follow', 'the head does not change once kept: drop --follow');
  if (values.head && values.tail !== undefined) throw bad('--head and --tail do not go together', 'pipe --head through tail(1) for its last lines');
  let tail: number | null = null;
  if (values.tail !== undefined) {
    const text = String(values.tail);
    if (!/^\d+$/.test(text)) throw bad(`--tail must be a whole number of lines, got ${JSON.stringify(text)}`, 'e.g. -n 50');
    tail = Number(text);
  }
  const step = typeof values.step === 'string' ? values.step : null;
  let attempt: number | null = null;
  if (values.attempt !== undefined) {
    if (step === null) throw bad('--attempt needs --step', 'e.g. --step test --attempt 2');
    const text = String(values.attempt);
    if (!/^\d+$/.test(text) || Number(text) < 1) throw bad(`--attempt must be a positive whole number, got ${JSON.stringify(text)}`, 'attempts count from 1');
    attempt = Number(text);
  }
  const streams: OutputStream[] = values.stdout && !values.stderr ? ['stdout'] : values.stderr && !values.stdout ? ['stderr'] : ['stdout', 'stderr'];
  const pretty = values.pretty === true || (values.raw !== true && !ctx.json && ctx.out.isTTY === true);
  return { ref: positionals[0]!, follow, tail, streams, head: values.head === true, step, attempt, pretty, json: ctx.json };
}

// ── printing ─────────────────────────────────────────────────────────────────

/** Writes sections to stdout, with a `── label ──` header whenever the output moves to another section. */
class Printer {
  private current: string | null = null;
  private atLineStart = true;
  printed = 0;

  constructor(
    private readonly ctx: CliContext,
    /** Header even before the first section (several units, or both streams have output). */
    public alwaysHeader: boolean,
  ) {}

  write(section: Section, data: Buffer | string): void {
    if (data.length === 0) return;
    if (section.key !== this.current) {
      if (section.label !== null && (this.current !== null || this.alwaysHeader)) this.header(section.label);
      this.current = section.key;
    }
    this.ctx.out.write(data);
    this.printed += data.length;
    const last = typeof data === 'string' ? data.charCodeAt(data.length - 1) : data[data.length - 1];
    this.atLineStart = last === 0x0a;
  }

  /** Moves to `section` with nothing to print under it yet (a step attempt that just started): its header shows it. */
  announce(section: Section): void {
    if (this.current === section.key) return;
    if (section.label !== null && (this.current !== null || this.alwaysHeader)) this.header(section.label);
    this.current = section.key;
  }

  private header(label: string): void {
    if (!this.atLineStart) this.ctx.out.write('\n');
    this.ctx.out.write(`${paint(this.ctx.color, 'dim', `── ${label} ──`)}\n`);
    this.atLineStart = true;
  }
}

const KIND_COLOR: Partial<Record<RenderedLine['kind'], Color>> = {
  thinking: 'gray',
  tool: 'cyan',
  result: 'gray',
  error: 'red',
  final: 'green',
  info: 'gray',
};

/** One stream of one unit on its way out: masked (run not ended), split into lines and rendered (agent --pretty). */
class Section {
  readonly key: string;
  private readonly renderer: TranscriptRenderer | null;
  private partial: Buffer[] = [];
  private partialBytes = 0;
  private idle = 0;

  constructor(
    readonly unit: OutputUnit,
    readonly stream: OutputStream,
    readonly label: string | null,
    private readonly printer: Printer,
    private readonly ctx: CliContext,
    pretty: boolean,
    /** Print whole lines only (sections interleave while following). */
    private readonly lineMode: boolean,
  ) {
    this.key = `${unit.key}|${stream}`;
    this.renderer = pretty && stream === 'stdout' && unit.format !== null ? new TranscriptRenderer(unit.format) : null;
  }

  /** Bytes of the stream (already masked). */
  push(chunk: Buffer): void {
    if (chunk.length) this.emit(chunk);
  }

  /** The snapshot of this section is over: print a partial line held back (not a JSON line being rendered). */
  settle(): void {
    if (this.renderer === null) this.flushPartial();
  }

  /** No new bytes this poll: print what the masker let go; a partial line after a while. */
  idlePoll(released: Buffer): void {
    this.idle++;
    if (released.length) this.emit(released, false);
    if (this.partialBytes !== 0 && this.renderer === null && this.idle >= PARTIAL_POLLS) this.flushPartial();
  }

  end(): void {
    if (this.renderer) {
      if (this.partialBytes) this.renderLine(this.takePartial());
      for (const line of this.renderer.end()) this.printRendered(line);
    } else this.flushPartial();
  }

  private emit(data: Buffer, fresh = true): void {
    if (fresh) this.idle = 0;
    if (!this.renderer && !this.lineMode) {
      this.printer.write(this, data);
      return;
    }
    let start = 0;
    for (let nl = data.indexOf(0x0a); nl !== -1; nl = data.indexOf(0x0a, start)) {
      const piece = data.subarray(start, nl + 1);
      const line = this.partialBytes ? Buffer.concat([...this.partial, piece]) : piece;
      this.partial = [];
      this.partialBytes = 0;
      if (this.renderer) this.renderLine(line.subarray(0, line.length - 1));
      else this.printer.write(this, line);
      start = nl + 1;
    }
    if (start < data.length) {
      this.partial.push(Buffer.from(data.subarray(start)));
      this.partialBytes += data.length - start;
    }
  }

  private takePartial(): Buffer {
    const all = Buffer.concat(this.partial);
    this.partial = [];
    this.partialBytes = 0;
    return all;
  }

  private flushPartial(): void {
    if (this.partialBytes) this.printer.write(this, this.takePartial());
  }

  private renderLine(line: Buffer): void {
    for (const rendered of this.renderer!.line(line.toString('utf8'))) this.printRendered(rendered);
  }

  private printRendered(line: RenderedLine): void {
    const color = KIND_COLOR[line.kind];
    this.printer.write(this, `${color ? paint(this.ctx.color, color, line.text) : line.text}\n`);
  }
}

/** The header label of a section: the step attempt (and `· stderr`), or the stream when a run shows both. */
function labelOf(unit: OutputUnit, stream: OutputStream, streams: OutputStream[]): string | null {
  if (unit.title !== null) return stream === 'stderr' ? `${unit.title} · stderr` : unit.title;
  return streams.length > 1 ? stream : null;
}

/** Notes on stderr about a stream's rotation (how much was dropped, where the beginning is). */
function rotationNote(ctx: CliContext, unit: OutputUnit, files: OutputFiles, opts: Options): void {
  if (opts.head) {
    if (files.rotated && !files.head) {
      ctx.err.write(`loops: ${where(unit)}the beginning of ${files.stream} was not kept (rotated by a loops version that kept no head)\n`);
    }
    return;
  }
  if (!files.rotated) return;
  const dropped = droppedBytes(files, unit.totals[files.stream]);
  const lost = dropped === null ? 'earlier output was dropped' : `${thousands(dropped)} bytes of earlier output were dropped`;
  const kept = files.head
    ? `; the first ${thousands(files.head.size)} bytes are kept: loops logs ${opts.ref}${unit.stepId ? ` --step ${unit.stepId} --attempt ${unit.attempt}` : ''} --head${files.stream === 'stderr' ? ' --stderr' : ''}`
    : '';
  ctx.err.write(`loops: ${where(unit)}${files.stream} was rotated at the size cap: ${lost}${kept}\n`);
}

function where(unit: OutputUnit): string {
  return unit.title ? `${unit.title}: ` : '';
}

/** Why a unit printed nothing, in one line. */
function emptyNote(unit: OutputUnit, opts: Options): string {
  const on = opts.streams.length === 1 ? ` on ${opts.streams[0]}` : '';
  if (!unit.ended && (unit.status === 'claimed' || unit.status === 'spawning')) {
    return `${unit.name} has not started yet (${unit.status}); loops logs -f waits for its output`;
  }
  if (unit.ended && unit.pid === null) return `${unit.name} has no output: it never started${unit.error ? ` (${unit.error})` : ''}`;
  if (!existsSync(unit.dir)) return `${unit.name} has no output files (${unit.dir} is gone)`;
  return `${unit.name} printed nothing${on}${opts.head ? ' at its beginning' : ''}`;
}

// ── the command ──────────────────────────────────────────────────────────────

const logs: CliCommand = {
  spec,
  async run({ values, positionals }, ctx) {
    const opts = options(values, positionals, ctx);
    const reader = await openReader(ctx.dataDir);
    try {
      const db = reader.db;
      const subject = resolveLogsSubject(db, opts.ref);
      const look = outputTracker(db, ctx.dataDir, subject, opts);
      const view = look();
      // Several step attempts are printed one after another (or interleaved, following): each under its header.
      const multi = (subject.kind === 'workflow' || subject.target.kind === 'workflow') && opts.step === null;
      if (ctx.out.isTTY && !opts.json) sayWhich(ctx, subject, view);
      const masker = outputMasker(db, subject, view);
      if (opts.json) {
        printJson(ctx, jsonOf(view, opts, masker));
        return EXIT.ok;
      }
      // Pruned: a finished run whose folder `loops prune` removed (a fact in the log, not a guess
      // from missing files). Like a run with nothing to print: one line, exit 0 (-f: its outcome).
      const pruned = prunedAt(view);
      if (pruned !== null) {
        const id = view.wfRun?.id ?? view.run!.id;
        const kept = (view.wfRun ?? view.run)?.archivedAt ? 'its summary remains (its events were archived)' : 'its summary and events remain';
        ctx.err.write(`loops: the output of ${view.what} was pruned on ${pruned} (loops prune); ${kept}: loops ${view.wfRun ? 'workflows inspect' : 'show'} ${id}\n`);
        return opts.follow ? exitCodeForRunStatus(view.status) : EXIT.ok;
      }
      if (!opts.follow) return snapshot(ctx, view, opts, masker, multi);
      return await follow(ctx, look, view, opts, masker, multi);
    } finally {
      reader.close();
    }
  },
};

/** When `loops prune` removed the output of the run (or workflow run) viewed, or null. */
function prunedAt(view: OutputView): string | null {
  return view.wfRun ? view.wfRun.outputPrunedAt : (view.run?.outputPrunedAt ?? null);
}

/** On a terminal: which run a loop name meant, and the workflow run a workflow loop's run started. */
function sayWhich(ctx: CliContext, subject: LogsSubject, view: OutputView): void {
  if (subject.kind !== 'run') return;
  const run = view.run ?? subject.run;
  const parts: string[] = [];
  if (subject.loop) parts.push(`latest run of ${subject.loop.name}: ${run.id} (${run.status}, started ${relativeTime(run.startedAt ?? run.claimedAt, ctx.now)})`);
  if (view.wfRun) parts.push(`${subject.loop ? 'its' : `run ${run.id}:`} workflow run ${view.wfRun.id}`);
  if (parts.length) ctx.err.write(`${paint(ctx.color, 'gray', `loops: ${parts.join('; ')}`)}\n`);
}

/** Prints what the files hold now. Exit 0 whatever the run's outcome. */
function snapshot(ctx: CliContext, view: OutputView, opts: Options, masker: SecretMasker | null, multi: boolean): number {
  const single = !multi;
  const printer = new Printer(ctx, multi);
  const notes: Array<() => void> = [];
  for (const unit of view.units) {
    const sections = opts.streams.map((s) => new Section(unit, s, labelOf(unit, s, opts.streams), printer, ctx, opts.pretty, false));
    if (single) printer.alwaysHeader = opts.streams.length > 1 && opts.streams.every((s) => hasOutput(outputFiles(unit.dir, s), opts.head));
    const before = printer.printed;
    for (const section of sections) {
      const files = readOutputMasked(unit.dir, section.stream, opts, masker, (chunk) => section.push(chunk));
      // No folder (a run imported from another tool, or run on another host of a fleet): the tail the log kept.
      const kept = unit.kept?.[section.stream] ?? '';
      if (kept !== '' && !existsSync(unit.dir)) section.push(Buffer.from(masker ? masker.mask(kept) : kept));
      section.end();
      notes.push(() => rotationNote(ctx, unit, files, opts));
    }
    if (printer.printed === before) {
      if (single) notes.push(() => ctx.err.write(`loops: ${emptyNote(unit, opts)}\n`));
      else printer.announce(sections[0]!); // the attempt ran, printed nothing: its header still shows it
    }
  }
  if (view.units.length === 0) ctx.err.write(`loops: ${view.what} has no output: ${view.why ?? 'nothing ran'}\n`);
  for (const unit of view.units) {
    if (unit.otherHost !== null && !existsSync(unit.dir)) {
      ctx.err.write(`loops: ${unit.name} ran on host ${unit.otherHost}: its output files are in that host's data directory (runs/${unit.dir.split('/').at(-1)}/); shown here: the tails the log keeps\n`);
    }
  }
  for (const note of notes) note();
  return EXIT.ok;
}

function hasOutput(files: OutputFiles, head: boolean): boolean {
  if (head) return (files.head?.size ?? (files.rotated ? 0 : files.size)) > 0;
  return keptBytes(files) > 0;
}

/** `--json`: an object per stream (paths, bytes, rotation, text), for a run or each step attempt. */
function jsonOf(view: OutputView, opts: Options, masker: SecretMasker | null): unknown {
  return outputJson(view, opts, masker);
}

/**
 * Prints what is there, then what is appended, until the run ends (src/runtime/queries/follow-output.ts
 * follows it); returns its outcome's exit code, or 130 / 143 when Ctrl-C or SIGTERM stopped following.
 */
async function follow(ctx: CliContext, look: () => OutputView, first: OutputView, opts: Options, masker: SecretMasker | null, multi: boolean): Promise<number> {
  const printer = new Printer(ctx, multi);
  const sections = new Map<string, Section>();
  const sectionOf = (unit: OutputUnit, stream: OutputStream) => sections.get(`${unit.key}|${stream}`)!;
  // Sections that may take turns print whole lines (a partial one after a second without its newline).
  const lineMode = opts.streams.length > 1 || multi;

  let stopped: NodeJS.Signals | null = null;
  const abort = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => {
    stopped = signal;
    abort.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  let view = first;
  try {
    for await (const event of followOutput(look, first, { streams: opts.streams, tail: opts.tail, masker, signal: abort.signal })) {
      switch (event.type) {
        case 'unit': {
          const { unit, atStart, files } = event;
          const added = opts.streams.map((s) => new Section(unit, s, labelOf(unit, s, opts.streams), printer, ctx, opts.pretty, lineMode));
          if (atStart && !multi && sections.size === 0) printer.alwaysHeader = files.length > 1 && files.every((f) => hasOutput(f, false));
          if (!atStart) printer.announce(added[0]!);
          for (const section of added) sections.set(section.key, section);
          break;
        }
        case 'output':
          sectionOf(event.unit, event.stream).push(event.chunk);
          break;
        case 'settled':
          sectionOf(event.unit, event.stream).settle();
          if (event.atStart) rotationNote(ctx, event.unit, event.files, opts);
          break;
        case 'caught-up':
          if (!event.view.ended && printer.printed === 0 && ctx.err.isTTY) {
            ctx.err.write(`${paint(ctx.color, 'gray', `loops: following ${event.view.what} (${event.view.status}); Ctrl-C stops following, not the run`)}\n`);
          }
          break;
        case 'idle':
          sectionOf(event.unit, event.stream).idlePoll(event.released);
          break;
        case 'lost':
          ctx.err.write(`loops: ${where(event.unit)}${event.stream} was rotated at the size cap while following; some output written before the rotation is missing here\n`);
          break;
        case 'closed':
          sectionOf(event.unit, event.stream).end();
          break;
        case 'done':
          view = event.view;
          break;
      }
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  if (stopped) return stopped === 'SIGINT' ? 130 : 143;
  if (printer.printed === 0) {
    const unit = view.units.length === 1 ? view.units[0]! : null;
    if (unit) ctx.err.write(`loops: ${emptyNote(unit, opts)}\n`);
    else if (view.units.length === 0) ctx.err.write(`loops: ${view.what} has no output: ${view.why ?? 'nothing ran'}\n`);
  }
  return exitCodeForRunStatus(view.status);
}

export const commands: Record<string, CliCommand> = { logs };
