/**
 * Loops pinned to host labels (`--runs-on`, issue 15): any runner decides a pinned loop's slots
 * (the compare-and-set makes each decision once), the fired slot is queued work, and only a runner
 * with every label claims it. Work no live runner has the labels for waits — said by `why` and
 * `daemon status --fleet` — until one comes, or its catch-up policy records it dropped. Several
 * "hosts" share one data directory here as a fleet shares a store: each runtime's runner id names
 * its host. Real SQLite files (PostgreSQL in the `postgres` project), real processes, a SimulatedClock.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { explainSlot } from '../../src/runtime/admin/why.js';
import { Daemon } from '../../src/runtime/daemon/daemon.js';
import { recordHostStarted } from '../../src/runtime/daemon/hosts.js';
import { fleetStatus } from '../../src/runtime/daemon/fleet.js';
import { tick } from '../../src/runtime/daemon/pass.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { holdRunnerLease } from '../../src/runtime/leases.js';
import { createCommandLoop } from '../../src/runtime/loops/commands.js';
import { findLoop } from '../../src/runtime/queries/loops.js';
import { knownHosts } from '../../src/runtime/queries/hosts.js';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { eventTypes, expectInvariants } from '../helpers/invariants.js';
import { useRuntime } from '../helpers/tmp.js';

const MIN = 60_000;
const HOUR = 60 * MIN;
const T0 = Date.parse('2026-03-01T00:00:00.000Z');

/** Another host's runner on the same store, closed when the test ends. */
async function host(first: Runtime, clock: SimulatedClock, runnerId: string, labels: string[] = []): Promise<Runtime> {
  const other = await openRuntime({ dataDir: first.dataDir, clock, runnerId, labels });
  onTestFinished(() => other.close());
  return other;
}

/** A laptop without labels (it creates the loops) and a GPU box labelled gpu, at T0. */
async function fleet() {
  const clock = new SimulatedClock(T0);
  const laptop = await useRuntime({ clock, runnerId: 'laptop:1:cli' });
  const gpu = await host(laptop, clock, 'gpu-box:2:tick', ['gpu', 'linux']);
  return { clock, laptop, gpu };
}

const runnerOf = (runtime: Runtime, runId: string) =>
  (runtime.db.prepare('SELECT runner_id AS r FROM loop_runs WHERE id = ?').get(runId) as { r: string } | undefined)?.r;

describe('--runs-on: only a runner with the labels claims a pinned loop', () => {
  it('a runner without the label decides the slot and leaves it queued; the labelled one runs it, once', async () => {
    const { clock, laptop, gpu } = await fleet();
    // Not checked here (preflight), where it does not run: a command only the GPU box has.
    const loop = await createCommandLoop(laptop, { name: 'train', command: 'true', runsOn: 'gpu', schedule: { every: '1h', tz: 'UTC' } });
    expect(loop.runsOn).toEqual(['gpu']);
    clock.jumpWall(HOUR);
    const first = await tick(laptop);
    expect(first.decisions.map((d) => d.type)).toEqual(['slot.fired']);
    expect(first.started).toEqual([]);
    const runId = (first.decisions[0]!.data as { runId: string }).runId;
    expect(laptop.db.prepare('SELECT count(*) AS n FROM run_queue').get()).toEqual({ n: 1 });
    // The labelled host's pass claims and runs it.
    const second = await tick(gpu);
    expect(second.decisions).toEqual([]);
    expect(second.runs.map((r) => [r.id, r.status])).toEqual([[runId, 'succeeded']]);
    expect(runnerOf(laptop, runId)).toBe('gpu-box:2:tick');
    expect((await tick(gpu)).runs).toEqual([]);
    expect((await tick(laptop)).runs).toEqual([]);
    expectInvariants(laptop, { settledAt: clock.now() });
  });

  it('needs every label; a host id is a label of its host', async () => {
    const { clock, laptop, gpu } = await fleet();
    const both = await createCommandLoop(laptop, { name: 'both', command: 'true', runsOn: ['gpu', 'cuda12'], schedule: { every: '1h', tz: 'UTC' } });
    const pinned = await createCommandLoop(laptop, { name: 'pinned', command: 'true', runsOn: 'gpu-box', schedule: { every: '1h', tz: 'UTC' } });
    const cuda = await host(laptop, clock, 'gpu-box-2:3:tick', ['gpu', 'cuda12']);
    clock.jumpWall(HOUR);
    const onGpu = await tick(gpu);
    expect(onGpu.runs.map((r) => r.loopName)).toEqual(['pinned']);
    const onCuda = await tick(cuda);
    expect(onCuda.runs.map((r) => r.loopName)).toEqual(['both']);
    expect(findLoop(laptop.db, both.id).runsOn).toEqual(['gpu', 'cuda12']);
    expect(findLoop(laptop.db, pinned.id).runsOn).toEqual(['gpu-box']);
    expectInvariants(laptop, { settledAt: clock.now() });
  });

  it('a retry of a pinned loop goes to a labelled runner too', async () => {
    const { clock, laptop, gpu } = await fleet();
    await createCommandLoop(laptop, { name: 'flaky', command: 'false', runsOn: 'gpu', attempts: 2, retryDelay: '1m', schedule: { every: '1h', tz: 'UTC' } });
    clock.jumpWall(HOUR);
    await tick(laptop);
    expect((await tick(gpu)).runs.map((r) => r.status)).toEqual(['failed']);
    clock.jumpWall(2 * MIN);
    expect((await tick(laptop)).started).toEqual([]);
    const retry = await tick(gpu);
    expect(retry.started.map((s) => [s.kind, s.attempt])).toEqual([['retry', 2]]);
    expect(retry.runs.map((r) => r.runnerId)).toEqual(['gpu-box:2:tick']);
    expectInvariants(laptop, { settledAt: clock.now() });
  });
});

describe('pinned work no live runner may claim', () => {
  it('waits while a labelled runner lives (busy), and why and daemon status --fleet say what it waits for', async () => {
    const { clock, laptop, gpu } = await fleet();
    const loop = await createCommandLoop(laptop, { name: 'train', command: 'true', runsOn: 'gpu', catchUp: 'none', schedule: { every: '1h', tz: 'UTC' } });
    clock.jumpWall(HOUR);
    await tick(laptop);
    // Nobody with the label has ever started a daemon.
    let why = explainSlot(laptop.db, findLoop(laptop.db, loop.id), T0 + HOUR, clock.now()).explanation;
    expect(why).toMatch(/fired as run run_\S+ \(decided .*\); it waits for a runner labelled gpu \(no daemon started with those labels yet: start one with loops daemon start --labels gpu\)$/);
    let status = await fleetStatus(laptop);
    expect(status.waiting).toBe(1);
    expect(status.noRunner).toEqual([{ runsOn: ['gpu'], waiting: 1, loops: ['train'] }]);
    // A labelled daemon comes up (what Daemon.start records with its lease) and stays alive (busy
    // elsewhere, say): the slot is its to claim, past the grace or not — it is not dropped.
    await gpu.log.batch(async (batch) => {
      await holdRunnerLease(gpu, undefined, batch);
      await recordHostStarted(gpu, 'test', batch);
    });
    why = explainSlot(laptop.db, findLoop(laptop.db, loop.id), T0 + HOUR, clock.now()).explanation;
    expect(why).toMatch(/; it waits for a runner labelled gpu \(hosts with those labels: gpu-box; loops daemon status --fleet shows which are up\)$/);
    clock.jumpWall(5 * MIN);
    await holdRunnerLease(gpu);
    expect((await tick(laptop)).decisions).toEqual([]);
    status = await fleetStatus(laptop);
    expect(status.noRunner).toEqual([]);
    const run = await tick(gpu);
    expect(run.runs.map((r) => r.status)).toEqual(['succeeded']);
    why = explainSlot(laptop.db, findLoop(laptop.db, loop.id), T0 + HOUR, clock.now()).explanation;
    expect(why).toMatch(/; the run succeeded \(decided/);
    expectInvariants(laptop, { settledAt: clock.now() });
  });

  it('catch-up none: past the grace with no labelled runner alive, it is dropped, with why', async () => {
    const { clock, laptop } = await fleet();
    const loop = await createCommandLoop(laptop, { name: 'train', command: 'true', runsOn: 'gpu', catchUp: 'none', schedule: { every: '1h', tz: 'UTC' } });
    clock.jumpWall(HOUR);
    await tick(laptop);
    clock.jumpWall(30_000);
    expect((await tick(laptop)).decisions).toEqual([]); // within the grace: it may still come
    clock.jumpWall(5 * MIN);
    const late = await tick(laptop);
    expect(late.decisions.map((d) => d.type)).toEqual(['slot.dropped']);
    expect((late.decisions[0]!.data as { reason: string }).reason).toMatch(/^stranded: no live runner has the label gpu it runs on; catch-up none \(5m30s late\)$/);
    expect(eventTypes(laptop.log, `loop:${loop.id}`)).toEqual(['loop.created', 'slot.fired', 'slot.dropped']);
    expect(explainSlot(laptop.db, findLoop(laptop.db, loop.id), T0 + HOUR, clock.now()).explanation).toMatch(/which never ran: stranded: no live runner has the label gpu/);
    expect((await fleetStatus(laptop)).noRunner).toEqual([]);
    expectInvariants(laptop, { settledAt: clock.now() });
  });

  it('catch-up latest: an earlier waiting slot is dropped once a later one fired; the latest waits and runs', async () => {
    const { clock, laptop, gpu } = await fleet();
    await createCommandLoop(laptop, { name: 'train', command: 'true', runsOn: 'gpu', schedule: { every: '1h', tz: 'UTC' } });
    clock.jumpWall(HOUR);
    const first = (await tick(laptop)).decisions;
    clock.jumpWall(HOUR);
    const second = (await tick(laptop)).decisions;
    expect(first.map((d) => d.type)).toEqual(['slot.fired']);
    // The pass that fires the later slot drops the earlier one, in the same transaction.
    expect(second.map((d) => [d.type, (d.data as { runId: string }).runId])).toEqual([
      ['slot.fired', expect.any(String)],
      ['slot.dropped', (first[0]!.data as { runId: string }).runId],
    ]);
    expect((second[1]!.data as { reason: string }).reason).toMatch(/no live runner has the label gpu it runs on; catch-up latest: a later slot fired since/);
    clock.jumpWall(1000);
    expect((await tick(laptop)).decisions).toEqual([]);
    const ran = await tick(gpu);
    expect(ran.runs.map((r) => r.id)).toEqual([(second[0]!.data as { runId: string }).runId]);
    expectInvariants(laptop, { settledAt: clock.now() });
  });
});

describe('the daemon and its host', () => {
  it('records its start with its labels and its stop on its host stream; status --fleet shows them, then the host down', async () => {
    const clock = new SimulatedClock(T0);
    const runtime = await useRuntime({ clock, runnerId: 'gpu-box:7:daemon', labels: ['gpu'] });
    const daemon = new Daemon(runtime, { log: () => undefined, spawner: 'inline' });
    onTestFinished(() => daemon.stop('test finished'));
    await daemon.start();
    expect(knownHosts(runtime.db)).toMatchObject([{ id: 'gpu-box', runnerId: 'gpu-box:7:daemon', labels: ['gpu'], status: 'up', pid: process.pid }]);
    const cli = await host(runtime, clock, 'laptop:8:cli');
    const status = await fleetStatus(cli);
    expect(status.runners.filter((r) => r.kind === 'daemon')).toMatchObject([{ host: 'gpu-box', labels: ['gpu'], runnerId: 'gpu-box:7:daemon' }]);
    expect(status.down).toEqual([]);
    await daemon.stop('test');
    expect(eventTypes(runtime.log, 'host:gpu-box')).toEqual(['host.started', 'host.stopped']);
    const after = await fleetStatus(cli);
    expect(after.runners.filter((r) => r.kind === 'daemon')).toEqual([]);
    expect(after.down).toMatchObject([{ host: 'gpu-box', labels: ['gpu'], status: 'stopped' }]);
    expectInvariants(runtime, { settledAt: clock.now() });
  });
});

describe('run-now and create of a pinned loop', () => {
  it('run-now on a host without the labels is refused, with a way out; --here runs it anyway', async () => {
    const { laptop, gpu } = await fleet();
    await createCommandLoop(laptop, { name: 'train', command: 'true', runsOn: 'gpu', schedule: { manual: true, tz: 'UTC' } });
    await expect(runNow(laptop, 'train')).rejects.toThrow(/^loop train runs on runners labelled gpu; this host \(laptop, no labels\) has not all of them$/);
    expect(laptop.db.prepare('SELECT count(*) AS n FROM loop_runs').get()).toEqual({ n: 0 });
    expect((await runNow(laptop, 'train', { here: true })).status).toBe('succeeded');
    expect((await runNow(gpu, 'train')).runnerId).toBe('gpu-box:2:tick');
  });

  it('bad labels are refused before anything is recorded', async () => {
    const { laptop } = await fleet();
    const make = (runsOn: string | string[]) => createCommandLoop(laptop, { name: 'x', command: 'true', runsOn, schedule: { every: '1h', tz: 'UTC' } });
    await expect(make('gpu box')).rejects.toThrow(/^--runs-on: invalid label "gpu box"$/);
    await expect(make(',')).rejects.toThrow(/^--runs-on: no label given$/);
    await expect(make(['gpu', '-x'])).rejects.toThrow(/^--runs-on: invalid label "-x"$/);
    expect(laptop.db.prepare('SELECT count(*) AS n FROM loops').get()).toEqual({ n: 0 });
    // Repeats are one label; order as given.
    expect((await make('linux, gpu,linux')).runsOn).toEqual(['linux', 'gpu']);
  });
});
