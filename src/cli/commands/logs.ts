/**
 * `loops logs <run | loop | wfrun>`: print a run's output from its files, or follow it while the
 * run goes (like `docker logs -f`), then exit with the run's outcome. Reads the projections and the
 * files only (src/runtime/queries/run-files.ts); never writes. Following polls the files' sizes and the
 * run's status every 200 ms.
 */
import { existsSync } from 'node:fs';
import { NotFoundError, UsageError } from '../../events/errors.js';
import { isProviderId, PROVIDERS, type TranscriptFormat } from '../../runtime/agents/providers.js';
import { TranscriptRenderer, thousands, type RenderedLine } from '../../runtime/agents/render.js';
import { runDir } from '../../runtime/paths.js';
import { findRun, type RunView } from '../../runtime/queries/loops.js';
import {
  droppedBytes,
  keptBytes,
  openSource,
  OutputCursor,
  outputFiles,
  readSources,
  resolveLogsSubject,
  runHasEnded,
  stepAttemptDir,
  tailStart,
  workflowRunHasEnded,
  workflowRunOfLoopRun,
  type ByteSource,
  type LogsSubject,
  type OutputFiles,
  type OutputStream,
} from '../../runtime/queries/run-files.js';
import { runSecrets } from '../../runtime/execution/run-secrets.js';
import { SecretMasker, StreamMasker } from '../../runtime/execution/secrets.js';
import { openReader } from '../../runtime/store.js';
import { findWorkflowRun, workflowRunSteps, workflowVersion, type WorkflowRunView } from '../../runtime/queries/workflows.js';
import type { Db } from '../../events/db.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { EXIT, exitCodeForRunStatus } from '../exit-codes.js';
import { paint, printJson, relativeTime, type Color } from '../render.js';

const POLL_MS = 200;
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

// ── what is printed: units (a run, or a step attempt) ────────────────────────

interface Unit {
  /** `run`, or `<stepId>#<attempt>`. */
  key: string;
  /** `build (attempt 1)` for a step attempt; null for a loop run. */
  title: string | null;
  /** For messages: `run run_…`, `step build (attempt 1)`. */
  name: string;
  dir: string;
  /** The agent transcript format of stdout, or null for commands. */
  format: TranscriptFormat | null;
  provider: string | null;
  status: string;
  ended: boolean;
  pid: number | null;
  error: string | null;
  /** Bytes the process wrote per stream, when known (it ended and the runner counted them). */
  totals: Record<OutputStream, number | null>;
  stepId: string | null;
  attempt: number | null;
}

/** One look at the subject: its units and whether it ended. */
interface View {
  units: Unit[];
  ended: boolean;
  /** The status whose exit code `--follow` returns. */
  status: string;
  /** `run run_…` / `workflow run wfrun_…`. */
  what: string;
  /** A workflow run, when the subject is one (or a workflow loop's run that started one). */
  wfRun: WorkflowRunView | null;
  run: RunView | null;
  /** Why there are no units yet, for the note when nothing was printed. */
  why: string | null;
}

const LIVE_ATTEMPT = new Set(['spawning', 'running']);

function formatOf(provider: string | null): TranscriptFormat | null {
  return provider !== null && isProviderId(provider) ? PROVIDERS[provider].transcript : null;
}

function runUnit(dataDir: string, run: RunView, provider: string | null): Unit {
  const ended = runHasEnded(run.status);
  return {
    key: 'run',
    title: null,
    name: `run ${run.id}`,
    dir: runDir(dataDir, run.id),
    format: formatOf(provider),
    provider,
    status: run.status,
    ended,
    pid: run.pid,
    error: run.error,
    totals: { stdout: ended ? run.stdoutBytes : null, stderr: ended ? run.stderrBytes : null },
    stepId: null,
    attempt: null,
  };
}

/**
 * Builds the function that looks at the subject again (every poll while following). Checks --step
 * against the workflow's steps as soon as there is a workflow run.
 */
function tracker(db: Db, dataDir: string, subject: LogsSubject, opts: Options): () => View {
  if (subject.kind === 'run' && subject.target.kind !== 'workflow') {
    if (opts.step !== null) {
      throw new UsageError(`loops logs: --step is for workflow runs; ${subject.run.id} is a run of the ${subject.target.kind} loop ${subject.run.loopName}`, {
        hint: 'drop --step',
      });
    }
    const provider = subject.target.kind === 'agent' ? subject.target.provider : null;
    const id = subject.run.id;
    return () => {
      const run = findRun(db, id);
      return { units: [runUnit(dataDir, run, provider)], ended: runHasEnded(run.status), status: run.status, what: `run ${run.id}`, wfRun: null, run, why: null };
    };
  }
  // A workflow run, or a workflow loop's run (whose workflow run may not have started yet).
  let minAttempt: number | null = null; // --step without --attempt, following: the last attempt at the start and later ones
  const look = (wf: WorkflowRunView, run: RunView | null): View => {
    const steps = workflowRunSteps(db, wf.id);
    if (opts.step !== null && !steps.some((s) => s.stepId === opts.step)) {
      throw new NotFoundError(`workflow run ${wf.id} has no step ${JSON.stringify(opts.step)}`, { hint: `its steps: ${steps.map((s) => s.stepId).join(', ')}` });
    }
    const units: Unit[] = [];
    for (const step of steps) {
      if (opts.step !== null && step.stepId !== opts.step) continue;
      let attempts = step.attempts;
      if (opts.step !== null) {
        if (opts.attempt !== null) attempts = attempts.filter((a) => a.attempt === opts.attempt);
        else if (!opts.follow) attempts = attempts.slice(-1);
        else {
          minAttempt ??= step.attempt;
          attempts = attempts.filter((a) => a.attempt >= minAttempt!);
        }
      }
      for (const a of attempts) {
        const ended = !LIVE_ATTEMPT.has(a.status);
        const last = step.attempt === a.attempt && ended;
        units.push({
          key: `${step.stepId}#${a.attempt}`,
          title: `${step.stepId} (attempt ${a.attempt})`,
          name: `step ${step.stepId} (attempt ${a.attempt})`,
          dir: stepAttemptDir(dataDir, wf.id, step.stepId, a.attempt),
          format: step.targetType === 'agent' ? formatOf(step.provider) : null,
          provider: step.targetType === 'agent' ? step.provider : null,
          status: a.status,
          ended,
          pid: a.pid,
          error: a.error,
          totals: { stdout: last ? step.stdoutBytes : null, stderr: last ? step.stderrBytes : null },
          stepId: step.stepId,
          attempt: a.attempt,
        });
      }
    }
    let why: string | null = null;
    if (units.length === 0) {
      const step = opts.step === null ? null : steps.find((s) => s.stepId === opts.step)!;
      if (step && opts.attempt !== null && step.attempts.length > 0 && workflowRunHasEnded(wf.status)) {
        throw new NotFoundError(`step ${step.stepId} of workflow run ${wf.id} has no attempt ${opts.attempt}`, {
          hint: `it has attempt${step.attempts.length > 1 ? 's' : ''} ${step.attempts.map((a) => a.attempt).join(', ')}`,
        });
      }
      why = step ? `step ${step.stepId} ${step.attempts.length ? `has no attempt ${opts.attempt} yet` : `has not started (${step.status})`}` : 'no step has started';
    }
    return { units, ended: workflowRunHasEnded(wf.status), status: wf.status, what: `workflow run ${wf.id}`, wfRun: wf, run, why };
  };
  if (subject.kind === 'workflow') {
    const id = subject.wfRun.id;
    return () => look(findWorkflowRun(db, id), null);
  }
  const runId = subject.run.id;
  let wfId: string | null = null;
  return () => {
    const run = findRun(db, runId);
    const wf = wfId !== null ? findWorkflowRun(db, wfId) : workflowRunOfLoopRun(db, run);
    if (wf) {
      wfId = wf.id;
      return look(wf, run);
    }
    const ended = runHasEnded(run.status);
    const why = ended ? `it never started its workflow run${run.error ? ` (${run.error})` : ''}` : `its workflow run has not started yet (${run.status})`;
    return { units: [], ended, status: run.status, what: `run ${run.id}`, wfRun: null, run, why };
  };
}

/** The secret variable names of the subject's runs: the loop's --secret-env, or the workflow's `secrets:`. */
function secretNames(db: Db, subject: LogsSubject, view: View): string[] {
  if (subject.kind === 'run' && subject.target.kind !== 'workflow') return subject.target.secretEnv ?? [];
  const wf = view.wfRun;
  if (!wf) return [];
  try {
    return workflowVersion(db, wf.workflowId, wf.version).spec.secrets ?? [];
  } catch {
    return [];
  }
}

/** Masks what this process's environment has of the run's secrets, for output of a run not ended yet. */
function maskerFor(db: Db, subject: LogsSubject, view: View): SecretMasker | null {
  if (view.ended) return null; // the runner rewrote the files masked when each process ended
  const masker = new SecretMasker(runSecrets(secretNames(db, subject, view)));
  return masker.empty ? null : masker;
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

/**
 * Masking of a run's output while it goes, chunk by chunk. The stream masker holds back its last
 * (longest form − 1) bytes in case a secret continues in the next chunk; a follower that waits for
 * more output prints them once no suffix of them can begin a secret (`canFlush`).
 */
class LiveMasker {
  private readonly forms: Buffer[];

  constructor(readonly masker: SecretMasker) {
    this.forms = masker.forms.map((f) => Buffer.from(f, 'utf8'));
  }

  /** True when no suffix of `tail` (the last bytes pushed) is the beginning of a secret's form. */
  canFlush(tail: Buffer): boolean {
    for (const form of this.forms) {
      for (let k = Math.min(form.length - 1, tail.length); k > 0; k--) {
        if (tail.subarray(tail.length - k).equals(form.subarray(0, k))) return false;
      }
    }
    return true;
  }
}

/** One stream of one unit on its way out: masked (run not ended), split into lines and rendered (agent --pretty). */
class Section {
  readonly key: string;
  private readonly masker: StreamMasker | null;
  private readonly renderer: TranscriptRenderer | null;
  private partial: Buffer[] = [];
  private partialBytes = 0;
  private idle = 0;
  /** The last bytes given to the masker (as many as its longest form). */
  private rawTail: Buffer = Buffer.alloc(0);
  private readonly live: LiveMasker | null;

  constructor(
    readonly unit: Unit,
    readonly stream: OutputStream,
    readonly label: string | null,
    private readonly printer: Printer,
    private readonly ctx: CliContext,
    live: LiveMasker | null,
    pretty: boolean,
    /** Print whole lines only (sections interleave while following). */
    private readonly lineMode: boolean,
  ) {
    this.key = `${unit.key}|${stream}`;
    this.live = live;
    this.masker = live ? new StreamMasker(live.masker) : null;
    this.renderer = pretty && stream === 'stdout' && unit.format !== null ? new TranscriptRenderer(unit.format) : null;
  }

  push(chunk: Buffer): void {
    if (!this.masker) {
      this.emit(chunk);
      return;
    }
    const keep = this.live!.masker.maxFormBytes;
    const joined = this.rawTail.length ? Buffer.concat([this.rawTail, chunk]) : chunk;
    this.rawTail = Buffer.from(joined.subarray(Math.max(0, joined.length - keep)));
    const data = this.masker.push(chunk);
    if (data.length) this.emit(data);
  }

  /** The snapshot of this section is over: print what is held back (a partial line, not a JSON line being rendered). */
  settle(): void {
    this.flushMasker();
    if (this.renderer === null) this.flushPartial();
  }

  /** No new bytes this poll: print what the masker holds back when safe; a partial line after a while. */
  idlePoll(): void {
    this.idle++;
    this.flushMasker();
    if (this.partialBytes !== 0 && this.renderer === null && this.idle >= PARTIAL_POLLS) this.flushPartial();
  }

  private flushMasker(): void {
    if (!this.masker || !this.live!.canFlush(this.rawTail)) return;
    const rest = this.masker.flush();
    if (rest.length) this.emit(rest, false);
  }

  end(): void {
    if (this.masker) {
      const rest = this.masker.flush();
      if (rest.length) this.emit(rest);
    }
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
function labelOf(unit: Unit, stream: OutputStream, streams: OutputStream[]): string | null {
  if (unit.title !== null) return stream === 'stderr' ? `${unit.title} · stderr` : unit.title;
  return streams.length > 1 ? stream : null;
}

/** What to read for a snapshot of one stream: `.1` then the file (or the head), from where `--tail` says. */
function snapshotSources(files: OutputFiles, head: boolean, current: ByteSource | null): { sources: ByteSource[]; close: () => void } {
  const opened: Array<{ close(): void }> = [];
  const open = (path: string): ByteSource | null => {
    const source = openSource(path);
    if (source) opened.push(source);
    return source;
  };
  const sources: ByteSource[] = [];
  if (head) {
    // The beginning: the head kept at the first rotation; a file never rotated is its own beginning.
    const source = files.head ? open(files.head.path) : files.rotated ? null : (current ?? open(files.path));
    if (source) sources.push(source);
  } else {
    const rotated = files.rotated ? open(files.rotated.path) : null;
    if (rotated) sources.push(rotated);
    const file = current ?? open(files.path);
    if (file) sources.push(file);
  }
  return { sources, close: () => opened.forEach((o) => o.close()) };
}

/** Prints a snapshot of one section; returns the files it looked at. */
function printSnapshot(section: Section, opts: Options, current: ByteSource | null): OutputFiles {
  const files = outputFiles(section.unit.dir, section.stream);
  const { sources, close } = snapshotSources(files, opts.head, current);
  try {
    const from = opts.tail === null ? { index: 0, offset: 0 } : tailStart(sources, opts.tail);
    readSources(sources, from, (chunk) => section.push(chunk));
  } finally {
    close();
  }
  return files;
}

/** Notes on stderr about a stream's rotation (how much was dropped, where the beginning is). */
function rotationNote(ctx: CliContext, unit: Unit, files: OutputFiles, opts: Options): void {
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

function where(unit: Unit): string {
  return unit.title ? `${unit.title}: ` : '';
}

/** Why a unit printed nothing, in one line. */
function emptyNote(unit: Unit, opts: Options): string {
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
      const look = tracker(db, ctx.dataDir, subject, opts);
      const view = look();
      // Several step attempts are printed one after another (or interleaved, following): each under its header.
      const multi = (subject.kind === 'workflow' || subject.target.kind === 'workflow') && opts.step === null;
      if (ctx.out.isTTY && !opts.json) sayWhich(ctx, subject, view);
      const masker = maskerFor(db, subject, view);
      const live = masker ? new LiveMasker(masker) : null;
      if (opts.json) {
        printJson(ctx, jsonOf(view, opts, masker));
        return EXIT.ok;
      }
      // Pruned: a finished run whose folder `loops prune` removed (a fact in the log, not a guess
      // from missing files). Like a run with nothing to print: one line, exit 0 (-f: its outcome).
      const pruned = prunedAt(view);
      if (pruned !== null) {
        const id = view.wfRun?.id ?? view.run!.id;
        ctx.err.write(`loops: the output of ${view.what} was pruned on ${pruned} (loops prune); its summary and events remain: loops ${view.wfRun ? 'workflows inspect' : 'show'} ${id}\n`);
        return opts.follow ? exitCodeForRunStatus(view.status) : EXIT.ok;
      }
      if (!opts.follow) return snapshot(ctx, view, opts, live, multi);
      return await follow(ctx, look, view, opts, live, multi);
    } finally {
      reader.close();
    }
  },
};

/** When `loops prune` removed the output of the run (or workflow run) viewed, or null. */
function prunedAt(view: View): string | null {
  return view.wfRun ? view.wfRun.outputPrunedAt : (view.run?.outputPrunedAt ?? null);
}

/** On a terminal: which run a loop name meant, and the workflow run a workflow loop's run started. */
function sayWhich(ctx: CliContext, subject: LogsSubject, view: View): void {
  if (subject.kind !== 'run') return;
  const run = view.run ?? subject.run;
  const parts: string[] = [];
  if (subject.loop) parts.push(`latest run of ${subject.loop.name}: ${run.id} (${run.status}, started ${relativeTime(run.startedAt ?? run.claimedAt, ctx.now)})`);
  if (view.wfRun) parts.push(`${subject.loop ? 'its' : `run ${run.id}:`} workflow run ${view.wfRun.id}`);
  if (parts.length) ctx.err.write(`${paint(ctx.color, 'gray', `loops: ${parts.join('; ')}`)}\n`);
}

/** Prints what the files hold now. Exit 0 whatever the run's outcome. */
function snapshot(ctx: CliContext, view: View, opts: Options, masker: LiveMasker | null, multi: boolean): number {
  const single = !multi;
  const printer = new Printer(ctx, multi);
  const notes: Array<() => void> = [];
  for (const unit of view.units) {
    const sections = opts.streams.map((s) => new Section(unit, s, labelOf(unit, s, opts.streams), printer, ctx, masker, opts.pretty, false));
    if (single) printer.alwaysHeader = opts.streams.length > 1 && opts.streams.every((s) => hasOutput(outputFiles(unit.dir, s), opts.head));
    const before = printer.printed;
    for (const section of sections) {
      const files = printSnapshot(section, opts, null);
      section.end();
      notes.push(() => rotationNote(ctx, unit, files, opts));
    }
    if (printer.printed === before) {
      if (single) notes.push(() => ctx.err.write(`loops: ${emptyNote(unit, opts)}\n`));
      else printer.announce(sections[0]!); // the attempt ran, printed nothing: its header still shows it
    }
  }
  if (view.units.length === 0) ctx.err.write(`loops: ${view.what} has no output: ${view.why ?? 'nothing ran'}\n`);
  for (const note of notes) note();
  return EXIT.ok;
}

function hasOutput(files: OutputFiles, head: boolean): boolean {
  if (head) return (files.head?.size ?? (files.rotated ? 0 : files.size)) > 0;
  return keptBytes(files) > 0;
}

/** `--json`: an object per stream (paths, bytes, rotation, text), for a run or each step attempt. */
function jsonOf(view: View, opts: Options, masker: SecretMasker | null): unknown {
  const streams = (unit: Unit) =>
    Object.fromEntries(
      opts.streams.map((stream) => {
        const files = outputFiles(unit.dir, stream);
        const chunks: Buffer[] = [];
        const { sources, close } = snapshotSources(files, opts.head, null);
        try {
          const from = opts.tail === null ? { index: 0, offset: 0 } : tailStart(sources, opts.tail);
          const scan = masker ? new StreamMasker(masker) : null;
          readSources(sources, from, (chunk) => chunks.push(scan ? scan.push(chunk) : chunk));
          if (scan) chunks.push(scan.flush());
        } finally {
          close();
        }
        return [
          stream,
          {
            path: files.path,
            files: [files.rotated?.path, files.exists ? files.path : undefined].filter((p): p is string => p !== undefined),
            head: files.head?.path ?? null,
            bytes: keptBytes(files),
            totalBytes: unit.totals[stream],
            rotated: files.rotated !== null,
            droppedBytes: droppedBytes(files, unit.totals[stream]),
            text: Buffer.concat(chunks).toString('utf8'),
          },
        ];
      }),
    );
  if (view.wfRun === null) {
    const run = view.run!;
    const unit = view.units[0];
    // A workflow loop's run that never started (or not yet) its workflow run has no output.
    if (!unit) return { runId: run.id, loopId: run.loopId, loopName: run.loopName, status: run.status, outputPrunedAt: null, wfRunId: null, steps: [] };
    return { runId: run.id, loopId: run.loopId, loopName: run.loopName, status: run.status, outputPrunedAt: run.outputPrunedAt, provider: unit.provider, ...streams(unit) };
  }
  return {
    ...(view.run ? { runId: view.run.id } : {}),
    wfRunId: view.wfRun.id,
    workflowName: view.wfRun.workflowName,
    status: view.wfRun.status,
    outputPrunedAt: view.wfRun.outputPrunedAt,
    steps: view.units.map((unit) => ({ stepId: unit.stepId, attempt: unit.attempt, status: unit.status, provider: unit.provider, ...streams(unit) })),
  };
}

const EMPTY: ByteSource = { size: 0, read: () => 0 };

interface Followed {
  section: Section;
  cursor: OutputCursor;
}

/**
 * Prints what is there, then what is appended, until the run ends; returns its outcome's exit
 * code. A stream that shrinks was rotated: reading goes on from its start (what was written between
 * the last read and the rotation is in `.1` only, and not printed).
 */
async function follow(ctx: CliContext, look: () => View, first: View, opts: Options, masker: LiveMasker | null, multi: boolean): Promise<number> {
  const printer = new Printer(ctx, multi);
  const followed = new Map<string, Followed>();
  // Sections that may take turns print whole lines (a partial one after a second without its newline).
  const lineMode = opts.streams.length > 1 || multi;

  /** Starts following a unit: what its files hold (the last --tail lines at the start), then what comes. */
  const add = (unit: Unit, atStart: boolean): void => {
    const sections = opts.streams.map((s) => new Section(unit, s, labelOf(unit, s, opts.streams), printer, ctx, masker, opts.pretty, lineMode));
    const entries = sections.map((section) => ({ section, cursor: new OutputCursor(outputFiles(unit.dir, section.stream).path) }));
    for (const e of entries) e.cursor.open();
    if (atStart && !multi && followed.size === 0) {
      printer.alwaysHeader = entries.length > 1 && entries.every((e) => hasOutput(outputFiles(unit.dir, e.section.stream), false));
    }
    if (!atStart) printer.announce(sections[0]!);
    for (const e of entries) {
      // Not open yet: nothing to print now (the cursor reads it from its start once it appears).
      const current = e.cursor.take() ?? EMPTY;
      const files = printSnapshot(e.section, atStart ? opts : { ...opts, tail: null }, current);
      e.section.settle();
      if (atStart) rotationNote(ctx, unit, files, opts);
      followed.set(e.section.key, e);
    }
  };

  for (const unit of first.units) add(unit, true);
  let view = first;
  if (!view.ended && printer.printed === 0 && ctx.err.isTTY) {
    ctx.err.write(`${paint(ctx.color, 'gray', `loops: following ${view.what} (${view.status}); Ctrl-C stops following, not the run`)}\n`);
  }

  let stopped: NodeJS.Signals | null = null;
  let wake: (() => void) | null = null;
  const onSignal = (signal: NodeJS.Signals) => {
    stopped = signal;
    wake?.();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    while (!view.ended) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, POLL_MS);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = null;
      if (stopped) break;
      // The status first, then the files: once the run has ended, its files are complete.
      view = look();
      // What the attempts followed so far wrote, then the attempts that started since.
      const known = [...followed.values()];
      for (const { section, cursor } of known) {
        let got = false;
        const result = cursor.poll((chunk) => {
          got = true;
          section.push(chunk);
        });
        if (result === 'lost') {
          ctx.err.write(`loops: ${where(section.unit)}${section.stream} was rotated at the size cap while following; some output written before the rotation is missing here\n`);
        }
        if (!got) section.idlePoll();
      }
      for (const unit of view.units) if (!known.some((f) => f.section.unit.key === unit.key)) add(unit, false);
    }
    for (const { section } of followed.values()) section.end();
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    for (const { cursor } of followed.values()) cursor.close();
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
