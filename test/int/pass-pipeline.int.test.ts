/**
 * A pass's decisions in growing transactions (issue 14: a burst fires on time): with
 * `betweenCommits`, `decide` commits the due loops 4, 8, 16… at a time and hands over the runs each
 * fired, so the daemon starts the first runs of a burst while the rest are decided. What is decided
 * must not change: the same decisions as one transaction, for every loop. And what the daemon
 * starts in between must not jump the queue: `dispatch(…, only)` starts a named run only when no
 * earlier work of its loop waits.
 */
import { describe, expect, it } from 'vitest';
import type { SqliteEventLog } from '../../src/events/sqlite-log.js';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { createCommandLoop } from '../../src/runtime/loops/commands.js';
import { decide, Dispatcher } from '../../src/runtime/daemon/pass.js';
import type { Runtime } from '../../src/runtime/runtime.js';
import { expectLogConsistent } from '../helpers/invariants.js';
import { useRuntime } from '../helpers/tmp.js';

const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const MIN = 60_000;

const decisions = (runtime: Runtime) =>
  (runtime.db.prepare('SELECT l.name AS loop, d.decision, d.slot_from FROM slot_decisions d JOIN loops l ON l.id = d.loop_id ORDER BY l.name, d.position').all() as Array<{
    loop: string;
    decision: string;
    slot_from: string;
  }>);

async function burst(runtime: Runtime, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const name = `l${String(i).padStart(2, '0')}`;
    // Every third loop is paused-like in effect: its slot is an hour out, so it is not due.
    const schedule = i % 3 === 2 ? { every: '1h', tz: 'UTC' } : { every: '1m', tz: 'UTC' };
    await createCommandLoop(runtime, { name, command: 'true', schedule });
  }
}

describe('a pass decides a burst in growing transactions', () => {
  it('30 due loops: committed 4, 8, 16, then the rest, each commit handing over the runs fired so far; the decisions equal one transaction\'s', async () => {
    const clock = new SimulatedClock(T0);
    const piped = await useRuntime({ clock, runnerId: 'test-host:1:daemon' });
    const whole = await useRuntime({ clock, runnerId: 'test-host:1:daemon' });
    await burst(piped, 45); // 30 due at T0+1m, 15 an hour out
    await burst(whole, 45);
    clock.advance(MIN);

    const handed: number[] = [];
    const stats = (piped.log as Partial<SqliteEventLog>).commitStats!; // the SQLite store's (this suite runs on SQLite)
    const commitsBefore = stats.commits;
    const result = await decide(piped, clock.now(), {
      betweenCommits: async (fired) => {
        handed.push(fired.size);
        // What was handed over is committed: a reader sees those slots fired.
        const committed = piped.db.prepare("SELECT COUNT(*) AS n FROM slot_decisions WHERE decision = 'fired'").get() as { n: number };
        expect(committed.n).toBe(fired.size);
      },
    });
    expect(handed).toEqual([4, 12, 28]);
    expect(result.decisions.filter((d) => d.type === 'slot.fired')).toHaveLength(30);
    // Four transactions (4 + 8 + 16 + 2), not one per loop.
    expect(stats.commits - commitsBefore).toBeLessThanOrEqual(4);

    await decide(whole, clock.now());
    expect(decisions(piped)).toEqual(decisions(whole));
    expectLogConsistent(piped);
  });

  it('nothing due, or fewer than the first transaction: one transaction and no hand-over', async () => {
    const clock = new SimulatedClock(T0);
    const runtime = await useRuntime({ clock, runnerId: 'test-host:1:daemon' });
    await burst(runtime, 3); // 2 due
    const handed: number[] = [];
    const betweenCommits = async (fired: ReadonlySet<string>) => void handed.push(fired.size);
    expect((await decide(runtime, clock.now(), { betweenCommits })).decisions).toEqual([]);
    clock.advance(MIN);
    expect((await decide(runtime, clock.now(), { betweenCommits })).decisions.filter((d) => d.type === 'slot.fired')).toHaveLength(2);
    expect(handed).toEqual([]);
  });
});

describe('Dispatcher.dispatch(dueBy, only)', () => {
  it('starts a named run only when no earlier work of its loop waits; without `only`, in due order', async () => {
    const clock = new SimulatedClock(T0);
    const runtime = await useRuntime({ clock, runnerId: 'test-host:1:daemon' });
    // overlap allow: both slots are fired, and both may run at once.
    await createCommandLoop(runtime, { name: 'both', command: 'true', overlap: 'allow', schedule: { every: '1m', tz: 'UTC' } });
    clock.advance(MIN);
    const first = (await decide(runtime, clock.now())).decisions.find((d) => d.type === 'slot.fired')!.data as { runId: string };
    clock.advance(MIN);
    const second = (await decide(runtime, clock.now())).decisions.find((d) => d.type === 'slot.fired')!.data as { runId: string };

    const dispatcher = new Dispatcher(runtime, { concurrency: 4 });
    // The second slot is named, the first is not: the first goes first, so neither starts now.
    expect(await dispatcher.dispatch(clock.now(), new Set([second.runId]))).toEqual([]);
    expect(dispatcher.active).toBe(0);
    const started = await dispatcher.dispatch(clock.now());
    expect(started.map((item) => item.runId)).toEqual([first.runId, second.runId]);
    await dispatcher.idle();
    dispatcher.close();
    const statuses = runtime.db.prepare('SELECT status FROM loop_runs ORDER BY claimed_position').all() as Array<{ status: string }>;
    expect(statuses.map((s) => s.status)).toEqual(['succeeded', 'succeeded']);
    expectLogConsistent(runtime);
  });
});
