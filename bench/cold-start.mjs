#!/usr/bin/env node
// Cold start of the `loops` binary (issue 14), each figure a ratio against a bare-stack baseline
// measured in the same run, interleaved with it, as the median of --reps repetitions:
//   run-now   `loops run-now t` (t: the command `true`, no shell), wall time
//             vs a cold `node` that imports execa and runs `true` with it
//   run-now   the same processes' peak RSS
//             vs a cold `node` that imports better-sqlite3, xstate, zod and execa
//   list      `loops list --json` with 100 loops, wall time
//             vs a cold `node` that opens the same database and prints its loops table as JSON
// and, for reference, the wall time of show, runs, events, replay and --help beside `node -e 0`,
// with the packages each command loads (scripts/module-trace.mjs, one traced start each, untimed).
// Wall time is taken around the spawn; CPU and peak RSS come from /usr/bin/time when it is there.
//
// With --peer, the predecessor (@hasna/loops 0.3.1 on bun, through ../shared/anchors/seed.sh or
// $LOOPS_PEER_SEED) runs the same commands on a data directory of its own set up the same way, in
// the same run, interleaved with loops; its figures are printed beside loops' (for users to compare:
// bun starts in a third of Node's time, so they are not goals).
//
//   node bench/cold-start.mjs [--quick] [--reps N] [--json] [--peer]      (npm run bench:cold -- …)
//   LOOPS_BENCH_CLI=path benchmarks another entry point (default dist/cli/main.js)
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { machineInfo, makeTempDir, median, minMax, now, table } from './lib.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI = process.env.LOOPS_BENCH_CLI ? resolve(process.env.LOOPS_BENCH_CLI) : join(ROOT, 'dist', 'cli', 'main.js');
const TRACE = join(ROOT, 'scripts', 'module-trace.mjs');
const TIME = existsSync('/usr/bin/time') ? '/usr/bin/time' : null;

const USAGE = `usage: node bench/cold-start.mjs [--quick] [--reps N] [--json] [--peer]
  --quick    3 repetitions of 2 starts per side (also LOOPS_BENCH_QUICK=1); default 11 of 3
  --reps N   repetitions (medians of their medians)
  --json     one JSON document on stdout (progress goes to stderr)
  --peer     also run the predecessor (@hasna/loops 0.3.1, ../shared/anchors/seed.sh or
             $LOOPS_PEER_SEED) on the same commands, interleaved, and print it beside loops`;

const opts = { quick: process.env.LOOPS_BENCH_QUICK === '1', reps: null, json: false, peer: false };
for (let i = 2; i < process.argv.length; i++) {
  const arg = process.argv[i];
  if (arg === '--quick') opts.quick = true;
  else if (arg === '--json') opts.json = true;
  else if (arg === '--peer') opts.peer = true;
  else if (arg === '--reps') opts.reps = Number(process.argv[++i]);
  else if (arg.startsWith('--reps=')) opts.reps = Number(arg.slice(7));
  else if (arg === '-h' || arg === '--help') {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  } else {
    process.stderr.write(`bench: unknown option ${arg}\n${USAGE}\n`);
    process.exit(2);
  }
}
if (opts.reps !== null && (!Number.isInteger(opts.reps) || opts.reps < 1)) {
  process.stderr.write('bench: --reps must be a positive integer\n');
  process.exit(2);
}
const reps = opts.reps ?? (opts.quick ? 3 : 11);
const startsPerRep = opts.quick ? 2 : 3;
const progress = (message) => process.stderr.write(`${message}\n`);

for (const file of [CLI, join(ROOT, 'dist', 'index.js')]) {
  if (!existsSync(file)) {
    process.stderr.write(`bench: ${file} not found; run \`npm run build\` first (or \`npm run bench:cold\`)\n`);
    process.exit(1);
  }
}

// ── the data directory: one loop `t` (command `true`, no shell) and 99 others ────────────────
const dir = makeTempDir('cold');
{
  const L = await import(pathToFileURL(join(ROOT, 'dist', 'index.js')).href);
  const rt = await L.openRuntime({ dataDir: dir });
  try {
    await L.createCommandLoop(rt, { name: 't', command: 'true', shell: false, schedule: { manual: true } });
    for (let i = 1; i < 100; i++) {
      const schedule = i % 3 === 0 ? { every: '15m' } : i % 3 === 1 ? { cron: '0 3 * * *', tz: 'UTC' } : { manual: true };
      await L.createCommandLoop(rt, { name: `bench-loop-${i}`, command: 'echo hello', schedule });
    }
  } finally {
    rt.close();
  }
}
const env = { ...process.env, LOOPS_DATA_DIR: dir, NO_COLOR: '1' };
delete env.LOOPS_DEBUG;
delete env.LOOPS_MODULE_TRACE;

// ── one cold process: wall (ms), CPU (ms) and peak RSS (MiB) ─────────────────────────────────
const timeFile = join(dir, 'time.txt');
function start(args, { ok = [0], bin = process.execPath, env: startEnv = env } = {}) {
  const argv = TIME ? [TIME, '-f', '%U %S %M', '-o', timeFile, bin, ...args] : [bin, ...args];
  const t0 = now();
  const res = spawnSync(argv[0], argv.slice(1), { env: startEnv, cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  const wall = now() - t0;
  if (!ok.includes(res.status)) {
    throw new Error(`${bin === process.execPath ? 'node' : bin} ${args.join(' ').slice(0, 200)} exited ${res.status}: ${(res.stderr || res.error?.message || '').trim().split('\n')[0]}`);
  }
  let cpu = NaN;
  let rss = NaN;
  if (TIME) {
    const [user, sys, maxKiB] = readFileSync(timeFile, 'utf8').trim().split('\n').pop().split(' ').map(Number);
    cpu = (user + sys) * 1000;
    rss = maxKiB / 1024;
  }
  return { wall, cpu, rss, stdout: res.stdout };
}

const require = createRequire(join(ROOT, 'package.json'));
const url = (name) => pathToFileURL(require.resolve(name)).href;
const esm = (code) => ['--input-type=module', '-e', code];
const db = join(dir, 'loops.db');
const sides = {
  runNow: ['run-now', 't'],
  baseExeca: esm(`const { execa } = await import(${JSON.stringify(url('execa'))}); await execa('true');`),
  baseStack: esm(
    ['better-sqlite3', 'xstate', 'zod', 'execa'].map((n, i) => `await import(${JSON.stringify(url(n))}); // ${i}`).join('\n'),
  ),
  list: ['list', '--json'],
  baseList: [
    '-e',
    `const Database = require(${JSON.stringify(require.resolve('better-sqlite3'))});
const db = new Database(${JSON.stringify(db)}, { readonly: true });
process.stdout.write(JSON.stringify(db.prepare('SELECT * FROM loops').all()) + '\\n');`,
  ],
  nodeBare: ['-e', '0'],
};

// Sanity: each side runs, list prints 100 loops; and it warms the page cache.
const listed = JSON.parse(start([CLI, ...sides.list]).stdout);
const count = Array.isArray(listed) ? listed.length : (listed.loops ?? listed.items ?? []).length;
if (count !== 100) throw new Error(`loops list --json printed ${count} loops, expected 100`);
if (JSON.parse(start(sides.baseList).stdout).length !== 100) throw new Error('the baseline did not print 100 loops');
start([CLI, ...sides.runNow]);
start(sides.baseExeca);
start(sides.baseStack);
const runId = JSON.parse(start([CLI, 'runs', '--json']).stdout).find((r) => r.loopName === 't' || r.loop === 't')?.id;

/** Interleaved pairs: per repetition, `startsPerRep` starts of each side in alternating order; medians per repetition. */
function pair(a, b) {
  const samples = { a: [], b: [] };
  for (let r = 0; r < reps; r++) {
    const ra = [];
    const rb = [];
    for (let i = 0; i < startsPerRep; i++) {
      if ((r + i) % 2 === 0) {
        ra.push(a());
        rb.push(b());
      } else {
        rb.push(b());
        ra.push(a());
      }
    }
    samples.a.push(ra);
    samples.b.push(rb);
  }
  return samples;
}
const perRep = (samples, key) => samples.map((rep) => median(rep.map((s) => s[key])));

function figure(name, baseline, loopsSamples, baseSamples, key, unit, goal) {
  const loops = perRep(loopsSamples, key);
  const base = perRep(baseSamples, key);
  const ratio = median(loops) / median(base);
  const paired = loops.map((v, i) => v / base[i]);
  return {
    name,
    baseline,
    unit,
    loops: { median: median(loops), samples: loops },
    base: { median: median(base), samples: base },
    ratio,
    pairedRange: minMax(paired),
    goal,
    status: Number.isFinite(ratio) ? (ratio <= goal ? 'PASS' : 'MISS') : 'n/a',
  };
}

const figures = [];
progress(`bench:cold: run-now vs execa + true (${reps} × ${startsPerRep} starts per side) …`);
const rn = pair(() => start([CLI, ...sides.runNow]), () => start(sides.baseExeca));
figures.push(figure('cold `loops run-now t` (true), wall', 'node: import execa, run true', rn.a, rn.b, 'wall', 'ms', 1.3));
figures.push(figure('cold `loops run-now t` (true), CPU', 'node: import execa, run true', rn.a, rn.b, 'cpu', 'ms', Infinity));
progress('bench:cold: run-now peak RSS vs the bare stack …');
const mem = pair(() => start([CLI, ...sides.runNow]), () => start(sides.baseStack));
figures.push(
  figure('cold `loops run-now t`, peak RSS', 'node: import better-sqlite3, xstate, zod, execa', mem.a, mem.b, 'rss', 'MiB', 1.2),
);
progress('bench:cold: list --json vs a bare query …');
const ls = pair(() => start([CLI, ...sides.list]), () => start(sides.baseList));
figures.push(figure('cold `loops list --json`, 100 loops, wall', 'node: better-sqlite3, SELECT * FROM loops, JSON', ls.a, ls.b, 'wall', 'ms', 1.2));

// ── reference: other commands beside `node -e 0`, and what each loads ────────────────────────
const others = [
  ['--help'],
  ['list', '--json'],
  ['show', 't', '--json'],
  ['runs', '--json'],
  ...(runId ? [['events', runId, '--json'], ['replay', runId, '--json']] : []),
  ['run-now', 't'],
];
progress('bench:cold: other commands vs node -e 0 …');
const commands = [];
const bareSamples = [];
for (const args of others) {
  const s = pair(() => start([CLI, ...args]), () => start(sides.nodeBare));
  bareSamples.push(...perRep(s.b, 'wall'));
  commands.push({ command: `loops ${args.join(' ').replace(runId ?? '\0', '<run>')}`, args, wall: median(perRep(s.a, 'wall')), base: median(perRep(s.b, 'wall')), rss: median(perRep(s.a, 'rss')) });
}
const HEAVY = ['better-sqlite3', 'croner', 'execa', 'rxjs', 'xstate', 'yaml', 'zod'];
const { summarize } = await import(pathToFileURL(TRACE).href);
for (const c of commands) {
  const out = join(dir, 'trace.txt');
  rmSync(out, { force: true });
  spawnSync(process.execPath, ['--import', pathToFileURL(TRACE).href, CLI, ...c.args], { env: { ...env, LOOPS_MODULE_TRACE: out }, encoding: 'utf8' });
  const s = summarize(existsSync(out) ? readFileSync(out, 'utf8') : '', ROOT);
  c.modules = s.urls.length;
  // The project's own dependencies (execa's dozen small ones are left out of the table).
  c.packages = s.packages.filter((p) => HEAVY.includes(p));
}

// ── --peer: the predecessor on the same commands, interleaved with loops ─────────────────────
let peer = null;
if (opts.peer) {
  const seed = process.env.LOOPS_PEER_SEED ?? join(ROOT, '..', 'shared', 'anchors', 'seed.sh');
  if (!existsSync(seed)) {
    process.stderr.write(`bench: --peer needs the predecessor's runner, ${seed} (or set LOOPS_PEER_SEED)\n`);
    process.exit(1);
  }
  progress('bench:cold: --peer: installing / locating the predecessor (seed.sh --paths) …');
  const paths = spawnSync(seed, ['--paths'], { encoding: 'utf8' });
  if (paths.status !== 0) throw new Error(`${seed} --paths exited ${paths.status}: ${paths.stderr.trim()}`);
  const [bun, peerCli] = paths.stdout.trim().split(' ');
  const peerDir = makeTempDir('cold-peer');
  const peerEnv = { ...env, LOOPS_DATA_DIR: peerDir };
  const peerStart = (args) => start([peerCli, ...args], { bin: bun, env: peerEnv });
  // The same shape as loops' data directory: `t` (true, no shell; daily, it never comes due here) and 99 others.
  peerStart(['create', 'command', 't', '--cmd', 'true', '--no-shell', '--every', '24h']);
  for (let i = 1; i < 100; i++) {
    const schedule = i % 3 === 0 ? ['--every', '15m'] : i % 3 === 1 ? ['--cron', '0 3 * * *'] : ['--every', '24h'];
    peerStart(['create', 'command', `bench-loop-${i}`, '--cmd', 'echo hello', ...schedule]);
  }
  if (JSON.parse(peerStart(['--json', 'list']).stdout).length !== 100) throw new Error('the predecessor did not list 100 loops');
  const peerCommands = [
    ['run-now t', ['run-now', 't'], ['run-now', 't']],
    ['list --json', ['list', '--json'], ['--json', 'list']],
    ['runs --json', ['runs', '--json'], ['--json', 'runs']],
    ['show t --json', ['show', 't', '--json'], ['--json', 'show', 't']],
    ['--help', ['--help'], ['--help']],
  ];
  progress(`bench:cold: --peer: ${peerCommands.length} commands, loops and the predecessor interleaved …`);
  peer = { bun, cli: peerCli, commands: [] };
  for (const [name, ours, theirs] of peerCommands) {
    const s = pair(() => start([CLI, ...ours]), () => peerStart(theirs));
    peer.commands.push({
      command: name,
      loops: { wall: median(perRep(s.a, 'wall')), cpu: median(perRep(s.a, 'cpu')), rss: median(perRep(s.a, 'rss')) },
      predecessor: { wall: median(perRep(s.b, 'wall')), cpu: median(perRep(s.b, 'cpu')), rss: median(perRep(s.b, 'rss')) },
    });
  }
  rmSync(peerDir, { recursive: true, force: true });
}

const machine = machineInfo();
const report = { date: new Date().toISOString(), machine, config: { reps, startsPerRep, quick: opts.quick, cli: CLI, time: TIME }, figures, commands, ...(peer ? { peer } : {}) };
if (opts.json) {
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
} else {
  const f2 = (v, unit) => (Number.isFinite(v) ? `${v.toFixed(unit === 'MiB' ? 1 : 0)} ${unit}` : '-');
  const lines = [
    '',
    `loops cold start — ${report.date}`,
    `node ${machine.node}, ${machine.platform}, ${machine.cpus} × ${machine.cpuModel}; load ${machine.loadavg.join(' ')}; ${reps} reps × ${startsPerRep} starts per side${opts.quick ? ' (quick)' : ''}; medians`,
    '',
    table(
      ['figure', 'loops', 'baseline', 'ratio', 'goal', 'result', 'per-rep ratio'],
      figures.map((f) => [
        f.name,
        f2(f.loops.median, f.unit),
        f2(f.base.median, f.unit),
        f.ratio.toFixed(2),
        Number.isFinite(f.goal) ? `<= ${f.goal}` : '',
        Number.isFinite(f.goal) ? f.status : '',
        `${f.pairedRange[0].toFixed(2)}–${f.pairedRange[1].toFixed(2)}`,
      ]),
      ['', 'r', 'r', 'r', '', '', 'r'],
    ),
    '',
    ...figures.filter((f, i, a) => a.findIndex((g) => g.baseline === f.baseline) === i).map((f) => `baseline "${f.baseline}"`),
    '',
    table(
      ['command', 'wall', 'node -e 0', 'ratio', 'peak RSS', 'modules', 'packages loaded'],
      commands.map((c) => [c.command, f2(c.wall, 'ms'), f2(c.base, 'ms'), (c.wall / c.base).toFixed(2), f2(c.rss, 'MiB'), String(c.modules), c.packages.join(' ') || '-']),
      ['', 'r', 'r', 'r', 'r', 'r', ''],
    ),
    ...(peer
      ? [
          '',
          `beside the predecessor (@hasna/loops 0.3.1 on bun, ${peer.cli}); for comparison, not goals`,
          '',
          table(
            ['command', 'loops wall', 'predecessor wall', 'loops ÷ predecessor', 'loops CPU', 'predecessor CPU', 'loops RSS', 'predecessor RSS'],
            peer.commands.map((c) => [
              c.command,
              f2(c.loops.wall, 'ms'),
              f2(c.predecessor.wall, 'ms'),
              (c.loops.wall / c.predecessor.wall).toFixed(2),
              f2(c.loops.cpu, 'ms'),
              f2(c.predecessor.cpu, 'ms'),
              f2(c.loops.rss, 'MiB'),
              f2(c.predecessor.rss, 'MiB'),
            ]),
            ['', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
          ),
        ]
      : []),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}
