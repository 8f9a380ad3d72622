/**
 * Environment parity through the built binary (issue 12, item 5):
 *  - a daemon started with an empty environment (`env -i`: no PATH at all) runs `ls` — every run's
 *    PATH ends with /usr/bin:/bin:/usr/sbin:/sbin, as the predecessor's did;
 *  - `create command --account/--account-tool`, `create agent --account-tool` and
 *    `--config-isolation login|empty|safe|none`, their refusals (exit 2, one line) and how `show`
 *    records them.
 */
import { spawn } from 'node:child_process';
import { rmdirSync } from 'node:fs';
import { delimiter } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fixture } from '../helpers/fixtures.js';
import { tempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { BIN, pidAlive, useSandboxes } from './cli-helpers.js';

const sandbox = useSandboxes();

describe('a daemon started with an empty environment', () => {
  it('finds ls: its runs get the system PATH baseline', async () => {
    const s = sandbox();
    s.json(['create', 'command', 'lister', '--no-shell', '--cmd', 'ls', '--arg', '/', '--every', '1s']);
    // env -i: nothing but the data directory, not even PATH or HOME.
    const daemon = spawn(process.execPath, [BIN, 'daemon', 'run'], { env: { LOOPS_DATA_DIR: s.dataDir }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    daemon.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => daemon.once('exit', (code) => resolve(code)));
    try {
      let runs: Array<{ status: string; stdout: string; error: string | null }> = [];
      await waitFor(() => (runs = s.json(['runs', 'lister'])).some((r) => r.status !== 'claimed' && r.status !== 'spawning' && r.status !== 'running'), 20_000, 'a finished run');
      const done = runs.find((r) => r.status !== 'claimed' && r.status !== 'spawning' && r.status !== 'running')!;
      expect(done, `${done.error} ${stderr}`).toMatchObject({ status: 'succeeded', error: null });
      expect(done.stdout.split('\n')).toContain('bin');
    } finally {
      daemon.kill('SIGTERM');
      await exited;
      await waitFor(() => !pidAlive(daemon.pid!), 5_000, 'the daemon gone');
    }
  });
});

describe('accounts and config isolation on the command line', () => {
  const withAccounts = () => ({ PATH: `${fixture('accounts-bin')}${delimiter}${fixture('agents')}${delimiter}${process.env.PATH ?? ''}` });

  it('create command --account --account-tool: recorded, shown, resolved before anything is stored', () => {
    const s = sandbox();
    const env = withAccounts();
    const loop = s.json(['create', 'command', 'gh-sync', '--cmd', 'true', '--manual', '--account', 'work', '--account-tool', 'gh'], env);
    expect(loop.target).toMatchObject({ kind: 'command', account: 'work', accountTool: 'gh' });
    expect(s.run(['show', 'gh-sync'], env).stdout).toMatch(/account\s+work \(gh\)/);
    const run = s.run(['run-now', 'gh-sync', '--json'], env);
    expect(run.code, run.stderr).toBe(0);

    const noTool = s.run(['create', 'command', 'x', '--cmd', 'true', '--manual', '--account', 'work'], env);
    expect(noTool.code).toBe(2);
    expect(noTool.stderr).toMatch(/--account on a command loop needs --account-tool <tool>/);
    expect(noTool.stderr).not.toMatch(/\n\s+at /);
    const unresolved = s.run(['create', 'command', 'y', '--cmd', 'true', '--manual', '--account', 'missing', '--account-tool', 'gh'], env);
    expect(unresolved.code).toBe(2);
    expect(unresolved.stderr).toMatch(/accounts env missing --tool gh/);
    expect(s.json<unknown[]>(['list'], env).length).toBe(1);
  });

  it('create agent: login by default, empty recorded as safe, safe (the predecessor\'s) as login; --account-tool', () => {
    const s = sandbox();
    const env = withAccounts();
    const iso = (name: string, ...flags: string[]) =>
      s.json(['create', 'agent', name, '--provider', 'claude', '--prompt', 'review', '--manual', ...flags], env).target as { configIsolation: string; accountTool?: string };
    expect(iso('a').configIsolation).toBe('login');
    expect(iso('b', '--config-isolation', 'empty').configIsolation).toBe('safe');
    expect(iso('c', '--config-isolation', 'safe').configIsolation).toBe('login');
    expect(iso('d', '--config-isolation', 'none').configIsolation).toBe('none');
    expect(iso('e', '--account', 'work', '--account-tool', 'claude-app').accountTool).toBe('claude-app');
    expect(s.run(['show', 'a'], env).stdout).toMatch(/config login kept, settings shut out/);
    expect(s.run(['show', 'b'], env).stdout).toMatch(/config empty directory/);
    const bad = s.run(['create', 'agent', 'f', '--provider', 'claude', '--prompt', 'x', '--manual', '--config-isolation', 'isolated'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--config-isolation: "isolated" is not a configuration isolation mode/);
  });
});

describe('loops doctor and a command loop\'s account', () => {
  it('checks it as its runs will resolve it: the registered profile for its tool, its directory', () => {
    const s = sandbox();
    const dir = tempDir('loops-acct-');
    expect(s.run(['accounts', 'add', 'work', '--tool', 'claude', '--dir', dir]).code).toBe(0);
    expect(s.run(['create', 'command', 'sync', '--cmd', 'true', '--manual', '--account', 'work', '--account-tool', 'claude']).code).toBe(0);
    const doctor = () => {
      const r = s.run(['doctor', '--json']);
      return { code: r.code, checks: (JSON.parse(r.stdout) as { checks: Array<{ id: string; status: string; detail: string; neededBy: string[] }> }).checks };
    };
    let r = doctor();
    expect(r.checks.find((c) => c.id === 'account:work')).toMatchObject({ status: 'ok', neededBy: ['sync'] });
    expect(r.checks.find((c) => c.id === 'loop:sync')).toMatchObject({ status: 'ok' });
    rmdirSync(dir);
    r = doctor();
    expect(r.code).toBe(1);
    expect(r.checks.find((c) => c.id === 'loop:sync')!.detail).toBe(`account work: its directory ${dir} does not exist`);
  });
});
