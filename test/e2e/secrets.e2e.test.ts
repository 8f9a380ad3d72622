/**
 * Secrets through the built binary: `--secret-file` and `--secret-cmd` (what create refuses, exit 2,
 * recording nothing; a value that cannot be read at the start of a run, exit 3 naming the variable;
 * masking), and `loops secrets scrub` over a log a loops from before the --env refusal wrote, with
 * `loops doctor` before and after. After each, no file under the data directory (database, WAL,
 * run files) holds a value in raw, base64 or URL-encoded form.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { secretHolders } from '../helpers/secrets.js';
import { BIN, type Sandbox, useSandboxes } from './cli-helpers.js';

const sandbox = useSandboxes();

const FILE_SECRET = 'file-Zq8/4f9a+1c77&e2 d0?';
const CMD_SECRET = 'cmd-pw+Qx7/9k=3v!m~';

/** A directory outside the data directory for secret files, removed after the test. */
function secretsDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'loops-e2e-secrets-'));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function stored(file: string, text: string, mode = 0o600): string {
  writeFileSync(file, text, { mode });
  chmodSync(file, mode);
  return file;
}

interface Check {
  id: string;
  status: string;
  detail: string;
  hint?: string;
}

function storedSecretsCheck(s: Sandbox): { code: number | null; check: Check } {
  const r = s.run(['doctor', '--json']);
  const report = JSON.parse(r.stdout) as { checks: Check[] };
  return { code: r.code, check: report.checks.find((c) => c.id === 'stored-secrets')! };
}

describe('--secret-file and --secret-cmd', () => {
  it('a run gets both values by name, masked in its output; the log holds the references only; nothing under the data directory holds a value', () => {
    const s = sandbox();
    const dir = secretsDir();
    const file = stored(join(dir, 'api-token'), `${FILE_SECRET}\n`, 0o644);
    const source = stored(join(dir, 'db-password'), `${CMD_SECRET}\n`);
    const created = s.run([
      'create', 'command', 'sealed',
      '--cmd', 'echo "file=$API_TOKEN cmd=$DB_PASSWORD"; printf %s "$DB_PASSWORD" | base64 -w0; echo',
      '--secret-file', `API_TOKEN=${file}`,
      '--secret-cmd', `DB_PASSWORD=cat '${source}'`,
      '--manual',
    ]);
    expect(created.code).toBe(0);
    // Accepted, with a warning: others can read it.
    expect(created.stderr).toBe(`warning: --secret-file API_TOKEN: ${file} can be read by every user (mode 0644); chmod 600 ${file} keeps it to you\n`);
    expect(s.run(['run-now', 'sealed']).code).toBe(0);
    expect(s.json(['runs', 'sealed'])[0].stdout).toBe('file=*** cmd=***\n***\n');
    expect(s.run(['logs', 'sealed']).stdout).toBe('file=*** cmd=***\n***\n');
    expect(s.run(['show', 'sealed']).stdout).toContain(`secrets     API_TOKEN from file ${file}, DB_PASSWORD from command 'cat '\\''${source}'\\'''\n`);
    expect(s.json(['show', 'sealed']).target.secretRefs).toEqual([
      { name: 'API_TOKEN', from: 'file', path: file },
      { name: 'DB_PASSWORD', from: 'cmd', command: `cat '${source}'` },
    ]);
    expect(secretHolders(s.dataDir, [FILE_SECRET, CMD_SECRET])).toEqual([]);
  });

  it('refused before anything is written (exit 2, one line): a file in the data directory, a relative path that does not resolve, a command holding the value, a malformed or repeated name', () => {
    const s = sandbox();
    expect(s.run(['create', 'command', 'first', '--cmd', 'true', '--manual']).code).toBe(0);
    const events = s.eventCount();
    const inside = join(s.dataDir, 'token');
    writeFileSync(inside, FILE_SECRET, { mode: 0o600 });
    const cases: Array<[string[], string]> = [
      [['--secret-file', `API_TOKEN=${inside}`], `loops: --secret-file API_TOKEN: ${inside} is inside the data directory ${s.dataDir}, where a secret must not live (it is copied by loops backup and read by anyone given the directory); move the file out of it, e.g. to ~/.config/loops/secrets/ (mode 0600), and give that path\n`],
      [['--secret-file', 'API_TOKEN=no/such/token'], `loops: --secret-file API_TOKEN: "no/such/token" does not resolve: there is no file ${join(process.cwd(), 'no/such/token')} (relative to ${process.cwd()}); give the path of an existing file (an absolute path when the file is put in place later, with --no-preflight)\n`],
      [['--secret-cmd', `API_TOKEN=echo ${CMD_SECRET}`], 'loops: --secret-cmd API_TOKEN: the command prints literal text: that text is the secret, and the command is stored with the loop, in clear; put the value in a file outside the data directory and pass --secret-file API_TOKEN=PATH, or export it where loops daemon runs and pass --secret-env API_TOKEN\n'],
      [['--secret-file', '/etc/hostname'], 'loops: --secret-file "/etc/hostname" is not NAME=PATH; e.g. --secret-file API_TOKEN=$HOME/.config/loops/api-token\n'],
      [['--secret-env', 'API_TOKEN', '--secret-cmd', 'API_TOKEN=pass show t'], 'loops: --secret-cmd API_TOKEN: API_TOKEN is also given with --secret-env; give each variable once: drop one of them\n'],
    ];
    for (const [flags, stderr] of cases) {
      const r = s.run(['create', 'command', 'leaky', '--cmd', 'true', '--manual', ...flags]);
      expect(r.code, flags.join(' ')).toBe(2);
      expect(r.stderr, flags.join(' ')).toBe(stderr);
    }
    expect(s.eventCount()).toBe(events);
    rmSync(inside);
    expect(secretHolders(s.dataDir, [CMD_SECRET])).toEqual([]);
  });

  it('a value that cannot be read when a run starts fails it (exit 3), naming the variable and the file or the exit code — never the value', () => {
    const s = sandbox();
    const dir = secretsDir();
    const file = stored(join(dir, 'api-token'), FILE_SECRET);
    const source = stored(join(dir, 'db-password'), CMD_SECRET);
    expect(s.run(['create', 'command', 'by-file', '--cmd', 'true', '--secret-file', `API_TOKEN=${file}`, '--manual']).code).toBe(0);
    expect(s.run(['create', 'command', 'by-cmd', '--cmd', 'true', '--secret-cmd', `DB_PASSWORD=cat '${source}' >&2; exit 4`, '--manual']).code).toBe(0);
    rmSync(file);
    expect(s.run(['run-now', 'by-file']).code).toBe(3);
    expect(s.json(['runs', 'by-file'])[0].error).toMatch(new RegExp(`secret API_TOKEN: its file ${file} does not exist on this runner \\(runner [^)]+\\)$`));
    expect(s.run(['run-now', 'by-cmd']).code).toBe(3);
    expect(s.json(['runs', 'by-cmd'])[0].error).toMatch(/secret DB_PASSWORD: its command exited with code 4 \(its output is not recorded; run it yourself to see why\) \(runner [^)]+\)$/);
    expect(secretHolders(s.dataDir, [FILE_SECRET, CMD_SECRET])).toEqual([]);
  });
});

const LEGACY = 'tok-legacy-4f9a1c77e2d0';

/** Records a loop the way a loops from before the --env refusal did: CLI_TOKEN's value in its definition. */
function legacyLoop(s: Sandbox): void {
  const dist = dirname(dirname(BIN));
  const script = `
    const { openRuntime } = await import(${JSON.stringify(join(dist, 'runtime', 'runtime.js'))});
    const { recordLoopCreated } = await import(${JSON.stringify(join(dist, 'runtime', 'loops', 'commands.js'))});
    const runtime = await openRuntime({ dataDir: process.env.LOOPS_DATA_DIR });
    await recordLoopCreated(runtime, {
      loopId: 'loop_legacy0000000000000000', name: 'sync', description: 'from an older loops',
      schedule: { kind: 'manual' },
      timing: { tz: 'UTC', jitterMs: null, startsAt: null, expiresAt: null, maxRuns: null },
      target: { kind: 'command', command: 'echo "token=$CLI_TOKEN"', args: [], shell: true, cwd: null, env: { CLI_TOKEN: ${JSON.stringify(LEGACY)} } },
      policies: { timeoutMs: null, killGraceMs: 5000, overlap: 'skip', catchUp: 'latest', catchUpWindowMs: null, catchUpLimit: null, attempts: 1, retryDelayMs: 30000, backoff: 2, maxRetryDelayMs: null, leaseMs: 30000 },
      nextRunAt: null,
    });
    runtime.close();`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { env: s.env(), encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
}

describe('loops secrets scrub', () => {
  it('doctor warns (exit 0) and points to scrub; --dry-run records nothing; scrub redefines the loop with --secret-env; doctor is then ok and says the history still holds the value', () => {
    const s = sandbox();
    legacyLoop(s);
    const before = storedSecretsCheck(s);
    expect(before.code).toBe(0);
    expect(before.check).toMatchObject({ status: 'warn', detail: '1 value under secret names stored in clear in live definitions: loop sync: --env CLI_TOKEN' });
    expect(before.check.hint).toMatch(/^loops secrets scrub \(try --dry-run first\)/);

    const events = s.eventCount();
    const dry = s.run(['secrets', 'scrub', '--dry-run']);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toMatch(/^Would redefine loop sync: --env CLI_TOKEN=… → --secret-env CLI_TOKEN \(loop_legacy0000000000000000 would be removed, replaced by a new loop\)\n/);
    expect(dry.stdout).toMatch(/Nothing was recorded \(--dry-run\)\.\n$/);
    expect(s.eventCount()).toBe(events);

    const done = s.run(['secrets', 'scrub'], { CLI_TOKEN: 'x' });
    expect(done.code).toBe(0);
    const [line, blank, must, restart, until] = done.stdout.split('\n');
    expect(line).toMatch(/^Redefined loop sync: --env CLI_TOKEN=… → --secret-env CLI_TOKEN \(loop_legacy0000000000000000 removed, now loop_\w+\)$/);
    expect([blank, must, restart, until]).toEqual([
      '',
      'You must set CLI_TOKEN in the environment loops daemon starts from (and in your shell for run-now), then restart it:',
      '  loops daemon stop && loops daemon start',
      '  until then these runs fail at their start, naming the missing variable.',
    ]);
    expect(done.stdout).toContain("Rotate those secrets: the log's history still holds their old values — loop sync (removed, loop_legacy0000000000000000): --env CLI_TOKEN —");

    const after = storedSecretsCheck(s);
    expect(after.code).toBe(0);
    expect(after.check.status).toBe('ok');
    expect(after.check.detail).toBe(
      'no live loop or workflow definition holds a value under a secret name; the log\'s history still holds 1 value under secret names (rotate them; no command removes history, see docs/cli.md, "Secrets"): loop sync (removed, loop_legacy0000000000000000): --env CLI_TOKEN',
    );
    expect(s.json(['show', 'sync']).target).toMatchObject({ env: {}, secretEnv: ['CLI_TOKEN'] });
    expect(s.run(['run-now', 'sync']).code).toBe(3);
    expect(s.run(['run-now', 'sync'], { CLI_TOKEN: 'tok-rotated-0001' }).code).toBe(0);
    expect(s.json(['runs', 'sync'])[0].stdout).toBe('token=***\n');
    expect(s.json(['secrets', 'scrub'])).toMatchObject({ dryRun: false, loops: [], workflows: [], mustSet: [] });
  });
});
