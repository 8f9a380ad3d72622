// Replay benchmark (issue 13): `loops replay` through the real machines, with per-event diffs and
// field-hash checks, against a raw read-and-parse of the same rows, in the same run.
//   streams: a loop stream of 100,000 events (and one of 10,000, to show memory is flat in the
//            number of events), and a 500-step workflow run (run for real: 500 `true` processes)
//   per stream, each in a fresh child process (so peak RSS is its own), medians of --reps:
//     raw     page through the rows and parse them (rowToEvent: JSON.parse + upcast), nothing else
//     replay  the same pages through StreamReplay (fold, contextChanges, field hashes, checks)
//     warm    the same events replayed 10 times in one process, the median of the last 5 (steady state)
//     cli     `loops replay <id> --json > /dev/null` (JSON Lines), wall time of the whole process
//   goal: replay >= 50,000 events/s; peak RSS flat from 10,000 to 100,000 events
//   node bench/replay.mjs [--quick] [--reps N] [--json]
import { spawnSync } from 'node:child_process';
import { openSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkOptions, machineInfo, makeTempDir, median, minMax, now } from './lib.mjs';

const here = fileURLToPath(import.meta.url);
const args = process.argv.slice(2);

// ── child: one measurement in a process of its own ───────────────────────────────────────────
if (args[0] === '--child') {
  const [, mode, dataDir, streamId] = args;
  const { openReader } = await import('../dist/runtime/store.js');
  const { SqliteEventLog } = await import('../dist/events/sqlite-log.js');
  const { StreamReplay, streamPages } = await import('../dist/runtime/admin/replay.js');
  const reader = await openReader(dataDir);
  const log = new SqliteEventLog(reader.db);
  const start = now();
  let events = 0;
  let sink = 0;
  if (mode === 'raw') {
    for await (const page of streamPages(log, streamId)) {
      events += page.length;
      sink += page[page.length - 1].version;
    }
  } else if (mode === 'warm') {
    // The steady state: the stream's events read once, then replayed 10 times in this process;
    // the median of the last 5 (what auditing many runs in one process costs per event, once the
    // JIT compiled the machine, the diff and the hashes — a single short stream mostly pays for that).
    const list = [];
    for await (const page of streamPages(log, streamId)) list.push(...page);
    const info = await log.streamInfo(streamId);
    const times = [];
    for (let r = 0; r < 10; r++) {
      const t0 = now();
      const replay = new StreamReplay(streamId, info);
      for (const event of list) sink += replay.step(event).changes.length;
      if (!replay.ok) throw new Error(`${streamId} does not replay: ${JSON.stringify(replay.firstMismatch)}`);
      times.push(now() - t0);
    }
    events = list.length;
    const last = times.slice(5).sort((a, b) => a - b);
    process.stdout.write(JSON.stringify({ ms: last[2], events, sink, maxRssMiB: process.resourceUsage().maxRSS / 1024, retainedMiB: 0 }) + '\n');
    reader.close();
    process.exit(0);
  } else {
    const replay = new StreamReplay(streamId, await log.streamInfo(streamId));
    for await (const page of streamPages(log, streamId)) {
      for (const event of page) {
        const step = replay.step(event);
        sink += step.changes.length;
      }
    }
    events = replay.count;
    if (!replay.ok) throw new Error(`${streamId} does not replay: ${JSON.stringify(replay.firstMismatch)}`);
  }
  const ms = now() - start;
  // What the replay still holds once done (a full collection first): flat in the number of events
  // when nothing but the current snapshot is kept. Peak RSS also counts garbage not yet collected.
  globalThis.gc?.();
  const retainedMiB = process.memoryUsage().heapUsed / 2 ** 20;
  reader.close();
  process.stdout.write(JSON.stringify({ ms, events, sink, maxRssMiB: process.resourceUsage().maxRSS / 1024, retainedMiB }) + '\n');
  process.exit(0);
}

checkOptions(args, { flags: ['--quick', '--json'], valued: ['--reps', '--keep'] }, 'usage: node bench/replay.mjs [--quick] [--reps N] [--json] [--keep <dir>]');
const quick = args.includes('--quick');
const json = args.includes('--json');
const repsArg = args.indexOf('--reps');
const reps = repsArg >= 0 ? Number(args[repsArg + 1]) : quick ? 3 : 5;
const log = (line) => process.stderr.write(`${line}\n`);
const BIN = resolve(here, '..', '..', 'dist', 'cli', 'main.js');

// Modules, not the package's curated surface (dist/index.js): the bench reaches into the runtime.
const { openRuntime } = await import('../dist/runtime/runtime.js');
const { DurableActor } = await import('../dist/runtime/actor.js');
const { createCommandLoop } = await import('../dist/runtime/loops/commands.js');
const { createWorkflow } = await import('../dist/runtime/workflows/specs.js');
const { runWorkflow } = await import('../dist/runtime/workflows/runner.js');
// --keep <dir>: build the streams there and leave them (to profile a child by hand).
const keepArg = args.indexOf('--keep');
const dir = keepArg >= 0 ? args[keepArg + 1] : makeTempDir('replay');
const dataDir = join(dir, 'data');
const runtime = await openRuntime({ dataDir });

/** A loop stream of `n` events: its creation, then slot decisions recorded through the loop's actor, 1,000 per append. */
async function loopStream(name, n) {
  const loop = await createCommandLoop(runtime, { name, command: 'true', schedule: { manual: true } });
  const streamId = `loop:${loop.id}`;
  const actor = await DurableActor.load(runtime, streamId);
  const base = Date.parse('2026-01-01T00:00:00.000Z');
  const iso = (i) => new Date(base + i * 60_000).toISOString();
  let written = actor.version;
  while (written < n) {
    const batch = [];
    for (let i = written; i < Math.min(n, written + 1000); i++) {
      batch.push({ type: 'slot.skipped', data: { slot: iso(i), fireAt: iso(i), reason: 'overlap', blockedBy: `run_${i}`, nextRunAt: iso(i + 1) } });
    }
    await actor.recordAll(batch);
    written = actor.version;
  }
  return streamId;
}

let t = now();
const loop10k = await loopStream('ten-thousand', quick ? 2_000 : 10_000);
const loop100k = await loopStream('hundred-thousand', quick ? 20_000 : 100_000);
log(`built the loop streams in ${Math.round(now() - t)} ms`);

t = now();
const steps = quick ? 100 : 500;
const specFile = join(dir, 'wide.yaml');
const lines = ['name: wide', 'concurrency: 8', 'steps:'];
for (let i = 0; i < steps; i++) lines.push(`  - id: s${i}`, `    run: "echo step ${i}"`);
writeFileSync(specFile, `${lines.join('\n')}\n`);
await createWorkflow(runtime, specFile);
const { run } = await runWorkflow(runtime, 'wide');
const wfStream = `wfrun:${run.id}`;
log(`ran the ${steps}-step workflow (${run.status}) in ${Math.round(now() - t)} ms`);
runtime.close();

function child(mode, streamId) {
  const r = spawnSync(process.execPath, ['--expose-gc', here, '--child', mode, dataDir, streamId], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`child ${mode} ${streamId}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

function cli(streamId) {
  const start = now();
  const out = openSync('/dev/null', 'w');
  const r = spawnSync(process.execPath, [BIN, 'replay', streamId, '--json'], { env: { ...process.env, LOOPS_DATA_DIR: dataDir }, stdio: ['ignore', out, 'pipe'] });
  if (r.status !== 0) throw new Error(`loops replay ${streamId}: ${r.stderr}`);
  return now() - start;
}

/** The size of `loops replay --json` for a stream (bytes), once. */
function cliBytes(streamId) {
  const r = spawnSync(process.execPath, [BIN, 'replay', streamId, '--json'], { env: { ...process.env, LOOPS_DATA_DIR: dataDir }, maxBuffer: 1 << 30 });
  return r.stdout.length;
}

const results = [];
for (const [label, streamId] of [
  ['loop stream, 10k events', loop10k],
  ['loop stream, 100k events', loop100k],
  [`workflow run, ${steps} steps`, wfStream],
]) {
  const raw = [];
  const replay = [];
  const warm = [];
  const cliMs = [];
  let events = 0;
  for (let i = 0; i < reps; i++) {
    const a = child('raw', streamId);
    const b = child('replay', streamId);
    events = b.events;
    raw.push(a);
    replay.push(b);
    warm.push(child('warm', streamId));
    cliMs.push(cli(streamId));
  }
  const rate = (ms) => Math.round((events / ms) * 1000);
  const row = {
    stream: label,
    events,
    rawEventsPerSec: rate(median(raw.map((r) => r.ms))),
    replayEventsPerSec: rate(median(replay.map((r) => r.ms))),
    replayMsRange: minMax(replay.map((r) => Math.round(r.ms))),
    warmReplayEventsPerSec: rate(median(warm.map((r) => r.ms))),
    cliEventsPerSec: rate(median(cliMs)),
    rawPeakRssMiB: Math.round(median(raw.map((r) => r.maxRssMiB))),
    replayPeakRssMiB: Math.round(median(replay.map((r) => r.maxRssMiB))),
    replayRetainedHeapMiB: Math.round(median(replay.map((r) => r.retainedMiB)) * 10) / 10,
    jsonBytes: cliBytes(streamId),
  };
  results.push(row);
  log(
    `${label}: ${events} events — raw ${row.rawEventsPerSec}/s, replay ${row.replayEventsPerSec}/s (ms ${row.replayMsRange.join('–')}), warm ${row.warmReplayEventsPerSec}/s, ` +
      `cli --json ${row.cliEventsPerSec}/s; peak RSS raw ${row.rawPeakRssMiB} MiB, replay ${row.replayPeakRssMiB} MiB (heap held after: ${row.replayRetainedHeapMiB} MiB); --json ${(row.jsonBytes / 1e6).toFixed(1)} MB`,
  );
}

const report = { when: new Date().toISOString(), reps, machine: machineInfo(), results };
if (json) process.stdout.write(JSON.stringify(report, null, 2) + '\n');
const goal = results.every((r) => r.replayEventsPerSec >= 50_000);
log(goal ? 'goal met: replay >= 50,000 events/s on every stream' : 'goal NOT met: replay < 50,000 events/s on some stream');
