/**
 * The runtime's default way of starting processes (`spawner: 'auto'`, SpawnerUse `busy`): a lone
 * run is forked by the runner itself; runs one after another go through the spawner helper once
 * it is ready. Which process forked a run is read from the run itself: it prints its parent's pid.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { Daemon } from '../../src/runtime/daemon/daemon.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { Spawner } from '../../src/runtime/execution/spawner.js';
import { createCommandLoop } from '../../src/runtime/loops/commands.js';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { eventTypes, expectLogConsistent } from '../helpers/invariants.js';
import { tempDir } from '../helpers/tmp.js';

async function open(options: { spawner?: 'inline' | 'helper' | 'auto' } = {}): Promise<Runtime> {
  const runtime = await openRuntime({ dataDir: join(tempDir(), 'data'), runnerId: 'test-host:1:auto', ...options });
  onTestFinished(() => runtime.close());
  return runtime;
}

/** Runs the loop `parent` (which prints its parent's pid) once: the run, and that pid. */
async function runOnce(runtime: Runtime) {
  const run = await runNow(runtime, 'parent');
  expect(run.status).toBe('succeeded');
  return { run, parent: Number(run.stdout.trim()) };
}

describe("spawner 'auto' (the runtime's default)", () => {
  it('a lone run is forked here; runs one after another start the helper and go through it once it is ready, recorded alike', async () => {
    const runtime = await open();
    await createCommandLoop(runtime, { name: 'parent', command: 'echo $PPID', schedule: { manual: true, tz: 'UTC' } });
    const spawner = runtime.spawner!;
    expect(spawner.use).toBe('busy');

    // The first run: no helper is started for it (a `loops run-now` never starts one).
    const first = await runOnce(runtime);
    expect(spawner.pid).toBeNull();
    expect(spawner.stats.started).toBe(0);
    // Inline, the run's exit-status wrapper forks the command: its parent's parent is this process.
    expect(first.parent).not.toBe(process.pid);

    // The second, right after: it starts the helper, and is forked here without waiting for it.
    const second = await runOnce(runtime);
    expect(spawner.stats.started).toBe(1);
    const helperPid = spawner.pid;
    expect(helperPid).not.toBeNull();
    expect(second.parent).not.toBe(helperPid);

    // Once the helper is ready, the runs go through it: the helper is the command's parent.
    await spawner.ready();
    const third = await runOnce(runtime);
    const fourth = await runOnce(runtime);
    expect([third.parent, fourth.parent]).toEqual([helperPid, helperPid]);
    expect(spawner.stats.started).toBe(1);

    // Whichever process forked it, a run is recorded the same way.
    for (const { run } of [first, second, third, fourth]) {
      expect(eventTypes(runtime.log, `run:${run.id}`)).toEqual(['run.claimed', 'process.spawn_requested', 'process.spawned', 'process.exited']);
      const spawned = (await runtime.log.readStream(`run:${run.id}`)).find((e) => e.type === 'process.spawned')!;
      expect(Object.keys(spawned.data as object).sort()).toEqual(['bootId', 'cwd', 'env', 'pgid', 'pid', 'startTime']);
      expect(run).toMatchObject({ exitCode: 0, signal: null, error: null });
    }
    expectLogConsistent(runtime);
  });

  it("spawner 'inline' never starts a helper; 'helper' sends the first run through one", async () => {
    const inline = await open({ spawner: 'inline' });
    await createCommandLoop(inline, { name: 'parent', command: 'echo $PPID', schedule: { manual: true, tz: 'UTC' } });
    for (let i = 0; i < 3; i++) await runOnce(inline);
    expect(inline.spawner).toBeNull();

    const helper = await open({ spawner: 'helper' });
    await createCommandLoop(helper, { name: 'parent', command: 'echo $PPID', schedule: { manual: true, tz: 'UTC' } });
    const { parent } = await runOnce(helper);
    expect(helper.spawner!.use).toBe('always');
    expect(parent).toBe(helper.spawner!.pid);
  });

  it('an unknown spawner choice is refused before anything is opened', async () => {
    const dataDir = join(tempDir(), 'data');
    await expect(openRuntime({ dataDir, spawner: 'Helper' as 'helper' })).rejects.toThrow(/^openRuntime: spawner "Helper" is not one of auto, inline, helper$/);
    expect(existsSync(dataDir)).toBe(false);
  });

  it("a daemon told to fork inline drops the runtime's helper; by default it sends every run through one", async () => {
    const inline = await open();
    const daemon = new Daemon(inline, { log: () => undefined, spawner: 'inline' });
    onTestFinished(() => daemon.stop('test finished'));
    await daemon.start();
    expect(inline.spawner).toBeNull();
    await daemon.stop('test');

    const helper = await open();
    const other = new Daemon(helper, { log: () => undefined });
    onTestFinished(() => other.stop('test finished'));
    await other.start();
    expect(helper.spawner!.use).toBe('always');
    await other.stop('test');
  });
});

describe('Spawner.wanted() in busy use', () => {
  it('no until a helper is ready; two asks within the idle time start one; asks further apart do not', async () => {
    const clock = new SimulatedClock(0);
    const spawner = new Spawner({ use: 'busy', clock, idleMs: 1000 });
    onTestFinished(() => spawner.close());
    expect(spawner.wanted()).toBe(false);
    clock.advance(1001);
    expect(spawner.wanted()).toBe(false);
    expect(spawner.stats.started).toBe(0);
    clock.advance(1000);
    expect(spawner.wanted()).toBe(false); // starts the helper; this spawn does not wait for it
    expect(spawner.stats.started).toBe(1);
    await spawner.ready();
    expect(spawner.wanted()).toBe(true);

    const always = new Spawner({ clock });
    onTestFinished(() => always.close());
    expect(always.wanted()).toBe(true); // started by the spawn itself
    always.close();
    expect(always.wanted()).toBe(false);
  });
});
