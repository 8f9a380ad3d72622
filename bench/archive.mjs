#!/usr/bin/env node
// What `loops prune --archive` costs and saves, on a data directory holding N finished runs of one
// loop (synthesised through the store: a real run's four events per run, as `run-now` records
// them, without spawning N processes). Imports the BUILT code (../dist); build first.
//
//   node bench/archive.mjs [--runs N] [--reps R] [--output-bytes B]
//
// --output-bytes: the stdout each run printed (its tail is recorded with its exit and in its row;
// loops keeps up to 64 KiB of each stream). Default 6 (`hello\n`).
//
// Prints: the log before and after (events, file size; after VACUUM too), the archive's wall time
// through the binary (and per run), and `loops show <loop>` / `loops list` — whose run count is
// computed from loop_runs — at N runs as a ratio to the same commands at 10 runs, measured
// interleaved (medians of R).
import { spawnSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { fmt, makeTempDir, median, now, removeTempDir, table } from './lib.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI = join(ROOT, 'dist', 'cli', 'main.js');
const { openRuntime, currentMachines } = await import(pathToFileURL(join(ROOT, 'dist', 'index.js')).href);

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const RUNS = opt('--runs', 20_000);
const REPS = opt('--reps', 5);
const OUTPUT = opt('--output-bytes', 6);
const stdout = OUTPUT <= 6 ? 'hello\n'.slice(0, OUTPUT) : `${'x'.repeat(79)}\n`.repeat(Math.ceil(OUTPUT / 80)).slice(0, OUTPUT);

function loops(dataDir, argv) {
  const r = spawnSync(process.execPath, [CLI, ...argv], { env: { ...process.env, LOOPS_DATA_DIR: dataDir, NO_COLOR: '1' }, encoding: 'utf8', maxBuffer: 1 << 30 });
  if (r.status !== 0) throw new Error(`loops ${argv.join(' ')} exited ${r.status ?? r.signal ?? r.error?.message}: ${r.stderr}`);
  return r.stdout;
}

function timed(fn) {
  const t = now();
  fn();
  return now() - t;
}

/** A data directory with one manual loop `hello` and `n` finished runs of it. */
async function fixture(n) {
  const dataDir = makeTempDir('archive');
  const loop = JSON.parse(loops(dataDir, ['create', 'command', 'hello', '--cmd', 'echo hello', '--manual', '--json']));
  const runtime = await openRuntime({ dataDir });
  const machine = { id: currentMachines.run.id, version: currentMachines.run.version };
  const t0 = Date.parse('2026-01-01T00:00:00.000Z');
  const policies = { timeoutMs: null, killGraceMs: 5000, overlap: 'skip', catchUp: 'latest', catchUpWindowMs: null, catchUpLimit: null, attempts: 1, retryDelayMs: 10000, backoff: 2, maxRetryDelayMs: null, leaseMs: 30000 };
  const target = { kind: 'command', command: 'echo hello', args: [], shell: true, cwd: null, env: {} };
  for (let from = 0; from < n; from += 500) {
    await runtime.log.batch(async (batch) => {
      for (let i = from; i < Math.min(n, from + 500); i++) {
        const runId = `run_bench${String(i).padStart(15, '0')}`;
        const at = (ms) => new Date(t0 + i * 60_000 + ms).toISOString();
        const meta = { runnerId: 'bench', leaseToken: 1 };
        await runtime.log.append(
          `run:${runId}`,
          [
            { type: 'run.claimed', at: at(0), state: 'claimed', meta, data: { runId, loopId: loop.id, loopName: 'hello', slot: `manual:${runId}`, scheduledFor: at(0), attempt: 1, trigger: 'manual', target, policies, runnerId: 'bench', leaseToken: 1 } },
            { type: 'process.spawn_requested', at: at(0), state: 'spawning', meta, data: { command: 'echo hello', args: [], shell: true, cwd: null, envKeys: ['LOOPS_RUN_ID'], timeoutAt: null } },
            { type: 'process.spawned', at: at(20), state: 'running', meta, data: { pid: 100000 + (i % 30000), pgid: 100000 + (i % 30000), startTime: '1', bootId: 'bench' } },
            { type: 'process.exited', at: at(40), state: 'succeeded', meta, data: { exitCode: 0, signal: null, timedOut: false, cancelled: false, stdout, stderr: '', stdoutBytes: OUTPUT, stderrBytes: 0, durationMs: 20, error: null } },
          ],
          { expectedVersion: 0, kind: 'run', machine, batch },
        );
      }
    });
  }
  runtime.close();
  return dataDir;
}

function logSize(dataDir) {
  const db = new Database(join(dataDir, 'loops.db'));
  db.pragma('wal_checkpoint(TRUNCATE)');
  const events = db.prepare('SELECT COUNT(*) AS n FROM events').get().n;
  db.close();
  return { events, bytes: statSync(join(dataDir, 'loops.db')).size };
}

const mib = (bytes) => `${(bytes / 1048576).toFixed(1)} MiB`;

function vacuum(dataDir) {
  const db = new Database(join(dataDir, 'loops.db'));
  db.exec('VACUUM');
  db.close();
  return statSync(join(dataDir, 'loops.db')).size;
}

process.stderr.write(`synthesising ${RUNS} runs…\n`);
const big = await fixture(RUNS);
const small = await fixture(10);

// Reads at N runs vs at 10 runs, interleaved.
const reads = { show: { big: [], small: [] }, list: { big: [], small: [] } };
for (let r = 0; r < REPS; r++) {
  for (const [name, argv] of [['show', ['show', 'hello']], ['list', ['list']]]) {
    reads[name].big.push(timed(() => loops(big, argv)));
    reads[name].small.push(timed(() => loops(small, argv)));
  }
}

const before = logSize(big);
const archiveMs = timed(() => loops(big, ['prune', '--keep-last', '100', '--archive', '--json']));
const after = logSize(big);
const afterVacuum = vacuum(big);
const archived = RUNS - 100;
const verifyMs = timed(() => loops(big, ['projections', 'verify']));

const readsAfter = { show: [], list: [] };
for (let r = 0; r < REPS; r++) {
  readsAfter.show.push(timed(() => loops(big, ['show', 'hello'])));
  readsAfter.list.push(timed(() => loops(big, ['list'])));
}

process.stdout.write(
  table(
    ['measure', 'value'],
    [
      ['runs', `${RUNS}, each printed ${OUTPUT} B`],
      ['events before / after', `${before.events} / ${after.events}`],
      ['loops.db before / after / after VACUUM', `${mib(before.bytes)} / ${mib(after.bytes)} / ${mib(afterVacuum)}`],
      [`prune --archive of ${archived} runs (wall, binary)`, `${(archiveMs / 1000).toFixed(2)} s (${fmt((archiveMs * 1000) / archived, 'µs')} per run)`],
      ['projections verify after', `${(verifyMs / 1000).toFixed(2)} s`],
      [`show hello at ${RUNS} runs / at 10 runs`, `${fmt(median(reads.show.big), 'ms')} / ${fmt(median(reads.show.small), 'ms')} = ${(median(reads.show.big) / median(reads.show.small)).toFixed(2)}×`],
      [`list at ${RUNS} runs / at 10 runs`, `${fmt(median(reads.list.big), 'ms')} / ${fmt(median(reads.list.small), 'ms')} = ${(median(reads.list.big) / median(reads.list.small)).toFixed(2)}×`],
      ['show hello after the archive', fmt(median(readsAfter.show), 'ms')],
    ],
  ),
);
removeTempDir(big);
removeTempDir(small);
