/**
 * Slot decisions in the projections, on a real in-memory SQLite (test/helpers/projection-spec.ts):
 * `slot_decisions` gets one row per decision (a range for coalesced / missed); `loops` (v6) follows
 * the due time from slot events, counts fired slots as scheduled runs and shows expired loops;
 * `run_queue` holds the work decided and not claimed yet.
 */
import { describe, expect, it } from 'vitest';
import { loopsProjection } from '../../src/projections/loops.js';
import { findProjection, projections } from '../../src/projections/registry.js';
import { runQueueProjection, slotDecisionsProjection } from '../../src/projections/slots.js';
import { runsProjection } from '../../src/projections/runs.js';
import { findLoop } from '../../src/runtime/queries/loops.js';
import { at, loopEv, runEv, slotEv } from '../helpers/events.js';
import { projectionSpec, type GivenEvent } from '../helpers/projection-spec.js';

const MIN = 60_000;

/** The stream `loop:<id>` holding `events` after its loop.created. */
const decisions = (...events: GivenEvent[]) => projectionSpec(slotDecisionsProjection).given('loop:loop_1', loopEv.created(), ...events);

describe('slot_decisions projection', () => {
  it('is registered after loops and loop_runs, and handles the slot decision events only', () => {
    expect(projections.map((p) => p.name)).toEqual(['loops', 'loop_runs', 'slot_decisions', 'run_queue', 'workflows', 'workflow_versions', 'workflow_runs', 'accounts', 'notices', 'hosts']);
    expect(findProjection('slot_decisions')).toBe(slotDecisionsProjection);
    expect([...slotDecisionsProjection.handles].sort()).toEqual([
      'slot.buffered',
      'slot.coalesced',
      'slot.dropped',
      'slot.fired',
      'slot.missed',
      'slot.retry_scheduled',
      'slot.skipped',
    ]);
    const spec = decisions();
    expect(slotDecisionsProjection.evolve(spec.last)).toEqual([]);
    spec.expectRows('slot_decisions', []);
  });

  it('one row per decision, keyed by the event position, with the loop id from the stream', () => {
    const spec = decisions(
      slotEv.missed({ from: at(MIN), to: at(3 * MIN), count: 3, reason: 'outside catch-up window', nextRunAt: at(7 * MIN) }, at(6 * MIN + 5000)),
      slotEv.coalesced({ from: at(4 * MIN), to: at(5 * MIN), count: 2, into: at(6 * MIN) }, at(6 * MIN + 5000)),
      slotEv.fired({ slot: at(6 * MIN), fireAt: at(6 * MIN + 1000), runId: 'run_9', late: true, nextRunAt: at(7 * MIN) }, at(6 * MIN + 5000)),
      slotEv.skipped({ slot: at(7 * MIN), fireAt: at(7 * MIN), blockedBy: 'run_9', nextRunAt: at(8 * MIN) }, at(7 * MIN)),
      slotEv.fired({ slot: at(8 * MIN), fireAt: at(8 * MIN), runId: 'run_10', late: false, nextRunAt: at(9 * MIN) }, at(8 * MIN)),
    );
    const stored = spec.stream('loop:loop_1');
    expect(stored.map((e) => e.position)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(spec.rows('slot_decisions')).toEqual([
      {
        position: stored[1]!.position, loop_id: 'loop_1', decision: 'missed', slot_from: at(MIN), slot_to: at(3 * MIN), count: 3,
        fire_at: null, run_id: null, reason: 'outside catch-up window', into_slot: null, at: at(6 * MIN + 5000),
      },
      {
        position: stored[2]!.position, loop_id: 'loop_1', decision: 'coalesced', slot_from: at(4 * MIN), slot_to: at(5 * MIN), count: 2,
        fire_at: null, run_id: null, reason: 'catch-up latest', into_slot: at(6 * MIN), at: at(6 * MIN + 5000),
      },
      {
        position: stored[3]!.position, loop_id: 'loop_1', decision: 'fired', slot_from: at(6 * MIN), slot_to: at(6 * MIN), count: 1,
        fire_at: at(6 * MIN + 1000), run_id: 'run_9', reason: 'caught up after missed slots', into_slot: null, at: at(6 * MIN + 5000),
      },
      {
        position: stored[4]!.position, loop_id: 'loop_1', decision: 'skipped', slot_from: at(7 * MIN), slot_to: at(7 * MIN), count: 1,
        fire_at: at(7 * MIN), run_id: 'run_9', reason: 'overlap', into_slot: null, at: at(7 * MIN),
      },
      {
        position: stored[5]!.position, loop_id: 'loop_1', decision: 'fired', slot_from: at(8 * MIN), slot_to: at(8 * MIN), count: 1,
        fire_at: at(8 * MIN), run_id: 'run_10', reason: null, into_slot: null, at: at(8 * MIN),
      },
    ]);
  });

  it('a skipped slot blocked by an unknown run has no run id', () => {
    decisions(slotEv.skipped({ blockedBy: null })).expectRows('slot_decisions', [{ decision: 'skipped', run_id: null, reason: 'overlap' }]);
  });

  it('every missed reason is kept', () => {
    const reasons = ['catch-up none', 'outside catch-up window', 'over catch-up limit', 'max-runs reached'] as const;
    const spec = decisions(
      ...reasons.map((reason, i) => slotEv.missed({ from: at((i + 1) * MIN), to: at((i + 1) * MIN), count: 1, reason, nextRunAt: at((i + 2) * MIN) })),
    );
    spec.expectRows('slot_decisions', reasons.map((reason) => ({ decision: 'missed', reason })));
  });

  it('buffered, retried and dropped work say why', () => {
    const spec = decisions(
      slotEv.fired(),
      slotEv.buffered({ runId: 'run_2', policy: 'cancel-other', cancels: ['run_1'] }),
      slotEv.buffered({ runId: 'run_3', policy: 'buffer-all', blockedBy: null }),
      slotEv.retryScheduled({ runId: 'run_4', attempt: 2, dueAt: at(80_000), after: 'run_1', reason: 'failed: exited with code 1' }),
      slotEv.dropped({ runId: 'run_3', attempt: 1, reason: 'loop stopped before it started' }),
    );
    spec.expectRows('slot_decisions', [
      { decision: 'fired', run_id: 'run_1' },
      { decision: 'buffered', run_id: 'run_2', fire_at: at(120_000), reason: 'overlap cancel-other: cancelling run_1' },
      { decision: 'buffered', run_id: 'run_3', reason: 'overlap buffer-all: waiting for the running run' },
      { decision: 'retry', run_id: 'run_4', slot_from: at(MIN), fire_at: at(80_000), reason: 'attempt 2 after run_1 failed: exited with code 1' },
      { decision: 'dropped', run_id: 'run_3', slot_from: at(MIN), fire_at: null, reason: 'attempt 1 not run: loop stopped before it started' },
    ]);
  });

  it('rows of different loops are kept apart', () => {
    const spec = projectionSpec(slotDecisionsProjection)
      .given('loop:loop_1', loopEv.created(), slotEv.fired())
      .given('loop:loop_2', loopEv.created({ loopId: 'loop_2', name: 'other' }), slotEv.fired({ runId: 'run_2' }), slotEv.missed());
    expect(spec.rows('slot_decisions', { loop_id: 'loop_1' })).toHaveLength(1);
    expect(spec.rows('slot_decisions', { loop_id: 'loop_2' }).map((r) => r.decision)).toEqual(['fired', 'missed']);
  });

  it('evolve is pure: the same event gives the same statements', () => {
    const { events } = decisions(slotEv.fired(), slotEv.skipped(), slotEv.coalesced(), slotEv.missed());
    expect(events).toHaveLength(5);
    for (const event of events) expect(slotDecisionsProjection.evolve(event)).toEqual(slotDecisionsProjection.evolve(structuredClone(event)));
  });
});

describe('loops projection (v9): slot decisions and expiry', () => {
  const loopRow = (spec: ReturnType<typeof projectionSpec>) => spec.row('loops', { id: 'loop_1' });

  it('is version 9 (v8 with runs_on) and handles the events that carry a due time, and loop.expired', () => {
    expect(loopsProjection.version).toBe(9);
    for (const type of ['slot.fired', 'slot.skipped', 'slot.missed', 'loop.rescheduled', 'loop.expired']) expect(loopsProjection.handles.has(type)).toBe(true);
    // slot.coalesced is always recorded with the slot it was folded into, which carries the due time.
    expect(loopsProjection.handles.has('slot.coalesced')).toBe(false);
  });

  it('fired, skipped and missed move next_run_at and updated_at; only fired counts as a scheduled run; coalesced leaves the row', () => {
    const events = [
      loopEv.created(),
      slotEv.fired({ slot: at(MIN), nextRunAt: at(2 * MIN) }, at(MIN)),
      slotEv.skipped({ slot: at(2 * MIN), nextRunAt: at(3 * MIN) }, at(2 * MIN)),
      slotEv.missed({ from: at(3 * MIN), to: at(5 * MIN), count: 3, reason: 'outside catch-up window', nextRunAt: at(11 * MIN) }, at(10 * MIN + 30_000)),
      slotEv.coalesced({ from: at(6 * MIN), to: at(9 * MIN), count: 4, into: at(10 * MIN) }, at(10 * MIN + 30_000)),
      slotEv.fired({ slot: at(10 * MIN), runId: 'run_2', late: true, nextRunAt: at(11 * MIN) }, at(10 * MIN + 30_000)),
    ];
    const specAfter = (n: number) => projectionSpec(loopsProjection, slotDecisionsProjection).given('loop:loop_1', ...events.slice(0, n));
    const after = (n: number) => loopRow(specAfter(n));
    expect(after(1)).toMatchObject({ next_run_at: at(MIN), scheduled_runs: 0, updated_at: at(0) });
    expect(after(2)).toMatchObject({ next_run_at: at(2 * MIN), scheduled_runs: 1, updated_at: at(MIN) });
    expect(after(3)).toMatchObject({ next_run_at: at(3 * MIN), scheduled_runs: 1, updated_at: at(2 * MIN) });
    expect(after(4)).toMatchObject({ next_run_at: at(11 * MIN), scheduled_runs: 1, updated_at: at(10 * MIN + 30_000) });
    expect(after(5)).toEqual(after(4));
    expect(after(6)).toMatchObject({ status: 'active', next_run_at: at(11 * MIN), scheduled_runs: 2 });
    expect(specAfter(6).rows('slot_decisions')).toHaveLength(5);
  });

  it('a buffered slot counts as a scheduled run and moves the due time', () => {
    const spec = projectionSpec(loopsProjection).given('loop:loop_1', loopEv.created(), slotEv.fired(), slotEv.buffered({ nextRunAt: at(5 * MIN) }, at(2 * MIN)));
    expect(loopRow(spec)).toMatchObject({ next_run_at: at(5 * MIN), scheduled_runs: 2, updated_at: at(2 * MIN) });
  });

  it('the run count counts claimed runs (manual too); scheduled_runs counts fired slots only', () => {
    const spec = projectionSpec(loopsProjection, runsProjection)
      .given('loop:loop_1', loopEv.created(), slotEv.fired({ runId: 'run_1' }))
      .given('run:run_1', runEv.claimed({ slot: at(MIN), trigger: 'schedule' }, at(MIN)))
      .given('run:run_2', runEv.claimed({ runId: 'run_2', slot: 'manual:run_2' }, at(MIN + 1)));
    expect(loopRow(spec)).toMatchObject({ scheduled_runs: 1 });
    expect(findLoop(spec.db, 'loop_1')).toMatchObject({ runCount: 2, scheduledRuns: 1, lastRun: { id: 'run_2' } });
  });

  it('loop.expired: status expired, no due time; it can then be archived and removed', () => {
    const loop = (...events: GivenEvent[]) => loopRow(projectionSpec(loopsProjection, slotDecisionsProjection).given('loop:loop_1', loopEv.created(), ...events));
    expect(loop(slotEv.fired({ nextRunAt: null }, at(MIN)), loopEv.expired('max-runs', at(MIN)))).toMatchObject({
      status: 'expired',
      next_run_at: null,
      scheduled_runs: 1,
      updated_at: at(MIN),
      live_name: 'backup',
    });
    expect(loop(loopEv.expired('no more slots', at(MIN)), loopEv.archived('old', at(2 * MIN)))).toMatchObject({ status: 'archived', reason: 'old', next_run_at: null });
    expect(loop(loopEv.expired('expires-at', at(MIN)), loopEv.removed('gone', at(2 * MIN)))).toMatchObject({ status: 'removed', live_name: null, next_run_at: null });
  });

  it('an expired loop keeps its name taken (it is not removed)', () => {
    const spec = projectionSpec(loopsProjection).given('loop:loop_1', loopEv.created(), loopEv.expired());
    expect(() => spec.given('loop:loop_2', loopEv.created({ loopId: 'loop_2' }))).toThrow(/UNIQUE constraint failed: loops.live_name/);
  });
});

describe('run_queue projection', () => {
  const columns = ['run_id', 'loop_id', 'kind', 'slot', 'attempt', 'due_at', 'decided_by'];
  const rows = (spec: ReturnType<typeof projectionSpec>) => spec.rows('run_queue', {}, { orderBy: 'position', columns });
  const queue = (...events: GivenEvent[]) => projectionSpec(runQueueProjection, slotDecisionsProjection).given('loop:loop_1', loopEv.created(), ...events);
  const claimed = (runId: string, slot = at(2 * MIN)) => [`run:${runId}`, runEv.claimed({ runId, slot })] as const;

  it('a fired slot is claimable work until its run is claimed', () => {
    const spec = queue(slotEv.fired({ runId: 'run_1', fireAt: at(MIN + 500) }));
    expect(rows(spec)).toEqual([{ run_id: 'run_1', loop_id: 'loop_1', kind: 'fired', slot: at(MIN), attempt: 1, due_at: at(MIN + 500), decided_by: null }]);
    spec.given(...claimed('run_1', at(MIN)));
    expect(rows(spec)).toEqual([]);
  });

  it('decided_by is the runner that recorded the decision', () => {
    const spec = queue({ ...slotEv.fired({ runId: 'run_1' }), meta: { runnerId: 'host:7:daemon' } }, slotEv.retryScheduled({ runId: 'run_2' }));
    expect(rows(spec).map((r) => [r.run_id, r.decided_by])).toEqual([
      ['run_1', 'host:7:daemon'],
      ['run_2', null],
    ]);
  });

  it('a buffered slot waits until its run is claimed; a decision row says what it waits for', () => {
    const spec = queue(slotEv.fired(), slotEv.buffered({ runId: 'run_2', slot: at(2 * MIN), fireAt: at(2 * MIN), blockedBy: 'run_1' }));
    expect(rows(spec)).toMatchObject([{ run_id: 'run_1', kind: 'fired' }, { run_id: 'run_2', kind: 'buffered', slot: at(2 * MIN), due_at: at(2 * MIN) }]);
    expect(spec.rows('slot_decisions').at(-1)).toMatchObject({ decision: 'buffered', run_id: 'run_2', reason: 'overlap buffer-one: waiting for run_1' });
    spec.given(...claimed('run_2'));
    expect(rows(spec)).toMatchObject([{ run_id: 'run_1' }]);
  });

  it('a retry is due at its back-off, with its attempt', () => {
    const spec = queue(slotEv.fired(), slotEv.retryScheduled({ runId: 'run_2', attempt: 2, dueAt: at(80_000) })).given(...claimed('run_1', at(MIN)));
    expect(rows(spec)).toMatchObject([{ run_id: 'run_2', kind: 'retry', slot: at(MIN), attempt: 2, due_at: at(80_000) }]);
  });

  it('dropped work leaves the queue, and the decision row says why', () => {
    const spec = queue(slotEv.fired(), slotEv.dropped({ runId: 'run_1', reason: 'loop stopped before it started' }), loopEv.stopped());
    expect(rows(spec)).toEqual([]);
    expect(spec.rows('slot_decisions').at(-1)).toMatchObject({ decision: 'dropped', run_id: 'run_1', reason: 'attempt 1 not run: loop stopped before it started' });
  });

  it('logs from before slot.dropped: stop, archive and remove drop the buffered slots still waiting (fired ones and retries wait for a resume)', () => {
    for (const [i, end] of [loopEv.stopped(), loopEv.archived(), loopEv.removed()].entries()) {
      const id = `loop_${i + 2}`;
      const spec = projectionSpec(runQueueProjection).given(
        `loop:${id}`,
        loopEv.created({ loopId: id, name: id }),
        slotEv.fired({ runId: `run_f${i}` }),
        slotEv.buffered({ runId: `run_b${i}` }),
      );
      expect(rows(spec)).toHaveLength(2);
      spec.given(`loop:${id}`, end);
      expect(rows(spec)).toMatchObject([{ run_id: `run_f${i}`, kind: 'fired', loop_id: id }]);
    }
  });
});
