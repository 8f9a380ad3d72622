// Read-side growth benchmark (issue 14): do the read commands cost what their answer needs, or
// what the history holds? Data directories with 1k, 10k and 100k runs (10 loops, a run every 5
// minutes up to now, so `--since 1d` always holds the same 288 runs; 3 slot decisions per run on the
// loops' streams, so 100k runs make ~400k events), written through the runtime's real append path
// (`run.imported` through each run's actor, 1,000 runs per log.batch; decisions through the loop's
// actor, recordAll of 1,000). Then, through the built CLI, medians of --reps cold processes:
//   list --json, runs --json, stats --since 1d --json, show <loop> --json, why <loop> --json (wall ms)
//   runStats --since 1d in a process of its own (the query without the CLI's start-up: median of 21)
//   projections verify (wall ms and peak RSS, from /usr/bin/time, else the process's own maxRSS;
//   one process per size, after the others: it takes a minute at 100k runs)
// Each figure also as a ratio to the 1k data directory's, in the same run.
//   goals: stats --since 1d at 100k runs <= 1.2x at 1k; verify peak RSS <= 120 MiB, flat in events
//   node bench/read-growth.mjs [--quick] [--reps N] [--sizes 1000,10000] [--json] [--root <checkout with dist/>]
// --root measures another checkout's build (e.g. the commit before a change), data written by it.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { checkOptions, machineInfo, makeTempDir, median, minMax, now, removeTempDir } from './lib.mjs';

const args = process.argv.slice(2);

// ── child: a CLI process that reports its own peak RSS (where /usr/bin/time is missing) ─────
if (args[0] === '--rss-child') {
  const [, main, out, ...rest] = args;
  process.argv = [process.argv[0], main, ...rest];
  process.on('exit', () => writeFileSync(out, String(process.resourceUsage().maxRSS)));
  await import(pathToFileURL(main).href);
} else if (args[0] === '--stats-child') {
  // The query alone, in a process of its own: runStats over the last day, the median of 21 calls.
  const [, root, dataDir] = args;
  const { openReader } = await import(pathToFileURL(join(root, 'dist', 'runtime', 'store.js')).href);
  const { runStats } = await import(pathToFileURL(join(root, 'dist', 'runtime', 'admin', 'stats.js')).href);
  const reader = await openReader(dataDir);
  const since = new Date(Date.now() - 86_400_000).toISOString();
  const times = [];
  for (let i = 0; i < 21; i++) {
    const t0 = now();
    runStats(reader.db, { since });
    times.push(now() - t0);
  }
  reader.close();
  process.stdout.write(`${median(times)}\n`);
} else {
  await bench();
}

async function bench() {
  checkOptions(args, { flags: ['--quick', '--json'], valued: ['--reps', '--sizes', '--root'] }, 'usage: node bench/read-growth.mjs [--quick] [--reps N] [--sizes 1000,10000] [--json] [--root <checkout with dist/>]');
  const option = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
  const quick = args.includes('--quick');
  const json = args.includes('--json');
  const reps = Number(option('--reps', quick ? 1 : 3));
  const root = resolve(option('--root', fileURLToPath(new URL('..', import.meta.url))));
  const sizes = option('--sizes', null)?.split(',').map(Number) ?? (quick ? [500, 1_000, 2_000] : [1_000, 10_000, 100_000]);
  const decisionsPerRun = quick ? 1 : 3;
  const log = (line) => process.stderr.write(`${line}\n`);
  const dist = (path) => import(pathToFileURL(join(root, 'dist', path)).href);
  const BIN = join(root, 'dist', 'cli', 'main.js');
  if (!existsSync(BIN)) throw new Error(`no build at ${BIN} (npm run build)`);
  const TIME = existsSync('/usr/bin/time') ? '/usr/bin/time' : null;

  const { openRuntime } = await dist('runtime/runtime.js');
  const { DurableActor } = await dist('runtime/actor.js');
  const { createCommandLoop } = await dist('runtime/loops/commands.js');
  const { currentMachines } = await dist('machines/registry.js');

  const LOOPS = 10;
  const STEP_MS = 5 * 60_000;

  /** A data directory with `n` runs and `decisionsPerRun` slot decisions per run. */
  async function build(n) {
    const dir = makeTempDir(`growth-${n}`);
    const dataDir = join(dir, 'data');
    const runtime = await openRuntime({ dataDir });
    const loops = [];
    for (let i = 0; i < LOOPS; i++) {
      loops.push(await createCommandLoop(runtime, { name: `loop-${i}`, command: 'true', schedule: { manual: true } }));
    }
    const end = Date.now() - 60_000;
    const iso = (ms) => new Date(ms).toISOString();
    for (let from = 0; from < n; from += 1000) {
      await runtime.log.batch(async (batch) => {
        for (let i = from; i < Math.min(n, from + 1000); i++) {
          const loop = loops[i % LOOPS];
          const started = end - (n - 1 - i) * STEP_MS;
          const id = `run_growth${String(i).padStart(8, '0')}`;
          const data = {
            runId: id,
            loopId: loop.id,
            loopName: loop.name,
            slot: iso(started),
            scheduledFor: iso(started),
            attempt: 1,
            trigger: 'schedule',
            target: loop.target,
            status: i % 7 === 0 ? 'failed' : 'succeeded',
            exitCode: i % 7 === 0 ? 1 : 0,
            pid: 1000 + (i % 30000),
            error: null,
            stdout: `run ${i}\n`,
            stderr: '',
            stdoutBytes: 8,
            stderrBytes: 0,
            startedAt: iso(started),
            finishedAt: iso(started + 40 + (i % 50)),
            durationMs: 40 + (i % 50),
            wfRunId: null,
            importedFrom: { tool: 'bench', db: '/dev/null', id: String(i) },
          };
          await DurableActor.create(runtime, `run:${id}`, 'run', currentMachines.run).record('run.imported', data, { batch });
        }
      });
    }
    const perLoop = Math.ceil((n * decisionsPerRun) / LOOPS);
    for (const loop of loops) {
      const actor = await DurableActor.load(runtime, `loop:${loop.id}`);
      const first = end - perLoop * STEP_MS;
      for (let from = 0; from < perLoop; from += 1000) {
        const batch = [];
        for (let i = from; i < Math.min(perLoop, from + 1000); i++) {
          const slot = iso(first + i * STEP_MS);
          batch.push({ type: 'slot.skipped', data: { slot, fireAt: slot, reason: 'overlap', blockedBy: `run_${i}`, nextRunAt: iso(first + (i + 1) * STEP_MS) } });
        }
        await actor.recordAll(batch);
      }
    }
    const events = runtime.db.prepare('SELECT COUNT(*) AS n FROM events').get().n;
    runtime.close();
    return { dir, dataDir, events };
  }

  /** One cold CLI process: wall ms and peak RSS (MiB). */
  function cli(dataDir, argv) {
    const env = { ...process.env, LOOPS_DATA_DIR: dataDir, NO_COLOR: '1' };
    const rssFile = join(dataDir, '..', 'rss');
    const [cmd, cmdArgs] = TIME
      ? [TIME, ['-f', '%M', '-o', rssFile, process.execPath, BIN, ...argv]]
      : [process.execPath, [fileURLToPath(import.meta.url), '--rss-child', BIN, rssFile, ...argv]];
    const start = now();
    const r = spawnSync(cmd, cmdArgs, { env, stdio: ['ignore', 'ignore', 'pipe'], maxBuffer: 1 << 26 });
    const ms = now() - start;
    if (r.status !== 0) throw new Error(`loops ${argv.join(' ')} exited ${r.status}: ${r.stderr}`);
    const kib = Number(readFileSync(rssFile, 'utf8').trim().split('\n').pop());
    return { ms, rssMiB: kib / 1024 };
  }

  const commands = [
    ['list', ['list', '--json']],
    ['runs', ['runs', '--json']],
    ['stats --since 1d', ['stats', '--since', '1d', '--json']],
    ['show <loop>', ['show', 'loop-3', '--json']],
    ['why <loop>', ['why', 'loop-3', '--json']],
    ['projections verify', ['projections', 'verify']],
  ];

  const results = [];
  for (const n of sizes) {
    const t = now();
    const { dir, dataDir, events } = await build(n);
    log(`${n} runs: built ${events} events in ${Math.round(now() - t)} ms`);
    // One warm-up of every command (the page cache; not in --quick), then the repetitions, interleaved.
    if (!quick) for (const [name, argv] of commands) if (name !== 'projections verify') cli(dataDir, argv);
    // verify once per size (a minute at 100k runs; its peak RSS barely moves between runs).
    const samples = new Map(commands.map(([name]) => [name, []]));
    for (let r = 0; r < reps; r++) {
      for (const [name, argv] of commands) if (r === 0 || name !== 'projections verify') samples.get(name).push(cli(dataDir, argv));
    }
    const queryMs = [];
    for (let r = 0; r < reps; r++) {
      const q = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--stats-child', root, dataDir], { encoding: 'utf8' });
      if (q.status !== 0) throw new Error(`stats child: ${q.stderr}`);
      queryMs.push(Number(q.stdout));
    }
    const row = { runs: n, events, statsQueryMs: Math.round(median(queryMs) * 100) / 100, commands: {} };
    for (const [name] of commands) {
      const s = samples.get(name);
      row.commands[name] = { ms: Math.round(median(s.map((x) => x.ms))), msRange: minMax(s.map((x) => Math.round(x.ms))), peakRssMiB: Math.round(median(s.map((x) => x.rssMiB))) };
    }
    results.push(row);
    removeTempDir(dir);
  }

  const base = results[0];
  const ratio = (a, b) => Math.round((a / b) * 100) / 100;
  for (const row of results) {
    for (const [name, c] of Object.entries(row.commands)) {
      c.msRatio = ratio(c.ms, base.commands[name].ms);
      c.rssRatio = ratio(c.peakRssMiB, base.commands[name].peakRssMiB);
    }
  }
  const pad = (s, w) => String(s).padEnd(w);
  log(`\nmedians of ${reps} cold processes (ratio to ${base.runs} runs in the same run)`);
  log(`${pad('command', 20)}${results.map((r) => pad(`${r.runs} runs (${r.events} ev)`, 30)).join('')}`);
  for (const [name] of commands) {
    log(`${pad(name, 20)}${results.map((r) => pad(`${r.commands[name].ms} ms ×${r.commands[name].msRatio}, ${r.commands[name].peakRssMiB} MiB`, 30)).join('')}`);
  }
  log(`${pad('runStats --since 1d', 20)}${results.map((r) => pad(`${r.statsQueryMs} ms ×${ratio(r.statsQueryMs, base.statsQueryMs)} (query, in-process)`, 30)).join('')}`);
  const last = results[results.length - 1];
  const statsRatio = last.commands['stats --since 1d'].msRatio;
  const verifyRss = last.commands['projections verify'].peakRssMiB;
  log(`\nstats --since 1d at ${last.runs} runs: ×${statsRatio} of ${base.runs} (goal <= 1.2); projections verify peak ${verifyRss} MiB at ${last.events} events (goal <= 120)`);
  if (json) {
    const report = { when: new Date().toISOString(), reps, root, sizes, decisionsPerRun, machine: machineInfo(), results };
    process.stdout.write(JSON.stringify(report, null, 2) + '\n');
  }
}
