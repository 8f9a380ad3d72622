/**
 * The gaps the predecessor-parity audit found, through the built binary (issue 12, item 2: "plus
 * anything else found in its CLI"): the global `-j` (before or after the command), `workflows list
 * --status active|archived`, `workflows events <run> [--limit N]` (= `loops events`, `--limit` on it),
 * `workflows run <workflow> --show-output` (the predecessor README's own command), `runs --show-output`.
 * test/unit/predecessor-parity.unit.test.ts checks every other command and flag by name.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/tmp.js';
import { useSandboxes } from './cli-helpers.js';

const sandbox = useSandboxes();

/** A predecessor-shape workflow file of one command step. */
function workflowFile(name: string): string {
  const file = join(tempDir('loops-parity-'), `${name}.json`);
  writeFileSync(file, JSON.stringify({ name, steps: [{ id: 'hello', target: { type: 'command', command: 'echo', args: ['hi'] } }] }));
  return file;
}

describe('-j, --json: the predecessor global flag', () => {
  it('before the command or after it, as -j or --json, prints the same JSON; --help shows -j', () => {
    const s = sandbox();
    s.json(['create', 'command', 'a', '--cmd', 'true', '--every', '1h']);
    const ways = [['-j', 'list'], ['--json', 'list'], ['list', '-j'], ['ls', '-j'], ['-j', 'ls']];
    const outputs = ways.map((argv) => {
      const r = s.run(argv);
      expect(r.code, `loops ${argv.join(' ')}: ${r.stderr}`).toBe(0);
      return (JSON.parse(r.stdout) as Array<{ name: string }>).map((l) => l.name);
    });
    for (const names of outputs) expect(names).toEqual(['a']);
    const shown = s.run(['-j', 'show', 'a']);
    expect(JSON.parse(shown.stdout)).toMatchObject({ name: 'a' });
    expect(s.run(['list', '--help']).stdout).toMatch(/^ {2}-j, --json {2,}print machine-readable JSON/m);
    // A command without JSON output still says so, as for --json.
    const daemonRun = s.run(['-j', 'daemon', 'run']);
    expect(daemonRun.code).toBe(2);
    expect(daemonRun.stderr).toMatch(/^loops daemon run: unknown option --json/);
  });
});

describe('workflows list --status', () => {
  it('active (the default) or archived; anything else is exit 2', () => {
    const s = sandbox();
    s.json(['workflows', 'create', workflowFile('kept')]);
    s.json(['workflows', 'create', workflowFile('old')]);
    s.json(['workflows', 'archive', 'old']);
    const names = (args: string[]) => s.json<Array<{ name: string; status: string }>>(['workflows', 'list', ...args]).map((w) => `${w.name}:${w.status}`);
    expect(names([])).toEqual(['kept:active']);
    expect(names(['--status', 'active'])).toEqual(['kept:active']);
    expect(names(['--status', 'archived'])).toEqual(['old:archived']);
    expect(names(['--all'])).toEqual(['kept:active', 'old:archived']);
    expect(s.json<unknown[]>(['workflow', 'ls', '--status', 'archived'])).toHaveLength(1);
    const bad = s.run(['workflows', 'list', '--status', 'paused']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe('loops workflows list: --status "paused" is not a workflow status; use active or archived (--all lists both)\n');
    s.json(['workflows', 'archive', 'kept']);
    expect(s.run(['workflows', 'list', '--status', 'active']).stderr).toBe('No active workflows.\n');
  });
});

describe('workflows events <run> [--limit N]', () => {
  it("prints the workflow run's events in order, the first N with --limit (also loops events)", () => {
    const s = sandbox();
    s.json(['workflows', 'create', workflowFile('ev')]);
    const ran = s.run(['workflows', 'run', 'ev']);
    expect(ran.code, ran.stderr).toBe(0);
    const [run] = s.json<Array<{ id: string }>>(['workflows', 'runs', 'ev']);
    const all = s.json<Array<{ type: string; version: number }>>(['workflows', 'events', run!.id]);
    expect(all.length).toBeGreaterThan(3);
    expect(all[0]!.type).toBe('wfrun.started');
    expect(all.map((e) => e.version)).toEqual(all.map((_, i) => i + 1));
    const first2 = s.json<Array<{ type: string }>>(['workflows', 'events', run!.id, '--limit', '2']);
    expect(first2).toEqual(all.slice(0, 2));
    expect(s.json(['workflow', 'events', run!.id, '-n', '1'])).toEqual(all.slice(0, 1));
    expect(s.json(['events', run!.id, '--limit', '3'])).toEqual(all.slice(0, 3));
    const text = s.run(['workflows', 'events', run!.id, '--limit', '2']);
    expect(text.stdout).toMatch(/— 2 event\(s\)/);
    const bad = s.run(['workflows', 'events', run!.id, '--limit', '0']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^loops events: --limit must be a positive whole number, got "0"/);
  });
});

describe('workflows run --show-output', () => {
  it("prints each step's output after the run (the predecessor README's command), keeping the run's exit code", () => {
    const s = sandbox();
    const file = join(tempDir('loops-parity-'), 'two.json');
    writeFileSync(
      file,
      JSON.stringify({
        name: 'two',
        steps: [
          { id: 'say', target: { type: 'command', command: 'echo', args: ['hello from say'] } },
          { id: 'fail', dependsOn: ['say'], target: { type: 'command', command: 'echo out-of-fail; echo err-of-fail >&2; exit 4', shell: true } },
        ],
      }),
    );
    s.json(['workflows', 'create', file]);
    const r = s.run(['workflows', 'run', 'two', '--show-output']);
    expect(r.code).toBe(3);
    expect(r.stdout).toMatch(/── say \(attempt 1\) ──\nhello from say\n/);
    expect(r.stdout).toMatch(/out-of-fail/);
    expect(r.stdout + r.stderr).toMatch(/err-of-fail/);
    const plain = s.run(['workflows', 'run', 'two']);
    expect(plain.code).toBe(3);
    expect(plain.stdout).not.toMatch(/hello from say/);
  });
});

describe('runs --show-output', () => {
  it("prints the table, then each run's stdout and stderr under a header, newest first", () => {
    const s = sandbox();
    s.json(['create', 'command', 'talk', '--cmd', 'echo said-$LOOPS_RUN_ID; echo grumbled >&2', '--every', '1h']);
    s.json(['create', 'command', 'quiet', '--cmd', 'true', '--every', '1h']);
    const first = s.json<{ id: string }>(['run-now', 'talk']);
    const second = s.json<{ id: string }>(['run-now', 'quiet']);
    const r = s.run(['runs', '--show-output']);
    expect(r.code, r.stderr).toBe(0);
    const at = (text: string) => r.stdout.indexOf(text);
    expect(at(`── ${second.id} · quiet · succeeded ──`)).toBeGreaterThan(at('RUN'));
    expect(at(`── ${first.id} · talk · succeeded ──`)).toBeGreaterThan(at(`── ${second.id}`));
    expect(r.stdout.slice(at(`── ${first.id}`))).toMatch(new RegExp(`said-${first.id}\\n[\\s\\S]*grumbled`));
    expect(s.run(['runs']).stdout).not.toMatch(/said-/);
    expect(s.run(['runs', 'talk', '-n', '1', '--show-output']).stdout).toMatch(/said-/);
  });
});
