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
// Two faults of issue 15 more, each on a daemon chosen while it holds running runs:
//  - a pause: the daemon's node process SIGSTOPped (its children — the spawner helper, the runs'
//    processes — go on, as in a GC pause or a partition) for longer than the run lease of the
//    `ttl-3s` loop and than the daemon lease (15 s), then SIGCONT. Checked: no run of it taken
//    over while its lease was live (the leases are read from PostgreSQL during the pause), those
//    whose lease expired taken over by another host (abandoned, the reason naming the runner and
//    its host) and retried, none of its late appends accepted (no event of a taken-over run by the
//    paused runner after the takeover), and the daemon working again after SIGCONT (its daemon
//    lease its own again, passes, claims). A stop that lands inside a PostgreSQL transaction is
//    undone at once and tried again (--pause-anywhere: kept), and reported: the stopped daemon
//    would hold the log head's row lock, and every host's appends would wait for the pause;
//  - a takeover kill: the daemon kill -9ed and left down longer than the run lease (--takeover-down):
//    how long, from the kill, until another host ended each of its runs, and until the retry started.
// And, over the whole log: once a run was taken over, the runner it was taken from never appended
// to it again.
//
//   node bench/fleet.mjs [--quick] [--minutes 10 | --seconds N] [--daemons 3] [--concurrency 8]
//                        [--kill-every S] [--down S] [--pg-restarts N] [--pg-down S]
//                        [--pause S] [--takeovers N] [--takeover-down S] [--pause-anywhere]
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
// --quick: a 60 s window, a pause of 18 s at 3 s, a kill -9 (back in 2 s) at 25 s, one PostgreSQL
// restart at 38 s and a takeover kill (down 8 s) at 50 s (the CI version,
// test/e2e/fleet.e2e.test.ts). The long form pauses once, kills every 45 s, restarts PostgreSQL
// every 2 min and makes a takeover kill (down 40 s: past the 30 s lease of the other loops too)
// every 3 min. No two faults overlap.
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
                          [--pause S] [--takeovers N] [--takeover-down S] [--pause-anywhere]
                          [--url postgres://…] [--json] [--keep]
  --quick          60 s window, a pause, a kill -9, one PostgreSQL restart, a takeover kill (the CI version)
  --minutes N      the window (default 10); --seconds N likewise
  --daemons N      daemons ("hosts" h1…hN), default 3
  --concurrency N  each daemon's --concurrency (default 8)
  --kill-every S   kill -9 a daemon (round robin) every S seconds (default 45, --quick 20; 0: never)
  --down S         how long a killed daemon stays down before it is started again (default 2)
  --pg-restarts N  PostgreSQL restarts, spread over the window (default 1 per 2 minutes, at least 1)
  --pg-down S      how long PostgreSQL stays stopped at each restart (default 3)
  --pause S        SIGSTOP a daemon's node process for S seconds once, then SIGCONT (default 18: past
                   the daemon lease, 15 s; 0: no pause)
  --takeovers N    kill -9 a daemon and leave it down for --takeover-down, N times (default 1 per
                   3 minutes, at least 1; 0: none)
  --takeover-down S  how long such a daemon stays down (default 40, --quick 8; at least 5)
  --pause-anywhere even inside a PostgreSQL transaction (by default such a stop is undone at once and
                   tried again: the stopped daemon would hold the log head's lock, stopping every
                   host's writes for the whole pause — reported either way, a failure with this flag)
  --url URL        use this PostgreSQL server (a new schema in it) instead of a private cluster; no restarts
  --json           the report as JSON on stdout (the table goes to stderr)
  --keep           keep the cluster's and the data directories (and the schema with --url)`;

function usage(message) {
  process.stderr.write(`fleet: ${message}\n${USAGE}\n`);
  process.exit(2);
}

const argv = process.argv.slice(2);
checkOptions(argv, { flags: ['--quick', '--json', '--keep', '--pause-anywhere'], valued: ['--minutes', '--seconds', '--daemons', '--concurrency', '--kill-every', '--down', '--pg-restarts', '--pg-down', '--pause', '--takeovers', '--takeover-down', '--url'] }, USAGE);

function parseFlags(args) {
  const flags = { quick: false, json: false, keep: false, pauseAnywhere: false, url: null, daemons: 3, concurrency: 8, down: 2, pgDown: 3, pause: 18 };
  let seconds = null;
  let killEvery = null;
  let pgRestarts = null;
  let takeovers = null;
  let takeoverDown = null;
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
    else if (a === '--pause-anywhere') flags.pauseAnywhere = true;
    else if (a === '--minutes') seconds = number(0.5) * 60;
    else if (a === '--seconds') seconds = number(30);
    else if (a === '--daemons') flags.daemons = Math.floor(number(1, 9));
    else if (a === '--concurrency') flags.concurrency = Math.floor(number(1));
    else if (a === '--kill-every') killEvery = number(0);
    else if (a === '--down') flags.down = number(0, 60);
    else if (a === '--pg-restarts') pgRestarts = Math.floor(number(0));
    else if (a === '--pg-down') flags.pgDown = number(0, 60);
    else if (a === '--pause') flags.pause = number(0, 300);
    else if (a === '--takeovers') takeovers = Math.floor(number(0));
    else if (a === '--takeover-down') takeoverDown = number(5, 600);
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
  flags.takeovers = takeovers ?? (flags.quick ? 1 : Math.max(1, Math.floor(flags.seconds / 180)));
  flags.takeoverDown = takeoverDown ?? (flags.quick ? 8 : 40);
  if (flags.daemons < 2) {
    // Nobody to take the runs over: asked for, that is a mistake; by default, not done.
    if ((args.includes('--pause') && flags.pause > 0) || (takeovers ?? 0) > 0) usage('--pause and --takeovers need another daemon to take the runs over (--daemons 2 or more)');
    flags.pause = 0;
    flags.takeovers = 0;
  }
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
    /** SIGSTOPped now (the pause): not killed, not watched for stalls. */
    this.paused = false;
    /** When it was last SIGCONTed (ms): the stall watch leaves it a few seconds to pass again. */
    this.resumedAt = null;
    /** Killed by a takeover kill and not started again yet. */
    this.down = false;
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
const SHORT_LEASE_LOOP = 'ttl-3s';
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
  // Runs of 5 s, one a second (overlap allow: ~5 going at once, on every host), under the shortest
  // lease (3 s, renewed every second), with a second attempt: the runs the pause and the takeover
  // kills find going, and that another host takes over 3 s after their runner stopped.
  { name: SHORT_LEASE_LOOP, everyMs: 1000, phaseMs: 150, cmd: `${MARK}; exec sleep 5`, args: ['--overlap', 'allow', '--lease', '3s', '--attempts', '2', '--retry-delay', '1s'] },
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

// ── the faults: kill -9 a daemon, restart PostgreSQL, pause a daemon, takeover kills ────────
// No two overlap (each is judged on its own): PostgreSQL's restarts are placed first (spread evenly;
// --quick: at 64% of the window), with 8 s on either side; then the pause (at 5%, 8% in the long
// form) and its 4 s aftermath, the takeover kills (--quick: at 5/6; else at 60% of each of their
// shares of the window) and theirs, then a kill -9 every --kill-every; each moved later past what
// it would overlap, and dropped when that leaves the window (a kill: its last 10 s).
const busy = [];
/** The first instant ≥ `at` at which [t, t + length) overlaps nothing placed, or null past `latest`. */
function place(at, length, latest) {
  let t = Math.max(0, Math.round(at));
  for (let moved = true; moved; ) {
    moved = false;
    for (const [from, to] of busy) {
      if (t < to && t + length > from) {
        t = to;
        moved = true;
      }
    }
  }
  if (t > latest) return null;
  busy.push([t, t + length]);
  return t;
}
const PG_GUARD = 8000;
/** When (ms after t0) PostgreSQL is stopped. */
const pgPlan = Array.from({ length: flags.pgRestarts }, (_, i) => Math.round(flags.quick && flags.pgRestarts === 1 ? windowMs * 0.64 : (windowMs * (i + 1)) / (flags.pgRestarts + 1)));
for (const at of pgPlan) busy.push([at - PG_GUARD, at + flags.pgDown * 1000 + PG_GUARD]);
/** When the pause starts (one, or none). */
const pausePlan = [];
if (flags.pause > 0) {
  const at = place(Math.max(3000, windowMs * (flags.quick ? 0.05 : 0.08)), (flags.pause + 4) * 1000, windowMs - (flags.pause + 4) * 1000);
  if (at !== null) pausePlan.push(at);
}
/** When a daemon is killed and left down for --takeover-down. */
const takeoverPlan = [];
for (let i = 0; i < flags.takeovers; i++) {
  const want = flags.quick && flags.takeovers === 1 ? (windowMs * 5) / 6 : (windowMs * (i + 0.6)) / flags.takeovers;
  const at = place(want, (flags.takeoverDown + 4) * 1000, windowMs - (flags.takeoverDown + 2) * 1000);
  if (at !== null) takeoverPlan.push(at);
}
/** When a daemon is killed (and started again --down later): every --kill-every, none in the last 10 s. */
const killPlan = [];
if (flags.killEvery > 0) {
  for (let t = (flags.killEvery * 1000) / 2; t < windowMs - 10_000 - flags.down * 1000; t += flags.killEvery * 1000) {
    const at = place(t, (flags.down + 3) * 1000, windowMs - 10_000 - flags.down * 1000);
    if (at !== null) killPlan.push(at);
  }
}
if (pausePlan.length < (flags.pause > 0 ? 1 : 0) || takeoverPlan.length < flags.takeovers) {
  const left = [pausePlan.length < (flags.pause > 0 ? 1 : 0) ? 'the pause' : null, takeoverPlan.length < flags.takeovers ? `${flags.takeovers - takeoverPlan.length} takeover kill(s)` : null].filter(Boolean);
  progress(`the window leaves no room for ${left.join(' and ')}: not done (a longer --seconds makes room)`);
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
    // (Not one SIGCONTed moments ago: what it does after the pause is the pause's to judge.)
    if (candidate.alive && !candidate.paused && !(candidate.resumedAt !== null && Date.now() - candidate.resumedAt < 10_000)) d = candidate;
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

/** The pause and the takeover kills, as they were done (checked after the window). */
const pauses = [];
const takeoverKills = [];

/** This daemon's runner id: the holder of its daemon lease (`daemon:<host>`), when it is this process's. */
async function runnerIdOf(d) {
  const [row] = await query(`SELECT holder FROM ${Q('leases')} WHERE name = $1`, [`daemon:${d.host}`]);
  return row && row.holder.startsWith(`${d.host}:${d.child.pid}:`) ? row.holder : null;
}

/**
 * Of `candidates`, the daemon holding the most running runs, once one holds a run of the
 * short-lease loop (waits up to `waitMs` for that; then the one holding most). With its runner id.
 */
async function pickHolder(candidates, waitMs = 5000) {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const counted = [];
    for (const d of candidates) {
      if (!d.alive || d.paused) continue;
      const runnerId = await runnerIdOf(d).catch(() => null);
      if (!runnerId) continue;
      const [n] = await query(
        `SELECT count(*)::int AS going, count(*) FILTER (WHERE loop_name = $2)::int AS short FROM ${Q('loop_runs')} WHERE runner_id = $1 AND status = 'running'`,
        [runnerId, SHORT_LEASE_LOOP],
      );
      counted.push({ d, runnerId, going: n.going, short: n.short });
    }
    counted.sort((a, b) => b.short - a.short || b.going - a.going);
    if (counted.length > 0 && (counted[0].short > 0 || Date.now() >= deadline)) return counted[0];
    if (Date.now() >= deadline) return null;
    await sleep(200);
  }
}

/**
 * The leases `runnerId` holds, read until `untilMs` every 250 ms: each one's latest expiry seen (a
 * renewal sent just before the process stopped may still commit), when each was first seen
 * expired, and when it was gone (taken over, or released). `extra(now)` runs each round.
 */
async function watchLeases(runnerId, untilMs, extra = async () => {}) {
  const seen = new Map();
  while (Date.now() < untilMs) {
    const now = Date.now();
    try {
      // (BIGINT comes back as a string from this bench's own connections.)
      const rows = (await query(`SELECT name, holder, token, expires_at FROM ${Q('leases')} WHERE holder = $1 OR name = ANY($2)`, [runnerId, [...seen.keys()]])).map((r) => ({ ...r, token: Number(r.token), expires_at: Number(r.expires_at) }));
      const byName = new Map(rows.map((r) => [r.name, r]));
      for (const r of rows) {
        if (r.holder !== runnerId) continue;
        const l = seen.get(r.name) ?? { name: r.name, token: r.token, expiresAt: r.expires_at, expiredSeenAt: null, goneAt: null };
        l.expiresAt = Math.max(l.expiresAt, r.expires_at);
        if (r.expires_at <= now) l.expiredSeenAt ??= now;
        seen.set(r.name, l);
      }
      for (const l of seen.values()) {
        const r = byName.get(l.name);
        if (!r || r.holder !== runnerId || r.token !== l.token) l.goneAt ??= now;
      }
      await extra(now);
    } catch {
      // PostgreSQL busy or restarting: the next round
    }
    await sleep(Math.max(0, Math.min(250, untilMs - Date.now())));
  }
  return [...seen.values()];
}

/**
 * The pause: the node process of the daemon holding the most runs is SIGSTOPped (its children are
 * not: a GC pause or a partition stops the daemon, not the processes it started) for --pause
 * seconds, then SIGCONTed. Meanwhile its leases are read (when each expired, when another took it)
 * and PostgreSQL's sessions idle inside a transaction for 2 s or more (a session of the stopped
 * process, holding the log head's lock, would stop every host's writes).
 */
async function pauseOne(n) {
  const picked = await pickHolder(daemons).catch(() => null);
  if (!picked) {
    pauses.push({ n, error: 'no daemon to pause (none alive with its daemon lease)' });
    return;
  }
  const { d, runnerId } = picked;
  const p = { n, host: d.host, pid: d.child.pid, runnerId, seconds: flags.pause, at: null, resumedAt: null, runningAtPause: picked.going, shortAtPause: picked.short, leases: [], stuckTransactions: [], insideTransaction: [], error: null };
  pauses.push(p);
  d.paused = true;
  // Stopped inside a transaction, the daemon would hold the log head's row lock for the whole pause
  // and every host's appends would wait for it (PostgreSQL ends no idle transaction by itself:
  // idle_in_transaction_session_timeout is 0). Unless --pause-anywhere, such a stop is undone at
  // once (SIGCONT: it was stopped for a second) and tried again a moment later; each is reported.
  for (let attempt = 1; ; attempt++) {
    appendFileSync(d.logFile, `--- fleet: SIGSTOP ${p.pid} (runner ${runnerId}) at ${iso(Date.now())}\n`);
    process.kill(p.pid, 'SIGSTOP');
    p.at = Date.now();
    if (flags.pauseAnywhere || attempt > 10) break;
    let inside = null;
    for (const wait of [300, 700]) {
      await sleep(wait);
      const rows = await query(
        `SELECT pid, (extract(epoch FROM now() - state_change) * 1000)::int AS idle_ms, left(query, 120) AS query FROM pg_stat_activity
         WHERE application_name LIKE 'loops%' AND state LIKE 'idle in transaction%' AND state_change < now() - interval '250 milliseconds'`,
      ).catch(() => []);
      if (rows.length > 0) {
        inside = rows[0];
        break;
      }
    }
    if (inside === null) break;
    process.kill(p.pid, 'SIGCONT');
    appendFileSync(d.logFile, `--- fleet: SIGCONT ${p.pid} at ${iso(Date.now())}: it was stopped inside a transaction; stopped again in a moment\n`);
    p.insideTransaction.push({ at: iso(p.at), session: inside.pid, query: inside.query });
    progress(`SIGSTOP daemon ${d.host}: stopped inside a transaction (session ${inside.pid}: ${inside.query}): SIGCONT, and again in a moment`);
    await sleep(500 + Math.random() * 1000);
  }
  const stuck = new Map();
  try {
    progress(`SIGSTOP daemon ${d.host} (pid ${p.pid}, holding ${picked.going} running run(s), ${picked.short} of ${SHORT_LEASE_LOOP}); SIGCONT in ${flags.pause} s`);
    p.leases = await watchLeases(runnerId, p.at + flags.pause * 1000, async (now) => {
      // Still stopped? (`T` in /proc/<pid>/stat: a SIGCONT from elsewhere would show here.)
      const state = /^\d+ \(.*\) (\S)/.exec(safeRead(`/proc/${p.pid}/stat`))?.[1] ?? null;
      if (state !== null && state !== 'T' && state !== 't') p.runningDuringPause ??= { at: iso(now), afterMs: now - p.at, state };
      const rows = await query(
        `SELECT pid, application_name, (extract(epoch FROM now() - state_change) * 1000)::int AS idle_ms, left(query, 120) AS query FROM pg_stat_activity
         WHERE application_name LIKE 'loops%' AND state LIKE 'idle in transaction%' AND state_change < now() - interval '2 seconds'`,
      );
      const waiting = rows.length ? (await query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE 'loops%' AND wait_event_type = 'Lock'`))[0].n : 0;
      for (const r of rows) {
        const s = stuck.get(r.pid) ?? { pid: r.pid, application: r.application_name, idleMs: 0, query: r.query, sessionsWaitingOnLocks: 0 };
        s.idleMs = Math.max(s.idleMs, r.idle_ms);
        s.sessionsWaitingOnLocks = Math.max(s.sessionsWaitingOnLocks, waiting);
        stuck.set(r.pid, s);
      }
    });
  } finally {
    // Whatever failed meanwhile, the daemon is not left stopped. (The instant read before the
    // signal: the daemon, on another core, may write within the millisecond after it.)
    p.resumedAt = Date.now();
    try {
      process.kill(p.pid, 'SIGCONT');
    } catch {
      // gone
    }
    d.paused = false;
    d.resumedAt = p.resumedAt;
  }
  p.stuckTransactions = [...stuck.values()];
  appendFileSync(d.logFile, `--- fleet: SIGCONT ${p.pid} at ${iso(p.resumedAt)}\n`);
  const taken = p.leases.filter((l) => l.name.startsWith('run:') && l.goneAt !== null).length;
  progress(`SIGCONT daemon ${d.host} after ${((p.resumedAt - p.at) / 1000).toFixed(1)} s; ${taken} of its ${p.leases.filter((l) => l.name.startsWith('run:')).length} run lease(s) gone meanwhile${p.stuckTransactions.length ? `; ${p.stuckTransactions.length} session(s) idle in a transaction meanwhile` : ''}`);
  // Its daemon lease, a few seconds on: its own again (the same token: nobody else takes daemon:<host>)?
  await sleep(4000);
  const [lease] = await query(`SELECT holder, token, expires_at FROM ${Q('leases')} WHERE name = $1`, [`daemon:${d.host}`]).catch(() => []);
  p.daemonLeaseAfter = lease ? { holder: lease.holder, token: Number(lease.token), expiresAt: iso(Number(lease.expires_at)), checkedAt: iso(Date.now()) } : null;
}

/**
 * A takeover kill: the daemon holding the most runs kill -9ed and left down for --takeover-down
 * seconds (its runs' processes go on), its leases read meanwhile; then started again.
 */
async function takeoverKill(n) {
  const picked = await pickHolder(daemons).catch(() => null);
  if (!picked) {
    takeoverKills.push({ n, error: 'no daemon to kill (none alive with its daemon lease)' });
    return;
  }
  const { d, runnerId } = picked;
  const k = { n, host: d.host, pid: d.child.pid, runnerId, down: flags.takeoverDown, at: null, restartedAt: null, newPid: null, runningAtKill: picked.going, shortAtKill: picked.short, leases: [], error: null };
  takeoverKills.push(k);
  d.down = true;
  k.pid = await d.kill9();
  k.at = Date.now();
  progress(`kill -9 daemon ${d.host} (pid ${k.pid}, holding ${picked.going} running run(s), ${picked.short} of ${SHORT_LEASE_LOOP}); down ${flags.takeoverDown} s`);
  k.leases = await watchLeases(runnerId, k.at + flags.takeoverDown * 1000);
  d.down = false;
  if (stopping) return;
  if (!d.alive) k.newPid = d.start('restart after a takeover kill').pid;
  k.restartedAt = Date.now();
}

const actions = [
  ...pgPlan.map((at, i) => ({ at: t0 + at, run: () => restartPg(i + 1) })),
  ...killPlan.map((at) => ({ at: t0 + at, run: () => killOne() })),
  ...pausePlan.map((at, i) => ({ at: t0 + at, run: () => pauseOne(i + 1) })),
  ...takeoverPlan.map((at, i) => ({ at: t0 + at, run: () => takeoverKill(i + 1) })),
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
    // SIGSTOPped (the pause), or SIGCONTed moments ago: its first pass is on its way.
    if (d.paused || (d.resumedAt !== null && now - d.resumedAt < 10_000)) continue;
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
// Up to 90 s (--quick), 180 s otherwise: a takeover kill past the 30 s lease leaves a backlog of
// overlap-cancel-other's slots (each waits while the dead runner's run holds its lease: one every
// 2 s), which runs one after another, 5 s each, once the loop has expired.
const DRAIN_MS = flags.quick ? 90_000 : 180_000;
const drainStart = Date.now();
let pending = null;
while (Date.now() - drainStart < DRAIN_MS) {
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
if (pauses.length < pausePlan.length) failed.push(`${pauses.length} of ${pausePlan.length} planned pauses done`);
if (takeoverKills.length < takeoverPlan.length) failed.push(`${takeoverKills.length} of ${takeoverPlan.length} planned takeover kills done`);
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

const hostOf = (runner) => (runner ?? '').split(':')[0];

// 8. Fencing, over the whole log. A run's events written by the runner holding it — its claim, its
// process's start and end, an adoption, an abandonment; not cancel requests, which anyone appends —
// name that runner (meta.runnerId) and, when fenced, its lease token (meta.leaseToken). Once another
// runner wrote one (it took the lease over: a new token), the runner it was taken from must never
// append to that run again, and no fenced append may carry a token older than one already used.
const OWNER_TYPES = new Set(['run.claimed', 'process.spawn_requested', 'process.spawned', 'process.spawn_failed', 'process.exited', 'process.adopted', 'run.abandoned', 'run.agent_reported', 'run.workflow_started', 'run.workflow_ended']);
const eventsByRun = new Map();
for (const e of await query(
  `SELECT stream_id, version, position, type, at, meta::jsonb->>'runnerId' AS runner, meta::jsonb->>'leaseToken' AS token, data FROM ${Q('events')} WHERE stream_id LIKE 'run:%' ORDER BY stream_id, version`,
)) {
  const id = e.stream_id.slice(4);
  if (!eventsByRun.has(id)) eventsByRun.set(id, []);
  eventsByRun.get(id).push(e);
}
const lateAppends = [];
/** Every takeover in the log: the first event of a run's new holder. */
const runTakeovers = [];
for (const [runId, events] of eventsByRun) {
  let owner = null;
  let maxToken = 0;
  const superseded = new Set();
  for (const e of events) {
    if (!OWNER_TYPES.has(e.type)) continue;
    if (superseded.has(e.runner)) lateAppends.push(`run ${runId}: ${e.type} (position ${e.position}, ${e.at}) appended by runner ${e.runner} after the run was taken over from it`);
    if (e.token !== null) {
      if (Number(e.token) < maxToken) lateAppends.push(`run ${runId}: ${e.type} (position ${e.position}) fenced by token ${e.token} after token ${maxToken} was used`);
      maxToken = Math.max(maxToken, Number(e.token));
    }
    if (owner !== null && e.runner !== owner) {
      superseded.add(owner);
      runTakeovers.push({ runId, from: owner, by: e.runner, type: e.type, at: Date.parse(e.at), position: Number(e.position), reason: e.type === 'run.abandoned' ? JSON.parse(e.data).reason : null });
    }
    owner = e.runner;
  }
}
if (lateAppends.length > 0) failed.push(`${lateAppends.length} append(s) by a runner after its run was taken over, or under an older token (fencing)`);

// 9 and 10. The pause and the takeover kills: what became of each run whose lease the stopped
// runner held (read from PostgreSQL while it was stopped or down).
const runByKey = new Map(runRows.map((r) => [`${r.loop_id}|${r.slot}|${Number(r.attempt)}`, r]));
const executedRuns = new Set(executions.map((e) => e.runId));
const leaseTtlOf = (runId) => {
  const claimed = (eventsByRun.get(runId) ?? []).find((e) => e.type === 'run.claimed');
  return claimed ? (JSON.parse(claimed.data).policies?.leaseMs ?? 30_000) : null;
};
function fatesOf(stop) {
  return stop.leases
    .filter((l) => l.name.startsWith('run:'))
    .map((l) => {
      const runId = l.name.slice(4);
      const row = runsById.get(runId);
      const takeover = runTakeovers.find((t) => t.runId === runId && t.from === stop.runnerId) ?? null;
      const retryRow = row ? runByKey.get(`${row.loop_id}|${row.slot}|${Number(row.attempt) + 1}`) : null;
      const retryClaimed = retryRow ? Date.parse(retryRow.claimed_at) : null;
      return {
        runId,
        loop: row?.loop_name ?? '?',
        attempt: row ? Number(row.attempt) : null,
        status: row?.status ?? '?',
        leaseMs: leaseTtlOf(runId),
        leaseExpiresMs: l.expiresAt - stop.at,
        takenOverBy: takeover ? hostOf(takeover.by) : null,
        takeoverRunner: takeover?.by ?? null,
        takeoverType: takeover?.type ?? null,
        takeoverMs: takeover ? takeover.at - stop.at : null,
        afterExpiryMs: takeover ? takeover.at - l.expiresAt : null,
        // Taken over after the killed host's daemon was started again and before the lease ran
        // out: that start proved its predecessor dead and expired its leases (daemon.ts, start).
        expiredByRestart: takeover !== null && stop.restartedAt != null && takeover.at >= stop.restartedAt && takeover.at < l.expiresAt,
        reason: takeover?.reason ?? null,
        retry: retryRow ? { runId: retryRow.id, host: hostOf(retryRow.runner_id), claimedMs: retryClaimed - stop.at, status: retryRow.status } : null,
        // Its command had run (executions.log): the at-least-once case when it was abandoned.
        commandRan: executedRuns.has(runId),
      };
    });
}
/** The daemon's own log lines from `fromMs` (its timestamped lines) to `toMs`. */
function logLinesOf(host, fromMs, toMs = Infinity) {
  const d = daemons.find((x) => x.host === host);
  return safeRead(d.logFile)
    .split('\n')
    .map((l) => /^(\d{4}-\d\d-\d\dT\S+Z) (.*)$/.exec(l))
    .filter((m) => m && Date.parse(m[1]) >= fromMs && Date.parse(m[1]) < toMs)
    .map((m) => ({ at: Date.parse(m[1]), line: m[2] }));
}
const takeoverChecks = (stop, fates, what) => {
  for (const f of fates) {
    // Never while its lease was live (a few ms: the taker's clock read just before its append's).
    if (f.takeoverMs !== null && f.afterExpiryMs < -20 && !f.expiredByRestart) failed.push(`${what}: run ${f.runId} (${f.loop}) taken over by ${f.takenOverBy} ${-f.afterExpiryMs} ms before its lease expired`);
    if (f.takeoverType === 'run.abandoned' && !(f.reason ?? '').includes(stop.runnerId)) failed.push(`${what}: run ${f.runId} abandoned with a reason that does not name runner ${stop.runnerId}: ${f.reason}`);
  }
};

const pauseReports = [];
for (const p of pauses) {
  if (p.error || p.at === null) {
    failed.push(`pause ${p.n}: ${p.error ?? 'not done'}`);
    continue;
  }
  const fates = fatesOf(p);
  takeoverChecks(p, fates, `pause ${p.n}`);
  for (const t of p.stuckTransactions) {
    failed.push(
      `pause ${p.n}: ${p.host} was stopped inside a transaction (session ${t.pid}, ${t.query}) that stayed open ${(t.idleMs / 1000).toFixed(1)} s, ${t.sessionsWaitingOnLocks} session(s) waiting on its locks: every host's appends waited for the paused daemon (the log head's row lock; no idle_in_transaction_session_timeout)`,
    );
  }
  const pausedMs = p.resumedAt - p.at;
  const takenDuring = fates.filter((f) => f.takenOverBy !== null && f.takenOverBy !== p.host && f.takeoverMs <= pausedMs);
  if (takenDuring.length === 0) failed.push(`pause ${p.n}: no run of the paused daemon ${p.host} was taken over by another host while it was stopped (it held ${fates.length} run lease(s))`);
  // A run whose lease was still live when it was SIGCONTed is its own: nobody took it over meanwhile.
  const liveAtResume = fates.filter((f) => f.leaseExpiresMs > pausedMs);
  for (const f of liveAtResume) if (f.takeoverMs !== null && f.takeoverMs <= pausedMs) failed.push(`pause ${p.n}: run ${f.runId} taken over while its lease was live`);
  // A stopped process writes nothing (a commit already on the wire may land in its first second).
  const frozenEvents = await query(
    `SELECT position, stream_id, type, at FROM ${Q('events')} WHERE meta::jsonb->>'runnerId' = $1 AND at > $2 AND at < $3 ORDER BY position`,
    [p.runnerId, iso(p.at + 1000), iso(p.resumedAt)],
  );
  const frozen = { n: frozenEvents.length };
  // Its own log lines stamped while it was stopped (a stopped process writes none).
  if (p.runningDuringPause) failed.push(`pause ${p.n}: ${p.host} (pid ${p.pid}) was found running (state ${p.runningDuringPause.state}) ${(p.runningDuringPause.afterMs / 1000).toFixed(1)} s into its pause: something else continued it`);
  const loggedWhileStopped = logLinesOf(p.host, p.at + 1000, p.resumedAt);
  if (loggedWhileStopped.length > 0) failed.push(`pause ${p.n}: ${p.host} logged ${loggedWhileStopped.length} line(s) while it was stopped, the first: ${iso(loggedWhileStopped[0].at)} ${loggedWhileStopped[0].line.slice(0, 200)}`);
  if (frozen.n > 0) failed.push(`pause ${p.n}: ${frozen.n} event(s) appended by the stopped runner ${p.runnerId} while it was stopped (${iso(p.at)}–${iso(p.resumedAt)}): ${frozenEvents.slice(0, 5).map((e) => `${e.type} ${e.stream_id} at ${e.at} (position ${e.position})`).join('; ')}`);
  // After SIGCONT: it works again (passes, claims) with its daemon lease its own.
  const after = await query(`SELECT type, count(*)::int AS n FROM ${Q('events')} WHERE meta::jsonb->>'runnerId' = $1 AND at >= $2 GROUP BY 1`, [p.runnerId, iso(p.resumedAt)]);
  const claimsAfter = after.find((r) => r.type === 'run.claimed')?.n ?? 0;
  const eventsAfter = after.reduce((n, r) => n + r.n, 0);
  // (Unless it was started again since — killed later in the window — and its lease is its successor's.)
  const stillSame = daemons.find((x) => x.host === p.host).child?.pid === p.pid;
  if (claimsAfter === 0) failed.push(`pause ${p.n}: daemon ${p.host} claimed no run after SIGCONT`);
  const daemonLease = p.leases.find((l) => l.name === `daemon:${p.host}`) ?? null;
  if (p.daemonLeaseAfter?.holder !== p.runnerId && stillSame) failed.push(`pause ${p.n}: daemon ${p.host} runs on after SIGCONT but its daemon lease is ${p.daemonLeaseAfter ? `held by ${p.daemonLeaseAfter.holder}` : 'gone'}`);
  // What it said about it: its own log lines in the 10 s from SIGCONT (not the decisions it logs,
  // which are mostly other hosts' caught up) about leases, fencing, or the runs it held.
  const heldIds = new Set(fates.map((f) => f.runId));
  const said = logLinesOf(p.host, p.resumedAt - 1000, p.resumedAt + 10_000).filter(
    (l) => !/^\S+: (slot|loop)\.\w+ \{/.test(l.line) && (/lease|fenc|taken over|does not accept|no longer|lost|stopping|degraded/i.test(l.line) || [...heldIds].some((id) => l.line.includes(id))),
  );
  pauseReports.push({
    n: p.n,
    host: p.host,
    pid: p.pid,
    runnerId: p.runnerId,
    stoppedAt: iso(p.at),
    pausedMs,
    runningAtPause: p.runningAtPause,
    runs: fates,
    takenOver: takenDuring.length,
    endedByItself: fates.filter((f) => f.takenOverBy === null).length,
    daemonLease: {
      expiredAfterMs: daemonLease ? daemonLease.expiresAt - p.at : null,
      seenExpiredDuringPause: daemonLease?.expiredSeenAt != null,
      tokenBefore: daemonLease?.token ?? null,
      after: p.daemonLeaseAfter,
    },
    eventsWhileStopped: frozen.n,
    eventsWhileStoppedList: frozenEvents.slice(0, 20),
    runningDuringPause: p.runningDuringPause ?? null,
    loggedWhileStopped: loggedWhileStopped.slice(0, 20).map((l) => `${iso(l.at)} ${l.line}`),
    eventsAfter,
    claimsAfter,
    stuckTransactions: p.stuckTransactions,
    insideTransaction: p.insideTransaction,
    logAfterResume: said.map((l) => `${iso(l.at)} ${l.line}`).slice(0, 30),
  });
}

const takeoverReports = [];
for (const k of takeoverKills) {
  if (k.error || k.at === null) {
    failed.push(`takeover kill ${k.n}: ${k.error ?? 'not done'}`);
    continue;
  }
  const fates = fatesOf(k);
  takeoverChecks(k, fates, `takeover kill ${k.n}`);
  const downMs = (k.restartedAt ?? Date.now()) - k.at;
  for (const f of fates) {
    // Its lease expired well before the host came back: another host must have taken it over by then.
    if (f.leaseExpiresMs < downMs - 3000 && !(f.takenOverBy !== null && f.takenOverBy !== k.host && f.takeoverMs <= downMs)) {
      failed.push(`takeover kill ${k.n}: run ${f.runId} (${f.loop}): its lease expired ${((downMs - f.leaseExpiresMs) / 1000).toFixed(1)} s before ${k.host} came back, and no other host took it over`);
    }
  }
  const byOthers = fates.filter((f) => f.takenOverBy !== null && f.takenOverBy !== k.host);
  if (byOthers.length === 0) failed.push(`takeover kill ${k.n}: no run of ${k.host} was taken over by another host (it held ${fates.length} run lease(s))`);
  takeoverReports.push({ n: k.n, host: k.host, pid: k.pid, runnerId: k.runnerId, killedAt: iso(k.at), restartedAt: k.restartedAt ? iso(k.restartedAt) : null, downMs, runningAtKill: k.runningAtKill, runs: fates });
}
// The takeover figures, per lease time-to-live: from the kill to the event of another host that
// ended (or adopted) each run, from its lease's expiry to that, and from the kill to its retry's claim.
const sortedOf = (values) => values.filter((v) => v !== null && Number.isFinite(v)).sort((a, b) => a - b);
const takeoverFigures = {};
for (const r of takeoverReports) {
  for (const f of r.runs) {
    if (f.takenOverBy === null || f.takenOverBy === r.host || f.expiredByRestart) continue;
    const g = (takeoverFigures[f.leaseMs] ??= { leaseMs: f.leaseMs, takeoverMs: [], afterExpiryMs: [], retryClaimedMs: [], retryHosts: {}, types: {} });
    g.takeoverMs.push(f.takeoverMs);
    g.afterExpiryMs.push(f.afterExpiryMs);
    g.types[f.takeoverType] = (g.types[f.takeoverType] ?? 0) + 1;
    if (f.retry) {
      g.retryClaimedMs.push(f.retry.claimedMs);
      g.retryHosts[f.retry.host] = (g.retryHosts[f.retry.host] ?? 0) + 1;
    }
  }
}
for (const g of Object.values(takeoverFigures)) {
  for (const key of ['takeoverMs', 'afterExpiryMs', 'retryClaimedMs']) {
    const sorted = sortedOf(g[key]);
    g[key] = { n: sorted.length, p50: percentile(sorted, 50), max: sorted[sorted.length - 1] ?? null, all: sorted };
  }
}

// ── figures ──────────────────────────────────────────────────────────────────────────────────
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
    pauseSeconds: flags.pause,
    takeovers: flags.takeovers,
    takeoverDownSeconds: flags.takeoverDown,
    postgres: flags.url ? 'url' : 'private cluster',
    loops: LOOP_DEFS.map((d) => ({ name: d.name, everyMs: d.everyMs, args: d.args.join(' '), due: d.due, decided: d.decided })),
  },
  setupOverrunMs,
  runs: { total: runRows.length, byStatus, perHost, perMinute, byLoop: byLoopStatus, dueSlots: dueTotal, decisions: decisionCounts, eventTypes, takeovers, lateness },
  executions: { total: executions.length, keys: perKey.size, duplicates: duplicateExecutions, stray: strayExecutions.slice(0, 20), spawnedNotExecuted, executedNotSpawned },
  stalls,
  restarts: { kills, pauses: pauses.map((p) => ({ n: p.n, host: p.host ?? null, at: p.at ? iso(p.at) : null, resumedAt: p.resumedAt ? iso(p.resumedAt) : null, error: p.error })), takeoverKills: takeoverKills.map((k) => ({ n: k.n, host: k.host ?? null, pid: k.pid ?? null, at: k.at ? iso(k.at) : null, newPid: k.newPid ?? null, error: k.error })), pg: pgRestarts.map((r) => ({ n: r.n, stopAsked: iso(r.stopAsked), downMs: r.upAt && r.stoppedAt ? r.upAt - r.stoppedAt : null, upAt: r.upAt ? iso(r.upAt) : null, error: r.error })), unexpectedExits, daemonStarts: Object.fromEntries(daemons.map((d) => [d.host, d.starts])), starts },
  reconnects,
  pauses: pauseReports,
  takeoverKills: takeoverReports,
  takeoverFigures,
  fencing: { takeovers: runTakeovers.length, takeoversByType: runTakeovers.reduce((m, t) => ({ ...m, [t.type]: (m[t.type] ?? 0) + 1 }), {}), lateAppends },
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
  const sec = (v) => (v === null || !Number.isFinite(v) ? '-' : `${(v / 1000).toFixed(1)} s`);
  /** `runs` of a stopped daemon `host`: who ended them, when (from `since`), and their retries. */
  const describeTakeovers = (runs, host, since) => {
    const others = runs.filter((f) => f.takenOverBy !== null && f.takenOverBy !== host);
    if (others.length === 0) return 'none taken over by another host';
    const t = sortedOf(others.map((f) => f.takeoverMs));
    const retries = sortedOf(others.map((f) => f.retry?.claimedMs ?? null));
    return `by ${[...new Set(others.map((f) => f.takenOverBy))].join('/')} at +${sec(t[0])}…+${sec(t[t.length - 1])} from ${since} (leases ${[...new Set(others.map((f) => `${f.leaseMs / 1000} s`))].join(', ')})${retries.length ? `, retries claimed at +${sec(retries[0])}…+${sec(retries[retries.length - 1])}` : ''}`;
  };
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
    ...pauseReports.map((p) => [
      `pause: SIGSTOP ${p.host}'s node process ${(p.pausedMs / 1000).toFixed(1)} s`,
      `${p.takenOver} of ${p.runs.length} runs taken over`,
      `held ${p.runs.length} run lease(s); ${describeTakeovers(p.runs, p.host, 'SIGSTOP')}; ${p.endedByItself} ended by ${p.host} itself after SIGCONT${p.insideTransaction.length ? `; ${p.insideTransaction.length} earlier SIGSTOP(s) landed inside a transaction (undone at once: the fleet's appends would have waited for the pause)` : ''}`,
    ]),
    ...pauseReports.map((p) => [
      `pause: ${p.host} after SIGCONT`,
      `${p.claimsAfter} runs claimed`,
      `daemon lease expired at +${((p.daemonLease.expiredAfterMs ?? NaN) / 1000).toFixed(1)} s${p.daemonLease.seenExpiredDuringPause ? ' (seen expired)' : ''}, after SIGCONT ${p.daemonLease.after ? (p.daemonLease.after.holder === p.runnerId ? `its own again (token ${p.daemonLease.after.token}, was ${p.daemonLease.tokenBefore})` : `held by ${p.daemonLease.after.holder}`) : 'gone'}; ${p.eventsAfter} events after, ${p.eventsWhileStopped} while stopped${p.stuckTransactions.length ? `; STOPPED INSIDE A TRANSACTION: ${p.stuckTransactions.map((t) => `session ${t.pid} idle ${(t.idleMs / 1000).toFixed(1)} s, ${t.sessionsWaitingOnLocks} waiting on locks`).join(', ')}` : ''}`,
    ]),
    ...Object.values(takeoverFigures).map((g) => [
      `takeover after kill -9, lease ${g.leaseMs / 1000} s`,
      `p50 ${sec(g.takeoverMs.p50)} / max ${sec(g.takeoverMs.max)}`,
      `${g.takeoverMs.n} run(s) ended by another host (${Object.entries(g.types).map(([t, n]) => `${t} ${n}`).join(', ')}), from the kill; ${sec(g.afterExpiryMs.p50)} / ${sec(g.afterExpiryMs.max)} after the lease expired; retry claimed at p50 ${sec(g.retryClaimedMs.p50)} / max ${sec(g.retryClaimedMs.max)} (${Object.entries(g.retryHosts).map(([h, n]) => `${h} ${n}`).join(', ') || 'none'})`,
    ]),
    ...takeoverReports.map((r) => [
      `takeover kill ${r.n}: ${r.host} down ${(r.downMs / 1000).toFixed(1)} s`,
      `${r.runs.filter((f) => f.takenOverBy !== null && f.takenOverBy !== r.host).length} of ${r.runs.length} runs taken over`,
      `${describeTakeovers(r.runs.filter((f) => !f.expiredByRestart), r.host, 'the kill')}${r.runs.some((f) => f.expiredByRestart) ? `; ${r.runs.filter((f) => f.expiredByRestart).length} more by ${[...new Set(r.runs.filter((f) => f.expiredByRestart).map((f) => f.takenOverBy))].join('/')} right after ${r.host} came back and expired its predecessor's leases (before their own expiry; ${r.host} could have checked their processes)` : ''}${r.runs.some((f) => f.takenOverBy === r.host) ? `; ${r.runs.filter((f) => f.takenOverBy === r.host).length} recovered by ${r.host} itself once back` : ''}`,
    ]),
    ['late appends accepted after a takeover', count(lateAppends.length), `${runTakeovers.length} takeovers in the log (${Object.entries(result.fencing.takeoversByType).map(([t, n]) => `${t} ${n}`).join(', ')}); none appended to by the runner it was taken from`],
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
  for (const r of [...pauseReports.map((p) => ({ ...p, what: `pause ${p.n} (${p.host})`, since: 'SIGSTOP' })), ...takeoverReports.map((k) => ({ ...k, what: `takeover kill ${k.n} (${k.host})`, since: 'kill' }))]) {
    for (const f of r.runs) {
      write(
        `${r.what}: run ${f.runId} ${f.loop} attempt ${f.attempt}, lease ${f.leaseMs / 1000} s expiring +${sec(f.leaseExpiresMs)} from the ${r.since}: ${f.status}` +
          (f.takeoverType ? `, ${f.takeoverType} by ${f.takenOverBy} at +${sec(f.takeoverMs)} (${f.expiredByRestart ? `its lease expired by ${r.host}'s restart` : `${sec(f.afterExpiryMs)} after expiry`})` : ', not taken over') +
          (f.retry ? `; retry ${f.retry.runId} claimed by ${f.retry.host} at +${sec(f.retry.claimedMs)} (${f.retry.status})` : '') +
          (f.commandRan ? '' : '; its command never ran') +
          (f.reason ? `; reason: ${f.reason}` : '') +
          '\n',
      );
    }
  }
  for (const p of pauseReports) for (const line of p.logAfterResume) write(`log ${p.host} after SIGCONT: ${line.slice(0, 300)}\n`);
  for (const v of lateAppends.slice(0, 20)) write(`late append  ${v}\n`);
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
