/**
 * Retries: a failed, timed-out or abandoned attempt of a scheduled slot is retried under the same
 * slot after the back-off, each attempt its own run; a cancelled one never is.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { changeLoopState, createCommandLoop, type CreateCommandLoopInput } from '../../src/runtime/loops/commands.js';
import { listRuns } from '../../src/runtime/queries/loops.js';
import { tick } from '../../src/runtime/daemon/pass.js';
import { retryDelay } from '../../src/runtime/loops/decisions.js';
import { expectLogConsistent } from '../helpers/invariants.js';
import { useRuntime } from '../helpers/tmp.js';

const MIN = 60_000;
const HOUR = 3_600_000;
const T0 = Date.parse('2026-01-01T00:00:00.000Z');

async function setup(input: Partial<CreateCommandLoopInput>) {
  const clock = new SimulatedClock(T0);
  const runtime = await useRuntime({ clock });
  onTestFinished(() => expectLogConsistent(runtime));
  await createCommandLoop(runtime, { name: 'flaky', command: 'exit 1', schedule: { every: '1h', tz: 'UTC' }, ...input });
  return { clock, runtime };
}

describe('retries', () => {
  it('back-off: retryDelay × backoff^(n−2), capped', () => {
    const p = { retryDelayMs: 10_000, backoff: 3, maxRetryDelayMs: 60_000 };
    expect([2, 3, 4, 5].map((n) => retryDelay(p, n))).toEqual([10_000, 30_000, 60_000, 60_000]);
    expect(retryDelay({ ...p, maxRetryDelayMs: null }, 5)).toBe(270_000);
  });

  it('a failing slot is tried --attempts times, each attempt its own run, after the back-off', async () => {
    const { clock, runtime } = await setup({ attempts: 3, retryDelay: '1m', backoff: 3 });
    clock.jumpWall(HOUR + 1000);
    const first = await tick(runtime);
    expect(first.runs.map((r) => r.attempt)).toEqual([1]);
    // The retry is a durable deadline in the log (and its projection), due a minute after the finish.
    expect(runtime.db.prepare('SELECT kind, attempt, due_at AS dueAt FROM run_queue').all()).toEqual([
      { kind: 'retry', attempt: 2, dueAt: new Date(Date.parse(first.runs[0]!.finishedAt!) + MIN).toISOString() },
    ]);
    // Not yet: the first retry is due a minute after the first attempt finished.
    clock.jumpWall(30_000);
    expect((await tick(runtime)).runs).toEqual([]);
    clock.jumpWall(31_000);
    expect((await tick(runtime)).runs.map((r) => r.attempt)).toEqual([2]);
    clock.jumpWall(3 * MIN + 1000);
    expect((await tick(runtime)).runs.map((r) => r.attempt)).toEqual([3]);
    clock.jumpWall(10 * MIN);
    expect((await tick(runtime)).runs).toEqual([]);
    const runs = listRuns(runtime.db, { limit: 10 });
    expect(runs.map((r) => [r.attempt, r.status, r.exitCode])).toEqual([
      [3, 'failed', 1],
      [2, 'failed', 1],
      [1, 'failed', 1],
    ]);
    // Same slot, three separate records.
    expect(new Set(runs.map((r) => r.slot)).size).toBe(1);
    expect(new Set(runs.map((r) => r.id)).size).toBe(3);
  });

  it('a success ends the retries', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'loops-retry-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const { clock, runtime } = await setup({ command: 'test -f ok || { touch ok; exit 1; }', cwd: dir, attempts: 5, retryDelay: '1m' });
    clock.jumpWall(HOUR + 1000);
    expect((await tick(runtime)).runs.map((r) => [r.attempt, r.status])).toEqual([[1, 'failed']]);
    clock.jumpWall(2 * MIN);
    expect((await tick(runtime)).runs.map((r) => [r.attempt, r.status])).toEqual([[2, 'succeeded']]);
    clock.jumpWall(30 * MIN);
    expect((await tick(runtime)).runs).toEqual([]);
    expect(runtime.db.prepare('SELECT COUNT(*) AS n FROM run_queue').get()).toEqual({ n: 0 });
  });

  it('a cancelled run is never retried', async () => {
    const { clock, runtime } = await setup({ command: 'sleep 30', attempts: 3, retryDelay: '1m', killGrace: '200ms' });
    clock.jumpWall(HOUR + 1000);
    const controller = new AbortController();
    const sub = runtime.log.events$.subscribe((e) => {
      if (e.type === 'process.spawned') controller.abort('operator said stop');
    });
    onTestFinished(() => sub.unsubscribe());
    const result = await tick(runtime, { signal: controller.signal });
    expect(result.runs.map((r) => [r.attempt, r.status])).toEqual([[1, 'cancelled']]);
    clock.jumpWall(10 * MIN);
    expect((await tick(runtime)).runs).toEqual([]);
    expect(runtime.db.prepare('SELECT COUNT(*) AS n FROM run_queue').get()).toEqual({ n: 0 });
  });

  it('a retry waits while its loop is paused, and runs after resume', async () => {
    const { clock, runtime } = await setup({ attempts: 2, retryDelay: '1m' });
    clock.jumpWall(HOUR + 1000);
    await tick(runtime);
    await changeLoopState(runtime, 'flaky', 'pause');
    clock.jumpWall(5 * MIN);
    expect((await tick(runtime)).runs).toEqual([]);
    await changeLoopState(runtime, 'flaky', 'resume');
    expect((await tick(runtime)).runs.map((r) => r.attempt)).toEqual([2]);
  });
});
