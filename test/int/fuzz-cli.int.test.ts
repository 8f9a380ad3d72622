/**
 * Fuzzing the command line end to end, in process (issue 11, hostile input): `main(argv)` — the
 * binary's own entry point — with arbitrary argv against a real data directory. Whatever the argv:
 * an exit code of 0 or 2 (nothing here can fail a run or find the log damaged), a one-line error on
 * stderr without a stack trace, an "internal error" or SQLite's own words, and — when it exits 2 —
 * nothing appended to the log. Afterwards every stream replays, the tables equal a rebuild, and
 * every loop row has its `loop.created`.
 *
 * Commands that start processes or block (daemon *, run-now, tick, workflows run/resume) or write
 * files at a path they are given (backup, restore) are left out: random argv would run random
 * programs or write into the working directory. Their parsing is fuzzed in fuzz-args.unit.test.ts.
 */
import Database from 'better-sqlite3';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CommandSpec } from '../../src/cli/args.js';
import type { CliCommand } from '../../src/cli/context.js';
import { main } from '../../src/cli/main.js';
import { openDatabase } from '../../src/events/db.js';
import { SqliteEventLog } from '../../src/events/sqlite-log.js';
import { fuzzParams, hostileString } from '../helpers/fuzz.js';
import { expectLogConsistent } from '../helpers/invariants.js';
import { makeTempDir, removeDir } from '../helpers/tmp.js';

// export writes a file at the path it is given (or in the current directory); fork and rerun start runs.
const EXCLUDED = new Set(['daemon run', 'daemon start', 'daemon stop', 'daemon install', 'daemon logs', 'run-now', 'tick', 'workflows run', 'workflows resume', 'backup', 'restore', 'export', 'fork', 'rerun']);
const COMMANDS_DIR = join(__dirname, '..', '..', 'src', 'cli', 'commands');

let specs: CommandSpec[] = [];
let root = '';
let dataDir = '';
let wfFile = '';
let loopId = '';
const savedEnv = { LOOPS_DATA_DIR: process.env.LOOPS_DATA_DIR, NO_COLOR: process.env.NO_COLOR, LOOPS_DEBUG: process.env.LOOPS_DEBUG };

class Capture extends Writable {
  text = '';
  override _write(chunk: Buffer | string, _enc: BufferEncoding, done: () => void): void {
    this.text += chunk.toString();
    done();
  }
}

async function cli(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = new Capture();
  const err = new Capture();
  const code = await main(argv, { out, err, dataDir });
  return { code, stdout: out.text, stderr: err.text };
}

function head(): number {
  const db = new Database(join(dataDir, 'loops.db'), { readonly: true });
  try {
    return (db.prepare('SELECT COALESCE(MAX(position), 0) AS p FROM events').get() as { p: number }).p;
  } finally {
    db.close();
  }
}

beforeAll(async () => {
  const modules = readdirSync(COMMANDS_DIR).filter((f) => f.endsWith('.ts'));
  const loaded = await Promise.all(modules.map((f) => import(join(COMMANDS_DIR, f)) as Promise<{ commands: Record<string, CliCommand> }>));
  specs = loaded.flatMap((m) => Object.values(m.commands).map((c) => c.spec)).filter((s) => !EXCLUDED.has(s.name));
  root = makeTempDir('loops-fuzz-cli-');
  dataDir = join(root, 'data');
  // Commands that read LOOPS_DATA_DIR themselves see the same directory.
  process.env.LOOPS_DATA_DIR = dataDir;
  process.env.NO_COLOR = '1';
  delete process.env.LOOPS_DEBUG;
  wfFile = join(root, 'wf.yaml');
  writeFileSync(wfFile, 'name: wf\nsteps:\n  - id: a\n    run: "true"\n  - id: b\n    needs: a\n    command: "true"\n');
  // Something for the commands to find: a loop, a paused loop, a workflow.
  expect((await cli(['create', 'command', 'job', '--cmd', 'true', '--manual'])).code).toBe(0);
  expect((await cli(['create', 'command', 'other', '--cmd', 'true', '--every', '1h'])).code).toBe(0);
  expect((await cli(['pause', 'other'])).code).toBe(0);
  expect((await cli(['workflows', 'create', wfFile])).code).toBe(0);
  loopId = (JSON.parse((await cli(['show', 'job', '--json'])).stdout) as { id: string }).id;
});

afterAll(() => {
  for (const [k, v] of Object.entries(savedEnv)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  if (root) removeDir(root);
});

/** A value a command could be given: names and ids that exist, flags' usual values, hostile text. */
function value(): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom('job', 'other', 'wf', 'nope', 'a', 'b', wfFile, root, loopId, loopId.slice(0, 12), 'loop_', 'run_', 'wfrun_') },
    { weight: 2, arbitrary: fc.constantFrom('5m', '1s', '0s', '-5m', '1h30m', '0 3 * * *', '* * * * * * *', '@daily', '2026-12-01T09:00', 'Europe/Berlin', 'Mars/Olympus') },
    { weight: 2, arbitrary: fc.constantFrom('skip', 'allow', 'buffer-all', 'latest', 'all', 'none', 'fixed-delay', '3', '0', '-1', '1.5', '1e3', 'true', 'A=1', 'PATH=', '=x', 'claude', 'codex') },
    { weight: 4, arbitrary: hostileString },
  );
}

function token(spec: CommandSpec): fc.Arbitrary<string> {
  const flags = Object.entries(spec.options).flatMap(([name, o]) => [`--${name}`, ...(o.short ? [`-${o.short}`] : [])]);
  const flag = flags.length ? fc.constantFrom(...flags) : fc.constant('--json');
  return fc.oneof(
    { weight: 3, arbitrary: flag },
    { weight: 2, arbitrary: fc.tuple(flag, value()).map(([f, v]) => `${f}=${v}`) },
    { weight: 1, arbitrary: flag.map((f) => `${f}=`) },
    { weight: 1, arbitrary: fc.constantFrom('--no-such-flag', '--', '-', '-Z', '--json=yes', '-hx') },
    { weight: 5, arbitrary: value() },
  );
}

/**
 * An argv: a command's words and its tokens — the positionals it takes first more often than not,
 * so that valid commands are reached — or, now and then, an unknown or partial command.
 */
function argvArb(): fc.Arbitrary<string[]> {
  const known = fc.integer({ min: 0, max: specs.length - 1 }).chain((i) => {
    const spec = specs[i]!;
    const words = spec.name.split(' ');
    const positionals = fc.array(value(), { minLength: spec.positionals.filter((p) => p.required).length, maxLength: spec.positionals.length });
    return fc.tuple(positionals, fc.array(token(spec), { maxLength: 8 })).map(([pos, rest]) => [...words, ...pos, ...rest.filter((t) => t !== '--help' && t !== '-h')]);
  });
  const odd = fc.tuple(fc.constantFrom('create', 'workflows', 'accounts', 'projections', 'daemon', 'schema', 'help', 'lsit', 'crate'), fc.array(value(), { maxLength: 3 })).map(([w, rest]) => [w, ...rest]);
  return fc.oneof({ weight: 9, arbitrary: known }, { weight: 1, arbitrary: odd });
}

describe('fuzz: the command line, in process', () => {
  it('any argv exits 0 or 2 with a one-line error, no stack trace, and nothing appended when it exits 2', async () => {
    let reached = 0;
    await fc.assert(
      fc.asyncProperty(argvArb(), async (argv) => {
        // `daemon <sub>` reaches EXCLUDED commands only by name: keep it to what is allowed.
        if (argv[0] === 'daemon' && argv[1] !== undefined && EXCLUDED.has(`daemon ${argv[1]}`)) return;
        if (argv[0] === 'help' && argv[1] === 'daemon') return;
        const before = head();
        const { code, stderr } = await cli(argv);
        const what = `loops ${JSON.stringify(argv).slice(0, 300)} → ${code}: ${stderr.slice(0, 500)}`;
        // `daemon status` exits 1 when no daemon runs (docs/cli.md), saying so on stdout.
        if (argv[0] === 'daemon' && argv[1] === 'status' && code === 1 && stderr === '') return;
        expect([0, 2], what).toContain(code);
        expect(stderr, what).not.toMatch(/^\s+at /m);
        expect(stderr, what).not.toMatch(/internal error|SQLITE_|SqliteError|TypeError|RangeError|undefined|\[object Object\]/);
        if (code === 0) {
          reached++;
          return;
        }
        const lines = stderr.trimEnd().split('\n');
        for (const line of lines) expect(line.length, what).toBeLessThan(1000);
        // `workflows validate` lists every problem of the file (docs/workflows.md), then its verdict.
        if (argv[0] !== 'workflows' || argv[1] !== 'validate') {
          expect(lines, what).toHaveLength(1);
          expect(lines[0], what).toMatch(/^loops( [a-z-]+)*: /);
        }
        expect(head(), `${what}: appended to the log`).toBe(before);
      }),
      fuzzParams(0x11b1, 250),
    );
    // Not only errors: some argv reached a command that did its work.
    expect(reached).toBeGreaterThan(5);
  });

  it('what it found: a long value is quoted by its start and length, a control character escaped — every error stays one short line', async () => {
    // Each printed the whole value before (a 100 kB line), or broke the line at the newline.
    const huge = 'x'.repeat(100_000);
    const cases: Array<[string[], RegExp]> = [
      [['runs', '--status', huge], /^loops runs: unknown status "x{40}"… \(100000 characters\); use one of /],
      [['workflows', huge], /^loops workflows: unknown subcommand "x{40}"… \(100000 characters\); use one of: loops workflows create, /],
      [[huge], /^loops: unknown command "x{40}"… \(100000 characters\); loops --help lists commands$/],
      [['stats', '--since', huge], /^loops: --since: "x{40}"… \(100000 characters\)/],
      [['create', 'command', 'nl', '--cmd', 'true', '--cwd', 'a\nb\u001b[31m', '--manual'], /^loops: --cwd: directory \/.*\/a\\nb\\u001b\[31m does not exist; /],
    ];
    for (const [argv, message] of cases) {
      const before = head();
      const { code, stderr } = await cli(argv);
      expect(code).toBe(2);
      expect(stderr.trimEnd()).toMatch(message);
      expect(stderr.length).toBeLessThan(600);
      expect(stderr.trimEnd().split('\n')).toHaveLength(1);
      expect(head()).toBe(before);
    }
  });

  it('a name or id over its maximum, given to every command that takes one, exits 2 with a short message naming it (never exit 1, never SQLite)', async () => {
    // Names are 1–64 characters (loops, workflows, accounts), ids at most MAX_REF_LENGTH (refs.ts).
    for (const size of [65, 201, 100_000]) {
      const long = 'n'.repeat(size);
      const commands: string[][] = [
        ['create', 'command', long, '--cmd', 'true', '--manual'],
        ['create', 'workflow', long, '--workflow', 'wf', '--manual'],
        ['create', 'workflow', 'to-wf', '--workflow', long, '--manual'],
        ['create', 'agent', long, '--provider', 'claude', '--prompt', 'x', '--manual', '--no-preflight'],
        ['create', 'agent', 'to-acct', '--provider', 'claude', '--prompt', 'x', '--account', long, '--manual', '--no-preflight'],
        ...['show', 'pause', 'resume', 'stop', 'archive', 'remove', 'next', 'why', 'run-now', 'runs', 'stats', 'cancel', 'logs', 'events', 'replay'].map((c) => [c, long]),
        ...['show', 'runs', 'inspect', 'cancel', 'resume', 'archive', 'run'].map((c) => ['workflows', c, long]),
        ['workflows', 'update', long, wfFile],
        ['accounts', 'add', long, '--tool', 'claude', '--dir', root],
        ['accounts', 'remove', long],
      ];
      for (const argv of commands) {
        const before = head();
        const { code, stderr } = await cli(argv);
        const what = `loops ${argv.map((a) => (a.length > 20 ? `<${a.length} characters>` : a)).join(' ')} → ${code}: ${stderr.slice(0, 300)}`;
        expect(code, what).toBe(2);
        expect(stderr.trimEnd().split('\n'), what).toHaveLength(1);
        expect(stderr.length, what).toBeLessThan(500);
        expect(stderr, what).toMatch(size <= 80 ? new RegExp(`"${long}"`) : new RegExp(`"n{40}"… \\(${size} characters\\)`));
        expect(stderr, what).not.toMatch(/SQLITE|sqlite|internal error|pattern too complex/);
        expect(head(), what).toBe(before);
      }
    }
    // An account name is checked even with --no-preflight (it was stored as given, and handed to
    // an external `accounts env <name>` command, where "-h" reads as a flag).
    for (const account of ['-h', '-rf', 'a b', 'x'.repeat(65)]) {
      const { code, stderr } = await cli(['create', 'agent', 'acct', '--provider', 'claude', '--prompt', 'x', `--account=${account}`, '--manual', '--no-preflight']);
      expect(code).toBe(2);
      expect(stderr).toMatch(/^loops: --account: invalid account name "/);
    }
  });

  it('what it found: --input constructor=x or __proto__=x is "no input named …", not accepted in silence; --secret-env toString is a name like any other', async () => {
    // `key in spec.inputs` found Object's own constructor; `out[key] = …` dropped __proto__: the run went on.
    for (const key of ['constructor', '__proto__', 'toString']) {
      const before = head();
      const { code, stderr } = await cli(['workflows', 'run', 'wf', '--input', `${key}=x`]);
      expect(code, stderr).toBe(2);
      expect(stderr).toBe(`loops: --input ${key}: workflow wf has no input named "${key}"; it declares no inputs (add them under inputs: in the spec)\n`);
      expect(head()).toBe(before);
    }
    // Likewise `name in env`: --secret-env toString was "also given with --env".
    const { code, stderr } = await cli(['create', 'command', 'secret-to-string', '--cmd', 'true', '--secret-env', 'toString', '--manual']);
    expect(code, stderr).toBe(0);
  });

  it('afterwards the log is consistent: every stream replays, the tables equal a rebuild, every loop has its loop.created', () => {
    const db = openDatabase(join(dataDir, 'loops.db'));
    try {
      const log = new SqliteEventLog(db);
      expectLogConsistent({ db, log });
      const orphans = db
        .prepare("SELECT id FROM loops WHERE NOT EXISTS (SELECT 1 FROM events WHERE stream_id = 'loop:' || loops.id AND type = 'loop.created')")
        .all();
      expect(orphans).toEqual([]);
      const runsWithoutLoop = db.prepare('SELECT id FROM loop_runs WHERE loop_id NOT IN (SELECT id FROM loops)').all();
      expect(runsWithoutLoop).toEqual([]);
    } finally {
      db.close();
    }
  });
});
