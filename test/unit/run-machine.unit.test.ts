import { describe, expect, it } from 'vitest';
import { initialTransition } from 'xstate';
import { runMachine, TERMINAL_RUN_STATUSES } from '../../src/machines/run.js';
import { fold } from '../../src/machines/fold.js';
import { given, type MachineInput } from '../helpers/machine.js';
import { at, commandTarget, runEv } from '../helpers/events.js';

const claimed = runEv.claimed();
const requested = runEv.spawnRequested({ timeoutAt: at(60_010) });
const spawned = runEv.spawned();
const toRunning = [claimed, requested, spawned];

describe('run machine: happy path', () => {
  it('starts in new and asks for nothing', () => {
    const [snapshot, actions] = initialTransition(runMachine);
    expect(snapshot.value).toBe('new');
    expect(actions.filter((a) => !a.type.startsWith('xstate.'))).toEqual([]);
  });

  it('new --run.claimed--> claimed, recording the claim and asking to record the spawn intent', () => {
    const { context } = given(runMachine)
      .when(claimed)
      .then('claimed', [{ type: 'requestSpawn', params: { runId: 'run_1', target: commandTarget() } }]);
    expect(context).toMatchObject({
      runId: 'run_1',
      loopId: 'loop_1',
      loopName: 'backup',
      slot: 'manual:run_1',
      attempt: 1,
      trigger: 'manual',
      runnerId: 'host:1:abc',
      leaseToken: 1,
      startedAt: null,
    });
  });

  it('claimed --process.spawn_requested--> spawning, asking to spawn with the deadline', () => {
    const { context } = given(runMachine, [claimed])
      .when(requested)
      .then('spawning', [{ type: 'spawn', params: { runId: 'run_1', target: commandTarget(), timeoutAt: at(60_010) } }]);
    expect(context).toMatchObject({ startedAt: requested.at, timeoutAt: at(60_010) });
  });

  it('spawning --process.spawned--> running, recording the process identity', () => {
    const { context } = given(runMachine, [claimed, requested]).when(spawned).then('running', []);
    expect(context).toMatchObject({ pid: 4242, startTime: '123456' });
  });

  it('running --process.exited(0)--> succeeded and finalizes', () => {
    const { context, snapshot } = given(runMachine, toRunning)
      .when(runEv.exited())
      .then('succeeded', [{ type: 'finalize', params: { runId: 'run_1', status: 'succeeded' } }]);
    expect(snapshot.status).toBe('done');
    expect(context).toMatchObject({ exitCode: 0, signal: null, error: null, stdout: 'hi\n', durationMs: 1000, finishedAt: at(1020) });
  });
});

describe('run machine: failures', () => {
  it('running --process.exited(3)--> failed with the exit code and error', () => {
    const { context } = given(runMachine, toRunning)
      .when(runEv.exited({ exitCode: 3, error: 'exited with code 3', stdout: '', stderr: 'boom\n' }))
      .then('failed', [{ type: 'finalize', params: { status: 'failed' } }]);
    expect(context).toMatchObject({ exitCode: 3, error: 'exited with code 3', stderr: 'boom\n' });
  });

  it('a process killed by a signal fails even if it reports exit code 0', () => {
    given(runMachine, toRunning)
      .when(runEv.exited({ exitCode: null, signal: 'SIGKILL', error: 'killed by signal SIGKILL' }))
      .then('failed', ['finalize']);
    given(runMachine, toRunning).when(runEv.exited({ exitCode: 0, signal: 'SIGTERM' })).then('failed', ['finalize']);
  });

  it('running --process.exited(timedOut)--> timed_out, even when the process exited 0 and cancel was also seen', () => {
    given(runMachine, toRunning)
      .when(runEv.exited({ exitCode: null, signal: 'SIGTERM', timedOut: true, error: 'timed out after 1s' }))
      .then('timed_out', [{ type: 'finalize', params: { status: 'timed_out' } }]);
    given(runMachine, toRunning).when(runEv.exited({ exitCode: 0, timedOut: true })).then('timed_out', ['finalize']);
    given(runMachine, [...toRunning, runEv.cancelRequested('stop')])
      .when(runEv.exited({ exitCode: null, signal: 'SIGTERM', timedOut: true }))
      .then('timed_out', ['finalize']);
  });

  it('spawning --process.spawn_failed--> failed, with the error and a duration from the intent', () => {
    const { context } = given(runMachine, [claimed, requested])
      .when(runEv.spawnFailed('command not found: nope', 'ENOENT', at(260)))
      .then('failed', [{ type: 'finalize', params: { status: 'failed' } }]);
    expect(context).toMatchObject({ error: 'command not found: nope', finishedAt: at(260), durationMs: 250, pid: null });
  });

  it('a spawn failure before the intent was recorded is not accepted', () => {
    given(runMachine, [claimed]).when(runEv.spawnFailed()).rejected();
  });
});

describe('run machine: cancellation', () => {
  it('cancel before the spawn intent ends the run at once, without spawning', () => {
    const { context } = given(runMachine, [claimed])
      .when(runEv.cancelRequested('user asked'))
      .then('cancelled', [{ type: 'finalize', params: { status: 'cancelled' } }]);
    expect(context).toMatchObject({ cancelRequested: true, error: 'cancelled: user asked', finishedAt: at(500), durationMs: null });
  });

  it('cancel without a reason is recorded as plain "cancelled"', () => {
    const { context } = given(runMachine, [claimed]).when(runEv.cancelRequested(null)).then('cancelled', ['finalize']);
    expect(context.error).toBe('cancelled');
  });

  it('cancel while spawning is remembered; the exit that follows is cancelled', () => {
    const { context } = given(runMachine, [claimed, requested]).when(runEv.cancelRequested('ctrl-c')).then('spawning', []);
    expect(context.cancelRequested).toBe(true);
    given(runMachine, [claimed, requested, runEv.cancelRequested('ctrl-c')]).when(spawned).then('running', []);
    const end = given(runMachine, [claimed, requested, runEv.cancelRequested('ctrl-c'), spawned])
      .when(runEv.exited({ exitCode: null, signal: 'SIGTERM', cancelled: false, error: null }))
      .then('cancelled', [{ type: 'finalize', params: { status: 'cancelled' } }]);
    // The exit carried no error of its own: the cancel reason is kept.
    expect(end.context.error).toBe('cancelled: ctrl-c');
  });

  it('cancel while running asks to kill the process group and waits for the exit', () => {
    const { context } = given(runMachine, toRunning)
      .when(runEv.cancelRequested('stop it'))
      .then('running', [{ type: 'killProcess', params: { runId: 'run_1', pid: 4242, reason: 'stop it' } }]);
    expect(context).toMatchObject({ cancelRequested: true, error: 'cancelled: stop it' });
    const end = given(runMachine, [...toRunning, runEv.cancelRequested('stop it')])
      .when(runEv.exited({ exitCode: null, signal: 'SIGTERM', cancelled: true, error: 'cancelled: stop it' }))
      .then('cancelled', ['finalize']);
    expect(end.context).toMatchObject({ signal: 'SIGTERM', error: 'cancelled: stop it' });
  });

  it('a process that exits 0 after a cancel request is still recorded cancelled', () => {
    given(runMachine, [...toRunning, runEv.cancelRequested(null)]).when(runEv.exited()).then('cancelled', ['finalize']);
  });
});

describe('run machine: abandoned', () => {
  for (const [state, events] of [
    ['claimed', [claimed]],
    ['spawning', [claimed, requested]],
    ['running', toRunning],
  ] as const) {
    it(`${state} --run.abandoned--> abandoned`, () => {
      const { context } = given(runMachine, events)
        .when(runEv.abandoned('runner died', at(2010)))
        .then('abandoned', [{ type: 'finalize', params: { status: 'abandoned' } }]);
      expect(context.error).toBe('runner died');
      expect(context.finishedAt).toBe(at(2010));
      expect(context.durationMs).toBe(state === 'claimed' ? null : 2000);
    });
  }
});

describe('run machine: rejected events', () => {
  const all: MachineInput[] = [
    claimed,
    requested,
    spawned,
    runEv.spawnFailed(),
    runEv.cancelRequested(),
    runEv.exited(),
    runEv.abandoned(),
  ];
  const accepted: Record<string, string[]> = {
    new: ['run.claimed'],
    claimed: ['process.spawn_requested', 'run.cancel_requested', 'run.abandoned'],
    spawning: ['process.spawned', 'process.spawn_failed', 'run.cancel_requested', 'run.abandoned'],
    running: ['process.exited', 'run.cancel_requested', 'run.abandoned'],
  };
  const reach: Record<string, MachineInput[]> = {
    new: [],
    claimed: [claimed],
    spawning: [claimed, requested],
    running: toRunning,
    succeeded: [...toRunning, runEv.exited()],
    failed: [claimed, requested, runEv.spawnFailed()],
    timed_out: [...toRunning, runEv.exited({ timedOut: true })],
    cancelled: [claimed, runEv.cancelRequested()],
    abandoned: [claimed, runEv.abandoned()],
  };

  for (const [state, events] of Object.entries(reach)) {
    for (const event of all) {
      if (accepted[state]?.includes(event.type)) continue;
      it(`${state} rejects ${event.type}`, () => {
        given(runMachine, events).when(event).rejected();
      });
    }
  }

  it('every terminal state is final and listed as terminal', () => {
    for (const status of ['succeeded', 'failed', 'timed_out', 'cancelled', 'abandoned'] as const) {
      const { snapshot } = fold(runMachine, reach[status]!);
      expect(snapshot.value).toBe(status);
      expect(snapshot.status).toBe('done');
      expect(TERMINAL_RUN_STATUSES.has(status)).toBe(true);
    }
    for (const status of ['new', 'claimed', 'spawning', 'running'] as const) {
      expect(TERMINAL_RUN_STATUSES.has(status)).toBe(false);
      expect(fold(runMachine, reach[status]!).snapshot.status).toBe('active');
    }
  });
});

describe('run machine: purity', () => {
  it('folding the same events twice gives the same states and context', () => {
    const events = [...toRunning, runEv.cancelRequested('x'), runEv.exited({ cancelled: true, exitCode: null, signal: 'SIGTERM' })];
    const a = fold(runMachine, events);
    const b = fold(runMachine, events);
    expect(a.steps.map((s) => s.after.value)).toEqual(['claimed', 'spawning', 'running', 'running', 'cancelled']);
    expect(b.steps.map((s) => s.after.value)).toEqual(a.steps.map((s) => s.after.value));
    expect(b.snapshot.context).toEqual(a.snapshot.context);
  });
});

describe('run machine: a workflow loop', () => {
  it('claimed → running when its workflow run is recorded (startWorkflow), and ends as that run ends', async () => {
    const { fold } = await import('../../src/machines/fold.js');
    const { runMachine } = await import('../../src/machines/run.js');
    const { runEv } = await import('../helpers/events.js');
    for (const [status, state] of [
      ['succeeded', 'succeeded'],
      ['failed', 'failed'],
      ['cancelled', 'cancelled'],
      ['timed_out', 'timed_out'],
    ] as const) {
      const { snapshot, steps } = fold(runMachine, [runEv.claimed(), runEv.workflowStarted(), runEv.workflowEnded({ status, error: status === 'succeeded' ? null : 'x' })]);
      expect(steps.map((s) => s.accepted)).toEqual([true, true, true]);
      expect(steps[1]!.actions.map((a) => a.type)).toContain('startWorkflow');
      expect(snapshot.value).toBe(state);
    }
  });
});
