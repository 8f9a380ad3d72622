/**
 * The benchmarks still run (issue 14: "CI runs them only in --quick form to prove they still run").
 * Each bench script is started the way `npm run bench:*` starts it, in its quick form with one
 * repetition and `--json`, against the build `npm test` made; the test checks that it ends with exit 0
 * and that its report holds the figures docs/PERFORMANCE.md quotes — never their values (benchmarks
 * measure, tests do not time). A mistyped option exits 2 before anything runs.
 * (bench/soak.mjs has its own test, soak.e2e; --peer needs the predecessor on bun and is not run here.)
 */
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_PG_URL, pgReachable } from '../helpers/pg.js';
import { requirePrerequisite } from '../helpers/prerequisite.js';

const BENCH = resolve(__dirname, '..', '..', 'bench');
const pgVerdict = await pgReachable();
const havePg = requirePrerequisite(`PostgreSQL for bench/fleet-throughput.mjs (LOOPS_TEST_PG_URL, default ${DEFAULT_PG_URL})`, () => pgVerdict);

function bench(script: string, args: string[]): { status: number | null; report: Record<string, unknown>; stderr: string } {
  const r = spawnSync(process.execPath, [resolve(BENCH, script), ...args], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, env: { ...process.env, NO_COLOR: '1' } });
  let report: Record<string, unknown> = {};
  try {
    report = JSON.parse(r.stdout) as Record<string, unknown>;
  } catch {
    // Left empty: the assertions below say what was missing, with stderr.
  }
  return { status: r.status, report, stderr: r.stderr };
}

// Each bench is a hang guard's worth of time, not a timed test: a quick bench takes 1–7 s alone and
// five times that while the rest of the suite loads both cores (replay.mjs took over 30 s in one CI run).
const BENCH_TIMEOUT_MS = 180_000;

describe('benchmarks, quick form', { timeout: BENCH_TIMEOUT_MS }, () => {
  it('bench/run.mjs: append, append CPU (with WAL frames per commit), run and cli figures, each a ratio against its baseline', () => {
    const { status, report, stderr } = bench('run.mjs', ['--quick', '--reps', '1', '--json']);
    expect(status, stderr).toBe(0);
    const results = report.results as Array<{ id: string; ratio?: number; skipped?: string; walFrames?: { loops: number; raw: number; floor: number }; floor?: { ratio: number } }>;
    expect(results.map((r) => r.id)).toEqual(['append', 'appendcpu', 'run', 'cli']);
    for (const r of results) expect(Number.isFinite(r.ratio), `${r.id}: ${r.skipped ?? ''}`).toBe(true);
    const wal = results.find((r) => r.id === 'appendcpu')!.walFrames!;
    expect(wal.loops).toBeGreaterThan(0);
    expect(wal.raw).toBeGreaterThan(0);
    // The floor (loops' statements by hand) writes what loops writes: the same pages per commit.
    expect(Math.abs(wal.floor - wal.loops), JSON.stringify(wal)).toBeLessThan(1);
    expect(Number.isFinite(results.find((r) => r.id === 'appendcpu')!.floor!.ratio)).toBe(true);
  });

  it('bench/cold-start.mjs: run-now and list against bare-stack baselines, and the packages each command loads', () => {
    const { status, report, stderr } = bench('cold-start.mjs', ['--quick', '--reps', '1', '--json']);
    expect(status, stderr).toBe(0);
    const figures = report.figures as Array<{ name: string; ratio: number }>;
    expect(figures).toHaveLength(4);
    for (const f of figures) expect(Number.isFinite(f.ratio), f.name).toBe(true);
    const commands = report.commands as Array<{ command: string; packages: string[] }>;
    expect(commands.find((c) => c.command === 'loops list --json')!.packages).toEqual(['better-sqlite3']);
  });

  it('bench/replay.mjs: replay (cold and warm) against a raw read of the same rows, for a loop stream and a workflow run', () => {
    const { status, report, stderr } = bench('replay.mjs', ['--quick', '--reps', '1', '--json']);
    expect(status, stderr).toBe(0);
    const results = report.results as Array<{ stream: string; events: number; rawEventsPerSec: number; replayEventsPerSec: number; warmReplayEventsPerSec: number }>;
    expect(results.map((r) => r.stream)).toEqual(['loop stream, 10k events', 'loop stream, 100k events', 'workflow run, 100 steps']);
    for (const r of results) {
      expect(r.events, r.stream).toBeGreaterThan(300);
      for (const rate of [r.rawEventsPerSec, r.replayEventsPerSec, r.warmReplayEventsPerSec]) expect(rate, r.stream).toBeGreaterThan(0);
    }
  });

  it('bench/read-growth.mjs: the read commands at three sizes, and projections verify', () => {
    const { status, report, stderr } = bench('read-growth.mjs', ['--quick', '--json']);
    expect(status, stderr).toBe(0);
    const results = report.results as Array<{ runs: number; commands: Record<string, { ms: number }> }>;
    expect(results.map((r) => r.runs)).toEqual([500, 1000, 2000]);
    for (const r of results) expect(Object.keys(r.commands).sort()).toEqual(['list', 'projections verify', 'runs', 'show <loop>', 'stats --since 1d', 'why <loop>']);
  });

  it('bench/bookkeeping.mjs: per-run bookkeeping without a process against plainjob add+claim+complete', () => {
    const { status, report, stderr } = bench('bookkeeping.mjs', ['--quick', '--reps', '1', '--json']);
    expect(status, stderr).toBe(0);
    const r = report as {
      loops?: { runsPerSec: number; cpuUsPerRun: number };
      plainjob?: { jobsPerSec: number; cpuUsPerJob: number };
      floor?: { runsPerSec: number; cpuUsPerRun: number; ratio: number };
      ratio?: number;
      cpuRatio?: number;
    };
    const figures = [r.loops?.runsPerSec, r.loops?.cpuUsPerRun, r.plainjob?.jobsPerSec, r.plainjob?.cpuUsPerJob, r.floor?.runsPerSec, r.floor?.cpuUsPerRun, r.floor?.ratio, r.ratio, r.cpuRatio];
    for (const figure of figures) expect(Number.isFinite(figure), stderr).toBe(true);
  });

  it('bench/daemon.mjs: pass cost, idle CPU, the real daemon\'s idle RSS against a bare node, lateness against bare spawns, CPU per run in a burst, a daemon running a while', () => {
    const { status, report, stderr } = bench('daemon.mjs', ['--quick', '--json']);
    expect(status, stderr).toBe(0);
    const r = report as {
      passCostMs?: { median: number[] };
      idleCpuPct?: { pct: number };
      idleRss?: Record<'early' | 'settled', { daemonMiB: number; helperMiB: number; bareMiB: number; ratio: number }>;
      lateness?: Array<{ concurrency: number; p50: number; p99: number; baseline: { p50: number; p99: number }; helper: { p99: number; p99NoFiles: number }; ratio: number }>;
      burstCpu?: { daemon: number; helper: number; bare: number; ratio: number; complete: boolean };
      steady?: { p99: number; bareP99: number; ratio: number; daemon: number; helper: number; complete: boolean };
    };
    expect(r.passCostMs?.median).toHaveLength(2);
    const figures = [...(r.passCostMs?.median ?? []), r.idleCpuPct?.pct];
    for (const when of ['early', 'settled'] as const) {
      const f = r.idleRss?.[when];
      figures.push(f?.daemonMiB, f?.helperMiB, f?.bareMiB, f?.ratio);
    }
    expect(r.lateness?.map((l) => l.concurrency)).toEqual([4, 16, 100]);
    for (const l of r.lateness ?? []) figures.push(l.p50, l.p99, l.baseline.p50, l.baseline.p99, l.helper.p99, l.helper.p99NoFiles, l.ratio);
    // The spawner helper alone started every spawn it was asked for (its p99 is a time, not a timeout).
    for (const l of r.lateness ?? []) expect(l.helper.p99, stderr).toBeGreaterThan(0);
    // Every slot of the measured bursts was started, and the daemon spent CPU on them.
    expect(r.burstCpu?.complete, stderr).toBe(true);
    expect(r.burstCpu?.daemon, stderr).toBeGreaterThan(0);
    figures.push(r.burstCpu?.daemon, r.burstCpu?.helper, r.burstCpu?.bare, r.burstCpu?.ratio);
    // The bursts of a daemon running a while: every slot started, lateness against warm bare bursts.
    expect(r.steady?.complete, stderr).toBe(true);
    expect(r.steady?.p99, stderr).toBeGreaterThan(0);
    figures.push(r.steady?.p99, r.steady?.bareP99, r.steady?.ratio, r.steady?.daemon, r.steady?.helper);
    for (const figure of figures) expect(Number.isFinite(figure), stderr).toBe(true);
  }); // real daemons, idle windows and timed slots: ~58 s on a quiet machine, more on a loaded one

  it('bench/daemon.mjs: --help prints the usage; a mistyped option exits 2 before anything runs', () => {
    const help = spawnSync(process.execPath, [resolve(BENCH, 'daemon.mjs'), '--help'], { encoding: 'utf8' });
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^usage: node bench\/daemon.mjs/);
    const r = spawnSync(process.execPath, [resolve(BENCH, 'daemon.mjs'), '--quik'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/unknown option --quik[\s\S]*usage/);
  });

  it.skipIf(!havePg)('bench/fleet-throughput.mjs: appends and slot decisions per second with several processes, on PostgreSQL and on SQLite', () => {
    const { status, report, stderr } = bench('fleet-throughput.mjs', ['--quick', '--json']);
    expect(status, stderr).toBe(0);
    const results = report.results as Array<{ store: string; hosts: number; what: string; perSecond: number; perProcess: number[] }>;
    expect(results.map((r) => `${r.store} ${r.hosts} ${r.what}`)).toEqual(
      ['postgres', 'sqlite'].flatMap((store) => [1, 2].flatMap((hosts) => [`${store} ${hosts} appends`, `${store} ${hosts} decisions`])),
    );
    for (const r of results) {
      expect(r.perSecond, `${r.store} ${r.hosts} ${r.what}`).toBeGreaterThan(0);
      expect(r.perProcess).toHaveLength(r.hosts);
    }
  });

  it('a mistyped option exits 2 with the usage, before anything runs', () => {
    for (const script of ['run.mjs', 'cold-start.mjs', 'replay.mjs', 'read-growth.mjs', 'bookkeeping.mjs', 'fleet-throughput.mjs']) {
      const r = spawnSync(process.execPath, [resolve(BENCH, script), '--quik'], { encoding: 'utf8' });
      expect(r.status, script).toBe(2);
      expect(r.stderr, script).toMatch(/unknown option --quik[\s\S]*usage/);
    }
  });
});
