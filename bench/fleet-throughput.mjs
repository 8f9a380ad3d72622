// Fleet throughput (issue 15, item 6): appends per second and slot decisions per second with 1, 3
// and 6 runner processes ("hosts": each its own data directory and LOOPS_HOST_ID) on one store —
// PostgreSQL (one schema) and, beside it, SQLite (one data directory shared by the processes, as
// several runners on one machine share it).
//
//   node bench/fleet-throughput.mjs [--url postgres://…] [--seconds 5] [--hosts 1,3,6] [--loops 300] [--json] [--quick]
//
// appends: each process pauses and resumes loops of its own for the window, through the runtime
//   (an append with its projections, and on PostgreSQL the host's replica catching up before it
//   resolves): every process's appends per second, summed.
// decisions: 300 loops every 1 s, catch-up latest; every process runs scheduling passes (`decide`,
//   what the daemon's pass does first) as fast as it can on a clock running 100× fast (so every loop
//   is due at every pass), all deciding the same loops: each slot is decided once
//   (the loser of a race conflicts and finds nothing left), so the sum is the fleet's decisions per
//   second, and `conflicts` says how often processes raced for a loop.
// Medians of the processes' rates are not the point: the total is. The machine's cores bound it
// (2 here): more processes than cores measure contention, not scale-out.
import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { checkOptions, machineInfo, makeTempDir, removeAllTempDirs, table } from './lib.mjs';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));
const dist = (p) => pathToFileURL(join(ROOT, 'dist', p)).href;
const args = process.argv.slice(2);

if (args[0] === '--worker') {
  await worker(JSON.parse(args[1]));
  process.exit(0);
}

checkOptions(args, { flags: ['--json', '--quick'], valued: ['--url', '--seconds', '--hosts', '--loops'] }, 'usage: node bench/fleet-throughput.mjs [--url postgres://…] [--seconds 5] [--hosts 1,3,6] [--loops 300] [--json] [--quick]');
const value = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const quick = args.includes('--quick');
const url = value('--url', process.env.LOOPS_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test');
const seconds = Number(value('--seconds', quick ? '1' : '5'));
const hostCounts = value('--hosts', quick ? '1,2' : '1,3,6').split(',').map(Number);
const loopCount = Number(value('--loops', quick ? '40' : '300'));

const pg = (await import('pg')).default;
const results = [];
try {
  for (const store of ['postgres', 'sqlite']) {
    for (const hosts of hostCounts) {
      for (const what of ['appends', 'decisions']) results.push(await measure(store, hosts, what));
    }
  }
} finally {
  removeAllTempDirs();
}
if (args.includes('--json')) process.stdout.write(JSON.stringify({ machine: machineInfo(), seconds, loops: loopCount, results }, null, 2) + '\n');
else {
  process.stdout.write(`${seconds} s per measurement, ${loopCount} loops every 1 s for decisions; ${machineInfo().cpus} cores\n\n`);
  process.stdout.write(
    table(
      ['store', 'processes', 'what', 'per second (total)', 'per process', 'conflicts'],
      results.map((r) => [r.store, String(r.hosts), r.what, r.perSecond.toFixed(0), r.perProcess.map((n) => n.toFixed(0)).join(' / '), r.what === 'decisions' ? String(r.conflicts) : '-']),
    ) + '\n',
  );
}

async function measure(store, hosts, what) {
  const root = makeTempDir('fleet-throughput');
  let storeUrl = 'sqlite';
  let schema = null;
  if (store === 'postgres') {
    schema = `loops_bench_${process.pid}_${hosts}_${what}`;
    await dropSchema(schema);
    storeUrl = `${url}?schema=${schema}`;
  }
  const dataDir = (i) => (store === 'sqlite' ? join(root, 'shared') : join(root, `h${i}`));
  // The loops, made once (by host 0's runtime).
  await runWorker({ mode: 'setup', store: storeUrl, dataDir: dataDir(0), host: 'h0', loops: what === 'decisions' ? loopCount : hosts * 4, seconds });
  const start = Date.now() + 1500; // every process starts its window at the same moment
  const outs = await Promise.all(Array.from({ length: hosts }, (_, i) => runWorker({ mode: what, store: storeUrl, dataDir: dataDir(i), host: `h${i}`, index: i, hosts, seconds, start })));
  if (schema) await dropSchema(schema);
  const counts = outs.map((o) => o.count);
  return {
    store,
    hosts,
    what,
    perSecond: counts.reduce((a, b) => a + b, 0) / seconds,
    perProcess: counts.map((n) => n / seconds),
    conflicts: outs.reduce((a, o) => a + (o.conflicts ?? 0), 0),
  };
}

function runWorker(spec) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--worker', JSON.stringify(spec)], {
      env: { ...process.env, LOOPS_STORE: spec.store, LOOPS_HOST_ID: spec.host, LOOPS_DATA_DIR: spec.dataDir },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.on('exit', (code) => {
      if (code !== 0) reject(new Error(`worker ${spec.mode} ${spec.host} exited ${code}`));
      else resolvePromise(JSON.parse(out.trim().split('\n').at(-1) || '{}'));
    });
  });
}

async function dropSchema(schema) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}

async function worker(spec) {
  const { openRuntime } = await import(dist('runtime/runtime.js'));
  const { createCommandLoop, changeLoopState } = await import(dist('runtime/loops/commands.js'));
  const { decide } = await import(dist('runtime/daemon/pass.js'));
  const runtime = await openRuntime({ dataDir: spec.dataDir });
  try {
    if (spec.mode === 'setup') {
      for (let i = 0; i < spec.loops; i++) {
        await createCommandLoop(runtime, { name: `l${i}`, command: 'true', schedule: { every: '1s', tz: 'UTC' }, overlap: 'allow', catchUp: 'latest' });
      }
      process.stdout.write('{}\n');
      return;
    }
    await new Promise((r) => setTimeout(r, Math.max(0, spec.start - Date.now())));
    const end = spec.start + spec.seconds * 1000;
    let count = 0;
    let conflicts = 0;
    if (spec.mode === 'appends') {
      // Loops l<index*4 … index*4+3>: this process's own (no compare-and-set races between processes).
      const mine = [0, 1, 2, 3].map((k) => `l${spec.index * 4 + k}`);
      for (let i = 0; Date.now() < end; i++) {
        const name = mine[i % mine.length];
        await changeLoopState(runtime, name, 'pause');
        await changeLoopState(runtime, name, 'resume');
        count += 2;
      }
    } else {
      while (Date.now() < end) {
        // Time runs 100× fast for the passes, so every loop is due at every pass: what is measured
        // is how many decisions the store takes, not how many the schedule makes.
        const result = await decide(runtime, spec.start + (Date.now() - spec.start) * 100);
        count += result.decisions.filter((d) => d.type.startsWith('slot.')).length;
        conflicts += result.conflicts.length;
        if (result.decisions.length === 0) await new Promise((r) => setTimeout(r, 5));
      }
    }
    process.stdout.write(JSON.stringify({ count, conflicts }) + '\n');
  } finally {
    runtime.close();
  }
}
