/**
 * The spawner helper ends when idle and starts again on demand (src/runtime/execution/spawner.ts,
 * `retire`): an idle runner keeps no second Node process, and no request is lost or run twice
 * across the helper's end. Real helpers and real children; the idle countdown runs on an injected
 * clock, so "idle for idleMs" is a clock step, not a sleep.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { Spawner, type SpawnerRequest } from '../../src/runtime/execution/spawner.js';
import { isAlive } from '../helpers/proc.js';
import { tempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';

const IDLE_MS = 5000;

function useSpawner(clock: SimulatedClock, idleMs = IDLE_MS): Spawner {
  const spawner = new Spawner({ clock, idleMs });
  onTestFinished(() => spawner.close());
  return spawner;
}

/** A request that appends one line to `marker` (how many times it ran), then exits with `code`. */
function appendOnce(dir: string, marker: string, line: string, code = 0): SpawnerRequest {
  return { file: '/bin/sh', args: ['-c', `echo ${line} >> ${marker}; exit ${code}`], cwd: dir, env: {}, stdout: join(dir, 'out'), stderr: join(dir, 'out') };
}

const lines = (file: string) => readFileSync(file, 'utf8').trim().split('\n');

describe('Spawner: the helper ends when idle and starts again on demand', () => {
  it('a helper with nothing pending ends after the idle time, not before; the next spawn starts another', async () => {
    const dir = tempDir();
    const clock = new SimulatedClock();
    const spawner = useSpawner(clock);
    await spawner.ready();
    const first = spawner.pid!;
    clock.advance(IDLE_MS - 1);
    expect(spawner.pid).toBe(first);
    clock.advance(1);
    expect(spawner.pid).toBeNull();
    await waitFor(() => !isAlive(first), 5000, `helper ${first} to exit`);
    expect(spawner.stats).toEqual({ started: 1, retired: 1 });
    // Ended for being idle: no start failure, the helper stays in use.
    expect(spawner.unavailableReason).toBeNull();
    const marker = join(dir, 'ran');
    const spawned = await spawner.spawn(appendOnce(dir, marker, 'a', 3));
    expect(await spawned.exit).toEqual({ code: 3, signal: null, lost: false });
    expect(spawner.pid).not.toBe(first);
    expect(spawner.pid).not.toBeNull();
    expect(lines(marker)).toEqual(['a']);
  });

  it('the countdown runs only while nothing is pending: a running process keeps its helper, whose exit report arrives', async () => {
    const dir = tempDir();
    const clock = new SimulatedClock();
    const spawner = useSpawner(clock);
    const go = join(dir, 'go');
    const spawned = await spawner.spawn({ file: '/bin/sh', args: ['-c', `while [ ! -e ${go} ]; do sleep 0.02; done; exit 5`], cwd: dir, env: {}, stdout: join(dir, 'o'), stderr: join(dir, 'o') });
    const helper = spawner.pid!;
    clock.advance(IDLE_MS * 10);
    expect(spawner.pid).toBe(helper);
    expect(isAlive(helper)).toBe(true);
    writeFileSync(go, '');
    expect(await spawned.exit).toEqual({ code: 5, signal: null, lost: false });
    // Idle from the exit report on.
    expect(spawner.pid).toBe(helper);
    clock.advance(IDLE_MS);
    expect(spawner.pid).toBeNull();
    await waitFor(() => !isAlive(helper), 5000, `helper ${helper} to exit`);
    expect(spawner.stats).toEqual({ started: 1, retired: 1 });
  });

  it('a spawn just before the idle time is up resets the countdown and goes to the same helper', async () => {
    const dir = tempDir();
    const clock = new SimulatedClock();
    const spawner = useSpawner(clock);
    await spawner.ready();
    const helper = spawner.pid!;
    clock.advance(IDLE_MS - 1);
    const marker = join(dir, 'ran');
    const pending = spawner.spawn(appendOnce(dir, marker, 'x'));
    clock.advance(IDLE_MS); // unanswered yet: pending, so no countdown
    expect(spawner.pid).toBe(helper);
    const spawned = await pending;
    expect(await spawned.exit).toMatchObject({ code: 0, lost: false });
    expect(lines(marker)).toEqual(['x']);
    expect(spawner.stats).toEqual({ started: 1, retired: 0 });
  });

  it('a spawn in the same turn as the helper\'s end goes to a new helper and runs once', async () => {
    const dir = tempDir();
    const clock = new SimulatedClock();
    const spawner = useSpawner(clock);
    await spawner.ready();
    const old = spawner.pid!;
    const marker = join(dir, 'ran');
    clock.advance(IDLE_MS); // ends the helper (its stdin closed) …
    const spawned = await spawner.spawn(appendOnce(dir, marker, 'once')); // … and a request right after
    expect(await spawned.exit).toMatchObject({ code: 0, lost: false });
    expect(spawner.pid).not.toBe(old);
    await waitFor(() => !isAlive(old), 5000, `helper ${old} to exit`);
    expect(lines(marker)).toEqual(['once']);
    expect(spawner.stats).toEqual({ started: 2, retired: 1 });
  });

  it('bursts across many helper lifetimes: every spawn runs exactly once and every exit is reported', async () => {
    const dir = tempDir();
    const clock = new SimulatedClock();
    const spawner = useSpawner(clock);
    const marker = join(dir, 'ran');
    const helpers = new Set<number>();
    const expected: string[] = [];
    for (let round = 0; round < 4; round++) {
      const burst = Array.from({ length: 5 }, (_, i) => `r${round}s${i}`);
      expected.push(...burst);
      const spawned = await Promise.all(burst.map((line, i) => spawner.spawn(appendOnce(dir, marker, line, i))));
      helpers.add(spawner.pid!);
      const exits = await Promise.all(spawned.map((s) => s.exit));
      expect(exits).toEqual(burst.map((_, i) => ({ code: i, signal: null, lost: false })));
      clock.advance(IDLE_MS);
      expect(spawner.pid).toBeNull();
    }
    expect(helpers.size).toBe(4);
    expect(lines(marker).sort()).toEqual(expected.sort());
    expect(spawner.stats).toEqual({ started: 4, retired: 4 });
    for (const pid of helpers) await waitFor(() => !isAlive(pid), 5000, `helper ${pid} to exit`);
  });

  it('a helper ended before it was ready is no start failure', async () => {
    const clock = new SimulatedClock();
    const spawner = useSpawner(clock);
    const pids: number[] = [];
    for (let i = 0; i < 4; i++) {
      spawner.warm();
      pids.push(spawner.pid!);
      clock.advance(IDLE_MS); // before its ready line could have been read
      expect(spawner.pid).toBeNull();
    }
    for (const pid of pids) await waitFor(() => !isAlive(pid), 5000, `helper ${pid} to exit`);
    expect(spawner.unavailableReason).toBeNull();
    await spawner.ready();
    expect(spawner.pid).not.toBeNull();
  });

  it('onChange is told when a helper starts and when it ends', async () => {
    const clock = new SimulatedClock();
    const spawner = useSpawner(clock);
    const seen: Array<number | null> = [];
    const thrice = new Promise<void>((resolve) => {
      spawner.onChange = () => {
        if (seen.push(spawner.pid) === 3) resolve();
      };
    });
    await spawner.ready();
    const pid = spawner.pid!;
    clock.advance(IDLE_MS);
    await thrice; // started, ended (detached), exited
    expect(seen).toEqual([pid, null, null]);
    expect(isAlive(pid)).toBe(false);
  });
});
