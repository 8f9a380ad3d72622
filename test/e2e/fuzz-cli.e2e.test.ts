/**
 * The command-line fuzz, a small sample through the built binary (issue 11, hostile input): what
 * test/int/fuzz-cli.int.test.ts checks in process, checked on a real process — random argv (unicode,
 * NUL-free since no argv can hold one, very long, flag-like, `--x=`, repeated and unknown flags)
 * exits with a documented code, never prints a stack trace, and leaves a database that
 * `loops projections verify` and `loops verify` pass, with no loop row missing its loop.created.
 * The same commands are left out as in process (they start processes, block, or write where told).
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fuzzParams, hostileString } from '../helpers/fuzz.js';
import { BIN, useSandboxes } from './cli-helpers.js';

const COMMANDS = [
  'create command', 'create workflow', 'create agent', 'list', 'show', 'pause', 'resume', 'stop', 'archive', 'remove', 'why', 'next', 'cancel',
  'stats', 'prune', 'accounts add', 'accounts list', 'accounts remove', 'runs', 'logs', 'events', 'replay', 'workflows create',
  'workflows update', 'workflows cancel', 'workflows archive', 'workflows list', 'workflows show', 'workflows runs', 'workflows inspect',
  'workflows validate', 'schema workflow', 'projections rebuild', 'projections verify', 'daemon status', 'verify',
];
const FLAGS = ['--cmd', '--every', '--cron', '--at', '--manual', '--tz', '--timeout', '--attempts', '--retry-delay', '--backoff', '--overlap', '--catch-up', '--env', '--arg', '--no-shell', '--no-preflight', '--workflow', '--provider', '--prompt', '--account', '--limit', '--status', '--json', '--reason', '--since', '--older-than', '--dry-run', '--input', '--all', '-n', '-h', '--no-such-flag'];
const EXIT_CODES = [0, 1, 2, 3, 4, 5, 6, 75];

describe('fuzz: the command line, through the binary', () => {
  const sandbox = useSandboxes();

  it('random argv: a documented exit code, no stack trace; afterwards the database verifies', () => {
    const s = sandbox();
    const wf = join(s.dataDir, '..', `${s.dataDir.split('/').pop()}-wf.yaml`);
    writeFileSync(wf, 'name: wf\nsteps:\n  - id: a\n    run: "true"\n');
    expect(s.run(['create', 'command', 'job', '--cmd', 'true', '--every', '1h']).code).toBe(0);
    expect(s.run(['workflows', 'create', wf]).code).toBe(0);
    const value = fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom('job', 'wf', 'nope', 'true', '5m', '0s', '-5m', '0 3 * * *', 'skip', 'all', '3', '-1', 'A=1', 'claude', wf) },
      { weight: 3, arbitrary: hostileString.filter((v) => !v.includes('\0')) },
    );
    const token = fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom(...FLAGS) },
      { weight: 2, arbitrary: fc.tuple(fc.constantFrom(...FLAGS), value).map(([f, v]) => `${f}=${v}`) },
      { weight: 4, arbitrary: value },
    );
    const argv = fc.tuple(fc.constantFrom(...COMMANDS), fc.array(token, { maxLength: 6 })).map(([c, rest]) => [...c.split(' '), ...rest]);
    fc.assert(
      fc.property(argv, (args) => {
        // In the sandbox's directory, with HOME there too: nothing lands anywhere else.
        const r = spawnSync(process.execPath, [BIN, ...args], { cwd: join(s.dataDir, '..'), env: { ...s.env(), HOME: s.dataDir }, encoding: 'utf8', timeout: 60_000 });
        const what = `loops ${JSON.stringify(args).slice(0, 300)} → ${r.status}: ${r.stderr.slice(0, 400)}`;
        expect(EXIT_CODES, what).toContain(r.status);
        expect(r.stderr, what).not.toMatch(/^\s+at |internal error|SQLITE_|RangeError|TypeError/m);
        if (r.status === 2) expect(r.stderr.trimEnd().split('\n').pop(), what).toMatch(/^loops( [a-z-]+)*: /);
      }),
      fuzzParams(0x11f1, 10),
    );
    expect(s.run(['projections', 'verify']).code).toBe(0);
    expect(s.run(['verify']).code).toBe(0);
    const db = s.db();
    try {
      expect(db.prepare("SELECT id FROM loops WHERE NOT EXISTS (SELECT 1 FROM events WHERE stream_id = 'loop:' || loops.id AND type = 'loop.created')").all()).toEqual([]);
    } finally {
      db.close();
    }
  });
});
