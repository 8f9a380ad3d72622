/**
 * Given/when/then for the pure machines:
 *
 *   given(runMachine, [claimed()]).when(spawnRequested()).then('spawning', ['spawn'])
 *   given(loopMachine, [created(), paused()]).when(paused()).rejected()
 *
 * `given` folds its events through `transition()` (the same fold the runtime uses, each must be
 * accepted); `then` asserts the event was accepted, the resulting state value and the exact list
 * of named actions (XState built-ins filtered out). Each expected action is a type, or a
 * `{ type, params }` matched partially against the real params.
 */
import { expect } from 'vitest';
import type { AnyMachineSnapshot, AnyStateMachine } from 'xstate';
import { fold, step } from '../../src/machines/fold.js';

export interface MachineInput {
  type: string;
  at: string;
  data: unknown;
}

export type ExpectedAction = string | { type: string; params?: Record<string, unknown> };

export interface Outcome {
  snapshot: AnyMachineSnapshot;
  actions: Array<{ type: string; params?: unknown }>;
  context: Record<string, unknown>;
}

function named(actions: ReadonlyArray<{ type: string; params?: unknown }>) {
  return actions.filter((a) => !a.type.startsWith('xstate.'));
}

class When {
  constructor(
    private readonly machine: AnyStateMachine,
    private readonly before: AnyMachineSnapshot,
    private readonly event: MachineInput,
  ) {}

  /** The event is accepted, lands in `state`, and asks for exactly `actions` (in order). */
  then(state: unknown, actions: ReadonlyArray<ExpectedAction> = []): Outcome {
    if (typeof state === 'function') {
      throw new Error('given/when is not a promise: do not await it or return it from a test');
    }
    const result = step(this.machine, this.before, this.event);
    expect(result.accepted, `${this.event.type} should be accepted in ${JSON.stringify(this.before.value)}`).toBe(true);
    expect(result.after.value).toEqual(state);
    const got = named(result.actions);
    expect(got.map((a) => a.type)).toEqual(actions.map((a) => (typeof a === 'string' ? a : a.type)));
    actions.forEach((expected, i) => {
      if (typeof expected !== 'string' && expected.params) {
        expect(got[i]!.params).toMatchObject(expected.params);
      }
    });
    return { snapshot: result.after, actions: got, context: result.after.context as Record<string, unknown> };
  }

  /** The machine refuses the event: `can()` is false, state and context are unchanged, nothing runs. */
  rejected(): void {
    const result = step(this.machine, this.before, this.event);
    expect(result.accepted, `${this.event.type} should be rejected in ${JSON.stringify(this.before.value)}`).toBe(false);
    expect(result.after.value).toEqual(this.before.value);
    expect(result.after.context).toEqual(this.before.context);
    expect(named(result.actions)).toEqual([]);
  }
}

class Given {
  readonly snapshot: AnyMachineSnapshot;
  constructor(
    private readonly machine: AnyStateMachine,
    events: ReadonlyArray<MachineInput>,
  ) {
    const { snapshot, steps } = fold(machine, events);
    steps.forEach((s) => {
      if (!s.accepted) {
        throw new Error(`given: ${s.event.type} was not accepted in state ${JSON.stringify(s.before.value)}`);
      }
    });
    this.snapshot = snapshot;
  }

  when(event: MachineInput): When {
    return new When(this.machine, this.snapshot, event);
  }
}

export function given(machine: AnyStateMachine, events: ReadonlyArray<MachineInput> = []): Given {
  return new Given(machine, events);
}
