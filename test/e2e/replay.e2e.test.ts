/**
 * `loops replay` and `loops diff` through the built binary (piped, so the sequence, never the
 * stepper): JSON Lines one object per transition with what changed; --at prints the full state at
 * one point; --until-failure stops at the first failing transition; an edited field hash exits 6
 * naming event and field; diff exits 0 for the same shape, 1 where two runs part ways, 2 for runs
 * of different loops unless --force.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { useSandboxes, type Sandbox } from './cli-helpers.js';

const sandbox = useSandboxes();

function lines(stdout: string): any[] {
  return stdout.trim().split('\n').map((line) => JSON.parse(line));
}

describe('loops replay', () => {
  let s: Sandbox;
  let ok: string;
  let failed: string;
  let wfRun: string;
  beforeAll(() => {
    s = sandbox();
    const dir = mkdtempSync(join(tmpdir(), 'loops-replay-'));
    expect(s.run(['create', 'command', 'hi', '--cmd', 'echo hello', '--manual']).code).toBe(0);
    expect(s.run(['create', 'command', 'bad', '--cmd', 'echo oops; exit 3', '--manual']).code).toBe(0);
    s.run(['run-now', 'hi']);
    s.run(['run-now', 'bad']);
    const runs = s.json<Array<{ id: string; status: string }>>(['runs']);
    ok = runs.find((r) => r.status === 'succeeded')!.id;
    failed = runs.find((r) => r.status === 'failed')!.id;
    const spec = join(dir, 'three.yaml');
    writeFileSync(spec, ['name: three', 'steps:', '  - id: a', '    run: echo a', '  - id: b', '    needs: a', '    run: echo broken; exit 4', '  - id: c', '    needs: b', '    run: echo c', ''].join('\n'));
    expect(s.run(['workflows', 'create', spec]).code).toBe(0);
    const r = s.run(['workflows', 'run', 'three']);
    expect(r.code, r.stderr).toBe(3);
    wfRun = /workflow run (wfrun_\w+) failed/.exec(r.stderr)![1]!;
  }, 60_000);

  it('prints the sequence with what changed, and says every event matched', () => {
    const r = s.run(['replay', failed]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/✓ v1 .* run\.claimed  new → claimed/);
    expect(r.stdout).toMatch(/✓ v4 .* process\.exited  running → failed\n {6}exitCode: null → 3\n/);
    expect(r.stdout).toContain('stdout: "" → "oops\\n"');
    expect(r.stdout).toMatch(/ok: every replayed state matches the log \(4 event\(s\)\)/);
  });

  it('--json: JSON Lines, one object per transition, with changes and who acted, never whole contexts', () => {
    const r = s.run(['replay', wfRun, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const steps = lines(r.stdout);
    const events = s.json<unknown[]>(['events', wfRun]);
    expect(steps).toHaveLength(events.length);
    expect(steps.map((x) => x.version)).toEqual(events.map((_, i) => i + 1));
    for (const step of steps) {
      expect(Object.keys(step)).toEqual(expect.arrayContaining(['version', 'type', 'at', 'stateBefore', 'stateAfter', 'changes', 'actions', 'matches', 'by']));
      expect(step.matches).toBe(true);
      expect(step.by).toMatchObject({ source: 'workflows run' });
      for (const change of step.changes) expect(change.path).not.toBe('steps');
    }
    const failedStep = steps.find((x) => x.changes.some((c: any) => c.path === 'steps.b' && c.after.status === 'failed'));
    expect(failedStep.type).toBe('step.exited');
  });

  it('--at prints the full state at a version or a time, nothing else', () => {
    const at2 = s.run(['replay', failed, '--at', '2', '--json']);
    expect(at2.code, at2.stderr).toBe(0);
    const state = JSON.parse(at2.stdout);
    expect(state).toMatchObject({ version: 2, type: 'process.spawn_requested', state: 'spawning', event: { version: 2, type: 'process.spawn_requested' } });
    expect(state.context).toMatchObject({ runId: failed, exitCode: null });
    const events = s.json<Array<{ at: string }>>(['events', failed]);
    const byTime = JSON.parse(s.run(['replay', failed, '--at', events[3]!.at, '--json']).stdout);
    expect(byTime).toMatchObject({ version: 4, state: 'failed', context: { exitCode: 3 } });
    const text = s.run(['replay', failed, '--at', '4']);
    expect(text.stdout).toMatch(/^run:\S+ at v4 \(process\.exited, /);
    expect(text.stdout).toMatch(/\nstate {4}failed\n/);
    expect(text.stdout).not.toContain('✓');
    const beyond = s.run(['replay', failed, '--at', '99']);
    expect(beyond.code).toBe(2);
    expect(beyond.stderr).toMatch(/has no version 99; its last version is 4/);
    expect(s.run(['replay', failed, '--at', 'yesterday']).code).toBe(2);
    expect(s.run(['replay', failed, '--at', '2', '--until-failure']).code).toBe(2);
  }, 60_000);

  it('--until-failure stops at the first failing transition: the failed step of a workflow run', () => {
    const r = s.run(['replay', wfRun, '--until-failure']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/first failure at v\d+ \(step\.exited\): steps\.b failed/);
    const steps = lines(s.run(['replay', wfRun, '--until-failure', '--json']).stdout);
    expect(steps.at(-1).changes.find((c: any) => c.path === 'steps.b').after.status).toBe('failed');
    expect(steps.length).toBeLessThan(lines(s.run(['replay', wfRun, '--json']).stdout).length);
    const none = s.run(['replay', ok, '--until-failure']);
    expect(none.stdout).toContain('no failing transition in 4 event(s)');
  });

  it('an edited field hash: exit 6, one line naming the event and the field', () => {
    const db = s.db();
    const row = db.prepare("SELECT position, meta FROM events WHERE stream_id = ? AND type = 'process.exited'").get(`run:${failed}`) as { position: number; meta: string };
    const meta = JSON.parse(row.meta);
    db.prepare('UPDATE events SET meta = ? WHERE position = ?').run(JSON.stringify({ ...meta, ctx: { ...meta.ctx, exitCode: '00000000000001' } }), row.position);
    db.close();
    const r = s.run(['replay', failed]);
    expect(r.code).toBe(6);
    expect(r.stdout).toMatch(/✗ v4 .* process\.exited/);
    expect(r.stdout).toContain('field exitCode differs: the log recorded hash 00000000000001');
    expect(r.stderr).toMatch(/diverges at version 4 \(process\.exited\): field exitCode: replay changed it to 3/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    const db2 = s.db();
    db2.prepare('UPDATE events SET meta = ? WHERE position = ?').run(row.meta, row.position);
    db2.close();
    expect(s.run(['replay', failed]).code).toBe(0);
  });
});

describe('loops diff', () => {
  let s: Sandbox;
  let okA: string;
  let okB: string;
  let bad: string;
  let other: string;
  beforeAll(() => {
    s = sandbox();
    const dir = mkdtempSync(join(tmpdir(), 'loops-diff-'));
    const flag = join(dir, 'fail');
    expect(s.run(['create', 'command', 'job', '--cmd', `test ! -e ${flag}`, '--manual']).code).toBe(0);
    expect(s.run(['create', 'command', 'other', '--cmd', 'true', '--manual']).code).toBe(0);
    s.run(['run-now', 'job']);
    s.run(['run-now', 'job']);
    writeFileSync(flag, '');
    s.run(['run-now', 'job']);
    s.run(['run-now', 'other']);
    const runs = s.json<Array<{ id: string; loopName: string; status: string }>>(['runs']);
    [okA, okB] = runs.filter((r) => r.loopName === 'job' && r.status === 'succeeded').map((r) => r.id) as [string, string];
    bad = runs.find((r) => r.status === 'failed')!.id;
    other = runs.find((r) => r.loopName === 'other')!.id;
  }, 60_000);

  it('0 for two runs of the same shape (a run-id prefix is enough)', () => {
    // Not only the id's time part: runs made in the same instant share it (seen in CI: 2 matches).
    const same = s.run(['diff', okA.slice(0, -2), okB]);
    expect(same.code, same.stderr).toBe(0);
    expect(same.stdout).toContain('same shape: 4 transition(s)');
  });

  it('1 where two runs of a loop part ways, with the fields that differ there', () => {
    const differ = s.run(['diff', okA, bad]);
    expect(differ.code, differ.stderr).toBe(1);
    expect(differ.stdout).toContain('part ways at transition 4: a different state after it');
    expect(differ.stdout).toMatch(/\n {2}exitCode: 0 → 1\n/);
    const json = JSON.parse(s.run(['diff', okA, bad, '--json']).stdout);
    expect(json).toMatchObject({ identical: false, divergence: { index: 4, kind: 'state', a: { stateAfter: 'succeeded' }, b: { stateAfter: 'failed' } } });
  });

  it('2 for runs of different loops (one line saying --force), unless --force; 2 for an unknown run', () => {
    const refused = s.run(['diff', okA, other]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/are runs of different loops .*--force compares them anyway/);
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    expect(s.run(['diff', okA, other, '--force']).code).toBe(0);
    expect(s.run(['diff', okA, 'run_nope']).code).toBe(2);
  });
});
