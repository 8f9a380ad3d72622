#!/usr/bin/env node
// Records the golden event logs under test/fixtures/golden/<scenario>/ by driving a real `loops`
// binary through a few scenarios, each in a fresh temp data directory, then exporting its log
// (events.jsonl, streams.json) and its projection tables (projections.json).
// test/int/golden.int.test.ts replays them on the current code. Re-recording is a deliberate
// act: do it only when a change of history is intended (and the machine version was bumped).
//
//   node scripts/record-golden.mjs [<loops main.js>] [--out <dir>] [--only <scenario,...>] [--projections-only] [--keep]
//
// <loops main.js> defaults to this repository's dist/cli/main.js (run `npm run build` first).
// --projections-only keeps the recorded events.jsonl and streams.json and re-derives only
//   projections.json from them with the given binary (after a deliberate projection version bump).
// --keep leaves the temp data directories in place (their paths are printed).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';

const repo = fileURLToPath(new URL('..', import.meta.url));

// ── arguments ────────────────────────────────────────────────────────────────
const argv = process.argv.slice(2);
let bin = join(repo, 'dist/cli/main.js');
let outRoot = join(repo, 'test/fixtures/golden');
let only = null;
let keep = false;
let projectionsOnly = false;
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--out') outRoot = resolve(argv[++i]);
  else if (a === '--only') only = argv[++i].split(',');
  else if (a === '--keep') keep = true;
  else if (a === '--projections-only') projectionsOnly = true;
  else if (a === '--help' || a === '-h') {
    process.stdout.write('usage: node scripts/record-golden.mjs [<loops main.js>] [--out <dir>] [--only <scenario,...>] [--projections-only] [--keep]\n');
    process.exit(0);
  } else if (a.startsWith('-')) throw new Error(`unknown option ${a}`);
  else bin = resolve(a);
}
if (!existsSync(bin)) throw new Error(`no loops binary at ${bin} (run npm run build, or pass the path of one)`);

// ── driving the binary ───────────────────────────────────────────────────────
/** The environment of every loops process: the inherited one without LOOPS_*, in UTC, no colour. */
function baseEnv(dataDir, extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('LOOPS_')) env[k] = v;
  return { ...env, TZ: 'UTC', NO_COLOR: '1', LOOPS_DATA_DIR: dataDir, ...extra };
}

/** Runs `loops <args>` to completion; throws unless it exits with one of `expect` (default [0]). */
function loops(dataDir, args, { env = {}, expect = [0] } = {}) {
  const r = spawnSync(process.execPath, [bin, ...args], { env: baseEnv(dataDir, env), encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 });
  if (!expect.includes(r.status)) {
    throw new Error(`loops ${args.join(' ')} exited ${r.status ?? r.signal} (expected ${expect.join('|')})\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
  }
  return r;
}

const loopsJson = (dataDir, args, options) => JSON.parse(loops(dataDir, [...args, '--json'], options).stdout);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls `probe` (sync or async) until it returns a truthy value; throws after `timeoutMs`. */
async function waitFor(what, probe, timeoutMs = 30_000, everyMs = 100) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Alive and not a zombie (PID 1 here may not reap orphans, so kill(pid, 0) is not enough). */
function isAlive(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
    return state !== 'Z' && state !== 'X';
  } catch {
    if (process.platform === 'linux') return false;
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }
}

function check(condition, message) {
  if (!condition) throw new Error(`scenario check failed: ${message}`);
}

/** Process groups a scenario started (runs, daemons): killed if the scenario fails half-way. */
const started = new Set();
function killStarted() {
  for (const pid of started) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  }
  started.clear();
}

// ── the scenarios ────────────────────────────────────────────────────────────
// Each gets `root` (a fresh temp dir) and `data` (root/data, not yet existing) and drives the binary.
const scenarios = {
  /** A manual command loop run with run-now: succeeded. */
  async 'command-run'({ data }) {
    loops(data, ['create', 'command', 'hello', '--cmd', 'echo hello', '--manual']);
    const run = loopsJson(data, ['run-now', 'hello']);
    check(run.status === 'succeeded', `run-now status ${run.status}`);
  },

  /**
   * Three runs of a manual loop, then `prune --keep-last 1 --archive`: the two older runs' streams
   * are each one `stream.archived` (their events in an archive file, which is not part of the golden).
   */
  async 'archived-run'({ data }) {
    loops(data, ['create', 'command', 'kept', '--cmd', 'echo kept', '--manual']);
    for (let i = 0; i < 3; i++) check(loopsJson(data, ['run-now', 'kept']).status === 'succeeded', 'run-now succeeded');
    const report = loopsJson(data, ['prune', '--keep-last', '1', '--archive']);
    check(report.archive.streams.length === 2 && report.archive.skipped.length === 0, 'two run streams archived');
  },

  /** A command that sleeps past its --timeout: timed_out (run-now exits 4). */
  async 'timed-out-run'({ data }) {
    loops(data, ['create', 'command', 'sleepy', '--cmd', 'sleep 30', '--timeout', '1s', '--manual']);
    const run = loopsJson(data, ['run-now', 'sleepy'], { expect: [4] });
    check(run.status === 'timed_out', `run-now status ${run.status}`);
  },

  /**
   * A scheduled loop driven by `loops tick` on a shifted clock (LOOPS_NOW): the slot fires, attempt 1
   * fails, a retry is scheduled 1 s after it ended, and the next tick runs attempt 2, which succeeds.
   */
  async 'retried-slot'({ data }) {
    const cmd = 'if [ "$LOOPS_ATTEMPT" = 1 ]; then echo "attempt 1 fails" >&2; exit 1; fi; echo "attempt $LOOPS_ATTEMPT succeeds"';
    loops(data, ['create', 'command', 'flaky', '--cmd', cmd, '--every', '1m', '--attempts', '3', '--retry-delay', '1s'], {
      env: { LOOPS_NOW: '2026-06-01T00:00:00Z' },
    });
    // The first slot is one minute after creation; tick a few seconds after it.
    const first = loopsJson(data, ['tick'], { env: { LOOPS_NOW: '2026-06-01T00:01:05Z' }, expect: [3] });
    check(first.decisions.some((d) => d.type === 'slot.fired'), 'the first tick fired the slot');
    check(first.runs.length === 1 && first.runs[0].status === 'failed', 'attempt 1 failed');
    // The retry is due 1 s after attempt 1 ended (on the shifted clock).
    const second = loopsJson(data, ['tick'], { env: { LOOPS_NOW: '2026-06-01T00:01:10Z' } });
    check(second.runs.length === 1 && second.runs[0].status === 'succeeded' && second.runs[0].attempt === 2, 'attempt 2 succeeded');
  },

  /**
   * A workflow run: `fail` fails, so `after-fail` is skipped and `on-failure` (if: failure()) runs;
   * `long` is cancelled with `loops workflows cancel`, so `after-long` is skipped and `finally`
   * (if: always()) still runs. The run ends cancelled (`workflows run` exits 5).
   */
  async 'cancelled-workflow'({ root, data }) {
    const spec = join(root, 'golden-cancel.yaml');
    writeFileSync(
      spec,
      [
        'name: golden-cancel',
        'description: one step fails (its dependants are skipped), a long one is cancelled',
        'steps:',
        '  - id: fail',
        '    run: echo failing >&2; exit 3',
        '  - id: after-fail',
        '    needs: fail',
        '    run: echo never',
        '  - id: on-failure',
        '    needs: fail',
        '    if: failure()',
        '    run: echo cleaning up after fail',
        '  - id: long',
        '    run: sleep 30',
        '  - id: after-long',
        '    needs: long',
        '    run: echo never',
        '  - id: finally',
        '    needs: long',
        '    if: always()',
        '    run: echo always runs',
        '',
      ].join('\n'),
    );
    loops(data, ['workflows', 'create', spec]);
    const child = spawn(process.execPath, [bin, 'workflows', 'run', 'golden-cancel'], { env: baseEnv(data), stdio: ['ignore', 'pipe', 'pipe'] });
    started.add(child.pid);
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const exited = new Promise((r) => child.on('exit', (code, signal) => r(code ?? signal)));
    const wfRunId = await waitFor('the workflow run to start', () => loopsJson(data, ['workflows', 'runs'])[0]?.id);
    const step = (steps, id) => steps.find((s) => s.stepId === id);
    // Cancel only once `fail` and `on-failure` ended and `long` runs, so the log has the same shape every time.
    await waitFor('fail and on-failure to end while long runs', () => {
      const { steps } = loopsJson(data, ['workflows', 'inspect', wfRunId]);
      return step(steps, 'fail').status === 'failed' && step(steps, 'on-failure').status === 'succeeded' && step(steps, 'long').status === 'running';
    });
    loops(data, ['workflows', 'cancel', wfRunId, '--reason', 'golden: cancel the long step']);
    const code = await Promise.race([exited, sleep(30_000).then(() => 'still running after 30 s')]);
    started.delete(child.pid);
    check(code === 5, `workflows run exited ${code}, expected 5 (cancelled)\n${output}`);
    const { status, steps } = loopsJson(data, ['workflows', 'inspect', wfRunId]);
    const statuses = Object.fromEntries(steps.map((s) => [s.stepId, s.status]));
    check(status === 'cancelled', `workflow run status ${status}`);
    const want = { fail: 'failed', 'after-fail': 'skipped', 'on-failure': 'succeeded', long: 'cancelled', 'after-long': 'skipped', finally: 'succeeded' };
    check(JSON.stringify(statuses) === JSON.stringify(want), `step statuses ${JSON.stringify(statuses)}`);
  },

  /**
   * The `cancelled-workflow` scenario and a `command-run`, recorded by a build whose events carry
   * `meta.ctx` (the hash of every context field each event changed, `steps.<id>` one by one): the
   * golden replay then checks every field of every event, so a change to a context's shape that
   * would alter the recorded hashes fails here.
   */
  async 'context-hashes'(args) {
    await scenarios['cancelled-workflow'](args);
    await scenarios['command-run'](args);
  },

  /**
   * A predecessor-shape workflow (execution: sequential): one step at a time in the predecessor's
   * depth-first order — c, x (it needs c), b (fails under continueOnFailure: the run goes on), d
   * (fails) — and e is skipped by the first failure; the run fails (`workflows run` exits 3).
   */
  async 'sequential-workflow'({ root, data }) {
    const spec = join(root, 'golden-sequential.json');
    const step = (id, code = 0) => ({ type: 'command', command: 'sh', args: ['-c', `echo ${id}; exit ${code}`] });
    writeFileSync(
      spec,
      JSON.stringify({
        name: 'golden-sequential',
        version: 3,
        steps: [
          { id: 'x', dependsOn: ['c'], target: step('x') },
          { id: 'b', description: 'may fail', continueOnFailure: true, target: step('b', 3) },
          { id: 'c', target: step('c') },
          { id: 'd', target: step('d', 4) },
          { id: 'e', target: step('e') },
        ],
      }),
    );
    loops(data, ['workflows', 'create', spec]);
    const run = loopsJson(data, ['workflows', 'run', 'golden-sequential'], { expect: [3] });
    const { status, steps } = loopsJson(data, ['workflows', 'inspect', run.id]);
    check(status === 'failed', `workflow run status ${status}`);
    const statuses = Object.fromEntries(steps.map((s) => [s.stepId, s.status]));
    const want = { x: 'succeeded', b: 'failed', c: 'succeeded', d: 'failed', e: 'skipped' };
    check(JSON.stringify(statuses) === JSON.stringify(want), `step statuses ${JSON.stringify(statuses)}`);
  },

  /**
   * The daemon starts a run (sleep 5), is killed with SIGKILL while it runs, and a new daemon adopts
   * the still-running process and records its real exit from its exit-status file.
   */
  async 'adopted-run'({ data }) {
    const at = new Date(Date.now() + 3000).toISOString();
    loops(data, ['create', 'command', 'slowish', '--cmd', 'sleep 5; echo done', '--at', at]);
    const daemonPid = () => JSON.parse(readFileSync(join(data, 'daemon.json'), 'utf8')).pid;
    loops(data, ['daemon', 'start']);
    const first = daemonPid();
    started.add(first);
    const run = await waitFor('the run to be running', () => {
      const r = loopsJson(data, ['runs'])[0];
      return r?.status === 'running' && r.pid ? r : null;
    });
    started.add(run.pid);
    process.kill(first, 'SIGKILL');
    await waitFor('the killed daemon to be gone', () => !isAlive(first), 10_000, 50);
    started.delete(first);
    check(isAlive(run.pid), 'the run outlived its daemon');
    loops(data, ['daemon', 'start']);
    const second = daemonPid();
    check(second !== first, 'a new daemon started');
    started.add(second);
    await waitFor('the daemon to adopt the run', () => readFileSync(join(data, 'daemon.log'), 'utf8').includes(`adopted run ${run.id}:`), 10_000);
    check(isAlive(run.pid), 'the run was still running when it was adopted');
    const ended = await waitFor('the adopted run to end', () => {
      const r = loopsJson(data, ['runs'])[0];
      return r.status !== 'running' ? r : null;
    }).catch((error) => {
      const state = (pid) => (isAlive(pid) ? 'alive' : 'gone');
      throw new Error(
        `${error.message}; the adopting daemon (pid ${second}) is ${state(second)}, the run's process (pid ${run.pid}) is ${state(run.pid)}\n` +
          `daemon.log:\n${readFileSync(join(data, 'daemon.log'), 'utf8')}`,
      );
    });
    started.delete(run.pid);
    check(ended.status === 'succeeded' && ended.stdout === 'done\n', `adopted run ended ${ended.status}`);
    loops(data, ['daemon', 'stop']);
    started.delete(second);
    const log = readFileSync(join(data, 'daemon.log'), 'utf8');
    // Builds from before process.adopted logged the end as "adopted run X ended"; later ones log
    // the run's end like any other, marked as taken over.
    check(log.includes(`adopted run ${run.id} ended: recorded from its exit-status file`) || log.includes(`run ${run.id} succeeded`), `daemon.log:\n${log}`);
  },
};

// ── exporting a log ──────────────────────────────────────────────────────────
/** Projection tables with their deterministic order: from the binary's own projection registry. */
async function projectionTables(db) {
  const registry = join(dirname(bin), '..', 'projections', 'registry.js');
  const tables = new Map();
  if (existsSync(registry)) {
    const { projections } = await import(pathToFileURL(registry).href);
    for (const p of projections) for (const t of p.tables) tables.set(t.name, { projection: p.name, orderBy: t.orderBy });
  }
  // Anything else that is not one of the log's own tables: ordered by every column.
  const own = new Set(['events', 'streams', 'projections', 'leases']);
  for (const { name } of db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all()) {
    if (own.has(name) || tables.has(name)) continue;
    const columns = db.prepare(`SELECT name FROM pragma_table_info(?)`).all(name).map((c) => c.name);
    tables.set(name, { projection: null, orderBy: columns.join(', ') });
  }
  return tables;
}

/** JSON text → value, refusing text that would not come back byte for byte from JSON.stringify. */
function parseExact(text, where) {
  const value = JSON.parse(text);
  if (JSON.stringify(value) !== text) throw new Error(`${where}: JSON does not round-trip exactly; the golden format would alter it`);
  return value;
}

const openDb = (dataDir, readonly = true) => new Database(join(dataDir, 'loops.db'), { readonly, fileMustExist: true });

/** events.jsonl (data, meta and state parsed) and streams.json, exactly as the log holds them. */
function exportLog(dataDir, outDir) {
  const db = openDb(dataDir);
  try {
    const events = db.prepare('SELECT position, stream_id, version, type, v, data, meta, at, state FROM events ORDER BY position').all();
    const lines = events.map((e) => {
      const where = `event ${e.position} (${e.stream_id} v${e.version})`;
      return JSON.stringify({
        ...e,
        data: parseExact(e.data, `${where} data`),
        meta: parseExact(e.meta, `${where} meta`),
        state: e.state === null ? null : parseExact(e.state, `${where} state`),
      });
    });
    const streams = db.prepare('SELECT * FROM streams ORDER BY stream_id').all();
    rmSync(outDir, { recursive: true, force: true });
    mkdirSync(outDir, { recursive: true });
    writeFileSync(join(outDir, 'events.jsonl'), lines.join('\n') + '\n');
    writeFileSync(join(outDir, 'streams.json'), JSON.stringify(streams, null, 2) + '\n');
    return { events: events.length, streams: streams.map((s) => `${s.stream_id} (${s.version})`) };
  } finally {
    db.close();
  }
}

/** projections.json: the projection versions (the `projections` table) and every projection table's rows. */
async function exportProjections(dataDir, outDir) {
  const db = openDb(dataDir);
  try {
    const versions = Object.fromEntries(db.prepare('SELECT name, version FROM projections ORDER BY name').all().map((r) => [r.name, r.version]));
    const tables = {};
    for (const [name, { projection, orderBy }] of await projectionTables(db)) {
      tables[name] = { projection, orderBy, rows: db.prepare(`SELECT * FROM ${name} ORDER BY ${orderBy}`).all() };
    }
    writeFileSync(join(outDir, 'projections.json'), JSON.stringify({ versions, tables }, null, 2) + '\n');
  } finally {
    db.close();
  }
}

/**
 * --projections-only: the recorded events and streams of `goldenDir` loaded verbatim into a fresh
 * data directory of the binary, its projections rebuilt there (`loops projections rebuild`, then
 * checked with `projections verify`) and exported. The recorded history is left untouched.
 */
async function rederiveProjections(goldenDir, data) {
  loops(data, ['list', '--json']); // creates the database: the log's tables and every projection table
  const db = openDb(data, false);
  try {
    const insert = db.prepare('INSERT INTO events (position, stream_id, version, type, v, data, meta, at, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)');
    const streams = JSON.parse(readFileSync(join(goldenDir, 'streams.json'), 'utf8'));
    db.transaction(() => {
      for (const line of readFileSync(join(goldenDir, 'events.jsonl'), 'utf8').split('\n')) {
        if (line.trim() === '') continue;
        const e = JSON.parse(line);
        insert.run(e.position, e.stream_id, e.version, e.type, e.v, JSON.stringify(e.data), JSON.stringify(e.meta), e.at, e.state === null ? null : JSON.stringify(e.state));
      }
      for (const stream of streams) {
        const columns = Object.keys(stream);
        db.prepare(`INSERT INTO streams (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`).run(...columns.map((c) => stream[c]));
      }
    })();
  } finally {
    db.close();
  }
  loops(data, ['projections', 'rebuild']);
  loops(data, ['projections', 'verify']);
  await exportProjections(data, goldenDir);
}

// ── main ─────────────────────────────────────────────────────────────────────
// --projections-only: every recorded log in the output directory (also ones kept from older builds).
const recorded = () => readdirSync(outRoot, { withFileTypes: true }).filter((d) => d.isDirectory() && existsSync(join(outRoot, d.name, 'events.jsonl'))).map((d) => d.name);
const names = only ?? (projectionsOnly ? recorded() : Object.keys(scenarios));
if (!projectionsOnly) for (const name of names) if (!scenarios[name]) throw new Error(`unknown scenario ${name} (known: ${Object.keys(scenarios).join(', ')})`);
process.stdout.write(`${projectionsOnly ? 're-deriving the projections of the recorded logs' : 'recording'} with ${bin}\n`);
let failed = false;
for (const name of names) {
  const root = mkdtempSync(join(tmpdir(), `loops-golden-${name}-`));
  const data = join(root, 'data');
  const out = join(outRoot, name);
  try {
    if (projectionsOnly) {
      if (!existsSync(join(out, 'events.jsonl'))) throw new Error(`no recorded log in ${out}`);
      await rederiveProjections(out, data);
      process.stdout.write(`${name}: projections.json re-derived\n`);
    } else {
      await scenarios[name]({ root, data });
      const summary = exportLog(data, out);
      await exportProjections(data, out);
      process.stdout.write(`${name}: ${summary.events} events\n${summary.streams.map((s) => `  ${s}\n`).join('')}`);
    }
    if (keep) process.stdout.write(`  data kept in ${data}\n`);
    else rmSync(root, { recursive: true, force: true });
  } catch (error) {
    failed = true;
    killStarted();
    process.stderr.write(`${name}: FAILED: ${error.stack ?? error}\n  data left in ${data}\n`);
  }
}
process.exit(failed ? 1 : 0);
