/**
 * The workflow read commands through the built binary: validate, schema, and list / runs / show /
 * inspect on an empty data directory (commands that create and run workflows are covered elsewhere).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, FIXTURES, Sandbox } from './cli-helpers.js';

const s = new Sandbox();
afterAll(() => s.cleanup());
beforeAll(() => {
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: run npm run build (npm test does it)`);
});

const fixture = (name: string) => join(FIXTURES, 'workflows', name);

describe('loops workflows validate', () => {
  it('a valid spec: ok with its name, step count and format on stdout, exit 0', () => {
    expect(s.run(['workflows', 'validate', fixture('diamond.yaml')])).toEqual({ code: 0, stdout: 'ok: nightly, 5 steps (native format)\n', stderr: '' });
    const legacy = s.run(['workflows', 'validate', fixture('predecessor.json')]);
    expect(legacy.code).toBe(0);
    expect(legacy.stdout).toMatch(/^ok: .+, \d+ steps \(legacy format\)\n$/);
    expect(legacy.stderr).toMatch(/^warning: .*predecessor\.json: /m);
  });

  it('an invalid spec: every problem on stderr with file:line:col, exit 2, nothing on stdout', () => {
    const r = s.run(['workflows', 'validate', fixture('bad-graph.yaml')]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    const problems = r.stderr.split('\n').filter((line) => line.startsWith(fixture('bad-graph.yaml')));
    expect(problems.length).toBeGreaterThanOrEqual(2);
    for (const line of problems) expect(line).toMatch(/bad-graph\.yaml:\d+:\d+: /);
    expect(r.stderr).toMatch(/unknown step "lnt"/);
    expect(r.stderr).toMatch(/cycle: /);
    expect(r.stderr).toMatch(new RegExp(`loops: .*bad-graph\\.yaml: ${problems.length} problems`));
  });

  it('--json: the problems as data on stdout (exit 2), or the normalised spec', () => {
    const bad = s.run(['workflows', 'validate', fixture('syntax-error.json'), '--json']);
    expect(bad.code).toBe(2);
    const out = JSON.parse(bad.stdout);
    expect(out).toMatchObject({ ok: false, problems: [{ message: expect.stringMatching(/syntax-error\.json:\d+:\d+: invalid JSON/), line: expect.any(Number) }] });
    const good = s.json(['workflows', 'validate', fixture('diamond.yaml')]);
    expect(good).toMatchObject({ ok: true, name: 'nightly', steps: 5, format: 'native', warnings: [] });
    expect(good.spec.steps.map((st: { id: string }) => st.id)).toEqual(['build', 'lint', 'test', 'report', 'fix']);
  });

  it('a missing file is a problem too', () => {
    const r = s.run(['workflows', 'validate', 'nope.yaml']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^nope\.yaml: no such file/);
  });
});

describe('loops schema workflow', () => {
  it('prints the JSON Schema of spec files', () => {
    const r = s.run(['schema', 'workflow']);
    expect(r.code).toBe(0);
    const schema = JSON.parse(r.stdout);
    expect(schema).toMatchObject({ $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', required: expect.arrayContaining(['name', 'steps']) });
  });
});

describe('read commands on an empty data directory', () => {
  it('list and runs: nothing, said on stderr; [] with --json', () => {
    expect(s.run(['workflows', 'list'])).toMatchObject({ code: 0, stdout: '', stderr: expect.stringMatching(/No workflows yet/) });
    expect(s.json(['workflows', 'list'])).toEqual([]);
    expect(s.run(['workflows', 'runs'])).toMatchObject({ code: 0, stdout: '', stderr: 'No workflow runs yet.\n' });
    expect(s.json(['workflows', 'runs', '--status', 'failed'])).toEqual([]);
  });

  it('unknown workflows and runs, bad flags: exit 2 with one line on stderr', () => {
    expect(s.run(['workflows', 'show', 'nightly'])).toMatchObject({ code: 2, stderr: expect.stringMatching(/^loops: no workflow named or with id "nightly"/) });
    expect(s.run(['workflows', 'inspect', 'wfrun_nope'])).toMatchObject({ code: 2, stderr: expect.stringMatching(/^loops: no workflow run with id/) });
    expect(s.run(['workflows', 'runs', '--status', 'weird'])).toMatchObject({ code: 2, stderr: expect.stringMatching(/unknown status "weird"/) });
    expect(s.run(['workflows', 'runs', '--limit', '0'])).toMatchObject({ code: 2 });
  });

  it.each([['list'], ['show'], ['runs'], ['inspect'], ['validate']])('workflows %s --help', (sub) => {
    const r = s.run(['workflows', sub, '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^Usage: loops workflows ${sub}`));
    expect(r.stdout).toMatch(/Examples:/);
  });
});
