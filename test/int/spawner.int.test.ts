/**
 * The spawner helper (src/runtime/execution/spawner.ts, spawner-process.ts): a small process that forks runs
 * for a busy runner. Real helper, real children; the helper script comes from the build (`npm test`
 * builds first).
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { systemClock } from '../../src/runtime/clock.js';
import { deadlineAfter, findRunProcess, SpawnFailedError, spawnProcess, type SpawnSpec } from '../../src/runtime/execution/executor.js';
import { processGroup, processStartTime } from '../../src/runtime/execution/process-info.js';
import { Spawner, SpawnerError } from '../../src/runtime/execution/spawner.js';
import { fixture } from '../helpers/fixtures.js';
import { isAlive, killGroupIfAlive, liveGroupMembers, waitForGroupGone } from '../helpers/proc.js';
import { tempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';

function useSpawner(): Spawner {
  const spawner = new Spawner();
  onTestFinished(() => spawner.close());
  return spawner;
}

/** A spec whose output goes to files under the exit-status wrapper: what runs and steps use. */
function fileSpec(dir: string, spec: Partial<SpawnSpec> & { command: string }): SpawnSpec {
  return {
    args: [],
    shell: true,
    cwd: null,
    env: {},
    deadline: deadlineAfter(Date.now(), 10_000),
    killGraceMs: 500,
    stdoutFile: join(dir, 'stdout.log'),
    stderrFile: join(dir, 'stderr.log'),
    statusFile: join(dir, 'exit-status'),
    ...spec,
  };
}

async function start(spawner: Spawner, spec: SpawnSpec) {
  const handle = await spawnProcess(spec, systemClock, spawner);
  onTestFinished(() => killGroupIfAlive(handle.pgid));
  return handle;
}

describe('Spawner: the helper process', () => {
  it('starts a process as the leader of its own group, with its pid and start time, output in the files, and reports its exit', async () => {
    const dir = tempDir();
    const spawner = useSpawner();
    const out = join(dir, 'out');
    const err = join(dir, 'err');
    const spawned = await spawner.spawn({ file: '/bin/sh', args: ['-c', 'echo hi; echo oops >&2; sleep 0.2; exit 3'], cwd: dir, env: { PATH: process.env.PATH! }, stdout: out, stderr: err });
    expect(spawned.pid).toBeGreaterThan(0);
    expect(spawned.pid).not.toBe(spawner.pid);
    expect(spawned.startTime).toBe(processStartTime(spawned.pid));
    expect(processGroup(spawned.pid)).toBe(spawned.pid);
    expect(await spawned.exit).toEqual({ code: 3, signal: null, lost: false });
    expect(readFileSync(out, 'utf8')).toBe('hi\n');
    expect(readFileSync(err, 'utf8')).toBe('oops\n');
  });

  it('the environment: the runner\'s (as the helper inherited it), minus `unset`, plus `env`', async () => {
    const dir = tempDir();
    const spawner = useSpawner();
    const out = join(dir, 'out');
    const spawned = await spawner.spawn({ file: '/usr/bin/env', args: [], cwd: null, env: { ONLY: 'this', HOME: '/elsewhere' }, unset: ['PATH'], stdout: out, stderr: out });
    expect(await spawned.exit).toMatchObject({ code: 0 });
    const vars = new Map(readFileSync(out, 'utf8').trim().split('\n').map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
    expect(vars.get('ONLY')).toBe('this');
    expect(vars.get('HOME')).toBe('/elsewhere');
    expect(vars.has('PATH')).toBe(false);
    const inherited = Object.keys(process.env).filter((k) => k !== 'PATH' && k !== 'HOME');
    expect(inherited.length).toBeGreaterThan(0);
    for (const k of inherited) expect(vars.get(k), k).toBe(process.env[k]);
  });

  it('follows the runner\'s environment as it changes after the helper started: set, changed, removed', async () => {
    const dir = tempDir();
    process.env.LOOPS_SPAWNER_TEST_A = 'before';
    process.env.LOOPS_SPAWNER_TEST_B = 'before';
    onTestFinished(() => {
      delete process.env.LOOPS_SPAWNER_TEST_A;
      delete process.env.LOOPS_SPAWNER_TEST_B;
      delete process.env.LOOPS_SPAWNER_TEST_C;
    });
    const spawner = useSpawner();
    await spawner.ready();
    process.env.LOOPS_SPAWNER_TEST_A = 'after';
    delete process.env.LOOPS_SPAWNER_TEST_B;
    process.env.LOOPS_SPAWNER_TEST_C = 'new';
    const out = join(dir, 'out');
    const script = 'echo "$LOOPS_SPAWNER_TEST_A ${LOOPS_SPAWNER_TEST_B:-gone} $LOOPS_SPAWNER_TEST_C ${LOOPS_SPAWNER_TEST_D:-unset}"';
    const spawned = await spawner.spawn({ file: '/bin/sh', args: ['-c', script], cwd: null, env: {}, unset: ['LOOPS_SPAWNER_TEST_C'], stdout: out, stderr: out });
    expect(await spawned.exit).toMatchObject({ code: 0 });
    // C was set in the runner but the request unsets it: the request wins.
    expect(readFileSync(out, 'utf8')).toBe('after gone  unset\n');
  });

  it('`check`: a command not on PATH or a missing cwd is refused before any fork', async () => {
    const dir = tempDir();
    const spawner = useSpawner();
    const marker = join(dir, 'ran');
    const req = { file: '/bin/sh', args: ['-c', `touch ${marker}`], env: { PATH: '/usr/bin:/bin' }, stdout: join(dir, 'o'), stderr: join(dir, 'o') };
    await expect(spawner.spawn({ ...req, cwd: null, check: 'no-such-program-9f2' })).rejects.toMatchObject({ code: 'ENOENT', message: 'command not found: no-such-program-9f2' });
    await expect(spawner.spawn({ ...req, cwd: join(dir, 'gone'), check: 'true' })).rejects.toMatchObject({ code: 'ENOENT', message: `working directory ${join(dir, 'gone')} does not exist` });
    expect(existsSync(marker)).toBe(false);
    const ok = await spawner.spawn({ ...req, cwd: dir, check: 'true' });
    expect(await ok.exit).toMatchObject({ code: 0 });
    expect(existsSync(marker)).toBe(true);
  });

  it('`check` remembers what it found for a second, never what it did not: a program removed since fails the spawn as missing, one installed since is found at once', async () => {
    const dir = tempDir();
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    const prog = join(bin, 'loops-test-prog');
    const spawner = useSpawner();
    const req = { args: [], cwd: null, env: { PATH: `${bin}:/usr/bin:/bin` }, stdout: join(dir, 'o'), stderr: join(dir, 'o'), check: 'loops-test-prog' };
    // Not there: refused, and the next lookup looks again.
    await expect(spawner.spawn({ ...req, file: 'loops-test-prog' })).rejects.toMatchObject({ code: 'ENOENT', message: 'command not found: loops-test-prog' });
    // A binary (a copy of false), not a script: once exec'd it needs its file no more.
    copyFileSync('/bin/false', prog);
    chmodSync(prog, 0o755);
    const ok = await spawner.spawn({ ...req, stdout: join(dir, 'ok'), stderr: join(dir, 'ok'), file: 'loops-test-prog' });
    // Found a moment ago (milliseconds: the second is far off), removed since: the fork itself
    // fails with ENOENT — not started, as a lookup would have said, and no output file left behind.
    rmSync(prog);
    const error = await spawner.spawn({ ...req, file: 'loops-test-prog' }).then(() => null, (e: unknown) => e);
    expect(error).toMatchObject({ name: 'SpawnerError', code: 'ENOENT' });
    expect((error as Error).message).not.toBe('command not found: loops-test-prog'); // the fork's, not the lookup's
    expect(existsSync(join(dir, 'o'))).toBe(false);
    expect(await ok.exit).toMatchObject({ code: 1 });
  });

  it('a missing program or working directory is a SpawnerError with the OS code; the helper goes on', async () => {
    const dir = tempDir();
    const spawner = useSpawner();
    const req = { args: [], env: {}, stdout: join(dir, 'o'), stderr: join(dir, 'e') };
    await expect(spawner.spawn({ ...req, file: join(dir, 'nope'), cwd: null })).rejects.toMatchObject({ name: 'SpawnerError', code: 'ENOENT' });
    await expect(spawner.spawn({ ...req, file: '/bin/true', cwd: join(dir, 'gone') })).rejects.toBeInstanceOf(SpawnerError);
    const ok = await spawner.spawn({ ...req, file: '/bin/true', cwd: null });
    expect(await ok.exit).toMatchObject({ code: 0 });
  });

  it('a fork that fails leaves no files it created; files that were there stay', async () => {
    const dir = tempDir();
    const spawner = useSpawner();
    const notExecutable = join(dir, 'script.sh');
    writeFileSync(notExecutable, 'echo hi\n', { mode: 0o644 });
    const fresh = join(dir, 'sub', 'out');
    await expect(spawner.spawn({ file: notExecutable, args: [], cwd: null, env: {}, dirs: [join(dir, 'sub')], stdout: fresh, stderr: fresh })).rejects.toMatchObject({ code: 'EACCES' });
    expect(existsSync(fresh)).toBe(false);
    const kept = join(dir, 'kept');
    writeFileSync(kept, 'earlier\n');
    await expect(spawner.spawn({ file: notExecutable, args: [], cwd: null, env: {}, stdout: kept, stderr: kept })).rejects.toMatchObject({ code: 'EACCES' });
    expect(readFileSync(kept, 'utf8')).toBe('earlier\n');
  });

  it('runs in a session of its own and ignores the signals that stop a runner', async () => {
    const dir = tempDir();
    const spawner = useSpawner();
    await spawner.ready();
    const helper = spawner.pid!;
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.kill(helper, signal);
    const spawned = await spawner.spawn({ file: '/bin/true', args: [], cwd: null, env: {}, stdout: join(dir, 'o'), stderr: join(dir, 'o') });
    expect(await spawned.exit).toMatchObject({ code: 0 });
    expect(spawner.pid).toBe(helper);
    // Out of the runner's process group and session: a terminal's Ctrl-C does not reach it.
    expect(processGroup(helper)).toBe(helper);
  });

  it('does not keep a finished runner alive: a script that runs a process through it exits by itself', () => {
    const dir = tempDir();
    const script = join(dir, 'runner.mjs');
    const spawnerModule = new URL('../../dist/runtime/execution/spawner.js', import.meta.url).href;
    writeFileSync(
      script,
      [
        `import { Spawner } from ${JSON.stringify(spawnerModule)};`,
        'const s = new Spawner();',
        `const p = await s.spawn({ file: '/bin/sh', args: ['-c', 'exit 4'], cwd: null, env: {}, stdout: ${JSON.stringify(join(dir, 'o'))}, stderr: ${JSON.stringify(join(dir, 'o'))} });`,
        'const e = await p.exit;',
        'console.log(JSON.stringify(e));',
      ].join('\n'),
    );
    const r = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 15_000 });
    expect(r.error).toBeUndefined();
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ code: 4, signal: null, lost: false });
  });
});

describe('spawnProcess through the spawner', () => {
  it('a run: exit code, output tails and files, the process group', async () => {
    const dir = tempDir();
    const handle = await start(useSpawner(), fileSpec(dir, { command: 'echo out; echo err >&2; exit 5' }));
    expect(handle.pgid).toBe(handle.pid);
    const exit = await handle.exited;
    expect(exit).toMatchObject({ exitCode: 5, signal: null, stdout: 'out\n', stderr: 'err\n', error: 'exited with code 5' });
    expect(readFileSync(join(dir, 'stdout.log'), 'utf8')).toBe('out\n');
    expect(readFileSync(join(dir, 'exit-status'), 'utf8')).toBe(`exit 5\npid ${handle.pid}\n`);
  });

  it('stdin carries the prompt and is closed; unsetEnv drops inherited variables', async () => {
    const dir = tempDir();
    const spawner = useSpawner();
    await spawner.ready();
    // Set after the helper started: what the runner's environment is now counts.
    process.env.LOOPS_SPAWNER_TEST_SECRET = 'inherited';
    onTestFinished(() => {
      delete process.env.LOOPS_SPAWNER_TEST_SECRET;
    });
    const read = await start(spawner, fileSpec(dir, { command: fixture('read-stdin.mjs'), shell: false, stdin: 'a prompt' }));
    expect(JSON.parse((await read.exited).stdout)).toMatchObject({ eof: true, bytes: 8 });
    const dir2 = tempDir();
    const env = await start(
      spawner,
      fileSpec(dir2, { command: 'echo "[${LOOPS_SPAWNER_TEST_SECRET:-unset}] [$KEPT]"', env: { KEPT: 'yes' }, unsetEnv: ['LOOPS_SPAWNER_TEST_SECRET'] }),
    );
    expect((await env.exited).stdout).toBe('[unset] [yes]\n');
  });

  it('a missing executable fails before the spawn with the PATH searched; a missing cwd says so', async () => {
    const dir = tempDir();
    const spawner = useSpawner();
    await expect(start(spawner, fileSpec(dir, { command: 'no-such-program-9f2', shell: false }))).rejects.toThrow(/command not found: no-such-program-9f2 \(searched PATH=/);
    await expect(start(spawner, fileSpec(dir, { command: 'true', cwd: join(dir, 'gone') }))).rejects.toBeInstanceOf(SpawnFailedError);
  });

  it('timeout: SIGTERM to the group, SIGKILL after the grace for a process that ignores it, descendants too', async () => {
    const dir = tempDir();
    const spawner = useSpawner();
    // The helper's start-up (hundreds of ms on a loaded machine) is not counted in the 300 ms.
    await spawner.ready();
    const handle = await start(spawner, fileSpec(dir, { command: fixture('ignore-term.sh'), args: [join(dir, 'child.pid')], shell: false, deadline: deadlineAfter(Date.now(), 300), killGraceMs: 300 }));
    await waitFor(() => liveGroupMembers(handle.pgid).length >= 2, 5000, 'the fixture and its child');
    const exit = await handle.exited;
    expect(exit.timedOut).toBe(true);
    expect(exit.error).toMatch(/^timed out after 300ms/);
    await waitForGroupGone(handle.pgid, 5000);
  });

  it('cancel() kills the group and records the reason', async () => {
    const dir = tempDir();
    const handle = await start(useSpawner(), fileSpec(dir, { command: 'sleep 30' }));
    handle.cancel('stopped by the test');
    const exit = await handle.exited;
    expect(exit).toMatchObject({ cancelled: true, error: 'cancelled: stopped by the test' });
    expect(isAlive(handle.pid)).toBe(false);
  });

  it('the helper dies mid-run: the process goes on, its output is kept, and its exit status is unknown (the helper reaped it)', async () => {
    const dir = tempDir();
    const spawner = useSpawner();
    const handle = await start(spawner, fileSpec(dir, { command: `while [ ! -e ${join(dir, 'go')} ]; do sleep 0.05; done; echo done; exit 7` }));
    const helper = spawner.pid!;
    process.kill(helper, 'SIGKILL');
    await waitFor(() => spawner.pid === null, 5000, 'the runner to notice the helper died');
    expect(isAlive(handle.pid)).toBe(true);
    writeFileSync(join(dir, 'go'), '');
    const exit = await handle.exited;
    expect(exit).toMatchObject({ exitCode: null, signal: null, stdout: 'done\n' });
    expect(exit.error).toMatch(/spawner helper process, which reaps it, was gone: its exit status is unknown/);
    // The next spawn starts a new helper.
    const again = await start(spawner, fileSpec(tempDir(), { command: 'exit 0' }));
    expect((await again.exited).exitCode).toBe(0);
    expect(spawner.pid).not.toBe(helper);
  });
});

describe('the runner ends while its runs go on (a crash, kill -9: the helper sees its stdin close)', () => {
  it('the helper stays, reaps each process, writes its exact end in its status file, and only then ends', async () => {
    const dir = tempDir();
    const spawner = useSpawner();
    const go = join(dir, 'go');
    // Killed by a signal after an exit code above 128 would say the same to a shell: the status says which.
    const handle = await start(spawner, fileSpec(dir, { command: `while [ ! -e ${go} ]; do sleep 0.05; done; echo done; kill -USR1 $$` }));
    const helper = spawner.pid!;
    const statusFile = join(dir, 'exit-status');
    expect(readFileSync(statusFile, 'utf8')).toBe(`running\npid ${handle.pid}\nstart ${handle.startTime}\n`);
    expect(findRunProcess(statusFile)).toMatchObject({ pid: handle.pid, startTime: handle.startTime });
    spawner.close();
    writeFileSync(go, '');
    await waitFor(() => readFileSync(statusFile, 'utf8').startsWith('signal'), 10_000, 'the helper to write the status');
    expect(readFileSync(statusFile, 'utf8')).toBe(`signal ${osConstants.signals.SIGUSR1}\npid ${handle.pid}\n`);
    await waitFor(() => !isAlive(helper), 10_000, 'the helper to end once nothing is left to reap');
    expect(readFileSync(join(dir, 'stdout.log'), 'utf8')).toBe('done\n');
  });
});

describe('spawnProcess: the helper dies before it answers', () => {
  it('a spawn it carried out is found by its status file and followed to its end, output and all', async () => {
    const dir = tempDir();
    const spawner = new Spawner({ script: fixture('spawner-silent.mjs') });
    onTestFinished(() => spawner.close());
    const go = join(dir, 'go');
    const pending = spawnProcess(fileSpec(dir, { command: `while [ ! -e ${go} ]; do sleep 0.05; done; echo done; exit 6` }), systemClock, spawner);
    await waitFor(() => findRunProcess(join(dir, 'exit-status')) !== null, 10_000, 'the process');
    const { pid } = findRunProcess(join(dir, 'exit-status'))!;
    onTestFinished(() => killGroupIfAlive(pid));
    process.kill(spawner.pid!, 'SIGKILL');
    const handle = await pending;
    expect(handle.pid).toBe(pid);
    writeFileSync(go, '');
    // The helper that would have reaped it is gone: what it printed is known, its exit status is not.
    expect(await handle.exited).toMatchObject({ exitCode: null, stdout: 'done\n', error: expect.stringMatching(/its exit status is unknown/) });
  });
});

describe('Spawner: when the helper cannot be used, runs are forked by the runner itself', () => {
  it('a missing script: unavailable at once, with the reason; spawnProcess runs the process all the same', async () => {
    const dir = tempDir();
    const spawner = new Spawner({ script: join(dir, 'missing.js') });
    onTestFinished(() => spawner.close());
    expect(spawner.unavailableReason).toMatch(/spawner helper script .* is missing: run npm run build/);
    spawner.warm();
    expect(spawner.pid).toBeNull();
    const handle = await start(spawner, fileSpec(dir, { command: 'echo inline; exit 2' }));
    expect(await handle.exited).toMatchObject({ exitCode: 2, stdout: 'inline\n' });
    // Forked by this process (execa), not by a helper.
    expect(spawner.pid).toBeNull();
  });

  it('a helper that dies before it is ready three times in a row is given up on', async () => {
    const dir = tempDir();
    const script = join(dir, 'crash.mjs');
    writeFileSync(script, 'process.exit(1);\n');
    const spawner = new Spawner({ script });
    onTestFinished(() => spawner.close());
    for (let i = 1; i <= 3; i++) {
      expect(spawner.unavailableReason).toBeNull();
      await spawner.ready();
    }
    expect(spawner.unavailableReason).toBe('the spawner helper failed to start 3 times in a row');
    const handle = await start(spawner, fileSpec(dir, { command: 'exit 0' }));
    expect((await handle.exited).exitCode).toBe(0);
  });
});
