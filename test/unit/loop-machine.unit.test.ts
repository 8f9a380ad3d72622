import { describe, expect, it } from 'vitest';
import { loopMachine } from '../../src/machines/loop.js';
import { fold, initialSnapshot } from '../../src/machines/fold.js';
import { given, type MachineInput } from '../helpers/machine.js';
import { at, everySchedule, loopEv } from '../helpers/events.js';

const created = loopEv.created();

describe('loop machine: transitions', () => {
  it('new --loop.created--> active, arming the schedule with the first due time', () => {
    const { context } = given(loopMachine)
      .when(created)
      .then('active', [{ type: 'scheduleChanged', params: { loopId: 'loop_1', nextRunAt: at(60_000) } }]);
    expect(context).toMatchObject({
      loopId: 'loop_1',
      name: 'backup',
      schedule: everySchedule,
      nextRunAt: at(60_000),
      createdAt: at(0),
      updatedAt: at(0),
    });
  });

  it('active --loop.paused--> paused, disarming the schedule and keeping the reason', () => {
    const { context } = given(loopMachine, [created])
      .when(loopEv.paused('maintenance', at(1000)))
      .then('paused', [{ type: 'scheduleChanged', params: { loopId: 'loop_1', nextRunAt: null } }]);
    expect(context).toMatchObject({ reason: 'maintenance', nextRunAt: null, updatedAt: at(1000) });
  });

  it('paused --loop.resumed--> active, re-arming with the due time the event carries', () => {
    const { context } = given(loopMachine, [created, loopEv.paused('x')])
      .when(loopEv.resumed(at(180_000), 'back', at(2000)))
      .then('active', [{ type: 'scheduleChanged', params: { loopId: 'loop_1', nextRunAt: at(180_000) } }]);
    expect(context).toMatchObject({ reason: 'back', nextRunAt: at(180_000), updatedAt: at(2000) });
  });

  it('stopped --loop.resumed--> active', () => {
    given(loopMachine, [created, loopEv.stopped()])
      .when(loopEv.resumed(at(240_000)))
      .then('active', [{ type: 'scheduleChanged', params: { nextRunAt: at(240_000) } }]);
  });

  for (const [from, events] of [
    ['active', [created]],
    ['paused', [created, loopEv.paused()]],
  ] as const) {
    it(`${from} --loop.stopped--> stopped, clearing the due time`, () => {
      const { context } = given(loopMachine, events)
        .when(loopEv.stopped('done for now', at(3000)))
        .then('stopped', [{ type: 'scheduleChanged', params: { nextRunAt: null } }]);
      expect(context).toMatchObject({ reason: 'done for now', nextRunAt: null, updatedAt: at(3000) });
    });
  }

  for (const [from, events] of [
    ['active', [created]],
    ['paused', [created, loopEv.paused()]],
    ['stopped', [created, loopEv.stopped()]],
  ] as const) {
    it(`${from} --loop.archived--> archived`, () => {
      const { context } = given(loopMachine, events)
        .when(loopEv.archived('old', at(4000)))
        .then('archived', [{ type: 'scheduleChanged', params: { nextRunAt: null } }]);
      expect(context).toMatchObject({ reason: 'old', nextRunAt: null });
    });
  }

  for (const [from, events] of [
    ['active', [created]],
    ['paused', [created, loopEv.paused()]],
    ['stopped', [created, loopEv.stopped()]],
    ['archived', [created, loopEv.archived()]],
  ] as const) {
    it(`${from} --loop.removed--> removed (final)`, () => {
      const { snapshot, context } = given(loopMachine, events)
        .when(loopEv.removed('gone', at(5000)))
        .then('removed', [{ type: 'scheduleChanged', params: { loopId: 'loop_1', nextRunAt: null } }]);
      expect(snapshot.status).toBe('done');
      expect(context).toMatchObject({ reason: 'gone', nextRunAt: null, updatedAt: at(5000) });
    });
  }
});

describe('loop machine: rejected events', () => {
  const reach: Record<string, MachineInput[]> = {
    new: [],
    active: [created],
    paused: [created, loopEv.paused()],
    stopped: [created, loopEv.stopped()],
    archived: [created, loopEv.archived()],
    removed: [created, loopEv.removed()],
  };
  const events: MachineInput[] = [
    created,
    loopEv.paused(),
    loopEv.resumed(),
    loopEv.stopped(),
    loopEv.archived(),
    loopEv.removed(),
  ];
  const accepted: Record<string, string[]> = {
    new: ['loop.created'],
    active: ['loop.paused', 'loop.stopped', 'loop.archived', 'loop.removed'],
    paused: ['loop.resumed', 'loop.stopped', 'loop.archived', 'loop.removed'],
    stopped: ['loop.resumed', 'loop.archived', 'loop.removed'],
    archived: ['loop.removed'],
    removed: [],
  };

  for (const [state, history] of Object.entries(reach)) {
    for (const event of events) {
      const ok = accepted[state]!.includes(event.type);
      it(`${state} ${ok ? 'accepts' : 'rejects'} ${event.type} (snapshot.can agrees)`, () => {
        const { snapshot } = fold(loopMachine, history);
        expect(snapshot.value).toBe(state);
        expect(snapshot.can(event as never)).toBe(ok);
        if (!ok) given(loopMachine, history).when(event).rejected();
      });
    }
  }

  it('pausing a paused loop is rejected and leaves its reason untouched', () => {
    given(loopMachine, [created, loopEv.paused('first')]).when(loopEv.paused('second')).rejected();
  });

  it('the initial state is new with an empty context', () => {
    const snapshot = initialSnapshot(loopMachine);
    expect(snapshot.value).toBe('new');
    expect(snapshot.context).toMatchObject({ loopId: null, name: null, nextRunAt: null });
  });
});
