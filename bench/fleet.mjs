// Fleet (issue 15's acceptance): three daemons — three "hosts", each its own LOOPS_HOST_ID and data
// directory — on one PostgreSQL log, for M minutes (default 10) of loops firing every second, with
// retries and the overlap policies, while the harness kill -9s a daemon's node process every so
// often (and starts it again: same host id, same data directory) and restarts PostgreSQL with the
// daemons running. At the end it stops the daemons (SIGTERM) and checks the log: no (loop, slot,
// attempt) with two runs, no slot decided twice, every due slot decided, every run terminal, no
// command executed twice for one (loop, slot, attempt) (each run appends its LOOPS_IDEMPOTENCY_KEY
// to a file: what ran, as the machine saw it, not as the log says), `loops verify` and `loops
// projections verify` (PostgreSQL's tables and a host's replica, each against a rebuild) passing,
// and no daemon that crashed, lingered alive without working, or failed to stop gracefully. It
// reports runs per host and per minute, the kills and restarts done, and how soon each host wrote
// again after each PostgreSQL restart (its first event, and its log's "no longer degraded").
//
//   node bench/fleet.mjs [--quick] [--minutes 10 | --seconds N] [--daemons 3] [--concurrency 8]
//                        [--kill-every S] [--down S] [--pg-restarts N] [--pg-down S]
//                        [--url postgres://…] [--json] [--keep]
//   npm run fleet [-- <flags>]
//   LOOPS_BENCH_CLI=path/to/main.js node bench/fleet.mjs …   (the daemons from another build)
//
// PostgreSQL: a private cluster of the bench's own (initdb in a temporary directory, run as uid
// 65534 `nobody` when the bench runs as root — PostgreSQL refuses root — on a free port, trust
// auth), so it can be restarted without touching a shared server; stopped and removed at exit
// (also on failure or Ctrl-C) unless --keep. `--url` uses an existing server instead (a new schema
// in it, dropped at the end unless --keep; no restarts then). The server programs are found on
// PATH, with `pg_config --bindir`, in /usr/lib/postgresql/<version>/bin, or in $LOOPS_PG_BINDIR.
//
// --quick: a 60 s window, a kill -9 every 20 s, one PostgreSQL restart (the CI version,
// test/e2e/fleet.e2e.test.ts). The long form kills every 45 s and restarts PostgreSQL every 2 min.
//
// Exit 0 when every check holds; 1 otherwise (why is printed); 2 for bad flags or a machine that
// cannot run it (no PostgreSQL server programs, no setpriv as root).
import pg from 'pg';
import { spawn, spawnSync } from 'node:child_process';
import { appendFileSync, chownSync, closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkOptions, findPgBinDir, freePort, machineInfo, table } from './lib.mjs';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));
const BIN = join(ROOT, 'dist', 'cli', 'main.js');
// LOOPS_BENCH_CLI: another build's binary runs the daemons (an A/B of a change, as bench/soak.mjs);
// loops are still defined, and the log checked, by this checkout's build.
const DAEMON_BIN = process.env.LOOPS_BENCH_CLI ? resolve(process.env.LOOPS_BENCH_CLI) : BIN;

// ── flags ────────────────────────────────────────────────────────────────────────────────────
const USAGE = `usage: node bench/fleet.mjs [--quick] [--minutes N | --seconds N] [--daemons N] [--concurrency N]
                          [--kill-every S] [--down S] [--pg-restarts N] [--pg-down S]
                          [--url postgres://…] [--json] [--keep]
  --quick          60 s window, a kill -9 every 20 s, one PostgreSQL restart (the CI version)
  --minutes N      the window (default 10); --seconds N likewise
  --daemons N      daemons ("hosts" h1…hN), default 3
  --concurrency N  each daemon's --concurrency (default 8)
  --kill-every S   kill -9 a daemon (round robin) every S seconds (default 45, --quick 20; 0: never)
  --down S         how long a killed daemon stays down before it is started again (default 2)
  --pg-restarts N  PostgreSQL restarts, spread over the window (default 1 per 2 minutes, at least 1)
  --pg-down S      how long PostgreSQL stays stopped at each restart (default 3)
  --url URL        use this PostgreSQL server (a new schema in it) instead of a private cluster; no restarts
  --json           the report as JSON on stdout (the table goes to stderr)
  --keep           keep the cluster's and the data directories (and the schema with --url)`;

function usage(message) {
  process.stderr.write(`fleet: ${message}\n${USAGE}\n`);
  process.exit(2);
}

const argv = process.argv.slice(2);
checkOptions(argv, { flags: ['--quick', '--json', '--keep'], valued: ['--minutes', '--seconds', '--daemons', '--concurrency', '--kill-every', '--down', '--pg-restarts', '--pg-down', '--url'] }, USAGE);

function parseFlags(args) {
  const flags = { quick: false, json: false, keep: false, url: null, daemons: 3, concurrency: 8, down: 2, pgDown: 3 };
  let seconds = null;
  let killEvery = null;
  let pgRestarts = null;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const number = (min, max = Infinity) => {
      const raw = args[++i];
      const n = Number(raw);
      if (!Number.isFinite(n) || n < min || n > max) usage(`${a}: ${JSON.stringify(raw)} is not a number in [${min}, ${max}]`);
      return n;
    };
    if (a === '--quick') flags.quick = true;
    else if (a === '--json') flags.json = true;
    else if (a === '--keep') flags.keep = true;
    else if (a === '--minutes') seconds = number(0.5) * 60;
    else if (a === '--seconds') seconds = number(30);
    else if (a === '--daemons') flags.daemons = Math.floor(number(1, 9));
    else if (a === '--concurrency') flags.concurrency = Math.floor(number(1));
    else if (a === '--kill-every') killEvery = number(0);
    else if (a === '--down') flags.down = number(0, 60);
    else if (a === '--pg-restarts') pgRestarts = Math.floor(number(0));
    else if (a === '--pg-down') flags.pgDown = number(0, 60);
    else if (a === '--url') {
      flags.url = args[++i];
      if (!/^postgres(ql)?:\/\//i.test(flags.url)) usage(`--url: ${JSON.stringify(flags.url)} is not a postgres:// URL`);
    }
  }
  flags.seconds = seconds ?? (flags.quick ? 60 : 600);
  flags.killEvery = killEvery ?? (flags.quick ? 20 : 45);
  if (flags.killEvery > 0 && flags.killEvery < flags.down + 5) usage(`--kill-every ${flags.killEvery} leaves a killed daemon no time back up (--down ${flags.down})`);
  if (flags.url && pgRestarts) usage('--pg-restarts: with --url the server is not the bench’s to restart');
  flags.pgRestarts = flags.url ? 0 : (pgRestarts ?? (flags.quick ? 1 : Math.max(1, Math.floor(flags.seconds / 120))));
  return flags;
}

const flags = parseFlags(argv);
const progress = (line) => process.stderr.write(`fleet: ${line}\n`);
if (!existsSync(BIN)) usage(`${BIN} is missing: run npm run build (npm run fleet does it)`);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const iso = (ms) => new Date(ms).toISOString();
const TERMINAL = ['succeeded', 'failed', 'timed_out', 'cancelled', 'abandoned'];

// ── directories, and what is stopped whatever ends this process ─────────────────────────────
const work = mkdtempSync(join(tmpdir(), 'loops-bench-fleet-'));
const execLog = join(work, 'executions.log');
appendFileSync(execLog, '');
/** Set when the bench ends by itself: the exit handler then leaves the daemons and cluster alone. */
let cleanedUp = false;
const daemons = [];
let cluster = null; // { dir, data, log, port, bin }
let stopping = false;

function killAllNow() {
  for (const d of daemons) {
    d.expected = true;
    if (d.child && d.child.exitCode === null && d.child.signalCode === null) {
      try {
        process.kill(d.child.pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  }
}
function cleanupNow() {
  if (cleanedUp) return;
  cleanedUp = true;
  stopping = true;
  killAllNow();
  if (cluster) spawnSync(...asPgUser(join(cluster.bin, 'pg_ctl'), ['-D', cluster.data, '-m', 'immediate', '-w', 'stop']), { encoding: 'utf8' });
  if (!flags.keep) {
    if (cluster) rmSync(cluster.dir, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  }
}
process.prependListener('exit', cleanupNow);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.prependListener(signal, () => {
    progress(`${signal}: stopping the daemons and PostgreSQL`);
    cleanupNow();
    process.exit(130);
  });
}

// ── PostgreSQL: a private cluster, or --url ─────────────────────────────────────────────────
const isRoot = process.getuid?.() === 0;
/** PostgreSQL refuses to run as root: as root, its programs run as uid/gid 65534 (nobody). */
const PG_UID = 65534;
function asPgUser(cmd, args) {
  return isRoot ? ['setpriv', [`--reuid=${PG_UID}`, `--regid=${PG_UID}`, '--clear-groups', cmd, ...args]] : [cmd, args];
}
function runAsync(cmd, args, timeoutMs = 120_000) {
  return new Promise((done) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      done({ status: null, stdout, stderr: stderr + error.message });
    });
    child.once('close', (status) => {
      clearTimeout(timer);
      done({ status, stdout, stderr });
    });
  });
}
const pgCtl = (args) => runAsync(...asPgUser(join(cluster.bin, 'pg_ctl'), ['-D', cluster.data, ...args]));
const pgStart = () => pgCtl(['-l', cluster.log, '-w', '-t', '60', '-o', `-p ${cluster.port} -k ${cluster.dir} -c listen_addresses=127.0.0.1 -c max_connections=200`, 'start']);
const pgStop = () => pgCtl(['-m', 'fast', '-w', '-t', '60', 'stop']);

async function startCluster() {
  const bin = findPgBinDir();
  if (!bin) usage('no PostgreSQL server programs (initdb, pg_ctl, postgres) on PATH, from pg_config, or in /usr/lib/postgresql/*/bin; install them (Debian: postgresql) or set LOOPS_PG_BINDIR, or give --url');
  if (isRoot) {
    const probe = spawnSync('setpriv', [`--reuid=${PG_UID}`, `--regid=${PG_UID}`, '--clear-groups', 'true'], { encoding: 'utf8' });
    if (probe.status !== 0) usage(`running as root, PostgreSQL must run as another user, and setpriv failed: ${(probe.stderr || probe.error?.message || `exit ${probe.status}`).trim()} (Debian: util-linux)`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'loops-bench-fleet-pg-'));
  if (isRoot) chownSync(dir, PG_UID, PG_UID);
  cluster = { dir, data: join(dir, 'data'), log: join(dir, 'postgresql.log'), port: await freePort(), bin };
  const init = await runAsync(...asPgUser(join(bin, 'initdb'), ['-D', cluster.data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync']));
  if (init.status !== 0) throw new Error(`initdb failed (exit ${init.status}): ${init.stderr.trim()}`);
  const started = await pgStart();
  if (started.status !== 0) throw new Error(`pg_ctl start failed (exit ${started.status}): ${started.stderr.trim()}\n${safeRead(cluster.log).slice(-2000)}`);
  return `postgres://postgres@127.0.0.1:${cluster.port}/postgres`;
}

function safeRead(file) {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

let baseUrl;
let schema;
let userSchema = false;
if (flags.url) {
  const u = new URL(flags.url);
  userSchema = u.searchParams.has('schema');
  schema = u.searchParams.get('schema') ?? `loops_fleet_${Date.now().toString(36)}`;
  u.searchParams.delete('schema');
  baseUrl = u.href;
} else {
  baseUrl = await startCluster();
  schema = 'fleet';
}
const STORE = `${baseUrl}${baseUrl.includes('?') ? '&' : '?'}schema=${encodeURIComponent(schema)}`;
const Q = (name) => `"${schema}".${name}`;
progress(`PostgreSQL ${flags.url ? 'at --url' : `private cluster in ${cluster.dir}, port ${cluster.port}`}, schema ${schema}; data in ${work}`);

/** One query on a connection of its own (PostgreSQL may be restarting: the caller catches). */
async function query(sql, params = []) {
  const client = new pg.Client({ connectionString: baseUrl, connectionTimeoutMillis: 5000 });
  client.on('error', () => {});
  await client.connect();
  try {
    return (await client.query(sql, params)).rows;
  } finally {
    await client.end().catch(() => {});
  }
}

if (flags.url) {
  const exists = await query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
  if (exists.length > 0) usage(`--url: schema ${schema} exists already; name a new one (?schema=…) or drop it`);
}

// ── the loops binary ─────────────────────────────────────────────────────────────────────────
const baseEnv = { ...process.env, NO_COLOR: '1', LOOPS_STORE: STORE };
delete baseEnv.LOOPS_DEBUG;
delete baseEnv.LOOPS_HOST_ID;
delete baseEnv.LOOPS_DATA_DIR;

function loops(args, { host = 'setup', check = true } = {}) {
  const dataDir = join(work, host);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const r = spawnSync(process.execPath, [BIN, ...args], { env: { ...baseEnv, LOOPS_HOST_ID: host, LOOPS_DATA_DIR: dataDir }, cwd: work, encoding: 'utf8', timeout: 300_000 });
  if (check && r.status !== 0) throw new Error(`loops ${args.join(' ')} exited ${r.status}: ${(r.stderr || r.error?.message || '').trim()}`);
  return r;
}

// ── the daemons ──────────────────────────────────────────────────────────────────────────────
/** Daemon exits the harness did not cause (a crash): each is a failure; the daemon is started again. */
const unexpectedExits = [];
/** Every daemon start: when, why, and how long until it said "daemon started" (null: never). */
const starts = [];
const pgRestarts = [];
const kills = [];

class DaemonProc {
  constructor(host) {
    this.host = host;
    this.dataDir = join(work, host);
    this.logFile = join(work, `daemon-${host}.log`);
    mkdirSync(this.dataDir, { recursive: true, mode: 0o700 });
    this.child = null;
    this.expected = false;
    this.starts = 0;
    this.exited = null; // a promise for the current child's exit
  }

  /** The current start's record (starts[]), for the stall watch. */
  get current() {
    return starts.findLast((s) => s.host === this.host) ?? null;
  }

  /** What the daemon last saved of itself (daemon-state.json: lastPassAt, passes, lastError, degraded). */
  state() {
    try {
      return JSON.parse(readFileSync(join(this.dataDir, 'daemon-state.json'), 'utf8'));
    } catch {
      return null;
    }
  }

  get alive() {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  start(why) {
    appendFileSync(this.logFile, `--- fleet: ${why} at ${iso(Date.now())}\n`);
    const offset = statSync(this.logFile).size;
    const fd = openSync(this.logFile, 'a');
    const child = spawn(process.execPath, [DAEMON_BIN, 'daemon', 'run', '--concurrency', String(flags.concurrency)], {
      env: { ...baseEnv, LOOPS_HOST_ID: this.host, LOOPS_DATA_DIR: this.dataDir },
      cwd: work,
      stdio: ['ignore', fd, fd],
      detached: true, // its own process group: the terminal's Ctrl-C reaches the bench, which stops it
    });
    closeSync(fd);
    this.child = child;
    this.expected = false;
    this.starts += 1;
    const startedAt = Date.now();
    const record = { host: this.host, why, at: iso(startedAt), pid: child.pid, readyMs: null, endedBeforeReady: false };
    starts.push(record);
    // Ready once it logs "daemon started" (it holds its lease; signals are handled from then on).
    const watchReady = async () => {
      while (record.readyMs === null && child.exitCode === null && child.signalCode === null) {
        if (/daemon started/.test(safeRead(this.logFile).slice(offset))) record.readyMs = Date.now() - startedAt;
        else await sleep(100);
      }
      if (record.readyMs === null) record.endedBeforeReady = true;
    };
    void watchReady();
    this.exited = new Promise((done) => {
      child.once('exit', (code, signal) => {
        if (!this.expected && !stopping) {
          const text = safeRead(this.logFile).slice(offset);
          const lines = text.split('\n').filter((l) => l.trim() !== '');
          // 'running': it had started (held its lease) and then went; 'start': it never got that far.
          const phase = /daemon started/.test(text) ? 'running' : 'start';
          const error = lines.find((l) => /^\s*(\w*Error\b|Error:)/.test(l)) ?? lines[lines.length - 1] ?? '';
          const at = Date.now();
          const restart = pgRestarts.find((r) => at >= r.stopAsked - 1000 && at <= (r.upAt ?? Infinity) + 30_000);
          unexpectedExits.push({
            host: this.host,
            pid: child.pid,
            code,
            signal,
            at: iso(at),
            upForMs: at - startedAt,
            phase,
            duringPgRestart: restart ? restart.n : null,
            error: error.trim().slice(0, 300),
          });
          progress(`daemon ${this.host} (pid ${child.pid}) exited by itself ${phase === 'start' ? 'while starting' : `after ${((at - startedAt) / 1000).toFixed(1)} s`}: code ${code}, signal ${signal}${restart ? ` (PostgreSQL restart ${restart.n})` : ''}: ${error.trim().slice(0, 200)}`);
          // Started again, so the window goes on: a second later, and not while PostgreSQL is down
          // (a daemon cannot start without its store; that exit would be the bench's doing).
          const revive = async () => {
            await sleep(1000);
            while (!stopping && pgRestarts.some((r) => r.upAt === null)) await sleep(200);
            if (!stopping && !this.alive) this.start(`restart after exit ${code ?? signal}`);
          };
          void revive();
        }
        done({ code, signal });
      });
    });
    return child;
  }

  /** kill -9 of the daemon's node process (not its process group: its runs go on, as after a crash). */
  async kill9() {
    if (!this.alive) return null;
    this.expected = true;
    const pid = this.child.pid;
    appendFileSync(this.logFile, `--- fleet: kill -9 ${pid} at ${iso(Date.now())}\n`);
    process.kill(pid, 'SIGKILL');
    await this.exited;
    return pid;
  }

  /** SIGTERM, then up to `timeoutMs` for the graceful stop; SIGKILL after that. */
  async stop(timeoutMs = 30_000) {
    if (!this.alive) return { stopped: true, ms: 0, forced: false, code: null, signal: null, wasDown: true };
    this.expected = true;
    const asked = Date.now();
    process.kill(this.child.pid, 'SIGTERM');
    const r = await Promise.race([this.exited, sleep(timeoutMs).then(() => null)]);
    if (r === null) {
      process.kill(this.child.pid, 'SIGKILL');
      await this.exited;
      return { stopped: false, ms: Date.now() - asked, forced: true };
    }
    return { stopped: true, ms: Date.now() - asked, forced: false, code: r.code, signal: r.signal };
  }
}

for (let i = 1; i <= flags.daemons; i++) daemons.push(new DaemonProc(`h${i}`));
progress(`starting ${flags.daemons} daemons (--concurrency ${flags.concurrency})`);
for (const d of daemons) d.start('start');
// Each says "daemon started" once it holds its lease (the first creates the schema; the others wait on its lock).
{
  const deadline = Date.now() + 120_000;
  for (const d of daemons) {
    while (!/daemon started/.test(safeRead(d.logFile))) {
      if (Date.now() > deadline) throw new Error(`daemon ${d.host} did not start in 120 s:\n${safeRead(d.logFile).slice(-3000)}`);
      if (!d.alive && unexpectedExits.length > 3 * flags.daemons) throw new Error(`daemon ${d.host} keeps exiting at start:\n${safeRead(d.logFile).slice(-3000)}`);
      await sleep(100);
    }
  }
}

// ── the loops ────────────────────────────────────────────────────────────────────────────────
// Every run first appends "<LOOPS_IDEMPOTENCY_KEY> <LOOPS_RUN_ID>" to executions.log: a key there
// twice is a (loop, slot, attempt) whose command ran twice, whatever the log says.
const MARK = `echo "$LOOPS_IDEMPOTENCY_KEY $LOOPS_RUN_ID" >> ${execLog}`;
const LOOP_DEFS = [
  ...[0, 1, 2, 3].map((k) => ({ name: `tick-${k + 1}`, everyMs: 1000, phaseMs: k * 250, cmd: MARK, args: [] })),
  // Fails its first attempt, succeeds its second (LOOPS_ATTEMPT counts a slot's attempts).
  { name: 'retry-once', everyMs: 2000, phaseMs: 100, cmd: `${MARK}; [ "$LOOPS_ATTEMPT" -ge 2 ]`, args: ['--attempts', '3', '--retry-delay', '1s'] },
  // Fails its first two attempts, succeeds its third (retries at +1 s, then +2 s).
  { name: 'retry-twice', everyMs: 5000, phaseMs: 350, cmd: `${MARK}; [ "$LOOPS_ATTEMPT" -ge 3 ]`, args: ['--attempts', '3', '--retry-delay', '1s'] },
  // Runs that outlast their interval, under each waiting/skipping overlap policy.
  { name: 'overlap-skip', everyMs: 2000, phaseMs: 600, cmd: `${MARK}; exec sleep 3`, args: ['--overlap', 'skip'] },
  { name: 'overlap-buffer-one', everyMs: 2000, phaseMs: 700, cmd: `${MARK}; exec sleep 3`, args: ['--overlap', 'buffer-one'] },
  { name: 'overlap-cancel-other', everyMs: 2000, phaseMs: 850, cmd: `${MARK}; exec sleep 5`, args: ['--overlap', 'cancel-other', '--kill-grace', '1s'] },
];
const windowMs = flags.seconds * 1000;
// The window starts once every loop is defined (a create is ~1 s on a busy machine); a loop defined
// late has its first slots caught up (coalesced), which the checks count as decided.
const t0 = Math.ceil((Date.now() + 4000 + 1500 * LOOP_DEFS.length) / 1000) * 1000;
const end = t0 + windowMs;
const loopIds = {};
for (const def of LOOP_DEFS) {
  const r = loops([
    'create', 'command', def.name, '--cmd', def.cmd, '--every', `${def.everyMs}ms`,
    '--starts-at', iso(t0 + def.phaseMs), '--expires-at', iso(end - 1), '--tz', 'UTC', ...def.args, '--json',
  ]);
  loopIds[def.name] = JSON.parse(r.stdout).id;
  def.due = def.phaseMs < windowMs ? Math.ceil((windowMs - def.phaseMs) / def.everyMs) : 0;
}
const setupOverrunMs = Math.max(0, Date.now() - t0);
if (setupOverrunMs > 0) progress(`defining the loops ran ${setupOverrunMs} ms into the window (their first slots are caught up)`);
const dueTotal = LOOP_DEFS.reduce((n, d) => n + d.due, 0);
progress(`${LOOP_DEFS.length} loops defined; window ${flags.seconds} s from ${iso(t0)}, ${dueTotal} slots due`);

// ── the faults: kill -9 a daemon, restart PostgreSQL ────────────────────────────────────────
/** When (ms after t0) PostgreSQL is stopped: spread evenly over the window. */
const pgPlan = Array.from({ length: flags.pgRestarts }, (_, i) => Math.round((windowMs * (i + 1)) / (flags.pgRestarts + 1)));
/** When a daemon is killed: every --kill-every, none within 8 s of a PostgreSQL restart, none in the last 10 s. */
const killPlan = [];
if (flags.killEvery > 0) {
  const guard = 8000;
  for (let t = (flags.killEvery * 1000) / 2; t < windowMs - 10_000 - flags.down * 1000; t += flags.killEvery * 1000) {
    let at = t;
    for (const r of pgPlan) if (at > r - guard - flags.down * 1000 && at < r + flags.pgDown * 1000 + guard) at = r + flags.pgDown * 1000 + guard;
    if (at < windowMs - 10_000 - flags.down * 1000 && !killPlan.some((k) => Math.abs(k - at) < 3000)) killPlan.push(at);
  }
}

async function restartPg(n) {
  const r = { n, stopAsked: Date.now(), stoppedAt: null, startAsked: null, upAt: null, error: null };
  pgRestarts.push(r);
  progress(`PostgreSQL restart ${n}: pg_ctl stop -m fast, ${flags.pgDown} s down, start`);
  const stop = await pgStop();
  r.stoppedAt = Date.now();
  if (stop.status !== 0) r.error = `pg_ctl stop exited ${stop.status}: ${stop.stderr.trim()}`;
  await sleep(flags.pgDown * 1000);
  r.startAsked = Date.now();
  const start = await pgStart();
  r.upAt = Date.now();
  if (start.status !== 0) r.error = `${r.error ? `${r.error}; ` : ''}pg_ctl start exited ${start.status}: ${start.stderr.trim()}`;
  if (r.error) progress(`PostgreSQL restart ${n}: ${r.error}`);
}

let killTurn = 0;
async function killOne() {
  // Round robin over the hosts; one that is down now (exited by itself) is passed over.
  let d = null;
  for (let i = 0; i < daemons.length && d === null; i++) {
    const candidate = daemons[killTurn++ % daemons.length];
    if (candidate.alive) d = candidate;
  }
  if (d === null) return;
  const k = { host: d.host, at: iso(Date.now()), pid: null, restartedAt: null, newPid: null };
  kills.push(k);
  k.pid = await d.kill9();
  progress(`kill -9 daemon ${d.host} (pid ${k.pid}); back in ${flags.down} s`);
  await sleep(flags.down * 1000);
  if (stopping) return;
  if (!d.alive) k.newPid = d.start('restart after kill -9').pid;
  k.restartedAt = iso(Date.now());
}

const actions = [
  ...pgPlan.map((at, i) => ({ at: t0 + at, run: () => restartPg(i + 1) })),
  ...killPlan.map((at) => ({ at: t0 + at, run: () => killOne() })),
];
const running = actions.map((a) =>
  sleep(Math.max(0, a.at - Date.now()))
    .then(() => (stopping ? null : a.run()))
    .catch((error) => progress(`fault action failed: ${error.message}`)),
);

// A daemon alive but not working: no pass for STALL_MS (with loops due every second, a working
// daemon passes every second or so), outside a PostgreSQL restart and its aftermath. Recorded once
// per daemon process.
const STALL_MS = 15_000;
const stalls = [];
const stallWatch = setInterval(() => {
  const now = Date.now();
  // Only in the window (before it nothing is due, and an idle daemon sleeps up to 30 s).
  if (now < t0 + STALL_MS || now >= end || pgRestarts.some((r) => r.upAt === null || now - r.upAt < STALL_MS)) return;
  for (const d of daemons) {
    const start = d.current;
    if (!d.alive || !start || now - Date.parse(start.at) < STALL_MS || stalls.some((x) => x.pid === start.pid)) continue;
    const state = d.state();
    const last = state?.lastPassAt ? Date.parse(state.lastPassAt) : null;
    if (last !== null && now - last < STALL_MS && last >= Date.parse(start.at)) continue;
    const stall = { host: d.host, pid: start.pid, at: iso(now), startedAt: start.at, lastPassAt: state?.lastPassAt ?? null, passes: state?.passes ?? null, lastError: state?.lastError ?? null, degraded: state?.degraded ?? null, logTail: safeRead(d.logFile).split('\n').filter((l) => l.trim()).slice(-3) };
    stalls.push(stall);
    progress(`daemon ${d.host} (pid ${start.pid}) is alive but made no pass since ${stall.lastPassAt ?? 'it started'}: ${stall.logTail[stall.logTail.length - 1] ?? ''}`);
  }
}, 2000);

// Progress while the window runs (PostgreSQL may be down: then say so).
{
  const every = flags.quick ? 15_000 : 30_000;
  let next = t0 + every;
  while (Date.now() < end) {
    await sleep(Math.max(0, Math.min(next, end) - Date.now()));
    if (Date.now() >= next) {
      next += every;
      let finished = '?';
      try {
        finished = (await query(`SELECT count(*)::int AS n FROM ${Q('loop_runs')} WHERE finished_at IS NOT NULL`))[0].n;
      } catch (error) {
        finished = `? (${error.code ?? error.message})`;
      }
      progress(`${Math.round((Date.now() - t0) / 1000)} s: ${finished} runs finished; daemons up ${daemons.filter((d) => d.alive).length}/${daemons.length}; kills ${kills.length}, PostgreSQL restarts ${pgRestarts.length}, unexpected exits ${unexpectedExits.length}`);
    }
  }
}
await Promise.all(running);
clearInterval(stallWatch);

// ── the drain, then the graceful stop ───────────────────────────────────────────────────────
// The loops expired at the window's end; what is queued (a retry, a buffered slot) or going ends.
const drainStart = Date.now();
let pending = null;
while (Date.now() - drainStart < 90_000) {
  try {
    const [row] = await query(
      `SELECT (SELECT count(*) FROM ${Q('run_queue')})::int AS queued, (SELECT count(*) FROM ${Q('loop_runs')} WHERE status <> ALL($1))::int AS going`,
      [TERMINAL],
    );
    pending = row;
    if (row.queued === 0 && row.going === 0) break;
  } catch {
    // PostgreSQL not back yet
  }
  await sleep(500);
}
const drainMs = Date.now() - drainStart;
progress(`drained in ${(drainMs / 1000).toFixed(1)} s (queued ${pending?.queued ?? '?'}, going ${pending?.going ?? '?'}); stopping the daemons (SIGTERM)`);
stopping = true;
const stops = await Promise.all(daemons.map(async (d) => ({ host: d.host, ...(await d.stop()) })));

// ── the checks ───────────────────────────────────────────────────────────────────────────────
const failed = [];
const percentile = (sorted, p) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((sorted.length * p) / 100) - 1))]);

// 1. One run per (loop, slot, attempt): in the log (every run.claimed) and in the table.
const duplicateClaims = await query(
  `SELECT data::jsonb->>'loopName' AS loop, data::jsonb->>'slot' AS slot, data::jsonb->>'attempt' AS attempt, count(*)::int AS n, string_agg(stream_id, ', ') AS runs
   FROM ${Q('events')} WHERE type = 'run.claimed' GROUP BY 1, 2, 3 HAVING count(*) > 1 ORDER BY 1, 2, 3`,
);
const duplicateRows = await query(
  `SELECT loop_name AS loop, slot, attempt, count(*)::int AS n, string_agg(id, ', ') AS runs FROM ${Q('loop_runs')} GROUP BY 1, 2, 3 HAVING count(*) > 1 ORDER BY 1, 2, 3`,
);
if (duplicateClaims.length > 0) failed.push(`${duplicateClaims.length} (loop, slot, attempt) claimed twice or more in the log`);
if (duplicateRows.length > 0) failed.push(`${duplicateRows.length} (loop, slot, attempt) with two rows in loop_runs`);

// 2. No slot decided twice (fired / skipped / buffered once each, and never inside a coalesced or
// missed range, whose ranges do not overlap); every due slot decided.
const decisionRows = await query(
  `SELECT e.stream_id, e.type, e.data, l.name FROM ${Q('events')} e JOIN ${Q('loops')} l ON e.stream_id = 'loop:' || l.id
   WHERE e.type IN ('slot.fired', 'slot.skipped', 'slot.buffered', 'slot.coalesced', 'slot.missed') ORDER BY e.position`,
);
const decidedTwice = [];
const perLoop = new Map();
const decisionCounts = {};
for (const row of decisionRows) {
  const data = JSON.parse(row.data);
  decisionCounts[row.type] = (decisionCounts[row.type] ?? 0) + 1;
  let l = perLoop.get(row.name);
  if (!l) perLoop.set(row.name, (l = { singles: new Map(), ranges: [], decided: 0 }));
  if (row.type === 'slot.coalesced' || row.type === 'slot.missed') {
    l.ranges.push({ from: data.from, to: data.to, type: row.type });
    l.decided += data.count;
  } else {
    const before = l.singles.get(data.slot);
    if (before) decidedTwice.push(`${row.name}: slot ${data.slot} decided twice (${before}, then ${row.type})`);
    l.singles.set(data.slot, row.type);
    l.decided += 1;
  }
}
for (const [name, l] of perLoop) {
  const ranges = [...l.ranges].sort((a, b) => a.from.localeCompare(b.from));
  for (let i = 1; i < ranges.length; i++) {
    if (ranges[i].from <= ranges[i - 1].to) decidedTwice.push(`${name}: ${ranges[i - 1].type} ${ranges[i - 1].from}..${ranges[i - 1].to} overlaps ${ranges[i].type} ${ranges[i].from}..${ranges[i].to}`);
  }
  for (const [slot, type] of l.singles) {
    const inside = ranges.find((r) => r.from <= slot && slot <= r.to);
    if (inside) decidedTwice.push(`${name}: slot ${slot} decided twice (${type}, and ${inside.type} ${inside.from}..${inside.to})`);
  }
}
if (decidedTwice.length > 0) failed.push(`${decidedTwice.length} slot(s) decided twice`);
const undecided = [];
for (const def of LOOP_DEFS) {
  const decided = perLoop.get(def.name)?.decided ?? 0;
  def.decided = decided;
  if (decided !== def.due) undecided.push(`${def.name}: ${def.due} slots due, ${decided} decided`);
}
if (undecided.length > 0) failed.push(`due slots and decisions differ: ${undecided.join('; ')}`);

// 3. Every run terminal; nothing left queued.
const nonTerminal = await query(`SELECT id, loop_name, status, runner_id FROM ${Q('loop_runs')} WHERE status <> ALL($1) ORDER BY claimed_position`, [TERMINAL]);
const leftQueued = await query(`SELECT run_id, loop_id, kind, due_at FROM ${Q('run_queue')} ORDER BY due_at`);
if (nonTerminal.length > 0) failed.push(`${nonTerminal.length} run(s) not terminal after the stop (${[...new Set(nonTerminal.map((r) => r.status))].join(', ')})`);
if (leftQueued.length > 0) failed.push(`${leftQueued.length} queued run(s) never claimed`);

// 4. What ran: one execution per (loop, slot, attempt), each a run the log knows under that key.
const runRows = await query(
  `SELECT id, loop_id, loop_name, slot, attempt, status, runner_id, scheduled_for, claimed_at, finished_at FROM ${Q('loop_runs')} ORDER BY claimed_position`,
);
const runsById = new Map(runRows.map((r) => [r.id, r]));
const executions = safeRead(execLog).split('\n').filter((l) => l.trim() !== '').map((l) => {
  const [key, runId] = l.split(' ');
  return { key, runId };
});
const perKey = new Map();
for (const e of executions) perKey.set(e.key, (perKey.get(e.key) ?? 0) + 1);
const duplicateExecutions = [...perKey].filter(([, n]) => n > 1).map(([key, n]) => `${key} ran ${n} times`);
const strayExecutions = executions
  .filter((e) => {
    const r = runsById.get(e.runId);
    return !r || e.key !== `loop:${r.loop_id}:${r.slot}:${r.attempt}`;
  })
  .map((e) => `${e.key} (${e.runId}) is no run of the log under that key`);
if (duplicateExecutions.length > 0) failed.push(`${duplicateExecutions.length} (loop, slot, attempt) whose command ran more than once`);
if (strayExecutions.length > 0) failed.push(`${strayExecutions.length} execution(s) the log has no run for`);
const spawnedIds = new Set((await query(`SELECT DISTINCT stream_id FROM ${Q('events')} WHERE type = 'process.spawned'`)).map((r) => r.stream_id.slice(4)));
const executedIds = new Set(executions.map((e) => e.runId));
const spawnedNotExecuted = [...spawnedIds].filter((id) => !executedIds.has(id)).length;
const executedNotSpawned = [...executedIds].filter((id) => !spawnedIds.has(id)).length;

// 5. The invariant checker and projections verify, through the binary (a data directory of its
// own: its replica is built from the log), and PostgreSQL's own tables against a rebuild.
const verifyRun = loops(['verify', '--json'], { host: 'check', check: false });
let verify;
try {
  verify = JSON.parse(verifyRun.stdout);
} catch {
  verify = { ok: false, violations: [`loops verify exited ${verifyRun.status}: ${verifyRun.stderr.trim()}`] };
}
verify.exit = verifyRun.status;
if (verifyRun.status !== 0 || !verify.ok) failed.push(`loops verify: exit ${verifyRun.status}, ${verify.violations?.length ?? '?'} violation(s)`);
const projRun = loops(['projections', 'verify', '--json'], { host: 'check', check: false });
let projections;
try {
  projections = JSON.parse(projRun.stdout);
} catch {
  projections = { ok: false, tables: [], error: projRun.stderr.trim() };
}
projections.exit = projRun.status;
if (projRun.status !== 0 || !projections.ok) failed.push(`loops projections verify: exit ${projRun.status}`);
let pgProjections;
{
  const { openPgStore } = await import('../dist/events/pg/index.js');
  const { projections: list } = await import('../dist/projections/registry.js');
  const store = await openPgStore({ url: baseUrl, schema, projections: list, follow: false });
  try {
    pgProjections = await store.verifyProjections();
  } finally {
    await store.end();
  }
  if (!pgProjections.ok) failed.push('PostgreSQL’s projection tables differ from a rebuild');
}
// The checker's replica against PostgreSQL: the same number of events and runs.
let replicaCounts = null;
{
  const Database = (await import('better-sqlite3')).default;
  const db = new Database(join(work, 'check', `pg-${schema}.db`), { readonly: true, fileMustExist: true });
  try {
    replicaCounts = { events: db.prepare('SELECT count(*) AS n FROM events').get().n, runs: db.prepare('SELECT count(*) AS n FROM loop_runs').get().n };
  } finally {
    db.close();
  }
}
const [pgCounts] = await query(`SELECT (SELECT count(*) FROM ${Q('events')})::int AS events, (SELECT count(*) FROM ${Q('loop_runs')})::int AS runs`);
if (replicaCounts.events !== pgCounts.events || replicaCounts.runs !== pgCounts.runs) {
  failed.push(`the replica holds ${replicaCounts.events} events and ${replicaCounts.runs} runs, PostgreSQL ${pgCounts.events} and ${pgCounts.runs}`);
}

// 6. The daemons: none exited by itself, each stopped on SIGTERM.
if (unexpectedExits.length > 0) {
  const byRestart = unexpectedExits.filter((e) => e.duringPgRestart !== null).length;
  failed.push(`${unexpectedExits.length} daemon exit(s) the bench did not cause${byRestart ? ` (${byRestart} around a PostgreSQL restart)` : ''}`);
}
for (const s of stops) {
  if (!s.stopped) failed.push(`daemon ${s.host} did not stop within 30 s of SIGTERM (killed)`);
  // A graceful stop exits 0; death by the signal means its handler was gone (a daemon that failed to start and lingered).
  else if (s.signal) failed.push(`daemon ${s.host} was ended by SIGTERM's default action, not its graceful stop`);
}
for (const x of stalls) failed.push(`daemon ${x.host} (pid ${x.pid}, started ${x.startedAt}) was alive but made no pass for ${STALL_MS / 1000} s (last pass ${x.lastPassAt ?? 'never'}, ${x.passes ?? '?'} passes)`);
// A start that never said "daemon started" while it lived (an exit before that is an unexpected exit, counted above).
const neverReady = starts.filter((s) => s.readyMs === null && !unexpectedExits.some((e) => e.pid === s.pid));
for (const s of neverReady) failed.push(`daemon ${s.host} (pid ${s.pid}, ${s.why} at ${s.at}) never said "daemon started"`);
if (kills.length < killPlan.length) failed.push(`${kills.length} of ${killPlan.length} planned kills done`);
if (pgRestarts.filter((r) => !r.error).length < pgPlan.length) failed.push(`${pgRestarts.filter((r) => !r.error).length} of ${pgPlan.length} PostgreSQL restarts done`);

// 7. What the window exercised: retries that then succeeded, and each overlap policy.
const byLoopStatus = {};
for (const r of runRows) {
  const l = (byLoopStatus[r.loop_name] ??= {});
  l[r.status] = (l[r.status] ?? 0) + 1;
}
const retriedOk = runRows.filter((r) => r.loop_name.startsWith('retry-') && r.attempt > 1 && r.status === 'succeeded').length;
const skippedBy = {};
for (const row of decisionRows.filter((r) => r.type === 'slot.skipped')) {
  const reason = JSON.parse(row.data).reason;
  skippedBy[`${row.name} (${reason})`] = (skippedBy[`${row.name} (${reason})`] ?? 0) + 1;
}
const exercised = {
  retriesSucceeded: retriedOk,
  retriesScheduled: (await query(`SELECT count(*)::int AS n FROM ${Q('events')} WHERE type = 'slot.retry_scheduled'`))[0].n,
  skipped: skippedBy['overlap-skip (overlap)'] ?? 0,
  buffered: decisionRows.filter((r) => r.type === 'slot.buffered' && r.name === 'overlap-buffer-one').length,
  bufferFull: skippedBy['overlap-buffer-one (buffer full)'] ?? 0,
  cancelled: byLoopStatus['overlap-cancel-other']?.cancelled ?? 0,
};
for (const [what, n] of Object.entries(exercised)) if (n === 0) failed.push(`the window exercised no ${what}`);
if (runRows.length === 0) failed.push('no run at all');

// ── figures ──────────────────────────────────────────────────────────────────────────────────
const hostOf = (runner) => (runner ?? '').split(':')[0];
const perHost = {};
for (const r of runRows) perHost[hostOf(r.runner_id)] = (perHost[hostOf(r.runner_id)] ?? 0) + 1;
const takeovers = await query(
  `SELECT type, split_part(meta::jsonb->>'runnerId', ':', 1) AS host, count(*)::int AS n FROM ${Q('events')}
   WHERE type IN ('process.adopted', 'run.abandoned', 'process.lost') GROUP BY 1, 2 ORDER BY 1, 2`,
);
const eventTypes = Object.fromEntries((await query(`SELECT type, count(*)::int AS n FROM ${Q('events')} GROUP BY 1 ORDER BY 2 DESC`)).map((r) => [r.type, r.n]));
const byStatus = {};
for (const r of runRows) byStatus[r.status] = (byStatus[r.status] ?? 0) + 1;
// Runs ended per minute of the window (the drain's in the last).
const perMinute = [];
for (let m = t0; m < end; m += 60_000) {
  const to = m + 60_000 >= end ? Infinity : m + 60_000;
  perMinute.push(runRows.filter((r) => r.finished_at && Date.parse(r.finished_at) >= m && Date.parse(r.finished_at) < to).length);
}
// Firing lateness: a slot's instant → its slot.fired.
const firedLate = (await query(`SELECT at, data::jsonb->>'fireAt' AS fire_at FROM ${Q('events')} WHERE type = 'slot.fired'`))
  .map((r) => Date.parse(r.at) - Date.parse(r.fire_at))
  .sort((a, b) => a - b);
const lateness = { n: firedLate.length, p50: percentile(firedLate, 50), p99: percentile(firedLate, 99), max: firedLate[firedLate.length - 1] ?? NaN };

// After each PostgreSQL restart: how long until each host wrote again (its first event after the
// server was back: a pass, a claim), and what its log said in between.
const reconnects = [];
for (const r of pgRestarts) {
  if (r.upAt === null) continue;
  const next = pgRestarts.find((x) => x.n === r.n + 1)?.stopAsked ?? Infinity;
  const firsts = await query(
    `SELECT split_part(meta::jsonb->>'runnerId', ':', 1) AS host, min(at) AS first FROM ${Q('events')} WHERE at >= $1 GROUP BY 1`,
    [iso(r.upAt)],
  );
  const hosts = {};
  // What the daemons log of it: a store that fails writes makes a daemon "degraded", and its
  // first write that succeeds again "no longer degraded" (daemon.ts); a crash logs neither.
  const logged = {};
  for (const d of daemons) {
    const stamped = safeRead(d.logFile)
      .split('\n')
      .map((l) => /^(\d{4}-\d\d-\d\dT\S+Z) (.*)$/.exec(l))
      .filter((m) => m && Date.parse(m[1]) >= r.stopAsked - 1000 && Date.parse(m[1]) < next);
    const degraded = stamped.find((m) => m[2].startsWith('degraded:'));
    const recovered = stamped.find((m) => m[2].startsWith('no longer degraded'));
    logged[d.host] = {
      degradedAt: degraded ? degraded[1] : null,
      recoveredAt: recovered ? recovered[1] : null,
      /** "no longer degraded", counted from PostgreSQL accepting connections again. */
      recoveredMs: recovered ? Date.parse(recovered[1]) - r.upAt : null,
    };
  }
  for (const d of daemons) {
    const f = firsts.find((x) => x.host === d.host);
    const ms = f && Date.parse(f.first) < next ? Date.parse(f.first) - r.upAt : null;
    hosts[d.host] = ms;
    // (A daemon that crashed meanwhile: the figure includes the bench starting it again.)
    if (ms === null) failed.push(`daemon ${d.host} wrote nothing after PostgreSQL restart ${r.n}`);
  }
  reconnects.push({ n: r.n, stopAsked: iso(r.stopAsked), downMs: r.upAt - r.stoppedAt, upAt: iso(r.upAt), firstWriteMs: hosts, logged, crashed: unexpectedExits.filter((e) => e.duringPgRestart === r.n).map((e) => e.host), error: r.error });
}
// What the daemons' logs say about PostgreSQL (they log no reconnect of their own: a failed pass,
// a degraded store, a crash's error).
const logFindings = {};
for (const d of daemons) {
  const lines = safeRead(d.logFile).split('\n');
  // Its own lines (a timestamp first), what the CLI prints of an error (`loops: …`) and a crash's
  // first line; not stack frames or the printed error object.
  const hits = lines.filter((l) => /^(\S+Z |loops: |\w*Error\b)/.test(l) && /postgres|connection|ECONNREFUSED|57P0|degraded|pass failed|lease|Error\b/i.test(l) && !/^\S+Z \S+: (slot|run|retry)\b.*(succeeded|failed|cancelled|is due|slot\.)/.test(l));
  const distinct = [...new Set(hits.map((l) => l.replace(/^\S+Z /, '').slice(0, 240)))];
  logFindings[d.host] = { lines: hits.length, distinct: distinct.slice(0, 6), bytes: lines.join('\n').length };
}

// ── report ───────────────────────────────────────────────────────────────────────────────────
/** The tables a verify result says differ. */
const differing = (verified) => (verified?.tables ?? []).filter((t) => t.differences?.length).map((t) => t.table);
const result = {
  at: iso(t0),
  command: `node bench/fleet.mjs ${argv.join(' ')}`.trim(),
  daemonBinary: DAEMON_BIN,
  machine: machineInfo(),
  config: {
    seconds: flags.seconds,
    daemons: flags.daemons,
    concurrency: flags.concurrency,
    killEverySeconds: flags.killEvery,
    downSeconds: flags.down,
    pgRestarts: flags.pgRestarts,
    pgDownSeconds: flags.pgDown,
    postgres: flags.url ? 'url' : 'private cluster',
    loops: LOOP_DEFS.map((d) => ({ name: d.name, everyMs: d.everyMs, args: d.args.join(' '), due: d.due, decided: d.decided })),
  },
  setupOverrunMs,
  runs: { total: runRows.length, byStatus, perHost, perMinute, byLoop: byLoopStatus, dueSlots: dueTotal, decisions: decisionCounts, eventTypes, takeovers, lateness },
  executions: { total: executions.length, keys: perKey.size, duplicates: duplicateExecutions, stray: strayExecutions.slice(0, 20), spawnedNotExecuted, executedNotSpawned },
  stalls,
  restarts: { kills, pg: pgRestarts.map((r) => ({ n: r.n, stopAsked: iso(r.stopAsked), downMs: r.upAt && r.stoppedAt ? r.upAt - r.stoppedAt : null, upAt: r.upAt ? iso(r.upAt) : null, error: r.error })), unexpectedExits, daemonStarts: Object.fromEntries(daemons.map((d) => [d.host, d.starts])), starts },
  reconnects,
  logFindings,
  checks: {
    duplicateRuns: duplicateClaims.length + duplicateRows.length,
    duplicateClaims,
    duplicateRows,
    slotsDecidedTwice: decidedTwice.length,
    decidedTwice: decidedTwice.slice(0, 50),
    undecided,
    nonTerminal: nonTerminal.length,
    nonTerminalRuns: nonTerminal.slice(0, 50),
    leftQueued: leftQueued.length,
    verify: { ok: verify.ok === true && verify.exit === 0, exit: verify.exit, events: verify.events, violations: verify.violations ?? [] },
    // On a PostgreSQL store `projections verify --json` is {ok, postgres, replica} (each {ok, events, tables}).
    projections: {
      ok: projections.ok === true && projections.exit === 0,
      exit: projections.exit,
      tables: [
        ...differing(projections),
        ...differing(projections.postgres).map((t) => `postgres ${t}`),
        ...differing(projections.replica).map((t) => `replica ${t}`),
      ],
    },
    pgProjections: { ok: pgProjections.ok, events: pgProjections.events, tables: pgProjections.tables.filter((t) => t.differences?.length).map((t) => t.table) },
    replica: replicaCounts,
    postgres: pgCounts,
    exercised,
  },
  drainMs,
  stops,
  paths: flags.keep ? { work, cluster: cluster?.dir ?? null, schema } : null,
};
result.ok = failed.length === 0;
result.failed = failed;

{
  const write = (text) => (flags.json ? process.stderr : process.stdout).write(text);
  const m = result.machine;
  const count = (v) => Number(v).toLocaleString('en-US');
  const ms = (v) => (v === null || !Number.isFinite(v) ? '-' : `${Math.round(v)} ms`);
  const rows = [
    ['window', `${flags.seconds} s from ${iso(t0)}`, `${flags.daemons} daemons, --concurrency ${flags.concurrency}, ${flags.url ? 'PostgreSQL at --url' : 'a private PostgreSQL cluster'}${process.env.LOOPS_BENCH_CLI ? `; daemons ${DAEMON_BIN}` : ''}`],
    ['loops', `${LOOP_DEFS.length}`, `${LOOP_DEFS.filter((d) => d.name.startsWith('tick-')).length} × every 1s; ${LOOP_DEFS.filter((d) => !d.name.startsWith('tick-')).map((d) => `${d.name} ${d.everyMs / 1000}s`).join(', ')}`],
    ['slots due (decided)', `${count(dueTotal)} (${count(LOOP_DEFS.reduce((n, d) => n + d.decided, 0))})`, Object.entries(decisionCounts).map(([k, v]) => `${k.slice(5)} ${count(v)}`).join(', ')],
    ['runs', count(runRows.length), Object.entries(byStatus).map(([k, v]) => `${k} ${count(v)}`).join(', ')],
    ['runs per host (claimed)', Object.entries(perHost).map(([h, n]) => `${h} ${count(n)}`).join(', '), takeovers.map((t) => `${t.type} ${t.n} by ${t.host}`).join(', ')],
    ['runs ended per minute', perMinute.join(', '), 'the last minute includes the drain'],
    ['firing lateness p50 / p99 / max', `${ms(lateness.p50)} / ${ms(lateness.p99)} / ${ms(lateness.max)}`, 'slot → slot.fired'],
    ['retries / overlap exercised', `${exercised.retriesSucceeded} retries succeeded`, `${exercised.retriesScheduled} retries scheduled; skip ${exercised.skipped}, buffered ${exercised.buffered} (buffer full ${exercised.bufferFull}), cancelled ${exercised.cancelled}`],
    ['kill -9 (daemon node process)', count(kills.length), kills.map((k) => k.host).join(' ')],
    ['daemon starts → "daemon started"', count(starts.length), starts.map((s) => `${s.host} ${s.readyMs === null ? 'never' : ms(s.readyMs)}`).join(', ')],
    ['PostgreSQL restarts', count(pgRestarts.length), pgRestarts.map((r) => `${r.n}: down ${r.upAt && r.stoppedAt ? ((r.upAt - r.stoppedAt) / 1000).toFixed(1) : '?'} s`).join(', ')],
    ['first write after PostgreSQL back', reconnects.map((r) => Object.entries(r.firstWriteMs).map(([h, v]) => `${h} ${ms(v)}`).join(' ')).join(' | ') || '-', 'per restart, per host: its first event in the log'],
    [
      'logged "no longer degraded" after',
      reconnects.map((r) => Object.entries(r.logged).map(([h, v]) => `${h} ${v.recoveredMs === null ? '-' : ms(v.recoveredMs)}`).join(' ')).join(' | ') || '-',
      reconnects.some((r) => Object.values(r.logged).some((v) => v.recoveredAt)) ? 'from the daemons’ logs, counted from PostgreSQL back' : 'the daemons logged no degraded/recovered line',
    ],
    ['daemons alive but idle (no pass 15 s)', count(stalls.length), stalls.map((x) => `${x.host} pid ${x.pid} since ${x.lastPassAt ?? 'its start'}`).join(', ')],
    ['daemon exits not caused by the bench', count(unexpectedExits.length), unexpectedExits.length ? `${unexpectedExits.filter((e) => e.phase === 'running').length} of running daemons, ${unexpectedExits.filter((e) => e.phase === 'start').length} at start; listed below` : ''],
    ['duplicate runs (loop, slot, attempt)', count(duplicateClaims.length + duplicateRows.length), 'run.claimed events and loop_runs rows'],
    ['slots decided twice', count(decidedTwice.length), undecided.length ? `due ≠ decided: ${undecided.length} loop(s)` : 'every due slot decided once'],
    ['runs not terminal / left queued', `${nonTerminal.length} / ${leftQueued.length}`, `drained in ${(drainMs / 1000).toFixed(1)} s`],
    ['commands run twice (executions.log)', count(duplicateExecutions.length), `${count(executions.length)} executions; ${strayExecutions.length} unknown to the log`],
    ['loops verify', verify.ok && verify.exit === 0 ? 'ok' : 'FAIL', `${count(verify.events ?? 0)} events, ${(verify.violations ?? []).length} violations`],
    ['loops projections verify', projections.ok && projections.exit === 0 ? 'ok' : 'FAIL', result.checks.projections.tables.join(', ')],
    ['PostgreSQL tables vs a rebuild (store API)', pgProjections.ok ? 'ok' : 'FAIL', result.checks.pgProjections.tables.join(', ')],
    ['daemon stop (SIGTERM)', stops.map((s) => `${s.host} ${!s.stopped ? 'killed after 30 s' : s.signal ? `died of ${s.signal}` : `exit ${s.code} in ${ms(s.ms)}`}`).join(', '), ''],
  ];
  write(`\nloops fleet — ${iso(t0)}, node ${m.node}, ${m.cpus} × ${m.cpuModel}, load ${m.loadavg.join(' ')}\n\n`);
  write(`${table(['', 'figure', ''], rows)}\n\n`);
  for (const [host, f] of Object.entries(logFindings)) for (const line of f.distinct) write(`log ${host}: ${line}\n`);
  for (const x of stalls) write(`idle ${x.host} pid ${x.pid} (started ${x.startedAt}, last pass ${x.lastPassAt ?? 'never'}): ${x.logTail.join(' / ')}\n`);
  for (const e of unexpectedExits) write(`exit ${e.host} pid ${e.pid} at ${e.at} (${e.phase === 'start' ? 'while starting' : `running for ${e.upForMs} ms`}, code ${e.code}, signal ${e.signal}${e.duringPgRestart ? `, PostgreSQL restart ${e.duringPgRestart}` : ''}): ${e.error}\n`);
  for (const v of [...duplicateClaims.map((d) => `claimed twice: ${d.loop} ${d.slot} attempt ${d.attempt}: ${d.runs}`), ...decidedTwice, ...undecided, ...duplicateExecutions, ...(verify.violations ?? [])].slice(0, 50)) write(`violated  ${v}\n`);
  for (const r of nonTerminal.slice(0, 20)) write(`not terminal  ${r.id} (${r.loop_name}) ${r.status}, runner ${r.runner_id}\n`);
  write(failed.length ? `FAIL: ${failed.join('; ')}\n` : 'PASS\n');
  if (flags.keep) write(`kept: ${work}${cluster ? `, cluster ${cluster.dir} (port ${cluster.port}, running)` : ''}, schema ${schema}\n`);
}
if (flags.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);

// ── cleanup ──────────────────────────────────────────────────────────────────────────────────
if (flags.url && !userSchema && !flags.keep) await query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
if (flags.keep) {
  cleanedUp = true; // leave the cluster running and the directories, to look at
} else {
  if (cluster) await pgCtl(['-m', 'fast', '-w', 'stop']);
  cleanedUp = true;
  if (cluster) rmSync(cluster.dir, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
}
process.exitCode = failed.length ? 1 : 0;
