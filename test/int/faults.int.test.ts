/**
 * Faults of the process table, in-process (issue 11, item 4), on a real SQLite file with real
 * processes and a SimulatedClock for the leases:
 *  - pid reuse, made for real: a run's process dies with its runner, and the kernel is asked to
 *    hand its pid to an unrelated process (root writes pid − 1 to /proc/sys/kernel/ns_last_pid
 *    before the fork). Recovery must see another process — same pid, another start time — and
 *    neither adopt nor signal it: the run is abandoned, the stranger lives on, and the invariant
 *    checker (which looks for live run processes) does not take it for the run's.
 *  - zombies: a run whose command leaves a child it never reaps — a zombie in the run's group, for
 *    good where PID 1 does not reap orphans — ends when its command does: the zombie counts as
 *    gone, the end is not held for the kill grace.
 *  - the test-only clock offset file (offsetFileClock) that the e2e clock-jump tests drive.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { filter, firstValueFrom } from 'rxjs';
import { describe, expect, it, onTestFinished } from 'vitest';
import { offsetFileClock, SimulatedClock, type Clock } from '../../src/runtime/clock.js';
import { recoverRuns } from '../../src/runtime/daemon/recovery.js';
import { processStartTime } from '../../src/runtime/execution/process-info.js';
import { executeRun } from '../../src/runtime/execution/run-now.js';
import { newId } from '../../src/runtime/ids.js';
import { createCommandLoop } from '../../src/runtime/loops/commands.js';
import { findLoop, findRun } from '../../src/runtime/queries/loops.js';
import { openRuntime } from '../../src/runtime/runtime.js';
import { eventTypes, expectInvariants } from '../helpers/invariants.js';
import { requirePrerequisite } from '../helpers/prerequisite.js';
import { isAlive, killGroupIfAlive, procStat, waitForGroupGone } from '../helpers/proc.js';
import { tempDir, useRuntime } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';

const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const TTL = 30_000;
const LAST_PID = '/proc/sys/kernel/ns_last_pid';

const lastPid = requirePrerequisite('writing /proc/sys/kernel/ns_last_pid (root on Linux) to make the kernel reuse a pid', () => {
  if (process.platform !== 'linux') return `not Linux (${process.platform})`;
  if (process.getuid?.() !== 0) return `not root (uid ${process.getuid?.()})`;
  return true;
});

/**
 * Starts `sleep 30` (a group of its own) with exactly `pid`, asking the kernel to give it next
 * (the pid counter wraps at pid_max, so this is what a busy host does by itself, sooner or later);
 * another fork (or thread: they take pids too) on the machine may take it first — in CI the other
 * test workers start node processes all the time — so it is tried again for up to 15 s, pausing a
 * little between tries to find a quiet moment. Null if never.
 */
async function spawnWithPid(pid: number): Promise<ChildProcess | null> {
  // The counter is the machine's: it is put back right after each try, so that the processes of
  // everything else running here do not go on getting pids freed moments ago (other runners'
  // races with pid reuse are not this test's to provoke).
  const previous = Number(readFileSync(LAST_PID, 'utf8'));
  try {
    const deadline = Date.now() + 15_000;
    for (let i = 0; Date.now() < deadline; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, i % 10 === 0 ? 50 : 1));
      let child: ChildProcess;
      try {
        writeFileSync(LAST_PID, String(pid - 1));
        child = spawn('sleep', ['30'], { detached: true, stdio: 'ignore' });
      } finally {
        if (Number(readFileSync(LAST_PID, 'utf8')) < previous) writeFileSync(LAST_PID, String(previous));
      }
      if (child.pid === pid) {
        onTestFinished(() => killGroupIfAlive(pid));
        return child;
      }
      child.kill('SIGKILL');
      await once(child, 'exit');
      // Taken by another process (or thread) meanwhile: it is not free again soon.
      if (processStartTime(pid) !== null) return null;
    }
    return null;
  } finally {
    if (Number(readFileSync(LAST_PID, 'utf8')) < previous) writeFileSync(LAST_PID, String(previous));
  }
}

describe.skipIf(!lastPid)('pid reuse, made for real', () => {
  it('a run\'s process dies with its runner and its pid goes to an unrelated process: recovery neither adopts nor signals it, the run is abandoned, the stranger lives on', async () => {
    const clock = new SimulatedClock(T0);
    const runtime = await useRuntime({ clock, runnerId: 'new-host:2:recoverer' });
    const old = await openRuntime({ dataDir: runtime.dataDir, clock, runnerId: 'old-host:1:gone' });
    let closed = false;
    onTestFinished(() => void (closed || old.close()));
    const loop = await createCommandLoop(runtime, { name: 'job', command: 'sleep 30', schedule: { manual: true } });

    // The real attempt path spawns the run's process (its wrapper leads the group).
    const spawned = firstValueFrom(old.log.events$.pipe(filter((e) => e.type === 'process.spawned')));
    const running = executeRun(old, findLoop(old.db, loop.id), { runId: newId('run', clock.now()), slot: 'manual:x', scheduledFor: new Date(clock.now()).toISOString(), trigger: 'manual' });
    running.catch(() => undefined);
    const event = await spawned;
    const runId = event.streamId.slice('run:'.length);
    const recorded = event.data as { pid: number; pgid: number; startTime: string };
    onTestFinished(() => killGroupIfAlive(recorded.pgid));
    // The runner dies (kill -9: nothing more recorded), and so does the run's process group.
    old.close();
    closed = true;
    process.kill(-recorded.pgid, 'SIGKILL');
    await waitForGroupGone(recorded.pgid);
    // Reaped too (a zombie still holds its pid).
    await waitFor(() => processStartTime(recorded.pid) === null, 5000, `pid ${recorded.pid} to be free`);

    // The kernel hands the pid to a stranger: ours, or — on a busy machine (other test workers
    // start processes and threads all the time) — someone else's that took it first, which is the
    // same situation for recovery (and is never signalled by this test either).
    const stranger = await spawnWithPid(recorded.pid);
    expect(stranger !== null || processStartTime(recorded.pid) !== null, `pid ${recorded.pid} could not be given to a new process`).toBe(true);
    const strangerStart = processStartTime(recorded.pid);
    expect(strangerStart).not.toBeNull();
    expect(strangerStart).not.toBe(recorded.startTime);

    clock.advance(TTL + 1);
    const report = await recoverRuns(runtime);
    expect(report.orphaned).toEqual([]);
    expect(report.unconfirmed).toEqual([]);
    expect(report.abandoned).toEqual([runId]);
    expect(eventTypes(runtime.log, `run:${runId}`)).toEqual(['run.claimed', 'process.spawn_requested', 'process.spawned', 'run.abandoned']);
    expect(findRun(runtime.db, runId)).toMatchObject({ status: 'abandoned', pid: recorded.pid });
    expect(findRun(runtime.db, runId).error).toMatch(new RegExp(`the process \\(pid ${recorded.pid}\\) is gone`));
    // Never signalled: alive, not stopped, the same process.
    expect(isAlive(recorded.pid)).toBe(true);
    if (stranger) expect(procStat(recorded.pid)?.state).toBe('S'); // our sleep; someone else's may be running
    expect(processStartTime(recorded.pid)).toBe(strangerStart);
    // The checker does not mistake the stranger for the run's process either.
    expectInvariants(runtime);
  });
});

describe('zombies', () => {
  it('a run whose command leaves a child it never reaps: the zombie counts as gone; the end is recorded when the command ends, not after the 5 s kill grace', async () => {
    const runtime = await useRuntime();
    // sh starts a short child, then becomes `sleep 1`, which never reaps it: a zombie in the group.
    const loop = await createCommandLoop(runtime, { name: 'zombie', command: 'sleep 0.1 & exec sleep 1', schedule: { manual: true } });
    const spawned = firstValueFrom(runtime.log.events$.pipe(filter((e) => e.type === 'process.spawned')));
    const started = Date.now();
    const running = executeRun(runtime, findLoop(runtime.db, loop.id), { runId: newId('run', runtime.clock.now()), slot: 'manual:z', scheduledFor: new Date(runtime.clock.now()).toISOString(), trigger: 'manual' });
    const { pgid } = (await spawned).data as { pgid: number };
    // The zombie: a member of the run's group in state Z.
    let zombie = 0;
    await waitFor(() => {
      zombie = groupMembers(pgid).find((pid) => procStat(pid)?.state === 'Z') ?? 0;
      return zombie !== 0;
    }, 5000, 'a zombie in the run\'s group');
    const run = await running;
    const tookMs = Date.now() - started;
    expect(run).toMatchObject({ status: 'succeeded', exitCode: 0 });
    expect(tookMs).toBeLessThan(4000);
    expectInvariants(runtime);
  });
});

/** Every process of group `pgid` (zombies included), from /proc. */
function groupMembers(pgid: number): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => procStat(pid)?.pgrp === pgid);
}

describe('offsetFileClock (LOOPS_TEST_CLOCK_OFFSET_FILE, test-only)', () => {
  it('moves the wall clock by the file\'s milliseconds as the file changes; monotonic time and timers are the base\'s', () => {
    const file = join(tempDir(), 'offset');
    const base = new SimulatedClock(T0);
    const clock: Clock = offsetFileClock(file, base);
    expect(clock.now()).toBe(T0); // no file: no offset
    writeFileSync(file, String(2 * 3_600_000));
    base.advance(50); // looked at again at most every 50 ms
    expect(clock.now()).toBe(T0 + 50 + 2 * 3_600_000);
    writeFileSync(file, '-3600000');
    base.advance(50);
    expect(clock.now()).toBe(T0 + 100 - 3_600_000);
    expect(clock.monotonic()).toBe(base.monotonic());
    let fired = false;
    clock.setTimeout(() => (fired = true), 10);
    base.advance(10);
    expect(fired).toBe(true);
    writeFileSync(file, 'not a number');
    base.advance(50);
    expect(clock.now()).toBe(T0 + 160);
  });
});
