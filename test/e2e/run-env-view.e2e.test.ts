/**
 * `loops show <run>` tells where the run's process really started and with which environment
 * (issue 13): a `cwd` line (absolute, symlinks resolved) and an `env` line of names
 * (`set … · secret … · N inherited`) after `exit`; `--json` has `cwd` and `env` with every name.
 * No value of a variable is printed. Through the built binary.
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FIXTURES, useSandboxes } from './cli-helpers.js';

const sandbox = useSandboxes();
const SECRET = 'sekrit-Vq81/zz+Pw3';
const scratch = mkdtempSync(join(tmpdir(), 'loops-env-view-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface ShownRun {
  id: string;
  cwd?: string;
  env?: { set: string[]; removed: string[]; secret: string[]; inherited: string[] };
}

describe('loops show <run>: cwd and env', () => {
  it('prints the resolved directory and the environment names, and --json has them all', () => {
    const s = sandbox();
    const real = join(scratch, 'release-7');
    mkdirSync(real);
    const link = join(scratch, 'current');
    symlinkSync(real, link);
    const env = { VIEW_TOKEN: SECRET };
    const created = s.run(['create', 'command', 'where', '--cmd', `node ${join(FIXTURES, 'env-names.mjs')}`, '--cwd', link, '--env', 'GREETING=hello there', '--secret-env', 'VIEW_TOKEN', '--manual'], env);
    expect(created.code, created.stderr).toBe(0);
    const ran = s.run(['run-now', 'where', '--json'], env);
    expect(ran.code, ran.stderr).toBe(0);
    const runId = (JSON.parse(ran.stdout) as { id: string }).id;

    const shown = s.run(['show', runId]);
    expect(shown.code, shown.stderr).toBe(0);
    const lines = shown.stdout.split('\n');
    const exit = lines.indexOf('exit        code 0');
    expect(exit).toBeGreaterThan(0);
    expect(lines[exit + 1]).toBe(`cwd         ${realpathSync(real)}`);
    expect(lines[exit + 2]).toMatch(/^env         set GREETING, PATH, \d+ LOOPS_\* · secret VIEW_TOKEN · \d+ inherited$/);
    expect(shown.stdout).not.toContain(SECRET);
    expect(shown.stdout).not.toContain('hello there');

    const json = s.json<ShownRun>(['show', runId]);
    expect(json.cwd).toBe(realpathSync(real));
    expect(json.env!.secret).toEqual(['VIEW_TOKEN']);
    expect(json.env!.set).toEqual(expect.arrayContaining(['GREETING', 'LOOPS_RUN_ID', 'PATH']));
    expect(json.env!.inherited).toContain('LOOPS_DATA_DIR');
    expect(lines[exit + 2]).toContain(`· ${json.env!.inherited.length} inherited`);
  });

  it('a run whose spawn recorded neither (it never started) prints no cwd or env line', () => {
    const s = sandbox();
    const dir = join(scratch, 'removed-dir');
    mkdirSync(dir);
    const created = s.run(['create', 'command', 'gone', '--cmd', 'true', '--cwd', dir, '--manual']);
    expect(created.code, created.stderr).toBe(0);
    rmSync(dir, { recursive: true });
    const ran = s.run(['run-now', 'gone', '--json']);
    const runId = (JSON.parse(ran.stdout) as { id: string }).id;
    const shown = s.run(['show', runId]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/\nexit {8}-\n/);
    expect(shown.stdout).not.toMatch(/\ncwd {9}/);
    expect(shown.stdout).not.toMatch(/\nenv {9}/);
    expect(s.json<ShownRun>(['show', runId]).env).toBeUndefined();
  });
});

describe('loops workflows inspect: where each step attempt ran', () => {
  it('prints a cwd and an env line per attempt after the table, names only', () => {
    const s = sandbox();
    const dir = join(scratch, 'step-dir');
    mkdirSync(dir);
    const file = join(scratch, 'where.yaml');
    writeFileSync(
      file,
      ['name: where', 'steps:', '  - id: here', `    run: node ${join(FIXTURES, 'env-names.mjs')}`, `    cwd: ${JSON.stringify(dir)}`, '    env: { STEP_PLAIN: "hello there" }', ''].join('\n'),
    );
    expect(s.run(['workflows', 'create', file]).code).toBe(0);
    const ran = s.run(['workflows', 'run', 'where']);
    expect(ran.code, ran.stderr).toBe(0);
    const [run] = s.json<Array<{ id: string }>>(['workflows', 'runs']);
    const shown = s.run(['workflows', 'inspect', run!.id]);
    expect(shown.code, shown.stderr).toBe(0);
    const lines = shown.stdout.split('\n');
    const at = lines.indexOf('── where each attempt ran ──');
    expect(at).toBeGreaterThan(0);
    expect(lines[at + 1]).toBe(`here#1  cwd ${realpathSync(dir)}`);
    expect(lines[at + 2]).toMatch(/^ {8}env set PATH, STEP_PLAIN, \d+ LOOPS_\* · \d+ inherited$/);
    expect(shown.stdout).not.toContain('hello there');
    // --json: on the attempt, every name.
    const json = s.json<{ steps: Array<{ attempts: Array<{ cwd?: string; env?: ShownRun['env'] }> }> }>(['workflows', 'inspect', run!.id]);
    expect(json.steps[0]!.attempts[0]!.cwd).toBe(realpathSync(dir));
    expect(json.steps[0]!.attempts[0]!.env!.set).toEqual(expect.arrayContaining(['LOOPS_WORKFLOW_STEP_ID', 'PATH', 'STEP_PLAIN']));
  });
});
