/**
 * Recovery of runs left unfinished by a runner that is gone, on a real store (SQLite; PostgreSQL in
 * the `postgres` project) with real processes standing in for the runs' processes. The stranded
 * state is built the way a runner writes it (its own runtime on the same data directory, its
 * runner id, its lease), then that runner "dies" (its runtime is closed, its lease left to expire
 * on the SimulatedClock):
 *
 *  - lease expired, process gone (never started, exited, killed, pid reused, or a zombie nobody
 *    reaped) → `run.abandoned` under a lease taken over by the new runner, the reason names the
 *    old runner (and the pid);
 *  - lease expired, process still alive (same pid and start time) → reported orphaned, nothing appended;
 *  - lease still live → untouched.
 *
 * After every test the log replays and the projections verify.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { filter, firstValueFrom } from 'rxjs';
import { describe, expect, it, onTestFinished } from 'vitest';
import { LeaseLostError } from '../../src/events/errors.js';
import type { StoredEvent } from '../../src/events/types.js';
import { currentMachines } from '../../src/machines/registry.js';
import { DurableActor } from '../../src/runtime/actor.js';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { Daemon, daemonLease, pidFile, runningDaemon } from '../../src/runtime/daemon/daemon.js';
import { hostId } from '../../src/runtime/host.js';
import { newId } from '../../src/runtime/ids.js';
import { createAgentLoop, createCommandLoop } from '../../src/runtime/loops/commands.js';
import { bootId, processStartTime } from '../../src/runtime/execution/process-info.js';
import { findLoop, findRun, type LoopView } from '../../src/runtime/queries/loops.js';
import { recoverRuns } from '../../src/runtime/daemon/recovery.js';
import { wrapperArgv, wrapperKind } from '../../src/runtime/execution/executor.js';
import { runDir } from '../../src/runtime/paths.js';
import { writeStartedStatus } from '../../src/runtime/execution/status-file.js';
import { executeRun, runNow } from '../../src/runtime/execution/run-now.js';
import { adoptRun } from '../../src/runtime/execution/attempt.js';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { eventTypes, expectLogConsistent } from '../helpers/invariants.js';
import { isAlive, killGroupIfAlive, procStat, waitForGroupGone } from '../helpers/proc.js';
import { useRuntime, type TestRuntime } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { strandRun } from '../helpers/strand.js';

const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const TTL = 30_000;
/**
 * Both runners are of this host (LOOPS_HOST_ID, else the host name), as two processes on one data
 * directory are: on a store hosts share (PostgreSQL) only the host a run ran on looks for its
 * process. Their pid is this live process's, so neither is ever proved gone by its pid: the old
 * runner "dies" only by its lease running out (or by a daemon's pid file naming a dead process).
 */
const OLD = `${hostId()}:${process.pid}:gone`;
const NEW = `${hostId()}:${process.pid}:recoverer`;
/** OLD in a RegExp. */
const OLD_RE = OLD.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

interface Setup {
  clock: SimulatedClock;
  runtime: TestRuntime;
  /** The runner that strands runs; `die()` closes it. */
  old: Runtime;
  die: () => void;
  loop: LoopView;
}

async function setup(): Promise<Setup> {
  const clock = new SimulatedClock(T0);
  const runtime = await useRuntime({ clock, runnerId: NEW });
  const old = await openRuntime({ dataDir: runtime.dataDir, clock, runnerId: OLD });
  let closed = false;
  const die = () => {
    if (!closed) old.close();
    closed = true;
  };
  onTestFinished(die);
  onTestFinished(() => expectLogConsistent(runtime));
  const loop = await createCommandLoop(runtime, { name: 'job', command: 'sleep 30', schedule: { manual: true } });
  return { clock, runtime, old, die, loop };
}

/** A `sleep 30` standing in for a run's process (own process group), killed when the test ends. */
function liveProcess(): { child: ChildProcess; pid: number; startTime: string } {
  const child = spawn('sleep', ['30'], { detached: true, stdio: 'ignore' });
  const pid = child.pid!;
  onTestFinished(() => killGroupIfAlive(pid));
  const startTime = processStartTime(pid);
  expect(startTime).not.toBeNull();
  return { child, pid, startTime: startTime! };
}

/** A process that existed (its identity recorded) and is gone now. */
async function deadProcess(): Promise<{ pid: number; startTime: string }> {
  const { child, pid, startTime } = liveProcess();
  child.kill('SIGKILL');
  await once(child, 'exit'); // reaped by us: the pid is gone from /proc
  expect(processStartTime(pid)).toBeNull();
  return { pid, startTime };
}

/**
 * A zombie: `sh` starts a short-lived child and then execs `sleep 30`, which never waits for it,
 * so the child stays a zombie (exited, not reaped) while the sleep lives. Its /proc entry, start
 * time included, is still there. The child outlives the exec by 0.3 s: had it exited before, the
 * shell could have reaped it and there would be no zombie.
 */
async function zombieProcess(): Promise<{ pid: number; startTime: string | null }> {
  const child = spawn('sh', ['-c', 'sleep 0.3 & echo $!; exec sleep 30'], { detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
  onTestFinished(() => killGroupIfAlive(child.pid!));
  const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
  const pid = Number(line);
  await waitFor(() => procStat(pid)?.state === 'Z', 5000, `process ${pid} to become a zombie`);
  const startTime = processStartTime(pid);
  expect(startTime, 'a zombie still has its /proc entry').not.toBeNull();
  return { pid, startTime };
}

/** recoverRuns, reduced to what this file is about (abandoned, orphaned). */
async function recover(runtime: Runtime): Promise<{ abandoned: string[]; orphaned: Array<{ runId: string; pid: number }> }> {
  const { abandoned, orphaned } = await recoverRuns(runtime);
  return { abandoned, orphaned: orphaned.map(({ runId, pid }) => ({ runId, pid })) };
}

const runRow = (runtime: Runtime, runId: string) =>
  runtime.db.prepare('SELECT status, error, finished_at, runner_id FROM loop_runs WHERE id = ?').get(runId) as {
    status: string;
    error: string | null;
    finished_at: string | null;
    runner_id: string;
  };
/** A run's lease as the lease store has it (undefined: none), on either store. */
const leaseOf = async (runtime: Runtime, runId: string) => (await runtime.leases.get(`run:${runId}`)) ?? undefined;

async function expectAbandoned(runtime: Runtime, runId: string, reason: RegExp): Promise<StoredEvent> {
  const events = await runtime.log.readStream(`run:${runId}`);
  const last = events[events.length - 1]!;
  expect(last.type).toBe('run.abandoned');
  expect((last.data as { reason: string }).reason).toMatch(reason);
  expect(last.meta).toMatchObject({ runnerId: NEW });
  expect(runRow(runtime, runId)).toMatchObject({ status: 'abandoned', runner_id: OLD, finished_at: last.at });
  expect(runRow(runtime, runId).error).toMatch(reason);
  // The run's lease was taken over and released with the outcome.
  expect(await leaseOf(runtime, runId)).toBeUndefined();
  return last;
}

describe('recoverRuns: the runner is gone (its lease expired)', () => {
  it('claimed, never spawned: abandoned, naming the runner', async () => {
    const { clock, runtime, old, die, loop } = await setup();
    const runId = await strandRun(old, loop, 'claimed');
    die();
    clock.advance(TTL + 1);
    expect(await recover(runtime)).toEqual({ abandoned: [runId], orphaned: [] });
    await expectAbandoned(runtime, runId, new RegExp(`^runner ${OLD_RE} stopped before the process was started$`));
    expect(eventTypes(runtime.log, `run:${runId}`)).toEqual(['run.claimed', 'run.abandoned']);
  });

  it('spawn requested, no process recorded, none found by its wrapper, no status file: abandoned', async () => {
    const { clock, runtime, old, die, loop } = await setup();
    const runId = await strandRun(old, loop, 'spawning');
    die();
    clock.advance(TTL + 1);
    expect(await recover(runtime)).toEqual({ abandoned: [runId], orphaned: [] });
    await expectAbandoned(runtime, runId, new RegExp(`runner ${OLD_RE} stopped before the process was started`));
  });

  it('running, its process gone: abandoned, naming the runner and the pid; the old lease is fenced out', async () => {
    const { clock, runtime, old, die, loop } = await setup();
    const proc = await deadProcess();
    const runId = await strandRun(old, loop, proc);
    die();
    clock.advance(TTL + 1);
    expect(await recover(runtime)).toEqual({ abandoned: [runId], orphaned: [] });
    await expectAbandoned(runtime, runId, new RegExp(`^runner ${OLD_RE} stopped and the process \\(pid ${proc.pid}\\) is gone; its exit status is unknown$`));
    expect(findRun(runtime.db, runId)).toMatchObject({ status: 'abandoned', pid: proc.pid, runnerId: OLD });
    // The old runner, should it come back, can no longer record anything under its lease.
    const stale = { name: `run:${runId}`, holder: OLD, token: 1, expiresAt: T0 + TTL };
    const expectedVersion = (await runtime.log.streamInfo(`run:${runId}`))!.version;
    await expect(
      runtime.log.append(`run:${runId}`, [{ type: 'run.cancel_requested', data: { reason: null }, at: new Date(clock.now()).toISOString() }], {
        expectedVersion,
        guards: [{ kind: 'lease-held', ...stale }],
      }),
    ).rejects.toThrow(LeaseLostError);
    expect(findLoop(runtime.db, loop.id).status).toBe('active');
  });

  it('running, its pid now belongs to another process (different start time): abandoned', async () => {
    const { clock, runtime, old, die, loop } = await setup();
    const other = liveProcess();
    const runId = await strandRun(old, loop, { pid: other.pid, startTime: `${Number(other.startTime) - 1}` });
    die();
    clock.advance(TTL + 1);
    expect(await recover(runtime)).toEqual({ abandoned: [runId], orphaned: [] });
    await expectAbandoned(runtime, runId, new RegExp(`pid ${other.pid}\\) is gone`));
    expect(isAlive(other.pid), 'the unrelated process is not touched').toBe(true);
  });

  it('running, its process exited but was never reaped (a zombie): abandoned, not orphaned', async () => {
    const { clock, runtime, old, die, loop } = await setup();
    const zombie = await zombieProcess();
    const runId = await strandRun(old, loop, zombie);
    die();
    clock.advance(TTL + 1);
    expect(await recover(runtime)).toEqual({ abandoned: [runId], orphaned: [] });
    await expectAbandoned(runtime, runId, new RegExp(`pid ${zombie.pid}\\) is gone`));
  });

  it('running, its process exited and its spawner helper is about to reap it (a zombie its status file says runs): adopted, not abandoned', async () => {
    const { clock, runtime, old, die, loop } = await setup();
    const zombie = await zombieProcess();
    const runId = await strandRun(old, loop, zombie);
    // What the helper wrote at the fork; it writes the end once it reaps the process.
    mkdirSync(runDir(runtime.dataDir, runId), { recursive: true });
    writeStartedStatus(join(runDir(runtime.dataDir, runId), 'exit-status'), zombie.pid, zombie.startTime);
    die();
    clock.advance(TTL + 1);
    expect(await recover(runtime)).toEqual({ abandoned: [], orphaned: [{ runId, pid: zombie.pid }] });
  });

  it('running, its process exited but left a TERM-ignoring child in its group (the runner died before the SIGKILL): the leftover is stopped, then the run abandoned', async () => {
    const { clock, runtime, old, die, loop } = await setup();
    // The leader ignores SIGTERM and so does the sleep it leaves behind; it waits for its stdin to close.
    const child = spawn('sh', ['-c', "trap '' TERM; sleep 300 & echo $!; read x"], { detached: true, stdio: ['pipe', 'pipe', 'ignore'] });
    const leader = child.pid!;
    onTestFinished(() => killGroupIfAlive(leader));
    const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
    const leftover = Number(line);
    const startTime = processStartTime(leader)!;
    child.stdin!.end();
    await once(child, 'exit');
    expect(isAlive(leftover), 'the leftover outlives its leader').toBe(true);
    const runId = await strandRun(old, loop, { pid: leader, startTime });
    die();
    clock.advance(TTL + 1);
    let recovered = false;
    const recovering = recover(runtime).finally(() => (recovered = true));
    // Its SIGTERM is ignored: it goes at the SIGKILL, the loop's --kill-grace (5 s) later.
    while (!recovered) {
      clock.advance(100);
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(await recovering).toEqual({ abandoned: [runId], orphaned: [] });
    expect(isAlive(leftover), 'the leftover was stopped before the run was recorded').toBe(false);
    await expectAbandoned(runtime, runId, new RegExp(`pid ${leader}\\) is gone`));
  });

  it('running, its pid alive now but recorded on another boot (same pid and start time): abandoned, saying so; that process is not signalled', async () => {
    const { clock, runtime, old, die, loop } = await setup();
    // A start time is ticks since boot: after a reboot another process can have the same pid and
    // the same start time. The boot id tells them apart.
    const other = liveProcess();
    expect(bootId(), 'this test needs a boot id (Linux)').not.toBeNull();
    const runId = await strandRun(old, loop, { pid: other.pid, startTime: other.startTime, bootId: 'a-boot-before-this-one' });
    die();
    clock.advance(TTL + 1);
    expect(await recover(runtime)).toEqual({ abandoned: [runId], orphaned: [] });
    await expectAbandoned(
      runtime,
      runId,
      new RegExp(`^runner ${OLD_RE} stopped and its process identity could not be confirmed \\(it was recorded on another boot .*\\): pid ${other.pid} is alive but may be another process, so it was not signalled; its exit status is unknown$`),
    );
    expect(isAlive(other.pid), 'the process that has its pid now is not touched').toBe(true);
  });

  it('running, no start time recorded, its pid alive: abandoned as unconfirmed, not adopted; that process is not signalled', async () => {
    const { clock, runtime, old, die, loop } = await setup();
    const other = liveProcess();
    const runId = await strandRun(old, loop, { pid: other.pid, startTime: null });
    die();
    clock.advance(TTL + 1);
    const report = await recoverRuns(runtime);
    expect(report).toMatchObject({ abandoned: [runId], orphaned: [], unconfirmed: [{ runId, pid: other.pid, reason: 'no start time was recorded' }] });
    await expectAbandoned(runtime, runId, new RegExp(`its process identity could not be confirmed \\(no start time was recorded\\): pid ${other.pid} is alive`));
    expect(isAlive(other.pid)).toBe(true);
  });

  it('running, identity unconfirmed, but its status file is there: the real exit is recorded (the wrapper wrote it, so the process ended)', async () => {
    const { clock, runtime, old, die, loop } = await setup();
    const other = liveProcess();
    const runId = await strandRun(old, loop, { pid: other.pid, startTime: other.startTime, bootId: 'a-boot-before-this-one' });
    mkdirSync(runDir(runtime.dataDir, runId), { recursive: true });
    writeFileSync(join(runDir(runtime.dataDir, runId), 'exit-status'), `exit 4\npid ${other.pid}\n`);
    die();
    clock.advance(TTL + 1);
    expect(await recoverRuns(runtime)).toMatchObject({ exited: [runId], abandoned: [], orphaned: [] });
    expect(findRun(runtime.db, runId)).toMatchObject({ status: 'failed', exitCode: 4, signal: null });
    expect(isAlive(other.pid)).toBe(true);
  });

  it('no lease row at all: treated as expired', async () => {
    const { runtime, old, die, loop } = await setup();
    const runId = await strandRun(old, loop, 'claimed');
    die();
    const lease = (await runtime.leases.get(`run:${runId}`))!;
    await runtime.leases.release({ name: `run:${runId}`, holder: lease.holder, token: lease.token });
    // Not a second later: the missing lease alone makes the run stale.
    expect((await recoverRuns(runtime)).abandoned).toEqual([runId]);
    await expectAbandoned(runtime, runId, new RegExp(`runner ${OLD_RE}`));
  });
});

describe('recoverRuns: an agent run whose process ended while no runner watched', () => {
  it('its exit and the CLI\'s report are recorded from its files; the session id comes from the head kept past the cap', async () => {
    const { clock, runtime, old, die } = await setup();
    const fakes = join(dirname(fileURLToPath(import.meta.url)), '../fixtures/agents');
    const path = process.env.PATH;
    process.env.PATH = `${fakes}:${path ?? ''}`;
    onTestFinished(() => void (process.env.PATH = path));
    const agent = await createAgentLoop(runtime, { name: 'fixer', provider: 'claude', prompt: 'fix it', schedule: { manual: true } });
    const proc = await deadProcess();
    const runId = await strandRun(old, agent, proc);
    // What the CLI wrote while its runner was gone: the head (init: session, model) kept at the
    // first rotation, then only the end of the output, with the result line.
    const session = '7f3c2a9e-5d41-4b8e-9c6a-2e1f0b3d4a55';
    const dir = join(runtime.dataDir, 'runs', runId);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'stdout.log.head'), `${JSON.stringify({ type: 'system', subtype: 'init', session_id: session, model: 'claude-sonnet-4-5' })}\n`);
    writeFileSync(
      join(dir, 'stdout.log'),
      `{"type":"assistant","message":{"content":[{"type":"text","text":"partial line from befo\n${JSON.stringify({
        type: 'result',
        subtype: 'success',
        is_error: false,
        num_turns: 4,
        duration_ms: 9000,
        result: 'Done.',
        session_id: session,
        total_cost_usd: 0.25,
        usage: { input_tokens: 10, output_tokens: 20, cache_read_input_tokens: 30, cache_creation_input_tokens: 40 },
      })}\n`,
    );
    writeFileSync(join(dir, 'stderr.log'), '');
    writeFileSync(join(dir, 'exit-status'), 'exit 0\n');
    die();
    clock.advance(TTL + 1);
    expect((await recoverRuns(runtime)).exited).toEqual([runId]);
    const run = findRun(runtime.db, runId);
    expect(run).toMatchObject({ status: 'succeeded', exitCode: 0 });
    expect(run.agent).toMatchObject({ provider: 'claude', sessionId: session, model: 'claude-sonnet-4-5', turns: 4, costUsd: 0.25, finalMessage: 'Done.' });
    expect(eventTypes(runtime.log, `run:${runId}`).slice(-2)).toEqual(['run.agent_reported', 'process.exited']);
  });
});

describe('recoverRuns: nothing to record', () => {
  it('a process still alive (same pid and start time) is reported orphaned; nothing is appended, nothing killed', async () => {
    const { clock, runtime, old, die, loop } = await setup();
    const proc = liveProcess();
    const runId = await strandRun(old, loop, proc);
    die();
    clock.advance(TTL + 1);
    const head = await runtime.log.headPosition();
    const leaseBefore = await leaseOf(runtime, runId);
    expect(await recover(runtime)).toEqual({ abandoned: [], orphaned: [{ runId, pid: proc.pid }] });
    expect(await runtime.log.headPosition()).toBe(head);
    expect(runRow(runtime, runId).status).toBe('running');
    expect(await leaseOf(runtime, runId)).toEqual(leaseBefore);
    expect(isAlive(proc.pid)).toBe(true);
    // Asked again, the same answer.
    expect((await recover(runtime)).orphaned).toEqual([{ runId, pid: proc.pid }]);
    expect(await runtime.log.headPosition()).toBe(head);
  });

  it('a run whose lease is still live is untouched, even with its process gone', async () => {
    const { clock, runtime, old, die, loop } = await setup();
    const proc = await deadProcess();
    const runId = await strandRun(old, loop, proc);
    const claimedOnly = await strandRun(old, loop, 'claimed');
    die();
    clock.advance(TTL - 1);
    const head = await runtime.log.headPosition();
    expect(await recover(runtime)).toEqual({ abandoned: [], orphaned: [] });
    expect(await runtime.log.headPosition()).toBe(head);
    expect(runRow(runtime, runId).status).toBe('running');
    expect(runRow(runtime, claimedOnly).status).toBe('claimed');
    expect(await leaseOf(runtime, runId)).toMatchObject({ holder: OLD, token: 1 });

    // Once it expires, the next recovery records both.
    clock.advance(2);
    expect((await recoverRuns(runtime)).abandoned.sort()).toEqual([runId, claimedOnly].sort());
  });

  it('finished runs and runs with a live lease of this runner are left alone; a second recovery finds nothing', async () => {
    const { clock, runtime, old, die, loop } = await setup();
    const done = await createCommandLoop(runtime, { name: 'quick', command: 'true', schedule: { manual: true } });
    const finished = await runNow(runtime, done.id);
    expect(finished.status).toBe('succeeded');
    const stale = await strandRun(old, loop, 'claimed');
    die();
    clock.advance(TTL + 1);
    const mine = await strandRun(runtime, loop, 'claimed'); // this runner, live lease
    expect(await recover(runtime)).toEqual({ abandoned: [stale], orphaned: [] });
    const head = await runtime.log.headPosition();
    expect(await recover(runtime)).toEqual({ abandoned: [], orphaned: [] });
    expect(await runtime.log.headPosition()).toBe(head);
    expect(runRow(runtime, mine).status).toBe('claimed');
    expect(runRow(runtime, finished.id).status).toBe('succeeded');
    // Let this runner's own stranded claim end so the log stays tidy.
    clock.advance(TTL + 1);
    expect((await recoverRuns(runtime)).abandoned).toEqual([mine]);
  });
});

describe('recoverRuns: the runner died after the fork, before it recorded the pid', () => {
  /** Starts the run's process exactly as the executor would (under the exit-status wrapper), unrecorded. */
  function startUnrecorded(runtime: Runtime, runId: string, command: string) {
    const statusFile = join(runDir(runtime.dataDir, runId), 'exit-status');
    mkdirSync(dirname(statusFile), { recursive: true });
    const { file, args } = wrapperArgv(statusFile, command, [], true);
    const out = openSync(join(dirname(statusFile), 'stdout.log'), 'a');
    const child = spawn(file, args, { detached: true, stdio: ['ignore', out, out] });
    closeSync(out);
    onTestFinished(() => killGroupIfAlive(child.pid!));
    return { child, pid: child.pid!, statusFile };
  }

  it('a process still running is found by its wrapper, recorded as spawned under a taken-over lease, and reported for adoption', async () => {
    const { clock, runtime, old, die, loop } = await setup();
    const runId = await strandRun(old, loop, 'spawning');
    const { pid } = startUnrecorded(runtime, runId, 'sleep 30');
    await waitFor(() => processStartTime(pid) !== null, 5000, 'the process');
    die();
    clock.advance(TTL + 1);
    expect(await recover(runtime)).toEqual({ abandoned: [], orphaned: [{ runId, pid }] });
    const events = await runtime.log.readStream(`run:${runId}`);
    expect(events.map((e) => e.type)).toEqual(['run.claimed', 'process.spawn_requested', 'process.spawned']);
    expect(events[2]!.data).toMatchObject({ pid, pgid: pid, startTime: processStartTime(pid) });
    expect(events[2]!.meta).toMatchObject({ runnerId: NEW });
    expect(runRow(runtime, runId).status).toBe('running');
    // Recovered once: the next pass sees a run with a known, living pid.
    expect(await recover(runtime)).toEqual({ abandoned: [], orphaned: [{ runId, pid }] });
    expect(await runtime.log.readStream(`run:${runId}`)).toHaveLength(3);
  });

  it('a process that ended since is recorded with its real exit (its wrapper wrote its pid), not abandoned and run again', async () => {
    const { clock, runtime, old, die, loop } = await setup();
    const runId = await strandRun(old, loop, 'spawning');
    const { child, pid } = startUnrecorded(runtime, runId, 'echo out; exit 3');
    await once(child, 'exit');
    die();
    clock.advance(TTL + 1);
    const report = await recoverRuns(runtime);
    expect(report).toMatchObject({ exited: [runId], abandoned: [], orphaned: [] });
    const events = await runtime.log.readStream(`run:${runId}`);
    expect(events.map((e) => e.type)).toEqual(['run.claimed', 'process.spawn_requested', 'process.spawned', 'process.exited']);
    expect(events[2]!.data).toMatchObject({ pid, pgid: pid });
    expect(events[3]!.data).toMatchObject({ exitCode: 3, stdout: 'out\n' });
    expect(runRow(runtime, runId).status).toBe('failed');
  });

  it('from the status file, exit 137 is exit code 137, not SIGKILL; a command killed by a signal is recorded with that signal', async () => {
    const { clock, runtime, old, die, loop } = await setup();
    const exited137 = await strandRun(old, loop, 'spawning');
    const termed = await strandRun(old, loop, 'spawning');
    const killed = await strandRun(old, loop, 'spawning');
    const a = startUnrecorded(runtime, exited137, 'exit 137');
    const b = startUnrecorded(runtime, termed, 'echo started; sleep 30');
    // Its own SIGKILL (the sh wrapper, without perl, would be killed itself: $$ is the wrapper there).
    const c = startUnrecorded(runtime, killed, wrapperKind() === 'perl' ? 'kill -KILL $$' : 'sleep 30');
    await waitFor(() => existsSync(join(dirname(b.statusFile), 'stdout.log')) && readFileSync(join(dirname(b.statusFile), 'stdout.log'), 'utf8') === 'started\n', 5000, 'started');
    process.kill(-b.pid, 'SIGTERM'); // what a timeout sends the group
    if (wrapperKind() !== 'perl') process.kill(-c.pid, 'SIGKILL');
    await Promise.all([a, b, c].map(({ child }) => (child.exitCode !== null || child.signalCode !== null ? Promise.resolve(null) : once(child, 'exit'))));
    die();
    clock.advance(TTL + 1);
    const report = await recoverRuns(runtime);
    expect(report.exited.sort()).toEqual((wrapperKind() === 'perl' ? [exited137, termed, killed] : [exited137, termed]).sort());
    expect(findRun(runtime.db, exited137)).toMatchObject({ status: 'failed', exitCode: 137, signal: null });
    expect(runRow(runtime, exited137).error).toMatch(/^exited with code 137 \(recorded from its exit-status file/);
    expect(findRun(runtime.db, termed)).toMatchObject({ status: 'failed', exitCode: null, signal: 'SIGTERM' });
    if (wrapperKind() === 'perl') {
      expect(findRun(runtime.db, killed)).toMatchObject({ status: 'failed', exitCode: null, signal: 'SIGKILL' });
      expect(runRow(runtime, killed).error).toMatch(/^killed by signal SIGKILL \(recorded from its exit-status file/);
    }
  });
});

describe('adoption takes the one attempt path: the recorded deadline and --kill-grace are enforced', () => {
  it('a process that ignores SIGTERM, adopted past its deadline: SIGTERM, SIGKILL after its 300 ms grace, recorded timed_out under process.adopted', async () => {
    const { clock, runtime, old, die } = await setup();
    const bounded = await createCommandLoop(runtime, { name: 'bounded', command: 'sleep 30', timeout: '10s', killGrace: '300ms', schedule: { manual: true } });
    const runId = await strandRun(old, bounded, 'spawning', TTL, new Date(T0 + 10_000).toISOString());
    // Its process, under the exit-status wrapper: it ignores SIGTERM (so does its child).
    const statusFile = join(runDir(runtime.dataDir, runId), 'exit-status');
    mkdirSync(dirname(statusFile), { recursive: true });
    const { file, args } = wrapperArgv(statusFile, "trap '' TERM; sleep 30 & wait", [], true);
    const child = spawn(file, args, { detached: true, stdio: 'ignore' });
    const pid = child.pid!;
    onTestFinished(() => killGroupIfAlive(pid));
    await waitFor(() => processStartTime(pid) !== null, 5000, 'the process');
    die();
    clock.advance(TTL + 1); // the old runner's lease ran out; the run's deadline passed long ago
    const report = await recoverRuns(runtime);
    expect(report.orphaned.map((o) => o.runId)).toEqual([runId]);
    const adopted = adoptRun(runtime, runId, report.orphaned[0]!);
    // The adopter's clock drives the deadline, the grace and its look at the process.
    let done = false;
    void adopted.finally(() => (done = true));
    while (!done) {
      clock.advance(100);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const run = (await adopted)!;
    expect(run).toMatchObject({ status: 'timed_out', timedOut: true, runnerId: NEW });
    expect(run.error).toMatch(/^timed out after 10s \(/);
    expect(isAlive(pid)).toBe(false);
    const events = await runtime.log.readStream(`run:${runId}`);
    expect(events.map((e) => e.type)).toEqual(['run.claimed', 'process.spawn_requested', 'process.spawned', 'process.adopted', 'process.exited']);
    const token = (events[3]!.data as { leaseToken: number }).leaseToken;
    expect(events[3]!.data).toMatchObject({ runnerId: NEW, pid });
    // The end is fenced by the token the adoption took.
    expect(events[4]!.meta).toMatchObject({ runnerId: NEW, leaseToken: token });
  });
});

describe('a runner dies in the middle of executeRun', () => {
  it('its run (a real sleep 30 it spawned) is abandoned once the process is killed and the lease expired', async () => {
    const { clock, runtime, old, die, loop } = await setup();
    const spawned = firstValueFrom(old.log.events$.pipe(filter((e) => e.type === 'process.spawned')));
    const running = executeRun(old, findLoop(old.db, loop.id), {
      runId: newId('run', clock.now()),
      slot: 'manual:x',
      scheduledFor: new Date(clock.now()).toISOString(),
      trigger: 'manual',
    });
    running.catch(() => undefined);
    // A run that ends without its process recorded (a spawn that failed) says how, instead of
    // leaving the wait for process.spawned to the test's timeout.
    const ended = running.then((run) => {
      throw new Error(`the run ended before its process was recorded: ${run?.status} (${run?.error ?? 'no error'})`);
    });
    const event = await Promise.race([spawned, ended]);
    const runId = event.streamId.slice('run:'.length);
    const { pid, pgid } = event.data as { pid: number; pgid: number };
    onTestFinished(() => killGroupIfAlive(pgid));
    // The runner dies: its database handle goes away first (nothing more is recorded), then its
    // process group is killed, as kill -9 of the runner would leave it once the child exits.
    die();
    process.kill(-pgid, 'SIGKILL');
    await expect(running).rejects.toThrow();
    await waitForGroupGone(pgid);
    expect(runRow(runtime, runId).status).toBe('running');

    // Before the lease expires: untouched.
    expect(await recover(runtime)).toEqual({ abandoned: [], orphaned: [] });
    clock.advance(TTL + 1);
    expect(await recover(runtime)).toEqual({ abandoned: [runId], orphaned: [] });
    await expectAbandoned(runtime, runId, new RegExp(`^runner ${OLD_RE} stopped and the process \\(pid ${pid}\\) is gone`));
    expect(eventTypes(runtime.log, `run:${runId}`)).toEqual(['run.claimed', 'process.spawn_requested', 'process.spawned', 'run.abandoned']);
  });
});

describe('Daemon.start() recovers first', () => {
  it('after a daemon was killed (its pid file names a dead process): takes over its live leases at once and abandons its run', async () => {
    const { clock, runtime, old, die, loop } = await setup();
    const gone = await deadProcess();
    const daemonProc = await deadProcess();
    // What a daemon killed with -9 leaves behind: its pid file, its live daemon lease, a run
    // under a live lease of its runner.
    await old.leases.take(daemonLease(old), OLD, 15_000, clock.now());
    const runId = await strandRun(old, loop, gone);
    const unrelated = await openRuntime({ dataDir: runtime.dataDir, clock, runnerId: 'cli-host:333:run-now' });
    onTestFinished(() => unrelated.close());
    const otherRunner = await strandRun(unrelated, loop, 'claimed'); // another runner's run, lease live
    writeFileSync(
      pidFile(runtime.dataDir),
      JSON.stringify({ pid: daemonProc.pid, startTime: daemonProc.startTime, bootId: bootId(), runnerId: OLD, version: '0.1.0', startedAt: new Date(T0).toISOString(), dataDir: runtime.dataDir }),
    );
    die();
    clock.advance(1000); // well within every lease

    const lines: string[] = [];
    const daemon = new Daemon(runtime, { log: (l) => lines.push(l) });
    onTestFinished(() => daemon.stop());
    await daemon.start();
    expect(runningDaemon(runtime.dataDir)).toMatchObject({ pid: process.pid, runnerId: NEW });
    expect(await leaseOf(runtime, runId)).toBeUndefined();
    await expectAbandoned(runtime, runId, new RegExp(`^runner ${OLD_RE} stopped and the process \\(pid ${gone.pid}\\) is gone`));
    expect(lines.some((l) => l.endsWith(`recovered run ${runId}: abandoned (its runner stopped and its process is gone)`))).toBe(true);
    // Only the dead daemon's leases were expired: another runner's live run is untouched.
    expect(runRow(runtime, otherRunner).status).toBe('claimed');
    expect(await leaseOf(runtime, otherRunner)).toMatchObject({ holder: 'cli-host:333:run-now' });
    expect(await runtime.leases.get(daemonLease(runtime))).toMatchObject({ holder: NEW, token: 2 });
    await daemon.stop();
    clock.advance(TTL);
    expect((await recover(runtime)).abandoned).toEqual([otherRunner]);
  });


  it('a run whose pid is alive but whose identity is unconfirmed (another boot; no start time) is abandoned, never adopted: its timeout passed, yet that process is never signalled', async () => {
    const { clock, runtime, old, die, loop } = await setup();
    const otherBoot = liveProcess();
    const noStart = liveProcess();
    const past = new Date(T0).toISOString();
    const a = await strandRun(old, loop, { pid: otherBoot.pid, startTime: otherBoot.startTime, bootId: 'a-boot-before-this-one' }, TTL, past);
    const b = await strandRun(old, loop, { pid: noStart.pid, startTime: null }, TTL, past);
    die();
    clock.advance(TTL + 1);
    const lines: string[] = [];
    const daemon = new Daemon(runtime, { log: (l) => lines.push(l) });
    onTestFinished(() => daemon.stop());
    await daemon.start();
    expect(runRow(runtime, a).status).toBe('abandoned');
    expect(runRow(runtime, b).status).toBe('abandoned');
    // Long past the timeout an adopter would enforce (SIGTERM, then SIGKILL after 5 s).
    clock.advance(10_000);
    await daemon.stop();
    expect(lines.some((l) => l.includes('adopted run'))).toBe(false);
    expect(isAlive(otherBoot.pid)).toBe(true);
    expect(isAlive(noStart.pid)).toBe(true);
  });

  it('abandons what is gone and leaves what is still alive running (reported in its log)', async () => {
    const { clock, runtime, old, die, loop } = await setup();
    const gone = await deadProcess();
    const alive = liveProcess();
    const abandoned = await strandRun(old, loop, gone);
    const orphan = await strandRun(old, loop, alive);
    die();
    clock.advance(TTL + 1);
    const lines: string[] = [];
    const daemon = new Daemon(runtime, { log: (l) => lines.push(l) });
    onTestFinished(() => daemon.stop());
    await daemon.start();
    expect(lines.some((l) => l.endsWith(`recovered run ${abandoned}: abandoned (its runner stopped and its process is gone)`))).toBe(true);
    // Left running (reported, or adopted and watched): never killed, never recorded as ended.
    expect(lines.some((l) => l.includes(`run ${orphan}: its runner stopped but its process ${alive.pid} is still running`))).toBe(true);
    expect(runRow(runtime, abandoned).status).toBe('abandoned');
    expect(runRow(runtime, orphan).status).toBe('running');
    await daemon.stop();
    expect(isAlive(alive.pid)).toBe(true);
  });
});
