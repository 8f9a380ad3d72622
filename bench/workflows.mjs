// Workflow benchmarks (issue 4), ratios against baselines measured in the same run:
//   (w1) a 100-step chain of `true` vs 100 raw sequential `await execa('true')` — goal: ratio <= 1.5
//   (w2) a 64-step wide workflow with concurrency 8 vs the same 64 steps as a chain — goal: >= 1.6x faster
//   node bench/workflows.mjs [--quick] [--reps N] [--json]
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { createWorkflow, openRuntime, runWorkflow } from '../dist/index.js';
import { cpuPhrase, cpuSince, machineInfo, makeTempDir, median, minMax, now } from './lib.mjs';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const json = args.includes('--json');
const repsArg = args.indexOf('--reps');
const reps = repsArg >= 0 ? Number(args[repsArg + 1]) : quick ? 3 : 7;
const log = (line) => process.stderr.write(`${line}\n`);

function spec(name, n, { chain, concurrency }) {
  const lines = [`name: ${name}`, `concurrency: ${concurrency}`, 'steps:'];
  for (let i = 0; i < n; i++) {
    lines.push(`  - id: s${i}`, '    command: "true"');
    if (chain && i > 0) lines.push(`    needs: s${i - 1}`);
  }
  return `${lines.join('\n')}\n`;
}

const machineAtStart = machineInfo();
const dir = makeTempDir('wf');
// Steps are forked by the spawner helper, as the daemon and `loops workflows run` do;
// LOOPS_BENCH_SPAWNER=inline forks them from this process instead, for comparison.
const spawner = process.env.LOOPS_BENCH_SPAWNER === 'inline' ? 'inline' : 'helper';
const runtime = await openRuntime({ dataDir: join(dir, 'data'), spawner });
async function define(name, text) {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, text);
  await createWorkflow(runtime, file);
}
await define('chain100', spec('chain100', 100, { chain: true, concurrency: 1 }));
await define('chain64', spec('chain64', 64, { chain: true, concurrency: 8 }));
await define('wide64', spec('wide64', 64, { chain: false, concurrency: 8 }));

async function timeWorkflow(name) {
  const t = now();
  const { run } = await runWorkflow(runtime, name);
  const ms = now() - t;
  if (run.status !== 'succeeded') throw new Error(`${name}: ${run.status}`);
  return ms;
}
async function timeRaw(n) {
  const t = now();
  for (let i = 0; i < n; i++) await execa('true');
  return now() - t;
}

// Warm-up: JIT, lazy modules, the first spawns.
await timeWorkflow('wide64');
await timeRaw(20);

const w1 = { loops: [], raw: [] };
const w2 = { wide: [], chain: [] };
for (let r = 0; r < reps; r++) {
  // Alternate the order so both sides sample the same moments of a noisy machine.
  if (r % 2 === 0) {
    w1.loops.push(await timeWorkflow('chain100'));
    w1.raw.push(await timeRaw(100));
  } else {
    w1.raw.push(await timeRaw(100));
    w1.loops.push(await timeWorkflow('chain100'));
  }
  if (r % 2 === 0) {
    w2.wide.push(await timeWorkflow('wide64'));
    w2.chain.push(await timeWorkflow('chain64'));
  } else {
    w2.chain.push(await timeWorkflow('chain64'));
    w2.wide.push(await timeWorkflow('wide64'));
  }
  log(`rep ${r + 1}/${reps}: chain100 ${w1.loops.at(-1).toFixed(0)} ms, raw ${w1.raw.at(-1).toFixed(0)} ms; wide64 ${w2.wide.at(-1).toFixed(0)} ms, chain64 ${w2.chain.at(-1).toFixed(0)} ms`);
}
runtime.close();

const perRep = (a, b) => a.map((x, i) => x / b[i]);
const r1 = median(w1.loops) / median(w1.raw);
const r2 = median(w2.chain) / median(w2.wide);
const result = {
  machine: { ...machineAtStart, loadavgAfter: machineInfo().loadavg, cpu: cpuSince(machineAtStart) },
  reps,
  spawner,
  w1: {
    loopsMs: median(w1.loops),
    rawMs: median(w1.raw),
    ratio: r1,
    perRep: minMax(perRep(w1.loops, w1.raw)),
    goal: '<= 1.5',
    pass: r1 <= 1.5,
    perStepOverheadMs: (median(w1.loops) - median(w1.raw)) / 100,
  },
  w2: { wideMs: median(w2.wide), chainMs: median(w2.chain), speedup: r2, perRep: minMax(perRep(w2.chain, w2.wide)), goal: '>= 1.6', pass: r2 >= 1.6 },
};
if (json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
else {
  const f = (x) => x.toFixed(2);
  console.log(`load ${machineAtStart.loadavg.join(' ')} → ${result.machine.loadavgAfter.join(' ')}${cpuPhrase(machineAtStart)}`);
  console.log(`benchmark                                   loops       baseline    ratio  goal    result  per-rep`);
  console.log(
    `(w1) 100-step chain of true vs 100 execa    ${result.w1.loopsMs.toFixed(0).padStart(6)} ms   ${result.w1.rawMs.toFixed(0).padStart(6)} ms   ${f(r1).padStart(5)}  <= 1.5  ${result.w1.pass ? 'PASS' : 'MISS'}    ${result.w1.perRep.map(f).join('–')}`,
  );
  console.log(
    `(w2) 64 wide (conc. 8) vs 64 as a chain     ${result.w2.wideMs.toFixed(0).padStart(6)} ms   ${result.w2.chainMs.toFixed(0).padStart(6)} ms   ${f(r2).padStart(5)}x >= 1.6x ${result.w2.pass ? 'PASS' : 'MISS'}    ${result.w2.perRep.map(f).join('–')}`,
  );
  console.log(`(w1) loops costs ${result.w1.perStepOverheadMs.toFixed(2)} ms per step over a raw spawn (medians of ${reps} repetitions; steps forked ${spawner === 'helper' ? 'by the spawner helper' : 'inline'}).`);
}
