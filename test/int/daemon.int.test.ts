/**
 * The scheduler daemon on a real store (SQLite; PostgreSQL in the `postgres` project) and real
 * child processes, time from a SimulatedClock:
 * each slot fires once as the clock advances; a loop created after start (by another runner on
 * the same data directory, or by the daemon's own runtime) is picked up within a watch interval;
 * a 3-day wall-clock jump is handled by the catch-up policy on the next wake (≤ maxSleep), never as
 * a herd and never twice; the concurrency limit holds; stop() cancels a running run and releases
 * everything; a second daemon on the same data directory is refused.
 *
 * The daemon's loop only moves when a simulated timer fires: `advance` steps the clock one watch
 * interval at a time and awaits `daemon.asleep()` after each step, so the daemon has run what the
 * step woke it for (its head read, its pass) and armed its next timer before the clock moves on.
 * Runs are awaited through `onRun` / `log.events$`. Leases are read through the lease store.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { filter, firstValueFrom, take, toArray } from 'rxjs';
import { describe, expect, it, onTestFinished } from 'vitest';
import { LoopsError } from '../../src/events/errors.js';
import type { StoredEvent } from '../../src/events/types.js';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { Daemon, daemonLease, pidFile, readDaemonState, runningDaemon, type DaemonOptions } from '../../src/runtime/daemon/daemon.js';
import { createCommandLoop, type CreateCommandLoopInput } from '../../src/runtime/loops/commands.js';
import type { LoopView, RunView } from '../../src/runtime/queries/loops.js';
import { hostId } from '../../src/runtime/host.js';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { eventTypes, expectLogConsistent } from '../helpers/invariants.js';
import { leaseRows } from '../helpers/leases.js';
import { isAlive, killGroupIfAlive, waitForGroupGone } from '../helpers/proc.js';
import { tempDir, useRuntime, type TestRuntime } from '../helpers/tmp.js';

const SEC = 1000;
const MIN = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();

/** Lets pending continuations (a state file written at the end of a turn) run: a yield, not a sleep. */
/** The daemon's state file once it says what the daemon knows now (it is rewritten at most every 250 ms). */
async function stateOf(daemon: Daemon, runtime: Runtime) {
  await daemon.stateSaved();
  return readDaemonState(runtime.dataDir);
}

/**
 * Advances the simulated clock by `ms`, `step` at a time, the daemon asleep before and after every
 * step: what a step woke it for (a head read, a pass) is done before the next — one turn on SQLite,
 * round trips on PostgreSQL.
 */
async function advance(clock: SimulatedClock, daemon: Daemon, ms: number, step = SEC): Promise<void> {
  for (let done = 0; done < ms; ) {
    const d = Math.min(step, ms - done);
    await daemon.asleep();
    clock.advance(d);
    done += d;
    await daemon.asleep();
  }
}

/** Runs reported by the daemon's onRun, awaitable by count (bounded, so a bug fails fast). */
class Runs {
  readonly all: RunView[] = [];
  private waiters: Array<{ n: number; resolve: () => void }> = [];
  readonly onRun = (run: RunView) => {
    this.all.push(run);
    this.waiters = this.waiters.filter((w) => (this.all.length >= w.n ? (w.resolve(), false) : true));
  };
  count(n: number, timeoutMs = 10_000): Promise<RunView[]> {
    if (this.all.length >= n) return Promise.resolve(this.all.slice());
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for run #${n} (have ${this.all.length})`)), timeoutMs);
      this.waiters.push({
        n,
        resolve: () => {
          clearTimeout(timer);
          resolve(this.all.slice());
        },
      });
    });
  }
}

interface Setup {
  clock: SimulatedClock;
  runtime: TestRuntime;
  runs: Runs;
  lines: string[];
  daemon: Daemon;
}

/** A runtime on a SimulatedClock at T0 and a (not yet started) daemon; stopped when the test ends. */
async function setup(options: DaemonOptions = {}, runtimeOptions: { runnerId?: string } = {}): Promise<Setup> {
  const clock = new SimulatedClock(T0);
  const runtime = await useRuntime({ clock, runnerId: runtimeOptions.runnerId ?? 'test-host:1:daemon' });
  const runs = new Runs();
  const lines: string[] = [];
  const daemon = new Daemon(runtime, { log: (l) => lines.push(l), onRun: runs.onRun, ...options });
  // Registered after useRuntime's hook: vitest runs onTestFinished hooks in reverse order, so the
  // daemon is stopped before the runtime is closed.
  onTestFinished(() => daemon.stop('test finished'));
  return { clock, runtime, runs, lines, daemon };
}

function everyLoop(runtime: Runtime, name: string, every: string, input: Partial<CreateCommandLoopInput> = {}): Promise<LoopView> {
  return createCommandLoop(runtime, { name, command: 'true', ...input, schedule: { every, tz: 'UTC', ...input.schedule } });
}

/** Another runner (a CLI process, say) on the same data directory, closed when the test ends. */
async function otherRuntime(first: Runtime, clock: SimulatedClock, runnerId = 'test-host:2:cli'): Promise<Runtime> {
  const other = await openRuntime({ dataDir: first.dataDir, clock, runnerId });
  onTestFinished(() => other.close());
  return other;
}

interface DecisionRow {
  decision: string;
  slot_from: string;
  slot_to: string;
  count: number;
  run_id: string | null;
}
const decisions = (runtime: Runtime, loopId: string) =>
  runtime.db.prepare('SELECT decision, slot_from, slot_to, count, run_id FROM slot_decisions WHERE loop_id = ? ORDER BY position').all(loopId) as DecisionRow[];

interface RunRow {
  id: string;
  slot: string;
  status: string;
  trigger: string;
  claimed_at: string;
  error: string | null;
}
const runRows = (runtime: Runtime, loopId: string) =>
  runtime.db.prepare('SELECT id, slot, status, trigger, claimed_at, error FROM loop_runs WHERE loop_id = ? ORDER BY claimed_position').all(loopId) as RunRow[];

/** Every lease the store has (on PostgreSQL the shared schema's, not the replica's), name and holder. */
const leases = async (runtime: Runtime) => (await leaseRows(runtime)).map(({ name, holder }) => ({ name, holder }));

/** Positions of a run's process.spawned and process.exited events. */
async function processSpan(runtime: Runtime, runId: string): Promise<{ spawned: number; exited: number }> {
  const events = await runtime.log.readStream(`run:${runId}`);
  const at = (type: string) => events.find((e) => e.type === type)!.position;
  return { spawned: at('process.spawned'), exited: at('process.exited') };
}

/** Resolves with the next `n` events of `type` published by the log. */
function nextEvents(runtime: Runtime, type: string, n = 1): Promise<StoredEvent[]> {
  return firstValueFrom(
    runtime.log.events$.pipe(
      filter((e) => e.type === type),
      take(n),
      toArray(),
    ),
  );
}

describe('Daemon: firing on the simulated clock', () => {
  it('fires each slot of an --every 1m loop exactly once, on time', async () => {
    const { clock, runtime, runs, daemon } = await setup();
    const loop = await everyLoop(runtime, 'minutely', '1m');
    expect(loop.nextRunAt).toBe(iso(T0 + MIN));

    await daemon.start();
    await daemon.asleep();
    expect(existsSync(pidFile(runtime.dataDir))).toBe(true);
    expect(runningDaemon(runtime.dataDir)).toMatchObject({ pid: process.pid, runnerId: runtime.runnerId });
    expect(await stateOf(daemon, runtime)).toMatchObject({ passes: 1, nextFireAt: iso(T0 + MIN), activeRuns: 0 });

    // 59 s in: nothing decided yet.
    await advance(clock, daemon, 59 * SEC);
    expect(decisions(runtime, loop.id)).toEqual([]);

    for (let n = 1; n <= 3; n += 1) {
      if (n > 1) await advance(clock, daemon, 59 * SEC);
      expect(decisions(runtime, loop.id), `nothing early for slot ${n}`).toHaveLength(n - 1);
      await advance(clock, daemon, SEC);
      // The slot is decided at its due time, in the pass of that wake.
      expect(decisions(runtime, loop.id)).toHaveLength(n);
      const [run] = (await runs.count(n)).slice(-1);
      expect(run).toMatchObject({ status: 'succeeded', trigger: 'schedule', slot: iso(T0 + n * MIN), scheduledFor: iso(T0 + n * MIN) });
      expect(run!.claimedAt).toBe(iso(T0 + n * MIN));
    }

    // Every slot once: three fired decisions, three runs, one per slot, nothing else.
    const rows = decisions(runtime, loop.id);
    expect(rows.map((r) => [r.decision, r.slot_from, r.count])).toEqual([1, 2, 3].map((n) => ['fired', iso(T0 + n * MIN), 1]));
    const fired = runRows(runtime, loop.id);
    expect(fired.map((r) => r.slot)).toEqual([1, 2, 3].map((n) => iso(T0 + n * MIN)));
    expect(fired.map((r) => r.id)).toEqual(rows.map((r) => r.run_id));
    expect(runs.all).toHaveLength(3);

    await daemon.stop();
    expect(eventTypes(runtime.log, `loop:${loop.id}`)).toEqual(['loop.created', 'slot.fired', 'slot.fired', 'slot.fired']);
    expectLogConsistent(runtime);
  });

  it('picks up a loop created after start by another runner within one watch interval, and one created by its own runtime', async () => {
    const { clock, runtime, runs, daemon } = await setup();
    await daemon.start();
    await daemon.asleep();
    // No loops: the daemon sleeps the longest allowed (30 s), watching the log every second.
    expect(await stateOf(daemon, runtime)).toMatchObject({ passes: 1, nextFireAt: null });
    await advance(clock, daemon, 5 * SEC);
    expect((await stateOf(daemon, runtime))!.passes).toBe(1);

    const cli = await otherRuntime(runtime, clock);
    const created = await everyLoop(cli, 'late', '10s'); // at T0+5s: due at T0+15s
    expect(created.nextRunAt).toBe(iso(T0 + 15 * SEC));
    // One watch interval later the daemon has re-planned: the new loop is its next fire time.
    await advance(clock, daemon, SEC);
    expect(await stateOf(daemon, runtime)).toMatchObject({ passes: 2, nextFireAt: iso(T0 + 15 * SEC) });

    await advance(clock, daemon, 9 * SEC);
    const [first] = await runs.count(1);
    expect(first).toMatchObject({ loopId: created.id, status: 'succeeded', slot: iso(T0 + 15 * SEC), claimedAt: iso(T0 + 15 * SEC) });

    // Created through the daemon's own runtime: noticed the same way.
    const own = await everyLoop(runtime, 'own', '3s'); // at T0+15s: due at T0+18s
    await advance(clock, daemon, SEC);
    expect((await stateOf(daemon, runtime))!.nextFireAt).toBe(iso(T0 + 18 * SEC));
    await advance(clock, daemon, 2 * SEC);
    const all = await runs.count(2);
    expect(all[1]).toMatchObject({ loopId: own.id, status: 'succeeded', slot: iso(T0 + 18 * SEC) });

    await daemon.stop();
    expect(runRows(runtime, created.id)).toHaveLength(1);
    expect(runRows(runtime, own.id)).toHaveLength(1);
    expectLogConsistent(runtime);
  });
});

describe('Daemon: the wall clock jumps 3 days and 30 minutes forward', () => {
  // The daemon only looks at the wall clock when it wakes: with watchMs = maxSleepMs = 30 s the
  // jump is noticed at the next wake, at most 30 s (monotonic) later.
  const wakes = { maxSleepMs: 30 * SEC, watchMs: 30 * SEC };

  it('catch-up latest: one run of the last slot on the next wake; the 71 before are coalesced; nothing twice', async () => {
    const { clock, runtime, runs, daemon } = await setup(wakes);
    const loop = await everyLoop(runtime, 'hourly', '1h');
    await daemon.start();
    await daemon.asleep();
    clock.jumpWall(3 * DAY + 30 * MIN);
    await advance(clock, daemon, 29 * SEC);
    expect(decisions(runtime, loop.id)).toEqual([]);
    await advance(clock, daemon, SEC); // the wake
    expect(decisions(runtime, loop.id).map((r) => [r.decision, r.slot_from, r.slot_to, r.count])).toEqual([
      ['coalesced', iso(T0 + HOUR), iso(T0 + 71 * HOUR), 71],
      ['fired', iso(T0 + 72 * HOUR), iso(T0 + 72 * HOUR), 1],
    ]);
    const [run] = await runs.count(1);
    expect(run).toMatchObject({ status: 'succeeded', slot: iso(T0 + 72 * HOUR) });

    // Later wakes decide nothing more until the next slot (73) is due.
    await advance(clock, daemon, 10 * MIN, 30 * SEC);
    expect(decisions(runtime, loop.id)).toHaveLength(2);
    await advance(clock, daemon, 20 * MIN, 30 * SEC);
    expect(decisions(runtime, loop.id).slice(2).map((r) => [r.decision, r.slot_from])).toEqual([['fired', iso(T0 + 73 * HOUR)]]);
    await runs.count(2);

    await daemon.stop();
    expect(runRows(runtime, loop.id).map((r) => r.slot)).toEqual([iso(T0 + 72 * HOUR), iso(T0 + 73 * HOUR)]);
    expectLogConsistent(runtime);
  });

  it('with the default 1 s watch, the jump is noticed within a second, not at the end of the 30 s sleep', async () => {
    const { clock, runtime, runs, daemon } = await setup();
    const loop = await everyLoop(runtime, 'hourly', '1h');
    await daemon.start();
    await daemon.asleep();
    await advance(clock, daemon, 5 * SEC);
    clock.jumpWall(3 * DAY + 30 * MIN);
    await advance(clock, daemon, SEC);
    expect(decisions(runtime, loop.id).map((r) => r.decision)).toEqual(['coalesced', 'fired']);
    const [run] = await runs.count(1);
    expect(run).toMatchObject({ status: 'succeeded', slot: iso(T0 + 72 * HOUR), claimedAt: iso(T0 + 3 * DAY + 30 * MIN + 6 * SEC) });
    await daemon.stop();
    expectLogConsistent(runtime);
  });

  it('catch-up none: the 72 slots are missed, no run', async () => {
    const { clock, runtime, runs, daemon } = await setup(wakes);
    const loop = await everyLoop(runtime, 'hourly', '1h', { catchUp: 'none' });
    await daemon.start();
    await daemon.asleep();
    clock.jumpWall(3 * DAY + 30 * MIN);
    await advance(clock, daemon, 30 * SEC);
    expect(decisions(runtime, loop.id).map((r) => [r.decision, r.slot_from, r.slot_to, r.count])).toEqual([
      ['missed', iso(T0 + HOUR), iso(T0 + 72 * HOUR), 72],
    ]);
    await advance(clock, daemon, 5 * MIN, 30 * SEC);
    expect(decisions(runtime, loop.id)).toHaveLength(1);
    await daemon.stop();
    expect(runs.all).toEqual([]);
    expect(runRows(runtime, loop.id)).toEqual([]);
    expectLogConsistent(runtime);
  });

  it('catch-up all, limit 3: three runs, one after another (never a herd), each slot once', async () => {
    const { clock, runtime, runs, daemon } = await setup({ ...wakes, concurrency: 4 });
    const loop = await everyLoop(runtime, 'hourly', '1h', { catchUp: 'all', catchUpLimit: 3, command: 'sleep 0.05' });
    await daemon.start();
    await daemon.asleep();
    clock.jumpWall(3 * DAY + 30 * MIN);
    await advance(clock, daemon, 30 * SEC);
    const rows = decisions(runtime, loop.id);
    expect(rows.filter((r) => r.decision === 'fired').map((r) => r.slot_from)).toEqual([70, 71, 72].map((n) => iso(T0 + n * HOUR)));
    const all = await runs.count(3);
    expect(all.map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    // One after another: each run's process started after the previous one's exited.
    const spans = await Promise.all(all.map((r) => processSpan(runtime, r.id)));
    for (let i = 1; i < spans.length; i += 1) expect(spans[i]!.spawned).toBeGreaterThan(spans[i - 1]!.exited);

    await advance(clock, daemon, 5 * MIN, 30 * SEC);
    expect(decisions(runtime, loop.id)).toEqual(rows);
    await daemon.stop();
    const slots = runRows(runtime, loop.id).map((r) => r.slot);
    expect(new Set(slots).size).toBe(slots.length);
    expect(slots).toHaveLength(3);
    expectLogConsistent(runtime);
  });
});

describe('Daemon: concurrency', () => {
  /** A command that runs until the gate file exists. */
  const gated = (gate: string) => `while [ ! -e '${gate}' ]; do sleep 0.01; done`;

  it('concurrency 1: two loops due together run one at a time; the second waits queued', async () => {
    const gate = join(tempDir(), 'gate');
    const { clock, runtime, runs, daemon } = await setup({ concurrency: 1 });
    const a = await everyLoop(runtime, 'a', '1m', { command: gated(gate) });
    const b = await everyLoop(runtime, 'b', '1m', { command: gated(gate) });
    await daemon.start();
    await daemon.asleep();
    const firstSpawn = nextEvents(runtime, 'process.spawned');
    await advance(clock, daemon, MIN);
    expect(decisions(runtime, a.id).map((r) => r.decision)).toEqual(['fired']);
    expect(decisions(runtime, b.id).map((r) => r.decision)).toEqual(['fired']);
    const [spawned] = await firstSpawn;
    // One running, one queued (the daemon writes its state as runs start).
    expect(await stateOf(daemon, runtime)).toMatchObject({ activeRuns: 1, queuedRuns: 1 });
    const statuses = runtime.db.prepare("SELECT status FROM loop_runs ORDER BY claimed_position").all() as Array<{ status: string }>;
    expect(statuses.map((s) => s.status)).toEqual(['running']);

    writeFileSync(gate, '');
    const done = await runs.count(2);
    expect(done.map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
    expect(done[0]!.id).toBe(spawned!.streamId.slice('run:'.length));
    const [first, second] = await Promise.all(done.map((r) => processSpan(runtime, r.id)));
    expect(second!.spawned).toBeGreaterThan(first!.exited);
    // The status file follows within its write interval once runs start or end.
    expect(await stateOf(daemon, runtime)).toMatchObject({ activeRuns: 0, queuedRuns: 0 });
    await daemon.stop();
    expectLogConsistent(runtime);
  });

  it('the state file is rewritten at most once per interval: runs ending one by one within it are written together, stop writes at once', async () => {
    // An interval no test outlasts: whatever the machine's speed, nothing in between is written.
    const { clock, runtime, runs, daemon } = await setup({ concurrency: 4, stateIntervalMs: 3_600_000 });
    const file = join(runtime.dataDir, 'daemon-state.json');
    for (const name of ['a', 'b', 'c']) await everyLoop(runtime, name, '1m');
    await daemon.start();
    await daemon.asleep();
    // Written at start (passes 0); the first pass and everything after it wait for the interval.
    const written = statSync(file).ino;
    expect(readDaemonState(runtime.dataDir)).toMatchObject({ passes: 0, activeRuns: 0 });
    await advance(clock, daemon, MIN);
    expect((await runs.count(3)).map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    expect(statSync(file).ino).toBe(written);
    expect(readDaemonState(runtime.dataDir)).toMatchObject({ passes: 0 });
    let saved = false;
    void daemon.stateSaved().then(() => (saved = true));
    await daemon.stop();
    // Stopping writes what the daemon knows, and answers whoever waited for it.
    expect(saved).toBe(true);
    const final = readDaemonState(runtime.dataDir)!;
    expect(final).toMatchObject({ activeRuns: 0, queuedRuns: 0 });
    expect(final.passes).toBeGreaterThanOrEqual(2); // the start's, the slot's (and one after the runs ended)
  });

  it('concurrency 2: the same two loops run at the same time', async () => {
    const gate = join(tempDir(), 'gate');
    const { clock, runtime, runs, daemon } = await setup({ concurrency: 2 });
    await everyLoop(runtime, 'a', '1m', { command: gated(gate) });
    await everyLoop(runtime, 'b', '1m', { command: gated(gate) });
    await daemon.start();
    await daemon.asleep();
    const bothSpawned = nextEvents(runtime, 'process.spawned', 2);
    await advance(clock, daemon, MIN);
    await bothSpawned; // both processes are up while neither can have exited (the gate is shut)
    expect(await stateOf(daemon, runtime)).toMatchObject({ activeRuns: 2, queuedRuns: 0 });
    writeFileSync(gate, '');
    const done = await runs.count(2);
    const [x, y] = await Promise.all(done.map((r) => processSpan(runtime, r.id)));
    expect(Math.max(x!.spawned, y!.spawned)).toBeLessThan(Math.min(x!.exited, y!.exited));
    await daemon.stop();
    expectLogConsistent(runtime);
  });

  it('a burst of 30 due together at concurrency 30: decided and started in growing chunks — the first run claimed while later slots are still being decided, the first spawn requested while later runs are still being claimed; each slot runs once', async () => {
    const { clock, runtime, runs, daemon } = await setup({ concurrency: 30 });
    for (let i = 0; i < 30; i++) await everyLoop(runtime, `burst-${i}`, '1m');
    await daemon.start();
    await daemon.asleep();
    // How many claims were published when the first spawn was asked of the spawner helper.
    const spawner = runtime.spawner!;
    const spawn = spawner.spawn.bind(spawner);
    let claims = 0;
    let fired = 0;
    let firedAtFirstClaim: number | null = null;
    let claimsAtFirstSpawn: number | null = null;
    const sub = runtime.log.events$.subscribe((e) => {
      if (e.type === 'slot.fired') fired += 1;
      if (e.type !== 'run.claimed') return;
      claims += 1;
      firedAtFirstClaim ??= fired;
    });
    onTestFinished(() => sub.unsubscribe());
    spawner.spawn = (request) => {
      claimsAtFirstSpawn ??= claims;
      return spawn(request);
    };
    await advance(clock, daemon, MIN);
    const done = await runs.count(30);
    expect(done.every((r) => r.status === 'succeeded')).toBe(true);
    expect(new Set(done.map((r) => r.loopId)).size).toBe(30);
    expect(claims).toBe(30);
    // Decided in one transaction, the first claim waited for all 30 decisions; started all in one
    // turn, the first spawn waited for all 30 claims.
    expect(fired).toBe(30);
    expect(firedAtFirstClaim!).toBeLessThan(30);
    expect(claimsAtFirstSpawn).not.toBeNull();
    expect(claimsAtFirstSpawn!).toBeLessThan(30);
    await daemon.stop();
    expectLogConsistent(runtime);
  });
});

describe('Daemon: stop and exclusivity', () => {
  it('stop() cancels a running sleep 30: recorded cancelled, process group gone, lease released, pid file removed', async () => {
    const { clock, runtime, runs, daemon } = await setup();
    const loop = await everyLoop(runtime, 'sleepy', '1m', { command: 'sleep 30' });
    await daemon.start();
    await daemon.asleep();
    expect(await leases(runtime)).toEqual([{ name: daemonLease(runtime), holder: runtime.runnerId }]);
    const spawnedP = nextEvents(runtime, 'process.spawned');
    await advance(clock, daemon, MIN);
    const [spawned] = await spawnedP;
    const { pgid } = spawned!.data as { pgid: number };
    onTestFinished(() => killGroupIfAlive(pgid));
    expect(isAlive(pgid)).toBe(true);
    // The daemon's, the run's, and the runner's own (the work it decided is its to run while it lives).
    expect((await leases(runtime)).map((l) => l.name).sort()).toEqual([daemonLease(runtime), `runner:${runtime.runnerId}`, spawned!.streamId].sort());

    await daemon.stop('test says stop');
    const [run] = runs.all;
    expect(run).toMatchObject({ status: 'cancelled', loopId: loop.id });
    expect(run!.error).toContain('test says stop');
    expect(eventTypes(runtime.log, spawned!.streamId)).toEqual([
      'run.claimed',
      'process.spawn_requested',
      'process.spawned',
      'run.cancel_requested',
      'process.exited',
    ]);
    await waitForGroupGone(pgid);
    expect(await leases(runtime)).toEqual([]);
    expect(existsSync(pidFile(runtime.dataDir))).toBe(false);
    expect(runningDaemon(runtime.dataDir)).toBeNull();
    expect(await stateOf(daemon, runtime)).toMatchObject({ activeRuns: 0, queuedRuns: 0 });
    await daemon.done;

    // Stopped: advancing the clock decides nothing more.
    const before = await runtime.log.headPosition();
    await advance(clock, daemon, 5 * MIN, 30 * SEC);
    expect(await runtime.log.headPosition()).toBe(before);
    expectLogConsistent(runtime);
  });

  it('a second daemon on the same data directory is refused while the first runs, and starts once it stopped', async () => {
    const { clock, runtime, daemon, lines } = await setup();
    await daemon.start();
    await daemon.asleep();
    const other = await otherRuntime(runtime, clock, 'test-host:3:second');
    const second = new Daemon(other, { log: () => undefined });
    let error: unknown;
    try {
      await second.start();
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(LoopsError);
    expect((error as LoopsError).code).toBe('already_exists');
    expect((error as LoopsError).message).toContain(`pid ${process.pid}`);
    // Refused without touching anything: the first still holds the lease and the pid file.
    expect(await leases(runtime)).toEqual([{ name: daemonLease(runtime), holder: runtime.runnerId }]);
    expect(runningDaemon(runtime.dataDir)?.runnerId).toBe(runtime.runnerId);

    await daemon.stop();
    expect(lines.at(-1)).toMatch(/daemon stopped$/);
    await second.start();
    onTestFinished(() => second.stop());
    await second.asleep();
    expect(runningDaemon(runtime.dataDir)?.runnerId).toBe(other.runnerId);
    expect(await leases(runtime)).toEqual([{ name: daemonLease(runtime), holder: other.runnerId }]);
    await second.stop();
    expect(await leases(runtime)).toEqual([]);
  });

  it('killed between taking its lease and writing its pid file (no pid file): a holder on this host whose pid no process has does not block the next start', async () => {
    const { clock, runtime, daemon, lines } = await setup();
    // A dead process's pid, as a runner id of this host would carry it (LOOPS_HOST_ID, else the host name).
    const child = spawnSync('true');
    const deadHolder = `${hostId()}:${child.pid}:dead01`;
    await runtime.leases.take(daemonLease(runtime), deadHolder, 15_000, clock.now());
    await runtime.leases.take('run:run_x', deadHolder, 30_000, clock.now());
    expect(existsSync(pidFile(runtime.dataDir))).toBe(false);
    await daemon.start();
    expect(lines.some((l) => l.includes('daemon started'))).toBe(true);
    expect(runningDaemon(runtime.dataDir)).toMatchObject({ pid: process.pid, runnerId: runtime.runnerId });
    // The dead holder's leases were expired at once (its run's lease too, for recovery).
    const lease = await runtime.leases.get('run:run_x');
    expect(lease).toMatchObject({ holder: deadHolder });
    expect(lease!.expiresAt).toBeLessThanOrEqual(clock.now());
    await daemon.stop();
  });

  it('without a pid file, a live daemon lease still refuses a second daemon (retryable conflict)', async () => {
    const { clock, runtime, daemon } = await setup();
    await daemon.start();
    await daemon.asleep();
    const other = await otherRuntime(runtime, clock, 'test-host:4:second');
    // The pid file is gone (deleted by hand, say) but the lease is live.
    rmSync(pidFile(runtime.dataDir));
    const second = new Daemon(other, { log: () => undefined });
    let error: unknown;
    try {
      await second.start();
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(LoopsError);
    expect(error).toMatchObject({ code: 'conflict', retryable: true });
    expect(await leases(runtime)).toEqual([{ name: daemonLease(runtime), holder: runtime.runnerId }]);
    await daemon.stop();
  });
});
