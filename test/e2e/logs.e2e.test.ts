/**
 * `loops logs` through the built binary: a run's two streams, raw bytes, --tail, a rotated file
 * (its head, what was dropped, following across the rotation), -f on a running run until its
 * outcome, secrets masked while a run goes, workflow runs and steps, agent transcripts rendered,
 * and the errors.
 */
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/wait.js';
import { FIXTURES, Sandbox, useSandboxes } from './cli-helpers.js';

const sandbox = useSandboxes();
const children: Array<{ kill(signal?: NodeJS.Signals): boolean; exitCode: number | null }> = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
});

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'loops-logs-'));
}

interface Run {
  id: string;
  status: string;
  pid: number | null;
}

const runs = (s: Sandbox, loop: string, env: Record<string, string> = {}) => s.json<Run[]>(['runs', loop], env);

/** Waits (polling the tables: another process's state) until the loop's latest run is running with a pid. */
async function runningRun(s: Sandbox, loop: string, env: Record<string, string> = {}): Promise<Run> {
  let run: Run | undefined;
  await waitFor(
    () => {
      run = runs(s, loop, env)[0];
      return run !== undefined && run.status === 'running' && run.pid !== null;
    },
    10_000,
    `a running run of ${loop}`,
  );
  return run!;
}

function start(s: Sandbox, args: string[], env: Record<string, string> = {}) {
  const p = s.start(args, env);
  children.push(p.child);
  return p;
}

describe('loops logs: a finished run', () => {
  const s = sandbox();
  // Both streams, a UTF-8 character, and stdout ending without a newline.
  s.json(['create', 'command', 'both', '--cmd', "printf 'one\\ntwo\\nthree é\\nno-newline'; printf 'err1\\nerr2\\n' >&2", '--manual']);
  const ran = s.run(['run-now', 'both']);
  const runId = runs(s, 'both')[0]!.id;

  it('the loop ran', () => {
    expect(ran.code, ran.stderr).toBe(0);
  });

  it('a loop name means its latest run: stdout then stderr, each under a header', () => {
    const r = s.run(['logs', 'both']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('── stdout ──\none\ntwo\nthree é\nno-newline\n── stderr ──\nerr1\nerr2\n');
    expect(r.stderr).toBe('');
  });

  it('--stdout / --stderr print one stream raw: the exact bytes, no header', () => {
    const out = s.run(['logs', runId, '--stdout']);
    expect(out.code).toBe(0);
    expect(out.stdout).toBe('one\ntwo\nthree é\nno-newline');
    expect(Buffer.from(out.stdout)).toEqual(readFileSync(join(s.dataDir, 'runs', runId, 'stdout.log')));
    expect(s.run(['logs', runId, '--stderr']).stdout).toBe('err1\nerr2\n');
  });

  it('a unique prefix of the run id works; -n keeps the last lines of each stream', () => {
    const r = s.run(['logs', runId.slice(0, runId.length - 4), '-n', '2']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('── stdout ──\nthree é\nno-newline\n── stderr ──\nerr2\n'.replace('err2', 'err1\nerr2'));
    expect(s.run(['logs', runId, '--stdout', '--tail', '1']).stdout).toBe('no-newline');
    expect(s.run(['logs', runId, '--stderr', '--tail', '1']).stdout).toBe('err2\n');
    expect(s.run(['logs', runId, '--stderr', '-n', '0']).stdout).toBe('');
    expect(s.run(['logs', runId, '--stderr', '-n', '50']).stdout).toBe('err1\nerr2\n');
  });

  it('--json: an object per stream with its files, bytes, rotation and text', () => {
    const j = s.json<any>(['logs', runId]);
    expect(j).toMatchObject({ runId, loopName: 'both', status: 'succeeded', provider: null });
    expect(j.stdout).toEqual({
      path: join(s.dataDir, 'runs', runId, 'stdout.log'),
      files: [join(s.dataDir, 'runs', runId, 'stdout.log')],
      head: null,
      bytes: 27,
      totalBytes: 27,
      rotated: false,
      droppedBytes: 0,
      text: 'one\ntwo\nthree é\nno-newline',
    });
    expect(j.stderr.text).toBe('err1\nerr2\n');
    expect(s.json<any>(['logs', runId, '--stderr', '-n', '1'])).not.toHaveProperty('stdout');
  });

  it('-f on a run that already ended prints it and exits with its outcome', () => {
    const r = s.run(['logs', 'both', '-f', '--stderr']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('err1\nerr2\n');
  });

  it('bad input: one line with a hint, exit 2', () => {
    const cases: Array<[string[], RegExp]> = [
      [['logs', 'run_nope'], /^loops: no run, workflow run or loop "run_nope"; .*loops runs lists recent runs/],
      [['logs', 'bot'], /^loops: no run, workflow run or loop "bot"; did you mean both\? loops runs lists recent runs/],
      [['logs', 'both', '-f', '--json'], /^loops logs: --json cannot be used with --follow; /],
      [['logs', 'both', '--step', 'build'], /^loops logs: --step is for workflow runs; run_\S+ is a run of the command loop both; /],
      [['logs', 'both', '--attempt', '2'], /^loops logs: --attempt needs --step; /],
      [['logs', 'both', '-n', 'x'], /^loops logs: --tail must be a whole number of lines, got "x"; /],
      [['logs', 'both', '--pretty', '--raw'], /^loops logs: --pretty and --raw do not go together; /],
      [['logs', 'both', '--head', '-f'], /^loops logs: --head cannot be used with --follow; /],
      [['logs'], /^loops logs: missing <run>; /],
    ];
    for (const [args, message] of cases) {
      const r = s.run(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(message);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
    }
  });
});

describe('loops logs: runs without output', () => {
  it('a run that never started says so (exit 0; with -f its outcome, 3); one that printed nothing says that', () => {
    const s = sandbox();
    s.json(['create', 'command', 'nostart', '--cmd', 'echo hi', '--secret-env', 'LOOPS_TEST_UNSET_SECRET', '--manual']);
    expect(s.run(['run-now', 'nostart']).code).toBe(3);
    const r = s.run(['logs', 'nostart']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^loops: run run_\S+ has no output: it never started \(secret variable LOOPS_TEST_UNSET_SECRET not set/);
    const f = s.run(['logs', 'nostart', '-f']);
    expect(f.code).toBe(3);
    expect(f.stderr).toMatch(/it never started/);

    s.json(['create', 'command', 'silent', '--cmd', 'true', '--manual']);
    expect(s.run(['run-now', 'silent']).code).toBe(0);
    const quiet = s.run(['logs', 'silent', '--stderr']);
    expect(quiet).toMatchObject({ code: 0, stdout: '' });
    expect(quiet.stderr).toMatch(/^loops: run run_\S+ printed nothing on stderr\n$/);
    expect(s.run(['logs', 'never-ran-loop']).code).toBe(2);
    s.json(['create', 'command', 'fresh', '--cmd', 'true', '--manual']);
    const fresh = s.run(['logs', 'fresh']);
    expect(fresh.code).toBe(2);
    expect(fresh.stderr).toBe('loops: loop fresh has no runs yet; loops run-now fresh runs it\n');
  });
});

describe('loops logs -f: following a running run', () => {
  it('prints the lines already written, then the ones that come, and exits with the run outcome (3)', async () => {
    const s = sandbox();
    const dir = tempDir();
    // Each write waits for a file the test makes once the follower printed the one before: the two
    // streams are two files read one after the other, so writes to both a few µs apart have no
    // order a follower could know (it may read stderr's newer line before stdout's older one).
    const gate = (name: string) => `while [ ! -e '${join(dir, name)}' ]; do sleep 0.02; done`;
    const open = (name: string) => writeFileSync(join(dir, name), '');
    s.json([
      'create', 'command', 'slow', '--manual',
      '--cmd', `echo one; echo err-one >&2; ${gate('go1')}; echo two; ${gate('go2')}; echo err-two >&2; ${gate('go3')}; printf 'last'; exit 3`,
    ]);
    const runner = start(s, ['run-now', 'slow']);
    const run = await runningRun(s, 'slow');
    const stdoutFile = join(s.dataDir, 'runs', run.id, 'stdout.log');
    await waitFor(() => existsSync(stdoutFile) && readFileSync(stdoutFile, 'utf8').includes('one'), 10_000, 'the first line in the file');

    const follow = start(s, ['logs', 'slow', '-f']);
    await follow.waitForOutput(/err-one\n/);
    const stdoutOnly = start(s, ['logs', run.id, '-f', '--stdout']);
    await stdoutOnly.waitForOutput(/one\n/);
    open('go1');
    await follow.waitForOutput(/\ntwo\n/);
    open('go2');
    await follow.waitForOutput(/err-two\n/);
    open('go3');
    const [result, raw, ran] = await Promise.all([follow.exited, stdoutOnly.exited, runner.exited]);
    expect(ran.code).toBe(3);
    expect(result.code, result.stderr).toBe(3);
    expect(result.stderr).toBe('');
    // Both streams: a header wherever the output moves to the other one.
    expect(result.stdout).toBe('── stdout ──\none\n── stderr ──\nerr-one\n── stdout ──\ntwo\n── stderr ──\nerr-two\n── stdout ──\nlast');
    expect(raw.code).toBe(3);
    expect(raw.stdout).toBe('one\ntwo\nlast');
  });

  it('masks the run\'s secret values while it runs (the file still holds them until it ends)', async () => {
    const s = sandbox();
    const dir = tempDir();
    const go = join(dir, 'go');
    const env = { LOOPS_TEST_SECRET: 'sk-test-4f9a1c77e2' };
    s.json(['create', 'command', 'secret', '--manual', '--secret-env', 'LOOPS_TEST_SECRET',
      '--cmd', `echo "key=$LOOPS_TEST_SECRET"; while [ ! -e '${go}' ]; do sleep 0.02; done; echo "again $LOOPS_TEST_SECRET"`], env);
    const runner = start(s, ['run-now', 'secret'], env);
    const run = await runningRun(s, 'secret', env);
    const file = join(s.dataDir, 'runs', run.id, 'stdout.log');
    await waitFor(() => existsSync(file) && readFileSync(file, 'utf8').includes('key='), 10_000, 'the first line in the file');
    expect(readFileSync(file, 'utf8')).toContain(env.LOOPS_TEST_SECRET);
    const now = s.run(['logs', 'secret', '--stdout'], env);
    expect(now.stdout).toBe('key=***\n');
    const follow = start(s, ['logs', 'secret', '-f', '--stdout'], env);
    await follow.waitForOutput(/key=\*\*\*\n/);
    writeFileSync(go, '');
    const [result] = await Promise.all([follow.exited, runner.exited]);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('key=***\nagain ***\n');
    expect(s.run(['logs', 'secret', '--stdout'], env).stdout).toBe('key=***\nagain ***\n');
  });
});

describe('loops logs: output past the size cap', () => {
  it('follows across the rotation without a gap; afterwards --tail, --head and --json tell what was dropped', async () => {
    const s = sandbox();
    const dir = tempDir();
    const go = join(dir, 'go');
    // ~20 MB of numbered lines (the cap is 16 MiB): the first ~1 MB, then the rest once `go` exists,
    // ~0.5 MB every 50 ms (a follower polling every 200 ms stays well within the 16 MiB kept in .1).
    const writer = join(dir, 'writer.mjs');
    writeFileSync(
      writer,
      `import { existsSync, writeSync } from 'node:fs';
const pad = 'x'.repeat(40);
const block = (from, n) => { let t = ''; for (let i = from; i < from + n; i++) t += 'line ' + String(i).padStart(7, '0') + ' ' + pad + '\\n'; return t; };
writeSync(1, block(0, 20000));
const wait = () => existsSync(${JSON.stringify(go)}) ? rest(20000) : setTimeout(wait, 20);
const rest = (from) => {
  if (from >= 380000) { writeSync(1, '<END>\\n'); return; }
  writeSync(1, block(from, 10000));
  setTimeout(() => rest(from + 10000), 50);
};
wait();
`,
    );
    s.json(['create', 'command', 'big', '--manual', '--no-shell', '--cmd', process.execPath, '--arg', writer]);
    const runner = start(s, ['run-now', 'big']);
    const run = await runningRun(s, 'big');
    const file = join(s.dataDir, 'runs', run.id, 'stdout.log');
    await waitFor(() => existsSync(file) && statSync(file).size > 0, 10_000, 'output in the file');
    const follow = start(s, ['logs', 'big', '-f', '--stdout']);
    await follow.waitForOutput(/^line 0000000 /);
    writeFileSync(go, '');
    const [followed, ran] = await Promise.all([follow.exited, runner.exited]);
    expect(ran.code).toBe(0);
    expect(followed.code, followed.stderr).toBe(0);
    expect(followed.stderr).toBe('');
    const lines = followed.stdout.split('\n');
    expect(lines.at(-1)).toBe('');
    expect(lines.at(-2)).toBe('<END>');
    // The numbered lines printed whole, wherever they start: when the rotation drops bytes mid-line
    // (under load the runner's chase past the cap stops at its bound, output.ts, inside a burst), .1
    // ends with part of a line and the file's first line is printed right after it, on the same line.
    // That seam is the one line printed that is not a whole numbered line.
    const whole = /^line \d{7} x{40}$/;
    const seams = lines.slice(0, -2).filter((l) => !whole.test(l));
    expect(seams.length, seams.join('\n')).toBeLessThanOrEqual(1);
    for (const seam of seams) {
      const cut = seam.slice(0, seam.length - 53);
      expect(whole.test(seam.slice(cut.length)) && `line 0000000 ${'x'.repeat(40)}`.startsWith(cut.replace(/\d/g, '0')), seam).toBe(true);
    }
    const numbers = [...followed.stdout.matchAll(/line (\d{7}) x{40}\n/g)].map((m) => Number(m[1]));
    expect(numbers[0]).toBe(0);
    const disorder = numbers.findIndex((n, i) => i > 0 && n <= numbers[i - 1]!);
    expect(disorder, `line ${numbers[disorder]} printed after line ${numbers[disorder - 1]}`).toBe(-1);
    // Every line any file holds was printed, in order. The runner's copytruncate loses what the
    // process writes while it copies 16 MiB to .1 (output.ts): those lines are in no file, and the
    // only lines the follower may miss.
    const printed = new Set(numbers);
    const inFiles = [`${file}.head`, `${file}.1`, file]
      .flatMap((f) => readFileSync(f, 'utf8').split('\n'))
      .filter((l) => l.startsWith('line ') && l.length === 53)
      .map((l) => Number(l.slice(5, 12)));
    expect(inFiles.length).toBeGreaterThan(300_000);
    expect(inFiles.filter((n) => !printed.has(n)).slice(0, 20)).toEqual([]);

    // The files now: the head, the last 16 MiB in .1, the rest dropped.
    expect(existsSync(`${file}.1`)).toBe(true);
    expect(existsSync(`${file}.head`)).toBe(true);
    const tail = s.run(['logs', 'big', '--stdout', '-n', '2']);
    expect(tail.code).toBe(0);
    expect(tail.stdout).toBe(`line 0379999 ${'x'.repeat(40)}\n<END>\n`);
    expect(tail.stderr).toMatch(/^loops: stdout was rotated at the size cap: [\d,]+ bytes of earlier output were dropped; the first 65,\d{3} bytes are kept: loops logs big --head\n$/);
    const head = s.run(['logs', 'big', '--stdout', '--head']);
    expect(head.stdout.startsWith(`line 0000000 ${'x'.repeat(40)}\nline 0000001 `)).toBe(true);
    expect(head.stdout.endsWith('\n')).toBe(true);
    expect(Buffer.byteLength(head.stdout)).toBeLessThanOrEqual(64 * 1024);
    expect(head.stderr).toBe('');
    const j = s.json<any>(['logs', 'big', '--stdout', '-n', '1']);
    expect(j.stdout).toMatchObject({ rotated: true, head: `${file}.head`, files: [`${file}.1`, file], text: '<END>\n' });
    // .1 holds the last 16 MiB at the rotation, plus what the process wrote while they were copied.
    expect(statSync(`${file}.1`).size).toBeGreaterThanOrEqual(16 * 1024 * 1024);
    expect(j.stdout.bytes).toBe(statSync(`${file}.1`).size + statSync(file).size);
    // What the runner read: every byte written, but those lost in its copytruncate window.
    expect(j.stdout.totalBytes).toBeLessThanOrEqual(380000 * 54 + 6);
    expect(j.stdout.totalBytes).toBeGreaterThan(j.stdout.bytes);
    expect(j.stdout.droppedBytes).toBe(j.stdout.totalBytes - j.stdout.bytes);
  });
});

describe('loops logs: workflow runs', () => {
  it('prints every step attempt in step order under a header; --step one step (its last attempt, or --attempt N)', () => {
    const s = sandbox();
    const dir = tempDir();
    const file = join(dir, 'wf.yaml');
    writeFileSync(
      file,
      `name: wf
steps:
  - id: build
    run: echo building; echo warning >&2
  - id: test
    needs: build
    run: 'if [ "$LOOPS_ATTEMPT" = 1 ]; then echo first try; exit 1; fi; echo second try'
    retries: { limit: 1, delay: 200ms }
  - id: quiet
    needs: build
    run: 'true'
`,
    );
    expect(s.run(['workflows', 'create', file]).code).toBe(0);
    expect(s.run(['workflows', 'run', 'wf']).code).toBe(0);
    const wfRunId = s.json<Array<{ id: string }>>(['workflows', 'runs', 'wf'])[0]!.id;

    const all = s.run(['logs', wfRunId]);
    expect(all.code, all.stderr).toBe(0);
    expect(all.stdout).toBe(
      [
        '── build (attempt 1) ──',
        'building',
        '── build (attempt 1) · stderr ──',
        'warning',
        '── test (attempt 1) ──',
        'first try',
        '── test (attempt 2) ──',
        'second try',
        '── quiet (attempt 1) ──',
        '',
      ].join('\n'),
    );
    expect(s.run(['logs', wfRunId, '--step', 'test']).stdout).toBe('second try\n');
    expect(s.run(['logs', wfRunId, '--step', 'test', '--attempt', '1', '--stdout']).stdout).toBe('first try\n');
    expect(s.run(['logs', wfRunId, '--step', 'build']).stdout).toBe('── build (attempt 1) ──\nbuilding\n── build (attempt 1) · stderr ──\nwarning\n');
    const j = s.json<any>(['logs', wfRunId, '--step', 'test', '--attempt', '1']);
    expect(j).toMatchObject({ wfRunId, workflowName: 'wf', status: 'succeeded' });
    expect(j.steps).toHaveLength(1);
    expect(j.steps[0]).toMatchObject({ stepId: 'test', attempt: 1, status: 'failed', stdout: { text: 'first try\n' } });
    expect(j.steps[0].stdout.path).toBe(join(s.dataDir, 'runs', wfRunId, 'test', '1', 'stdout.log'));

    const noStep = s.run(['logs', wfRunId, '--step', 'deploy']);
    expect(noStep.code).toBe(2);
    expect(noStep.stderr).toBe(`loops: workflow run ${wfRunId} has no step "deploy"; its steps: build, test, quiet\n`);
    const noAttempt = s.run(['logs', wfRunId, '--step', 'test', '--attempt', '3']);
    expect(noAttempt.code).toBe(2);
    expect(noAttempt.stderr).toBe(`loops: step test of workflow run ${wfRunId} has no attempt 3; it has attempts 1, 2\n`);

    // A workflow loop's run is its workflow run.
    s.json(['create', 'workflow', 'nightly', '--workflow', 'wf', '--manual']);
    expect(s.run(['run-now', 'nightly']).code).toBe(0);
    expect(s.run(['logs', 'nightly', '--step', 'build', '--stdout']).stdout).toBe('building\n');
    expect(s.json<any>(['logs', 'nightly']).runId).toBe(runs(s, 'nightly')[0]!.id);
  });

  it('-f follows each step as it starts and exits with the workflow run\'s outcome', async () => {
    const s = sandbox();
    const dir = tempDir();
    const go = join(dir, 'go');
    const file = join(dir, 'wf.yaml');
    writeFileSync(
      file,
      `name: gated
steps:
  - id: first
    run: echo first-started; while [ ! -e '${go}' ]; do sleep 0.02; done; echo first-done
  - id: second
    needs: first
    run: echo second-ran; echo second-complains >&2; exit 4
`,
    );
    expect(s.run(['workflows', 'create', file]).code).toBe(0);
    const runner = start(s, ['workflows', 'run', 'gated']);
    let wfRunId = '';
    await waitFor(
      () => {
        const list = s.json<Array<{ id: string }>>(['workflows', 'runs', 'gated']);
        wfRunId = list[0]?.id ?? '';
        return wfRunId !== '';
      },
      10_000,
      'the workflow run',
    );
    const follow = start(s, ['logs', wfRunId, '-f']);
    await follow.waitForOutput(/first-started\n/);
    writeFileSync(go, '');
    const [result, ran] = await Promise.all([follow.exited, runner.exited]);
    expect(ran.code).toBe(3);
    expect(result.code, result.stderr).toBe(3);
    expect(result.stdout).toBe(
      '── first (attempt 1) ──\nfirst-started\nfirst-done\n── second (attempt 1) ──\nsecond-ran\n── second (attempt 1) · stderr ──\nsecond-complains\n',
    );
  });
});

describe('loops logs: agent runs', () => {
  const FAKES = join(FIXTURES, 'agents');
  const env = { PATH: `${FAKES}${delimiter}${process.env.PATH ?? ''}` };

  it.each(['claude', 'codex', 'cursor', 'opencode', 'gemini'])('%s: --pretty renders the JSONL transcript; piped output is raw by default', (provider) => {
    const s = sandbox();
    expect(s.run(['create', 'agent', 'bot', '--provider', provider, '--prompt', 'fix the tests', '--manual'], env).code).toBe(0);
    expect(s.run(['run-now', 'bot'], env).code).toBe(0);
    const runId = runs(s, 'bot')[0]!.id;
    const transcript = readFileSync(join(s.dataDir, 'runs', runId, 'stdout.log'), 'utf8');

    const pretty = s.run(['logs', 'bot', '--pretty', '--stdout'], env);
    expect(pretty.code, pretty.stderr).toBe(0);
    const lines = pretty.stdout.trimEnd().split('\n');
    expect(lines).toContain('All 42 tests pass; nothing to fix.');
    expect(lines.some((l) => /^▸ \S+: npm test$/.test(l))).toBe(true);
    expect(lines.some((l) => /^ {2}↳ \S/.test(l))).toBe(true);
    expect(lines.at(-1)).toMatch(/^✓ done · .*tokens [\d,]+ in/);
    for (const l of lines) expect(l.startsWith('{')).toBe(false);
    // Piped: the bytes; --raw forces them.
    expect(s.run(['logs', 'bot', '--stdout'], env).stdout).toBe(transcript);
    expect(s.run(['logs', 'bot', '--stdout', '--raw'], env).stdout).toBe(transcript);
    expect(s.json<any>(['logs', 'bot'], env)).toMatchObject({ provider, stdout: { text: transcript } });
  });

  it('an agent step of a workflow is rendered too, a command step is not', () => {
    const s = sandbox();
    const dir = tempDir();
    const file = join(dir, 'wf.yaml');
    writeFileSync(file, `name: agentic\nsteps:\n  - id: prep\n    run: echo '{"not":"an agent"}'\n  - id: fix\n    needs: prep\n    agent: { provider: claude, prompt: fix it }\n`);
    expect(s.run(['workflows', 'create', file], env).code).toBe(0);
    expect(s.run(['workflows', 'run', 'agentic'], env).code).toBe(0);
    const wfRunId = s.json<Array<{ id: string }>>(['workflows', 'runs', 'agentic'])[0]!.id;
    const r = s.run(['logs', wfRunId, '--pretty', '--stdout'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^── prep \(attempt 1\) ──\n\{"not":"an agent"\}\n── fix \(attempt 1\) ──\n● model claude-sonnet-4-5-20250929 · session /);
    expect(r.stdout).toContain('\n▸ bash: npm test\n');
    expect(r.stdout).toMatch(/✓ done · 3 turns · 14\.5s · tokens 9 in \(18,230 cached\) \/ 342 out · \$0\.0421\n$/);
  });
});
