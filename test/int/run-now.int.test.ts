import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { filter, firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { InvalidTransitionError, LeaseLostError, NotFoundError } from '../../src/events/errors.js';
import type { StoredEvent } from '../../src/events/types.js';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { changeLoopState, createCommandLoop, type CreateCommandLoopInput } from '../../src/runtime/loops/commands.js';
import { runDir } from '../../src/runtime/paths.js';
import { findLoop, findRun } from '../../src/runtime/queries/loops.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import type { Runtime } from '../../src/runtime/runtime.js';
import { fixture } from '../helpers/fixtures.js';
import { eventTypes, expectLogConsistent } from '../helpers/invariants.js';
import { isAlive, waitForGroupGone } from '../helpers/proc.js';
import { leaseRenewedPast, leaseRows } from '../helpers/leases.js';
import { tempDir, useRuntime } from '../helpers/tmp.js';

function loop(runtime: Runtime, input: Partial<CreateCommandLoopInput> & { command: string }) {
  return createCommandLoop(runtime, { name: 'job', schedule: { manual: true, tz: 'UTC' }, ...input });
}

function nextEvent(runtime: Runtime, type: string): Promise<StoredEvent> {
  return firstValueFrom(runtime.log.events$.pipe(filter((e) => e.type === type)));
}

describe('runNow: outcomes', () => {
  it('echo hi succeeds; the run, its events, the loop summary and the output files agree', async () => {
    const runtime = await useRuntime();
    const created = await loop(runtime, { command: 'echo hi' });
    let claimedId: string | null = null;
    const run = await runNow(runtime, 'job', { onClaimed: (id) => (claimedId = id) });

    expect(run.id).toBe(claimedId);
    expect(run).toMatchObject({
      loopId: created.id,
      loopName: 'job',
      status: 'succeeded',
      exitCode: 0,
      signal: null,
      timedOut: false,
      error: null,
      stdout: 'hi\n',
      stdoutBytes: 3,
      trigger: 'manual',
      slot: `manual:${run.id}`,
      attempt: 1,
      runnerId: runtime.runnerId,
    });
    expect(run.pid).toBeGreaterThan(0);
    expect(run.startedAt).not.toBeNull();
    expect(run.finishedAt).not.toBeNull();
    expect(eventTypes(runtime.log, `run:${run.id}`)).toEqual(['run.claimed', 'process.spawn_requested', 'process.spawned', 'process.exited']);
    expect((await runtime.log.readStream(`run:${run.id}`)).map((e) => e.state)).toEqual(['claimed', 'spawning', 'running', 'succeeded']);
    expect((await runtime.log.readStream(`run:${run.id}`)).every((e) => e.meta.runnerId === runtime.runnerId && e.meta.leaseToken === 1)).toBe(true);
    expect(findLoop(runtime.db, 'job')).toMatchObject({ runCount: 1, lastRun: { id: run.id, status: 'succeeded' } });
    expect(await leaseRows(runtime)).toEqual([]);
    const dir = runDir(runtime.dataDir, run.id);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(readFileSync(join(dir, 'stdout.log'), 'utf8')).toBe('hi\n');
    expect(statSync(join(dir, 'stdout.log')).mode & 0o777).toBe(0o600);
    expectLogConsistent(runtime);
  });

  it('exit 3 in shell form fails with exit code 3', async () => {
    const runtime = await useRuntime();
    await loop(runtime, { command: 'echo bad >&2; exit 3' });
    const run = await runNow(runtime, 'job');
    expect(run).toMatchObject({ status: 'failed', exitCode: 3, error: 'exited with code 3', stderr: 'bad\n' });
    expect(findLoop(runtime.db, 'job').lastRun?.status).toBe('failed');
    expect(await leaseRows(runtime)).toEqual([]);
    expectLogConsistent(runtime);
  });

  it('exit 137, 130 and 143 are exit codes, not signals: failed with that code; a command killed by SIGKILL is recorded with the signal', async () => {
    const runtime = await useRuntime();
    for (const code of [137, 130, 143]) {
      await loop(runtime, { name: `exit-${code}`, command: `echo before; exit ${code}` });
      const run = await runNow(runtime, `exit-${code}`);
      expect(run).toMatchObject({ status: 'failed', exitCode: code, signal: null, error: `exited with code ${code}`, stdout: 'before\n' });
      expect((await runtime.log.readStream(`run:${run.id}`)).at(-1)!.data).toMatchObject({ exitCode: code, signal: null });
    }
    await loop(runtime, { name: 'killed', command: 'kill -KILL $$' });
    const killed = await runNow(runtime, 'killed');
    expect(killed).toMatchObject({ status: 'failed', exitCode: null, signal: 'SIGKILL', error: 'killed by signal SIGKILL' });
    expectLogConsistent(runtime);
  });

  it('the exit-status file is 0600, like every file of the data directory', async () => {
    const runtime = await useRuntime();
    await loop(runtime, { command: 'exit 3' });
    const run = await runNow(runtime, 'job');
    const file = join(runDir(runtime.dataDir, run.id), 'exit-status');
    expect(readFileSync(file, 'utf8')).toBe(`exit 3\npid ${run.pid}\n`);
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it('argv form passes args verbatim; cwd and env are honoured; the log records env names, not values', async () => {
    const runtime = await useRuntime();
    const cwd = tempDir();
    const args = ['$HOME', 'a;b', '$(id)', 'two words'];
    await loop(runtime, {
      command: fixture('report.mjs'),
      args,
      shell: false,
      cwd,
      env: { REPORT_ENV: 'DEPLOY_REGION,LOOPS_RUN_ID,LOOPS_LOOP_NAME,LOOPS_ATTEMPT,LOOPS_IDEMPOTENCY_KEY', DEPLOY_REGION: 'eu-north-7x' },
    });
    const run = await runNow(runtime, 'job');
    expect(run.status).toBe('succeeded');
    const report = JSON.parse(run.stdout);
    expect(report.argv).toEqual(args);
    expect(report.cwd).toBe(cwd);
    expect(report.env).toEqual({
      DEPLOY_REGION: 'eu-north-7x',
      LOOPS_RUN_ID: run.id,
      LOOPS_LOOP_NAME: 'job',
      LOOPS_ATTEMPT: '1',
      LOOPS_IDEMPOTENCY_KEY: `loop:${run.loopId}:${run.slot}:1`,
    });
    const requested = (await runtime.log.readStream(`run:${run.id}`)).find((e) => e.type === 'process.spawn_requested')!;
    expect(requested.data).toMatchObject({ command: fixture('report.mjs'), args, shell: false, cwd });
    expect((requested.data as { envKeys: string[] }).envKeys).toEqual(
      ['DEPLOY_REGION', 'LOOPS_ATTEMPT', 'LOOPS_IDEMPOTENCY_KEY', 'LOOPS_LOOP_ID', 'LOOPS_LOOP_NAME', 'LOOPS_RUN_ID', 'LOOPS_SCHEDULED_FOR', 'REPORT_ENV'],
    );
    expect(JSON.stringify(requested.data)).not.toContain('eu-north-7x');
    expectLogConsistent(runtime);
  });

  it('stdin is not a pipe: a command reading stdin finishes at once', async () => {
    const runtime = await useRuntime();
    await loop(runtime, { command: fixture('read-stdin.mjs'), shell: false, timeout: '10s' });
    const run = await runNow(runtime, 'job');
    expect(run.status).toBe('succeeded');
    expect(JSON.parse(run.stdout)).toMatchObject({ eof: true, bytes: 0, fifo: false });
    expectLogConsistent(runtime);
  });

  it('output larger than the tail cap keeps the last bytes in the run', async () => {
    const runtime = await useRuntime();
    await loop(runtime, { command: fixture('big-output.mjs'), args: ['200000'], shell: false });
    const run = await runNow(runtime, 'job', { tailBytes: 2048 });
    expect(run.status).toBe('succeeded');
    expect(Buffer.byteLength(run.stdout)).toBe(2048);
    expect(run.stdout.endsWith('0123456789<END>\n')).toBe(true);
    expect(run.stdoutBytes).toBeGreaterThan(200_000);
    expectLogConsistent(runtime);
  });

  it('sleep 30 with a 1 s timeout is timed_out quickly', async () => {
    const runtime = await useRuntime();
    await loop(runtime, { command: 'sleep 30', timeout: '1s', killGrace: '2s' });
    const started = performance.now();
    const run = await runNow(runtime, 'job');
    expect(performance.now() - started).toBeLessThan(5000);
    expect(run).toMatchObject({ status: 'timed_out', timedOut: true, exitCode: null, signal: 'SIGTERM' });
    expect(run.error).toMatch(/^timed out after 1s/);
    await waitForGroupGone(run.pid!);
    expect(findLoop(runtime.db, 'job').lastRun?.status).toBe('timed_out');
    const requested = (await runtime.log.readStream(`run:${run.id}`))[1]!;
    expect(Date.parse((requested.data as { timeoutAt: string }).timeoutAt) - Date.parse(requested.at)).toBe(1000);
    expectLogConsistent(runtime);
  });

  it('a nonexistent executable (argv form) fails through process.spawn_failed with a clear error', async () => {
    const runtime = await useRuntime();
    await loop(runtime, { command: 'no-such-program-loops-test', shell: false, preflight: false });
    const run = await runNow(runtime, 'job');
    expect(run).toMatchObject({ status: 'failed', exitCode: null, pid: null });
    expect(run.error).toMatch(/^command not found: no-such-program-loops-test/);
    expect(eventTypes(runtime.log, `run:${run.id}`)).toEqual(['run.claimed', 'process.spawn_requested', 'process.spawn_failed']);
    expect((await runtime.log.readStream(`run:${run.id}`))[2]!.data).toMatchObject({ code: 'ENOENT' });
    expect(await leaseRows(runtime)).toEqual([]);
    expectLogConsistent(runtime);
  });
});

describe('runNow: cancellation', () => {
  it('aborting the signal while running cancels the run; a TERM-ignoring tree is SIGKILLed after the grace', async () => {
    const runtime = await useRuntime();
    const pidFile = join(tempDir(), 'grandchild.pid');
    await loop(runtime, { command: fixture('ignore-term.sh'), args: [pidFile], shell: false, killGrace: 300 });
    const controller = new AbortController();
    let grandchild = 0;
    let aliveWhenReady = false;
    const run = await runNow(runtime, 'job', {
      signal: controller.signal,
      onOutput: (_stream, chunk) => {
        if (!chunk.toString().includes('ready')) return;
        grandchild = Number(readFileSync(pidFile, 'utf8'));
        aliveWhenReady = isAlive(grandchild);
        controller.abort('user pressed ctrl-c');
      },
    });
    expect(aliveWhenReady).toBe(true);
    expect(run).toMatchObject({ status: 'cancelled', signal: 'SIGKILL', error: 'cancelled: user pressed ctrl-c' });
    expect(run.durationMs).toBeGreaterThanOrEqual(300 - 20);
    expect(eventTypes(runtime.log, `run:${run.id}`)).toEqual([
      'run.claimed',
      'process.spawn_requested',
      'process.spawned',
      'run.cancel_requested',
      'process.exited',
    ]);
    expect((await runtime.log.readStream(`run:${run.id}`))[4]!.data).toMatchObject({ cancelled: true, timedOut: false });
    await waitForGroupGone(run.pid!);
    expect(grandchild).toBeGreaterThan(0);
    expect(isAlive(grandchild)).toBe(false);
    expect(await leaseRows(runtime)).toEqual([]);
    expectLogConsistent(runtime);
  });

  it('an already-aborted signal cancels before anything is spawned', async () => {
    const runtime = await useRuntime();
    await loop(runtime, { command: 'echo should-not-run' });
    const controller = new AbortController();
    controller.abort('changed my mind');
    const run = await runNow(runtime, 'job', { signal: controller.signal });
    expect(run).toMatchObject({ status: 'cancelled', error: 'cancelled: changed my mind', pid: null, stdout: '', durationMs: 0 });
    expect(eventTypes(runtime.log, `run:${run.id}`)).toEqual(['run.claimed', 'run.cancel_requested']);
    expect(await leaseRows(runtime)).toEqual([]);
    expectLogConsistent(runtime);
  });

  it('a listener on events$ may cancel the run as soon as it is spawned', async () => {
    const runtime = await useRuntime();
    await loop(runtime, { command: 'sleep 30' });
    const controller = new AbortController();
    const sub = runtime.log.events$.subscribe((e) => {
      if (e.type === 'process.spawned') controller.abort();
    });
    const run = await runNow(runtime, 'job', { signal: controller.signal });
    sub.unsubscribe();
    expect(run).toMatchObject({ status: 'cancelled', error: 'cancelled', signal: 'SIGTERM' });
    await waitForGroupGone(run.pid!);
    expectLogConsistent(runtime);
  });
});

describe('runNow: leases', () => {
  it('a runner whose lease was stolen cannot record the outcome (LeaseLostError, nothing appended)', async () => {
    const clock = new SimulatedClock('2026-05-01T10:00:00.000Z');
    const runtime = await useRuntime({ clock });
    await loop(runtime, { command: 'sleep', args: ['30'], shell: false });
    const spawned = nextEvent(runtime, 'process.spawned');
    const outcome = runNow(runtime, 'job', { leaseTtlMs: 30_000 }).then(
      () => null,
      (e: unknown) => e,
    );
    const event = await spawned;
    const streamId = event.streamId;
    const pid = (event.data as { pid: number }).pid;

    // Another runner takes over after forcing the lease to expire (this runner's only lease: a manual run holds no runner lease).
    await runtime.leases.expireHolder(runtime.runnerId, clock.now());
    const stolen = await runtime.leases.take(streamId, 'thief', 30_000, clock.now());
    expect(stolen.token).toBe(2);
    const versionBefore = (await runtime.log.streamInfo(streamId))!.version;
    const headBefore = await runtime.log.headPosition();

    process.kill(-pid, 'SIGTERM'); // the run's process group (its leader is the exit-status wrapper)
    const error = await outcome;
    expect(error).toBeInstanceOf(LeaseLostError);
    expect(error).toMatchObject({ code: 'lease_lost' });
    expect((error as Error).message).toMatch(/no longer held by test-host:1:runner \(token 1\)/);
    expect((await runtime.log.streamInfo(streamId))!.version).toBe(versionBefore);
    expect(await runtime.log.headPosition()).toBe(headBefore);
    expect(eventTypes(runtime.log, streamId).at(-1)).toBe('process.spawned');
    expect(findRun(runtime.db, streamId.slice(4)).status).toBe('running');
    expect((await leaseRows(runtime)).map(({ holder, token }) => ({ holder, token }))).toEqual([{ holder: 'thief', token: 2 }]);
    expectLogConsistent(runtime);
  });

  it('the heartbeat renews the lease on the injected clock while the run executes', async () => {
    const clock = new SimulatedClock('2026-05-01T10:00:00.000Z');
    const runtime = await useRuntime({ clock });
    await loop(runtime, { command: 'sleep', args: ['30'], shell: false });
    const spawned = nextEvent(runtime, 'process.spawned');
    const controller = new AbortController();
    const done = runNow(runtime, 'job', { leaseTtlMs: 9000, signal: controller.signal });
    const { streamId } = await spawned;
    const expiry = async () => new Date((await runtime.leases.get(streamId))!.expiresAt).toISOString();
    // A renewal is a write of the lease store, no event: awaited there (on PostgreSQL, a round trip after the beat).
    const renewedTo = (iso: string) => leaseRenewedPast(runtime, streamId, Date.parse(iso) - 1);
    expect(await expiry()).toBe('2026-05-01T10:00:09.000Z');
    clock.advance(3000);
    await renewedTo('2026-05-01T10:00:12.000Z');
    expect(await expiry()).toBe('2026-05-01T10:00:12.000Z');
    clock.advance(6000);
    await renewedTo('2026-05-01T10:00:18.000Z');
    expect(await expiry()).toBe('2026-05-01T10:00:18.000Z');
    controller.abort();
    const run = await done;
    expect(run.status).toBe('cancelled');
    expect(await leaseRows(runtime)).toEqual([]);
    expectLogConsistent(runtime);
  });

  it('a run leased by another runner cannot be claimed twice', async () => {
    const runtime = await useRuntime();
    const lease = await runtime.leases.take('run:x', 'a', 10_000, Date.now());
    expect(lease.token).toBe(1);
    await expect(runtime.leases.take('run:x', 'b', 10_000, Date.now())).rejects.toThrow(/run:x is leased by a until/);
    // The same holder may re-acquire; the token moves on.
    expect((await runtime.leases.take('run:x', 'a', 10_000, Date.now())).token).toBe(2);
    // After expiry anyone may take it.
    expect(await runtime.leases.take('run:x', 'b', 10_000, Date.now() + 20_000)).toMatchObject({ holder: 'b', token: 3 });
  });
});

describe('runNow: refusals', () => {
  it('an archived loop cannot run; a removed loop is not found; nothing is appended', async () => {
    const runtime = await useRuntime();
    await loop(runtime, { command: 'true', name: 'old' });
    await changeLoopState(runtime, 'old', 'archive');
    const head = await runtime.log.headPosition();
    await expect(runNow(runtime, 'old')).rejects.toBeInstanceOf(InvalidTransitionError);
    await changeLoopState(runtime, 'old', 'remove');
    await expect(runNow(runtime, 'old')).rejects.toBeInstanceOf(NotFoundError);
    expect(await runtime.log.headPosition()).toBe(head + 1);
    expect(await leaseRows(runtime)).toEqual([]);
    expectLogConsistent(runtime);
  });

  it('paused and stopped loops can still be run by hand', async () => {
    const runtime = await useRuntime();
    await loop(runtime, { command: 'true', name: 'p' });
    await changeLoopState(runtime, 'p', 'pause');
    expect((await runNow(runtime, 'p')).status).toBe('succeeded');
    await changeLoopState(runtime, 'p', 'stop');
    expect((await runNow(runtime, 'p')).status).toBe('succeeded');
    expect(findLoop(runtime.db, 'p')).toMatchObject({ status: 'stopped', runCount: 2 });
    expectLogConsistent(runtime);
  });
});
