#!/usr/bin/env node
// The seeded chaos driver (issue 11; docs/RELIABILITY.md): runs the real daemon (`loops daemon run`,
// the built binary, the real clock) over a mix of loops — retries due, every overlap and catch-up
// policy, timeouts, a TERM-ignoring process tree, a workflow loop with parallel steps, an agent loop
// on a fake CLI, a loop with a secret — and, cycle after cycle, kills it: at a random moment with
// `kill -9`, or at a named crash point (`LOOPS_FAULT`, every point at least once), killing random run
// processes meanwhile. Then one clean daemon recovers what is left and stops, and the checks run:
//
//  - the invariant checker (`loops verify --processes`: integrity, one run per slot attempt, no slot
//    decided twice, nothing stranded, every stream replays, tables equal the log, no live process);
//  - no run or workflow run left unfinished;
//  - every recorded exit code equals the real one (each command writes its own exit code to a
//    truth file, outside the data directory, just before it exits);
//  - the secret's value is nowhere under the data directory, raw, base64 or URL-encoded.
//
//   npm run chaos -- --cycles 45 --seed 7        (prints a summary table; exit 1 on any violation)
//   node scripts/chaos.mjs --cycles 20 --json    (the built binary must exist: npm run build)
//
// Options: --cycles N (default 30), --seed S (default: random, printed), --min-ms / --max-ms (how long
// each daemon lives before its kill, default 1500..5000), --keep (leave the data directory), --json.
import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, existsSync, mkdirSync, openSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(root, 'dist', 'cli', 'main.js');
const FAKES = join(root, 'test', 'fixtures', 'agents');
const IGNORE_TERM = join(root, 'test', 'fixtures', 'ignore-term.sh');

const { values: opts } = parseArgs({
  options: {
    cycles: { type: 'string', default: '30' },
    seed: { type: 'string' },
    'min-ms': { type: 'string', default: '1500' },
    'max-ms': { type: 'string', default: '5000' },
    keep: { type: 'boolean', default: false },
    verbose: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
  },
});
const positiveInt = (name, value) => {
  if (!/^\d+$/.test(value)) {
    process.stderr.write(`chaos: --${name} must be a whole number, not ${JSON.stringify(value)}\n`);
    process.exit(2);
  }
  return Number(value);
};
const cycles = positiveInt('cycles', opts.cycles);
const seed = opts.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : positiveInt('seed', opts.seed);
const minMs = positiveInt('min-ms', opts['min-ms']);
const maxMs = Math.max(minMs, positiveInt('max-ms', opts['max-ms']));
if (!existsSync(BIN)) {
  process.stderr.write('chaos: dist/cli/main.js is missing: run npm run build first (npm run chaos does)\n');
  process.exit(2);
}
const { FAULT_POINTS } = await import(join(root, 'dist', 'events', 'faults.js'));
const { findViolations } = await import(join(root, 'dist', 'runtime', 'admin', 'invariants.js'));
const { SqliteEventLog } = await import(join(root, 'dist', 'events', 'sqlite-log.js'));
const { secretForms } = await import(join(root, 'dist', 'runtime', 'execution', 'secrets.js'));

// ── seeded randomness (mulberry32): the same seed gives the same plan of faults and waits ─────────
let state = seed >>> 0;
function rng() {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (list) => list[Math.floor(rng() * list.length)];
const between = (lo, hi) => lo + Math.floor(rng() * (hi - lo + 1));

// ── the data directory and the loops ────────────────────────────────────────────────────────────
const work = mkdtempSync(join(tmpdir(), 'loops-chaos-'));
const dataDir = join(work, 'data');
const truthDir = join(work, 'truth');
mkdirSync(truthDir);
const secret = `chaos-${seed.toString(36)}-${Math.floor(rng() * 1e12).toString(36)}-tok`;
const env = {
  ...process.env,
  LOOPS_DATA_DIR: dataDir,
  NO_COLOR: '1',
  TZ: 'UTC',
  PATH: `${FAKES}${delimiter}${process.env.PATH ?? ''}`,
  CHAOS_TOKEN: secret,
};
delete env.LOOPS_FAULT;
delete env.LOOPS_NOW;
delete env.LOOPS_DEBUG;

function loops(args, extra = {}) {
  return new Promise((resolvePromise) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...env, ...extra }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code, signal) => resolvePromise({ code, signal, out, err }));
  });
}
async function must(args) {
  const r = await loops(args);
  if (r.code !== 0) throw new Error(`loops ${args.join(' ')} exited ${r.code}: ${r.err}`);
  return r.out;
}

/** A shell body that writes its real exit code to the truth file just before exiting with it. */
const truthful = (body, code) => `${body}; code=${code}; echo $code > ${truthDir}/$LOOPS_RUN_ID.$LOOPS_ATTEMPT; exit $code`;
const LEASE = ['--lease', '5s', '--no-preflight'];
const LOOPS = [
  ['quick', '--every', '2s', '--cmd', truthful('sleep 0.2', 0)],
  ['flaky-retry', '--every', '3s', '--attempts', '3', '--retry-delay', '1s', '--cmd', truthful('sleep 0.3', '$([ "$LOOPS_ATTEMPT" = 1 ] && echo 3 || echo 0)')],
  ['failing-retry', '--every', '4s', '--attempts', '2', '--retry-delay', '1s', '--backoff', '1', '--cmd', truthful('sleep 0.1', 7)],
  ['buffer-one', '--every', '1s', '--overlap', 'buffer-one', '--cmd', truthful('sleep 1.5', 0)],
  ['buffer-all', '--every', '2s', '--overlap', 'buffer-all', '--catch-up', 'all', '--catch-up-limit', '3', '--cmd', truthful('sleep 2.5', 0)],
  ['cancel-other', '--every', '2s', '--overlap', 'cancel-other', '--kill-grace', '1s', '--cmd', truthful('sleep 3', 0)],
  ['allow', '--every', '2s', '--overlap', 'allow', '--cmd', truthful('sleep 2.5', 1)],
  ['catch-none', '--every', '3s', '--catch-up', 'none', '--cmd', truthful('true', 0)],
  ['timeout', '--every', '3s', '--timeout', '1s', '--kill-grace', '1s', '--attempts', '2', '--retry-delay', '1s', '--cmd', truthful('sleep 10', 0)],
  ['term-ignorer', '--every', '5s', '--timeout', '1s', '--kill-grace', '1s', '--cmd', `sh ${IGNORE_TERM} ${work}/ignorer-$LOOPS_RUN_ID.pid`],
  ['secret', '--every', '2s', '--secret-env', 'CHAOS_TOKEN', '--cmd', truthful('echo "token=$CHAOS_TOKEN"; printf %s "$CHAOS_TOKEN" | base64', 0)],
];
const WORKFLOW = `name: chaos-wf
steps:
  - id: first
    run: sleep 0.3
  - id: left
    needs: first
    run: sleep 1
  - id: right
    needs: first
    run: sleep 0.7; echo right
  - id: last
    needs: [left, right]
    run: echo done
`;

async function setup() {
  for (const [name, ...flags] of LOOPS) await must(['create', 'command', name, ...flags, ...LEASE]);
  writeFileSync(join(work, 'wf.yaml'), WORKFLOW);
  await must(['workflows', 'create', join(work, 'wf.yaml')]);
  await must(['create', 'workflow', 'wf-loop', '--workflow', 'chaos-wf', '--every', '4s', '--lease', '5s']);
  await must(['create', 'agent', 'agent-loop', '--provider', 'claude', '--prompt', 'check the build', '--every', '5s', '--lease', '5s']);
}

// ── the daemon, its kills and the run kills ─────────────────────────────────────────────────────
function startDaemon(fault) {
  // Its log (stdout) goes beside the data directory, one file for all the daemons, kept with --keep.
  const log = openSync(join(work, 'daemon.out'), 'a');
  const child = spawn(process.execPath, [BIN, 'daemon', 'run', '--concurrency', '4'], {
    env: fault ? { ...env, LOOPS_FAULT: fault } : env,
    stdio: ['ignore', log, 'pipe'],
  });
  closeSync(log);
  let err = '';
  child.stderr.on('data', (d) => (err += d));
  const exited = once(child, 'exit').then(([code, signal]) => ({ code, signal, err }));
  return { child, exited };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function db() {
  return new Database(join(dataDir, 'loops.db'), { readonly: true, fileMustExist: true });
}

/** Pids of processes runs and steps started and recorded as running now. */
function runningPids() {
  if (!existsSync(join(dataDir, 'loops.db'))) return [];
  const d = db();
  try {
    d.pragma('busy_timeout = 2000');
    return d
      .prepare(
        `SELECT pid FROM loop_runs WHERE status = 'running' AND pid IS NOT NULL
         UNION SELECT pid FROM workflow_step_attempts WHERE status = 'running' AND pid IS NOT NULL`,
      )
      .all()
      .map((r) => r.pid);
  } catch {
    return [];
  } finally {
    d.close();
  }
}

function kill(pid, signal) {
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false;
  }
}

const t0 = Date.now();
const tally = { daemonKills: 0, faultsArmed: {}, faultsHit: {}, runKills: 0, daemonExitsUnexpected: [] };

const say = (line) => opts.verbose && process.stderr.write(`chaos ${((Date.now() - t0) / 1000).toFixed(1)}s: ${line}\n`);

async function cycle(i) {
  // Every crash point at least once (in the first cycles), then a seeded mix of plain kills and points.
  const point = i < FAULT_POINTS.length ? FAULT_POINTS[i] : rng() < 0.5 ? pick(FAULT_POINTS) : null;
  const fault = point ? `${point}:${point === 'between-lease-and-pidfile' ? 1 : between(1, 6)}` : null;
  if (point) tally.faultsArmed[point] = (tally.faultsArmed[point] ?? 0) + 1;
  const daemon = startDaemon(fault);
  // A daemon armed with a crash point lives until it reaches it (at most 10 s): on a loaded
  // machine, starting node alone can take most of a short lifetime.
  const lifetime = point ? 10_000 : between(minMs, maxMs);
  const started = Date.now();
  let died = null;
  void daemon.exited.then((e) => (died = e));
  // Meanwhile, kill a random run process now and then.
  while (Date.now() - started < lifetime && died === null) {
    await sleep(between(200, 900));
    if (rng() < 0.3) {
      const pids = runningPids();
      if (pids.length && kill(pick(pids), 'SIGKILL')) tally.runKills += 1;
    }
  }
  if (died === null) {
    kill(daemon.child.pid, 'SIGKILL');
    tally.daemonKills += 1;
  }
  const end = await daemon.exited;
  const hit = /LOOPS_FAULT: crash point/.test(end.err);
  say(`cycle ${i + 1}: ${fault ?? 'no crash point'}: ${hit ? 'crashed at it' : end.signal === 'SIGKILL' ? 'killed -9' : `exited ${end.code}`} after ${Date.now() - started} ms`);
  if (hit) tally.faultsHit[point] = (tally.faultsHit[point] ?? 0) + 1;
  else if (end.signal !== 'SIGKILL') tally.daemonExitsUnexpected.push(`cycle ${i + 1}: daemon exited ${end.code ?? end.signal}: ${end.err.trim().split('\n').slice(-2).join(' / ')}`);
}

/**
 * One clean daemon takes over what the last kill left (recovery runs first, at its start), runs a
 * few seconds, and stops gracefully: a stop cancels what still runs, so every run ends; work still
 * queued (a retry not yet due) stays queued, durable, for the next daemon.
 */
async function settle() {
  const daemon = startDaemon(null);
  await sleep(4000);
  kill(daemon.child.pid, 'SIGTERM');
  const end = await daemon.exited;
  say('settled');
  if (end.code !== 0) tally.daemonExitsUnexpected.push(`final daemon exited ${end.code ?? end.signal}: ${end.err.trim()}`);
}

function filesUnder(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

function check() {
  const d = new Database(join(dataDir, 'loops.db'));
  try {
    const violations = findViolations(d, new SqliteEventLog(d, { handlers: [] }), { processes: true });
    const count = (sql) => d.prepare(sql).get().n;
    const unfinished = d
      .prepare(
        `SELECT id, status FROM loop_runs WHERE status NOT IN ('succeeded','failed','timed_out','cancelled','abandoned')
         UNION ALL SELECT id, status FROM workflow_runs WHERE status NOT IN ('succeeded','failed','timed_out','cancelled','abandoned')`,
      )
      .all();
    for (const u of unfinished) violations.push(`${u.id} left ${u.status}`);
    // Recorded exit codes against the truth files the commands wrote.
    let compared = 0;
    for (const run of d.prepare('SELECT id, attempt, exit_code FROM loop_runs WHERE exit_code IS NOT NULL').all()) {
      const file = join(truthDir, `${run.id}.${run.attempt}`);
      if (!existsSync(file)) continue;
      compared += 1;
      const real = Number(readFileSync(file, 'utf8').trim());
      if (real !== run.exit_code) violations.push(`${run.id}: recorded exit ${run.exit_code}, the command exited ${real}`);
    }
    const leaks = [];
    const forms = secretForms(secret);
    // The data directory, and the daemons' log (their stdout, kept beside it).
    for (const file of [...filesUnder(dataDir), join(work, 'daemon.out')]) {
      const bytes = readFileSync(file);
      for (const form of forms) if (bytes.includes(form)) leaks.push(`${file.slice(work.length + 1)} holds the secret (${form === secret ? 'raw' : `as ${form}`})`);
    }
    violations.push(...leaks);
    return {
      violations,
      runs: count('SELECT COUNT(*) AS n FROM loop_runs'),
      workflowRuns: count('SELECT COUNT(*) AS n FROM workflow_runs'),
      decisions: count("SELECT COUNT(*) AS n FROM events WHERE type LIKE 'slot.%'"),
      retries: count("SELECT COUNT(*) AS n FROM events WHERE type = 'slot.retry_scheduled'"),
      outcomes: Object.fromEntries(d.prepare('SELECT status, COUNT(*) AS n FROM loop_runs GROUP BY status').all().map((r) => [r.status, r.n])),
      exitCodesCompared: compared,
      secretLeaks: leaks.length,
      events: count('SELECT COUNT(*) AS n FROM events'),
    };
  } finally {
    d.close();
  }
}

let result;
try {
  await setup();
  say('set up');
  for (let i = 0; i < cycles; i++) await cycle(i);
  await settle();
  const checked = check();
  result = {
    seed,
    cycles,
    seconds: Math.round((Date.now() - t0) / 1000),
    daemonKills: tally.daemonKills,
    crashPoints: Object.fromEntries(FAULT_POINTS.map((p) => [p, { armed: tally.faultsArmed[p] ?? 0, hit: tally.faultsHit[p] ?? 0 }])),
    runProcessKills: tally.runKills,
    ...checked,
    violations: [...tally.daemonExitsUnexpected, ...checked.violations],
    dataDir: opts.keep ? dataDir : null,
    daemonLog: opts.keep ? join(work, 'daemon.out') : null,
  };
} finally {
  if (!opts.keep) rmSync(work, { recursive: true, force: true });
}

if (opts.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
else {
  const rows = [
    ['seed', result.seed],
    ['cycles (daemon lives)', result.cycles],
    ['daemon kill -9 at a random moment', result.daemonKills],
    ...Object.entries(result.crashPoints).map(([p, c]) => [`crash point ${p}`, `${c.hit} hit / ${c.armed} armed`]),
    ['run processes killed -9', result.runProcessKills],
    ['runs', `${result.runs} (${Object.entries(result.outcomes).map(([s, n]) => `${s} ${n}`).join(', ')})`],
    ['workflow runs', result.workflowRuns],
    ['slot decisions (retries scheduled)', `${result.decisions} (${result.retries})`],
    ['exit codes compared with the truth', result.exitCodesCompared],
    ['secret leaks', result.secretLeaks],
    ['invariant violations', result.violations.length],
    ['seconds', result.seconds],
  ];
  const width = Math.max(...rows.map((r) => r[0].length));
  process.stdout.write(`loops chaos — node scripts/chaos.mjs --cycles ${cycles} --seed ${seed}\n`);
  for (const [k, v] of rows) process.stdout.write(`  ${k.padEnd(width)}  ${v}\n`);
  for (const v of result.violations) process.stdout.write(`  VIOLATION  ${v}\n`);
  if (result.dataDir) process.stdout.write(`  data kept in ${result.dataDir}\n`);
}
process.exit(result.violations.length === 0 ? 0 : 1);
