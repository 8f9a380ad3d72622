/**
 * What a user of `@hasna/loops` types, through the built binaries (issue 12, items 2, 8, 10):
 * --dynamic, bare millisecond durations, list --status, create's recorded directory, values that
 * start with a dash, daemon install --enable, LOOPS_DAEMON_INTERVAL_MS / --interval-ms, the
 * loops-daemon binary and the package's name and entries.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/tmp.js';
import { BIN, useSandboxes, type CliResult } from './cli-helpers.js';

const sandbox = useSandboxes();
const ROOT = resolve(__dirname, '..', '..');
const DAEMON_BIN = join(ROOT, 'dist', 'cli', 'daemon-main.js');
const NOW = '2026-07-01T00:00:00.000Z';

describe('create: flags of @hasna/loops', () => {
  const s = sandbox();

  it('--dynamic is a run one minute after the previous one finished, the first one minute from now', () => {
    const loop = s.json(['create', 'command', 'dyn', '--cmd', 'true', '--dynamic'], { LOOPS_NOW: NOW });
    expect(loop.schedule).toMatchObject({ kind: 'every', everyMs: 60_000, anchor: 'fixed-delay' });
    // LOOPS_NOW's clock runs on from NOW: the loop is anchored when create read it.
    const anchor = Date.parse(loop.schedule.anchorAt);
    expect(anchor - Date.parse(NOW)).toBeGreaterThanOrEqual(0);
    expect(anchor - Date.parse(NOW)).toBeLessThan(30_000);
    expect(Date.parse(loop.nextRunAt) - anchor).toBe(60_000);
    expect(s.run(['show', 'dyn']).stdout).toMatch(/schedule {4}every 1m after each finish/);
    const both = s.run(['create', 'command', 'dyn2', '--cmd', 'true', '--dynamic', '--every', '5m']);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/give only one schedule, got --every and --dynamic/);
  });

  it('a duration without a unit is milliseconds: --every 5000, --timeout 30000, --retry-delay 1500, --lease 60000', () => {
    const loop = s.json(['create', 'command', 'ms', '--cmd', 'true', '--every', '5000', '--timeout', '30000', '--attempts', '2', '--retry-delay', '1500', '--lease', '60000']);
    expect(loop.schedule).toMatchObject({ kind: 'every', everyMs: 5000 });
    expect(loop.policies).toMatchObject({ timeoutMs: 30_000, retryDelayMs: 1500, leaseMs: 60_000 });
    expect(s.run(['show', 'ms']).stdout).toMatch(/every 5s/);
  });

  it('list --status keeps the loops in that status (several with commas); an unknown status is exit 2', () => {
    const t = sandbox();
    for (const name of ['a', 'b', 'c']) t.json(['create', 'command', name, '--cmd', 'true', '--every', '1h']);
    t.json(['pause', 'b']);
    t.json(['stop', 'c']);
    const names = (args: string[]) => t.json<Array<{ name: string }>>(['list', ...args]).map((l) => l.name);
    expect(names(['--status', 'paused'])).toEqual(['b']);
    expect(names(['--status', 'active'])).toEqual(['a']);
    expect(names(['--status', 'paused,stopped'])).toEqual(['b', 'c']);
    t.json(['remove', 'a']);
    expect(names(['--status', 'removed'])).toEqual(['a']);
    expect(t.run(['list', '--status', 'expired']).stderr).toBe('No expired loops.\n');
    const bad = t.run(['list', '--status', 'running']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^loops list: --status "running" is not a loop status; use one of active, paused, stopped, expired, archived, removed/);
  });
});

describe("the predecessor's command aliases", () => {
  const s = sandbox();

  it('ls, rm, workflow …, workflows ls', () => {
    s.json(['create', 'command', 'one', '--cmd', 'true', '--manual']);
    expect(s.json<Array<{ name: string }>>(['ls']).map((l) => l.name)).toEqual(['one']);
    expect(s.json(['workflow', 'ls'])).toEqual([]);
    expect(s.json(['workflows', 'ls'])).toEqual([]);
    expect(s.json(['rm', 'one']).status).toBe('removed');
    const r = s.run(['constructor']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/unknown command "constructor"/);
  });
});

describe('create records the directory it runs in (item 8)', () => {
  const s = sandbox();

  it('without --cwd, the absolute directory create ran in is recorded, shown, and used by runs started elsewhere', () => {
    const project = tempDir('loops-project-');
    writeFileSync(join(project, 'job.sh'), 'echo "ran in $PWD"\n');
    chmodSync(join(project, 'job.sh'), 0o755);
    const created = spawnSync(process.execPath, [BIN, 'create', 'command', 'rel', '--cmd', './job.sh', '--manual', '--json'], {
      cwd: project,
      env: s.env(),
      encoding: 'utf8',
    });
    expect(created.status, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout).target.cwd).toBe(project);
    expect(s.run(['show', 'rel']).stdout).toContain(`cwd         ${project}\n`);
    // run-now from another directory (the sandbox runs the binary in the test's cwd).
    const run = s.json(['run-now', 'rel']);
    expect(run).toMatchObject({ status: 'succeeded', exitCode: 0, stdout: `ran in ${project}\n` });
  });

  it('agent loops too', () => {
    const project = tempDir('loops-project-');
    const created = spawnSync(process.execPath, [BIN, 'create', 'agent', 'ag', '--provider', 'claude', '--prompt', 'hi', '--manual', '--no-preflight', '--json'], {
      cwd: project,
      env: s.env(),
      encoding: 'utf8',
    });
    expect(created.status, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout).target.cwd).toBe(project);
  });
});

describe('values that start with a dash (item 8)', () => {
  const s = sandbox();

  it('--arg -fsS and --arg --verbose reach the command verbatim, as the README writes them', () => {
    s.json(['create', 'command', 'args', '--no-shell', '--cmd', 'printf', '--arg', '%s|', '--arg', '-fsS', '--arg', '--verbose', '--arg', '-', '--manual']);
    const run = s.json(['run-now', 'args']);
    expect(run).toMatchObject({ status: 'succeeded', stdout: '-fsS|--verbose|-|' });
    expect(s.json(['show', 'args']).target.args).toEqual(['%s|', '-fsS', '--verbose', '-']);
  });

  it('--env takes a value starting with a dash; a value refused by its own check names it', () => {
    const r = s.run(['create', 'command', 'env', '--cmd', 'true', '--env', '-X=1', '--manual']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--env: invalid variable name "-X"/);
    const timeout = s.run(['create', 'command', 'neg', '--cmd', 'true', '--manual', '--timeout', '-5s']);
    expect(timeout.code).toBe(2);
    expect(timeout.stderr).toMatch(/--timeout: invalid duration "-5s"/);
  });

  it('a forgotten value is still an error: --cwd --every 5m', () => {
    const r = s.run(['create', 'command', 'x', '--cmd', 'true', '--cwd', '--every', '5m']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--cwd needs a value/);
  });
});

describe('daemon: install --enable, --interval-ms / LOOPS_DAEMON_INTERVAL_MS, loops-daemon', () => {
  const s = sandbox();

  it.runIf(process.platform === 'linux')('install --enable writes the unit and runs systemctl --user daemon-reload, enable --now (exit 1 at the first failure)', () => {
    const home = tempDir('loops-home-');
    const bin = join(home, 'bin');
    mkdirSync(bin);
    const calls = join(home, 'calls');
    writeFileSync(join(bin, 'systemctl'), `#!/bin/sh\necho "$*" >> '${calls}'\n[ "$*" != "--user enable --now loops.service" ] || exit \${FAIL_ENABLE:-0}\n`, { mode: 0o755 });
    const env = { HOME: home, PATH: `${bin}:${process.env.PATH}` };
    const r = s.json(['daemon', 'install', '--enable'], env);
    expect(r.written).toBe(true);
    expect(readFileSync(join(home, '.config', 'systemd', 'user', 'loops.service'), 'utf8')).toContain('daemon" "run"');
    expect(readFileSync(calls, 'utf8').trim().split('\n')).toEqual(['--user daemon-reload', '--user enable --now loops.service', '--user status loops.service']);
    expect(r.enableResults.map((e: { status: number }) => e.status)).toEqual([0, 0, 0]);

    writeFileSync(calls, '');
    const failed = s.run(['daemon', 'install', '--enable'], { ...env, FAIL_ENABLE: '4' });
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/daemon install --enable: systemctl --user enable --now loops.service exited with 4/);
    expect(failed.stdout).toContain('systemctl --user enable --now loops.service -> exit 4');
    expect(readFileSync(calls, 'utf8').trim().split('\n')).toEqual(['--user daemon-reload', '--user enable --now loops.service']);

    // Without --enable nothing is run; with --dry-run neither.
    writeFileSync(calls, '');
    expect(s.run(['daemon', 'install', '--enable', '--dry-run'], env).stdout).toContain('(--enable would run these)');
    expect(readFileSync(calls, 'utf8')).toBe('');
  });

  it('LOOPS_DAEMON_INTERVAL_MS and --interval-ms: a bad value is exit 2 before anything starts', () => {
    for (const [args, env, message] of [
      [['daemon', 'run'], { LOOPS_DAEMON_INTERVAL_MS: 'fast' }, /^loops: LOOPS_DAEMON_INTERVAL_MS: "fast" is not a number of milliseconds from 10 to 30000/],
      [['daemon', 'run', '--interval-ms', '0'], {}, /^loops: --interval-ms: "0" is not a number of milliseconds from 10 to 30000/],
      [['daemon', 'start'], { LOOPS_DAEMON_INTERVAL_MS: '60000' }, /LOOPS_DAEMON_INTERVAL_MS: "60000"/],
    ] as const) {
      const r = s.run([...args], { ...env });
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(s.daemonPid()).toBeNull();
    }
  });

  it('loops-daemon (no subcommand) runs the daemon in the foreground, with LOOPS_DAEMON_INTERVAL_MS as its watch interval', async () => {
    // Under its installed name (the npm bin symlink).
    const dir = tempDir('loops-bin-');
    const link = join(dir, 'loops-daemon');
    symlinkSync(DAEMON_BIN, link);
    const fg = startBinary(link, [], s.env({ LOOPS_DAEMON_INTERVAL_MS: '250' }));
    await fg.waitForOutput(/looked for every 250 ms/);
    expect(fg.stdout()).toMatch(/daemon started: pid \d+/);
    expect(s.daemonPid()).toBe(fg.child.pid);
    // A loop created from the CLI meanwhile is picked up and run.
    s.json(['create', 'command', 'soon', '--cmd', 'true', '--every', '1s']);
    await fg.waitForOutput(/soon: run \S+ succeeded/);
    fg.child.kill('SIGTERM');
    const result = await fg.exited;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/daemon stopped\n$/);
  });

  it('loops-daemon status|--help|--version are the daemon subcommands', () => {
    const run = (args: string[]): CliResult => {
      const r = spawnSync(process.execPath, [DAEMON_BIN, ...args], { env: s.env(), encoding: 'utf8' });
      return { code: r.status, stdout: r.stdout, stderr: r.stderr };
    };
    const status = run(['status', '--json']);
    expect(status.code).toBe(1);
    expect(JSON.parse(status.stdout)).toMatchObject({ running: false, dataDir: s.dataDir });
    // As the predecessor's loops-daemon, status (and start, stop, install) print JSON without being asked.
    const plain = run(['status']);
    expect(plain.code).toBe(1);
    expect(JSON.parse(plain.stdout)).toMatchObject({ running: false, dataDir: s.dataDir });
    const help = run(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/Usage: loops-daemon \[options\] +run the daemon in the foreground/);
    expect(run(['--version']).stdout).toMatch(/^loops \d+\.\d+\.\d+\n$/);
    const bad = run(['--interval-ms', 'x']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--interval-ms: "x"/);
  });
});

describe('the package (item 10)', () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8'));

  it('is not named loops (an unrelated package on npm); keeps the loops binary, adds loops-daemon and ./sdk; the lock file agrees', () => {
    expect(pkg.name).not.toBe('loops');
    expect(pkg.name).toBe('loops-scheduler');
    expect(pkg.bin).toEqual({ loops: 'dist/cli/main.js', 'loops-daemon': 'dist/cli/daemon-main.js' });
    expect(pkg.exports['./sdk']).toEqual({ types: './dist/sdk.d.ts', import: './dist/sdk.js' });
    expect(lock.name).toBe(pkg.name);
    expect(lock.packages[''].name).toBe(pkg.name);
    expect(lock.packages[''].bin).toEqual(pkg.bin);
  });

  it('`import { LoopsClient } from "<name>/sdk"` resolves to the built SDK (the package imports itself by name)', () => {
    const r = spawnSync(
      process.execPath,
      ['--input-type=module', '-e', `const m = await import('${pkg.name}/sdk'); const c = new m.LoopsClient({ dataDir: process.argv[1] }); console.log(typeof m.LoopsClient, (await c.list()).length, new m.NotFoundError('x').code); await c.close();`, join(tempDir('loops-sdk-'), 'data')],
      { cwd: ROOT, encoding: 'utf8' },
    );
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('function 0 not_found\n');
  });
});

/** Starts a binary (node script) directly; output collected, waitable. */
function startBinary(file: string, args: string[], env: NodeJS.ProcessEnv) {
  const child = spawn(file, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  started.push(child);
  let stdout = '';
  let stderr = '';
  const listeners: Array<() => void> = [];
  child.stdout.on('data', (d) => {
    stdout += d;
    for (const l of [...listeners]) l();
  });
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<CliResult>((res) => child.once('close', (code) => res({ code, stdout, stderr })));
  const waitForOutput = (pattern: RegExp) =>
    new Promise<void>((res, rej) => {
      const check = () => {
        if (pattern.test(stdout)) {
          listeners.splice(listeners.indexOf(check), 1);
          res();
        }
      };
      listeners.push(check);
      child.once('exit', () => rej(new Error(`exited before ${pattern}: ${stderr}`)));
      check();
    });
  return { child, exited, waitForOutput, stdout: () => stdout };
}

const started: ChildProcess[] = [];
afterAll(() => {
  for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});
