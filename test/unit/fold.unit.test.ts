import fc from 'fast-check';
import { initialTransition, transition } from 'xstate';
import { describe, expect, it } from 'vitest';
import { initialSnapshot, pureTransition, step } from '../../src/machines/fold.js';
import { loopMachine } from '../../src/machines/loop.js';
import { runMachine } from '../../src/machines/run.js';
import { loopEv, runEv } from '../helpers/events.js';

const runEvents = [
  runEv.claimed(),
  runEv.spawnRequested(),
  runEv.spawned(),
  runEv.spawnFailed(),
  runEv.cancelRequested('stop'),
  runEv.exited({ exitCode: 0 }),
  runEv.exited({ exitCode: 3, error: 'exited with code 3' }),
  runEv.exited({ exitCode: null, signal: 'SIGKILL', timedOut: true }),
  runEv.abandoned(),
];
const loopEvents = [loopEv.created(), loopEv.paused('x'), loopEv.resumed(), loopEv.stopped(), loopEv.archived(), loopEv.removed()];

const shape = (actions: ReadonlyArray<{ type: string; params?: unknown }>) => actions.map((a) => ({ type: a.type, params: a.params }));

describe('pureTransition equals xstate transition()', () => {
  for (const [name, machine, palette] of [
    ['run', runMachine, runEvents],
    ['loop', loopMachine, loopEvents],
  ] as const) {
    it(`${name} machine: same snapshots, same actions, same acceptance over random event sequences`, () => {
      fc.assert(
        fc.property(fc.array(fc.integer({ min: 0, max: palette.length - 1 }), { maxLength: 12 }), (picks) => {
          let ours = initialSnapshot(machine);
          let theirs = initialTransition(machine)[0];
          for (const i of picks) {
            const event = palette[i]!;
            const [a, aActions] = pureTransition(machine, ours, event);
            const [b, bActions] = transition(machine, theirs, event as never);
            expect(a.value).toEqual(b.value);
            expect(a.context).toEqual(b.context);
            // The same fields in the same order (pureTransition hands out a fast-mode copy of a
            // changed context: its JSON, which the log stores and hashes, must not move), and the
            // same object when the step did not change it.
            expect(JSON.stringify(a.context)).toBe(JSON.stringify(b.context));
            if (b.context === theirs.context) expect(a.context).toBe(ours.context);
            expect(a.status).toBe(b.status);
            expect(shape(aActions)).toEqual(shape(bActions));
            // Acceptance: `step` says accepted exactly when snapshot.can() does.
            expect(step(machine, ours, event).accepted).toBe(ours.can(event as never));
            ours = a;
            theirs = b;
          }
        }),
        { numRuns: 300 },
      );
    });
  }

  it('the shared initial snapshot is never mutated by stepping from it', () => {
    const before = JSON.stringify(initialSnapshot(runMachine));
    step(runMachine, initialSnapshot(runMachine), runEv.claimed());
    expect(JSON.stringify(initialSnapshot(runMachine))).toBe(before);
  });
});
