import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { ValidationError } from '../../src/events/errors.js';
import {
  normalizeWorkflowSpec,
  sequentialOrder,
  stepAncestors,
  topologicalOrder,
  workflowFileSchema,
  workflowJsonSchema,
  workflowSpecSchema,
  type SpecProblem,
  type WorkflowSpec,
} from '../../src/workflow/spec.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'workflows');
const fixture = (name: string) => readFileSync(join(FIXTURES, name), 'utf8');

/** The error thrown by the normaliser for `input` (fails the test when it does not throw). */
function errorOf(input: unknown): ValidationError {
  try {
    normalizeWorkflowSpec(input);
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    return error as ValidationError;
  }
  throw new Error('expected a ValidationError');
}

function problemsOf(input: unknown): SpecProblem[] {
  const problems = errorOf(input).details?.problems as SpecProblem[];
  expect(Array.isArray(problems)).toBe(true);
  return problems;
}

/** The single problem of `input` (fails when there are none or several). */
function problemOf(input: unknown): SpecProblem {
  const problems = problemsOf(input);
  expect(problems.map((p) => p.message)).toHaveLength(1);
  return problems[0]!;
}

/** A workflow with the given steps (and extra root fields). */
function wf(steps: unknown[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { name: 'wf', ...extra, steps };
}

const yaml = (text: string): unknown => parseYaml(text);

describe('normalizeWorkflowSpec: native shape', () => {
  it('fills every default for a minimal spec', () => {
    const { spec, warnings, format } = normalizeWorkflowSpec({ name: 'min', steps: [{ id: 'hello', run: 'echo hello' }] });
    expect(format).toBe('native');
    expect(warnings).toEqual([]);
    expect(spec).toEqual<WorkflowSpec>({
      name: 'min',
      description: null,
      env: {},
      secrets: [],
      concurrency: 4,
      timeoutMs: null,
      inputs: {},
      steps: [
        {
          id: 'hello',
          name: null,
          target: { type: 'command', command: 'echo hello', args: [], shell: true, cwd: null, env: {} },
          needs: [],
          if: null,
          continueOnError: false,
          timeoutMs: null,
          retries: { attempts: 1, delayMs: 10_000, backoff: 2, maxDelayMs: null },
          outputs: [],
        },
      ],
    });
  });

  it('reads the example from the design: run, command + args, needs, retries, outputs, cwd, env, agent', () => {
    const { spec } = normalizeWorkflowSpec(
      yaml(`
$schema: ./workflow.schema.json
name: nightly
description: lint, test, fix
env: { CI: "1", DEBUG: false, LEVEL: 3 }
secrets: [GITHUB_TOKEN, GITHUB_TOKEN]
concurrency: 4
timeout: 30m
inputs: { branch: { default: main, description: the branch, required: false }, depth: 1, tag: null }
steps:
  - id: lint
    run: npm run lint
    outputs: [x]
  - id: test
    command: npm
    args: [test, --, --reporter=dot, 8080]
    needs: lint
    continue-on-error: true
    timeout: 10m
    retries: 2
    outputs: [summary]
    cwd: ./app
    env: { A: "\${{ steps.lint.outputs.x }}" }
  - id: fix
    needs: [test]
    if: failure()
    agent: { provider: codex, prompt: "fix it on \${{ inputs.branch }}", model: gpt-5, max-turns: 5 }
`),
    );
    expect(spec.description).toBe('lint, test, fix');
    expect(spec.env).toEqual({ CI: '1', DEBUG: 'false', LEVEL: '3' });
    expect(spec.secrets).toEqual(['GITHUB_TOKEN']);
    expect(spec.timeoutMs).toBe(1_800_000);
    expect(spec.inputs).toEqual({
      branch: { default: 'main', description: 'the branch', required: false },
      depth: { default: '1', description: null, required: false },
      tag: { default: null, description: null, required: false },
    });
    const [lint, test, fix] = spec.steps;
    expect(lint!.target).toEqual({ type: 'command', command: 'npm run lint', args: [], shell: true, cwd: null, env: {} });
    expect(test).toMatchObject({
      id: 'test',
      target: { type: 'command', command: 'npm', args: ['test', '--', '--reporter=dot', '8080'], shell: false, cwd: './app', env: { A: '${{ steps.lint.outputs.x }}' } },
      needs: ['lint'],
      continueOnError: true,
      timeoutMs: 600_000,
      retries: { attempts: 3, delayMs: 10_000, backoff: 2, maxDelayMs: null },
      outputs: ['summary'],
    });
    expect(fix).toMatchObject({ needs: ['test'], if: 'failure()' });
    expect(fix!.target).toEqual({
      type: 'agent',
      provider: 'codex',
      prompt: 'fix it on ${{ inputs.branch }}',
      promptFile: null,
      model: 'gpt-5',
      agent: null,
      cwd: null,
      env: {},
      permissionMode: null,
      extraArgs: [],
      configIsolation: 'login', // the default of new specs: the user's login, settings shut out
      account: null,
      maxTurns: 5,
      maxCostUsd: null,
      idleTimeoutMs: null,
    });
    expect(workflowSpecSchema.parse(spec)).toEqual(spec);
  });

  it('loads the diamond fixture; the result satisfies the canonical schema', () => {
    const { spec, format, warnings } = normalizeWorkflowSpec(yaml(fixture('diamond.yaml')));
    expect(format).toBe('native');
    expect(warnings).toEqual([]);
    expect(spec.steps.map((s) => [s.id, s.needs])).toEqual([
      ['build', []],
      ['lint', ['build']],
      ['test', ['build']],
      ['report', ['lint', 'test']],
      ['fix', ['report']],
    ]);
    expect(spec.concurrency).toBe(2);
    expect(spec.timeoutMs).toBe(3_600_000);
    expect(spec.env).toEqual({ CI: 'true', NODE_OPTIONS: '--max-old-space-size=2048' });
    expect(spec.steps[2]!.retries).toEqual({ attempts: 3, delayMs: 30_000, backoff: 2, maxDelayMs: 120_000 });
    expect(spec.steps[4]!.target).toMatchObject({ type: 'agent', provider: 'claude', permissionMode: 'acceptEdits', maxTurns: 30, idleTimeoutMs: 300_000 });
    expect(workflowSpecSchema.safeParse(spec).success).toBe(true);
  });

  it('accepts agent fields in kebab-case and camelCase alike', () => {
    const kebab = {
      provider: 'claude',
      'prompt-file': 'prompts/fix.md',
      model: 'opus',
      agent: 'reviewer',
      cwd: '/repo',
      env: { A: 1 },
      'permission-mode': 'plan',
      'extra-args': ['--verbose', 2],
      'config-isolation': 'none',
      account: 'work',
      'max-turns': 7,
      'max-cost-usd': 1.25,
      'idle-timeout-ms': 60_000,
    };
    const camel = {
      provider: 'claude',
      promptFile: 'prompts/fix.md',
      model: 'opus',
      agent: 'reviewer',
      cwd: '/repo',
      env: { A: 1 },
      permissionMode: 'plan',
      extraArgs: ['--verbose', 2],
      configIsolation: 'none',
      account: 'work',
      maxTurns: 7,
      maxCostUsd: 1.25,
      idleTimeoutMs: 60_000,
    };
    const a = normalizeWorkflowSpec(wf([{ id: 'x', agent: kebab }])).spec.steps[0]!.target;
    const b = normalizeWorkflowSpec(wf([{ id: 'x', agent: camel }])).spec.steps[0]!.target;
    expect(a).toEqual(b);
    expect(a).toEqual({
      type: 'agent',
      provider: 'claude',
      prompt: null,
      promptFile: 'prompts/fix.md',
      model: 'opus',
      agent: 'reviewer',
      cwd: '/repo',
      env: { A: '1' },
      permissionMode: 'plan',
      extraArgs: ['--verbose', '2'],
      configIsolation: 'none',
      account: 'work',
      maxTurns: 7,
      maxCostUsd: 1.25,
      idleTimeoutMs: 60_000,
    });
    // `idle-timeout` takes a duration.
    const c = normalizeWorkflowSpec(wf([{ id: 'x', agent: { provider: 'p', prompt: 'go', 'idle-timeout': '2m' } }])).spec.steps[0]!.target;
    expect(c).toMatchObject({ idleTimeoutMs: 120_000 });
  });

  it('refuses an agent field given in both spellings', () => {
    const p = problemOf(wf([{ id: 'x', agent: { provider: 'p', prompt: 'go', maxTurns: 2, 'max-turns': 3 } }]));
    expect(p).toMatchObject({ step: 'x', field: 'agent.max-turns' });
    expect(p.message).toMatch(/^step "x": agent\.max-turns: given twice \(also as maxTurns\)/);
  });

  it('merges the step cwd/env into an agent target', () => {
    const { spec } = normalizeWorkflowSpec(wf([{ id: 'x', cwd: '/w', env: { A: 'a' }, agent: { provider: 'p', prompt: 'go', env: { B: 'b' } } }]));
    expect(spec.steps[0]!.target).toMatchObject({ cwd: '/w', env: { A: 'a', B: 'b' } });
    const p = problemOf(wf([{ id: 'x', env: { A: 'a' }, agent: { provider: 'p', prompt: 'go', env: { A: 'b' } } }]));
    expect(p).toMatchObject({ step: 'x', field: 'agent.env.A' });
  });

  it('accepts command with shell: true as shell text, and an if wrapped in ${{ }}', () => {
    const { spec } = normalizeWorkflowSpec(
      wf([
        { id: 'a', command: 'make test', shell: true },
        { id: 'b', needs: 'a', run: 'echo', if: "${{ steps.a.exitCode == 0 && inputs.mode == 'x' }}" },
      ], { inputs: { mode: 'x' } }),
    );
    expect(spec.steps[0]!.target).toMatchObject({ command: 'make test', shell: true, args: [] });
    expect(spec.steps[1]!.if).toBe("${{ steps.a.exitCode == 0 && inputs.mode == 'x' }}");
  });

  it('allows references to transitive ancestors and to undeclared outputs of steps that declare none', () => {
    const { spec } = normalizeWorkflowSpec(
      wf([
        { id: 'a', run: 'echo a' },
        { id: 'b', needs: 'a', run: 'echo b', outputs: ['n'] },
        { id: 'c', needs: 'b', command: 'echo', args: ['${{ steps.a.outputs.anything }}', '${{ steps.b.outputs.n }}'], if: 'steps.a.status == \'success\'' },
      ]),
    );
    expect(spec.steps[2]!.target).toMatchObject({ args: ['${{ steps.a.outputs.anything }}', '${{ steps.b.outputs.n }}'] });
  });

  it('retries: a count or { limit, delay, backoff, max-delay }', () => {
    const step = (retries: unknown) => normalizeWorkflowSpec(wf([{ id: 'x', run: 'x', retries }])).spec.steps[0]!.retries;
    expect(step(0)).toEqual({ attempts: 1, delayMs: 10_000, backoff: 2, maxDelayMs: null });
    expect(step(100)).toEqual({ attempts: 101, delayMs: 10_000, backoff: 2, maxDelayMs: null });
    expect(step({ limit: 3, delay: '1s', backoff: 1.5, 'max-delay': '10s' })).toEqual({ attempts: 4, delayMs: 1000, backoff: 1.5, maxDelayMs: 10_000 });
  });
});

describe('normalizeWorkflowSpec: secrets are never written into a workflow file', () => {
  it('an env value whose name says secret is refused where it is written (the spec is stored in clear), with how to pass it', () => {
    const root = problemOf(wf([{ id: 'x', run: 'deploy' }], { env: { CLI_TOKEN: 'tok-4f9a1c77e2' } }));
    expect(root).toMatchObject({
      field: 'env.CLI_TOKEN',
      message: expect.stringContaining("CLI_TOKEN: its name says it holds a secret, and a workflow file's values are stored with the workflow, in clear"),
      hint: 'list CLI_TOKEN under secrets: and set it in the environment the runs run in (where loops daemon runs); drop it from env:',
    });
    expect(problemOf(wf([{ id: 'x', run: 'deploy', env: { DB_PASSWORD: 'hunter22' } }]))).toMatchObject({ step: 'x', field: 'env.DB_PASSWORD' });
    expect(problemOf(wf([{ id: 'x', agent: { provider: 'p', prompt: 'go', env: { OPENAI_API_KEY: 'sk-test-1234' } } }]))).toMatchObject({ step: 'x', field: 'agent.env.OPENAI_API_KEY' });
  });

  it('names that only look alike, trivial values, templates and secrets: are fine', () => {
    const { spec } = normalizeWorkflowSpec(
      wf([{ id: 'x', run: 'deploy', env: { DISABLE_AUTH: 'true', GIT_AUTHOR_NAME: 'Ann', TOKENIZERS_PARALLELISM: 'false', API_TOKEN: '${{ inputs.token }}' } }], {
        secrets: ['CLI_TOKEN'],
        inputs: { token: { default: 'x' } },
      }),
    );
    expect(spec.secrets).toEqual(['CLI_TOKEN']);
  });
});

describe('normalizeWorkflowSpec: predecessor shape', () => {
  it('loads a realistic predecessor JSON file unchanged', () => {
    const { spec, warnings, format } = normalizeWorkflowSpec(JSON.parse(fixture('predecessor.json')));
    expect(format).toBe('legacy');
    expect(spec.name).toBe('release-check');
    expect(spec.steps.map((s) => [s.id, s.needs, s.continueOnError, s.timeoutMs])).toEqual([
      ['install', [], false, 600_000],
      ['unit', ['install'], false, 900_000],
      ['audit', ['install'], true, null],
      ['review', ['unit', 'audit'], false, 1_800_000],
    ]);
    expect(spec.steps[0]!.target).toEqual({ type: 'command', command: 'npm ci', args: [], shell: true, cwd: '/srv/app', env: { NODE_ENV: 'test' } });
    expect(spec.steps[1]!.target).toEqual({ type: 'command', command: 'npm', args: ['test', '--', '--run'], shell: false, cwd: '/srv/app', env: {} });
    // No shell field: the executable and its argv, as the predecessor ran it.
    expect(spec.steps[2]!.target).toMatchObject({ command: 'npm', args: ['audit', '--omit=dev'], shell: false });
    // The predecessor's semantics, recorded in the spec; its version and step descriptions are kept.
    expect(spec).toMatchObject({ execution: 'sequential', concurrency: 1, versionLabel: '3' });
    expect(spec.steps[1]!.description).toBe('the unit tests');
    expect(spec.steps[3]!.target).toEqual({
      type: 'agent',
      provider: 'codex',
      prompt: 'Review CHANGELOG.md against the commits since the last tag.',
      promptFile: null,
      model: 'gpt-5-codex',
      agent: null,
      cwd: '/srv/app',
      env: {},
      permissionMode: 'read-only',
      extraArgs: ['--quiet'],
      configIsolation: 'login', // no configIsolation: the predecessor's default, safe — which kept the login
      account: null,
      maxTurns: 20,
      maxCostUsd: 2.5,
      idleTimeoutMs: 300_000,
    });
    expect(warnings).toEqual([
      'step "review": target.sandbox: unknown agent field, ignored',
      'step "review": target.reasoningEffort: unknown agent field, ignored',
    ]);
  });

  it('warns about unknown predecessor agent fields, with a suggestion when one is close', () => {
    const { spec, warnings } = normalizeWorkflowSpec(wf([{ id: 'a', target: { type: 'agent', provider: 'p', prompt: 'go', maxTurn: 3, flavour: 'x' } }]));
    expect(spec.steps[0]!.target).toMatchObject({ maxTurns: null });
    expect(warnings).toEqual(['step "a": target.maxTurn: unknown agent field, ignored (did you mean "maxTurns"?)', 'step "a": target.flavour: unknown agent field, ignored']);
  });

  it('is legacy as soon as one step uses a predecessor field', () => {
    for (const step of [{ dependsOn: [] }, { continueOnFailure: false }, { timeoutMs: 1000 }]) {
      const { format } = normalizeWorkflowSpec(wf([{ id: 'a', run: 'x', ...step }]));
      expect(format).toBe('legacy');
    }
  });

  it('refuses needs and dependsOn on one step', () => {
    const p = problemOf(wf([{ id: 'a', run: 'x' }, { id: 'b', run: 'y', needs: ['a'], dependsOn: ['a'] }]));
    expect(p).toMatchObject({ step: 'b', field: 'dependsOn', path: ['steps', 1, 'dependsOn'] });
    expect(p.message).toBe('step "b": dependsOn: needs and dependsOn are both given');
  });

  it('refuses unknown fields of a predecessor command target, and an unknown target type', () => {
    const p = problemOf(wf([{ id: 'a', target: { type: 'command', command: 'true', shel: true } }]));
    expect(p).toMatchObject({ step: 'a', field: 'target.shel', hint: 'did you mean "shell"?' });
    const q = problemOf(wf([{ id: 'a', target: { type: 'workflow', command: 'true' } }]));
    expect(q).toMatchObject({ step: 'a', field: 'target.type' });
    expect(q.message).toMatch(/expected "command" or "agent"/);
  });

  it("a step's timeoutMs overrides its target's (the predecessor's step.timeoutMs ?? target.timeoutMs)", () => {
    const { spec } = normalizeWorkflowSpec(wf([{ id: 'a', timeoutMs: 1000, target: { type: 'command', command: 'true', timeoutMs: 2000 } }]));
    expect(spec.steps[0]!.timeoutMs).toBe(1000);
    const own = normalizeWorkflowSpec(wf([{ id: 'a', target: { type: 'command', command: 'true', timeoutMs: 2000 } }]));
    expect(own.spec.steps[0]!.timeoutMs).toBe(2000);
  });

  it('a command with spaces and no shell: true is refused as the predecessor refuses it, naming the step and field, with a hint', () => {
    const p = problemOf(wf([{ id: 'audit', target: { type: 'command', command: 'npm audit --omit=dev' } }]));
    expect(p).toMatchObject({ step: 'audit', field: 'target.command', path: ['steps', 0, 'target', 'command'] });
    expect(p.message).toBe('step "audit": target.command: "npm audit --omit=dev" contains whitespace, but runs without a shell, as one executable');
    expect(p.hint).toBe('put the flags in args ("command": "npm", "args": ["audit","--omit=dev"]), or set "shell": true to run it through a shell — the predecessor refused it too');
    // With shell: true it is shell text.
    const shell = normalizeWorkflowSpec(wf([{ id: 'a', target: { type: 'command', command: 'npm audit', shell: true } }]));
    expect(shell.spec.steps[0]!.target).toMatchObject({ command: 'npm audit', shell: true });
  });

  it("keeps the file's version as a label and step descriptions; a native file gets no execution field unless it says so", () => {
    const { spec } = normalizeWorkflowSpec(wf([{ id: 'a', description: 'first', run: 'x' }], { version: 7 }));
    expect(spec).toMatchObject({ versionLabel: '7', concurrency: 4 });
    expect(spec.steps[0]!.description).toBe('first');
    expect('execution' in spec).toBe(false);
    expect(normalizeWorkflowSpec(wf([{ id: 'a', run: 'x' }], { version: '2026.1', execution: 'sequential' })).spec).toMatchObject({
      versionLabel: '2026.1',
      execution: 'sequential',
      concurrency: 1,
    });
    expect(problemOf(wf([{ id: 'a', run: 'x' }], { version: true })).message).toMatch(/^version: expected a version label/);
  });

  it('a predecessor-shape file is sequential unless it says execution: parallel; concurrency contradicting sequential is refused', () => {
    const steps = [{ id: 'a', target: { type: 'command', command: 'true' } }];
    expect(normalizeWorkflowSpec(wf(steps)).spec).toMatchObject({ execution: 'sequential', concurrency: 1 });
    expect(normalizeWorkflowSpec(wf(steps, { execution: 'parallel' })).spec).toMatchObject({ execution: 'parallel', concurrency: 4 });
    const p = problemOf(wf(steps, { concurrency: 3 }));
    expect(p).toMatchObject({ field: 'concurrency', message: 'concurrency: 3 has no effect: a predecessor-shape file runs one step at a time' });
    expect(problemOf(wf([{ id: 'a', run: 'x' }], { execution: 'sequential', concurrency: 2 })).hint).toBe('drop concurrency, or use execution: parallel');
  });

  it("the predecessor README's own workflow example validates, sequential", () => {
    const { spec, format } = normalizeWorkflowSpec(JSON.parse(fixture('predecessor-readme.json')));
    expect(format).toBe('legacy');
    expect(spec.execution).toBe('sequential');
    expect(spec.steps.map((s) => [s.id, s.needs])).toEqual([
      ['status', []],
      ['review', ['status']],
    ]);
  });
});

describe('normalizeWorkflowSpec: validation', () => {
  it('reports every problem, the first in the message with "(and N more problems)"', () => {
    const error = errorOf({ name: 'bad name', concurrency: 0, steps: [{ id: 'a' }, { id: 'a', run: 'x', needs: 'zz' }] });
    const problems = error.details!.problems as SpecProblem[];
    expect(problems.map((p) => [p.step, p.field])).toEqual([
      [null, 'name'],
      [null, 'concurrency'],
      ['a', null],
      ['a', 'id'],
      ['a', 'needs'],
    ]);
    expect(error.message).toBe(`${problems[0]!.message} (and 4 more problems)`);
    expect(error.hint).toBe(problems[0]!.hint);
    const single = errorOf({ name: 'ok', steps: [{ id: 'a' }] });
    expect(single.message).toBe('step "a": no target');
  });

  it('prefixes the error message with the source file when given', () => {
    expect(() => normalizeWorkflowSpec({ name: 'x', steps: [] }, { file: 'wf.yaml' })).toThrow(/^wf\.yaml: steps: no steps/);
  });

  it('refuses a spec that is not a mapping', () => {
    for (const input of [null, 'name: x', [], 3]) {
      expect(problemOf(input)).toMatchObject({ path: [], step: null, field: null, message: expect.stringMatching(/must be a mapping/) });
    }
  });

  it('name: missing or invalid', () => {
    expect(problemOf({ steps: [{ id: 'a', run: 'x' }] }).message).toBe('name is missing');
    const p = problemOf({ name: '-bad', steps: [{ id: 'a', run: 'x' }] });
    expect(p).toMatchObject({ field: 'name', path: ['name'], message: 'name: invalid workflow name "-bad"' });
    expect(p.hint).toMatch(/letters, digits/);
    expect(problemOf({ name: 'x'.repeat(65), steps: [{ id: 'a', run: 'x' }] }).field).toBe('name');
  });

  it('steps: missing, not a list, empty', () => {
    expect(problemOf({ name: 'x' }).message).toBe('steps is missing');
    expect(problemOf({ name: 'x', steps: { a: 1 } }).message).toMatch(/^steps: expected a list of steps/);
    expect(problemOf({ name: 'x', steps: [] })).toMatchObject({ field: 'steps', message: 'steps: no steps' });
  });

  it('unknown fields, with "did you mean"', () => {
    expect(problemOf({ name: 'x', concurency: 2, steps: [{ id: 'a', run: 'x' }] })).toMatchObject({
      field: 'concurency',
      message: 'concurency: unknown field',
      hint: 'did you mean "concurrency"?',
    });
    expect(problemOf(wf([{ id: 'a', run: 'x', nedes: [] }]))).toMatchObject({
      step: 'a',
      field: 'nedes',
      path: ['steps', 0, 'nedes'],
      message: 'step "a": nedes: unknown field',
      hint: 'did you mean "needs"?',
    });
    expect(problemOf(wf([{ id: 'a', run: 'x', continueOnError: true }])).hint).toBe('did you mean "continue-on-error"?');
    expect(problemOf(wf([{ id: 'a', agent: { provider: 'p', prompt: 'x', modle: 'm' } }]))).toMatchObject({ step: 'a', field: 'agent.modle', hint: 'did you mean "model"?' });
    expect(problemOf(wf([{ id: 'a', run: 'x', retries: { limit: 1, dely: '1s' } }]))).toMatchObject({ field: 'retries.dely', hint: 'did you mean "delay"?' });
    expect(problemOf(wf([{ id: 'a', run: 'x' }], { inputs: { b: { defualt: 'x' } } }))).toMatchObject({ field: 'inputs.b.defualt', hint: 'did you mean "default"?' });
    // Nothing close: the hint lists the known fields.
    expect(problemOf(wf([{ id: 'a', run: 'x', zzzzzz: 1 }])).hint).toMatch(/^known fields: id, name, description, needs, /);
  });

  it('step id: missing, invalid, duplicate', () => {
    expect(problemOf(wf([{ run: 'x' }]))).toMatchObject({ step: null, message: 'step #1: id is missing' });
    const bad = problemOf(wf([{ id: '9lives', run: 'x' }]));
    expect(bad).toMatchObject({ step: null, field: 'id', message: 'step #1: id: invalid step id "9lives"' });
    expect(bad.hint).toMatch(/starting with a letter or _/);
    // It would key a plain object (a run's steps map), where it sets the prototype instead.
    expect(problemOf(wf([{ id: '__proto__', run: 'x' }]))).toMatchObject({ field: 'id', message: 'step #1: id: invalid step id "__proto__"' });
    const dup = problemOf(wf([{ id: 'a', run: 'x' }, { id: 'a', run: 'y' }]));
    expect(dup).toMatchObject({ step: 'a', field: 'id', path: ['steps', 1, 'id'], message: 'step "a": id: duplicate step id (step #1 has it too)' });
  });

  it('target: missing, or two of them', () => {
    expect(problemOf(wf([{ id: 'a', needs: [] }]))).toMatchObject({ step: 'a', field: null, message: 'step "a": no target' });
    const two = problemOf(wf([{ id: 'a', run: 'x', agent: { provider: 'p', prompt: 'x' } }]));
    expect(two).toMatchObject({ step: 'a', field: 'agent', message: 'step "a": agent: a step has one target, but this one also has run' });
    expect(problemOf(wf([{ id: 'a', command: 'x', target: { type: 'command', command: 'y' } }])).field).toBe('target');
  });

  it('agent: provider and prompt are required; prompt and prompt-file exclude each other', () => {
    expect(problemOf(wf([{ id: 'a', agent: { prompt: 'x' } }])).message).toBe('step "a": agent: provider is missing');
    expect(problemOf(wf([{ id: 'a', agent: { provider: 'p' } }])).message).toBe('step "a": agent: prompt is missing');
    expect(problemOf(wf([{ id: 'a', agent: { provider: 'p', prompt: 'x', 'prompt-file': 'f' } }])).field).toBe('agent.prompt-file');
    expect(problemOf(wf([{ id: 'a', agent: 'claude' }]))).toMatchObject({ field: 'agent', message: expect.stringMatching(/expected a mapping/) });
    expect(problemOf(wf([{ id: 'a', agent: { provider: 'p', prompt: 'x', 'config-isolation': 'off' } }])).message).toBe(
      'step "a": agent.config-isolation: expected "login" or "empty" or "safe" or "none", got a string ("off")',
    );
  });

  it('needs: unknown step, with "did you mean" and the list of steps', () => {
    const p = problemOf(wf([{ id: 'lint', run: 'x' }, { id: 'test', run: 'y', needs: 'lnt' }, { id: 'fix', run: 'z' }]));
    expect(p).toMatchObject({
      step: 'test',
      field: 'needs',
      path: ['steps', 1, 'needs'],
      message: 'step "test": needs: unknown step "lnt"',
      hint: 'did you mean "lint"? steps: lint, test, fix',
    });
    const q = problemOf(wf([{ id: 'lint', run: 'x' }, { id: 'test', run: 'y', needs: ['lint', 'zzzzzz'] }]));
    expect(q).toMatchObject({ path: ['steps', 1, 'needs', 1], hint: 'steps: lint, test' });
  });

  it('needs: each item must be a step id; a repeated one is dropped with a warning', () => {
    expect(problemOf(wf([{ id: 'a', run: 'x' }, { id: 'b', run: 'x', needs: ['a', 4] }]))).toMatchObject({
      step: 'b',
      field: 'needs',
      path: ['steps', 1, 'needs', 1],
      message: 'step "b": needs: expected a step id, got a number (4)',
    });
    expect(problemOf(wf([{ id: 'a', run: 'x', needs: 'no such step' }])).message).toBe('step "a": needs: unknown step "no such step"');
    const { spec, warnings } = normalizeWorkflowSpec(wf([{ id: 'a', run: 'x' }, { id: 'b', run: 'x', needs: ['a', 'a'] }]));
    expect(spec.steps[1]!.needs).toEqual(['a']);
    expect(warnings).toEqual(['step "b": needs: "a" is listed twice']);
  });

  it('needs: self-dependency', () => {
    expect(problemOf(wf([{ id: 'a', run: 'x', needs: ['a'] }]))).toMatchObject({ step: 'a', field: 'needs', message: 'step "a": needs: a step cannot depend on itself' });
  });

  it('needs: a cycle, named in order', () => {
    const p = problemOf(
      wf([
        { id: 'a', run: 'x', needs: ['b'] },
        { id: 'b', run: 'x', needs: ['c'] },
        { id: 'c', run: 'x', needs: ['a'] },
        { id: 'd', run: 'x', needs: ['a'] },
      ]),
    );
    expect(p).toMatchObject({ step: 'a', field: 'needs', path: ['steps', 0, 'needs', 0], message: 'step "a": needs: cycle: a → b → c → a' });
    // Two separate cycles: two problems.
    const two = problemsOf(
      wf([
        { id: 'a', run: 'x', needs: 'b' },
        { id: 'b', run: 'x', needs: 'a' },
        { id: 'c', run: 'x', needs: 'd' },
        { id: 'd', run: 'x', needs: 'c' },
      ]),
    );
    expect(two.map((x) => x.message)).toEqual(['step "a": needs: cycle: a → b → a', 'step "c": needs: cycle: c → d → c']);
  });

  it('command: whitespace without a shell', () => {
    const p = problemOf(wf([{ id: 'a', command: 'npm test' }]));
    expect(p).toMatchObject({ step: 'a', field: 'command', message: 'step "a": command: "npm test" contains whitespace, but runs without a shell, as one executable' });
    expect(p.hint).toMatch(/args: \[test\]/);
    expect(p.hint).toMatch(/run:|shell: true/);
    // A template with spaces inside is not whitespace of the command.
    expect(normalizeWorkflowSpec(wf([{ id: 'a', command: '${{ inputs.tool }}' }], { inputs: { tool: 'make' } })).spec.steps[0]!.target).toMatchObject({ shell: false });
  });

  it('args and shell only go with command', () => {
    expect(problemOf(wf([{ id: 'a', run: 'x', args: ['y'] }]))).toMatchObject({ field: 'args', message: 'step "a": args: not used with run:' });
    expect(problemOf(wf([{ id: 'a', run: 'x', shell: false }]))).toMatchObject({ field: 'shell', message: 'step "a": shell: shell: false contradicts run: (shell text)' });
    expect(problemOf(wf([{ id: 'a', command: 'x', shell: true, args: ['y'] }]))).toMatchObject({ field: 'args', message: 'step "a": args: args are only used with shell: false' });
    expect(problemOf(wf([{ id: 'a', agent: { provider: 'p', prompt: 'x' }, args: ['y'] }])).hint).toMatch(/extra-args/);
  });

  it('a ${{ }} template in shell text is refused, with the env hint', () => {
    const steps = (second: Record<string, unknown>) => wf([{ id: 'a', run: 'x', outputs: ['o'] }, { id: 'b', needs: 'a', ...second }]);
    for (const [second, field] of [
      [{ run: 'echo ${{ steps.a.outputs.o }}' }, 'run'],
      [{ command: 'echo ${{ steps.a.outputs.o }}', shell: true }, 'command'],
      [{ target: { type: 'command', command: 'echo ${{ steps.a.outputs.o }}', shell: true } }, 'target.command'],
    ] as const) {
      const p = problemOf(steps(second));
      expect(p).toMatchObject({ step: 'b', field, message: `step "b": ${field}: \${{ }} in shell text` });
      expect(p.hint).toMatch(/env:/);
      expect(p.hint).toMatch(/"\$SUMMARY"/);
    }
  });

  it('if: a syntax error keeps its column', () => {
    const p = problemOf(wf([{ id: 'a', run: 'x', if: 'success() && )' }]));
    expect(p).toMatchObject({ step: 'a', field: 'if', path: ['steps', 0, 'if'] });
    expect(p.message).toMatch(/^step "a": if: .*column 14/);
  });

  it('a template syntax error is reported on its field', () => {
    const p = problemOf(wf([{ id: 'a', command: 'echo', args: ['${{ inputs.x'] }]));
    expect(p).toMatchObject({ step: 'a', field: 'args', path: ['steps', 0, 'args', 0] });
    expect(p.message).toMatch(/unclosed/);
  });

  describe('references must be to ancestors, declared outputs and declared inputs', () => {
    const base = (step: Record<string, unknown>) =>
      wf(
        [
          { id: 'build', run: 'make', outputs: ['version'] },
          { id: 'other', run: 'true' },
          { id: 'use', needs: 'build', ...step },
        ],
        { inputs: { branch: 'main' } },
      );
    const cases: Array<[string, Record<string, unknown>, string, Array<string | number>]> = [
      ['if', { run: 'x', if: "steps.other.status == 'success'" }, 'if', ['if']],
      ['args', { command: 'echo', args: ['${{ steps.other.outputs.x }}'] }, 'args', ['args', 0]],
      ['env', { run: 'x', env: { V: '${{ steps.other.exitCode }}' } }, 'env.V', ['env', 'V']],
      ['cwd', { run: 'x', cwd: '/tmp/${{ steps.other.outputs.dir }}' }, 'cwd', ['cwd']],
      ['prompt', { agent: { provider: 'p', prompt: 'see ${{ steps.other.outputs.log }}' } }, 'agent.prompt', ['agent', 'prompt']],
    ];
    it.each(cases)('%s: a step that is not an ancestor', (_, step, field, rel) => {
      const p = problemOf(base(step));
      expect(p).toMatchObject({ step: 'use', field, path: ['steps', 2, ...rel], message: `step "use": ${field}: refers to step "other", which is not among its needs` });
      expect(p.hint).toMatch(/needs: other/);
    });

    it('an unknown step, with "did you mean"', () => {
      expect(problemOf(base({ run: 'x', if: "steps.biuld.status == 'success'" }))).toMatchObject({
        field: 'if',
        message: 'step "use": if: unknown step "biuld"',
        hint: 'did you mean "build"? steps: build, other, use',
      });
    });

    it('the step itself', () => {
      expect(problemOf(base({ run: 'x', outputs: ['o'], env: { A: '${{ steps.use.outputs.o }}' } })).message).toBe(
        'step "use": env.A: refers to the step itself (steps.use)',
      );
    });

    it('an undeclared output of a step that declares outputs', () => {
      const p = problemOf(base({ command: 'echo', args: ['${{ steps.build.outputs.versoin }}'] }));
      expect(p).toMatchObject({ field: 'args', message: 'step "use": args: step "build" has no output "versoin"', hint: 'did you mean "version"? its outputs: version' });
    });

    it('an undeclared input', () => {
      const p = problemOf(base({ run: 'x', env: { B: '${{ inputs.brnch }}' } }));
      expect(p).toMatchObject({ field: 'env.B', message: 'step "use": env.B: unknown input "brnch"', hint: 'did you mean "branch"? inputs: branch' });
      const none = problemOf(wf([{ id: 'a', run: 'x', if: "inputs.mode == 'x'" }]));
      expect(none.hint).toMatch(/declare it: inputs:/);
    });

    it('the workflow env may use inputs but not steps', () => {
      expect(normalizeWorkflowSpec(wf([{ id: 'a', run: 'x' }], { inputs: { b: 'x' }, env: { B: '${{ inputs.b }}' } })).spec.env).toEqual({ B: '${{ inputs.b }}' });
      const p = problemOf(wf([{ id: 'a', run: 'x' }], { env: { B: '${{ steps.a.status }}' } }));
      expect(p).toMatchObject({ step: null, field: 'env.B' });
      expect(p.message).toMatch(/workflow env can only use inputs/);
    });
  });

  it('durations: bare numbers, bad text, zero', () => {
    expect(problemOf(wf([{ id: 'a', run: 'x' }], { timeout: 30 }))).toMatchObject({ field: 'timeout', message: 'timeout: 30 has no unit', hint: expect.stringMatching(/30s/) });
    expect(problemOf(wf([{ id: 'a', run: 'x', timeout: '5 minutes' }]))).toMatchObject({ step: 'a', field: 'timeout', message: 'step "a": timeout: invalid duration "5 minutes"' });
    expect(problemOf(wf([{ id: 'a', run: 'x', timeout: '0s' }])).message).toMatch(/^step "a": timeout: duration must be greater than zero/);
    expect(problemOf(wf([{ id: 'a', run: 'x', timeout: '1s1m' }])).message).toBe('step "a": timeout: invalid duration "1s1m"');
    expect(problemOf(wf([{ id: 'a', run: 'x', retries: { limit: 1, delay: 'soon' } }])).field).toBe('retries.delay');
    expect(problemOf(wf([{ id: 'a', agent: { provider: 'p', prompt: 'x', 'idle-timeout': 'never' } }])).field).toBe('agent.idle-timeout');
  });

  it('concurrency: a whole number from 1 to 256', () => {
    for (const concurrency of [0, 257, 1.5, '4']) {
      expect(problemOf(wf([{ id: 'a', run: 'x' }], { concurrency }))).toMatchObject({ field: 'concurrency', path: ['concurrency'] });
    }
    expect(problemOf(wf([{ id: 'a', run: 'x' }], { concurrency: 0 })).message).toBe('concurrency: must be at least 1, got a number (0)');
    expect(normalizeWorkflowSpec(wf([{ id: 'a', run: 'x' }], { concurrency: 256 })).spec.concurrency).toBe(256);
  });

  it('retries: 0 to 100, and a consistent object', () => {
    for (const retries of [-1, 101, 2.5, 'twice']) {
      expect(problemOf(wf([{ id: 'a', run: 'x', retries }]))).toMatchObject({ step: 'a', field: 'retries' });
    }
    expect(problemOf(wf([{ id: 'a', run: 'x', retries: { limit: 101 } }]))).toMatchObject({ field: 'retries.limit', message: 'step "a": retries.limit: must be at most 100, got a number (101)' });
    expect(problemOf(wf([{ id: 'a', run: 'x', retries: { delay: '1s' } }])).message).toBe('step "a": retries: limit is missing');
    expect(problemOf(wf([{ id: 'a', run: 'x', retries: { limit: 2, backoff: 0.5 } }])).field).toBe('retries.backoff');
    expect(problemOf(wf([{ id: 'a', run: 'x', retries: { limit: 2, delay: '1m', 'max-delay': '10s' } }])).field).toBe('retries.max-delay');
    expect(problemOf(wf([{ id: 'a', run: 'x', retries: { limit: 0, delay: '1m' } }])).message).toBe('step "a": retries.delay: has no effect with limit 0');
  });

  it('outputs, env and secrets names', () => {
    expect(problemOf(wf([{ id: 'a', run: 'x', outputs: ['ok', 'ok'] }]))).toMatchObject({ field: 'outputs', path: ['steps', 0, 'outputs', 1] });
    expect(problemOf(wf([{ id: 'a', run: 'x', outputs: ['a.b'] }])).field).toBe('outputs');
    expect(problemOf(wf([{ id: 'a', run: 'x', env: { 'A-B': 'x' } }]))).toMatchObject({ field: 'env.A-B', message: expect.stringMatching(/invalid variable name "A-B"/) });
    expect(problemOf(wf([{ id: 'a', run: 'x', env: { A: ['x'] } }])).message).toBe('step "a": env.A: expected a string, number or boolean, got a list');
    expect(problemOf(wf([{ id: 'a', run: 'x' }], { secrets: ['1X'] })).field).toBe('secrets');
  });

  it('type errors say what was expected and what was found', () => {
    expect(problemOf(wf([{ id: 'a', run: 5 }])).message).toBe('step "a": run: expected a string, got a number (5)');
    expect(problemOf(wf([{ id: 'a', run: 'x', 'continue-on-error': 'yes' }])).message).toBe('step "a": continue-on-error: expected true or false, got a string ("yes")');
    expect(problemOf(wf([{ id: 'a', run: 'x', needs: 3 }])).message).toBe('step "a": needs: expected a step id or a list of step ids, got a number (3)');
    expect(problemOf(wf([{ id: 'a', run: '' }])).message).toBe('step "a": run: must not be empty');
  });
});

describe('workflow file schema and JSON Schema', () => {
  it('is valid JSON Schema 2020-12 describing the native fields', () => {
    const schema = workflowJsonSchema();
    const roundTrip = JSON.parse(JSON.stringify(schema)) as Record<string, any>;
    expect(roundTrip).toEqual(schema);
    expect(schema.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
    expect(schema.type).toBe('object');
    expect(schema.required).toEqual(['name', 'steps']);
    expect(schema.additionalProperties).toBe(false);
    const props = schema.properties as Record<string, any>;
    expect(Object.keys(props).sort()).toEqual(['$schema', 'concurrency', 'description', 'env', 'execution', 'inputs', 'name', 'secrets', 'steps', 'timeout', 'version'].sort());
    expect(props.concurrency).toMatchObject({ type: 'integer', minimum: 1, maximum: 256 });
    expect(props.name.pattern).toBe('^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$');
    const variants = props.steps.items.anyOf as Array<Record<string, any>>;
    expect(variants.map((v) => v.required)).toEqual([
      ['id', 'run'],
      ['id', 'command'],
      ['id', 'agent'],
    ]);
    for (const v of variants) {
      expect(Object.keys(v.properties)).toEqual(expect.arrayContaining(['id', 'needs', 'if', 'continue-on-error', 'timeout', 'retries', 'outputs', 'cwd', 'env']));
      expect(v.additionalProperties).toBe(false);
    }
    const agent = variants[2]!.properties.agent;
    expect(Object.keys(agent.properties)).toEqual(expect.arrayContaining(['provider', 'prompt', 'prompt-file', 'promptFile', 'max-turns', 'maxTurns', 'idle-timeout']));
    expect(agent.required).toEqual(['provider']);
    // A fresh object each time (callers may mutate it).
    expect(workflowJsonSchema()).not.toBe(schema);
  });

  it('the native fixture validates against the same zod source; bad shapes do not', () => {
    expect(workflowFileSchema.safeParse(yaml(fixture('diamond.yaml'))).success).toBe(true);
    expect(workflowFileSchema.safeParse({ name: 'x', steps: [{ id: 'a', run: 'x', nedes: [] }] }).success).toBe(false);
    expect(workflowFileSchema.safeParse({ name: 'x', steps: [{ id: 'a' }] }).success).toBe(false);
    expect(workflowFileSchema.safeParse({ name: 'x', steps: [{ id: 'a', run: 'x' }], timeout: '30' }).success).toBe(false);
  });
});

describe('graph helpers', () => {
  const spec = (steps: Array<[string, string[]]>): WorkflowSpec =>
    normalizeWorkflowSpec(wf(steps.map(([id, needs]) => ({ id, run: 'true', needs })))).spec;

  it('topologicalOrder: every step after its needs, file order among ready steps', () => {
    expect(topologicalOrder(spec([['a', []], ['b', []], ['c', []]]))).toEqual(['a', 'b', 'c']);
    // d is declared first but needs c; b and c become ready in file order.
    expect(topologicalOrder(spec([['d', ['c']], ['a', []], ['c', ['a']], ['b', ['a']]]))).toEqual(['a', 'c', 'd', 'b']);
    const diamond = normalizeWorkflowSpec(yaml(fixture('diamond.yaml'))).spec;
    expect(topologicalOrder(diamond)).toEqual(['build', 'lint', 'test', 'report', 'fix']);
  });

  it('topologicalOrder refuses a cyclic or dangling canonical spec', () => {
    const base = spec([['a', []], ['b', ['a']]]);
    const cyclic: WorkflowSpec = { ...base, steps: base.steps.map((s) => (s.id === 'a' ? { ...s, needs: ['b'] } : s)) };
    expect(() => topologicalOrder(cyclic)).toThrow(ValidationError);
    const dangling: WorkflowSpec = { ...base, steps: base.steps.map((s) => (s.id === 'a' ? { ...s, needs: ['zz'] } : s)) };
    expect(() => topologicalOrder(dangling)).toThrow(/unknown step "zz"/);
  });

  it('stepAncestors: transitive needs, in file order', () => {
    const ancestors = stepAncestors(spec([['a', []], ['b', ['a']], ['c', ['a']], ['d', ['c', 'b']], ['e', []]]));
    expect(Object.fromEntries([...ancestors].map(([id, set]) => [id, [...set]]))).toEqual({
      a: [],
      b: ['a'],
      c: ['a'],
      d: ['a', 'b', 'c'],
      e: [],
    });
  });
});

describe('sequentialOrder: the predecessor\'s order', () => {
  /** @hasna/loops 0.3.1 src/lib/workflow-spec.ts workflowExecutionOrder, as written there (recursive). */
  function predecessorOrder(steps: Array<{ id: string; dependsOn: string[] }>): string[] {
    const byId = new Map(steps.map((step) => [step.id, step]));
    const visited = new Set<string>();
    const order: string[] = [];
    const visit = (step: { id: string; dependsOn: string[] }): void => {
      if (visited.has(step.id)) return;
      for (const dependencyId of step.dependsOn) visit(byId.get(dependencyId)!);
      visited.add(step.id);
      order.push(step.id);
    };
    for (const step of steps) visit(step);
    return order;
  }

  it('equals the predecessor\'s depth-first order on any DAG, in any file order', () => {
    const dag = fc
      .integer({ min: 1, max: 12 })
      .chain((n) => fc.tuple(fc.array(fc.array(fc.boolean(), { minLength: n, maxLength: n }), { minLength: n, maxLength: n }), fc.shuffledSubarray([...Array(n).keys()], { minLength: n, maxLength: n })))
      .map(([matrix, perm]) => {
        // Edges only from a later to an earlier index of the topological labelling: acyclic; then shuffled into file order.
        const steps = perm.map((i) => ({ id: `s${i}`, dependsOn: [...Array(i).keys()].filter((j) => matrix[i]![j]).map((j) => `s${j}`) }));
        return steps;
      });
    fc.assert(
      fc.property(dag, (steps) => {
        const spec = { steps: steps.map((st) => ({ id: st.id, needs: st.dependsOn })) } as unknown as WorkflowSpec;
        expect(sequentialOrder(spec)).toEqual(predecessorOrder(steps));
      }),
    );
  });

  it('runs a dependency before the step that needs it, and the file order otherwise ([x needs c, b, c] is c, x, b)', () => {
    const { spec } = normalizeWorkflowSpec(wf([{ id: 'x', needs: 'c', run: 'x' }, { id: 'b', run: 'b' }, { id: 'c', run: 'c' }]));
    expect(sequentialOrder(spec)).toEqual(['c', 'x', 'b']);
    expect(topologicalOrder(spec)).toEqual(['b', 'c', 'x']);
  });
});
