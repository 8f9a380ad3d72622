#!/usr/bin/env node
/**
 * The `loops` command line. Thin: it parses, calls the runtime, renders. Command modules are
 * loaded lazily so that read commands never pay for xstate, zod, rxjs or execa.
 */
import { LoopsError } from '../events/errors.js';
import { offsetFileClock, shiftedClock, systemClock, type Clock } from '../runtime/clock.js';
import { resolveDataDir } from '../runtime/paths.js';
import { shownRef } from '../runtime/queries/refs.js';
import { helpText, parseCommand, similar } from './args.js';
import type { CliCommand, CliContext } from './context.js';
import { EXIT, exitCodeFor } from './exit-codes.js';
import { useColor } from './render.js';
import { checkFaultEnv } from '../events/faults.js';

import { LOOPS_VERSION, setTriggerSource } from '../runtime/acting.js';

export const VERSION = LOOPS_VERSION;

interface Entry {
  name: string;
  summary: string;
  load: () => Promise<Record<string, CliCommand>>;
}

const loopsCmds = () => import('./commands/loops.js').then((m) => m.commands);
const workflowCmds = () => import('./commands/workflows.js').then((m) => m.commands);
const entries: Entry[] = [
  { name: 'create command', summary: 'create a loop that runs a command on a schedule', load: () => import('./commands/create.js').then((m) => m.commands) },
  { name: 'create workflow', summary: 'create a loop that runs a stored workflow on a schedule', load: () => import('./commands/create.js').then((m) => m.commands) },
  { name: 'create agent', summary: 'create a loop that runs an AI coding-agent CLI on a schedule', load: () => import('./commands/create.js').then((m) => m.commands) },
  { name: 'list', summary: 'list loops', load: () => import('./commands/list.js').then((m) => m.commands) },
  { name: 'show', summary: 'show one loop', load: loopsCmds },
  { name: 'pause', summary: 'pause a loop (it stops firing until resumed)', load: loopsCmds },
  { name: 'resume', summary: 'resume a paused or stopped loop', load: loopsCmds },
  { name: 'stop', summary: 'stop a loop (like pause, for good until resumed)', load: loopsCmds },
  { name: 'archive', summary: 'archive a loop: keep its history, never run it again', load: loopsCmds },
  { name: 'remove', summary: 'remove a loop (its history stays in the log)', load: loopsCmds },
  { name: 'tick', summary: 'run one scheduling pass in the foreground (cron-style use)', load: () => import('./commands/tick.js').then((m) => m.commands) },
  { name: 'why', summary: 'explain from the log what happened to a loop\'s slots', load: () => import('./commands/why.js').then((m) => m.commands) },
  { name: 'daemon run', summary: 'run the scheduler daemon in the foreground', load: () => import('./commands/daemon.js').then((m) => m.commands) },
  { name: 'daemon start', summary: 'start the daemon in the background', load: () => import('./commands/daemon.js').then((m) => m.commands) },
  { name: 'daemon stop', summary: 'stop the daemon gracefully', load: () => import('./commands/daemon.js').then((m) => m.commands) },
  { name: 'daemon status', summary: 'is the daemon running and healthy?', load: () => import('./commands/daemon.js').then((m) => m.commands) },
  { name: 'daemon install', summary: 'install the daemon as a systemd user unit or LaunchAgent', load: () => import('./commands/daemon.js').then((m) => m.commands) },
  { name: 'daemon logs', summary: "print (or follow) the daemon's log", load: () => import('./commands/daemon.js').then((m) => m.commands) },
  { name: 'next', summary: "preview a loop's next fire times", load: () => import('./commands/next.js').then((m) => m.commands) },
  { name: 'run-now', summary: 'run a loop now, in the foreground', load: () => import('./commands/run-now.js').then((m) => m.commands) },
  { name: 'cancel', summary: 'cancel a running run (its process group is stopped)', load: () => import('./commands/cancel.js').then((m) => m.commands) },
  { name: 'fork', summary: 'run a run again from a step, reusing the results of the steps before it (--dry-run)', load: () => import('./commands/fork.js').then((m) => m.commands) },
  { name: 'rerun', summary: 'run a run again as a new run of the same definition version (--failed, --dry-run)', load: () => import('./commands/fork.js').then((m) => m.commands) },
  { name: 'stats', summary: 'sum runs, failures, duration, tokens and cost per loop', load: () => import('./commands/stats.js').then((m) => m.commands) },
  { name: 'prune', summary: 'remove the output folders of finished runs (--older-than, --keep-last; --dry-run)', load: () => import('./commands/prune.js').then((m) => m.commands) },
  { name: 'backup', summary: 'write a consistent copy of the log and its tables to a file, while the daemon runs', load: () => import('./commands/backup.js').then((m) => m.commands) },
  { name: 'restore', summary: 'put a backup in place of the data directory\'s database (checked first)', load: () => import('./commands/backup.js').then((m) => m.commands) },
  { name: 'store copy', summary: 'copy the log into another store (SQLite into PostgreSQL, or back), verbatim and verified', load: () => import('./commands/store.js').then((m) => m.commands) },
  { name: 'doctor', summary: 'check the data directory, database, daemon, agent CLIs and every active loop', load: () => import('./commands/doctor.js').then((m) => m.commands) },
  { name: 'secrets scrub', summary: 'redefine loops and workflows that hold a secret value in clear, passing it by name (--dry-run)', load: () => import('./commands/secrets.js').then((m) => m.commands) },
  { name: 'accounts add', summary: 'register a credentials profile for an agent CLI', load: () => import('./commands/accounts.js').then((m) => m.commands) },
  { name: 'accounts list', summary: 'list the credentials profiles', load: () => import('./commands/accounts.js').then((m) => m.commands) },
  { name: 'accounts remove', summary: 'remove a credentials profile', load: () => import('./commands/accounts.js').then((m) => m.commands) },
  { name: 'runs', summary: 'list runs, newest first', load: () => import('./commands/runs.js').then((m) => m.commands) },
  { name: 'logs', summary: "print a run's output, or follow it (-f) until the run ends", load: () => import('./commands/logs.js').then((m) => m.commands) },
  { name: 'events', summary: "print a run's or a loop's event stream, in order", load: () => import('./commands/events.js').then((m) => m.commands) },
  { name: 'replay', summary: 'rebuild every state of a run from the log and check it (a stepper on a terminal)', load: () => import('./commands/replay.js').then((m) => m.commands) },
  { name: 'diff', summary: 'the first transition where two runs of a loop or workflow part ways', load: () => import('./commands/diff.js').then((m) => m.commands) },
  { name: 'workflows create', summary: 'store a workflow spec file as a new workflow', load: () => import('./commands/workflows-run.js').then((m) => m.commands) },
  { name: 'workflows update', summary: 'store a spec file as the next version of a workflow', load: () => import('./commands/workflows-run.js').then((m) => m.commands) },
  { name: 'workflows run', summary: 'run a workflow now, with a live view of its steps', load: () => import('./commands/workflows-run.js').then((m) => m.commands) },
  { name: 'workflows cancel', summary: 'cancel a running workflow run', load: () => import('./commands/workflows-run.js').then((m) => m.commands) },
  { name: 'workflows resume', summary: 'continue a workflow run whose runner stopped', load: () => import('./commands/workflows-run.js').then((m) => m.commands) },
  { name: 'workflows archive', summary: 'hide a workflow from new runs (history stays)', load: () => import('./commands/workflows-run.js').then((m) => m.commands) },
  { name: 'workflows convert', summary: "write a spec file (the predecessor's shape) in the native form", load: () => import('./commands/workflows-convert.js').then((m) => m.commands) },
  { name: 'workflows list', summary: 'list workflows', load: workflowCmds },
  { name: 'workflows show', summary: "show a workflow's spec and steps", load: workflowCmds },
  { name: 'workflows runs', summary: 'list workflow runs, newest first', load: workflowCmds },
  { name: 'workflows inspect', summary: 'show a workflow run: every step, attempt, output and error', load: workflowCmds },
  { name: 'workflows validate', summary: 'check a workflow spec file and print every problem', load: workflowCmds },
  { name: 'schema workflow', summary: 'print the JSON Schema of workflow spec files', load: workflowCmds },
  { name: 'machines list', summary: 'list the state machines that write the log, with every version kept', load: () => import('./commands/machines.js').then((m) => m.commands) },
  { name: 'machines export', summary: "print a machine's definition as JSON (--version N)", load: () => import('./commands/machines.js').then((m) => m.commands) },
  { name: 'projections rebuild', summary: 'drop the tables and rebuild them from the log', load: () => import('./commands/projections.js').then((m) => m.commands) },
  { name: 'projections verify', summary: 'rebuild into a scratch database and compare with the tables', load: () => import('./commands/projections.js').then((m) => m.commands) },
  { name: 'verify', summary: "check the log's invariants (integrity, one run per slot, replay, tables), or a bundle", load: () => import('./commands/verify.js').then((m) => m.commands) },
  { name: 'export', summary: 'write an audit bundle (events, outputs, files, sha256-chained) or an HTML view of a run or loop', load: () => import('./commands/export.js').then((m) => m.commands) },
  { name: 'import hasna-loops', summary: 'bring the loops, workflows and runs of @hasna/loops (the predecessor) across', load: () => import('./commands/import.js').then((m) => m.commands) },
];

function mainHelp(): string {
  const width = Math.max(...entries.map((e) => e.name.length)) + 2;
  return [
    'loops — a local-first, durable scheduler and workflow runner',
    '',
    'Usage: loops <command> [arguments] [options]',
    '',
    'Commands:',
    ...entries.map((e) => `  ${e.name.padEnd(width)}${e.summary}`),
    '',
    'Global options:',
    '  -h, --help       show help (also: loops <command> --help)',
    '  -V, --version    print the version',
    '  -j, --json       print JSON, before or after the command (= the command\'s --json)',
    '',
    'Environment:',
    '  LOOPS_DATA_DIR   where loops keeps its database and run output (default ~/.local/share/loops)',
    '  NO_COLOR         disable colour',
    '  LOOPS_DEBUG=1    print stack traces for errors',
    '  LOOPS_NOW=<time> act as if it were that time (try out schedules; used by tests)',
    '  LOOPS_FAULT=<point>[:<n>]  crash (SIGKILL) at a named point: recovery tests only (docs/RELIABILITY.md)',
    '  LOOPS_DAEMON_LOG_MAX_BYTES  rotate daemon.log past this size (default 10M; 0 never)',
    '  LOOPS_DAEMON_INTERVAL_MS    how often the daemon looks for changes made elsewhere (default 1000)',
    '  LOOPS_STORE=postgres://…?schema=S  a PostgreSQL log shared by a fleet of hosts (docs/scaling.md); sqlite: this data directory\'s own',
    '  LOOPS_HOST_ID    this host\'s name in a fleet (default the host name)',
    '',
    'Exit codes: 0 ok, 1 error, 2 bad input, 3 run failed, 4 run timed out, 5 run cancelled,',
    '            6 replay/verify mismatch, 75 busy (retry). See docs/cli.md.',
    '',
  ].join('\n');
}

/** The predecessor's (`@hasna/loops`) command aliases: `ls`, `rm`, `workflow …`, `workflows ls`, `workflows events` (= `events`). */
const ALIASES: Record<string, string> = { ls: 'list', rm: 'remove', workflow: 'workflows' };
const SUB_ALIASES: Record<string, string> = { 'workflows ls': 'workflows list', 'workflows events': 'events' };

function findEntry(given: string[]): { entry: Entry; rest: string[] } | undefined {
  const argv = given.length && Object.hasOwn(ALIASES, given[0]!) ? [ALIASES[given[0]!]!, ...given.slice(1)] : given;
  const pair = `${argv[0]} ${argv[1] ?? ''}`;
  const two = Object.hasOwn(SUB_ALIASES, pair) ? SUB_ALIASES[pair]! : pair;
  const exact2 = entries.find((e) => e.name === two);
  if (exact2) return { entry: exact2, rest: argv.slice(2) };
  const exact1 = entries.find((e) => e.name === argv[0]);
  if (exact1) return { entry: exact1, rest: argv.slice(1) };
  return undefined;
}

/**
 * The predecessor's global `-j, --json` may come before the command (`loops -j list`): it is
 * moved after it, where each command's spec reads it (`-j` is its short form: args.ts).
 */
function globalJsonLast(argv: string[]): string[] {
  if (argv[0] !== '-j' && argv[0] !== '--json') return argv;
  const rest = argv.slice(1);
  const end = rest.indexOf('--');
  return end === -1 ? [...rest, '--json'] : [...rest.slice(0, end), '--json', ...rest.slice(end)];
}

/** The command an argv names (aliases and a leading `-j`/`--json` applied) and the arguments left for its spec. */
export async function resolveCommand(argv: string[]): Promise<{ name: string; command: CliCommand; rest: string[] } | undefined> {
  const found = findEntry(globalJsonLast(argv));
  if (!found) return undefined;
  const commands = await found.entry.load();
  return { name: found.entry.name, command: commands[found.entry.name]!, rest: found.rest };
}

export async function main(argv: string[], ctxOverrides: Partial<CliContext> = {}): Promise<number> {
  const out = ctxOverrides.out ?? process.stdout;
  const err = ctxOverrides.err ?? process.stderr;
  const first = argv[0];
  if (first === undefined || first === '--help' || first === '-h' || first === 'help') {
    if (first === 'help' && argv[1]) return main([...argv.slice(1), '--help'], ctxOverrides);
    out.write(mainHelp());
    return first === undefined ? EXIT.usage : EXIT.ok;
  }
  if (first === '--version' || first === '-V' || first === 'version') {
    out.write(`loops ${VERSION}\n`);
    return EXIT.ok;
  }
  try {
    const found = await resolveCommand(argv);
    if (!found) throw unknownCommand(globalJsonLast(argv));
    const { command } = found;
    const parsed = parseCommand(command.spec, found.rest);
    if (parsed.values.help) {
      out.write(helpText(command.spec));
      return EXIT.ok;
    }
    const json = parsed.values.json === true;
    checkFaultEnv();
    // What its events record as their trigger source (meta.by): the command, `daemon` for the daemon.
    setTriggerSource(found.name.startsWith('daemon ') ? 'daemon' : found.name);
    const clock = loopsClock();
    const ctx: CliContext = {
      out,
      err,
      clock,
      now: clock.now(),
      dataDir: resolveDataDir(),
      json,
      color: !json && useColor(out),
      ...ctxOverrides,
    };
    return await command.run(parsed, ctx);
  } catch (error) {
    return reportError(err, error);
  }
}

/**
 * The system clock, or — with LOOPS_NOW=<ISO time> — one that starts at that time; for tests only,
 * LOOPS_TEST_CLOCK_OFFSET_FILE=<file> moves its wall clock by the milliseconds the file holds,
 * re-read as it changes (offsetFileClock: clock jumps on a running daemon).
 */
function loopsClock(): Clock {
  const file = process.env.LOOPS_TEST_CLOCK_OFFSET_FILE;
  const clock = nowClock();
  return file ? offsetFileClock(file, clock) : clock;
}

function nowClock(): Clock {
  const at = process.env.LOOPS_NOW;
  if (at === undefined || at === '') return systemClock;
  if (Number.isNaN(Date.parse(at))) {
    throw new LoopsError('usage', `LOOPS_NOW: ${JSON.stringify(at)} is not an ISO-8601 time`, {
      hint: 'e.g. LOOPS_NOW=2026-12-01T03:00:00Z, or unset it',
    });
  }
  return shiftedClock(at);
}

function unknownCommand(argv: string[]): LoopsError {
  const word = argv[0]!;
  const group = entries.filter((e) => e.name.startsWith(`${word} `));
  if (group.length > 0) {
    const sub = argv[1];
    return new LoopsError(
      'usage',
      sub && !sub.startsWith('-') ? `loops ${word}: unknown subcommand ${JSON.stringify(sub)}` : `loops ${word}: missing subcommand`,
      { hint: `use one of: ${group.map((e) => `loops ${e.name}`).join(', ')}` },
    );
  }
  const near = entries.map((e) => e.name.split(' ')[0]!).filter((n, i, a) => a.indexOf(n) === i && similar(n, word));
  return new LoopsError('usage', `unknown command ${JSON.stringify(word)}`, {
    hint: near.length ? `did you mean ${near.join(' or ')}? (loops --help lists commands)` : 'loops --help lists commands',
  });
}

export function reportError(err: NodeJS.WritableStream, error: unknown): number {
  const debug = process.env.LOOPS_DEBUG === '1';
  if (error instanceof LoopsError) {
    const message = error.message.startsWith('loops ') ? error.message : `loops: ${error.message}`;
    err.write(`${printable(message)}${error.hint ? `; ${printable(error.hint)}` : ''}\n`);
    if (debug && error.stack) err.write(`${error.stack}\n`);
    return exitCodeFor(error.code);
  }
  const e = error as Error;
  err.write(`loops: internal error: ${printable(e?.message ?? String(error))}${debug ? '' : ' (set LOOPS_DEBUG=1 for details)'}\n`);
  if (debug && e?.stack) err.write(`${e.stack}\n`);
  return EXIT.error;
}

/**
 * An error is one short line, whatever it quotes from the input: a quoted value over 80 characters
 * is shown by its start and length (as ids are: shownRef), anything still over 1,000 characters is
 * cut, and control characters (a newline in a path, an escape sequence) are shown escaped.
 */
function printable(text: string): string {
  let short = text.replace(/"(?:[^"\\]|\\.){81,}"/g, (literal) => {
    try {
      return shownRef(JSON.parse(literal) as string);
    } catch {
      return literal;
    }
  });
  if (short.length > 1000) short = `${short.slice(0, 400)}… (${short.length} characters)`;
  return short.replace(/[\u0000-\u001f\u007f\u2028\u2029]/g, (c) => CONTROL_ESCAPES[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
const CONTROL_ESCAPES: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

// Run when executed as the `loops` binary (not when imported by tests).
const invokedAs = process.argv[1] ?? '';
if (/(?:^|[\\/])(?:main\.js|loops)$/.test(invokedAs)) {
  // `loops list | head -1`: a reader that closed the pipe is not an error.
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
      throw error;
    });
  }
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error) => {
      process.exitCode = reportError(process.stderr, error);
    },
  );
}
