#!/usr/bin/env node
// How workflow validation scales: a linear `needs` chain of 900 and of 9,000 steps (with and
// without a reference from each step to its predecessor's output), normalised by the built code;
// then whole spec files read as a user's would be (parseWorkflowText: YAML or JSON, positions):
// the chain as a YAML file, a step with 900 / 9,000 unknown fields (every one a problem, with its
// suggestion and line:column), and YAML files with many aliases of their anchors (quadratic in the
// yaml package, so capped: see the rows).
// The goal (issue 11): the 10× case costs at most 15× the 1× one. Medians of 7.
//
//   node bench/spec-validate.mjs
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { median, table } from './lib.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const { normalizeWorkflowSpec } = await import(pathToFileURL(join(ROOT, 'dist', 'index.js')).href);
const { parseWorkflowText } = await import(pathToFileURL(join(ROOT, 'dist', 'runtime', 'workflows', 'files.js')).href);

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

/** Reads a spec file's text; a refused one is timed too (its problems are the work). */
function timeFile([text, file]) {
  const t = performance.now();
  try {
    parseWorkflowText(text, file);
  } catch (error) {
    if (!error.details?.problems) throw error;
  }
  return performance.now() - t;
}

const yamlChain = (n) => [`name: chain\nsteps:\n${Array.from({ length: n }, (_, i) => `  - id: s${i}\n    run: "true"${i ? `\n    needs: s${i - 1}` : ''}`).join('\n')}\n`, 'chain.yaml'];
const unknownFields = (n, json) => {
  const step = { id: 'a', run: 'true' };
  for (let i = 0; i < n; i++) step[`field${i}`] = 1;
  const spec = { name: 'unknown', steps: [step] };
  return json ? [JSON.stringify(spec, null, 1), 'unknown.json'] : [`name: unknown\nsteps:\n  - id: a\n    run: "true"\n${Object.keys(step).slice(2).map((k) => `    ${k}: 1`).join('\n')}\n`, 'unknown.yaml'];
};
const aliases = (n) => [
  ['name: aliases', 'steps:', '  - id: a', '    run: "true"', '    env:', ...Array.from({ length: n }, (_, i) => `      V${i}: &a${i} "v${i}"`), '    outputs:', ...Array.from({ length: n }, (_, i) => `      - *a${i}`)].join('\n'),
  'aliases.yaml',
];

const cases = [
  ...[false, true].map((refs) => ({ what: refs ? 'chain, each step using its predecessor\'s output' : 'chain', small: chain(900, refs), big: chain(9000, refs), run: time })),
  { what: 'chain, as a YAML file', small: yamlChain(900), big: yamlChain(9000), run: timeFile },
  { what: 'a step with 900 / 9,000 unknown fields, YAML', small: unknownFields(900, false), big: unknownFields(9000, false), run: timeFile },
  { what: 'the same, JSON', small: unknownFields(900, true), big: unknownFields(9000, true), run: timeFile },
  // Resolving an alias looks through every anchor and alias before it (the yaml package): quadratic,
  // so a file may hold at most MAX_SPEC_ALIASES (1,000) of them; the last row is a file refused for that.
  { what: '45 / 450 anchors, each aliased once', small: aliases(45), big: aliases(450), run: timeFile, capped: true },
  { what: '450 / 8,000 anchors, each aliased once (refused)', small: aliases(450), big: aliases(8000), run: timeFile, capped: true },
];
const rows = [];
for (const { what, small, big, run, capped } of cases) {
  run(small);
  run(big); // warm up
  const s = [];
  const b = [];
  for (let r = 0; r < 7; r++) {
    s.push(run(small));
    b.push(run(big));
  }
  const ratio = median(b) / median(s);
  rows.push([what, `${median(s).toFixed(1)} ms`, `${median(b).toFixed(1)} ms`, `${ratio.toFixed(1)}×`, ratio <= 15 ? 'PASS' : capped ? 'capped' : 'MISS']);
}
process.stdout.write(table(['workflow', '1×', '10×', 'ratio', 'goal ≤ 15×'], rows));
