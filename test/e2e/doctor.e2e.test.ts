/**
 * `loops doctor` through the built binary: an active loop's missing provider CLI fails (exit 1,
 * naming the CLI, the loop and the effective PATH) and passes once the CLI is on PATH; a missing
 * CLI that nothing uses is only reported; a deleted working directory, a missing workflow step
 * command or an archived workflow fails naming the loop; the daemon check warns only when an
 * active scheduled loop would not fire (manual and paused loops do not need the daemon); a secret
 * missing here is a warning; the daemon's own environment is checked when it runs (Linux).
 *
 * The fake agent CLIs (test/fixtures/agents) are put first on PATH to create agent loops (create
 * refuses a provider that is not installed), then left out to make them missing.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { BIN, FIXTURES, Sandbox, pidAlive, useSandboxes } from './cli-helpers.js';

interface Check {
  id: string;
  title: string;
  status: 'ok' | 'warn' | 'fail';
  detail: string;
  hint?: string;
  neededBy: string[];
}
interface Report {
  ok: boolean;
  checks: Check[];
}

const FAKES = join(FIXTURES, 'agents');
const BASE_PATH = process.env.PATH ?? '/usr/bin:/bin';
const WITH_FAKES = { PATH: `${FAKES}${delimiter}${BASE_PATH}` };
const WITHOUT_FAKES = { PATH: BASE_PATH };
const PROVIDERS = ['claude', 'codex', 'cursor', 'opencode', 'gemini', 'codewith', 'aicopilot'];

const sandbox = useSandboxes();

beforeAll(() => {
  // The tests make CLIs missing by leaving the fakes off PATH: no real one may be installed.
  for (const dir of BASE_PATH.split(delimiter)) {
    for (const bin of ['claude', 'codex']) {
      if (dir && existsSync(join(dir, bin))) throw new Error(`a real ${bin} is installed at ${join(dir, bin)}: these tests need it absent`);
    }
  }
});

function doctor(s: Sandbox, env: Record<string, string>): { code: number | null; report: Report; stderr: string } {
  const r = s.run(['doctor', '--json'], env);
  expect(r.stderr).toBe('');
  return { code: r.code, report: JSON.parse(r.stdout) as Report, stderr: r.stderr };
}

function check(report: Report, id: string): Check {
  const c = report.checks.find((x) => x.id === id);
  expect(c, `no check ${id} in ${report.checks.map((x) => x.id).join(', ')}`).toBeDefined();
  return c!;
}

describe('loops doctor: agent CLIs', () => {
  const s = sandbox();
  beforeAll(() => {
    const created = s.run(['create', 'agent', 'nightly', '--provider', 'claude', '--prompt', 'fix the tests', '--every', '1h'], WITH_FAKES);
    expect(created.code, created.stderr).toBe(0);
  });

  it("an active loop's provider CLI that is missing: exit 1, naming the CLI, the loop and the effective PATH (also with --json)", () => {
    const text = s.run(['doctor'], WITHOUT_FAKES);
    expect(text.code).toBe(1);
    expect(text.stdout).toMatch(/^✗ claude CLI +claude not found on PATH=\S+; needed by nightly$/m);
    expect(text.stdout).toMatch(/^✗ loop nightly +the claude CLI \(claude\) is not found on PATH=/m);
    expect(text.stdout).toMatch(/\n\n\d+ checks: \d+ ok, 1 warning, 2 failed/);

    const { code, report } = doctor(s, WITHOUT_FAKES);
    expect(code).toBe(1);
    expect(report.ok).toBe(false);
    const cli = check(report, 'cli:claude');
    expect(cli).toMatchObject({ status: 'fail', neededBy: ['nightly'] });
    expect(cli.detail).toContain(`PATH=${BASE_PATH}`);
    expect(cli.hint).toContain('https://');
    expect(check(report, 'loop:nightly')).toMatchObject({ status: 'fail', neededBy: ['nightly'] });
    // The providers nothing uses are missing too, and only reported.
    for (const p of PROVIDERS.filter((x) => x !== 'claude')) {
      expect(check(report, `cli:${p}`)).toMatchObject({ status: 'ok', detail: 'not installed (no active loop uses it)', neededBy: [] });
    }
  });

  it('with the CLI on PATH: exit 0, its version reported', () => {
    const { code, report } = doctor(s, WITH_FAKES);
    expect(code).toBe(0);
    expect(report.ok).toBe(true);
    expect(check(report, 'cli:claude')).toMatchObject({ status: 'ok', neededBy: ['nightly'] });
    expect(check(report, 'cli:claude').detail).toBe(`2.1.31 at ${join(FAKES, 'claude')}; used by nightly`);
    expect(check(report, 'cli:cursor').detail).toBe(`2026.01.28-fd13201 at ${join(FAKES, 'cursor-agent')}`);
    expect(check(report, 'loop:nightly').status).toBe('ok');
    // The daemon does not run while a scheduled loop is active: a warning, not a failure.
    expect(check(report, 'daemon')).toMatchObject({ status: 'warn', neededBy: ['nightly'] });
    expect(check(report, 'daemon').detail).toContain('nothing will fire');
    const text = s.run(['doctor'], WITH_FAKES);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^! daemon +not running: nothing will fire/m);
    expect(text.stdout).toMatch(/^ +hint: loops daemon start/m);
  });

  it('a paused loop needs nothing: its missing CLI is only reported', () => {
    expect(s.run(['pause', 'nightly']).code).toBe(0);
    try {
      const { code, report } = doctor(s, WITHOUT_FAKES);
      expect(code).toBe(0);
      expect(check(report, 'cli:claude')).toMatchObject({ status: 'ok', neededBy: [] });
      expect(report.checks.some((c) => c.id === 'loop:nightly')).toBe(false);
      expect(check(report, 'loops').detail).toContain('1 paused');
      expect(check(report, 'daemon').status).toBe('ok');
    } finally {
      expect(s.run(['resume', 'nightly']).code).toBe(0);
    }
  });
});

describe('loops doctor: loops, daemon, data directory', () => {
  it('a fresh data directory: warnings only, exit 0, nothing created', () => {
    const s = sandbox();
    const dataDir = join(s.dataDir, 'not-yet');
    const r = s.run(['doctor', '--json'], { ...WITHOUT_FAKES, LOOPS_DATA_DIR: dataDir });
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as Report;
    expect(check(report, 'data-dir').status).toBe('warn');
    expect(check(report, 'database').status).toBe('warn');
    expect(check(report, 'daemon').status).toBe('ok');
    expect(existsSync(dataDir)).toBe(false);
  });

  it('an active command loop whose working directory was deleted fails, naming the loop and the directory', () => {
    const s = sandbox();
    const dir = mkdtempSync(join(tmpdir(), 'loops-doctor-'));
    expect(s.run(['create', 'command', 'gone', '--cmd', 'ls', '--cwd', dir, '--every', '5m']).code).toBe(0);
    expect(s.run(['create', 'command', 'fine', '--cmd', 'echo hi', '--manual']).code).toBe(0);
    expect(doctor(s, WITHOUT_FAKES).code).toBe(0);
    rmdirSync(dir);
    const { code, report } = doctor(s, WITHOUT_FAKES);
    expect(code).toBe(1);
    expect(check(report, 'loop:gone')).toMatchObject({ status: 'fail', detail: `working directory ${dir} does not exist`, neededBy: ['gone'] });
    expect(check(report, 'loop:fine')).toMatchObject({ status: 'ok', detail: `sh -c "echo hi", cwd ${process.cwd()} (manual)` }); // create recorded the directory it ran in
    const text = s.run(['doctor'], WITHOUT_FAKES);
    expect(text.code).toBe(1);
    expect(text.stdout).toContain(`✗ loop gone`);
    expect(text.stdout).toContain(`working directory ${dir} does not exist`);
  });

  it('an argv command that is not on the effective PATH fails', () => {
    const s = sandbox();
    const bin = mkdtempSync(join(tmpdir(), 'loops-doctor-bin-'));
    const tool = join(bin, 'my-tool');
    writeFileSync(tool, '#!/bin/sh\nexit 0\n', { mode: 0o755 });
    const env = { PATH: `${bin}${delimiter}${BASE_PATH}` };
    expect(s.run(['create', 'command', 'tool', '--cmd', 'my-tool', '--no-shell', '--arg', 'x', '--manual'], env).code, 'create').toBe(0);
    expect(check(doctor(s, env).report, 'loop:tool')).toMatchObject({ status: 'ok', detail: `my-tool (${tool}), cwd ${process.cwd()} (manual)` });
    const { code, report } = doctor(s, WITHOUT_FAKES);
    expect(code).toBe(1);
    expect(check(report, 'loop:tool').detail).toBe(`command not found: my-tool (searched PATH=${BASE_PATH})`);
  });

  it('the daemon: a manual loop does not need it; an active scheduled loop makes a stopped daemon a warning', () => {
    const s = sandbox();
    expect(s.run(['create', 'command', 'by-hand', '--cmd', 'true', '--manual']).code).toBe(0);
    let report = doctor(s, WITHOUT_FAKES).report;
    expect(check(report, 'daemon')).toMatchObject({ status: 'ok', neededBy: [] });
    expect(check(report, 'daemon').detail).toMatch(/^not running; no active loop is scheduled/);
    expect(s.run(['create', 'command', 'hourly', '--cmd', 'true', '--every', '1h']).code).toBe(0);
    report = doctor(s, WITHOUT_FAKES).report;
    expect(check(report, 'daemon')).toMatchObject({ status: 'warn', neededBy: ['hourly'] });
    expect(report.ok).toBe(true);
  });

  it('a data directory looser than 0700 is a warning, and doctor does not change it', () => {
    const s = sandbox();
    expect(s.run(['create', 'command', 'x', '--cmd', 'true', '--manual']).code).toBe(0);
    chmodSync(s.dataDir, 0o755);
    const { code, report } = doctor(s, WITHOUT_FAKES);
    expect(code).toBe(0);
    expect(check(report, 'data-dir')).toMatchObject({ status: 'warn', hint: `chmod 700 ${s.dataDir}` });
    expect(check(report, 'data-dir').detail).toContain('0755');
    expect(statSync(s.dataDir).mode & 0o777).toBe(0o755);
  });

  it('a secret variable missing here is a warning that says the daemon may differ; set, it is ok', () => {
    const s = sandbox();
    expect(s.run(['create', 'command', 'sec', '--cmd', 'true', '--secret-env', 'DOCTOR_TOKEN', '--manual']).code).toBe(0);
    const missing = doctor(s, WITHOUT_FAKES);
    expect(missing.code).toBe(0);
    const c = check(missing.report, 'loop:sec');
    expect(c.status).toBe('warn');
    expect(c.detail).toContain('DOCTOR_TOKEN not set in this environment');
    expect(c.detail).toContain("the daemon's environment may differ");
    expect(check(doctor(s, { ...WITHOUT_FAKES, DOCTOR_TOKEN: 's3cret' }).report, 'loop:sec').status).toBe('ok');
    // The value is never printed.
    expect(s.run(['doctor', '--json'], { ...WITHOUT_FAKES, DOCTOR_TOKEN: 's3cret' }).stdout).not.toContain('s3cret');
  });
});

/** `loops accounts` is built separately: the account test runs once it is there. */
const accountsBuilt = spawnSync(process.execPath, [BIN, 'accounts', 'add', '--help'], { encoding: 'utf8' }).status === 0;

describe.skipIf(!accountsBuilt)('loops doctor: accounts', () => {
  it("an active loop's account whose directory is gone fails, on the account and on the loop", () => {
    const s = sandbox();
    const dir = mkdtempSync(join(tmpdir(), 'loops-doctor-acct-'));
    expect(s.run(['accounts', 'add', 'work', '--tool', 'claude', '--dir', dir]).code).toBe(0);
    expect(s.run(['create', 'agent', 'a1', '--provider', 'claude', '--prompt', 'hi', '--account', 'work', '--manual'], WITH_FAKES).code).toBe(0);
    let r = doctor(s, WITH_FAKES);
    expect(r.code).toBe(0);
    expect(check(r.report, 'account:work')).toMatchObject({ status: 'ok', neededBy: ['a1'] });
    rmdirSync(dir);
    r = doctor(s, WITH_FAKES);
    expect(r.code).toBe(1);
    expect(check(r.report, 'account:work')).toMatchObject({ status: 'fail', neededBy: ['a1'] });
    expect(check(r.report, 'loop:a1').detail).toBe(`account work: its directory ${dir} does not exist`);
  });
});

describe('loops doctor: workflow loops', () => {
  function workflow(dir: string, command: string): string {
    const file = join(dir, 'wf.yaml');
    writeFileSync(file, `name: wf\nsteps:\n  - id: build\n    command: ${command}\n  - id: test\n    run: echo ok\n    needs: build\n`);
    return file;
  }

  it('a step command missing on PATH fails naming the loop and the step; an archived workflow fails', () => {
    const s = sandbox();
    const dir = mkdtempSync(join(tmpdir(), 'loops-doctor-wf-'));
    expect(s.run(['workflows', 'create', workflow(dir, 'echo')]).code).toBe(0);
    expect(s.run(['create', 'workflow', 'wfl', '--workflow', 'wf', '--every', '1h']).code).toBe(0);
    expect(check(doctor(s, WITHOUT_FAKES).report, 'loop:wfl')).toMatchObject({ status: 'ok', detail: 'workflow wf v1, 2 steps' });

    expect(s.run(['workflows', 'update', 'wf', workflow(dir, 'no-such-command-xyz')]).code).toBe(0);
    let r = doctor(s, WITHOUT_FAKES);
    expect(r.code).toBe(1);
    expect(check(r.report, 'loop:wfl').detail).toMatch(/^step build: command not found: no-such-command-xyz/);

    expect(s.run(['workflows', 'archive', 'wf']).code).toBe(0);
    r = doctor(s, WITHOUT_FAKES);
    expect(r.code).toBe(1);
    expect(check(r.report, 'loop:wfl')).toMatchObject({ status: 'fail', detail: 'workflow wf is archived: every run of this loop fails' });
  });
});

describe('loops doctor --json', () => {
  it('prints {ok, checks}: every check has id, title, status, detail, neededBy (hint when there is one), in a stable order', () => {
    const s = sandbox();
    expect(s.run(['create', 'command', 'x', '--cmd', 'true', '--every', '1h']).code).toBe(0);
    const { code, report } = doctor(s, WITHOUT_FAKES);
    expect(code).toBe(0);
    expect(Object.keys(report)).toEqual(['ok', 'checks']);
    expect(report.checks.map((c) => c.id)).toEqual([
      'data-dir',
      'database',
      'log-format',
      'events',
      'projections',
      'daemon',
      'loops',
      'stored-secrets',
      ...PROVIDERS.map((p) => `cli:${p}`),
      'loop:x',
    ]);
    for (const c of report.checks) {
      expect(Object.keys(c)).toEqual(c.hint === undefined ? ['id', 'title', 'status', 'detail', 'neededBy'] : ['id', 'title', 'status', 'detail', 'hint', 'neededBy']);
      expect(['ok', 'warn', 'fail']).toContain(c.status);
      expect(typeof c.title).toBe('string');
      expect(typeof c.detail).toBe('string');
      expect(Array.isArray(c.neededBy)).toBe(true);
    }
    expect(report.ok).toBe(!report.checks.some((c) => c.status === 'fail'));
  });
});

describe.skipIf(process.platform !== 'linux')("loops doctor: the running daemon's environment", () => {
  it('a CLI or a secret present here but missing from the daemon fails its scheduled loops', () => {
    const s = sandbox();
    expect(s.run(['create', 'agent', 'nightly', '--provider', 'codex', '--prompt', 'review', '--every', '1h', '--secret-env', 'DOCTOR_KEY'], WITH_FAKES).code).toBe(0);
    expect(s.run(['create', 'agent', 'by-hand', '--provider', 'codex', '--prompt', 'review', '--manual'], WITH_FAKES).code).toBe(0);
    // The daemon starts without the fakes on its PATH and without the secret.
    const started = s.run(['daemon', 'start'], WITHOUT_FAKES);
    expect(started.code, started.stderr).toBe(0);
    const pid = s.daemonPid()!;
    try {
      const { code, report } = doctor(s, { ...WITH_FAKES, DOCTOR_KEY: 'k' });
      expect(code).toBe(1);
      expect(check(report, 'daemon')).toMatchObject({ status: 'ok', neededBy: ['nightly'] });
      expect(check(report, 'daemon').detail).toContain(`running: pid ${pid}`);
      const cli = check(report, 'cli:codex');
      expect(cli.status).toBe('fail');
      expect(cli.detail).toContain(`not on the daemon's environment (pid ${pid})'s PATH=`);
      expect(cli.detail).toContain('the scheduled runs of nightly will fail');
      expect(cli.neededBy).toEqual(['by-hand', 'nightly']);
      const loop = check(report, 'loop:nightly');
      expect(loop.status).toBe('fail');
      expect(loop.detail).toContain('DOCTOR_KEY not set in the daemon');
      // The manual loop runs from here (run-now), where the CLI is.
      expect(check(report, 'loop:by-hand').status).toBe('ok');
    } finally {
      expect(s.run(['daemon', 'stop']).code).toBe(0);
    }
    expect(pidAlive(pid)).toBe(false);
  });
});
