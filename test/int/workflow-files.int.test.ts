import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/events/errors.js';
import { loadWorkflowFile, parseWorkflowText, type WorkflowFileProblem } from '../../src/runtime/workflows/files.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'workflows');
const dir = mkdtempSync(join(tmpdir(), 'loops-workflow-files-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let counter = 0;
/** Writes `text` to a fresh file named `name` in the temp directory; returns its path. */
function write(name: string, text: string | Buffer): string {
  const sub = join(dir, String(++counter));
  mkdirSync(sub);
  const path = join(sub, name);
  writeFileSync(path, text);
  return path;
}

function errorOf(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    return error as ValidationError;
  }
  throw new Error('expected a ValidationError');
}

function problems(error: ValidationError): WorkflowFileProblem[] {
  return error.details!.problems as WorkflowFileProblem[];
}

describe('loadWorkflowFile: valid files', () => {
  it('loads the native YAML diamond, with the sha256 of its text', () => {
    const file = join(FIXTURES, 'diamond.yaml');
    const loaded = loadWorkflowFile(file);
    expect(loaded.file).toBe(file);
    expect(loaded.format).toBe('native');
    expect(loaded.warnings).toEqual([]);
    expect(loaded.sha256).toBe(createHash('sha256').update(readFileSync(file)).digest('hex'));
    expect(loaded.spec.name).toBe('nightly');
    expect(loaded.spec.steps.map((s) => s.id)).toEqual(['build', 'lint', 'test', 'report', 'fix']);
  });

  it('loads the predecessor JSON unchanged; warnings name the file', () => {
    const file = join(FIXTURES, 'predecessor.json');
    const loaded = loadWorkflowFile(file);
    expect(loaded.format).toBe('legacy');
    expect(loaded.spec.steps.map((s) => s.id)).toEqual(['install', 'unit', 'audit', 'review']);
    expect(loaded.warnings).toEqual([
      `${file}: step "review": target.sandbox: unknown agent field, ignored`,
      `${file}: step "review": target.reasoningEffort: unknown agent field, ignored`,
      // Limits the predecessor passed to a CLI that cannot take them: dropped, said so (a native
      // spec is refused for them, see below).
      `${file}: step "review": maxTurns ignored: codex has no flag that limits turns and does not report them as it goes, so the limit could not be enforced`,
      `${file}: step "review": maxCostUsd ignored: codex has no budget flag and does not report its cost, so the budget could not be enforced`,
    ]);
    const review = loaded.spec.steps.find((s) => s.id === 'review')!.target;
    expect(review).toMatchObject({ type: 'agent', provider: 'codex', maxTurns: null, maxCostUsd: null });
  });

  it('agent on a cursor step: a predecessor file loads, the field dropped with a warning (cursor-agent has no --agent); a native spec is refused', () => {
    const legacy = write('cursor.json', JSON.stringify({ name: 'cur', steps: [{ id: 'a', target: { type: 'agent', provider: 'cursor', prompt: 'hi', agent: 'reviewer' } }] }));
    const loaded = loadWorkflowFile(legacy);
    expect(loaded.spec.steps[0]!.target).toMatchObject({ provider: 'cursor', agent: null });
    expect(loaded.warnings).toEqual([`${legacy}: step "a": agent ignored: cursor-agent has no named agents or profiles`]);
    const native = write('cursor.yaml', 'name: cur\nsteps:\n  - id: a\n    agent: { provider: cursor, prompt: hi, agent: reviewer }\n');
    const problems = errorOf(() => loadWorkflowFile(native)).details!.problems as WorkflowFileProblem[];
    expect(problems.map((p) => p.field)).toEqual(['agent.agent']);
  });

  it('reads YAML from any other extension, JSON only from .json (any case); a BOM is ignored', () => {
    const text = 'name: x\nsteps:\n  - id: a\n    run: echo a\n';
    expect(loadWorkflowFile(write('flow.yml', text)).spec.name).toBe('x');
    expect(loadWorkflowFile(write('flow', text)).spec.name).toBe('x');
    expect(loadWorkflowFile(write('FLOW.JSON', '\uFEFF{"name": "j", "steps": [{"id": "a", "run": "x"}]}')).spec.name).toBe('j');
  });

  it('YAML 1.2: on/yes/no are strings; anchors and << merge keys work', () => {
    const loaded = loadWorkflowFile(
      write(
        'merge.yaml',
        [
          'name: merge',
          'env: { FLAG: yes }',
          'steps:',
          '  - &base',
          '    id: a',
          '    run: echo a',
          '    timeout: 5m',
          '    retries: 1',
          '  - <<: *base',
          '    id: b',
          '    needs: a',
          '',
        ].join('\n'),
      ),
    );
    expect(loaded.spec.env).toEqual({ FLAG: 'yes' });
    expect(loaded.spec.steps[1]).toMatchObject({ id: 'b', needs: ['a'], timeoutMs: 300_000, retries: { attempts: 2 } });
  });
});

describe('loadWorkflowFile: problems with line and column', () => {
  it('prefixes each problem with file:line:col, in document order', () => {
    const file = write(
      'nightly.yaml',
      [
        'name: nightly', // 1
        'steps:', // 2
        '  - id: lint', // 3
        '    run: npm run lint', // 4
        '  - id: test', // 5
        '    needs: lnt', // 6
        '    nedes: [lint]', // 7
        '    command: npm', // 8
        '  - id: fix', // 9
        '    needs: [test, lint, fx]', // 10
        '    if: success() && )', // 11
        '    agent:', // 12
        '      provider: codex', // 13
        '      prompt: fix it', // 14
        '      modle: o3', // 15
        '',
      ].join('\n'),
    );
    const error = errorOf(() => loadWorkflowFile(file));
    const list = problems(error);
    expect(list.map((p) => [p.line, p.column, p.step, p.field])).toEqual([
      [6, 5, 'test', 'needs'],
      [7, 5, 'test', 'nedes'],
      [10, 25, 'fix', 'needs'],
      [11, 5, 'fix', 'if'],
      [15, 7, 'fix', 'agent.modle'],
    ]);
    expect(list[0]!.message).toBe(`${file}:6:5: step "test": needs: unknown step "lnt"`);
    expect(list[0]!.hint).toBe('did you mean "lint"? steps: lint, test, fix');
    expect(list[3]!.message).toMatch(new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:11:5: step "fix": if: .*column 14`));
    expect(error.message).toBe(`${file}:6:5: step "test": needs: unknown step "lnt" (and 4 more problems)`);
    expect(error.hint).toBe(list[0]!.hint);
    expect(error.details!.file).toBe(file);
  });

  it('points at the key of a field, the item of a list, the step for a step-wide problem', () => {
    const file = write(
      'where.yaml',
      ['name: where', 'steps:', '  - id: a', '    run: x', '  - id: b', '    needs: a', '    run: y', '    retries:', '      limit: 500', '  - id: c', '    needs: [b, a]', ''].join('\n'),
    );
    const list = problems(errorOf(() => loadWorkflowFile(file)));
    expect(list.map((p) => p.message)).toEqual([`${file}:9:7: step "b": retries.limit: must be at most 100, got a number (500)`, `${file}:10:5: step "c": no target`]);
  });

  it('cycles and duplicate ids are located', () => {
    const file = join(FIXTURES, 'bad-graph.yaml');
    const list = problems(errorOf(() => loadWorkflowFile(file)));
    expect(list.map((p) => p.message)).toEqual([
      `${file}:6:5: step "test": needs: unknown step "lnt"`,
      `${file}:7:5: step "test": command: "npm test" contains whitespace, but runs without a shell, as one executable`,
      `${file}:9:13: step "a": needs: cycle: a → c → b → a`,
    ]);
  });

  it('locates problems in JSON files too', () => {
    const file = write(
      'flow.json',
      ['{', '  "name": "flow",', '  "steps": [', '    { "id": "a", "target": { "type": "command", "command": "npm test", "shell": false } },', '    { "id": "b", "dependsOn": ["x"], "target": { "type": "command", "command": "true" } }', '  ]', '}', ''].join('\n'),
    );
    const list = problems(errorOf(() => loadWorkflowFile(file)));
    expect(list.map((p) => p.message)).toEqual([
      `${file}:4:49: step "a": target.command: "npm test" contains whitespace, but runs without a shell, as one executable`,
      `${file}:5:32: step "b": dependsOn: unknown step "x"`,
    ]);
  });

  it('a missing field is located at its parent mapping; a field from a << merge at its source', () => {
    const file = write('root.yaml', '\nname: x\n');
    expect(errorOf(() => loadWorkflowFile(file)).message).toBe(`${file}:2:1: steps is missing`);
    const list = problems(errorOf(() => parseWorkflowText('[1, 2]', 'list.yaml')));
    expect(list[0]).toMatchObject({ line: 1, column: 1, message: 'list.yaml:1:1: a workflow spec must be a mapping with name and steps, got a list' });
    const merged = ['name: m', 'steps:', '  - &base', '    id: a', '    run: x', '    retires: 2', '  - <<: *base', '    id: b', ''].join('\n');
    expect(problems(errorOf(() => parseWorkflowText(merged, 'm.yaml'))).map((p) => p.message)).toEqual([
      'm.yaml:6:5: step "a": retires: unknown field',
      'm.yaml:6:5: step "b": retires: unknown field',
    ]);
  });
});

describe('loadWorkflowFile: what an agent step\'s CLI cannot do', () => {
  it('is refused by its adapter at load, located at the step, in the spec\'s spelling; templated fields wait for the run', () => {
    const text = [
      'name: agents',
      'steps:',
      '  - id: budget',
      '    agent:',
      '      provider: codex',
      '      prompt: fix it',
      '      max-cost-usd: 1',
      '  - id: mode',
      '    agent:',
      '      provider: cursor',
      '      prompt: fix it',
      '      permission-mode: acceptEdits',
      '  - id: fine',
      '    agent:',
      '      provider: opencode',
      '      prompt: fix it',
      '      max-cost-usd: 1',
      '      max-turns: 5',
      '  - id: later',
      '    agent:',
      '      provider: cursor',
      '      prompt: fix it',
      '      permission-mode: ${{ inputs.mode }}',
      '',
    ].join('\n');
    const list = problems(errorOf(() => parseWorkflowText(text, 'a.yaml')));
    expect(list.map((p) => [p.message, p.field, p.hint])).toEqual([
      [
        'a.yaml:4:5: step "budget": agent: max-cost-usd is not supported: codex has no budget flag and does not report its cost, so the budget could not be enforced (provider codex)',
        'agent.max-cost-usd',
        'remove max-cost-usd and rely on the timeout / idle timeout',
      ],
      ['a.yaml:9:5: step "mode": agent: unknown permission-mode "acceptEdits" (provider cursor)', 'agent.permission-mode', 'use one of: default, force, yolo, bypassPermissions, plan, ask'],
    ]);
  });
});

describe('loadWorkflowFile: syntax errors', () => {
  it('YAML syntax errors carry line:col', () => {
    const file = join(FIXTURES, 'syntax-error.yaml');
    const error = errorOf(() => loadWorkflowFile(file));
    expect(error.message).toMatch(new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:5:3: invalid YAML: `));
    expect(problems(error)).toHaveLength(1);
    const tab = errorOf(() => parseWorkflowText('name: x\nsteps:\n\t- id: a\n', 'tab.yaml'));
    expect(tab.message).toMatch(/^tab\.yaml:3:1: /);
  });

  it('duplicate keys are refused in YAML and in JSON', () => {
    const yamlError = errorOf(() => loadWorkflowFile(join(FIXTURES, 'duplicate-keys.yaml')));
    expect(yamlError.message).toBe(`${join(FIXTURES, 'duplicate-keys.yaml')}:5:5: duplicate key "run"`);
    const json = write('dup.json', '{\n  "name": "a",\n  "name": "b",\n  "steps": [{ "id": "a", "run": "x", "id": "b" }]\n}\n');
    const list = problems(errorOf(() => loadWorkflowFile(json)));
    expect(list.map((p) => p.message)).toEqual([`${json}:3:3: duplicate key "name"`, `${json}:4:38: duplicate key "id"`]);
  });

  it('JSON syntax errors carry line:col, also where JSON.parse gives no position', () => {
    const trailing = join(FIXTURES, 'syntax-error.json');
    expect(errorOf(() => loadWorkflowFile(trailing)).message).toBe(`${trailing}:5:3: invalid JSON: trailing comma before "]"`);
    const cases: Array<[string, string]> = [
      ['{\n  "name": "x"\n  "steps": []\n}', '3:3: invalid JSON: expected "," or "}" after a property value, got "\\""'],
      ['{\n  "name": \'x\'\n}', "2:11: invalid JSON: unexpected \"'\""],
      ['{\n  "name": "x",\n  // comment\n}', '3:3: invalid JSON: expected a double-quoted property name, got "/"'],
      ['{"name": tru}', '1:10: invalid JSON: unexpected "tru" (strings need double quotes)'],
      ['{"name": "x', '1:10: invalid JSON: unterminated string'],
      ['{"name": "x"}\n}', '2:1: invalid JSON: unexpected text after the JSON value'],
      ['', '1:1: invalid JSON: unexpected end of input'],
    ];
    for (const [text, expected] of cases) {
      expect(errorOf(() => parseWorkflowText(text, 'w.json')).message).toBe(`w.json:${expected}`);
    }
  });

  it('an empty YAML file, several YAML documents', () => {
    expect(errorOf(() => parseWorkflowText('# nothing\n', 'e.yaml')).message).toBe('e.yaml: the file is empty');
    expect(errorOf(() => parseWorkflowText('name: a\n---\nname: b\n', 'm.yaml')).message).toBe('m.yaml:2:1: more than one YAML document (a second one starts here)');
  });

  it('an alias to an undefined anchor', () => {
    expect(errorOf(() => parseWorkflowText('name: *nope\nsteps: []\n', 'a.yaml')).message).toMatch(/^a\.yaml:1:7: invalid YAML: /);
  });
});

describe('loadWorkflowFile: the file itself', () => {
  it('a missing file is named', () => {
    const missing = join(dir, 'nope', 'missing.yaml');
    const error = errorOf(() => loadWorkflowFile(missing));
    expect(error.message).toBe(`${missing}: no such file`);
    expect(problems(error)).toEqual([{ path: [], step: null, field: null, message: `${missing}: no such file`, hint: expect.any(String) }]);
  });

  it('a directory is refused', () => {
    expect(errorOf(() => loadWorkflowFile(dir)).message).toBe(`${dir}: is a directory, not a workflow file`);
  });

  it('a file over 1 MiB is refused', () => {
    const big = write('big.yaml', `name: big\n# ${'x'.repeat(1024 * 1024)}\n`);
    expect(errorOf(() => loadWorkflowFile(big)).message).toMatch(new RegExp(`^${big.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: the file is \\d+ bytes, over the 1 MiB limit`));
  });

  it('a file that is not UTF-8 is refused', () => {
    const binary = write('bin.yaml', Buffer.from([0x6e, 0x61, 0x6d, 0x65, 0x3a, 0x20, 0xff, 0xfe, 0x0a]));
    expect(errorOf(() => loadWorkflowFile(binary)).message).toBe(`${binary}: not UTF-8 text`);
  });
});
