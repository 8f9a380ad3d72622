// `node bench/run.mjs --breakdown`: where the time of (a) and (b) goes. Ablations measured from
// outside the code (a second SqliteEventLog without validation / without projections, the same
// work at synchronous=OFF, the executor with and without its output files), micro-costs of the
// pieces an append or a run is made of, and what one commit writes (WAL frames, B-trees).
// Nothing here changes src; numbers are medians of interleaved repetitions, like the main table.
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fmt, makeTempDir, median, now, removeTempDir, table, walStats } from './lib.mjs';

/** Runs every case `batch` times per repetition, rotating the order; returns median µs/op. */
async function interleave(cases, { reps, batch }) {
  const names = Object.keys(cases);
  const samples = Object.fromEntries(names.map((n) => [n, []]));
  for (const n of names) for (let i = 0; i < Math.min(batch, 20); i++) await cases[n](); // warm-up
  for (let r = 0; r < reps; r++) {
    for (let k = 0; k < names.length; k++) {
      const name = names[(k + r) % names.length];
      const fn = cases[name];
      const t0 = now();
      for (let i = 0; i < batch; i++) await fn();
      samples[name].push(((now() - t0) / batch) * 1000);
    }
  }
  return Object.fromEntries(names.map((n) => [n, median(samples[n])]));
}

/** Same, for synchronous functions (no await in the loop, so nothing but the work is timed). */
function interleaveSync(cases, { reps, batch }) {
  const names = Object.keys(cases);
  const samples = Object.fromEntries(names.map((n) => [n, []]));
  for (const n of names) for (let i = 0; i < Math.min(batch, 50); i++) cases[n]();
  for (let r = 0; r < reps; r++) {
    for (let k = 0; k < names.length; k++) {
      const name = names[(k + r) % names.length];
      const fn = cases[name];
      const t0 = now();
      for (let i = 0; i < batch; i++) fn();
      samples[name].push(((now() - t0) / batch) * 1000);
    }
  }
  return Object.fromEntries(names.map((n) => [n, median(samples[n])]));
}

async function pausingAppender(L, rt, log, name) {
  const loop = await L.createCommandLoop(rt, { name, command: 'true', shell: false, schedule: { manual: true } });
  const streamId = `loop:${loop.id}`;
  let version = (await rt.log.streamInfo(streamId)).version;
  let paused = false;
  return async () => {
    const event = paused
      ? { type: 'loop.resumed', data: { reason: null, nextRunAt: null }, state: 'active' }
      : { type: 'loop.paused', data: { reason: null }, state: 'paused' };
    version = (await log.append(streamId, [{ ...event, at: L.isoNow(rt.clock), meta: { runnerId: rt.runnerId } }], {
      expectedVersion: version,
    })).version;
    paused = !paused;
  };
}

function rawInserter(Database, file, synchronous, payloadBytes) {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${synchronous}`);
  db.exec('CREATE TABLE raw_events (id INTEGER PRIMARY KEY, payload TEXT NOT NULL)');
  const insert = db.prepare('INSERT INTO raw_events (payload) VALUES (?)');
  const payload = 'x'.repeat(payloadBytes);
  return { db, insert: () => insert.run(payload) };
}

/** Frames, commits and touched B-trees for `count` calls of `fn` on `db` (WAL kept, not checkpointed). */
async function walProfile(db, walFile, fn, count) {
  const pageSize = db.pragma('page_size', { simple: true });
  const auto = db.pragma('wal_autocheckpoint', { simple: true });
  db.pragma('wal_autocheckpoint = 0');
  db.pragma('wal_checkpoint(TRUNCATE)');
  for (let i = 0; i < count; i++) await fn();
  const stats = walStats(walFile, pageSize);
  let btrees = null;
  try {
    const owner = new Map(db.prepare('SELECT name, pageno FROM dbstat').all().map((r) => [r.pageno, r.name]));
    const counts = new Map();
    for (const page of stats.pages) {
      const name = owner.get(page) ?? (page === 1 ? '(header)' : '(other)');
      counts.set(name, (counts.get(name) ?? 0) + 1);
    }
    btrees = Object.fromEntries([...counts].map(([k, v]) => [k, Math.round((v / count) * 100) / 100]));
  } catch {
    // dbstat not compiled in: frame counts only
  }
  db.pragma(`wal_autocheckpoint = ${auto}`);
  return { framesPerOp: stats.frames / count, commitsPerOp: stats.commits / count, btreesPerOp: btrees };
}

export async function runBreakdown({ L, Database, execa, quick, progress, print }) {
  const reps = quick ? 3 : 7;
  const out = {};
  const lines = [];
  const section = (title) => lines.push('', title);

  // ── (a) append ────────────────────────────────────────────────────────────────────────────
  progress('breakdown: append …');
  {
    const dirFull = makeTempDir('bd-append');
    const dirOff = makeTempDir('bd-append-off');
    const rt = await L.openRuntime({ dataDir: dirFull });
    const rtOff = await L.openRuntime({ dataDir: dirOff });
    rtOff.db.pragma('synchronous = OFF');
    const noValidate = new L.SqliteEventLog(rt.db, { handlers: [L.inlineHandler()], validate: false });
    const noProjections = new L.SqliteEventLog(rt.db, { handlers: [], validate: true });
    const bare = new L.SqliteEventLog(rt.db, { handlers: [], validate: false });
    const actorLoop = await L.createCommandLoop(rt, { name: 'bd-actor', command: 'true', shell: false, schedule: { manual: true } });
    const actor = await L.DurableActor.load(rt, `loop:${actorLoop.id}`);
    const actorRecord = () =>
      actor.state === 'active' ? actor.record('loop.paused', { reason: null }) : actor.record('loop.resumed', { reason: null, nextRunAt: null });
    const payloadBytes = 134;
    const rawFull = rawInserter(Database, join(dirFull, 'raw.db'), 'FULL', payloadBytes);
    const rawOff = rawInserter(Database, join(dirOff, 'raw.db'), 'OFF', payloadBytes);
    try {
      const full = await interleave(
        {
          'raw INSERT, 1 row/tx': rawFull.insert,
          'log.append (runtime: validate + projections)': await pausingAppender(L, rt, rt.log, 'bd-a'),
          'log.append, validate: false': await pausingAppender(L, rt, noValidate, 'bd-b'),
          'log.append, no projections': await pausingAppender(L, rt, noProjections, 'bd-c'),
          'log.append, neither': await pausingAppender(L, rt, bare, 'bd-d'),
          'DurableActor.record (machine step + append)': actorRecord,
        },
        { reps, batch: quick ? 100 : 250 },
      );
      const off = await interleave(
        {
          'raw INSERT, 1 row/tx': rawOff.insert,
          'log.append (runtime: validate + projections)': await pausingAppender(L, rtOff, rtOff.log, 'bd-off'),
        },
        { reps, batch: quick ? 500 : 2000 },
      );
      // Micro-costs of the pieces (hot loop: lower bounds of what they cost in situ).
      const machine = L.getMachine(L.currentMachines.loop);
      const target = { kind: 'command', command: 'true', args: [], shell: false, cwd: null, env: {} };
      // The policies a command loop gets by default (the shape run.claimed carries).
      const policies = L.buildPolicies({ name: 'x', command: 'true', schedule: { manual: true } });
      const claimed = {
        runId: 'run_x', loopId: 'loop_x', loopName: 'x', slot: 'manual:run_x', scheduledFor: new Date().toISOString(),
        attempt: 1, trigger: 'manual', target, policies, runnerId: 'host:1:abcdef', leaseToken: 1,
      };
      const pausedEvent = { type: 'loop.paused', at: new Date().toISOString(), data: { reason: null } };
      if (actor.state !== 'active') await actorRecord(); // loop.paused needs an active loop
      const snap = actor.snapshot;
      const micro = interleaveSync(
        {
          'db.transaction(fn) (wrapper built per append)': () => rt.db.transaction(() => 0),
          'db.prepare(SELECT … FROM leases WHERE name = ?)': () => rt.db.prepare('SELECT * FROM leases WHERE name = ?'),
          'validateEventData(loop.paused)': () => L.validateEventData('loop.paused', { reason: null }),
          'validateEventData(run.claimed)': () => L.validateEventData('run.claimed', claimed),
          'step(loop machine, loop.paused) (xstate transition)': () => L.step(machine, snap, pausedEvent),
          'JSON.stringify ×3 (data, meta, state)': () => {
            JSON.stringify({ reason: null });
            JSON.stringify({ runnerId: 'host:1:abcdef' });
            JSON.stringify('paused');
          },
        },
        { reps, batch: 2000 },
      );
      const wal = await walProfile(rt.db, join(dirFull, 'loops.db-wal'), await pausingAppender(L, rt, rt.log, 'bd-wal'), 100);
      const walRaw = await walProfile(rawFull.db, join(dirFull, 'raw.db-wal'), rawFull.insert, 100);
      out.append = { synchronousFull: full, synchronousOff: off, micro, wal: { loops: wal, raw: walRaw } };

      section('(a) append — µs per event, one event per transaction (medians)');
      lines.push(
        table(
          ['case', 'FULL', 'OFF'],
          Object.entries(full).map(([k, v]) => [k, fmt(v, 'µs'), off[k] !== undefined ? fmt(off[k], 'µs') : '']),
          ['', 'r', 'r'],
        ),
      );
      lines.push(
        `fsync + WAL I/O share (FULL − OFF): loops ${fmt(full['log.append (runtime: validate + projections)'] - off['log.append (runtime: validate + projections)'], 'µs')}, raw ${fmt(full['raw INSERT, 1 row/tx'] - off['raw INSERT, 1 row/tx'], 'µs')}`,
      );
      lines.push(
        `WAL per commit: loops ${wal.framesPerOp.toFixed(2)} frames, raw ${walRaw.framesPerOp.toFixed(2)} frames` +
          (wal.btreesPerOp ? `; loops pages by B-tree: ${Object.entries(wal.btreesPerOp).map(([k, v]) => `${k} ${v}`).join(', ')}` : ''),
      );
      section('(a) micro-costs, hot loop (lower bounds)');
      lines.push(table(['piece', 'µs'], Object.entries(micro).map(([k, v]) => [k, fmt(v, 'µs')]), ['', 'r']));
    } finally {
      rawFull.db.close();
      rawOff.db.close();
      rt.close();
      rtOff.close();
      removeTempDir(dirFull);
      removeTempDir(dirOff);
    }
  }

  // ── (b) run ───────────────────────────────────────────────────────────────────────────────
  progress('breakdown: run …');
  {
    const dir = makeTempDir('bd-run');
    const dirOff = makeTempDir('bd-run-off');
    const rt = await L.openRuntime({ dataDir: dir });
    const rtOff = await L.openRuntime({ dataDir: dirOff });
    rtOff.db.pragma('synchronous = OFF');
    const spec = { command: 'true', args: [], shell: false, cwd: null, env: {}, deadline: null };
    let n = 0;
    try {
      const loop = await L.createCommandLoop(rt, { name: 'bd-true', command: 'true', shell: false, schedule: { manual: true } });
      const loopOff = await L.createCommandLoop(rtOff, { name: 'bd-true', command: 'true', shell: false, schedule: { manual: true } });
      const cases = {
        'child_process.spawn(true), stdio ignore': () =>
          new Promise((resolve, reject) => spawn('true', [], { stdio: 'ignore' }).once('exit', resolve).once('error', reject)),
        "await execa('true')  [baseline of (b)]": () => execa('true', [], { reject: false }),
        'spawnProcess (executor), no output files': async () => {
          const handle = await L.spawnProcess(spec, L.systemClock);
          await handle.exited;
        },
        'spawnProcess + run dir + 2 output files': async () => {
          const files = join(dir, 'bd-runs', `r${n++}`);
          mkdirSync(files, { recursive: true, mode: 0o700 });
          const handle = await L.spawnProcess(
            { ...spec, stdoutFile: join(files, 'stdout.log'), stderrFile: join(files, 'stderr.log') },
            L.systemClock,
          );
          await handle.exited;
        },
        'runNow, synchronous=OFF': () => L.runNow(rtOff, loopOff.id),
        'runNow  [loops side of (b)]': () => L.runNow(rt, loop.id),
      };
      for (let i = 0; i < 20; i++) for (const fn of Object.values(cases)) await fn();
      const times = await interleave(cases, { reps, batch: quick ? 5 : 10 });

      // What one run writes and prepares, counted on the instance (nothing in src is changed).
      const counts = { prepare: 0, append: 0 };
      const origPrepare = rt.db.prepare;
      const origAppend = rt.log.append;
      rt.db.prepare = function (...args) {
        counts.prepare += 1;
        return origPrepare.apply(this, args);
      };
      rt.log.append = function (...args) {
        counts.append += 1;
        return origAppend.apply(this, args);
      };
      const runs = 20;
      let wal;
      try {
        wal = await walProfile(rt.db, join(dir, 'loops.db-wal'), () => L.runNow(rt, loop.id), runs);
      } finally {
        rt.db.prepare = origPrepare;
        rt.log.append = origAppend;
      }
      out.run = {
        ms: Object.fromEntries(Object.entries(times).map(([k, v]) => [k, v / 1000])),
        perRun: {
          commits: wal.commitsPerOp,
          walFrames: wal.framesPerOp,
          appends: counts.append / runs,
          statementsPrepared: counts.prepare / runs,
          btrees: wal.btreesPerOp,
        },
      };
      section('(b) run — ms per run (medians)');
      lines.push(table(['case', 'ms'], Object.entries(times).map(([k, v]) => [k, fmt(v / 1000, 'ms')]), ['', 'r']));
      const full = times['runNow  [loops side of (b)]'];
      const offT = times['runNow, synchronous=OFF'];
      const withFiles = times['spawnProcess + run dir + 2 output files'];
      lines.push(
        `per run: ${out.run.perRun.commits.toFixed(1)} commits (fsync each), ${out.run.perRun.appends.toFixed(1)} appends, ` +
          `${out.run.perRun.walFrames.toFixed(1)} WAL frames, ${out.run.perRun.statementsPrepared.toFixed(1)} db.prepare() calls`,
      );
      lines.push(
        `split of runNow: commits/fsync ≈ ${fmt((full - offT) / 1000, 'ms')} (FULL − OFF); bookkeeping CPU ≈ ${fmt((offT - withFiles) / 1000, 'ms')} (OFF − executor with files); ` +
          `executor ≈ ${fmt(withFiles / 1000, 'ms')}`,
      );
    } finally {
      rt.close();
      rtOff.close();
      removeTempDir(dir);
      removeTempDir(dirOff);
    }
  }

  if (print) process.stdout.write(`${lines.join('\n')}\n`);
  return out;
}
