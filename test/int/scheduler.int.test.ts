/**
 * The scheduler on real SQLite files and real fixture processes, time from a SimulatedClock:
 * catch-up after a wall-clock jump (latest / none / all with a window), runs of one loop one after
 * another, clock jumps backward and forward, racing passes (one process, two runtimes, a forced
 * compare-and-set conflict), overlap skip / allow against a run still going, max-runs and --at
 * expiry. After every test the log replays and the projections verify.
 */
import { filter, firstValueFrom } from 'rxjs';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { Db } from '../../src/events/db.js';
import { InvalidTransitionError } from '../../src/events/errors.js';
import type { StoredEvent } from '../../src/events/types.js';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { changeLoopState, createCommandLoop, type CreateCommandLoopInput } from '../../src/runtime/loops/commands.js';
import { upcomingSlots } from '../../src/scheduling/planner.js';
import { findLoop, type LoopView } from '../../src/runtime/queries/loops.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { tick, type TickResult } from '../../src/runtime/daemon/pass.js';
import { decideLoop, liveRunLeases, runningRuns } from '../../src/runtime/loops/decisions.js';
import { eventTypes, expectLogConsistent } from '../helpers/invariants.js';
import { killGroupIfAlive } from '../helpers/proc.js';
import { useRuntime, type TestRuntime } from '../helpers/tmp.js';
import { leaseRenewedPast } from '../helpers/leases.js';

const MIN = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();
/** The n-th hourly slot of a loop created at T0 with --every 1h. */
const slotH = (n: number) => iso(T0 + n * HOUR);

async function setup(): Promise<{ clock: SimulatedClock; runtime: TestRuntime }> {
  const clock = new SimulatedClock(T0);
  const runtime = await useRuntime({ clock });
  onTestFinished(() => expectLogConsistent(runtime));
  return { clock, runtime };
}

/** A second runtime (another runner) on the same data directory, closed when the test finishes. */
async function secondRuntime(first: Runtime, clock: SimulatedClock, runnerId = 'test-host:2:runner-b'): Promise<Runtime> {
  const other = await openRuntime({ dataDir: first.dataDir, clock, runnerId });
  const groups: number[] = [];
  const sub = other.log.events$.subscribe((e) => {
    if (e.type === 'process.spawned') groups.push((e.data as { pgid: number }).pgid);
  });
  onTestFinished(() => {
    sub.unsubscribe();
    for (const pgid of groups) killGroupIfAlive(pgid);
    other.close();
  });
  return other;
}

function hourly(runtime: Runtime, input: Partial<CreateCommandLoopInput> = {}, schedule: CreateCommandLoopInput['schedule'] = {}): Promise<LoopView> {
  return createCommandLoop(runtime, { name: 'job', command: 'true', ...input, schedule: { every: '1h', tz: 'UTC', ...schedule } });
}

interface RunRow {
  id: string;
  slot: string;
  scheduled_for: string;
  trigger: string;
  status: string;
  runner_id: string;
  started_at: string | null;
  finished_at: string | null;
}
const runRows = (db: Db, loopId: string) =>
  db.prepare('SELECT * FROM loop_runs WHERE loop_id = ? ORDER BY claimed_position').all(loopId) as RunRow[];

interface DecisionRow {
  decision: string;
  slot_from: string;
  slot_to: string;
  count: number;
  run_id: string | null;
  reason: string | null;
}

/**
 * The slot audit: every slot in slot_decisions (ranges expanded on the loop's schedule, checked
 * exact) is decided once; every fired decision has exactly one run, of that slot, and every
 * scheduled run comes from a fired decision.
 */
function auditSlots(runtime: Runtime, loopId: string): { decided: string[]; fired: string[]; rows: DecisionRow[] } {
  const loop = findLoop(runtime.db, loopId, { includeRemoved: true });
  const rows = runtime.db.prepare('SELECT * FROM slot_decisions WHERE loop_id = ? ORDER BY position').all(loopId) as DecisionRow[];
  const plannable = { id: loop.id, schedule: loop.schedule, timing: { ...loop.timing, maxRuns: null } };
  const decided: string[] = [];
  for (const row of rows) {
    if (row.count === 1 && row.slot_from === row.slot_to) {
      decided.push(row.slot_from);
      continue;
    }
    const slots = upcomingSlots(plannable, Date.parse(row.slot_from) - 1, row.count).map((s) => s.slot);
    expect(slots[0]).toBe(row.slot_from);
    expect(slots[slots.length - 1]).toBe(row.slot_to);
    decided.push(...slots);
  }
  expect(new Set(decided).size, 'a slot was decided twice').toBe(decided.length);
  const fired = rows.filter((r) => r.decision === 'fired');
  const runs = runRows(runtime.db, loopId).filter((r) => r.trigger === 'schedule');
  expect(runs.map((r) => [r.id, r.slot]).sort()).toEqual(fired.map((f) => [f.run_id, f.slot_from]).sort());
  expect(new Set(runs.map((r) => r.slot)).size).toBe(runs.length);
  return { decided, fired: fired.map((f) => f.slot_from), rows };
}

const types = (result: TickResult) => result.decisions.map((d) => d.type);

async function positionsOf(runtime: Runtime, runId: string): Promise<{ first: number; last: number }> {
  const events = await runtime.log.readStream(`run:${runId}`);
  return { first: events[0]!.position, last: events[events.length - 1]!.position };
}

describe('tick: catch-up after the wall clock jumps 3 days and 30 minutes (between two slots)', () => {
  it('catch-up latest: exactly one run, of the last slot; the older 71 are coalesced into it', async () => {
    const { clock, runtime } = await setup();
    const loop = await hourly(runtime, { catchUp: 'latest' });
    expect(loop.nextRunAt).toBe(slotH(1));
    clock.jumpWall(3 * DAY + 30 * MIN);
    const result = await tick(runtime);

    expect(types(result)).toEqual(['slot.coalesced', 'slot.fired']);
    expect(result.decisions[0]!.data).toEqual({ from: slotH(1), to: slotH(71), count: 71, into: slotH(72) });
    expect(result.decisions[1]!.data).toMatchObject({ slot: slotH(72), late: true, nextRunAt: slotH(73) });
    expect(result.runs).toHaveLength(1);
    expect(result.runs[0]).toMatchObject({ status: 'succeeded', slot: slotH(72), scheduledFor: slotH(72), trigger: 'schedule' });
    expect(result.conflicts).toEqual([]);
    expect(findLoop(runtime.db, 'job')).toMatchObject({ status: 'active', nextRunAt: slotH(73), scheduledRuns: 1, runCount: 1 });
    expect(auditSlots(runtime, loop.id).decided).toHaveLength(72);
    // The decisions are one append on the loop stream.
    const loopEvents = await runtime.log.readStream(`loop:${loop.id}`);
    expect(loopEvents.map((e) => e.type)).toEqual(['loop.created', 'slot.coalesced', 'slot.fired']);
    expect(loopEvents[2]!.position - loopEvents[1]!.position).toBe(1);

    // A second pass at the same instant finds nothing due.
    expect(await tick(runtime)).toMatchObject({ decisions: [], runs: [], conflicts: [] });
  });

  it('catch-up none: no run; all 72 slots are missed', async () => {
    const { clock, runtime } = await setup();
    const loop = await hourly(runtime, { catchUp: 'none' });
    clock.jumpWall(3 * DAY + 30 * MIN);
    const result = await tick(runtime);
    expect(result.decisions).toEqual([
      {
        loopId: loop.id,
        loopName: 'job',
        type: 'slot.missed',
        data: { from: slotH(1), to: slotH(72), count: 72, reason: 'catch-up none', nextRunAt: slotH(73) },
      },
    ]);
    expect(result.runs).toEqual([]);
    expect(runRows(runtime.db, loop.id)).toEqual([]);
    expect(findLoop(runtime.db, 'job')).toMatchObject({ status: 'active', nextRunAt: slotH(73), scheduledRuns: 0 });
    // The schedule goes on: the next slot, on time, fires.
    clock.jumpWall(30 * MIN);
    const next = await tick(runtime);
    expect(types(next)).toEqual(['slot.fired']);
    expect(next.runs.map((r) => r.slot)).toEqual([slotH(73)]);
    auditSlots(runtime, loop.id);
  });

  it('catch-up all with a 5 h window: only the 5 slots inside it run, one after another, oldest first', async () => {
    const { clock, runtime } = await setup();
    const loop = await hourly(runtime, { catchUp: 'all', catchUpWindow: '5h' });
    clock.jumpWall(3 * DAY + 30 * MIN);
    const claimedWhileRunning: string[][] = [];
    const sub = runtime.log.events$.pipe(filter((e: StoredEvent) => e.type === 'run.claimed')).subscribe(() => {
      const at = clock.now();
      // Asked as the claim is published: the live leases are one read of the lease store.
      void liveRunLeases(runtime, at).then((live) => claimedWhileRunning.push(runningRuns(runtime, loop.id, live)));
    });
    onTestFinished(() => sub.unsubscribe());
    // Each run's end moves the simulated clock a second, so the runs' times are distinct too.
    const result = await tick(runtime, { onRun: () => clock.advance(1000) });

    expect(types(result)).toEqual(['slot.missed', 'slot.fired', 'slot.fired', 'slot.fired', 'slot.fired', 'slot.fired']);
    expect(result.decisions[0]!.data).toMatchObject({ from: slotH(1), to: slotH(67), count: 67, reason: 'outside catch-up window' });
    const runs = runRows(runtime.db, loop.id);
    expect(runs.map((r) => r.slot)).toEqual([68, 69, 70, 71, 72].map(slotH));
    expect(runs.every((r) => r.status === 'succeeded')).toBe(true);
    // One after another: each run ended (in the log, and in time) before the next one was claimed,
    // and when each was claimed no other run of the loop was going.
    for (let i = 1; i < runs.length; i++) {
      expect((await positionsOf(runtime, runs[i]!.id)).first).toBeGreaterThan((await positionsOf(runtime, runs[i - 1]!.id)).last);
      expect(Date.parse(runs[i]!.started_at!)).toBeGreaterThan(Date.parse(runs[i - 1]!.finished_at!));
    }
    expect(claimedWhileRunning).toEqual(runs.map((r) => [r.id]));
    expect(findLoop(runtime.db, 'job')).toMatchObject({ nextRunAt: slotH(73), scheduledRuns: 5, runCount: 5 });
    expect(auditSlots(runtime, loop.id).decided).toHaveLength(72);
  });

  it('catch-up all with a limit: the most recent slots run, the older ones are over the limit', async () => {
    const { clock, runtime } = await setup();
    const loop = await hourly(runtime, { catchUp: 'all', catchUpLimit: 2 });
    clock.jumpWall(5 * HOUR + 30 * MIN);
    const result = await tick(runtime);
    expect(types(result)).toEqual(['slot.missed', 'slot.fired', 'slot.fired']);
    expect(result.decisions[0]!.data).toMatchObject({ count: 3, reason: 'over catch-up limit' });
    expect(result.runs.map((r) => r.slot)).toEqual([slotH(4), slotH(5)]);
    auditSlots(runtime, loop.id);
  });
});

describe('tick: wall-clock jumps, pause', () => {
  it('a jump backward then forward never runs a slot twice, and the schedule resumes', async () => {
    const { clock, runtime } = await setup();
    const loop = await hourly(runtime, { catchUp: 'latest' });
    clock.jumpWall(HOUR);
    expect((await tick(runtime)).runs.map((r) => r.slot)).toEqual([slotH(1)]);

    clock.jumpWall(-3 * HOUR); // an NTP step back to T0 - 2h
    expect(await tick(runtime)).toMatchObject({ decisions: [], runs: [] });
    clock.jumpWall(3 * HOUR); // back at slot 1: already decided
    expect(await tick(runtime)).toMatchObject({ decisions: [], runs: [] });
    clock.jumpWall(HOUR); // slot 2
    expect((await tick(runtime)).runs.map((r) => r.slot)).toEqual([slotH(2)]);

    // Back again, past slot 2 only by the grace: still nothing twice.
    clock.jumpWall(-HOUR + 1);
    expect(await tick(runtime)).toMatchObject({ decisions: [], runs: [] });
    clock.jumpWall(2 * HOUR - 1);
    expect((await tick(runtime)).runs.map((r) => r.slot)).toEqual([slotH(3)]);

    const audit = auditSlots(runtime, loop.id);
    expect(audit.decided).toEqual([slotH(1), slotH(2), slotH(3)]);
    expect(findLoop(runtime.db, 'job')).toMatchObject({ nextRunAt: slotH(4), scheduledRuns: 3 });
  });

  it('a paused loop is not ticked; after resume the slots of the pause are not caught up', async () => {
    const { clock, runtime } = await setup();
    const loop = await hourly(runtime, { catchUp: 'all' });
    clock.jumpWall(30 * MIN);
    await changeLoopState(runtime, 'job', 'pause');
    clock.jumpWall(5 * HOUR);
    expect(await tick(runtime)).toMatchObject({ decisions: [], runs: [] });
    await changeLoopState(runtime, 'job', 'resume'); // at T0 + 5h30
    expect(findLoop(runtime.db, 'job').nextRunAt).toBe(slotH(6));
    expect(await tick(runtime)).toMatchObject({ decisions: [], runs: [] });
    clock.jumpWall(30 * MIN);
    expect((await tick(runtime)).runs.map((r) => r.slot)).toEqual([slotH(6)]);
    expect(auditSlots(runtime, loop.id).decided).toEqual([slotH(6)]);
  });
});

describe('tick: racing passes decide each slot once', () => {
  it('two passes started together in one process: one decides, the other finds nothing due', async () => {
    const { clock, runtime } = await setup();
    const loop = await hourly(runtime, { catchUp: 'all', catchUpWindow: '3h' });
    clock.jumpWall(3 * HOUR + 10 * MIN);
    const [a, b] = await Promise.all([tick(runtime), tick(runtime)]);
    expect(a.runs.length + b.runs.length).toBe(3);
    expect([...a.runs, ...b.runs].map((r) => r.slot).sort()).toEqual([slotH(1), slotH(2), slotH(3)]);
    expect(runRows(runtime.db, loop.id)).toHaveLength(3);
    expect(auditSlots(runtime, loop.id).fired).toEqual([slotH(1), slotH(2), slotH(3)]);
  });

  it('two runtimes (two runners) on the same data directory: each slot decided once, one run per slot', async () => {
    const { clock, runtime } = await setup();
    const other = await secondRuntime(runtime, clock);
    const loop = await hourly(runtime, { catchUp: 'all' });
    await hourly(runtime, { name: 'job2', catchUp: 'latest' });
    clock.jumpWall(2 * HOUR + 10 * MIN);
    const [a, b] = await Promise.all([tick(runtime), tick(other)]);
    const all = [...a.runs, ...b.runs];
    expect(all).toHaveLength(3); // job: slots 1 and 2; job2: slot 2 (slot 1 coalesced)
    expect(all.every((r) => r.status === 'succeeded')).toBe(true);
    expect(auditSlots(runtime, loop.id).fired).toEqual([slotH(1), slotH(2)]);
    expect(auditSlots(runtime, findLoop(runtime.db, 'job2').id).fired).toEqual([slotH(2)]);
    expect(runtime.db.prepare('SELECT COUNT(*) AS n FROM loop_runs').get()).toEqual({ n: 3 });
  });

  it('a pass whose due loop another pass decided meanwhile decides nothing and runs nothing; the winner runs the slot once', async () => {
    const { clock, runtime } = await setup();
    const other = await secondRuntime(runtime, clock);
    const loop = await hourly(runtime, { catchUp: 'latest' });
    clock.jumpWall(HOUR);
    // Runner B has found the loop due when runner A's whole pass (decide, claim) slips in. B decides
    // inside one transaction (the stream read and the append together), so it finds the slot decided;
    // a store without that transaction would lose the compare-and-set instead (a conflict).
    // A's pass is asynchronous: B's next transaction (its decisions) waits until A's pass is over.
    let winner: Promise<TickResult> | null = null;
    const raced: Runtime = {
      ...other,
      log: new Proxy(other.log, {
        get(target, prop) {
          if (prop === 'batch') {
            return async (...args: Parameters<typeof target.batch>) => {
              if (winner) await winner;
              return target.batch(...args);
            };
          }
          const v = Reflect.get(target, prop, target);
          return typeof v === 'function' ? v.bind(target) : v;
        },
      }),
      db: new Proxy(other.db, {
        get(target, prop) {
          if (prop === 'prepare') {
            return (sql: string) => {
              const stmt = target.prepare(sql);
              if (!sql.includes("FROM loops WHERE status = 'active' AND next_run_at <= ?")) return stmt; // the due loops
              return new Proxy(stmt, {
                get(s, p) {
                  if (p === 'all') {
                    return (...args: unknown[]) => {
                      winner ??= tick(runtime);
                      return (s.all as (...a: unknown[]) => unknown[])(...args);
                    };
                  }
                  const v = Reflect.get(s, p, s);
                  return typeof v === 'function' ? v.bind(s) : v;
                },
              });
            };
          }
          const v = Reflect.get(target, prop, target);
          return typeof v === 'function' ? v.bind(target) : v;
        },
      }),
    };
    const lost = await tick(raced);
    expect(lost).toMatchObject({ decisions: [], runs: [], conflicts: [] });
    expect(winner).not.toBeNull();
    const won = await winner!;
    expect(types(won)).toEqual(['slot.fired']);
    expect(won.runs.map((r) => [r.slot, r.status])).toEqual([[slotH(1), 'succeeded']]);
    expect(auditSlots(runtime, loop.id).fired).toEqual([slotH(1)]);
    // The loser's decideLoop, retried, finds nothing left to decide.
    expect(await decideLoop(other, loop.id, clock.now())).toEqual({ events: [], fired: [] });
  });
});

describe('tick: overlap', () => {
  // The run of the first slot (01:00) sleeps; later slots' runs end at once.
  const SLOW_FIRST = 'case "$LOOPS_SCHEDULED_FOR" in *T01:00:00*) sleep 5;; esac';

  async function firstRunGoing(overlap: 'skip' | 'allow') {
    const { clock, runtime } = await setup();
    const other = await secondRuntime(runtime, clock);
    const loop = await hourly(runtime, { command: SLOW_FIRST, overlap });
    clock.jumpWall(HOUR);
    const cancel = new AbortController();
    const spawned = firstValueFrom(runtime.log.events$.pipe(filter((e) => e.type === 'process.spawned')));
    const first = tick(runtime, { signal: cancel.signal });
    await spawned;
    const [going] = runRows(runtime.db, loop.id);
    expect(going).toMatchObject({ slot: slotH(1), status: 'running' });
    // An hour passes (heartbeats keep the first run's lease alive) and runner B looks — once the
    // heartbeat's renewal has reached the lease store (on PostgreSQL a round trip after the jump).
    clock.advance(HOUR);
    await leaseRenewedPast(runtime, `run:${going!.id}`, clock.now());
    expect(runningRuns(other, loop.id, await liveRunLeases(other, clock.now()))).toEqual([going!.id]);
    return { clock, runtime, other, loop, first, cancel, going: going! };
  }

  it('skip: the next slot is skipped, blocked by the run still going; cancelling that run ends it', async () => {
    const { runtime, other, loop, first, cancel, going } = await firstRunGoing('skip');
    const second = await tick(other);
    expect(second.decisions).toEqual([
      {
        loopId: loop.id,
        loopName: 'job',
        type: 'slot.skipped',
        data: { slot: slotH(2), fireAt: slotH(2), reason: 'overlap', blockedBy: going.id, nextRunAt: slotH(3) },
      },
    ]);
    expect(second.runs).toEqual([]);
    cancel.abort('test over');
    const done = await first;
    expect(done.runs.map((r) => [r.id, r.status])).toEqual([[going.id, 'cancelled']]);
    expect(findLoop(runtime.db, 'job')).toMatchObject({ nextRunAt: slotH(3), scheduledRuns: 1 });
    const audit = auditSlots(runtime, loop.id);
    expect(audit.rows.map((r) => [r.decision, r.slot_from, r.run_id])).toEqual([
      ['fired', slotH(1), going.id],
      ['skipped', slotH(2), going.id],
    ]);
  });

  it('allow: the next slot fires while the first run is still going', async () => {
    const { runtime, other, loop, first, cancel, going } = await firstRunGoing('allow');
    const second = await tick(other);
    expect(types(second)).toEqual(['slot.fired']);
    expect(second.runs).toHaveLength(1);
    expect(second.runs[0]).toMatchObject({ slot: slotH(2), status: 'succeeded', runnerId: other.runnerId });
    expect(runRows(runtime.db, loop.id).find((r) => r.id === going.id)!.status).toBe('running');
    cancel.abort('test over');
    await first;
    expect(auditSlots(runtime, loop.id).fired).toEqual([slotH(1), slotH(2)]);
  });

  it('a run whose lease lapsed (its runner suspended) is taken over by the next pass: adopted, the slot due meanwhile skipped, the suspended runner fenced out', async () => {
    const { clock, runtime } = await setup();
    const other = await secondRuntime(runtime, clock);
    const loop = await hourly(runtime, { command: SLOW_FIRST, overlap: 'skip' });
    clock.jumpWall(HOUR);
    const spawned = firstValueFrom(runtime.log.events$.pipe(filter((e) => e.type === 'process.spawned')));
    const first = tick(runtime).then(
      (r) => r,
      (e: unknown) => e,
    );
    const { streamId } = await spawned;
    // The wall clock jumps an hour while monotonic time stands still (runner A suspended): no
    // heartbeat, so A's 30 s lease lapses.
    clock.jumpWall(HOUR);
    expect(runningRuns(other, loop.id, await liveRunLeases(other, clock.now()))).toEqual([]);
    const adopted = firstValueFrom(other.log.events$.pipe(filter((e) => e.type === 'process.adopted')));
    const second = tick(other);
    // B took the run over (its process still runs) before deciding: slot 2 is skipped for it.
    expect((await adopted).data).toMatchObject({ runnerId: 'test-host:2:runner-b', leaseToken: 2 });
    // B watches the adopted process on its (simulated) clock until it ends (its 5 s sleep).
    let done = false;
    void second.finally(() => (done = true));
    while (!done) {
      clock.advance(250);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const b = await second;
    expect(types(b)).toEqual(['slot.skipped']);
    expect(b.runs.map((r) => [r.slot, r.status])).toEqual([[slotH(1), 'succeeded']]);
    // A saw its process end too, but its lease was taken: it records nothing (fenced), and its
    // pass does not fail for it.
    const a = await first;
    expect(a).toMatchObject({ runs: [] });
    expect(eventTypes(runtime.log, streamId).filter((t) => t === 'process.exited')).toHaveLength(1);
    expect(auditSlots(runtime, loop.id).fired).toEqual([slotH(1)]);
    expectLogConsistent(runtime);
  });
});

describe('tick: the end of a schedule', () => {
  it('max-runs 2: after two fired slots the loop is expired and fires no more', async () => {
    const { clock, runtime } = await setup();
    const loop = await hourly(runtime, {}, { maxRuns: 2 });
    clock.jumpWall(HOUR);
    expect(types(await tick(runtime))).toEqual(['slot.fired']);
    clock.jumpWall(HOUR);
    const second = await tick(runtime);
    expect(types(second)).toEqual(['slot.fired', 'loop.expired']);
    expect(second.decisions[1]!.data).toEqual({ reason: 'max-runs' });
    expect(second.runs).toHaveLength(1);
    expect(findLoop(runtime.db, 'job')).toMatchObject({ status: 'expired', nextRunAt: null, scheduledRuns: 2, runCount: 2 });
    clock.jumpWall(5 * HOUR);
    expect(await tick(runtime)).toMatchObject({ decisions: [], runs: [] });
    expect(auditSlots(runtime, loop.id).fired).toEqual([slotH(1), slotH(2)]);
    await expect(runNow(runtime, 'job')).rejects.toBeInstanceOf(InvalidTransitionError);
    // Expired loops can be archived.
    await changeLoopState(runtime, 'job', 'archive');
    expect(eventTypes(runtime.log, `loop:${loop.id}`)).toEqual(['loop.created', 'slot.fired', 'slot.fired', 'loop.expired', 'loop.archived']);
  });

  it('max-runs 2 after a long downtime with catch-up all: two fire, the rest are missed, the loop expires', async () => {
    const { clock, runtime } = await setup();
    const loop = await hourly(runtime, { catchUp: 'all' }, { maxRuns: 2 });
    clock.jumpWall(4 * HOUR + 30 * MIN);
    const result = await tick(runtime);
    expect(types(result)).toEqual(['slot.missed', 'slot.fired', 'slot.fired', 'loop.expired']);
    expect(result.decisions[0]!.data).toMatchObject({ from: slotH(3), to: slotH(4), count: 2, reason: 'max-runs reached' });
    expect(result.runs.map((r) => r.slot)).toEqual([slotH(1), slotH(2)]);
    expect(findLoop(runtime.db, 'job').status).toBe('expired');
    expect(auditSlots(runtime, loop.id).decided).toHaveLength(4);
  });

  it('--at fires once, then the loop is expired', async () => {
    const { clock, runtime } = await setup();
    const loop = await createCommandLoop(runtime, { name: 'once', command: 'true', schedule: { at: slotH(1), tz: 'UTC' } });
    expect(loop.nextRunAt).toBe(slotH(1));
    clock.jumpWall(HOUR - 1);
    expect(await tick(runtime)).toMatchObject({ decisions: [], runs: [] });
    clock.jumpWall(1);
    const result = await tick(runtime);
    expect(types(result)).toEqual(['slot.fired', 'loop.expired']);
    expect(result.decisions[1]!.data).toEqual({ reason: 'no more slots' });
    expect(result.runs.map((r) => [r.slot, r.status])).toEqual([[slotH(1), 'succeeded']]);
    expect(findLoop(runtime.db, 'once')).toMatchObject({ status: 'expired', nextRunAt: null, scheduledRuns: 1 });
    clock.jumpWall(DAY);
    expect(await tick(runtime)).toMatchObject({ decisions: [], runs: [] });
    expect(auditSlots(runtime, loop.id).fired).toEqual([slotH(1)]);
  });

  it('--expires-at: the last slot before it fires and the loop expires (reason expires-at)', async () => {
    const { clock, runtime } = await setup();
    const loop = await hourly(runtime, {}, { expiresAt: iso(T0 + 2 * HOUR + 30 * MIN) });
    clock.jumpWall(HOUR);
    expect(types(await tick(runtime))).toEqual(['slot.fired']);
    clock.jumpWall(HOUR);
    const result = await tick(runtime);
    expect(types(result)).toEqual(['slot.fired', 'loop.expired']);
    expect(result.decisions[1]!.data).toEqual({ reason: 'expires-at' });
    expect(findLoop(runtime.db, 'job').status).toBe('expired');
    auditSlots(runtime, loop.id);
  });

  it('manual loops are never ticked', async () => {
    const { clock, runtime } = await setup();
    await createCommandLoop(runtime, { name: 'man', command: 'true', schedule: { manual: true, tz: 'UTC' } });
    clock.jumpWall(30 * DAY);
    expect(await tick(runtime)).toMatchObject({ decisions: [], runs: [], conflicts: [] });
  });
});
