/**
 * Fuzzing the workflow parser (issue 11, hostile input): spec files in YAML and JSON, native and
 * predecessor shape, generated from a grammar of valid specs and then broken — a field of the wrong
 * type, a missing one, an unknown key, a cycle, a duplicate id, huge counts, deep nesting, a broken
 * template, bytes flipped in the text — and fully random text. Whatever the file: a loaded spec or
 * a ValidationError listing its problems, each a one-line message that starts with the file and
 * names where (its path; a semantic break is reported at the step or field broken); never another
 * exception. Alias bombs ("billion laughs", merge-key bombs) are refused. Through the CLI, a spec
 * error exits 2.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import fc from 'fast-check';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { ValidationError } from '../../src/events/errors.js';
import { parseWorkflowText, type WorkflowFileProblem } from '../../src/runtime/workflows/files.js';
import { fuzzParams, hostileString } from '../helpers/fuzz.js';
import { tempDir } from '../helpers/tmp.js';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Doc = { [key: string]: Json };
type Path = Array<string | number>;

// ── a grammar of valid specs ───────────────────────────────────────────────────────────────────

const plainText = fc.stringMatching(/^[a-z][a-z0-9 ._-]{0,15}$/);
const duration = fc.constantFrom('500ms', '30s', '5m', '1h30m', '2d');

/** A valid spec of n steps, s0…s(n-1), each needing some earlier ones; native or predecessor shape. */
const validSpec: fc.Arbitrary<{ doc: Doc; legacy: boolean }> = fc
  .record({
    n: fc.integer({ min: 1, max: 6 }),
    legacy: fc.boolean(),
    seeds: fc.array(fc.nat(), { minLength: 6, maxLength: 6 }),
    description: fc.option(plainText, { nil: undefined }),
    concurrency: fc.option(fc.integer({ min: 1, max: 256 }), { nil: undefined }),
    timeout: fc.option(duration, { nil: undefined }),
    input: fc.boolean(),
    texts: fc.array(plainText, { minLength: 6, maxLength: 6 }),
  })
  .map(({ n, legacy, seeds, description, concurrency, timeout, input, texts }) => {
    const doc: Doc = { name: 'fuzzed' };
    if (description !== undefined) doc.description = description;
    // A predecessor-shape file runs one step at a time: a concurrency above 1 is refused there.
    if (concurrency !== undefined && !legacy) doc.concurrency = concurrency;
    if (timeout !== undefined && !legacy) doc.timeout = timeout;
    if (input && !legacy) doc.inputs = { branch: 'main', level: { default: '1', description: 'how much', required: false } };
    const steps: Json[] = [];
    for (let i = 0; i < n; i++) {
      const seed = seeds[i]!;
      const needs = Array.from({ length: i }, (_, j) => `s${j}`).filter((_, j) => (seed >> j) & 1);
      const text = texts[i]!;
      if (legacy) {
        const kind = seed % 3;
        const target: Doc =
          kind === 0
            ? { type: 'command', command: `echo ${text}`, shell: true }
            : kind === 1
              ? { type: 'command', command: 'echo', args: [text, 42, true], shell: false, cwd: '/tmp', env: { LEVEL: '1' }, timeoutMs: 60_000 }
              : { type: 'agent', provider: 'claude', prompt: `review ${text}`, maxTurns: 5 };
        steps.push({ id: `s${i}`, ...(needs.length ? { dependsOn: needs } : {}), ...(seed % 5 === 0 ? { continueOnFailure: true } : {}), ...(seed % 5 === 0 && kind !== 1 ? { timeoutMs: 1000 } : {}), target });
        continue;
      }
      const step: Doc = { id: `s${i}` };
      if (needs.length) step.needs = needs.length === 1 && seed % 2 ? needs[0]! : needs;
      const kind = seed % 4;
      if (kind === 0) step.run = `echo ${text} | tr a-z A-Z`;
      else if (kind === 1) step.command = 'echo', (step.args = [text, 7, false, ...(input ? ['${{ inputs.branch }}'] : []), ...(needs.length ? [`\${{ steps.${needs[0]}.outputs.v }}`] : [])]);
      else if (kind === 2) step.agent = { provider: 'claude', prompt: `fix ${text}${needs.length ? ` after \${{ steps.${needs[0]}.status }}` : ''}`, 'max-turns': 3, 'idle-timeout': '5m' };
      else step.command = 'sh', (step.shell = true);
      if (step.shell === true) step.command = `echo ${text}`;
      step.outputs = ['v'];
      if (seed % 3 === 0) step.if = needs.length ? `steps.${needs[0]}.status == 'failed' || always()` : 'always()';
      if (seed % 5 === 0) step['continue-on-error'] = true;
      if (seed % 7 === 0) step.timeout = '10m';
      if (seed % 11 === 0) step.retries = seed % 2 ? 2 : { limit: 2, delay: '30s', backoff: 2, 'max-delay': '2m' };
      if (seed % 13 === 0) step.env = { LEVEL: input ? '${{ inputs.level }}' : '1', COUNT: '3' };
      steps.push(step);
    }
    doc.steps = steps;
    return { doc, legacy };
  });

// ── breaking it ────────────────────────────────────────────────────────────────────────────────

/** A value of the wrong type for almost any field, or an absurd one. */
const wrongValue: fc.Arbitrary<Json> = fc.oneof(
  fc.constantFrom<Json>(null, true, false, 0, -1, 1e308, -0.5, 2 ** 53 + 1, '', ' ', [], {}, [[]], { a: { b: {} } }, 'x'.repeat(5000)),
  hostileString,
  fc.integer({ min: 200, max: 5000 }).map(deep),
);

/** A value nested `depth` lists deep, written into the text by {@link serialize} (the serializers recurse). */
function deep(depth: number): Json {
  return `__DEEP_${depth}__`;
}

interface Broken {
  doc: Doc;
  /** Where a problem must be reported: a path prefix (the step, or the root field). */
  where: Path;
  what: string;
}

/** Every path to a value in the document (mapping keys and list indexes), the root excluded. */
function paths(value: Json, base: Path = []): Path[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => [[...base, i], ...paths(v, [...base, i])]);
  if (value !== null && typeof value === 'object') return Object.entries(value).flatMap(([k, v]) => [[...base, k], ...paths(v, [...base, k])]);
  return [];
}

function setAt(doc: Doc, path: Path, value: Json | undefined): void {
  let node: Json = doc;
  for (const key of path.slice(0, -1)) node = (node as Record<string | number, Json>)[key]!;
  const last = path[path.length - 1]!;
  if (value === undefined) {
    if (Array.isArray(node)) node.splice(last as number, 1);
    else delete (node as Doc)[last as string];
  } else {
    (node as Record<string | number, Json>)[last] = value;
  }
}

/** The step a path is in (['steps', i]), or the root field it starts with. */
function owner(path: Path): Path {
  return path[0] === 'steps' && typeof path[1] === 'number' ? path.slice(0, 2) : path.slice(0, 1);
}

const broken: fc.Arbitrary<Broken> = fc
  .tuple(validSpec, fc.nat(), fc.nat(), wrongValue, fc.constantFrom('nedes', 'runn', 'timout', 'x', '__proto__', 'constructor', '<<', 'steps ', 'Name'))
  .map(([{ doc }, pick, kind, value, unknownKey]): Broken => {
    const copy = structuredClone(doc);
    const steps = copy.steps as Doc[];
    const all = paths(copy);
    const path = all[pick % all.length]!;
    switch (kind % 8) {
      case 0:
        // A value of the wrong type anywhere (the id of a step, a needs entry, an env value, …).
        setAt(copy, path, value);
        return { doc: copy, where: owner(path), what: `${JSON.stringify(path)} = ${JSON.stringify(value).slice(0, 80)}` };
      case 1: {
        // A required field missing: name, steps, a step's id or its target.
        const choices: Path[] = [['name'], ['steps'], ...steps.flatMap((s, i) => ['id', 'run', 'command', 'agent', 'target'].filter((k) => k in s).map((k) => ['steps', i, k]))];
        const gone = choices[pick % choices.length]!;
        setAt(copy, gone, undefined);
        return { doc: copy, where: gone.length === 1 ? [] : gone.slice(0, 2), what: `without ${JSON.stringify(gone)}` };
      }
      case 2: {
        // An unknown key at the root or in a step.
        const at: Path = pick % 2 ? [] : ['steps', pick % steps.length];
        const node = at.length ? steps[at[1] as number]! : copy;
        if (unknownKey in node && unknownKey !== '__proto__') return { doc: copy, where: [], what: 'unchanged' };
        Object.defineProperty(node, unknownKey, { value, enumerable: true, configurable: true, writable: true });
        return { doc: copy, where: [...at, unknownKey], what: `unknown ${unknownKey} at ${JSON.stringify(at)}` };
      }
      case 3: {
        // A cycle: the first step needs the last (or itself).
        const first = steps[0]!;
        const key = 'target' in first ? 'dependsOn' : 'needs';
        first[key] = [`s${steps.length - 1}`];
        if (steps.length > 1) {
          const last = steps[steps.length - 1]!;
          last[key] = ['s0'];
        }
        return { doc: copy, where: ['steps'], what: 'cycle' };
      }
      case 4: {
        // A duplicate step id.
        if (steps.length < 2) steps.push(structuredClone(steps[0]!));
        else steps[steps.length - 1]!.id = 's0';
        return { doc: copy, where: ['steps'], what: 'duplicate id' };
      }
      case 5: {
        // Huge counts.
        const field = (['concurrency', 'retries', 'max-turns'] as const)[pick % 3];
        const huge = [1e9, 2 ** 31, 1e21, Number.MAX_SAFE_INTEGER, 257][pick % 5]!;
        if (field === 'concurrency') {
          copy.concurrency = huge;
          return { doc: copy, where: ['concurrency'], what: `concurrency ${huge}` };
        }
        const i = pick % steps.length;
        if ('target' in steps[i]!) {
          (steps[i]!.target as Doc).timeoutMs = -huge;
          return { doc: copy, where: ['steps', i], what: `timeoutMs -${huge}` };
        }
        steps[i]!.retries = field === 'retries' ? huge : { limit: huge };
        return { doc: copy, where: ['steps', i], what: `retries ${huge}` };
      }
      case 6: {
        // A template that cannot be: unclosed, a status function, an unknown step, in shell text.
        const i = pick % steps.length;
        const junk = ['${{ steps.', '${{ success() }}', '${{ steps.nope.outputs.v }}', '${{ inputs.nope }}', '${{ (((( }}', "${{ 'unterminated }}"][pick % 6]!;
        const step = steps[i]!;
        if ('target' in step) (step.target as Doc).command = `echo ${junk}`;
        else if ('run' in step) step.run = `echo ${junk}`;
        else step.env = { JUNK: junk };
        return { doc: copy, where: ['steps', i], what: `template ${junk}` };
      }
      default: {
        // Deep nesting in place of a step's env, or of the steps list itself.
        const v = deep(1000 + (pick % 4000));
        if (pick % 2) {
          steps[0]!.env = v;
          return { doc: copy, where: ['steps', 0], what: 'deep env' };
        }
        copy.steps = v;
        return { doc: copy, where: ['steps'], what: 'deep steps' };
      }
    }
  });

function serialize(doc: Doc, json: boolean): string {
  const text = json ? JSON.stringify(doc, null, 1) : stringify(doc, { aliasDuplicateObjects: false, lineWidth: 0 });
  return text.replace(/"?__DEEP_(\d+)__"?/g, (_, n: string) => `${'['.repeat(Number(n))}${']'.repeat(Number(n))}`);
}

/** Loads the text; returns the problems (empty when it loaded), failing on anything but a ValidationError. */
function problemsOf(text: string, file: string): WorkflowFileProblem[] {
  try {
    parseWorkflowText(text, file);
    return [];
  } catch (error) {
    if (!(error instanceof ValidationError)) throw new Error(`${file}: not a ValidationError: ${String(error)}\n${(error as Error).stack}`);
    const problems = error.details?.problems as WorkflowFileProblem[] | undefined;
    expect(problems?.length, error.message).toBeGreaterThan(0);
    expect(error.message.startsWith(`${file}:`), error.message).toBe(true);
    for (const p of problems!) {
      expect(p.message.startsWith(`${file}:`), p.message).toBe(true);
      expect(p.message, 'one line').not.toMatch(/[\r\n]/);
      expect(p.hint ?? '', 'one line').not.toMatch(/[\r\n]/);
      expect(Array.isArray(p.path)).toBe(true);
    }
    return problems!;
  }
}

const startsWith = (path: Path, prefix: Path) => prefix.every((seg, i) => path[i] === seg);

describe('fuzz: the workflow parser', () => {
  it('every spec the grammar makes loads, in YAML and in JSON (the breaks below start from valid specs)', () => {
    fc.assert(
      fc.property(validSpec, fc.boolean(), ({ doc, legacy }, json) => {
        const file = json ? 'wf.json' : 'wf.yaml';
        const loaded = parseWorkflowText(serialize(doc, json), file);
        expect(loaded.format).toBe(legacy ? 'legacy' : 'native');
        expect(loaded.spec.steps.map((s) => s.id)).toEqual((doc.steps as Doc[]).map((s) => s.id));
      }),
      fuzzParams(0x11c1, 200),
    );
  });

  it('a broken spec is refused with its problems, one names the step or field broken; never another exception', () => {
    fc.assert(
      fc.property(broken, fc.boolean(), ({ doc, where, what }, json) => {
        const file = json ? 'wf.json' : 'wf.yaml';
        const problems = problemsOf(serialize(doc, json), file);
        if (problems.length === 0 || what === 'unchanged') return;
        // A file the parser cannot read as a document (nested too deeply) is one problem of the file.
        const unreadable = problems.length === 1 && problems[0]!.path.length === 0 && /invalid (YAML|JSON)|nested more than/.test(problems[0]!.message);
        expect(
          unreadable || problems.some((p) => startsWith(p.path, where) || (where.length === 0 && p.path.length <= 1)),
          `${what}: no problem at ${JSON.stringify(where)}: ${problems.map((p) => `${JSON.stringify(p.path)} ${p.message}`).join(' | ')}`,
        ).toBe(true);
      }),
      fuzzParams(0x11c2, 300),
    );
  });

  it('text damaged anywhere (characters inserted, removed or flipped) loads or is refused with its problems', () => {
    const edit = fc.tuple(fc.nat(), fc.oneof(fc.constantFrom('', ':', '-', '[', '{', '"', "'", '&a', '*a', '!!', '\t', '\n', '  ', '#', '%', '\0', '\ufeff', '${{'), fc.string({ maxLength: 3 })), fc.nat({ max: 3 }));
    fc.assert(
      fc.property(validSpec, fc.boolean(), fc.array(edit, { minLength: 1, maxLength: 4 }), ({ doc }, json, edits) => {
        let text = serialize(doc, json);
        for (const [at, insert, remove] of edits) {
          const i = at % (text.length + 1);
          text = text.slice(0, i) + insert + text.slice(i + remove);
        }
        problemsOf(text, json ? 'wf.json' : 'wf.yaml');
      }),
      fuzzParams(0x11c3, 400),
    );
  });

  it('random text and bytes, as YAML and as JSON, load or are refused with their problems', () => {
    const text = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 200 }),
      fc.string({ unit: fc.constantFrom('a', ':', ' ', '\n', '-', '[', ']', '{', '}', ',', '"', "'", '&', '*', '!', '|', '>', '#', '?', '<<', 'steps', 'name', 'id', '1') , maxLength: 120 }),
      fc.json({ maxDepth: 4 }),
      fc.jsonValue({ maxDepth: 3 }).map((v) => stringify(v)),
    );
    fc.assert(
      fc.property(text, fc.boolean(), (t, json) => {
        problemsOf(t, json ? 'x.json' : 'x.yaml');
      }),
      fuzzParams(0x11c4, 1000),
    );
  });

  it('alias bombs are refused: a billion laughs, a merge-key bomb, an alias cycle', () => {
    const laughs = ['a0: &a0 [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 1; i < 10; i++) laughs.push(`a${i}: &a${i} [${Array(10).fill(`*a${i - 1}`).join(', ')}]`);
    const merges = ['m0: &m0 { k0: x }'];
    for (let i = 1; i < 30; i++) merges.push(`m${i}: &m${i} { <<: [${Array(4).fill(`*m${i - 1}`).join(', ')}], k${i}: y }`);
    const inSteps = ['name: bomb', 'steps:', '  - &s { id: a, run: "true", env: &e { A: "1" } }', ...Array.from({ length: 45 }, (_, i) => `  - { <<: *s, id: b${i}, env: *e }`)];
    for (const [what, text, message] of [
      ['billion laughs', [...laughs, 'name: x', 'steps: [{ id: a, run: "true" }]'].join('\n'), /invalid YAML: Excessive alias count indicates a resource exhaustion attack/],
      ['merge-key bomb', [...merges, 'name: x', 'steps: [{ id: a, run: "true" }]'].join('\n'), /invalid YAML: Excessive alias count/],
      ['unknown alias', 'name: x\nsteps: [*nope]', /^wf\.yaml:2:9: invalid YAML/],
    ] as const) {
      let error: unknown;
      try {
        parseWorkflowText(text, 'wf.yaml');
      } catch (e) {
        error = e;
      }
      expect(error, what).toBeInstanceOf(ValidationError);
      expect((error as Error).message, what).toMatch(message);
    }
    // Aliases a spec really uses, a few hundred of them, still load.
    expect(parseWorkflowText(inSteps.join('\n'), 'wf.yaml').spec.steps).toHaveLength(46);
  });

  it('what it found: a file nested thousands of levels deep is refused before the YAML document is built — the second one aborted the process', () => {
    // The YAML composer recursed until the stack overflowed; after one such overflow, the next file
    // like it aborted node itself ("RegExpCompiler Allocation failed - process out of memory").
    const json = JSON.stringify({ name: 'x', steps: [{ id: 'a', run: 'true', env: 'X' }] }).replace('"X"', `${'['.repeat(20_000)}${']'.repeat(20_000)}`);
    const yaml = `name: x\nsteps:\n  - id: a\n    run: "true"\n    env: ${'['.repeat(20_000)}${']'.repeat(20_000)}\n`;
    const block = `name: x\nsteps:\n  - id: a\n    run: "true"\n    env:\n${Array.from({ length: 1500 }, (_, i) => `${' '.repeat(6 + i)}k${i}:`).join('\n')} x\n`;
    const compact = `name: x\nsteps:\n${'- '.repeat(5000)}x\n`;
    const found: Array<[string, string[]]> = [];
    for (const [text, file, at] of [
      [json, 'wf.json', 'wf.json:1:249'],
      [json, 'wf.json', 'wf.json:1:249'],
      [yaml, 'wf.yaml', 'wf.yaml:5:208'],
      [json, 'wf.json', 'wf.json:1:249'],
      [block, 'wf.yaml', 'wf.yaml:204:205'],
      [compact, 'wf.yaml', 'wf.yaml:3:'],
    ] as const) {
      // Every file read first, then checked: before, the second one killed the worker.
      const problems = problemsOf(text, file);
      found.push([at, problems.map((p) => p.message)]);
    }
    for (const [at, messages] of found) {
      expect(messages).toHaveLength(1);
      expect(messages[0]!.startsWith(at), messages[0]).toBe(true);
      expect(messages[0]).toMatch(/:\d+:\d+: nested more than 200 levels deep$/);
    }
    // 150 levels are only the problem they are.
    expect(problemsOf(`name: x\nsteps:\n  - id: a\n    run: "true"\n    env: ${'['.repeat(150)}${']'.repeat(150)}\n`, 'wf.yaml').map((p) => p.message)).toEqual(['wf.yaml:5:5: step "a": env: expected a mapping, got a list']);
  });

  it('what it found: more than 1,000 anchors and aliases are refused (resolving each alias looks through all of them)', () => {
    const lines = ['name: x', 'steps:', '  - id: a', '    run: "true"', '    env:'];
    for (let i = 0; i < 600; i++) lines.push(`      V${i}: &a${i} "v"`);
    lines.push('    outputs:');
    for (let i = 0; i < 600; i++) lines.push(`      - *a${i}`);
    expect(problemsOf(lines.join('\n'), 'wf.yaml').map((p) => p.message)).toEqual(['wf.yaml:1007:9: 1200 anchors and aliases, more than the 1000 a workflow spec may use']);
  });

  it('what it found: duplicate keys are still found in every mapping, now in one pass (a mapping of 45,000 keys took 40 s)', () => {
    const keys = Array.from({ length: 3000 }, (_, i) => `    k${i}: 1`);
    keys.splice(2000, 0, '    k17: 2');
    const yaml = ['name: x', 'steps:', '  - id: a', '    run: "true"', '    env: { A: "1", A: "2" }', ...keys, '    id: b', ''].join('\n');
    expect(problemsOf(yaml, 'wf.yaml').filter((p) => /duplicate/.test(p.message)).map((p) => p.message)).toEqual([
      'wf.yaml:5:20: duplicate key "A"',
      'wf.yaml:2006:5: duplicate key "k17"',
      'wf.yaml:3007:5: duplicate key "id"',
    ]);
    // Several << merge keys in one mapping are not a key given twice (as the YAML parser had it).
    const merges = 'name: x\nsteps:\n  - &a { id: a, run: "true" }\n  - <<: *a\n    <<: { env: { A: "1" } }\n    id: b\n';
    expect(parseWorkflowText(merges, 'wf.yaml').spec.steps[1]).toMatchObject({ id: 'b', target: { command: 'true', env: { A: '1' } } });
  });

  it('through the CLI, a broken spec exits 2 naming the file', async () => {
    const dir = tempDir();
    let n = 0;
    await fc.assert(
      fc.asyncProperty(broken, fc.boolean(), async ({ doc }, json) => {
        const file = join(dir, `wf-${n++}.${json ? 'json' : 'yaml'}`);
        writeFileSync(file, serialize(doc, json));
        const expected = problemsOf(serialize(doc, json), file).length;
        let stderr = '';
        const err = new Writable({ write: (chunk: Buffer, _enc, done) => ((stderr += chunk.toString()), done()) });
        const out = new Writable({ write: (_chunk, _enc, done) => done() });
        const code = await main(['workflows', 'validate', file], { out, err });
        expect(code, stderr).toBe(expected ? 2 : 0);
        if (expected) {
          expect(stderr).toContain(`${file}:`);
          expect(stderr).not.toMatch(/^\s+at |internal error/m);
          expect(stderr.trimEnd().split('\n').pop()).toBe(`loops: ${file}: ${expected} problem${expected === 1 ? '' : 's'}; the workflow is not valid`);
        }
      }),
      fuzzParams(0x11c5, 30),
    );
  });
});
