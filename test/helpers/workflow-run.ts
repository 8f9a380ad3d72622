/**
 * Workflow-run events as the runner records them, for pure tests: after each event, the decisions
 * the machine asks for with `recordDecisions` — `step.retry_scheduled` per retry, then
 * `step.skipped` per skip — follow it at once (the runner appends them in the same transaction,
 * with the same `at`), and so do the decisions those events ask for in turn. The intents of the
 * steps that start are left to the test (it gives its own `step.spawn_requested` events: rendering
 * a command line is the runner's job). Derived runs ask for nothing: their events pass unchanged.
 */
import type { AnyMachineSnapshot, AnyStateMachine } from 'xstate';
import { initialSnapshot, step } from '../../src/machines/fold.js';
import { workflowRunMachine } from '../../src/machines/workflow-run.js';
import type { MachineInput } from './machine.js';

interface Decisions {
  retries: Array<{ stepId: string; attempt: number; dueAt: string; reason: string }>;
  skips: Array<{ stepId: string; reason: string }>;
}

/** The step.retry_scheduled and step.skipped events a step's recordDecisions action asks for (at `at`). */
export function decisionEvents(actions: ReadonlyArray<{ type: string; params?: unknown }>, at: string): MachineInput[] {
  return actions
    .filter((a) => a.type === 'recordDecisions')
    .flatMap((a) => {
      const d = a.params as Decisions;
      return [
        ...d.retries.map((r) => ({ type: 'step.retry_scheduled', at, data: { stepId: r.stepId, attempt: r.attempt, dueAt: r.dueAt, reason: r.reason } })),
        ...d.skips.map((s) => ({ type: 'step.skipped', at, data: { stepId: s.stepId, reason: s.reason } })),
      ];
    });
}

/**
 * The runner's `recordDecisions` effect without the intents (for a DurableActor a test drives
 * itself, recording its own step.spawn_requested): the retry and skip decisions, inline.
 */
export const decisionEffects = {
  recordDecisions: { inline: (params: Decisions) => decisionEvents([{ type: 'recordDecisions', params }], '').map(({ type, data }) => ({ type, data })) },
};

export interface Recorded {
  /** Every event, the decisions included, in log order. */
  events: MachineInput[];
  /** One group per given event: it and the decisions recorded with it (one transaction of the runner). */
  groups: MachineInput[][];
  snapshot: AnyMachineSnapshot;
}

/**
 * `events` with the decisions they cause recorded after each (see above). Each given event must be
 * accepted (a refused one throws), unless `skipRefused`: then it is left out, as a runner that
 * checks first would never record it.
 */
export function recordDecisions(
  events: ReadonlyArray<MachineInput>,
  options: { machine?: AnyStateMachine; from?: AnyMachineSnapshot; skipRefused?: boolean } = {},
): Recorded {
  const machine = options.machine ?? workflowRunMachine;
  let snapshot = options.from ?? initialSnapshot(machine);
  const groups: MachineInput[][] = [];
  for (const given of events) {
    const group: MachineInput[] = [];
    const queue: MachineInput[] = [given];
    let state = snapshot;
    let refused = false;
    while (queue.length) {
      const event = queue.shift()!;
      const result = step(machine, state, event);
      if (!result.accepted) {
        if (event === given && options.skipRefused) {
          refused = true;
          break;
        }
        throw new Error(`recordDecisions: ${event.type} ${JSON.stringify(event.data).slice(0, 80)} is refused in ${JSON.stringify(state.value)}`);
      }
      state = result.after;
      group.push(event);
      queue.unshift(...decisionEvents(result.actions, event.at));
    }
    if (refused) continue;
    snapshot = state;
    groups.push(group);
  }
  return { events: groups.flat(), groups, snapshot };
}
