/**
 * Predecessor workflow files through the built binary: they run as the predecessor ran them (one
 * step at a time, depth-first over dependsOn, stopping at the first failure — the order and outcome
 * below are what `seed.sh workflows run` printed for the same file, @hasna/loops 0.3.1), a command
 * with spaces and no shell is refused as it refused it, `--name` on validate and create, and
 * `workflows convert` to the native form, whose result runs the same way.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { tempDir } from '../helpers/tmp.js';
import { BIN, FIXTURES, Sandbox } from './cli-helpers.js';

const s = new Sandbox();
afterAll(() => s.cleanup());
beforeAll(() => {
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: run npm run build (npm test does it)`);
});

/** The file the predecessor ran: x needs c; b may fail; d fails; e comes after d in file order. */
function orderFile(dir: string, name = 'order'): { file: string; log: string } {
  const log = join(dir, `${name}.log`);
  const step = (id: string, code = 0) => ({ type: 'command', command: 'sh', args: ['-c', `echo ${id} >> "$LOG"; exit ${code}`], env: { LOG: log } });
  const file = join(dir, `${name}.json`);
  writeFileSync(
    file,
    JSON.stringify({
      name,
      version: 3,
      steps: [
        { id: 'x', dependsOn: ['c'], target: step('x') },
        { id: 'b', description: 'may fail', continueOnFailure: true, target: step('b', 3) },
        { id: 'c', target: step('c') },
        { id: 'd', target: step('d', 4) },
        { id: 'e', target: step('e') },
      ],
    }),
  );
  return { file, log };
}

const lines = (path: string) => readFileSync(path, 'utf8').trim().split('\n');

describe('a predecessor-shape workflow runs as the predecessor ran it', () => {
  it('one step at a time in depth-first order (c, x, b, d); b fails under continueOnFailure and the run goes on; d fails and e is skipped; the run fails', () => {
    const dir = tempDir('loops-wf-pred-');
    const { file, log } = orderFile(dir);
    expect(s.run(['workflows', 'create', file]).code).toBe(0);
    const r = s.run(['workflows', 'run', 'order', '--json']);
    expect(r.code).toBe(3);
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 'failed', error: 'failed step: d' });
    expect(lines(log)).toEqual(['c', 'x', 'b', 'd']);
    const shown = s.json(['workflows', 'show', 'order']);
    expect(shown.spec).toMatchObject({ execution: 'sequential', concurrency: 1, versionLabel: '3' });
    expect(shown.spec.steps[1].description).toBe('may fail');
    expect(s.run(['workflows', 'show', 'order']).stdout).toMatch(/^label {7}3 \(the file's own version\)\n.*\nexecution {3}sequential: one step at a time/m);
  });

  it('a command with spaces and no shell: true is refused, naming the step and field, with the hint; nothing is stored', () => {
    const dir = tempDir('loops-wf-pred-');
    const file = join(dir, 'spaces.json');
    writeFileSync(file, JSON.stringify({ name: 'spaces', steps: [{ id: 'audit', target: { type: 'command', command: 'npm audit --omit=dev' } }] }));
    const r = s.run(['workflows', 'create', file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('step "audit": target.command: "npm audit --omit=dev" contains whitespace, but runs without a shell, as one executable');
    expect(r.stderr).toContain('put the flags in args ("command": "npm", "args": ["audit","--omit=dev"]), or set "shell": true');
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(s.run(['workflows', 'show', 'spaces']).code).toBe(2);
  });
});

describe('--name on workflows validate and create (the predecessor flag)', () => {
  it('overrides the name in the file, and names a file that has none; an invalid one is a usage error', () => {
    const dir = tempDir('loops-wf-pred-');
    const { file } = orderFile(dir, 'named');
    expect(s.run(['workflows', 'validate', file, '--name', 'renamed'])).toMatchObject({ code: 0, stdout: 'ok: renamed, 5 steps (legacy format)\n' });
    const created = s.json(['workflows', 'create', file, '--name', 'renamed']);
    expect(created.name).toBe('renamed');
    const nameless = join(dir, 'nameless.json');
    writeFileSync(nameless, JSON.stringify({ steps: [{ id: 'a', target: { type: 'command', command: 'true' } }] }));
    expect(s.run(['workflows', 'validate', nameless]).code).toBe(2);
    expect(s.run(['workflows', 'validate', nameless, '--name', 'given']).stdout).toBe('ok: given, 1 step (legacy format)\n');
    const bad = s.run(['workflows', 'create', nameless, '--name', 'no spaces']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--name "no spaces" is not a valid workflow name/);
  });
});

describe('loops workflows convert', () => {
  it('writes the native form with execution: sequential and continue-on-error, and a comment on parallel; the result runs the same way', () => {
    const dir = tempDir('loops-wf-pred-');
    const { file, log } = orderFile(dir, 'conv');
    const printed = s.run(['workflows', 'convert', file]);
    expect(printed.code).toBe(0);
    expect(printed.stdout).toMatch(/^# Converted from .*conv\.json/);
    expect(printed.stdout).toMatch(/^# To run independent steps at once, change it to execution: parallel/m);
    const doc = parseYaml(printed.stdout);
    expect(doc).toMatchObject({ name: 'conv', version: '3', execution: 'sequential' });
    expect(doc.steps[1]).toMatchObject({ id: 'b', description: 'may fail', 'continue-on-error': true, command: 'sh' });
    expect(doc.steps[0].needs).toBe('c');

    const out = join(dir, 'conv.yaml');
    const written = s.run(['workflows', 'convert', file, '--out', out, '--name', 'conv2']);
    expect(written.code).toBe(0);
    expect(written.stderr).toMatch(/wrote .*conv\.yaml \(yaml, 5 steps, execution: sequential/);
    expect(s.run(['workflows', 'convert', file, '--out', out]).stderr).toMatch(/already exists/);
    expect(s.run(['workflows', 'validate', out]).stdout).toBe('ok: conv2, 5 steps (native format)\n');
    expect(s.run(['workflows', 'create', out]).code).toBe(0);
    expect(s.run(['workflows', 'run', 'conv2']).code).toBe(3);
    expect(lines(log)).toEqual(['c', 'x', 'b', 'd']);

    // Switched to parallel as the comment says: independent steps start together and e runs.
    const parallel = join(dir, 'parallel.yaml');
    writeFileSync(parallel, readFileSync(out, 'utf8').replace(/^execution: sequential$/m, 'execution: parallel').replace('name: conv2', 'name: conv3'));
    writeFileSync(log, '');
    expect(s.run(['workflows', 'create', parallel]).code).toBe(0);
    const par = s.run(['workflows', 'run', 'conv3']);
    expect(par.code).toBe(3);
    expect(par.stdout + par.stderr).toMatch(/^e: succeeded/m);
    expect(lines(log).sort()).toEqual(['b', 'c', 'd', 'e', 'x']);
  });

  it('refuses a source with problems (exit 2), and --format json writes JSON', () => {
    const dir = tempDir('loops-wf-pred-');
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ name: 'bad', steps: [{ id: 'a', target: { type: 'command', command: 'ls -la' } }] }));
    const r = s.run(['workflows', 'convert', bad]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/step "a": target\.command: "ls -la" contains whitespace/);
    const json = s.run(['workflows', 'convert', join(FIXTURES, 'workflows', 'predecessor.json'), '--format', 'json']);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ name: 'release-check', execution: 'sequential' });
  });
});

describe("the predecessor README's own workflow example", () => {
  const readme = join(FIXTURES, 'workflows', 'predecessor-readme.json');

  it('validates as it is written there', () => {
    const r = s.run(['workflows', 'validate', readme]);
    expect(r.stderr).toBe('');
    expect(r).toMatchObject({ code: 0, stdout: 'ok: repo-morning, 2 steps (legacy format)\n' });
  });

  it('runs with the predecessor semantics: git status in the repository, then the review agent (a fake codex on PATH)', () => {
    const dir = tempDir('loops-wf-readme-');
    const repo = join(dir, 'repo');
    execFileSync('git', ['init', '-q', repo]);
    const agentLog = join(dir, 'agent.log');
    const env = { PATH: `${join(FIXTURES, 'agents')}${delimiter}${process.env.PATH ?? ''}`, FAKE_AGENT_LOG: agentLog };
    mkdirSync(join(dir, 'codex-work'));
    expect(s.run(['accounts', 'add', 'work', '--tool', 'codex', '--dir', join(dir, 'codex-work')], env).code).toBe(0);
    const file = join(dir, 'repo-morning.json');
    writeFileSync(file, readFileSync(readme, 'utf8').replaceAll('/path/to/repo', repo));
    expect(s.run(['workflows', 'create', file], env).code).toBe(0);
    const r = s.run(['workflows', 'run', 'repo-morning', '--json'], env);
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 'succeeded' });
    const call = JSON.parse(lines(agentLog)[0]!);
    expect(call).toMatchObject({ provider: 'codex', cwd: repo });
    expect(call.prompt).toBe('Review the repository status and summarize concrete next actions.');
    // The repository is not there: git status fails, and the review is skipped.
    writeFileSync(file, readFileSync(readme, 'utf8').replaceAll('/path/to/repo', join(dir, 'gone')).replace('"repo-morning"', '"repo-gone"'));
    expect(s.run(['workflows', 'create', file], env).code).toBe(0);
    const gone = s.run(['workflows', 'run', 'repo-gone'], env);
    expect(gone.code).toBe(3);
    expect(gone.stdout + gone.stderr).toMatch(/^review: skipped/m);
  });
});
