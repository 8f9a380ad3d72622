/**
 * Overlap policies that keep a slot for later — buffer-one, buffer-all, cancel-other — on real
 * SQLite files and real processes, with a SimulatedClock. A run of the first slot blocks until the
 * test lets it go (it waits for a file); meanwhile a second runner decides the later slots.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { filter, firstValueFrom } from 'rxjs';
import { describe, expect, it, onTestFinished } from 'vitest';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { createCommandLoop, type CreateCommandLoopInput } from '../../src/runtime/loops/commands.js';
import { findLoop } from '../../src/runtime/queries/loops.js';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { tick } from '../../src/runtime/daemon/pass.js';
import { claimableWork } from '../../src/runtime/daemon/run-queue.js';
import { liveRunLeases, runningRuns } from '../../src/runtime/loops/decisions.js';
import { explainSlot } from '../../src/runtime/admin/why.js';
import { expectLogConsistent, findViolations } from '../helpers/invariants.js';
import { killGroupIfAlive } from '../helpers/proc.js';
import { leaseRenewedPast } from '../helpers/leases.js';
import { useRuntime, type TestRuntime } from '../helpers/tmp.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();
const slotH = (n: number) => iso(T0 + n * HOUR);
// The first slot's run waits until the test creates $GATE; the others end at once.
const BLOCK_FIRST = 'case "$LOOPS_SCHEDULED_FOR" in *T01:00:00*) while [ ! -e "$GATE" ]; do sleep 0.02; done;; esac';

async function setup(
  overlap: CreateCommandLoopInput['overlap'],
  extra: Partial<CreateCommandLoopInput> = {},
  schedule: Partial<CreateCommandLoopInput['schedule']> = {},
) {
  const clock = new SimulatedClock(T0);
  const runtime: TestRuntime = await useRuntime({ clock });
  onTestFinished(() => expectLogConsistent(runtime));
  const other = await openRuntime({ dataDir: runtime.dataDir, clock, runnerId: 'test-host:2:runner-b' });
  const groups: number[] = [];
  const sub = other.log.events$.subscribe((e) => {
    if (e.type === 'process.spawned') groups.push((e.data as { pgid: number }).pgid);
  });
  onTestFinished(() => {
    sub.unsubscribe();
    for (const g of groups) killGroupIfAlive(g);
    other.close();
  });
  const gate = join(runtime.root, 'gate');
  const loop = await createCommandLoop(runtime, {
    name: 'job',
    command: BLOCK_FIRST,
    env: { GATE: gate },
    overlap,
    catchUp: 'all',
    ...extra,
    schedule: { every: '1h', tz: 'UTC', ...schedule },
  });
  // Runner A fires the 01:00 slot; its run blocks.
  clock.jumpWall(HOUR);
  const spawned = firstValueFrom(runtime.log.events$.pipe(filter((e) => e.type === 'process.spawned')));
  const first = tick(runtime);
  await spawned;
  const going = runningRuns(runtime, loop.id, await liveRunLeases(runtime, clock.now()))[0]!;
  // Three hours pass (heartbeats keep A's lease — renewed once their writes reached the lease
  // store, on PostgreSQL a round trip after the jump) and runner B decides 02:00, 03:00 and 04:00.
  clock.advance(3 * HOUR);
  await leaseRenewedPast(runtime, `run:${going}`, clock.now());
  return { clock, runtime, other, loop, first, going, release: () => writeFileSync(gate, '') };
}

function decisions(runtime: Runtime, loopId: string) {
  return (
    runtime.db.prepare('SELECT decision, slot_from AS slot, run_id AS runId, reason FROM slot_decisions WHERE loop_id = ? ORDER BY position').all(loopId) as Array<{
      decision: string;
      slot: string;
      runId: string | null;
      reason: string | null;
    }>
  ).map((d) => [d.decision, d.slot, d.reason]);
}

function scheduledRuns(runtime: Runtime, loopId: string) {
  return (
    runtime.db.prepare("SELECT id, slot, status FROM loop_runs WHERE loop_id = ? AND trigger = 'schedule' ORDER BY claimed_position").all(loopId) as Array<{
      id: string;
      slot: string;
      status: string;
    }>
  ).map((r) => [r.slot, r.status]);
}

describe('overlap buffer-one', () => {
  it('keeps one slot waiting behind the going run (the others are skipped), and runs it when that run ends', async () => {
    const { runtime, other, loop, first, going, release } = await setup('buffer-one');
    const b = await tick(other);
    expect(b.decisions.map((d) => [d.type, (d.data as { slot: string }).slot])).toEqual([
      ['slot.buffered', slotH(2)],
      ['slot.skipped', slotH(3)],
      ['slot.skipped', slotH(4)],
    ]);
    expect(b.runs).toEqual([]);
    // Nothing may start while the run it waits for is going.
    expect(await claimableWork(other, other.clock.now())).toEqual([]);
    // Waiting behind a going run is not stranded, even with every runner at rest.
    expect(findViolations(other.db, other.log, { settledAt: other.clock.now(), processes: false })).toEqual([]);
    release();
    // Runner A's pass runs its own run, then the slot that waited for it.
    const a = await first;
    expect(a.runs.map((r) => [r.slot, r.status])).toEqual([
      [slotH(1), 'succeeded'],
      [slotH(2), 'succeeded'],
    ]);
    expect(decisions(runtime, loop.id)).toEqual([
      ['fired', slotH(1), null],
      ['buffered', slotH(2), `overlap buffer-one: waiting for ${going}`],
      ['skipped', slotH(3), 'buffer full'],
      ['skipped', slotH(4), 'buffer full'],
    ]);
    // Buffered slots count as runs of the loop; nothing is left waiting.
    expect(findLoop(runtime.db, 'job')).toMatchObject({ scheduledRuns: 2, nextRunAt: slotH(5) });
    expect(runtime.db.prepare('SELECT count(*) AS n FROM run_queue').get()).toEqual({ n: 0 });
    const why = explainSlot(runtime.db, findLoop(runtime.db, 'job'), T0 + 2 * HOUR, runtime.clock.now());
    expect(why.explanation).toMatch(/^the slot 2026-01-01T02:00:00.000Z was buffered \(overlap buffer-one: waiting for run_.*\); it ran as run run_.* and succeeded/);
    expect(explainSlot(runtime.db, findLoop(runtime.db, 'job'), T0 + 3 * HOUR, runtime.clock.now()).explanation).toMatch(
      /skipped: overlap policy buffer-one, run .* was still running and another slot was already waiting behind it/,
    );
  });
});

describe('overlap buffer-all', () => {
  it('keeps every slot, and runs them one after another, oldest first, when the going run ends', async () => {
    const { runtime, other, loop, first, release } = await setup('buffer-all');
    const b = await tick(other);
    expect(b.decisions.map((d) => d.type)).toEqual(['slot.buffered', 'slot.buffered', 'slot.buffered']);
    release();
    const a = await first;
    expect(a.runs.map((r) => [r.slot, r.status])).toEqual([
      [slotH(1), 'succeeded'],
      [slotH(2), 'succeeded'],
      [slotH(3), 'succeeded'],
      [slotH(4), 'succeeded'],
    ]);
    // One after another: each started after the previous one ended.
    const rows = runtime.db
      .prepare("SELECT claimed_position AS p FROM loop_runs WHERE loop_id = ? AND trigger = 'schedule' ORDER BY claimed_position")
      .all(loop.id) as Array<{ p: number }>;
    expect(rows).toHaveLength(4);
    expect(findLoop(runtime.db, 'job')).toMatchObject({ scheduledRuns: 4 });
  });

  it('with --max-runs 2 the second buffered slot is the last: the loop expires and still runs it', async () => {
    const { runtime, other, loop, first, release } = await setup('buffer-all', {}, { maxRuns: 2 });
    const b = await tick(other);
    expect(b.decisions.map((d) => d.type)).toEqual(['slot.missed', 'slot.buffered', 'loop.expired']);
    expect(findLoop(runtime.db, 'job').status).toBe('expired');
    release();
    // The loop is expired by now; the slot that waited still runs after the run it waited for.
    const a = await first;
    expect(a.runs.map((r) => [r.slot, r.status])).toEqual([
      [slotH(1), 'succeeded'],
      [slotH(2), 'succeeded'],
    ]);
    expect((await tick(other)).runs).toEqual([]);
    expect(scheduledRuns(runtime, loop.id)).toEqual([
      [slotH(1), 'succeeded'],
      [slotH(2), 'succeeded'],
    ]);
    expect(findLoop(runtime.db, 'job').status).toBe('expired');
  });
});

describe('overlap cancel-other', () => {
  it('cancels the going run (its runner kills it and records cancelled, never retried), then runs the new slot', async () => {
    const { clock, runtime, other, loop, first, going } = await setup('cancel-other', { attempts: 3, catchUp: 'latest' });
    const b = await tick(other);
    expect(b.decisions.map((d) => d.type)).toEqual(['slot.coalesced', 'slot.buffered']);
    expect(b.decisions[1]!.data).toMatchObject({ slot: slotH(4), policy: 'cancel-other', cancels: [going] });
    // The request is on the run's stream; runner A sees it at its next look at the log.
    expect((await runtime.log.readStream(`run:${going}`)).map((e) => e.type)).toContain('run.cancel_requested');
    clock.advance(250);
    const a = await first;
    expect(a.runs.map((r) => [r.slot, r.status, r.error])).toEqual([
      [slotH(1), 'cancelled', `cancelled: overlap cancel-other: slot ${slotH(4)} is due`],
      [slotH(4), 'succeeded', null],
    ]);
    // Cancelled is not failed: no retry of 01:00 was scheduled.
    expect(runtime.db.prepare("SELECT count(*) AS n FROM run_queue WHERE kind = 'retry'").get()).toEqual({ n: 0 });
    expect(decisions(runtime, loop.id).map((d) => d[0])).toEqual(['fired', 'coalesced', 'buffered']);
    expect(existsSync(join(runtime.dataDir, 'runs', going, 'exit-status'))).toBe(true);
  });
});
