#!/usr/bin/env node
// The loops benchmark harness. Every figure is a RATIO against a baseline measured in the same
// run, interleaved with it, as the median of several repetitions — so a noisy shared machine
// moves both sides together. Imports the BUILT code (../dist); `npm run bench` builds first.
//
//   node bench/run.mjs [--quick] [--reps N] [--only append,run,cli] [--json] [--breakdown] [--strict]
//
// See docs/PERFORMANCE.md for what each benchmark measures.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { cpuPhrase, cpuSince, fmt, machineInfo, makeTempDir, median, minMax, now, removeTempDir, table, walStats } from './lib.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIST = join(ROOT, 'dist', 'index.js');
// LOOPS_BENCH_CLI points (c) at another entry point, e.g. a bundled CLI.
const CLI = process.env.LOOPS_BENCH_CLI ? resolve(process.env.LOOPS_BENCH_CLI) : join(ROOT, 'dist', 'cli', 'main.js');

// ── options ──────────────────────────────────────────────────────────────────────────────────
const USAGE = `usage: node bench/run.mjs [options]      (npm run bench -- [options])

  --quick           fewer repetitions and smaller batches (also LOOPS_BENCH_QUICK=1)
  --reps N          repetitions per benchmark (also LOOPS_BENCH_REPS=N; default 11, quick 3)
  --only LIST       comma-separated subset of: append, appendcpu, run, cli
  --json            print one JSON document on stdout (progress goes to stderr)
  --breakdown       after the table, measure where the time goes (ablations, WAL frames,
                    statement counts); adds ~10-20 s
  --strict          exit 1 when a ratio misses its goal
  --peer            then the cold-start bench with the predecessor beside loops (bench/cold-start.mjs
                    --peer: @hasna/loops 0.3.1 through ../shared/anchors/seed.sh, same commands, same run)

  LOOPS_BENCH_CLI=path   benchmark another CLI entry point in (c) (default dist/cli/main.js)
  -h, --help        this text`;

function parseArgs(argv) {
  const opts = {
    quick: process.env.LOOPS_BENCH_QUICK === '1' || process.env.LOOPS_BENCH_QUICK === 'true',
    reps: process.env.LOOPS_BENCH_REPS ? Number(process.env.LOOPS_BENCH_REPS) : null,
    only: null,
    json: false,
    breakdown: false,
    strict: false,
    peer: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const v = arg.includes('=') ? arg.slice(arg.indexOf('=') + 1) : argv[++i];
      if (v === undefined) usageError(`${arg} needs a value`);
      return v;
    };
    if (arg === '--quick') opts.quick = true;
    else if (arg === '--json') opts.json = true;
    else if (arg === '--breakdown') opts.breakdown = true;
    else if (arg === '--strict') opts.strict = true;
    else if (arg === '--peer') opts.peer = true;
    else if (arg === '--reps' || arg.startsWith('--reps=')) opts.reps = Number(value());
    else if (arg === '--only' || arg.startsWith('--only=')) opts.only = value().split(',').map((s) => s.trim());
    else if (arg === '-h' || arg === '--help') {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    } else usageError(`unknown option ${arg}`);
  }
  if (opts.reps !== null && (!Number.isInteger(opts.reps) || opts.reps < 1)) usageError('--reps must be a positive integer');
  for (const id of opts.only ?? []) {
    if (!['append', 'appendcpu', 'run', 'cli'].includes(id)) usageError(`--only: unknown benchmark ${id} (append, appendcpu, run, cli)`);
  }
  return opts;
}

function usageError(message) {
  process.stderr.write(`bench: ${message}\n\n${USAGE}\n`);
  process.exit(2);
}

const opts = parseArgs(process.argv.slice(2));
const cfg = {
  reps: opts.reps ?? (opts.quick ? 3 : 11),
  // (a) events appended per repetition, per side
  appendBatch: opts.quick ? 150 : 400,
  appendChunk: 25,
  // (b) runs per repetition, per side (a block per side, the order alternated: see benchRun)
  runsPerRep: opts.quick ? 6 : 12,
  runWarmup: opts.quick ? 8 : 25,
  // (c) process starts per repetition, per side (interleaved)
  startsPerRep: opts.quick ? 2 : 4,
  cliLoops: 100,
};

const progress = (message) => process.stderr.write(`${message}\n`);

// ── load the built code ──────────────────────────────────────────────────────────────────────
if (!existsSync(DIST)) {
  process.stderr.write('bench: dist/index.js not found; run `npm run build` first (or `npm run bench`)\n');
  process.exit(1);
}
const L = await import(pathToFileURL(DIST).href);
const { default: Database } = await import('better-sqlite3');
const { execa } = await import('execa');

/**
 * Exactly what `loops pause` / `loops resume` append (minus the machine step, which is not part of
 * the log): one event per append, one append per transaction, projections inline — through the
 * store's asynchronous interface, as the runtime appends. `state` follows the stream.
 */
async function pauseResume(rt, streamId) {
  const state = { version: (await rt.log.streamInfo(streamId)).version, paused: false };
  const appendOne = async () => {
    const event = state.paused
      ? { type: 'loop.resumed', data: { reason: null, nextRunAt: null }, state: 'active' }
      : { type: 'loop.paused', data: { reason: null }, state: 'paused' };
    state.version = (await rt.log.append(streamId, [{ ...event, at: L.isoNow(rt.clock), meta: { runnerId: rt.runnerId } }], { expectedVersion: state.version })).version;
    state.paused = !state.paused;
  };
  return { appendOne, state };
}

// ── (a) event appends with projections vs raw single-row inserts ─────────────────────────────
async function benchAppend() {
  const dir = makeTempDir('append');
  const rt = await L.openRuntime({ dataDir: dir });
  let raw;
  try {
    const journal = rt.db.pragma('journal_mode', { simple: true });
    const synchronous = rt.db.pragma('synchronous', { simple: true }); // 2 = FULL
    const loop = await L.createCommandLoop(rt, {
      name: 'bench-append',
      command: 'true',
      shell: false,
      schedule: { manual: true },
    });
    const streamId = `loop:${loop.id}`;
    const { appendOne, state } = await pauseResume(rt, streamId);

    // Warm up, then size the raw payload like the stored rows (all text columns of the event).
    for (let i = 0; i < 50; i++) await appendOne();
    const { bytes } = rt.db
      .prepare(
        `SELECT AVG(length(stream_id) + length(type) + length(data) + length(meta) + length(at) + COALESCE(length(state), 0)) AS bytes
         FROM events WHERE stream_id = ?`,
      )
      .get(streamId);
    const payloadBytes = Math.round(bytes);
    const payload = 'x'.repeat(payloadBytes);

    raw = new Database(join(dir, 'raw.db'));
    raw.pragma(`journal_mode = ${journal}`);
    raw.pragma(`synchronous = ${synchronous}`);
    raw.exec('CREATE TABLE raw_events (id INTEGER PRIMARY KEY, payload TEXT NOT NULL)');
    const insert = raw.prepare('INSERT INTO raw_events (payload) VALUES (?)');
    const rawOne = () => insert.run(payload); // autocommit: one row per transaction
    for (let i = 0; i < 50; i++) rawOne();
    if (raw.pragma('synchronous', { simple: true }) !== synchronous) throw new Error('raw database synchronous mismatch');

    // One repetition = appendBatch operations per side, alternated in chunks of appendChunk so
    // that both sides sample the same moments of a disk whose fsync latency drifts.
    const loops = [];
    const base = [];
    for (let r = 0; r < cfg.reps; r++) {
      let tLoops = 0;
      let tBase = 0;
      for (let done = 0; done < cfg.appendBatch; done += cfg.appendChunk) {
        const n = Math.min(cfg.appendChunk, cfg.appendBatch - done);
        const first = (r + done / cfg.appendChunk) % 2 === 0;
        for (const side of first ? ['loops', 'base'] : ['base', 'loops']) {
          const fn = side === 'loops' ? appendOne : rawOne;
          const t0 = now();
          // Both sides awaited (the raw insert's await costs a microtask), as a caller of either would.
          for (let i = 0; i < n; i++) await fn();
          if (side === 'loops') tLoops += now() - t0;
          else tBase += now() - t0;
        }
      }
      loops.push((cfg.appendBatch / tLoops) * 1000);
      base.push((cfg.appendBatch / tBase) * 1000);
    }
    // Sanity: every append landed, and the projection followed the stream.
    const status = L.findLoop(rt.db, loop.id).status;
    if ((await rt.log.streamInfo(streamId)).version !== state.version || status !== (state.paused ? 'paused' : 'active')) {
      throw new Error(`append benchmark: log/projection out of step (version ${state.version}, loop ${status})`);
    }
    return result({
      id: 'append',
      name: '(a) event append + projections',
      unit: 'events/s',
      higherIsBetter: true,
      goal: { op: '>=', value: 0.7 },
      loops,
      base,
      detail: `${cfg.appendBatch} appends/rep/side, alternating in chunks of ${cfg.appendChunk}; ${payloadBytes} B payload; journal=${journal}, synchronous=${synchronousName(synchronous)}; baseline: raw better-sqlite3 INSERT, 1 row/tx`,
    });
  } finally {
    raw?.close();
    rt.close();
    removeTempDir(dir);
  }
}

// ── (a2) CPU per append at synchronous=OFF, and WAL frames per append commit ────────────────────
// What loops adds to an append in CPU once the disk is out of the picture (no fsync on either side):
// the same appends as (a), the same raw insert, both databases at synchronous=OFF; CPU time
// (user + system) of the process per operation, alternated in chunks. Then the WAL frames one
// append's commit writes (loops and raw), counted from the WAL file with checkpoints held off.
async function benchAppendCpu() {
  const dir = makeTempDir('appendcpu');
  const rt = await L.openRuntime({ dataDir: dir });
  let raw;
  let floorOne;
  try {
    rt.db.pragma('synchronous = OFF');
    const loop = await L.createCommandLoop(rt, { name: 'bench-append-cpu', command: 'true', shell: false, schedule: { manual: true } });
    const streamId = `loop:${loop.id}`;
    const { appendOne } = await pauseResume(rt, streamId);
    raw = new Database(join(dir, 'raw.db'));
    raw.pragma('journal_mode = WAL');
    raw.pragma('synchronous = OFF');
    raw.exec('CREATE TABLE raw_events (id INTEGER PRIMARY KEY, payload TEXT NOT NULL)');
    const insert = raw.prepare('INSERT INTO raw_events (payload) VALUES (?)');
    for (let i = 0; i < 50; i++) await appendOne();
    const { bytes } = rt.db.prepare('SELECT AVG(length(stream_id) + length(type) + length(data) + length(meta) + length(at) + COALESCE(length(state), 0)) AS bytes FROM events WHERE stream_id = ?').get(streamId);
    const payload = 'x'.repeat(Math.round(bytes));
    const rawOne = async () => void insert.run(payload);
    floorOne = floorAppender(dir, rt.db, streamId);
    for (let i = 0; i < 200; i++) {
      await appendOne();
      await rawOne();
      await floorOne.appendOne();
    }
    const perRep = cfg.appendBatch * 4;
    const loops = [];
    const base = [];
    const floor = [];
    const sides = { loops: appendOne, base: rawOne, floor: floorOne.appendOne };
    const names = Object.keys(sides);
    for (let r = 0; r < cfg.reps; r++) {
      const cpu = { loops: 0, base: 0, floor: 0 };
      for (let done = 0; done < perRep; done += 100) {
        // Each side in each position in turn (a rotation per chunk and repetition).
        const k = r + done / 100;
        for (const side of names.map((_, i) => names[(i + k) % names.length])) {
          const fn = sides[side];
          const c0 = process.cpuUsage();
          for (let i = 0; i < 100; i++) await fn();
          const c = process.cpuUsage(c0);
          cpu[side] += c.user + c.system;
        }
      }
      loops.push(cpu.loops / perRep);
      base.push(cpu.base / perRep);
      floor.push(cpu.floor / perRep);
    }
    const frames = async (db, file, fn) => {
      const pageSize = db.pragma('page_size', { simple: true });
      const auto = db.pragma('wal_autocheckpoint', { simple: true });
      db.pragma('wal_autocheckpoint = 0');
      db.pragma('wal_checkpoint(TRUNCATE)');
      const n = 200;
      for (let i = 0; i < n; i++) await fn();
      const stats = walStats(file, pageSize);
      db.pragma(`wal_autocheckpoint = ${auto}`);
      return { frames: stats.frames / n, commits: stats.commits / n };
    };
    const walLoops = await frames(rt.db, join(dir, 'loops.db-wal'), appendOne);
    const walRaw = await frames(raw, join(dir, 'raw.db-wal'), rawOne);
    const walFloor = await frames(floorOne.db, join(dir, 'floor', 'loops.db-wal'), floorOne.appendOne);
    const floorCpu = median(floor);
    return {
      ...result({
        id: 'appendcpu',
        name: '(a2) CPU per append, synchronous=OFF',
        unit: 'µs',
        higherIsBetter: false,
        goal: { op: '<=', value: 2.5 },
        loops,
        base,
        detail:
          `${perRep} appends/rep/side, CPU (user + system) per op, alternating in chunks of 100; all databases synchronous=OFF; WAL frames per append commit: loops ${walLoops.frames.toFixed(2)}, raw ${walRaw.frames.toFixed(2)} (goal <= 3)\n` +
          `    floor, the same statements by hand with no loops code (the stream's version moved, the event, the loop's row): ${fmt(floorCpu, 'µs')} = ${(floorCpu / median(base)).toFixed(2)}x raw, ${walFloor.frames.toFixed(2)} WAL frames — the ratio loops would have if its code cost nothing`,
      }),
      walFrames: { loops: walLoops.frames, raw: walRaw.frames, floor: walFloor.frames, goal: 3 },
      floor: { median: floorCpu, samples: floor, ratio: floorCpu / median(base) },
    };
  } finally {
    raw?.close();
    floorOne?.db.close();
    rt.close();
    removeTempDir(dir);
  }
}

/**
 * (a2)'s floor: what loops' SQL for one pause or resume costs with no loops code. A database of the
 * same schema and settings (made by openRuntime, then opened bare) holding a copy of the bench loop's
 * row and stream; each append is one transaction with the statements loops runs for it — the
 * stream's version moved from the one expected (the compare-and-set), the event inserted with the bench's
 * own rows' data, the loop's row updated as the projection does.
 */
function floorAppender(dir, source, streamId) {
  const floorDir = join(dir, 'floor');
  mkdirSync(floorDir);
  // The schema: the runtime's own, as its database holds it.
  const schemaDb = source.prepare("SELECT group_concat(sql, ';\n') AS ddl FROM sqlite_schema WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'").get().ddl;
  const db = new Database(join(floorDir, 'loops.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = OFF');
  db.exec(schemaDb);
  const loopId = streamId.slice('loop:'.length);
  const copy = (table, where, value) => {
    const row = source.prepare(`SELECT * FROM ${table} WHERE ${where} = ?`).get(value);
    const cols = Object.keys(row);
    db.prepare(`INSERT INTO ${table} (${cols.join(', ')}) VALUES (${cols.map(() => '?').join(', ')})`).run(...cols.map((c) => row[c]));
  };
  copy('loops', 'id', loopId);
  copy('streams', 'stream_id', streamId);
  const template = (type) => source.prepare('SELECT * FROM events WHERE stream_id = ? AND type = ? ORDER BY version DESC LIMIT 1').get(streamId, type);
  const events = [template('loop.paused'), template('loop.resumed')];
  const readStream = db.prepare('SELECT * FROM streams WHERE stream_id = ?');
  const move = db.prepare('UPDATE streams SET version = ?, updated_at = ? WHERE stream_id = ? AND version = ?');
  const insert = db.prepare('INSERT INTO events (position, stream_id, version, type, v, data, meta, at, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)');
  const project = db.prepare('UPDATE loops SET status = ?, reason = ?, next_run_at = ?, updated_at = ? WHERE id = ?');
  const begin = db.prepare('BEGIN IMMEDIATE');
  const commit = db.prepare('COMMIT');
  let n = 0;
  // Like the log, the appender knows the version it expects; the compare is the update itself.
  let version = readStream.get(streamId).version;
  const appendOne = async () => {
    const e = events[n++ % 2];
    const at = new Date().toISOString();
    begin.run();
    try {
      if (move.run(version + 1, at, streamId, version).changes !== 1) throw new Error('floor: stale version');
      version += 1;
      insert.run(null, streamId, version, e.type, e.v, e.data, e.meta, at, e.state);
      project.run(e.type === 'loop.paused' ? 'paused' : 'active', null, null, at, loopId);
      commit.run();
    } catch (error) {
      if (db.inTransaction) db.exec('ROLLBACK');
      throw error;
    }
  };
  return { db, appendOne };
}

function synchronousName(value) {
  return ['OFF', 'NORMAL', 'FULL', 'EXTRA'][value] ?? String(value);
}

// ── (b) an in-process run of `true` vs a raw execa spawn of `true` ───────────────────────────
async function benchRun() {
  const dir = makeTempDir('run');
  const rt = await L.openRuntime({ dataDir: dir });
  try {
    const loop = await L.createCommandLoop(rt, {
      name: 'bench-true',
      command: 'true',
      shell: false,
      schedule: { manual: true },
    });
    const loopsRun = async () => {
      const t0 = now();
      const run = await L.runNow(rt, loop.id);
      const dt = now() - t0;
      if (run.status !== 'succeeded') throw new Error(`run ${run.id} ended ${run.status}: ${run.error ?? ''}`);
      return dt;
    };
    const rawRun = async () => {
      const t0 = now();
      const res = await execa('true', [], { reject: false });
      const dt = now() - t0;
      if (res.exitCode !== 0) throw new Error(`execa true exited ${res.exitCode}`);
      return dt;
    };
    // The first runs pay for JIT compilation and lazy module work; measure the steady state.
    for (let i = 0; i < cfg.runWarmup; i++) {
      await loopsRun();
      await rawRun();
    }
    const loops = [];
    const base = [];
    for (let r = 0; r < cfg.reps; r++) {
      const a = [];
      const b = [];
      // Each side in a block of its own, the order alternated between repetitions — not run by run.
      // A fork write-protects every page of the process that forks until it writes it again, so a
      // baseline `execa` right before a run-now made that run take a copy-on-write fault for each
      // page it wrote: ~165 faults, +3 ms of CPU and +4 ms per run on a paravirtualised host
      // (2026-12-03), charged to loops by the baseline. Through the spawner helper, loops forks
      // nothing here; within a block only the first run after the other side pays that, once.
      const sides = r % 2 === 0 ? [[a, loopsRun], [b, rawRun]] : [[b, rawRun], [a, loopsRun]];
      for (const [into, one] of sides) for (let i = 0; i < cfg.runsPerRep; i++) into.push(await one());
      loops.push(median(a));
      base.push(median(b));
    }
    return result({
      id: 'run',
      name: '(b) run-now of `true` (in-process)',
      unit: 'ms',
      higherIsBetter: false,
      goal: { op: '<=', value: 1.5 },
      loops,
      base,
      detail: `${cfg.runsPerRep} runs/rep after ${cfg.runWarmup} warm-up runs; runNow(createCommandLoop{command:'true', shell:false}); baseline: await execa('true')`,
    });
  } finally {
    rt.close();
    removeTempDir(dir);
  }
}

// ── (c) cold start of `loops list --json` vs `node -e 0` ─────────────────────────────────────
async function benchCli() {
  if (!existsSync(CLI)) {
    return { id: 'cli', name: '(c) cold start `loops list --json`', skipped: `${relative(ROOT, CLI)} not built` };
  }
  const dir = makeTempDir('cli');
  try {
    const rt = await L.openRuntime({ dataDir: dir });
    try {
      for (let i = 0; i < cfg.cliLoops; i++) {
        const schedule =
          i % 3 === 0 ? { every: '15m' } : i % 3 === 1 ? { cron: '0 3 * * *', tz: 'UTC' } : { manual: true };
        await L.createCommandLoop(rt, { name: `bench-loop-${i}`, command: 'echo hello', schedule });
      }
    } finally {
      rt.close();
    }
    const env = { ...process.env, LOOPS_DATA_DIR: dir, NO_COLOR: '1' };
    delete env.LOOPS_DEBUG;
    const spawnTimed = (args, extraEnv) => {
      const t0 = now();
      const res = spawnSync(process.execPath, args, {
        env: extraEnv ?? process.env,
        encoding: 'utf8',
        maxBuffer: 64 * 1024 * 1024,
      });
      const dt = now() - t0;
      return { dt, res };
    };
    const cliStart = () => {
      const { dt, res } = spawnTimed([CLI, 'list', '--json'], env);
      if (res.status !== 0) {
        const firstLine = (res.stderr || res.error?.message || '').trim().split('\n')[0];
        throw Object.assign(new Error(`loops list --json exited ${res.status}: ${firstLine}`), { benchSkip: true });
      }
      return { dt, stdout: res.stdout };
    };
    const nodeStart = () => spawnTimed(['-e', '0']).dt;

    // Sanity check the output once (also warms the page cache for both sides).
    const first = cliStart();
    let listed = null;
    try {
      const parsed = JSON.parse(first.stdout);
      listed = Array.isArray(parsed) ? parsed.length : (parsed.loops?.length ?? parsed.items?.length ?? null);
    } catch {
      throw Object.assign(new Error('loops list --json did not print valid JSON'), { benchSkip: true });
    }
    nodeStart();

    const loops = [];
    const base = [];
    for (let r = 0; r < cfg.reps; r++) {
      const a = [];
      const b = [];
      for (let i = 0; i < cfg.startsPerRep; i++) {
        if ((r + i) % 2 === 0) {
          a.push(cliStart().dt);
          b.push(nodeStart());
        } else {
          b.push(nodeStart());
          a.push(cliStart().dt);
        }
      }
      loops.push(median(a));
      base.push(median(b));
    }
    return result({
      id: 'cli',
      name: '(c) cold start `loops list --json`',
      unit: 'ms',
      higherIsBetter: false,
      goal: { op: '<=', value: 2.5 },
      loops,
      base,
      detail: `${cfg.startsPerRep} starts/rep; ${cfg.cliLoops} loops in LOOPS_DATA_DIR (listed: ${listed ?? '?'}${listed === cfg.cliLoops ? '' : ', expected ' + cfg.cliLoops}); baseline: node -e 0`,
    });
  } catch (error) {
    if (error.benchSkip) return { id: 'cli', name: '(c) cold start `loops list --json`', skipped: error.message };
    throw error;
  } finally {
    removeTempDir(dir);
  }
}

// ── results ──────────────────────────────────────────────────────────────────────────────────
function result({ id, name, unit, higherIsBetter, goal, loops, base, detail }) {
  const loopsMedian = median(loops);
  const baseMedian = median(base);
  const ratio = loopsMedian / baseMedian;
  const paired = loops.map((v, i) => v / base[i]);
  const pass = goal.op === '>=' ? ratio >= goal.value : ratio <= goal.value;
  // The absolute extra cost per operation, which reads better than the ratio when the baseline
  // itself moved (e.g. the disk's fsync latency changed between runs).
  const overhead =
    unit === 'events/s'
      ? { value: (1e6 / loopsMedian - 1e6 / baseMedian), unit: 'µs/event' }
      : { value: loopsMedian - baseMedian, unit: `${unit}/op` };
  return {
    id,
    name,
    unit,
    higherIsBetter,
    loops: { median: loopsMedian, samples: loops },
    baseline: { median: baseMedian, samples: base },
    ratio,
    pairedRatio: { median: median(paired), range: minMax(paired) },
    goal,
    status: pass ? 'PASS' : 'MISS',
    overhead,
    detail,
  };
}

const benches = { append: benchAppend, appendcpu: benchAppendCpu, run: benchRun, cli: benchCli };
const selected = opts.only ?? Object.keys(benches);
const machine = machineInfo();
{
  const db = new Database(':memory:');
  machine.sqlite = db.prepare('SELECT sqlite_version() AS v').get().v;
  db.close();
}

const started = now();
const results = [];
for (const id of selected) {
  progress(`bench: ${id} …`);
  results.push(await benches[id]());
}
machine.loadavgAfter = machineInfo().loadavg;
machine.cpu = cpuSince(machine);
const cpuNote = cpuPhrase(machine);
const elapsedS = (now() - started) / 1000;

const report = {
  date: new Date().toISOString(),
  machine,
  config: { ...cfg, quick: opts.quick },
  elapsedSeconds: Math.round(elapsedS * 10) / 10,
  results,
};

if (!opts.json) process.stdout.write(`${renderTable(report)}\n`);
if (opts.breakdown) {
  const { runBreakdown } = await import('./breakdown.mjs');
  report.breakdown = await runBreakdown({ L, Database, execa, quick: opts.quick, progress, print: !opts.json });
}
if (opts.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);

function renderTable(report) {
  const m = report.machine;
  const out = [];
  out.push('');
  out.push(`loops benchmarks — ${report.date}`);
  out.push(
    `node ${m.node} (V8 ${m.v8}), SQLite ${m.sqlite}, ${m.platform}, ${m.cpus} × ${m.cpuModel}, ${m.memoryGiB} GiB`,
  );
  out.push(
    `load average ${m.loadavg.join(' ')} → ${m.loadavgAfter.join(' ')}${cpuNote}; ${cfg.reps} repetitions${opts.quick ? ' (quick)' : ''}; medians; ${report.elapsedSeconds} s`,
  );
  out.push('');
  const rows = report.results.map((r) =>
    r.skipped
      ? [r.name, '-', '-', '-', '-', `skipped: ${r.skipped}`, '']
      : [
          r.name,
          fmt(r.loops.median, r.unit),
          fmt(r.baseline.median, r.unit),
          r.ratio.toFixed(2),
          `${r.goal.op} ${r.goal.value}`,
          r.status,
          `${r.pairedRatio.range[0].toFixed(2)}–${r.pairedRatio.range[1].toFixed(2)}`,
        ],
  );
  out.push(
    table(['benchmark', 'loops', 'baseline', 'ratio', 'goal', 'result', 'per-rep ratio'], rows, ['', 'r', 'r', 'r', '', '', 'r']),
  );
  out.push('');
  for (const r of report.results) {
    if (r.skipped) continue;
    const extra =
      r.overhead.unit === 'µs/event' ? `${r.overhead.value.toFixed(0)} µs per event` : r.unit === 'µs' ? `${r.overhead.value.toFixed(1)} µs of CPU per append` : `${r.overhead.value.toFixed(2)} ms per ${r.id === 'cli' ? 'start' : 'run'}`;
    out.push(`${r.name}: loops costs ${r.overhead.value >= 0 ? '+' : ''}${extra} over the baseline`);
    out.push(`    ${r.detail}`);
  }
  out.push('ratio = loops median / baseline median (a: throughput, higher is better; a2: CPU, b, c: time, lower is better)');
  const missed = report.results.filter((r) => r.status === 'MISS');
  if (missed.length > 0 && !opts.breakdown) {
    out.push(`missed: ${missed.map((r) => r.id).join(', ')} — \`node bench/run.mjs --breakdown\` shows where the time goes`);
  }
  return out.join('\n');
}

if (opts.strict && results.some((r) => r.status === 'MISS')) process.exitCode = 1;

// --peer: the predecessor beside loops, on the commands users type (one mechanism: bench/cold-start.mjs).
if (opts.peer) {
  const peer = spawnSync(process.execPath, [join(ROOT, 'bench', 'cold-start.mjs'), '--peer', ...(opts.quick ? ['--quick'] : []), ...(opts.json ? ['--json'] : [])], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (peer.status !== 0) process.exitCode = peer.status ?? 1;
}
