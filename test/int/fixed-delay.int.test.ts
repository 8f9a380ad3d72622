/**
 * Fixed-delay loops (--every X --anchor fixed-delay): each slot is due X after the previous run
 * finished, never overlapping; a pass that finds one without a due time (its runner stopped
 * between firing and recording the end) reschedules it from the last run's finish.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { createCommandLoop } from '../../src/runtime/loops/commands.js';
import { decideDue } from '../../src/scheduling/planner.js';
import { findLoop, listRuns } from '../../src/runtime/queries/loops.js';
import { tick } from '../../src/runtime/daemon/pass.js';
import { decideLoop, repairFixedDelay } from '../../src/runtime/loops/decisions.js';
import { expectLogConsistent } from '../helpers/invariants.js';
import { useRuntime } from '../helpers/tmp.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2026-01-01T00:00:00.000Z');

async function setup() {
  const clock = new SimulatedClock(T0);
  const runtime = await useRuntime({ clock });
  onTestFinished(() => expectLogConsistent(runtime));
  const loop = await createCommandLoop(runtime, {
    name: 'fd',
    command: 'true',
    schedule: { every: '1h', anchor: 'fixed-delay', tz: 'UTC' },
  });
  return { clock, runtime, loop };
}

describe('fixed-delay loops', () => {
  it('fire once per slot, each due an interval after the previous run finished', async () => {
    const { clock, runtime, loop } = await setup();
    expect(loop.nextRunAt).toBe(new Date(T0 + HOUR).toISOString());
    clock.jumpWall(HOUR + 5 * 60_000);
    const first = await tick(runtime);
    expect(first.runs).toHaveLength(1);
    const finished = Date.parse(first.runs[0]!.finishedAt!);
    // Rescheduled from the finish, not from the slot.
    expect(findLoop(runtime.db, 'fd').nextRunAt).toBe(new Date(finished + HOUR).toISOString());
    // Nothing is due until then, however often a pass runs.
    clock.jumpWall(30 * 60_000);
    expect((await tick(runtime)).decisions).toEqual([]);
    // After downtime it fires once, not once per missed hour.
    clock.jumpWall(10 * HOUR);
    const late = await tick(runtime);
    expect(late.runs).toHaveLength(1);
    expect(late.decisions.map((d) => d.type)).toEqual(['slot.fired']);
    expect((late.decisions[0]!.data as { late: boolean }).late).toBe(true);
  });

  it('never overlaps: while its run is going nothing is due', () => {
    const decisions = decideDue(
      {
        id: 'loop_1',
        schedule: { kind: 'every', everyMs: HOUR, anchorAt: new Date(T0).toISOString(), anchor: 'fixed-delay' },
        timing: { tz: 'UTC', jitterMs: null, startsAt: null, expiresAt: null, maxRuns: null },
        policies: { overlap: 'allow', catchUp: 'all', catchUpWindowMs: null, catchUpLimit: null },
      },
      { scheduleFrom: new Date(T0).toISOString(), lastSlot: null, scheduledRuns: 0, running: ['run_x'], nextRunAt: new Date(T0).toISOString() },
      T0 + 5 * HOUR,
      () => 'run_new',
    );
    expect(decisions).toEqual([]);
  });

  it('a loop left without a due time by a stopped runner is rescheduled from its last run', async () => {
    const { clock, runtime } = await setup();
    clock.jumpWall(HOUR);
    // Decide (slot fired, nextRunAt unknown until the run ends) but never run it: the runner "died".
    const { fired } = await decideLoop(runtime, findLoop(runtime.db, 'fd').id, clock.now());
    expect(fired).toHaveLength(1);
    expect(findLoop(runtime.db, 'fd').nextRunAt).toBeNull();
    clock.jumpWall(60_000);
    const repaired = await repairFixedDelay(runtime, clock.now());
    expect(repaired.map((e) => e.type)).toEqual(['loop.rescheduled']);
    // No run was ever recorded for it, so the next slot counts from now.
    expect(findLoop(runtime.db, 'fd').nextRunAt).toBe(new Date(clock.now() + HOUR).toISOString());
    expect(listRuns(runtime.db, {})).toEqual([]);
  });

  it('max-runs ends it after the last run', async () => {
    const clock = new SimulatedClock(T0);
    const runtime = await useRuntime({ clock });
    onTestFinished(() => expectLogConsistent(runtime));
    await createCommandLoop(runtime, { name: 'twice', command: 'true', schedule: { every: '1h', anchor: 'fixed-delay', tz: 'UTC', maxRuns: 2 } });
    for (let i = 0; i < 2; i++) {
      clock.jumpWall(HOUR + 60_000);
      expect((await tick(runtime)).runs).toHaveLength(1);
    }
    expect(findLoop(runtime.db, 'twice').status).toBe('expired');
  });
});

describe('run-now on a due loop', () => {
  it('takes the due slot (recorded like a pass); a later pass does not run that slot again', async () => {
    const { runNow } = await import('../../src/runtime/execution/run-now.js');
    const clock = new SimulatedClock(T0);
    const runtime = await useRuntime({ clock });
    onTestFinished(() => expectLogConsistent(runtime));
    await createCommandLoop(runtime, { name: 'hourly', command: 'true', schedule: { every: '1h', tz: 'UTC' } });
    clock.jumpWall(HOUR + 1000);
    const run = await runNow(runtime, 'hourly');
    expect(run).toMatchObject({ status: 'succeeded', trigger: 'schedule', slot: new Date(T0 + HOUR).toISOString(), attempt: 1 });
    expect((await tick(runtime)).decisions).toEqual([]);
    // Not due: an ad-hoc run of its own, the schedule untouched.
    const before = findLoop(runtime.db, 'hourly').nextRunAt;
    const adhoc = await runNow(runtime, 'hourly');
    expect(adhoc.trigger).toBe('manual');
    expect(adhoc.slot).toBe(`manual:${adhoc.id}`);
    expect(findLoop(runtime.db, 'hourly').nextRunAt).toBe(before);
  });
});
