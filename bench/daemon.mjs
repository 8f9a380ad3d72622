// Scheduler/daemon benchmarks (issues 3 and 14), each against a baseline measured in the same run:
//   - one scheduling pass with nothing due, 100 vs 10,000 loops defined (in-process Daemon);
//   - idle CPU of a running daemon with 10,000 loops defined (in-process Daemon);
//   - idle memory: the real `loops daemon run` (the built CLI) with 10,000 loops defined, none due —
//     its RSS plus its spawner helper's, if one runs — against an idle bare `node` process started
//     beside it; sampled every second, "just after start" (the helper is warmed at start) and
//     "settled" (the median of the last samples: the helper has ended, and V8 has shrunk the young
//     generation it grew while starting). Goal: settled ratio <= 1.8;
//   - firing lateness: the real daemon at --concurrency 4, 16 and 100, 100 loops due in the same
//     second (created while it runs, as the CLI would; --quick: 20): slot instant -> `process.spawned` (the `at`
//     the daemon stamps when it learns the process runs), p50 / p99; against 100 bare spawns of
//     `true` (child_process.spawn) from one timer in a plain node process, each from the timer's
//     scheduled instant to its 'spawn' event, run just before each row. Goal: p99 ratio <= 1.5 at
//     concurrency 100. Beside each row, what it is made of: the spawner helper alone (the daemon's
//     fork path, through the same Spawner, warm) asked for the same spawns at once, each with a run's
//     files (directory, stdout, stderr, exit-status) and without, p99 from request to pid reply.
//   - CPU per run in a burst: the real daemon at --concurrency 100, 100 loops due together every 3 s
//     (--quick: 20, 2 bursts); the first burst is skipped (a fresh daemon's code is cold), then the CPU of the
//     daemon and of its spawner helper (utime + stime from /proc, 10 ms ticks) over the next 4 bursts,
//     per run; against the CPU a plain node process spends per spawn of `true` from one timer (the
//     bare side of the lateness row: 100 spawns and their exits). What loops adds to a process start,
//     in CPU the other runs of a burst then wait for. No goal of its own: it is what lateness is made of.
//   - steady: the same bursts after the first 10 (--quick: 1), ~35 s in, when the daemon's code is
//     compiled: their p99 lateness against the same bursts from one plain node process (its first
//     skipped), and the CPU per run. What a daemon that has been running a while does, where the
//     lateness rows measure a fresh daemon's first burst. No goal of its own.
//   Lateness is measured --reps times (default 1) per concurrency, each row's baseline run just before
//   it; the figure is the median of the rows' p50, p99 and ratio (this VM's fork time moves 2× between
//   minutes).
//   node bench/daemon.mjs [--quick] [--json] [--only pass,idle,memory,lateness,burstcpu,steady] [--reps N]
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { checkOptions, cpuPhrase, cpuSince, machineInfo, makeTempDir, median, removeTempDir } from './lib.mjs';

const PARTS = ['pass', 'idle', 'memory', 'lateness', 'burstcpu', 'steady'];
const USAGE = [
  'usage: node bench/daemon.mjs [--quick] [--json] [--only LIST] [--reps N]',
  `  --only   a comma-separated subset of ${PARTS.join(', ')} (default all)`,
  '  --reps   lateness, burstcpu and steady rows, the median reported (default 1)',
  '  --concurrency LIST  the daemon concurrencies lateness is measured at (default 4,16,100)',
  '  --quick  fewer loops and shorter windows (CI proves the bench runs; its figures are not the goals\')',
  '  --json   print one JSON report instead of the table',
].join('\n');
const args = process.argv.slice(2);
checkOptions(args, { flags: ['--quick', '--json'], valued: ['--only', '--reps', '--concurrency'] }, USAGE);
const quick = args.includes('--quick');
const asJson = args.includes('--json');
const valueOf = (flag) => (args.includes(flag) ? args[args.indexOf(flag) + 1] : undefined);
const only = new Set((valueOf('--only') ?? PARTS.join(',')).split(',').map((x) => x.trim()));
for (const part of only) {
  if (!PARTS.includes(part)) {
    process.stderr.write(`bench: --only: unknown part ${part} (${PARTS.join(', ')})\n${USAGE}\n`);
    process.exit(2);
  }
}
const reps = Number(valueOf('--reps') ?? 1);
const concurrencies = (valueOf('--concurrency') ?? '4,16,100').split(',').map(Number);
if (concurrencies.some((c) => !Number.isInteger(c) || c < 1)) {
  process.stderr.write(`bench: --concurrency takes positive integers\n${USAGE}\n`);
  process.exit(2);
}
if (!Number.isInteger(reps) || reps < 1) {
  process.stderr.write(`bench: --reps must be a positive integer\n${USAGE}\n`);
  process.exit(2);
}

const root = resolve(fileURLToPath(import.meta.url), '..', '..');
const BIN = join(root, 'dist', 'cli', 'main.js');
const { Daemon, createCommandLoop, openRuntime } = await import(pathToFileURL(join(root, 'dist', 'index.js')).href);
const { default: Database } = await import('better-sqlite3');
const { Spawner } = await import(pathToFileURL(join(root, 'dist', 'runtime', 'execution', 'spawner.js')).href);

const pct = (a, p) => [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor((a.length * p) / 100))];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const quiet = () => {};
const t0 = performance.now();
const machineAtStart = machineInfo();
const say = (line) => {
  if (!asJson) process.stderr.write(`[${((performance.now() - t0) / 1000).toFixed(1)} s] ${line}\n`);
};

async function withLoops(dir, n, schedule) {
  const rt = await openRuntime({ dataDir: dir });
  // Setup only, in one transaction (one fsync for 10,000 loops): the SQLite store writes an append
  // during the call, so the creates land inside it; their promises are awaited after the commit.
  const created = [];
  rt.db.transaction(() => {
    for (let i = 0; i < n; i++) created.push(createCommandLoop(rt, { name: `l${i}`, command: 'true', shell: false, schedule: schedule(i) }));
  })();
  await Promise.all(created);
  return rt;
}

// ── processes ──────────────────────────────────────────────────────────────────────────────────
function rssMiB(pid) {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
  } catch {
    return 0;
  }
}

/** The spawner helpers running under `pid` (children running spawner-process.js). */
function helpersOf(pid) {
  const found = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) !== pid) continue;
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes('spawner-process.js')) found.push(Number(name));
    } catch {
      // gone
    }
  }
  return found;
}

/** `loops daemon run` from the built CLI, in the foreground; resolves once it says it started. */
async function startDaemon(dataDir, extra = []) {
  const child = spawn(process.execPath, [BIN, 'daemon', 'run', ...extra], { env: { ...process.env, LOOPS_DATA_DIR: dataDir, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (t) => (err += t));
  await new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new Error(`the daemon did not start within 30 s: ${err}`)), 30_000);
    child.stdout.setEncoding('utf8').on('data', (t) => {
      out += t;
      if (out.includes('daemon started')) {
        clearTimeout(timer);
        resolvePromise();
      }
    });
    child.once('exit', (code) => reject(new Error(`the daemon exited ${code}: ${err}`)));
  });
  child.stdout.resume();
  return child;
}

async function stopDaemon(child) {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

// ── 1. One pass with nothing due: 100 vs 10,000 loops defined ─────────────────────────────────
const passCost = {};
if (only.has('pass')) say('pass cost …');
for (const n of !only.has('pass') ? [] : quick ? [100, 1000] : [100, 10_000]) {
  const dir = makeTempDir(`daemon-pass${n}`);
  const rt = await withLoops(dir, n, () => ({ every: '1h', tz: 'UTC' }));
  const d = new Daemon(rt, { log: quiet, spawner: 'inline' });
  const samples = [];
  for (let i = 0; i < (quick ? 50 : 200); i++) {
    const t = performance.now();
    await d.pass();
    samples.push(performance.now() - t);
  }
  passCost[n] = median(samples);
  rt.close();
  removeTempDir(dir);
}
const [small, large] = Object.keys(passCost).map(Number);

// ── 2. Idle CPU of a running daemon with 10,000 loops, none due during the measurement ─────────
const idleLoops = quick ? 1000 : 10_000;
let idlePct;
if (only.has('idle')) {
  say('idle CPU …');
  const dir = makeTempDir('daemon-idlecpu');
  const rt = await withLoops(dir, idleLoops, () => ({ every: '1d', tz: 'UTC' }));
  const idle = new Daemon(rt, { log: quiet });
  await idle.start();
  await sleep(quick ? 500 : 1500);
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  await sleep(quick ? 1500 : 10_000);
  const cpu = process.cpuUsage(cpu0);
  idlePct = ((cpu.user + cpu.system) / 1000 / (performance.now() - wall0)) * 100;
  await idle.stop();
  rt.close();
  removeTempDir(dir);
}

// ── 3. Idle memory of the real daemon, helper included, against an idle bare node ─────────────
let idleRss;
if (only.has('memory')) {
  say('idle memory …');
  const dir = makeTempDir('daemon-idlerss');
  (await withLoops(dir, idleLoops, () => ({ every: '1d', tz: 'UTC' }))).close();
  const bare = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1e9)'], { stdio: 'ignore' });
  const daemon = await startDaemon(dir);
  const windowS = quick ? 4 : 45;
  const samples = [];
  for (let s = 1; s <= windowS; s++) {
    await sleep(1000);
    const helpers = helpersOf(daemon.pid);
    samples.push({ s, daemon: rssMiB(daemon.pid), helper: helpers.reduce((sum, pid) => sum + rssMiB(pid), 0), helpers: helpers.length, bare: rssMiB(bare.pid) });
  }
  await stopDaemon(daemon);
  bare.kill();
  removeTempDir(dir);
  const figure = (list) => {
    const daemonMiB = median(list.map((x) => x.daemon));
    const helperMiB = median(list.map((x) => x.helper));
    const bareMiB = median(list.map((x) => x.bare));
    return { daemonMiB, helperMiB, helpers: Math.max(...list.map((x) => x.helpers)), bareMiB, ratio: (daemonMiB + helperMiB) / bareMiB };
  };
  const early = samples.slice(0, 3);
  const settled = samples.slice(-Math.min(5, samples.length));
  idleRss = { loops: idleLoops, windowS, early: { ...figure(early), atS: early.map((x) => x.s) }, settled: { ...figure(settled), atS: settled.map((x) => x.s) }, samples };
}

// ── 4. Lateness: 100 loops due in the same second, against 100 bare spawns from one timer ──────
/**
 * 100 spawns of `true` from one timer in a plain node process: scheduled instant → 'spawn', ms. With
 * `bursts` > 1, the same every 3 s from the same process: one entry per burst, each with the CPU it
 * spent from just before its timer to its last exit.
 */
async function bareBursts(n, bursts) {
  const script = `
    const { spawn } = require('node:child_process');
    const now = () => performance.timeOrigin + performance.now();
    const first = Math.ceil((Date.now() + 700) / 100) * 100;
    const out = [];
    const burst = (b) => {
      const at = first + b * 3000;
      let cpu0;
      setTimeout(() => { cpu0 = process.cpuUsage(); }, at - Date.now() - 50);
      setTimeout(() => {
        const late = [];
        let exited = 0;
        for (let i = 0; i < ${n}; i++) {
          const c = spawn('true', [], { stdio: 'ignore' });
          c.once('spawn', () => late.push(now() - at));
          c.once('exit', () => {
            if (++exited < ${n}) return;
            const u = process.cpuUsage(cpu0);
            out.push({ late, cpuMs: (u.user + u.system) / 1000 });
            if (out.length === ${bursts}) process.stdout.write(JSON.stringify(out));
          });
        }
      }, at - Date.now());
    };
    for (let b = 0; b < ${bursts}; b++) burst(b);`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (t) => (out += t));
  await new Promise((r) => child.once('exit', r));
  return JSON.parse(out);
}
/** One burst of `bareBursts` from a fresh process: its latenesses. */
async function bareSpawns(n) {
  const [{ late }] = await bareBursts(n, 1);
  return late;
}

/**
 * The daemon's own fork path without the daemon: `n` spawns of `true` asked of the spawner helper
 * at once, through the runner's side of it (Spawner, as the daemon does, the helper warm), each
 * timed from the request to its pid reply. `files`: each with what a run has — its directory
 * made, stdout, stderr and exit-status files created (as the daemon's requests); else
 * /dev/null and nothing made, the helper's protocol and fork alone. What the lateness rows are
 * made of: bare fork train → the helper's → the daemon's.
 */
async function helperTrain(n, files) {
  const dir = makeTempDir('daemon-helper');
  const spawner = new Spawner({ idleMs: 60_000 });
  // An idle helper does not hold the event loop open (the runner's other work does, in a daemon).
  const alive = setInterval(() => undefined, 1000);
  try {
    await spawner.ready();
    const t = performance.now();
    const late = await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const run = join(dir, 'runs', `run_${i}`);
        const where = files
          ? { dirs: [run], stdout: join(run, 'stdout.log'), stderr: join(run, 'stderr.log'), status: join(run, 'exit-status') }
          : { stdout: '/dev/null', stderr: '/dev/null' };
        const spawned = await spawner.spawn({ file: 'true', args: [], cwd: null, env: { LOOPS_RUN_ID: `run_${i}` }, check: 'true', ...where });
        const at = performance.now() - t;
        await spawned.exit;
        return at;
      }),
    );
    return late;
  } finally {
    clearInterval(alive);
    spawner.close();
    removeTempDir(dir);
  }
}

/** utime + stime of a process, ms (0 once it is gone). */
function cpuMsOf(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10;
  } catch {
    return 0;
  }
}

/**
 * The daemon's and its helpers' CPU per run, and the p99 lateness, over `bursts` bursts of `n` loops
 * due together every 3 s, after the first `skip` bursts.
 */
async function burstCpu(n, bursts, skip = 1) {
  const dir = makeTempDir('daemon-burstcpu');
  (await openRuntime({ dataDir: dir })).close();
  const daemon = await startDaemon(dir, ['--concurrency', '100']);
  const everyMs = 3000;
  const startsAt = new Date(Math.ceil((Date.now() + 3000) / 1000) * 1000).toISOString();
  (await withLoops(dir, n, () => ({ every: '3s', tz: 'UTC', startsAt }))).close();
  const slot = Date.parse(startsAt);
  const cpu = () => ({ daemon: cpuMsOf(daemon.pid), helper: helpersOf(daemon.pid).reduce((sum, pid) => sum + cpuMsOf(pid), 0) });
  // The helper ends when idle and starts again: sampled just before each burst and at its end.
  const per = [];
  const last = skip + bursts - 1;
  for (let b = skip; b <= last; b++) {
    await sleep(Math.max(0, slot + b * everyMs - 200 - Date.now()));
    const c0 = cpu();
    await sleep(Math.max(0, slot + b * everyMs + 1500 - Date.now()));
    const c1 = cpu();
    per.push({ daemon: (c1.daemon - c0.daemon) / n, helper: Math.max(0, c1.helper - c0.helper) / n });
  }
  // Every slot of the bursts measured is started (waited for, bounded: a loaded machine is slow, not wrong).
  const db = new Database(join(dir, 'loops.db'), { readonly: true, fileMustExist: true });
  const count = db.prepare("SELECT count(*) AS n FROM events WHERE type = 'process.spawned' AND at < ?");
  const before = new Date(slot + last * everyMs + everyMs / 2).toISOString();
  let spawned = count.get(before).n;
  for (const deadline = Date.now() + 30_000; spawned < n * (last + 1) && Date.now() < deadline; spawned = count.get(before).n) await sleep(250);
  // The lateness of each measured burst (slot → `process.spawned`), as the lateness rows measure a first one.
  const at = db.prepare("SELECT at FROM events WHERE type = 'process.spawned' AND at >= ? AND at < ?");
  const p99s = [];
  for (let b = skip; b <= last; b++) {
    const s = slot + b * everyMs;
    p99s.push(pct(at.all(new Date(s).toISOString(), new Date(s + everyMs).toISOString()).map((r) => Date.parse(r.at) - s), 99));
  }
  db.close();
  await stopDaemon(daemon);
  removeTempDir(dir);
  return { daemon: median(per.map((x) => x.daemon)), helper: median(per.map((x) => x.helper)), p99: median(p99s), spawned, expected: n * (last + 1) };
}

async function daemonLateness(concurrency, n) {
  const dir = makeTempDir(`daemon-late${concurrency}`);
  (await openRuntime({ dataDir: dir })).close();
  const daemon = await startDaemon(dir, ['--concurrency', String(concurrency)]);
  // Created while the daemon runs (as `loops create` would): it sees them within its watch interval.
  const startsAt = new Date(Math.ceil((Date.now() + (quick ? 2000 : 3000)) / 1000) * 1000).toISOString();
  (await withLoops(dir, n, () => ({ every: '1h', tz: 'UTC', startsAt }))).close();
  const slot = Date.parse(startsAt);
  const db = new Database(join(dir, 'loops.db'), { readonly: true, fileMustExist: true });
  const query = db.prepare("SELECT at FROM events WHERE type = 'process.spawned'");
  let rows = [];
  await sleep(Math.max(0, slot - Date.now()));
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    rows = query.all();
    if (rows.length >= n) break;
    await sleep(250);
  }
  db.close();
  await stopDaemon(daemon);
  removeTempDir(dir);
  const late = rows.map((r) => Date.parse(r.at) - slot);
  return { n: late.length, p50: pct(late, 50), p99: pct(late, 99) };
}

// --quick: 20 loops (and 20 bare spawns) a row; 2 bursts measured (else 4), after 1 (steady: 10).
const due = quick ? 20 : 100;
const measured = quick ? 2 : 4;
const steadySkip = quick ? 1 : 10;
const lateness = [];
for (const concurrency of only.has('lateness') ? concurrencies : []) {
  const rows = [];
  for (let r = 1; r <= reps; r++) {
    say(`lateness, concurrency ${concurrency}${reps > 1 ? `, row ${r}/${reps}` : ''} …`);
    const base = await bareSpawns(due);
    const helper = { files: pct(await helperTrain(due, true), 99), bare: pct(await helperTrain(due, false), 99) };
    const loops = await daemonLateness(concurrency, due);
    rows.push({ ...loops, baseline: { p50: pct(base, 50), p99: pct(base, 99) }, helper, ratio: loops.p99 / pct(base, 99) });
  }
  const mid = (f) => median(rows.map(f));
  lateness.push({
    concurrency,
    due,
    n: Math.min(...rows.map((x) => x.n)),
    p50: mid((x) => x.p50),
    p99: mid((x) => x.p99),
    baseline: { p50: mid((x) => x.baseline.p50), p99: mid((x) => x.baseline.p99) },
    // The spawner helper alone, the same spawns at once: p99 with a run's files, and without.
    helper: { p99: mid((x) => x.helper.files), p99NoFiles: mid((x) => x.helper.bare) },
    ratio: mid((x) => x.ratio),
    ratios: rows.map((x) => x.ratio),
  });
}

const burstcpu = [];
for (let r = 1; only.has('burstcpu') && r <= reps; r++) {
  say(`CPU per run in a burst${reps > 1 ? `, row ${r}/${reps}` : ''} …`);
  // The baseline warm too: the same bursts from one plain node process, its first skipped.
  const bareWarm = (await bareBursts(due, measured + 1)).slice(1);
  const bare = median(bareWarm.map((x) => x.cpuMs)) / due;
  const loops = await burstCpu(due, measured);
  burstcpu.push({ ...loops, bare, ratio: (loops.daemon + loops.helper) / bare });
}
const mid = (rows, f) => median(rows.map(f));
const burstCpuFigure = burstcpu.length
  ? { due, rows: burstcpu, daemon: mid(burstcpu, (x) => x.daemon), helper: mid(burstcpu, (x) => x.helper), bare: mid(burstcpu, (x) => x.bare), ratio: mid(burstcpu, (x) => x.ratio), complete: burstcpu.every((x) => x.spawned >= x.expected) }
  : null;

const steady = [];
for (let r = 1; only.has('steady') && r <= reps; r++) {
  say(`lateness of a daemon running a while (bursts ${steadySkip + 1}-${steadySkip + measured})${reps > 1 ? `, row ${r}/${reps}` : ''} …`);
  const bareWarm = (await bareBursts(due, measured + 1)).slice(1);
  const bareP99 = median(bareWarm.map((x) => pct(x.late, 99)));
  const loops = await burstCpu(due, measured, steadySkip);
  steady.push({ ...loops, bareP99, ratio: loops.p99 / bareP99 });
}
const steadyFigure = steady.length
  ? { due, skip: steadySkip, bursts: measured, rows: steady, p99: mid(steady, (x) => x.p99), bareP99: mid(steady, (x) => x.bareP99), ratio: mid(steady, (x) => x.ratio), daemon: mid(steady, (x) => x.daemon), helper: mid(steady, (x) => x.helper), complete: steady.every((x) => x.spawned >= x.expected) }
  : null;

// ── report ─────────────────────────────────────────────────────────────────────────────────────
const report = {
  when: new Date().toISOString(),
  quick,
  machine: { ...machineAtStart, loadavgAfter: machineInfo().loadavg, cpu: cpuSince(machineAtStart) },
  passCostMs: only.has('pass') ? { loops: [small, large], median: [passCost[small], passCost[large]] } : null,
  idleCpuPct: only.has('idle') ? { loops: idleLoops, pct: idlePct } : null,
  reps,
  idleRss,
  lateness,
  burstCpu: burstCpuFigure,
  steady: steadyFigure,
};
if (asJson) {
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
} else {
  const row = (name, value, goal, ok) => console.log(`${name.padEnd(64)} ${value.padStart(30)}  ${goal.padEnd(24)} ${ok === null ? '' : ok ? 'PASS' : 'MISS'}`);
  const m = report.machine;
  console.log(`\nloops daemon benchmarks — ${report.when}, node ${m.node}, ${m.cpus} cpus, load ${m.loadavg.join(' ')} → ${m.loadavgAfter.join(' ')}${cpuPhrase(machineAtStart)}${quick ? ', --quick' : ''}\n`);
  if (only.has('pass')) row(`pass, nothing due: ${small} vs ${large} loops (median)`, `${passCost[small].toFixed(3)} / ${passCost[large].toFixed(3)} ms`, 'independent of loops', passCost[large] < passCost[small] * 3);
  if (only.has('idle')) row(`idle daemon CPU with ${idleLoops} loops (in-process)`, `${idlePct.toFixed(2)} % of a core`, '< 1 %', idlePct < 1);
  const mem = (f) => `${f.daemonMiB.toFixed(1)} + ${f.helperMiB.toFixed(1)} vs ${f.bareMiB.toFixed(1)} MiB = ${f.ratio.toFixed(2)}x`;
  if (only.has('memory')) {
    row(`idle RSS, ${idleLoops} loops, daemon + helper vs bare node, at ${idleRss.early.atS[0]}-${idleRss.early.atS.at(-1)} s`, mem(idleRss.early), 'info', null);
    row(`idle RSS, ${idleLoops} loops, daemon + helper vs bare node, at ${idleRss.settled.atS[0]}-${idleRss.settled.atS.at(-1)} s`, mem(idleRss.settled), '<= 1.8x', idleRss.settled.ratio <= 1.8);
  }
  for (const l of lateness) {
    row(
      `lateness, ${l.due} due at once, concurrency ${l.concurrency}: p50 / p99 (bare p50 / p99)`,
      `${l.p50.toFixed(0)} / ${l.p99.toFixed(0)} (${l.baseline.p50.toFixed(0)} / ${l.baseline.p99.toFixed(0)}) ms = ${l.ratio.toFixed(2)}x`,
      l.concurrency === 100 ? 'p99 <= 1.5x bare' : 'info',
      l.n !== l.due ? false : l.concurrency === 100 ? l.ratio <= 1.5 : null,
    );
    console.log(
      `  (the spawner helper alone, the same ${l.due} asked at once: p99 ${l.helper.p99.toFixed(0)} ms with a run's files = ${(l.helper.p99 / l.baseline.p99).toFixed(2)}x bare, ` +
        `${l.helper.p99NoFiles.toFixed(0)} ms without = ${(l.helper.p99NoFiles / l.baseline.p99).toFixed(2)}x; the daemon's p99 is ${(l.p99 / l.helper.p99).toFixed(2)}x the helper's)`,
    );
    if (l.n !== l.due) console.log(`  (only ${l.n} of ${l.due} runs spawned within 30 s)`);
    if (reps > 1) console.log(`  (median of ${reps} rows; the rows' ratios ${l.ratios.map((x) => x.toFixed(2)).join(', ')})`);
  }
  const b = burstCpuFigure;
  if (b) {
    row(`CPU per run, ${b.due} due together, warm bursts: daemon + helper (bare)`, `${b.daemon.toFixed(2)} + ${b.helper.toFixed(2)} (${b.bare.toFixed(2)}) ms = ${b.ratio.toFixed(2)}x`, 'info', b.complete ? null : false);
    if (!b.complete) console.log('  (not every slot of the bursts was spawned: the figure is not a whole burst)');
    if (reps > 1) console.log(`  (median of ${reps} rows; the rows' ratios ${b.rows.map((x) => x.ratio.toFixed(2)).join(', ')})`);
  }
  const st = steadyFigure;
  if (st) {
    row(`lateness p99, ${st.due} due together, bursts ${st.skip + 1}-${st.skip + st.bursts} (bare, warm)`, `${st.p99.toFixed(0)} (${st.bareP99.toFixed(0)}) ms = ${st.ratio.toFixed(2)}x`, 'info', st.complete ? null : false);
    row(`  CPU per run in those bursts: daemon + helper`, `${st.daemon.toFixed(2)} + ${st.helper.toFixed(2)} ms`, 'info', null);
    if (!st.complete) console.log('  (not every slot of the bursts was spawned: the figure is not a whole burst)');
    if (reps > 1) console.log(`  (median of ${reps} rows; the rows' ratios ${st.rows.map((x) => x.ratio.toFixed(2)).join(', ')})`);
  }
}
