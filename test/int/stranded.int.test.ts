/**
 * Work a decision promised and nobody started: a fired slot whose runner died before claiming it,
 * a queued retry of a loop that is stopped. Deciding and claiming are separate durable steps, so
 * such work is never lost: the next pass claims it, unless the loop's catch-up policy says it is
 * too late now — then `slot.dropped` records why, and `loops why` tells it. Real SQLite files, real
 * processes, a SimulatedClock; the invariant checker after each.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { explainSlot } from '../../src/runtime/admin/why.js';
import { decide, tick } from '../../src/runtime/daemon/pass.js';
import { changeLoopState, createCommandLoop } from '../../src/runtime/loops/commands.js';
import { findLoop } from '../../src/runtime/queries/loops.js';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { eventTypes, expectInvariants, findViolations } from '../helpers/invariants.js';
import { useRuntime } from '../helpers/tmp.js';

const MIN = 60_000;
const T0 = Date.parse('2026-03-01T00:00:00.000Z');

/** A second runner on the same data directory that decides and then dies before claiming anything. */
async function decideAndDie(first: Runtime, clock: SimulatedClock): Promise<string> {
  const doomed = await openRuntime({ dataDir: first.dataDir, clock, runnerId: 'doomed-host:9:pass' });
  const { decisions } = await decide(doomed, clock.now());
  doomed.close(); // kill -9: its runner lease is left to run out, its fired slot to wait
  const fired = decisions.find((d) => d.type === 'slot.fired');
  expect(fired).toBeDefined();
  return (fired!.data as { runId: string }).runId;
}

async function setup(catchUp: 'none' | 'latest') {
  const clock = new SimulatedClock(T0);
  const runtime = await useRuntime({ clock, runnerId: 'test-host:1:tick' });
  const loop = await createCommandLoop(runtime, { name: 'job', command: 'true', catchUp, schedule: { every: '1h', tz: 'UTC' } });
  clock.jumpWall(60 * MIN + 1000);
  return { clock, runtime, loop };
}

describe('a fired slot whose runner died before claiming it', () => {
  it('is claimed and run by the next pass, once (catch-up latest)', async () => {
    const { clock, runtime, loop } = await setup('latest');
    const runId = await decideAndDie(runtime, clock);
    // Settled now, the fired slot nobody claimed is what the invariant checker exists to catch.
    expect(findViolations(runtime.db, runtime.log, { settledAt: clock.now(), processes: false })).toEqual([
      `loop:${loop.id}: slot.fired 2026-03-01T01:00:00.000Z → ${runId} due at 2026-03-01T01:00:00.000Z still waits in the run queue`,
    ]);
    // The dead runner's lease runs out; until then its work is its own (not stranded).
    clock.jumpWall(31_000);
    const result = await tick(runtime);
    expect(result.decisions).toEqual([]);
    expect(result.started.map((s) => [s.runId, s.kind])).toEqual([[runId, 'fired']]);
    expect(result.runs.map((r) => [r.id, r.status])).toEqual([[runId, 'succeeded']]);
    expect((await tick(runtime)).runs).toEqual([]);
    expect(explainSlot(runtime.db, findLoop(runtime.db, loop.id), T0 + 60 * MIN, clock.now()).explanation).toMatch(
      new RegExp(`^the slot 2026-03-01T01:00:00.000Z fired as run ${runId}.*; the run succeeded`),
    );
    expectInvariants(runtime, { settledAt: clock.now() });
  });

  it('catch-up none, found after the grace: not run, recorded slot.dropped, and why says so', async () => {
    const { clock, runtime, loop } = await setup('none');
    const runId = await decideAndDie(runtime, clock);
    clock.jumpWall(5 * MIN);
    const result = await tick(runtime);
    expect(result.runs).toEqual([]);
    expect(result.decisions.map((d) => d.type)).toEqual(['slot.dropped']);
    expect(result.decisions[0]!.data).toMatchObject({ runId, attempt: 1 });
    expect((result.decisions[0]!.data as { reason: string }).reason).toMatch(/^stranded: runner doomed-host:9:pass stopped before starting it; catch-up none \(5m/);
    expect(eventTypes(runtime.log, `loop:${loop.id}`)).toEqual(['loop.created', 'slot.fired', 'slot.dropped']);
    expect(runtime.db.prepare('SELECT count(*) AS n FROM run_queue').get()).toEqual({ n: 0 });
    expect(explainSlot(runtime.db, findLoop(runtime.db, loop.id), T0 + 60 * MIN, clock.now()).explanation).toMatch(
      new RegExp(`^the slot 2026-03-01T01:00:00.000Z fired as run ${runId} \\(decided .*\\), which never ran: stranded: .*catch-up none`),
    );
    expectInvariants(runtime, { settledAt: clock.now() });
  });

  it('is not someone else\'s to drop while its runner lives: a live runner\'s queued slot stays queued', async () => {
    const { clock, runtime } = await setup('none');
    const alive = await openRuntime({ dataDir: runtime.dataDir, clock, runnerId: 'alive-host:8:pass' });
    onTestFinished(() => alive.close());
    const { decisions } = await decide(alive, clock.now());
    const runId = (decisions.find((d) => d.type === 'slot.fired')!.data as { runId: string }).runId;
    clock.jumpWall(5 * MIN); // late, but its runner's lease (30 s) is renewed by its dispatcher: here, take it again
    await alive.leases.take(`runner:${alive.runnerId}`, alive.runnerId, 30_000, clock.now());
    const other = await decide(runtime, clock.now());
    expect(other.decisions).toEqual([]);
    expect(runtime.db.prepare('SELECT run_id AS runId FROM run_queue').all()).toEqual([{ runId }]);
  });
});

describe('stopping a loop gives up its queued work, on the record', () => {
  it('a pending retry is dropped with the stop; why tells the retry and the drop', async () => {
    const clock = new SimulatedClock(T0);
    const runtime = await useRuntime({ clock, runnerId: 'test-host:1:tick' });
    const loop = await createCommandLoop(runtime, { name: 'flaky', command: 'exit 1', attempts: 3, retryDelay: '10m', schedule: { every: '1h', tz: 'UTC' } });
    clock.jumpWall(60 * MIN + 1000);
    const first = await tick(runtime);
    expect(first.runs.map((r) => r.status)).toEqual(['failed']);
    const retry = runtime.db.prepare("SELECT run_id AS runId FROM run_queue WHERE kind = 'retry'").get() as { runId: string };
    expect(retry).toBeDefined();
    expect(explainSlot(runtime.db, findLoop(runtime.db, loop.id), T0 + 60 * MIN, clock.now()).explanation).toMatch(
      new RegExp(`the run failed \\(decided [^)]*\\); retried — attempt 2 after run_\\S+ failed: exited with code 1: ${retry.runId} is due at `),
    );
    await changeLoopState(runtime, 'flaky', 'stop', { reason: 'enough' });
    expect(eventTypes(runtime.log, `loop:${loop.id}`).slice(-2)).toEqual(['slot.dropped', 'loop.stopped']);
    expect((await runtime.log.readStream(`loop:${loop.id}`)).at(-2)!.data).toMatchObject({ runId: retry.runId, attempt: 2, reason: 'loop stopped before it started' });
    expect(runtime.db.prepare('SELECT count(*) AS n FROM run_queue').get()).toEqual({ n: 0 });
    clock.jumpWall(30 * MIN);
    expect((await tick(runtime)).runs).toEqual([]);
    expectInvariants(runtime, { settledAt: clock.now() });
  });
});
