#!/usr/bin/env node
// Enforces the dependency direction cli -> runtime -> {machines, projections} -> {workflow,
// scheduling} -> events, the purity of machines, projections, workflow and scheduling (no I/O, no
// clock, no processes), and that no module imports itself through others (no import circle).
// Exit 1 on any violation.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const defaultSrc = join(root, 'src');

/** Which layers each layer may import (value imports). */
const allowed = {
  events: ['events'],
  workflow: ['workflow', 'events'],
  scheduling: ['scheduling', 'events'],
  machines: ['machines', 'workflow', 'events'],
  projections: ['projections', 'events'],
  runtime: ['runtime', 'machines', 'projections', 'workflow', 'scheduling', 'events'],
  cli: ['cli', 'runtime', 'machines', 'projections', 'workflow', 'scheduling', 'events'],
  '.': ['.', 'events', 'workflow', 'scheduling', 'machines', 'projections', 'runtime', 'cli'],
};
/** Packages each layer may import; `*` = any. */
const packages = {
  events: ['better-sqlite3', 'pg', 'zod', 'rxjs', 'node:*'],
  workflow: ['zod'],
  // croner is a calculator here: always called with an explicit reference time.
  scheduling: ['croner'],
  machines: ['xstate', 'zod'],
  projections: [],
  runtime: ['*'],
  cli: ['node:*'],
  '.': [],
};
/** Pure layers: also no clock or process access. */
const pure = new Set(['machines', 'projections', 'workflow', 'scheduling']);
const impure = [/Date\.now\(/, /new Date\(\)/, /(?<!['\"\w.])process\.(env\b|kill\(|pid\b|exit\(|cwd\(|hrtime)/, /\bset(Timeout|Interval)\(/, /Math\.random\(/];

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return files(path);
    return /\.ts$/.test(name) && !/\.test\.ts$/.test(name) ? [path] : [];
  });
}

function layerOf(src, path) {
  const rel = relative(src, path).split(sep);
  return rel.length === 1 ? '.' : rel[0];
}

function resolveTs(path) {
  return path.replace(/\.js$/, '.ts');
}

const pureCache = new Map();
/**
 * A module is pure when it imports no package but zod, nothing from node:*, only pure modules
 * itself, and uses no clock, process or timer: machines and projections may use its values (e.g.
 * the workflow expression evaluator in src/events).
 */
function pureModule(file) {
  if (pureCache.has(file)) return pureCache.get(file);
  pureCache.set(file, true); // cycles: assume pure while checking
  let ok = true;
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    ok = false;
  }
  const re = /^\s*(import|export)\s+(type\s+)?[^'";]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/gm;
  let m;
  while (ok && (m = re.exec(text)) !== null) {
    if (m[2]) continue;
    const spec = m[3] ?? m[4];
    if (spec.startsWith('.')) ok = pureModule(resolveTs(resolve(dirname(file), spec)));
    else ok = spec === 'zod';
  }
  if (ok) {
    ok = !text.split('\n').some((lineText) => !/^\s*(\/\/|\*)/.test(lineText) && impure.some((pattern) => pattern.test(lineText)));
  }
  pureCache.set(file, ok);
  return ok;
}

/** Returns one line per violation found under `src` (default: the project's src/). */
export function check(src = defaultSrc) {
  const problems = [];
  for (const file of files(src)) {
    const layer = layerOf(src, file);
    const text = readFileSync(file, 'utf8');
    const rel = relative(root, file);
    const re = /^\s*(import|export)\s+(type\s+)?[^'";]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/gm;
    let m;
    while ((m = re.exec(text)) !== null) {
      const typeOnly = Boolean(m[2]);
      const spec = m[3] ?? m[4];
      const line = text.slice(0, m.index).split('\n').length + (text[m.index] === '\n' ? 1 : 0);
      if (spec.startsWith('.')) {
        const target = layerOf(src, resolve(dirname(file), spec));
        if (!allowed[layer].includes(target) && !(typeOnly && layer !== 'events')) {
          problems.push(`${rel}:${line}: ${layer} must not import ${target} (${spec}); the direction is cli -> runtime -> {machines, projections} -> {workflow, scheduling} -> events`);
        }
        if (pure.has(layer) && target === 'events' && !typeOnly && !pureModule(resolveTs(resolve(dirname(file), spec)))) {
          problems.push(`${rel}:${line}: ${layer} is pure and may import from events only types, or values of modules that are pure themselves (${spec})`);
        }
      } else {
        const ok = packages[layer].some((p) => p === '*' || p === spec || spec.startsWith(`${p}/`) || (p === 'node:*' && spec.startsWith('node:')));
        if (!ok && !typeOnly) problems.push(`${rel}:${line}: ${layer} must not import the package ${spec}`);
      }
    }
    if (pure.has(layer)) {
      text.split('\n').forEach((lineText, i) => {
        if (/^\s*(\/\/|\*)/.test(lineText)) return;
        for (const pattern of impure) {
          if (pattern.test(lineText)) problems.push(`${rel}:${i + 1}: ${layer} is pure but uses ${pattern.source.replace(/\\/g, '')}`);
        }
      });
    }
  }
  problems.push(...cycles(src));
  return problems;
}

/**
 * Import circles among modules (value imports; `import type` is erased), each reported once by its
 * members in import order. A circle makes load order matter and hides which module owns what.
 */
function cycles(src) {
  const graph = new Map();
  for (const file of files(src)) {
    const text = readFileSync(file, 'utf8');
    const re = /^\s*(import|export)\s+(type\s+)?[^'";]*?from\s+['"]([^'"]+)['"]/gm;
    const deps = [];
    let m;
    while ((m = re.exec(text)) !== null) {
      if (m[2] || !m[3].startsWith('.')) continue;
      // `import { type A, type B } from` is erased too.
      const names = /\{([^}]*)\}/.exec(m[0]);
      if (names && names[1].split(',').every((n) => /^\s*type\s/.test(n) || n.trim() === '')) continue;
      deps.push(resolveTs(resolve(dirname(file), m[3])));
    }
    graph.set(resolve(file), deps);
  }
  // Tarjan's strongly connected components.
  const index = new Map();
  const low = new Map();
  const stack = [];
  const on = new Set();
  const out = [];
  let next = 0;
  const visit = (v) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
    }
    if (low.get(v) === index.get(v)) {
      const component = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) out.push(`import circle: ${component.reverse().map((f) => relative(root, f)).join(' -> ')}`);
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return out;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const problems = check();
  if (problems.length) {
    console.error(`layer check: ${problems.length} problem(s)`);
    for (const p of problems) console.error(`  ${p}`);
    process.exit(1);
  }
  console.log('layer check: ok');
}
