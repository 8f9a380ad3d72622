#!/usr/bin/env node
// Per-run bookkeeping without a process (issue 14): what loops records for one run against what a
// plain SQLite job queue records for one job, at the same durability, in the same run.
//
//   loops     runNow(runtime, loop) of a manual command loop through the real runtime — the run
//             actor and its three commits: claim (lease + run.claimed + process.spawn_requested),
//             process.spawned, process.exited (lease released with it) — then the run read back.
//             The process is an immediate fake: the runtime's spawner (the seam through which a
//             runner starts processes without forking them itself, runtime.spawner) is one that
//             answers at once with a pid whose group does not exist and an exit code of 0, so
//             nothing is forked and the run's end follows at once.
//   plainjob  plainjob (npm, a SQLite job queue for better-sqlite3), what its worker does per job:
//             queue.add, queue.getAndMarkJobAsProcessing (BEGIN IMMEDIATE), queue.getJobById,
//             await the processor (an immediate no-op), queue.markJobAsDone — three commits too.
//   floor     the writes loops makes for one run, by hand, with no loops code: the rows of a run loops
//             recorded, copied under new ids into a database of the same schema and settings, in
//             the same three transactions — claim (stream row, run.claimed and process.spawn_requested,
//             the loop_runs row, the lease), spawned (the stream's version moved from the one expected, the event,
//             the run's row), exited (the same, and the lease released). What the design's own SQL
//             costs: the ratio loops could reach if its code cost nothing.
//   All: WAL, the loops log's own `synchronous` (FULL) — plainjob sets NORMAL itself, so it is set
//   back to the loops value after defineQueue — two databases in the same directory. Interleaved
//   in chunks, the order alternated between repetitions; per repetition runs/s and CPU per run
//   (process.cpuUsage, user + system, of this single-threaded process); medians over repetitions.
//   goal: loops >= 0.5x plainjob's rate.
//
//   node bench/bookkeeping.mjs [--quick] [--reps N] [--json]      (npm run bench:bookkeeping)
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { checkOptions, cpuPhrase, cpuSince, machineInfo, makeTempDir, median, minMax, now, removeTempDir, table } from './lib.mjs';

const USAGE = `usage: node bench/bookkeeping.mjs [options]      (npm run bench:bookkeeping -- [options])

  --quick    3 repetitions of smaller chunks (a smoke test, not a figure)
  --reps N   repetitions (default 11, quick 3)
  --json     one JSON document on stdout (progress goes to stderr)
  -h, --help this text`;

const args = process.argv.slice(2);
checkOptions(args, { flags: ['--quick', '--json'], valued: ['--reps'] }, USAGE);
const quick = args.includes('--quick');
const json = args.includes('--json');
const repsArg = args.indexOf('--reps');
const reps = repsArg >= 0 ? Number(args[repsArg + 1]) : quick ? 3 : 11;
if (!Number.isInteger(reps) || reps < 1) {
  process.stderr.write(`bench: --reps must be a positive integer\n${USAGE}\n`);
  process.exit(2);
}
const chunk = quick ? 20 : 50;
const chunksPerRep = quick ? 2 : 4;
const warmup = quick ? 30 : 200;
const progress = (msg) => process.stderr.write(`${msg}\n`);

const L = await import('../dist/index.js');
const { default: Database } = await import('better-sqlite3');
let plainjob;
try {
  plainjob = await import('plainjob');
} catch (error) {
  process.stderr.write(`bench: plainjob is not installed (npm install --save-dev plainjob): ${error.message}\n`);
  process.exit(1);
}

/** A pid no process (and so no process group) can have: above the largest pid_max Linux allows. */
const NO_SUCH_PID = 2 ** 22 + 1;

/**
 * The runtime's spawner seam with an immediate fake behind it: it honours the helper's contract for
 * the files (makes the run's directories it is asked to, like spawner-process.js, and leaves the
 * output files to the runner, which opens them), forks nothing, and reports an exit of 0 at once.
 */
function immediateSpawner() {
  return {
    unavailableReason: null,
    use: 'always',
    pid: null,
    spawned: 0,
    wanted: () => true,
    warm() {},
    ready: () => Promise.resolve(),
    close() {},
    spawn(request) {
      this.spawned += 1;
      for (const dir of request.dirs ?? []) mkdirSync(dir, { recursive: true, mode: 0o700 });
      return Promise.resolve({ pid: NO_SUCH_PID, startTime: null, exit: Promise.resolve({ code: 0, signal: null, lost: false }) });
    },
  };
}
const info = machineInfo();
const dir = makeTempDir('bookkeeping');
const rt = await L.openRuntime({ dataDir: dir });
const synchronous = rt.db.pragma('synchronous', { simple: true });
const journal = rt.db.pragma('journal_mode', { simple: true });
info.sqlite = rt.db.prepare('select sqlite_version() as v').get().v;
const spawner = immediateSpawner();
rt.spawner = spawner;

const pjDb = new Database(join(dir, 'plainjob.db'));
const queue = plainjob.defineQueue({ connection: plainjob.better(pjDb), logger: { debug() {}, info() {}, warn() {}, error() {} } });
// plainjob sets synchronous=NORMAL itself: the baseline gets the loops log's durability instead.
pjDb.pragma(`synchronous = ${synchronous}`);
const pjSettings = { synchronous: pjDb.pragma('synchronous', { simple: true }), journal: pjDb.pragma('journal_mode', { simple: true }) };
if (pjSettings.synchronous !== synchronous || pjSettings.journal !== journal) {
  throw new Error(`settings differ: loops ${journal}/${synchronous}, plainjob ${pjSettings.journal}/${pjSettings.synchronous}`);
}

// The floor's database: the same schema (made by openRuntime), opened bare with the log's settings.
const floorDir = join(dir, 'floor');
mkdirSync(floorDir);
(await L.openRuntime({ dataDir: floorDir })).close();
const floorDb = new Database(join(floorDir, 'loops.db'));
floorDb.pragma(`journal_mode = ${journal}`);
floorDb.pragma(`synchronous = ${synchronous}`);

const loop = await L.createCommandLoop(rt, { name: 'bench-bookkeeping', command: 'true', shell: false, schedule: { manual: true } });
let loopsRuns = 0;
const loopsOne = async () => {
  const run = await L.runNow(rt, loop.id);
  if (run.status !== 'succeeded') throw new Error(`run ${run.id} ended ${run.status}: ${run.error ?? ''}`);
  loopsRuns += 1;
};
const processor = async () => undefined;
let jobsDone = 0;
const plainjobOne = async () => {
  queue.add('bench', { n: jobsDone });
  const claimed = queue.getAndMarkJobAsProcessing('bench');
  if (!claimed) throw new Error('plainjob: nothing to claim');
  const job = queue.getJobById(claimed.id);
  await processor({ id: job.id, data: job.data, type: job.type });
  queue.markJobAsDone(job.id);
  jobsDone += 1;
};

/**
 * The floor's statements, with the rows of the last run loops recorded as templates (made after
 * the warm-up, so they are the rows of a run like the ones measured).
 */
function floorRunner() {
  const last = rt.db.prepare("SELECT stream_id FROM events WHERE type = 'run.claimed' ORDER BY position DESC LIMIT 1").get().stream_id;
  const events = rt.db.prepare('SELECT * FROM events WHERE stream_id = ? ORDER BY version').all(last);
  const row = rt.db.prepare('SELECT * FROM loop_runs WHERE id = ?').get(last.slice('run:'.length));
  if (events.length !== 4 || !row) throw new Error(`the template run ${last} has ${events.length} events`);
  const s = {
    stream: floorDb.prepare("INSERT INTO streams (stream_id, kind, version, machine_id, machine_version, created_at, updated_at) VALUES (?, 'run', ?, 'loops.run', 1, ?, ?)"),
    move: floorDb.prepare('UPDATE streams SET version = ?, updated_at = ? WHERE stream_id = ? AND version = ?'),
    event: floorDb.prepare('INSERT INTO events (stream_id, version, type, v, data, meta, at, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?)'),
    run: floorDb.prepare(`INSERT INTO loop_runs (claimed_position, id, loop_id, loop_name, slot, scheduled_for, attempt, trigger, status, target, runner_id, claimed_at, updated_at)
      VALUES (?, ?, ?, ?, ?, ?, 1, 'manual', 'claimed', ?, ?, ?, ?)`),
    started: floorDb.prepare("UPDATE loop_runs SET status = 'running', pid = ?, started_at = ?, updated_at = ? WHERE id = ?"),
    ended: floorDb.prepare("UPDATE loop_runs SET status = 'succeeded', exit_code = 0, finished_at = ?, duration_ms = 0, updated_at = ? WHERE id = ?"),
    lease: floorDb.prepare('INSERT INTO leases (name, holder, token, expires_at) VALUES (?, ?, 1, ?) ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, token = leases.token + 1, expires_at = excluded.expires_at'),
    release: floorDb.prepare('DELETE FROM leases WHERE name = ? AND holder = ?'),
  };
  const begin = floorDb.prepare('BEGIN IMMEDIATE');
  const commit = floorDb.prepare('COMMIT');
  const tx = (fn) => {
    begin.run();
    try {
      fn();
      commit.run();
    } catch (error) {
      floorDb.exec('ROLLBACK');
      throw error;
    }
  };
  const append = (stream, e, version) => s.event.run(stream, version, e.type, e.v, e.data, e.meta, new Date().toISOString(), e.state).lastInsertRowid;
  // As the log does it: the update is the compare (the version expected is known).
  const cas = (stream, version, at) => {
    if (s.move.run(version, at, stream, version - 1).changes !== 1) throw new Error('floor: stale version');
  };
  let n = 0;
  return async () => {
    const id = `run_floor${String(n++).padStart(16, '0')}`;
    const stream = `run:${id}`;
    const lease = `run:${id}`;
    const at = () => new Date().toISOString();
    tx(() => {
      const t = at();
      s.stream.run(stream, 2, t, t);
      const position = append(stream, events[0], 1);
      append(stream, events[1], 2);
      s.run.run(position, id, row.loop_id, row.loop_name, `manual:${id}`, t, row.target, row.runner_id, t, t);
      s.lease.run(lease, row.runner_id, t);
    });
    await undefined;
    tx(() => {
      const t = at();
      cas(stream, 3, t);
      append(stream, events[2], 3);
      s.started.run(NO_SUCH_PID, t, t, id);
    });
    await undefined;
    tx(() => {
      const t = at();
      cas(stream, 4, t);
      append(stream, events[3], 4);
      s.ended.run(t, t, id);
      s.release.run(lease, row.runner_id);
    });
  };
}

/** `n` operations of `fn` in a row: wall ms and CPU µs (user + system) of this process. */
async function timed(fn, n) {
  const c0 = process.cpuUsage();
  const t0 = now();
  for (let i = 0; i < n; i++) await fn();
  const ms = now() - t0;
  const cpu = process.cpuUsage(c0);
  return { ms, cpuUs: cpu.user + cpu.system };
}

try {
  progress(`bookkeeping: ${warmup} warm-up runs per side …`);
  for (let i = 0; i < warmup; i++) {
    await loopsOne();
    await plainjobOne();
  }
  const floorOne = floorRunner();
  for (let i = 0; i < warmup; i++) await floorOne();
  const sides = { loops: loopsOne, plainjob: plainjobOne, floor: floorOne };
  const names = Object.keys(sides);
  const samples = Object.fromEntries(names.map((n) => [n, []]));
  for (let r = 0; r < reps; r++) {
    const acc = Object.fromEntries(names.map((n) => [n, { ms: 0, cpuUs: 0, n: 0 }]));
    for (let c = 0; c < chunksPerRep; c++) {
      // Each side in each position in turn (a rotation per chunk and repetition).
      const k = r + c;
      const order = names.map((_, i) => names[(i + k) % names.length]);
      for (const side of order) {
        const t = await timed(sides[side], chunk);
        acc[side].ms += t.ms;
        acc[side].cpuUs += t.cpuUs;
        acc[side].n += chunk;
      }
    }
    for (const side of names) {
      const a = acc[side];
      samples[side].push({ perSec: (a.n / a.ms) * 1000, cpuUsPerOp: a.cpuUs / a.n, msPerOp: a.ms / a.n });
    }
    progress(`rep ${r + 1}/${reps}: loops ${Math.round(samples.loops.at(-1).perSec)} runs/s, plainjob ${Math.round(samples.plainjob.at(-1).perSec)} jobs/s, floor ${Math.round(samples.floor.at(-1).perSec)} runs/s`);
  }
  // What loops wrote per run (read back once at the end: the fake ended every run succeeded).
  const ratios = samples.loops.map((s, i) => s.perSec / samples.plainjob[i].perSec);
  const loopsRate = median(samples.loops.map((s) => s.perSec));
  const pjRate = median(samples.plainjob.map((s) => s.perSec));
  const loopsCpu = median(samples.loops.map((s) => s.cpuUsPerOp));
  const pjCpu = median(samples.plainjob.map((s) => s.cpuUsPerOp));
  const floorRate = median(samples.floor.map((s) => s.perSec));
  const floorCpu = median(samples.floor.map((s) => s.cpuUsPerOp));
  const ratio = loopsRate / pjRate;
  const floorRatio = floorRate / pjRate;
  const [lo, hi] = minMax(ratios);
  const report = {
    bench: 'bookkeeping',
    machine: { ...info, loadavgAfter: machineInfo().loadavg, cpu: cpuSince(info) },
    settings: { journal_mode: journal, synchronous, reps, chunk, chunksPerRep, warmup, quick },
    loops: { runsPerSec: loopsRate, cpuUsPerRun: loopsCpu, msPerRun: median(samples.loops.map((s) => s.msPerOp)), runs: loopsRuns, processesForked: 0, spawnerCalls: spawner.spawned },
    plainjob: { jobsPerSec: pjRate, cpuUsPerJob: pjCpu, msPerJob: median(samples.plainjob.map((s) => s.msPerOp)), jobs: jobsDone },
    floor: { runsPerSec: floorRate, cpuUsPerRun: floorCpu, msPerRun: median(samples.floor.map((s) => s.msPerOp)), ratio: floorRatio },
    ratio,
    perRepRatio: [lo, hi],
    cpuRatio: loopsCpu / pjCpu,
    goal: { op: '>=', value: 0.5 },
    met: ratio >= 0.5,
    samples,
  };
  if (json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else {
    const f = (x) => Math.round(x).toLocaleString('en-US');
    process.stdout.write(
      [
        `per-run bookkeeping, no process — ${new Date().toISOString()}`,
        `node ${info.node}, SQLite ${info.sqlite}, ${info.cpus} × ${info.cpuModel}; load ${info.loadavg.join(' ')} → ${report.machine.loadavgAfter.join(' ')}${cpuPhrase(info)}`,
        `journal_mode=${journal}, synchronous=${synchronous} on both; ${reps} reps × ${chunksPerRep} chunks of ${chunk} per side, interleaved; medians`,
        '',
        table(
          ['side', 'per second', 'CPU per op', 'wall per op'],
          [
            ['loops runNow (3 commits)', `${f(loopsRate)} runs/s`, `${(loopsCpu / 1000).toFixed(3)} ms`, `${report.loops.msPerRun.toFixed(3)} ms`],
            ['plainjob add+claim+complete', `${f(pjRate)} jobs/s`, `${(pjCpu / 1000).toFixed(3)} ms`, `${report.plainjob.msPerJob.toFixed(3)} ms`],
            ["floor: loops' writes by hand", `${f(floorRate)} runs/s`, `${(floorCpu / 1000).toFixed(3)} ms`, `${report.floor.msPerRun.toFixed(3)} ms`],
          ],
          ['', 'r', 'r', 'r'],
        ),
        '',
        `ratio (loops / plainjob rate) ${ratio.toFixed(2)}  per-rep ${lo.toFixed(2)}–${hi.toFixed(2)}  goal >= 0.5  ${report.met ? 'MET' : 'MISS'}`,
        `CPU per op: loops ${(loopsCpu / pjCpu).toFixed(2)}× plainjob (${((loopsCpu - pjCpu) / 1000).toFixed(3)} ms more per run)`,
        `floor (the same writes by hand, no loops code) / plainjob ${floorRatio.toFixed(2)}: loops' code costs ${((loopsCpu - floorCpu) / 1000).toFixed(3)} ms of CPU per run over its own SQL`,
      ].join('\n') + '\n',
    );
  }
} finally {
  queue.close();
  floorDb.close();
  rt.close();
  removeTempDir(dir);
}
