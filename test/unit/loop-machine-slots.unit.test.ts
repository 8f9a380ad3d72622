/**
 * The loop machine and slot decisions: an active loop records slot.fired / skipped / coalesced /
 * missed (lastSlot, nextRunAt, scheduledRuns follow); every other state refuses them; loop.expired
 * ends the schedule (then only archive or remove).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fold } from '../../src/machines/fold.js';
import { loopMachine, type LoopContext } from '../../src/machines/loop.js';
import { at, loopEv, slotEv } from '../helpers/events.js';
import { given, type MachineInput } from '../helpers/machine.js';

const created = loopEv.created();
const MIN = 60_000;

describe('loop machine: slot decisions while active', () => {
  it('loop.created starts the schedule at its own time: scheduleFrom = created at, nothing decided yet', () => {
    const { context } = given(loopMachine).when(created).then('active', ['scheduleChanged']);
    expect(context).toMatchObject({ scheduleFrom: at(0), lastSlot: null, scheduledRuns: 0 });
  });

  it('slot.fired: the slot is the last decided one, the due time moves, one more scheduled run', () => {
    const { context } = given(loopMachine, [created])
      .when(slotEv.fired({ slot: at(MIN), runId: 'run_1', nextRunAt: at(2 * MIN) }))
      .then('active', []);
    expect(context).toMatchObject({ lastSlot: at(MIN), nextRunAt: at(2 * MIN), scheduledRuns: 1, scheduleFrom: at(0) });
  });

  it('slot.skipped: last decided slot and due time move; no run counted', () => {
    const { context } = given(loopMachine, [created, slotEv.fired()])
      .when(slotEv.skipped({ slot: at(2 * MIN), nextRunAt: at(3 * MIN) }))
      .then('active', []);
    expect(context).toMatchObject({ lastSlot: at(2 * MIN), nextRunAt: at(3 * MIN), scheduledRuns: 1 });
  });

  it('slot.buffered: decided, the due time moves, and it counts as a run (it will run when the going one ends)', () => {
    const { context } = given(loopMachine, [created, slotEv.fired()])
      .when(slotEv.buffered({ slot: at(2 * MIN), nextRunAt: at(3 * MIN) }))
      .then('active', []);
    expect(context).toMatchObject({ lastSlot: at(2 * MIN), nextRunAt: at(3 * MIN), scheduledRuns: 2 });
  });

  it('an expired loop still accepts the retry of a slot it fired, and nothing else of the schedule', () => {
    const expired = [created, slotEv.fired(), loopEv.expired()];
    given(loopMachine, expired).when(slotEv.retryScheduled()).then('expired', []);
    for (const e of [slotEv.fired({ slot: at(3 * MIN) }), slotEv.buffered(), slotEv.skipped()]) {
      expect(fold(loopMachine, [...expired, e]).steps.at(-1)!.accepted).toBe(false);
    }
  });

  it('slot.coalesced: the range end is decided; the due time is left to the slot it was folded into', () => {
    const { context } = given(loopMachine, [created])
      .when(slotEv.coalesced({ from: at(MIN), to: at(9 * MIN), count: 9, into: at(10 * MIN) }))
      .then('active', []);
    expect(context).toMatchObject({ lastSlot: at(9 * MIN), nextRunAt: at(MIN), scheduledRuns: 0 });
  });

  it('slot.missed: the range end is decided, the due time moves, no run counted', () => {
    const { context } = given(loopMachine, [created])
      .when(slotEv.missed({ from: at(MIN), to: at(9 * MIN), count: 9, nextRunAt: at(10 * MIN) }))
      .then('active', []);
    expect(context).toMatchObject({ lastSlot: at(9 * MIN), nextRunAt: at(10 * MIN), scheduledRuns: 0 });
  });

  it('one pass (missed, coalesced, fired) recorded in order: lastSlot is the fired one, one run', () => {
    const { snapshot } = fold(loopMachine, [
      created,
      slotEv.missed({ from: at(MIN), to: at(5 * MIN), count: 5, reason: 'outside catch-up window', nextRunAt: at(11 * MIN) }),
      slotEv.coalesced({ from: at(6 * MIN), to: at(9 * MIN), count: 4, into: at(10 * MIN) }),
      slotEv.fired({ slot: at(10 * MIN), late: true, nextRunAt: at(11 * MIN) }),
    ]);
    expect(snapshot.value).toBe('active');
    expect(snapshot.context).toMatchObject({ lastSlot: at(10 * MIN), nextRunAt: at(11 * MIN), scheduledRuns: 1 });
  });

  it('max-runs misses recorded before the fired slots (older) never move lastSlot backwards', () => {
    const { snapshot } = fold(loopMachine, [
      created,
      slotEv.missed({ from: at(3 * MIN), to: at(5 * MIN), count: 3, reason: 'max-runs reached', nextRunAt: null }),
      slotEv.fired({ slot: at(MIN), runId: 'run_1', nextRunAt: null }),
      slotEv.fired({ slot: at(2 * MIN), runId: 'run_2', nextRunAt: null }),
    ]);
    expect(snapshot.context).toMatchObject({ lastSlot: at(5 * MIN), scheduledRuns: 2, nextRunAt: null });
  });

  it('pause and resume: the decided slot and run count are kept; scheduleFrom moves to the resume time', () => {
    const { context } = given(loopMachine, [created, slotEv.fired({ slot: at(MIN) }), loopEv.paused(null, at(90_000))])
      .when(loopEv.resumed(at(10 * MIN), null, at(9 * MIN + 30_000)))
      .then('active', [{ type: 'scheduleChanged', params: { nextRunAt: at(10 * MIN) } }]);
    expect(context).toMatchObject({ lastSlot: at(MIN), scheduledRuns: 1, scheduleFrom: at(9 * MIN + 30_000), nextRunAt: at(10 * MIN) });
  });

  it('property: any sequence of decisions — lastSlot is the latest decided slot, scheduledRuns the fired count', () => {
    const decision = fc.oneof(
      fc.integer({ min: 1, max: 100 }).map((k) => slotEv.fired({ slot: at(k * MIN), fireAt: at(k * MIN), runId: `run_${k}`, nextRunAt: at((k + 1) * MIN) })),
      fc.integer({ min: 1, max: 100 }).map((k) => slotEv.skipped({ slot: at(k * MIN), fireAt: at(k * MIN), nextRunAt: at((k + 1) * MIN) })),
      fc.tuple(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 0, max: 5 })).map(([k, n]) =>
        slotEv.coalesced({ from: at(k * MIN), to: at((k + n) * MIN), count: n + 1, into: at((k + n + 1) * MIN) }),
      ),
      fc.tuple(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 0, max: 5 })).map(([k, n]) =>
        slotEv.missed({ from: at(k * MIN), to: at((k + n) * MIN), count: n + 1, nextRunAt: at((k + n + 1) * MIN) }),
      ),
    );
    fc.assert(
      fc.property(fc.array(decision, { maxLength: 20 }), (decisions) => {
        const { snapshot, steps } = fold(loopMachine, [created, ...decisions]);
        expect(steps.every((s) => s.accepted)).toBe(true);
        const ctx = snapshot.context as LoopContext;
        const ends = decisions.map((d) => Date.parse('slot' in d.data ? d.data.slot : d.data.to));
        expect(ctx.lastSlot).toBe(ends.length ? new Date(Math.max(...ends)).toISOString() : null);
        expect(ctx.scheduledRuns).toBe(decisions.filter((d) => d.type === 'slot.fired').length);
        const withDue = decisions.filter((d) => d.type !== 'slot.coalesced');
        expect(ctx.nextRunAt).toBe(withDue.length ? (withDue[withDue.length - 1]!.data as { nextRunAt: string }).nextRunAt : at(MIN));
      }),
      { numRuns: 200 },
    );
  });
});

describe('loop machine: expiry', () => {
  it('active --loop.expired--> expired: no due time, updatedAt, the schedule is disarmed', () => {
    const { snapshot, context } = given(loopMachine, [created, slotEv.fired({ nextRunAt: null })])
      .when(loopEv.expired('max-runs', at(61_000)))
      .then('expired', [{ type: 'scheduleChanged', params: { loopId: 'loop_1', nextRunAt: null } }]);
    expect(snapshot.status).toBe('active'); // not final: it can still be archived or removed
    expect(context).toMatchObject({ nextRunAt: null, updatedAt: at(61_000), scheduledRuns: 1, lastSlot: at(MIN) });
  });

  for (const reason of ['expires-at', 'max-runs', 'no more slots'] as const) {
    it(`loop.expired (${reason}) is accepted while active`, () => {
      given(loopMachine, [created]).when(loopEv.expired(reason)).then('expired', ['scheduleChanged']);
    });
  }

  it('expired --loop.archived--> archived', () => {
    const { context } = given(loopMachine, [created, loopEv.expired()])
      .when(loopEv.archived('done', at(10_000)))
      .then('archived', [{ type: 'scheduleChanged', params: { nextRunAt: null } }]);
    expect(context).toMatchObject({ reason: 'done', updatedAt: at(10_000) });
  });

  it('expired --loop.removed--> removed (final)', () => {
    const { snapshot } = given(loopMachine, [created, loopEv.expired()])
      .when(loopEv.removed('gone', at(10_000)))
      .then('removed', [{ type: 'scheduleChanged', params: { nextRunAt: null } }]);
    expect(snapshot.status).toBe('done');
  });
});

describe('loop machine: slot decisions and expiry are refused outside active', () => {
  const reach: Record<string, MachineInput[]> = {
    new: [],
    active: [created],
    paused: [created, loopEv.paused()],
    stopped: [created, loopEv.stopped()],
    expired: [created, loopEv.expired()],
    archived: [created, loopEv.archived()],
    removed: [created, loopEv.removed()],
  };
  const events: MachineInput[] = [
    slotEv.fired(),
    slotEv.skipped(),
    slotEv.coalesced(),
    slotEv.missed(),
    loopEv.expired(),
    created,
    loopEv.paused(),
    loopEv.resumed(),
    loopEv.stopped(),
    loopEv.archived(),
    loopEv.removed(),
  ];
  const slotAndExpiry = ['slot.fired', 'slot.skipped', 'slot.coalesced', 'slot.missed', 'loop.expired'];
  const accepted: Record<string, string[]> = {
    new: ['loop.created'],
    active: [...slotAndExpiry, 'loop.paused', 'loop.stopped', 'loop.archived', 'loop.removed'],
    paused: ['loop.resumed', 'loop.stopped', 'loop.archived', 'loop.removed'],
    stopped: ['loop.resumed', 'loop.archived', 'loop.removed'],
    expired: ['loop.archived', 'loop.removed'],
    archived: ['loop.removed'],
    removed: [],
  };

  for (const [state, history] of Object.entries(reach)) {
    for (const event of events) {
      const ok = accepted[state]!.includes(event.type);
      // The existing matrix (loop-machine.unit.test.ts) covers lifecycle events in the other states.
      if (!slotAndExpiry.includes(event.type) && state !== 'expired') continue;
      it(`${state} ${ok ? 'accepts' : 'rejects'} ${event.type}`, () => {
        const { snapshot } = fold(loopMachine, history);
        expect(snapshot.value).toBe(state);
        expect(snapshot.can(event as never)).toBe(ok);
        if (!ok) given(loopMachine, history).when(event).rejected();
      });
    }
  }
});
