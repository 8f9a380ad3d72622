// Scheduler/daemon benchmarks (issue 3): the cost of one scheduling pass as the number of loops
// that are NOT due grows, the idle daemon's CPU with 10,000 loops defined, and firing lateness
// (scheduled instant → process spawned) for 100 loops due in the same second.
//   node bench/daemon.mjs [--quick]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Daemon, createCommandLoop, openRuntime } from '../dist/index.js';

const quick = process.argv.includes('--quick');
// Runs are forked by the daemon's spawner helper (its default); LOOPS_BENCH_SPAWNER=inline compares.
const spawner = process.env.LOOPS_BENCH_SPAWNER === 'inline' ? 'inline' : 'helper';
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const pct = (a, p) => [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor((a.length * p) / 100))];
const dirs = [];
const tmp = (name) => {
  const d = mkdtempSync(join(tmpdir(), `loops-bench-${name}-`));
  dirs.push(d);
  return d;
};
const quiet = () => {};

async function withLoops(n, name, schedule) {
  const rt = await openRuntime({ dataDir: tmp(name) });
  // Setup only, in one transaction (one fsync for 10,000 loops): the SQLite store writes an append
  // during the call, so the creates land inside it; their promises are awaited after the commit.
  const created = [];
  rt.db.transaction(() => {
    for (let i = 0; i < n; i++) created.push(createCommandLoop(rt, { name: `l${i}`, command: 'true', shell: false, schedule: schedule(i) }));
  })();
  await Promise.all(created);
  return rt;
}

// 1. One pass with nothing due: 100 vs 10,000 loops defined.
const passCost = {};
for (const n of quick ? [100, 2000] : [100, 10_000]) {
  const rt = await withLoops(n, `pass${n}`, () => ({ every: '1h', tz: 'UTC' }));
  const d = new Daemon(rt, { log: quiet });
  const samples = [];
  for (let i = 0; i < 200; i++) {
    const t = performance.now();
    await d.pass();
    samples.push(performance.now() - t);
  }
  passCost[n] = median(samples);
  rt.close();
}
const [small, large] = Object.keys(passCost).map(Number);

// 2. Idle CPU of a running daemon with 10,000 loops, none due during the measurement.
const idleLoops = quick ? 2000 : 10_000;
const idleRt = await withLoops(idleLoops, 'idle', () => ({ every: '1d', tz: 'UTC' }));
const idle = new Daemon(idleRt, { log: quiet });
await idle.start();
await new Promise((r) => setTimeout(r, 1500));
const cpu0 = process.cpuUsage();
const wall0 = performance.now();
await new Promise((r) => setTimeout(r, quick ? 3000 : 10_000));
const cpu = process.cpuUsage(cpu0);
const idlePct = ((cpu.user + cpu.system) / 1000 / (performance.now() - wall0)) * 100;
await idle.stop();
idleRt.close();

// 3. Lateness: 100 loops due in the same second; scheduled instant → process.spawned recorded.
const lateness = {};
for (const concurrency of [4, 16]) {
  const startsAt = new Date(Math.ceil((Date.now() + 3000) / 1000) * 1000).toISOString();
  const rt = await withLoops(100, `late${concurrency}`, () => ({ every: '1h', tz: 'UTC', startsAt }));
  const spawned = [];
  const sub = rt.log.events$.subscribe((e) => {
    if (e.type === 'process.spawned') spawned.push(performance.now() + performance.timeOrigin - Date.parse(startsAt));
  });
  const d = new Daemon(rt, { log: quiet, concurrency, spawner });
  await d.start();
  const deadline = Date.now() + 30_000;
  while (spawned.length < 100 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  sub.unsubscribe();
  await d.stop();
  rt.close();
  lateness[concurrency] = { p50: pct(spawned, 50), p99: pct(spawned, 99), n: spawned.length };
}

for (const d of dirs) rmSync(d, { recursive: true, force: true });
const row = (name, value, goal, ok) => console.log(`${name.padEnd(58)} ${value.padStart(18)}  ${goal.padEnd(22)} ${ok ? 'PASS' : 'MISS'}`);
console.log(`\nloops daemon benchmarks — ${new Date().toISOString()}, node ${process.version}, runs forked ${spawner === "helper" ? "by the spawner helper" : "inline"}\n`);
row(`pass, nothing due: ${small} vs ${large} loops (median)`, `${passCost[small].toFixed(3)} / ${passCost[large].toFixed(3)} ms`, 'independent of loops', passCost[large] < passCost[small] * 3);
row(`idle daemon CPU with ${idleLoops} loops`, `${idlePct.toFixed(2)} % of a core`, '< 1 %', idlePct < 1);
for (const [c, l] of Object.entries(lateness)) {
  row(`lateness, 100 loops due at once, concurrency ${c} (p50 / p99)`, `${l.p50.toFixed(0)} / ${l.p99.toFixed(0)} ms`, 'p99 < 100 ms', l.p99 < 100 && l.n === 100);
}
