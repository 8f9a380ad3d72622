#!/usr/bin/env node
// How workflow validation scales: a linear `needs` chain of 900 and of 9,000 steps (with and
// without a reference from each step to its predecessor's output), normalised by the built code.
// The goal (issue 11): the 9,000-step chain costs at most 15× the 900-step one. Medians of 7.
//
//   node bench/spec-validate.mjs
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { median, table } from './lib.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const { normalizeWorkflowSpec } = await import(pathToFileURL(join(ROOT, 'dist', 'index.js')).href);

function chain(n, refs) {
  return {
    name: 'chain',
    steps: Array.from({ length: n }, (_, i) =>
      i === 0
        ? { id: 's0', run: 'true', outputs: ['v'] }
        : { id: `s${i}`, needs: `s${i - 1}`, outputs: ['v'], ...(refs ? { command: 'echo', args: [`\${{ steps.s${i - 1}.outputs.v }}`] } : { run: 'true' }) },
    ),
  };
}

function time(spec) {
  const t = performance.now();
  normalizeWorkflowSpec(spec);
  return performance.now() - t;
}

const rows = [];
for (const refs of [false, true]) {
  const small = chain(900, refs);
  const big = chain(9000, refs);
  time(small);
  time(big); // warm up
  const s = [];
  const b = [];
  for (let r = 0; r < 7; r++) {
    s.push(time(small));
    b.push(time(big));
  }
  const ratio = median(b) / median(s);
  rows.push([refs ? 'chain, each step using its predecessor\'s output' : 'chain', `${median(s).toFixed(1)} ms`, `${median(b).toFixed(1)} ms`, `${ratio.toFixed(1)}×`, ratio <= 15 ? 'PASS' : 'MISS']);
}
process.stdout.write(table(['workflow', '900 steps', '9,000 steps', 'ratio', 'goal ≤ 15×'], rows));
