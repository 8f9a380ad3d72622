/**
 * `loops fork` and `loops rerun` through the built binary: the acceptance case (a → b → c → d, c
 * fails; fork --from c --set-output b.key=… runs c and d only — counted by a file each step appends
 * to — the child's events show a and b reused, and `loops events` on each run shows the link), a
 * dry run that appends nothing, usage errors (exit 2), rerun --failed, and a command run's fork.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { expectDataDirInvariants } from '../helpers/invariants.js';
import { waitFor } from '../helpers/wait.js';
import { useSandboxes } from './cli-helpers.js';

const sandbox = useSandboxes();

interface Ev {
  type: string;
  data: Record<string, unknown>;
}

function fourSteps(dir: string) {
  const counter = join(dir, 'counter');
  const fix = join(dir, 'fixed');
  const file = join(dir, 'four.yaml');
  writeFileSync(
    file,
    [
      'name: four',
      'steps:',
      '  - id: a',
      `    run: echo a >> ${counter}`,
      '  - id: b',
      '    needs: a',
      `    run: echo b >> ${counter}; echo "key=from-b" >> "$LOOPS_OUTPUT"`,
      '  - id: c',
      '    needs: b',
      '    env: { KEY: "${{ steps.b.outputs.key }}" }',
      `    run: echo "c $KEY" >> ${counter}; test -e ${fix}`,
      '  - id: d',
      '    needs: c',
      `    run: echo d >> ${counter}`,
      '',
    ].join('\n'),
  );
  return { counter, fix, file, lines: () => (existsSync(counter) ? readFileSync(counter, 'utf8').trim().split('\n') : []) };
}

describe('loops fork / rerun through the binary', () => {
  it('fork --from c --set-output b.key=… completes without spawning a and b; the link is in both streams', () => {
    const s = sandbox();
    const w = fourSteps(mkdtempSync(join(tmpdir(), 'loops-fork-')));
    expect(s.run(['workflows', 'create', w.file]).code).toBe(0);
    const failed = s.run(['workflows', 'run', 'four', '--json']);
    expect(failed.code).toBe(3);
    const parent = (JSON.parse(failed.stdout) as { id: string }).id;
    expect(w.lines()).toEqual(['a', 'b', 'c from-b']);
    rmSync(w.counter);
    writeFileSync(w.fix, '');

    // A dry run prints the plan and appends nothing.
    const before = s.eventCount();
    const dry = s.run(['fork', parent, '--from', 'c', '--set-output', 'b.key=new', '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(/reuse {2}a/);
    expect(dry.stdout).toMatch(/reuse {2}b/);
    expect(dry.stdout).toMatch(/run {4}c .*the fork point/);
    const dryJson = s.json<{ dryRun: boolean; steps: Array<{ stepId: string; action: string }> }>(['fork', parent, '--from', 'c', '--dry-run']);
    expect(dryJson.steps.map((x) => x.action)).toEqual(['reuse', 'reuse', 'run', 'run']);
    expect(s.eventCount()).toBe(before);
    expect(w.lines()).toEqual([]);

    // Bad input: exit 2, one line, nothing appended.
    for (const args of [
      ['fork', parent, '--from', 'nope'],
      ['fork', parent, '--from', 'c', '--set-output', 'zz.key=1'],
      ['fork', parent, '--from', 'c', '--set-output', 'b.nokey=1'],
      ['fork', parent, '--from', 'c', '--set-output', 'no-dot'],
      ['fork', parent],
    ]) {
      const r = s.run(args);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    }
    expect(s.eventCount()).toBe(before);

    const fork = s.run(['fork', parent, '--from', 'c', '--set-output', 'b.key=new', '--reason', 'c fixed', '--json']);
    expect(fork.code, fork.stderr).toBe(0);
    const child = (JSON.parse(fork.stdout) as { run: { id: string; status: string } }).run;
    expect(child.status).toBe('succeeded');
    expect(w.lines()).toEqual(['c new', 'd']);

    const childEvents = s.json<Ev[]>(['events', child.id]);
    expect(childEvents[0]!.data.forkedFrom).toEqual({ runId: parent, from: 'c', reason: 'c fixed', how: 'fork' });
    expect(childEvents.filter((e) => e.type === 'step.reused').map((e) => e.data.stepId)).toEqual(['a', 'b']);
    const parentEvents = s.json<Ev[]>(['events', parent]);
    expect(parentEvents.at(-1)).toMatchObject({ type: 'stream.forked', data: { childRunId: child.id } });
    // The table view names them too.
    expect(s.run(['events', parent]).stdout).toContain(`stream.forked`);
    expect(s.run(['events', child.id]).stdout).toMatch(/step\.reused .*stepId=a/);
    expectDataDirInvariants(s.dataDir);
  }, 240_000);

  it('rerun --failed runs only c and d; a command run forks as a new run of its claimed definition', () => {
    const s = sandbox();
    const dir = mkdtempSync(join(tmpdir(), 'loops-fork-'));
    const w = fourSteps(dir);
    expect(s.run(['workflows', 'create', w.file]).code).toBe(0);
    const parent = (JSON.parse(s.run(['workflows', 'run', 'four', '--json']).stdout) as { id: string }).id;
    rmSync(w.counter);
    writeFileSync(w.fix, '');
    const rerun = s.run(['rerun', parent, '--failed']);
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(rerun.stdout).toMatch(/^workflow run wfrun_\w+ succeeded/);
    expect(w.lines()).toEqual(['c from-b', 'd']);

    const counter = join(dir, 'cmd-counter');
    expect(s.run(['create', 'command', 'cmd', '--cmd', `echo "$LOOPS_RUN_ID" >> ${counter}`, '--manual']).code).toBe(0);
    const first = s.json<{ id: string }>(['run-now', 'cmd']);
    const forked = s.json<{ kind: string; run: { id: string; status: string } }>(['fork', first.id, '--from', 'run']);
    expect(forked).toMatchObject({ kind: 'run', run: { status: 'succeeded' } });
    expect(readFileSync(counter, 'utf8').trim().split('\n')).toEqual([first.id, forked.run.id]);
    expect(s.json<Ev[]>(['events', forked.run.id])[0]!.data.forkedFrom).toEqual({ runId: first.id, from: 'run', reason: null, how: 'fork' });
    expect(s.json<Ev[]>(['events', first.id]).at(-1)).toMatchObject({ type: 'stream.forked', data: { childRunId: forked.run.id } });
    const rerunCmd = s.json<{ run: { id: string; status: string } }>(['rerun', first.id]);
    expect(rerunCmd.run.status).toBe('succeeded');
    expect(s.run(['fork', first.id, '--from', 'c']).code).toBe(2);
    expectDataDirInvariants(s.dataDir);
  }, 240_000);

  it('a rerun held back by the loop overlap policy says so, exits 75 and records nothing', async () => {
    const s = sandbox();
    const gate = join(mkdtempSync(join(tmpdir(), 'loops-fork-')), 'gate');
    writeFileSync(gate, '');
    expect(s.run(['create', 'command', 'slow', '--cmd', `while [ ! -e ${gate} ]; do sleep 0.05; done`, '--manual']).code).toBe(0);
    const first = s.json<{ id: string }>(['run-now', 'slow']);
    rmSync(gate);
    const going = s.start(['run-now', 'slow']);
    onTestFinished(async () => {
      writeFileSync(gate, '');
      await going.exited;
    });
    await waitFor(() => s.json<Array<{ status: string }>>(['runs', 'slow']).some((r) => r.status === 'running'), 60_000, 'the second run running');
    const before = s.eventCount();
    const held = s.run(['rerun', first.id]);
    expect(held.code, held.stderr).toBe(75);
    expect(held.stderr).toMatch(/^loops: rerun of run_\w+ held back: loop slow has overlap skip and run run_\w+ is going/);
    expect(held.stderr).not.toMatch(/\n\s+at /);
    expect(s.eventCount()).toBe(before);
    writeFileSync(gate, '');
    expect((await going.exited).code).toBe(0);
    expect(s.run(['rerun', first.id]).code).toBe(0);
  }, 240_000);
});
