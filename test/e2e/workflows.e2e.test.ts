/**
 * Workflows through the built binary: create a spec, run it (a → {b, c} → d plus e), outputs from
 * a to d as one argument, a failing branch, continue-on-error, cancel from another terminal with
 * an always() step, replay of the run.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { expectDataDirInvariants } from '../helpers/invariants.js';
import { liveGroupMembers } from '../helpers/proc.js';
import { waitFor } from '../helpers/wait.js';
import { Sandbox, useSandboxes } from './cli-helpers.js';

const sandbox = useSandboxes();

function diamond(dir: string, c: { fail?: boolean; continueOnError?: boolean } = {}): string {
  const file = join(dir, 'diamond.yaml');
  writeFileSync(
    file,
    `name: diamond
steps:
  - id: a
    run: printf 'x=%s\\n' "$VALUE" >> "$LOOPS_OUTPUT"
    env: { VALUE: "; touch PWNED" }
  - id: b
    needs: a
    run: sleep 1
  - id: c
    needs: a
    run: sleep 1; exit ${c.fail ? 3 : 0}
${c.continueOnError ? '    continue-on-error: true\n' : ''}  - id: d
    needs: [b, c]
    command: printf
    args: ["%s|", "\${{ steps.a.outputs.x }}"]
  - id: e
    run: sleep 1
`,
  );
  return file;
}

interface Step {
  stepId: string;
  status: string;
  startedAt: string | null;
  finishedAt: string | null;
  stdout?: string;
}

function steps(s: Sandbox, runId: string): Step[] {
  return s.json<{ steps: Step[] }>(['workflows', 'inspect', runId]).steps;
}

describe('loops workflows: the diamond', () => {
  it('runs b, c and e in parallel; d gets a’s output as one argument (nothing executed); the run succeeds and replays', () => {
    const s = sandbox();
    const dir = mkdtempSync(join(tmpdir(), 'loops-wf-'));
    const created = s.run(['workflows', 'create', diamond(dir)]);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toMatch(/^created workflow diamond \(wf_\w+\), version 1\n$/);
    const r = s.run(['workflows', 'run', 'diamond', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const run = JSON.parse(r.stdout) as { id: string; status: string };
    expect(run.status).toBe('succeeded');
    const list = steps(s, run.id);
    const by = Object.fromEntries(list.map((x) => [x.stepId, x]));
    expect(Object.fromEntries(list.map((x) => [x.stepId, x.status]))).toEqual({ a: 'succeeded', b: 'succeeded', c: 'succeeded', d: 'succeeded', e: 'succeeded' });
    // b, c and e overlap in time: each started before the others ended.
    for (const [x, y] of [['b', 'c'], ['b', 'e'], ['c', 'e']] as const) {
      expect(Date.parse(by[x]!.startedAt!)).toBeLessThan(Date.parse(by[y]!.finishedAt!));
      expect(Date.parse(by[y]!.startedAt!)).toBeLessThan(Date.parse(by[x]!.finishedAt!));
    }
    // The output arrived as one argument; nothing ran it as shell text.
    const out = readFileSync(join(s.dataDir, 'runs', run.id, 'd', '1', 'stdout.log'), 'utf8');
    expect(out).toBe('; touch PWNED|');
    expect(existsSync(join(dir, 'PWNED'))).toBe(false);
    expect(existsSync('PWNED')).toBe(false);
    const replay = s.run(['replay', run.id]);
    expect(replay.code, replay.stdout + replay.stderr).toBe(0);
    const timeline = s.run(['workflows', 'inspect', run.id, '--timeline']);
    expect(timeline.code, timeline.stderr).toBe(0);
    expect(timeline.stdout).toContain('critical path');
  });

  it('c fails: d is skipped, e still succeeds, the run is failed (exit 3); with continue-on-error d runs and it succeeds', () => {
    const s = sandbox();
    const dir = mkdtempSync(join(tmpdir(), 'loops-wf-'));
    s.run(['workflows', 'create', diamond(dir, { fail: true })]);
    const r = s.run(['workflows', 'run', 'diamond']);
    expect(r.code, r.stderr).toBe(3);
    expect(r.stderr).toMatch(/c: failed in .* \(exited with code 3\)/);
    expect(r.stderr).toMatch(/d: skipped \(needs c which failed\)/);
    const runId = /workflow run (wfrun_\w+) failed/.exec(r.stderr)![1]!;
    expect(Object.fromEntries(steps(s, runId).map((x) => [x.stepId, x.status]))).toMatchObject({ c: 'failed', d: 'skipped', e: 'succeeded' });

    const v2 = s.run(['workflows', 'update', 'diamond', diamond(dir, { fail: true, continueOnError: true })]);
    expect(v2.stdout).toBe('workflow diamond: version 2\n');
    const again = s.run(['workflows', 'run', 'diamond', '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ status: 'succeeded', version: 2 });
  });

  it('cancel from another terminal: the running steps are gone within the grace period, always() still runs, the run is cancelled (exit 5)', async () => {
    const s = sandbox();
    const dir = mkdtempSync(join(tmpdir(), 'loops-wf-'));
    const file = join(dir, 'slow.yaml');
    writeFileSync(
      file,
      `name: slow
steps:
  - id: one
    run: sleep 30
  - id: two
    run: sleep 30
  - id: three
    needs: [one]
    run: echo never
  - id: cleanup
    needs: [one, two]
    if: always()
    run: echo cleaned
`,
    );
    s.run(['workflows', 'create', file]);
    const fg = s.start(['workflows', 'run', 'slow']);
    let runId = '';
    await waitFor(
      () => {
        const runs = s.json<Array<{ id: string }>>(['workflows', 'runs', 'slow']);
        if (!runs.length) return false;
        runId = runs[0]!.id;
        return steps(s, runId).filter((x) => x.status === 'running').length === 2;
      },
      10_000,
      'two running steps',
    );
    const pids = s.json<{ steps: Array<{ pid: number | null }> }>(['workflows', 'inspect', runId]).steps.flatMap((x) => (x.pid ? [x.pid] : []));
    const c = s.run(['workflows', 'cancel', runId, '--reason', 'enough']);
    expect(c.code, c.stderr).toBe(0);
    const result = await fg.exited;
    expect(result.code, result.stderr).toBe(5);
    for (const pid of pids) expect(liveGroupMembers(pid)).toEqual([]);
    const final = Object.fromEntries(steps(s, runId).map((x) => [x.stepId, x.status]));
    expect(final).toEqual({ one: 'cancelled', two: 'cancelled', three: 'skipped', cleanup: 'succeeded' });
    expect(s.json<{ status: string }>(['workflows', 'inspect', runId]).status).toBe('cancelled');
    expect(s.run(['replay', runId]).code).toBe(0);
  });

  it('bad spec files are refused with the file, step and field, exit 2, nothing stored', () => {
    const s = sandbox();
    const dir = mkdtempSync(join(tmpdir(), 'loops-wf-'));
    const file = join(dir, 'bad.yaml');
    writeFileSync(file, 'name: bad\nsteps:\n  - id: a\n    run: echo\n    needs: [b]\n  - id: b\n    needs: a\n    run: echo\n');
    const before = s.eventCount();
    const r = s.run(['workflows', 'create', file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/bad\.yaml:\d+:\d+: .*cycle: a → b → a|cycle/);
    expect(s.eventCount()).toBe(before);
  });
});

describe('loops workflows resume after kill -9 of the runner', () => {
  function spec(dir: string): string {
    const file = join(dir, 'crash.yaml');
    writeFileSync(
      file,
      `name: crash
steps:
  - id: a
    run: echo a >> "$MARKS"
    env: { MARKS: "${join(dir, 'marks')}" }
  - id: b
    needs: a
    run: sleep 2; echo "n=42" >> "$LOOPS_OUTPUT"; echo b-done
  - id: c
    needs: b
    command: printf
    args: ["%s", "\${{ steps.b.outputs.n }}"]
`,
    );
    return file;
  }

  async function killMidway(s: Sandbox, dir: string): Promise<{ runId: string; pid: number }> {
    s.run(['workflows', 'create', spec(dir)]);
    const fg = s.start(['workflows', 'run', 'crash']);
    let runId = '';
    let pid = 0;
    await waitFor(
      () => {
        const runs = s.json<Array<{ id: string }>>(['workflows', 'runs', 'crash']);
        if (!runs.length) return false;
        runId = runs[0]!.id;
        const b = s.json<{ steps: Array<{ stepId: string; status: string; pid: number | null }> }>(['workflows', 'inspect', runId]).steps.find((x) => x.stepId === 'b')!;
        pid = b.pid ?? 0;
        return b.status === 'running' && pid > 0;
      },
      10_000,
      'step b running',
    );
    fg.child.kill('SIGKILL');
    await fg.exited;
    return { runId, pid };
  }

  it('a step still running is adopted; finished steps are not re-run; outputs flow on; the run succeeds and replays', async () => {
    const s = sandbox();
    const dir = mkdtempSync(join(tmpdir(), 'loops-wf-'));
    const { runId, pid } = await killMidway(s, dir);
    expect(liveGroupMembers(pid).length).toBeGreaterThan(0);
    // The killed runner's lease must run out before another may take over (30 s by default):
    // expire it the way the daemon does for a runner known dead.
    const db = s.db();
    db.prepare('UPDATE leases SET expires_at = ? WHERE name = ?').run(new Date(Date.now() - 1000).toISOString(), `wfrun:${runId}`);
    db.close();
    const r = s.run(['workflows', 'resume', runId, '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ id: runId, status: 'succeeded' });
    expect(readFileSync(join(dir, 'marks'), 'utf8')).toBe('a\n');
    expect(readFileSync(join(s.dataDir, 'runs', runId, 'b', '1', 'stdout.log'), 'utf8')).toBe('b-done\n');
    expect(readFileSync(join(s.dataDir, 'runs', runId, 'c', '1', 'stdout.log'), 'utf8')).toBe('42');
    expect(s.run(['replay', runId]).code).toBe(0);
    // Resuming a finished run changes nothing.
    expect(JSON.parse(s.run(['workflows', 'resume', runId, '--json']).stdout)).toMatchObject({ status: 'succeeded' });
  });

  it('a step that ended while nobody watched is recorded from its exit-status file; a live runner is not taken over', async () => {
    const s = sandbox();
    const dir = mkdtempSync(join(tmpdir(), 'loops-wf-'));
    const { runId, pid } = await killMidway(s, dir);
    // While its lease is live, resume refuses: the run may still have a runner.
    const busy = s.run(['workflows', 'resume', runId]);
    expect(busy.code).not.toBe(0);
    expect(busy.stderr).toMatch(/is running in .* \(its lease is renewed until/);
    await waitFor(() => liveGroupMembers(pid).length === 0, 10_000, 'step b to end');
    const db = s.db();
    db.prepare('UPDATE leases SET expires_at = ? WHERE name = ?').run(new Date(Date.now() - 1000).toISOString(), `wfrun:${runId}`);
    db.close();
    const r = s.run(['workflows', 'resume', runId, '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 'succeeded' });
    expect(readFileSync(join(s.dataDir, 'runs', runId, 'c', '1', 'stdout.log'), 'utf8')).toBe('42');
    expect(s.run(['replay', runId]).code).toBe(0);
  });
});

describe('step retries and workflow loops', () => {
  it('a step that fails once is retried after its delay and the run succeeds; each attempt keeps its record', () => {
    const s = sandbox();
    const dir = mkdtempSync(join(tmpdir(), 'loops-wf-'));
    const file = join(dir, 'flaky.yaml');
    writeFileSync(
      file,
      `name: flaky
steps:
  - id: flaky
    run: if [ -e "$MARK" ]; then echo second; else touch "$MARK"; echo first >&2; exit 1; fi
    env: { MARK: "${join(dir, 'mark')}" }
    retries: { limit: 2, delay: 200ms }
  - id: after
    needs: flaky
    run: echo after
`,
    );
    s.run(['workflows', 'create', file]);
    const r = s.run(['workflows', 'run', 'flaky', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const run = JSON.parse(r.stdout) as { id: string; status: string };
    expect(run.status).toBe('succeeded');
    const inspect = s.json<{ steps: Array<{ stepId: string; status: string; attempts: Array<{ attempt: number; status: string; exitCode: number | null }> }> }>(['workflows', 'inspect', run.id]);
    const flaky = inspect.steps.find((x) => x.stepId === 'flaky')!;
    expect(flaky.status).toBe('succeeded');
    expect(flaky.attempts.map((a) => [a.attempt, a.status, a.exitCode])).toEqual([
      [1, 'failed', 1],
      [2, 'succeeded', 0],
    ]);
    expect(readFileSync(join(s.dataDir, 'runs', run.id, 'flaky', '1', 'stderr.log'), 'utf8')).toBe('first\n');
    expect(readFileSync(join(s.dataDir, 'runs', run.id, 'flaky', '2', 'stdout.log'), 'utf8')).toBe('second\n');
  });

  it('loops create workflow: each loop run is one workflow run (slot + attempt → one run); a failed one is retried as a new attempt', () => {
    const s = sandbox();
    const dir = mkdtempSync(join(tmpdir(), 'loops-wf-'));
    const file = join(dir, 'wf.yaml');
    writeFileSync(file, `name: wf\nsteps:\n  - id: only\n    run: if [ -e "${join(dir, 'ok')}" ]; then exit 0; else touch "${join(dir, 'ok')}"; exit 4; fi\n`);
    s.run(['workflows', 'create', file]);
    const missing = s.run(['create', 'workflow', 'nightly', '--workflow', 'nope', '--every', '1h']);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toMatch(/nope/);
    const loop = s.json<{ id: string; target: { kind: string; workflowName: string } }>(['create', 'workflow', 'nightly', '--workflow', 'wf', '--every', '1h', '--tz', 'UTC', '--attempts', '2', '--retry-delay', '1s']);
    expect(loop.target).toMatchObject({ kind: 'workflow', workflowName: 'wf' });
    expect(s.run(['show', 'nightly']).stdout).toContain('workflow    wf (');
    // An hour later a pass fires the slot: its workflow run fails (exit 4), the retry is scheduled.
    const later = new Date(Date.now() + 3_600_000 + 60_000).toISOString();
    const first = s.run(['tick'], { LOOPS_NOW: later });
    expect(first.code).toBe(3);
    const later2 = new Date(Date.now() + 3_600_000 + 120_000).toISOString();
    const second = s.run(['tick'], { LOOPS_NOW: later2 });
    expect(second.code, second.stderr).toBe(0);
    const runs = s.json<Array<{ id: string; slot: string; attempt: number; status: string; trigger: string }>>(['runs', 'nightly']);
    expect(runs.map((r) => [r.attempt, r.status]).sort()).toEqual([
      [1, 'failed'],
      [2, 'succeeded'],
    ]);
    expect(new Set(runs.map((r) => r.slot)).size).toBe(1);
    const wfruns = s.json<Array<{ id: string; status: string; trigger: string; loopId: string; attempt: number; idempotencyKey: string }>>(['workflows', 'runs', 'wf']);
    expect(wfruns.map((r) => [r.attempt, r.status, r.trigger, r.loopId]).sort()).toEqual([
      [1, 'failed', 'schedule', loop.id],
      [2, 'succeeded', 'schedule', loop.id],
    ]);
    for (const r of wfruns) expect(r.idempotencyKey).toBe(`loop:${loop.id}:${runs[0]!.slot}:${r.attempt}`);
    for (const r of runs) expect(s.run(['replay', r.id]).code).toBe(0);
    // show <run> names the workflow run each loop run started.
    const failedRun = runs.find((r) => r.status === 'failed')!;
    const failedWf = wfruns.find((r) => r.status === 'failed')!;
    expect(s.run(['show', failedRun.id]).stdout).toContain(`workflow    wf v1, run ${failedWf.id} failed, 1 step — loops workflows inspect ${failedWf.id}`);
    expect(s.json<{ workflowRunId: string }>(['show', failedRun.id]).workflowRunId).toBe(failedWf.id);
    // run-now of the loop: another workflow run, manual.
    const now = s.run(['run-now', 'nightly', '--json']);
    expect(now.code, now.stderr).toBe(0);
    expect(JSON.parse(now.stdout)).toMatchObject({ status: 'succeeded', trigger: 'manual' });
    // Its summary has no exit code of its own (its steps have theirs).
    expect(s.run(['run-now', 'nightly']).stdout).toMatch(/^run run_\w+ succeeded in \S+\n$/);
    expect(s.json<unknown[]>(['workflows', 'runs', 'wf'])).toHaveLength(4);
  });
});

describe('cancelling a scheduled workflow loop run', () => {
  it('all step processes are gone within the grace period; the loop run is cancelled, not retried', async () => {
    const s = sandbox();
    const dir = mkdtempSync(join(tmpdir(), 'loops-wf-'));
    const file = join(dir, 'three.yaml');
    writeFileSync(file, 'name: three\nsteps:\n  - id: one\n    run: sleep 30\n  - id: two\n    run: sleep 30\n  - id: three\n    needs: [one, two]\n    run: echo never\n');
    s.run(['workflows', 'create', file]);
    s.json(['create', 'workflow', 'three-loop', '--workflow', 'three', '--every', '1h', '--tz', 'UTC', '--attempts', '3', '--retry-delay', '1s']);
    const later = new Date(Date.now() + 3_600_000 + 60_000).toISOString();
    const fg = s.start(['tick'], { LOOPS_NOW: later });
    let wfRunId = '';
    let pids: number[] = [];
    await waitFor(
      () => {
        const runs = s.json<Array<{ id: string }>>(['workflows', 'runs', 'three']);
        if (!runs.length) return false;
        wfRunId = runs[0]!.id;
        const st = s.json<{ steps: Array<{ status: string; pid: number | null }> }>(['workflows', 'inspect', wfRunId]).steps;
        pids = st.flatMap((x) => (x.status === 'running' && x.pid ? [x.pid] : []));
        return pids.length === 2;
      },
      10_000,
      'two running steps',
    );
    const started = Date.now();
    expect(s.run(['workflows', 'cancel', wfRunId]).code).toBe(0);
    const result = await fg.exited;
    expect(result.code, result.stderr).toBe(5);
    for (const pid of pids) await waitFor(() => liveGroupMembers(pid).length === 0, 6000, `step group ${pid} gone`);
    expect(Date.now() - started).toBeLessThan(6000);
    const runs = s.json<Array<{ status: string; attempt: number }>>(['runs', 'three-loop']);
    expect(runs.map((r) => [r.attempt, r.status])).toEqual([[1, 'cancelled']]);
    const db = s.db();
    try {
      expect(db.prepare('SELECT count(*) AS n FROM run_queue').get()).toEqual({ n: 0 });
    } finally {
      db.close();
    }
    // A later pass does not retry it either.
    const again = s.run(['tick'], { LOOPS_NOW: new Date(Date.now() + 3_600_000 + 120_000).toISOString() });
    expect(again.code).toBe(0);
    expect(s.json<unknown[]>(['runs', 'three-loop'])).toHaveLength(1);
  });
});

describe('workflows validate --preflight, and skip reasons in inspect', () => {
  it('--preflight names the step whose executable, directory or agent CLI is missing (exit 1); a runnable spec passes', () => {
    const s = sandbox();
    const dir = mkdtempSync(join(tmpdir(), 'loops-wf-'));
    const bad = join(dir, 'bad.yaml');
    writeFileSync(
      bad,
      'name: pre\nsteps:\n  - id: a\n    command: definitely-not-a-command-xyz\n  - id: b\n    run: echo\n    cwd: ./missing-dir\n  - id: c\n    agent: { provider: gemini, prompt: hi }\n',
    );
    const r = s.run(['workflows', 'validate', bad, '--preflight'], { PATH: '/usr/bin:/bin' });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/step "a": command: command not found: definitely-not-a-command-xyz \(searched PATH=\/usr\/bin:\/bin[^)]*\)/);
    expect(r.stderr).toContain(`step "b": cwd: working directory ${join(dir, 'missing-dir')} does not exist`);
    expect(r.stderr).toContain('step "c": agent.provider: the gemini CLI (gemini) is not installed');
    // Without --preflight the same file is valid.
    expect(s.run(['workflows', 'validate', bad]).code).toBe(0);
    const good = join(dir, 'good.yaml');
    writeFileSync(good, 'name: good\nsteps:\n  - id: a\n    command: "true"\n  - id: b\n    run: echo\n    cwd: .\n');
    const ok = s.run(['workflows', 'validate', good, '--preflight']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toBe('ok: good, 2 steps (native format); every step can start here\n');
  });

  it('while another branch still runs, a step whose need failed is already skipped with its reason in inspect (the skip is recorded)', async () => {
    const s = sandbox();
    const dir = mkdtempSync(join(tmpdir(), 'loops-wf-'));
    const go = join(dir, 'go');
    const file = join(dir, 'live.yaml');
    writeFileSync(
      file,
      `name: live
steps:
  - id: fail
    run: exit 1
  - id: after-fail
    needs: fail
    run: echo never
  - id: long
    run: "while [ ! -e ${go} ]; do sleep 0.05; done"
`,
    );
    s.run(['workflows', 'create', file]);
    const fg = s.start(['workflows', 'run', 'live']);
    onTestFinished(() => {
      writeFileSync(go, '');
      fg.child.kill();
    });
    type View = { status: string; steps: Array<{ stepId: string; status: string; skipReason?: string | null }> };
    let runId = '';
    let view: View | null = null;
    await waitFor(
      () => {
        runId ||= s.json<Array<{ id: string }>>(['workflows', 'runs', 'live'])[0]?.id ?? '';
        if (!runId) return false;
        view = s.json<View>(['workflows', 'inspect', runId]);
        const by = Object.fromEntries(view.steps.map((x) => [x.stepId, x.status]));
        return by['after-fail'] === 'skipped' && by.long === 'running';
      },
      10_000,
      'after-fail skipped while long runs',
    );
    expect(view!.status).toBe('running');
    expect(view!.steps.map((x) => [x.stepId, x.status, x.skipReason ?? null])).toEqual([
      ['fail', 'failed', null],
      ['after-fail', 'skipped', 'needs fail which failed'],
      ['long', 'running', null],
    ]);
    expect(s.run(['workflows', 'inspect', runId]).stdout).toMatch(/after-fail\s+skipped.*needs fail which failed/);

    writeFileSync(go, '');
    const result = await fg.exited;
    expect(result.code, result.stderr).toBe(3);
    expect(s.json<View>(['workflows', 'inspect', runId]).steps.map((x) => [x.stepId, x.status, x.skipReason ?? null])).toEqual([
      ['fail', 'failed', null],
      ['after-fail', 'skipped', 'needs fail which failed'],
      ['long', 'succeeded', null],
    ]);
    expect(s.run(['replay', runId]).code).toBe(0);
    expectDataDirInvariants(s.dataDir);
  });

  it('inspect shows why each skipped step was skipped, as recorded', () => {
    const s = sandbox();
    const dir = mkdtempSync(join(tmpdir(), 'loops-wf-'));
    const file = join(dir, 'skip.yaml');
    writeFileSync(file, 'name: skip\nsteps:\n  - id: a\n    run: exit 1\n  - id: b\n    needs: a\n    run: echo b\n  - id: c\n    run: echo c\n    if: inputs.go == \'yes\'\ninputs:\n  go: "no"\n');
    s.run(['workflows', 'create', file]);
    const r = s.run(['workflows', 'run', 'skip', '--json']);
    expect(r.code).toBe(3);
    const id = (JSON.parse(r.stdout) as { id: string }).id;
    const view = s.json<{ steps: Array<{ stepId: string; status: string; skipReason?: string | null }> }>(['workflows', 'inspect', id]);
    expect(view.steps.map((x) => [x.stepId, x.status, x.skipReason ?? null])).toEqual([
      ['a', 'failed', null],
      ['b', 'skipped', 'needs a which failed'],
      ['c', 'skipped', "if: inputs.go == 'yes' was false"],
    ]);
    expect(s.run(['workflows', 'inspect', id]).stdout).toContain('needs a which failed');
  });
});
