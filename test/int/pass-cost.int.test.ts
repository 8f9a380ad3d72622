/**
 * A pass never folds a whole stream. A loop that fired every 10 s for eleven days has 100,000
 * events; deciding its next slot must cost what it costs for a loop created a minute ago:
 *  - a cold process (`loops tick`, a restarted daemon) starts folding from the stream's newest
 *    persisted snapshot, so it reads fewer than SNAPSHOT_EVERY events;
 *  - the daemon keeps its live actors between passes and reads only what was appended since.
 * Cost is counted in events folded (runtime.snapshots.folded), not in milliseconds: the same on a
 * loaded machine as on a quiet one. Restoring from a snapshot gives exactly the state a fold from
 * the first event gives.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { currentMachines } from '../../src/machines/registry.js';
import { DurableActor } from '../../src/runtime/actor.js';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { Daemon } from '../../src/runtime/daemon/daemon.js';
import { createCommandLoop } from '../../src/runtime/loops/commands.js';
import { tick } from '../../src/runtime/daemon/pass.js';
import type { RunView } from '../../src/runtime/queries/loops.js';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { SNAPSHOT_EVERY } from '../../src/runtime/snapshots.js';
import { fold } from '../../src/machines/fold.js';
import { getMachine } from '../../src/machines/registry.js';
import { expectInvariants } from '../helpers/invariants.js';
import { useRuntime } from '../helpers/tmp.js';

const SEC = 1000;
const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();
const EVENTS = 100_000;

/**
 * Appends `count` overlap skips to an `--every 10s` loop, as a daemon deciding them one by one
 * would have (in batches of 1,000 per transaction, for speed), and moves the clock past them.
 */
async function grow(runtime: Runtime, clock: SimulatedClock, loopId: string, count: number): Promise<void> {
  const actor = await DurableActor.load(runtime, `loop:${loopId}`);
  for (let i = 1; i <= count; ) {
    await runtime.log.batch(async (batch) => {
      for (const end = Math.min(count, i + 999); i <= end; i++) {
        await actor.record('slot.skipped', { slot: iso(T0 + i * 10 * SEC), fireAt: iso(T0 + i * 10 * SEC), reason: 'overlap', blockedBy: 'run_x', nextRunAt: iso(T0 + (i + 1) * 10 * SEC) }, { batch });
      }
    });
  }
  clock.jumpWall(count * 10 * SEC + 10 * SEC - (clock.now() - T0));
}

async function setup(): Promise<{ clock: SimulatedClock; runtime: Runtime; old: string; fresh: string }> {
  const clock = new SimulatedClock(T0);
  const runtime = await useRuntime({ clock, runnerId: 'test-host:1:grow' });
  const old = (await createCommandLoop(runtime, { name: 'old', command: 'true', schedule: { every: '10s', tz: 'UTC' } })).id;
  await grow(runtime, clock, old, EVENTS);
  // A loop created one interval before its first slot; both are due then.
  const fresh = (await createCommandLoop(runtime, { name: 'fresh', command: 'true', schedule: { every: '10s', tz: 'UTC' } })).id;
  clock.jumpWall(10 * SEC);
  return { clock, runtime, old, fresh };
}

/** Events folded (restoring streams) by one `tick` on a cold runtime for the loop's data directory. */
async function coldTickCost(first: Runtime, clock: SimulatedClock): Promise<{ folded: number; runs: RunView[] }> {
  const cold = await openRuntime({ dataDir: first.dataDir, clock, runnerId: 'test-host:2:tick' });
  onTestFinished(() => cold.close());
  const before = cold.snapshots!.folded;
  const result = await tick(cold);
  return { folded: cold.snapshots!.folded - before, runs: result.runs };
}

describe('the cost of a pass does not grow with the loop stream', () => {
  it(`a loop with ${EVENTS.toLocaleString('en')} events: a cold tick folds fewer than ${SNAPSHOT_EVERY} of them; the stream state equals a full fold`, async () => {
    const { clock, runtime, old } = await setup();
    expect((await runtime.log.streamInfo(`loop:${old}`))!.version).toBe(EVENTS + 1);
    const { folded, runs } = await coldTickCost(runtime, clock);
    expect(runs.map((r) => r.loopName).sort()).toEqual(['fresh', 'old']);
    // Each loop: its stream restored (from a snapshot for 'old') and the runs' follow-ups; 'fresh'
    // alone costs a handful of events.
    expect(folded).toBeLessThan(SNAPSHOT_EVERY + 20);

    // The snapshot is a shortcut, not another truth: restoring through it equals folding everything.
    const reopened = await openRuntime({ dataDir: runtime.dataDir, clock, runnerId: 'test-host:3:check' });
    onTestFinished(() => reopened.close());
    const viaSnapshot = (await DurableActor.load(reopened, `loop:${old}`)).snapshot;
    const full = fold(getMachine(currentMachines.loop)!, await runtime.log.readStream(`loop:${old}`)).snapshot;
    expect(viaSnapshot.value).toEqual(full.value);
    expect(viaSnapshot.context).toEqual(full.context);
    expect(viaSnapshot.status).toEqual(full.status);
    expectInvariants(runtime, { settledAt: clock.now() });
  }, 120_000);

  it('the daemon keeps its live actors between passes: a pass of the old loop folds what a pass of a new one folds', async () => {
    const { clock, runtime } = await setup();
    const runs: RunView[] = [];
    let waiter: { n: number; resolve: () => void } | null = null;
    const until = (n: number) => (runs.length >= n ? Promise.resolve() : new Promise<void>((resolve) => (waiter = { n, resolve })));
    const onRun = (r: RunView) => {
      runs.push(r);
      if (waiter && runs.length >= waiter.n) waiter.resolve();
    };
    const daemon = new Daemon(runtime, { log: () => {}, onRun, spawner: 'inline', watchMs: 500 });
    onTestFinished(() => daemon.stop('test finished'));
    await daemon.start();
    // Both loops are due now; the first pass runs them.
    await until(2);
    // The next slot of each (10 s later): one pass, counted.
    const before = runtime.snapshots!.folded;
    clock.advance(10 * SEC);
    await until(4);
    // Everything the pass needed was live already: nothing was folded from the log.
    expect(runtime.snapshots!.folded - before).toBe(0);
    await daemon.stop();
    expectInvariants(runtime, { settledAt: clock.now() });
  }, 120_000);
});
