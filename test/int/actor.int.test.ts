/**
 * The persist-then-execute loop (DurableActor) and the checks the other integration tests rely
 * on (replay, verify) — including that those checks do fail when the log or a table is wrong.
 */
import { describe, expect, it } from 'vitest';
import { InvalidTransitionError, NotFoundError, LeaseLostError } from '../../src/events/errors.js';
import { currentMachines } from '../../src/machines/registry.js';
import { projections } from '../../src/projections/registry.js';
import { DurableActor } from '../../src/runtime/actor.js';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { changeLoopState, createCommandLoop } from '../../src/runtime/loops/commands.js';
import { rebuildProjections, verifyProjections } from '../../src/runtime/admin/projections.js';
import { determinismError, replayStream } from '../../src/runtime/admin/replay.js';
import type { Runtime } from '../../src/runtime/runtime.js';
import { loopEv, runEv } from '../helpers/events.js';
import { expectLogConsistent } from '../helpers/invariants.js';
import { adminClient } from '../helpers/pg.js';
import { useRuntime } from '../helpers/tmp.js';

describe('DurableActor', () => {
  it('appends the event with the state after it, then runs the actions it asked for', async () => {
    const runtime = await useRuntime({ clock: new SimulatedClock('2026-02-01T00:00:00.000Z') });
    const calls: Array<{ type: string; params: unknown; version: number }> = [];
    let ran!: () => void;
    const effectRan = new Promise<void>((resolve) => (ran = resolve));
    const effect = (type: string) => (params: unknown, actor: DurableActor) => {
      calls.push({ type, params, version: actor.version });
      ran();
    };
    const actor = DurableActor.create(runtime, 'loop:loop_1', 'loop', currentMachines.loop, { scheduleChanged: effect('scheduleChanged') });
    const recording = actor.record('loop.created', loopEv.created().data);
    // Actions run after the append, asynchronously, never inside record().
    expect(calls).toEqual([]);
    const stored = await recording;
    expect(stored).toMatchObject({ version: 1, type: 'loop.created', state: 'active', at: '2026-02-01T00:00:00.000Z' });
    expect(stored.meta.runnerId).toBe(runtime.runnerId);
    await effectRan;
    expect(calls).toEqual([{ type: 'scheduleChanged', params: { loopId: 'loop_1', nextRunAt: loopEv.created().data.nextRunAt }, version: 1 }]);
    expect(actor.state).toBe('active');
    expect(actor.accepts('loop.paused', { reason: null })).toBe(true);
    expect(actor.accepts('loop.resumed', { reason: null, nextRunAt: null })).toBe(false);
  });

  it('folds an inline effect into the same append: both events or neither', async () => {
    const runtime = await useRuntime({ clock: new SimulatedClock('2026-02-01T00:00:00.000Z') });
    const spawn: unknown[] = [];
    const intent = runEv.spawnRequested().data;
    const ok = DurableActor.create(runtime, 'run:run_ok', 'run', currentMachines.run, {
      requestSpawn: { inline: () => ({ type: 'process.spawn_requested', data: intent }) },
      spawn: (params) => void spawn.push(params),
    });
    const first = await ok.record('run.claimed', runEv.claimed({ runId: 'run_ok' }).data);
    expect(first.type).toBe('run.claimed');
    expect(ok.version).toBe(2);
    expect(ok.state).toBe('spawning');
    const events = await runtime.log.readStream('run:run_ok');
    expect(events.map((e) => [e.type, e.state])).toEqual([
      ['run.claimed', 'claimed'],
      ['process.spawn_requested', 'spawning'],
    ]);
    // The deferred effect (spawn) still runs after the append, with the final state.
    await new Promise((resolve) => setImmediate(resolve));
    expect(spawn).toHaveLength(1);

    // An inline event that fails validation aborts the whole append: no claim without its intent.
    const bad = DurableActor.create(runtime, 'run:run_bad', 'run', currentMachines.run, {
      requestSpawn: { inline: () => ({ type: 'process.spawn_requested', data: { ...intent, envKeys: 'nope' } }) },
    });
    const positionBefore = await runtime.log.headPosition();
    await expect(bad.record('run.claimed', runEv.claimed({ runId: 'run_bad' }).data)).rejects.toThrow(/invalid process\.spawn_requested event: envKeys/);
    expect(await runtime.log.headPosition()).toBe(positionBefore);
    expect(await runtime.log.streamInfo('run:run_bad')).toBeUndefined();
    expect(bad.version).toBe(0);
    expect(bad.state).toBe('new');
  });

  it('refuses an event its machine does not accept, appending nothing', async () => {
    const runtime = await useRuntime();
    const actor = DurableActor.create(runtime, 'run:run_1', 'run', currentMachines.run);
    await expect(actor.record('process.spawned', runEv.spawned().data)).rejects.toThrow(InvalidTransitionError);
    expect(await runtime.log.headPosition()).toBe(0);
    expect(actor.version).toBe(0);
  });

  it('a failed append leaves the actor where it was, so the next record still works', async () => {
    const runtime = await useRuntime();
    const actor = DurableActor.create(runtime, 'run:run_1', 'run', currentMachines.run);
    // A fence on a lease nobody holds: the guard fails inside the transaction.
    await expect(
      actor.record('run.claimed', runEv.claimed().data, { guards: [{ kind: 'lease-held', name: 'run:run_1', holder: 'someone', token: 7 }] }),
    ).rejects.toThrow(LeaseLostError);
    expect(actor.state).toBe('new');
    expect(actor.version).toBe(0);
    await actor.record('run.claimed', runEv.claimed().data);
    expect(actor.state).toBe('claimed');
    expect(actor.version).toBe(1);
  });

  it('a listener on events$ may record the next event on the same actor synchronously', async () => {
    const runtime = await useRuntime();
    const actor = DurableActor.create(runtime, 'run:run_1', 'run', currentMachines.run);
    let fromListener: Promise<unknown> | undefined;
    runtime.log.events$.subscribe((e) => {
      if (e.type === 'run.claimed') fromListener = actor.record('run.cancel_requested', { reason: 'from a listener' });
    });
    await actor.record('run.claimed', runEv.claimed().data);
    expect(actor.state).toBe('cancelled');
    expect(actor.version).toBe(2);
    await fromListener;
    expect((await runtime.log.readStream('run:run_1')).map((e) => [e.version, e.type, e.state])).toEqual([
      [1, 'run.claimed', 'claimed'],
      [2, 'run.cancel_requested', 'cancelled'],
    ]);
    await expect(actor.done).resolves.toMatchObject({ value: 'cancelled' });
  });

  it('load folds the stream and executes none of the replayed actions', async () => {
    const runtime = await useRuntime();
    const writer = DurableActor.create(runtime, 'run:run_1', 'run', currentMachines.run);
    await writer.record('run.claimed', runEv.claimed().data);
    await writer.record('process.spawn_requested', runEv.spawnRequested().data);
    let effects = 0;
    const count = () => {
      effects += 1;
    };
    const loaded = await DurableActor.load(runtime, 'run:run_1', { requestSpawn: count, spawn: count });
    // Effects are chained on promises; by the next macrotask any scheduled one would have run.
    await new Promise((resolve) => setImmediate(resolve));
    expect(effects).toBe(0);
    expect(loaded.state).toBe('spawning');
    expect(loaded.version).toBe(2);
    await expect(DurableActor.load(runtime, 'run:none')).rejects.toThrow(NotFoundError);
  });
});

/**
 * Rewrites the state an event recorded, behind the store's back, where the log is: the data
 * directory's SQLite file, or the PostgreSQL schema (the host's replica is a copy; the log's reads
 * go to PostgreSQL).
 */
async function rewriteRecordedState(runtime: Runtime, streamId: string, version: number, state: string): Promise<void> {
  if (!runtime.fleet) {
    runtime.db.prepare('UPDATE events SET state = ? WHERE stream_id = ? AND version = ?').run(JSON.stringify(state), streamId, version);
    return;
  }
  const admin = await adminClient();
  try {
    const { rowCount } = await admin.query(`UPDATE "${runtime.fleet.schema}".events SET state = $1 WHERE stream_id = $2 AND version = $3`, [JSON.stringify(state), streamId, version]);
    expect(rowCount).toBe(1);
  } finally {
    await admin.end();
  }
}

describe('the consistency checks can fail', () => {
  it('replay reports the first event whose recorded state the machine does not reproduce', async () => {
    const runtime = await useRuntime();
    await createCommandLoop(runtime, { name: 'a', command: 'true', schedule: { manual: true, tz: 'UTC' } });
    const { id } = runtime.db.prepare('SELECT id FROM loops').get() as { id: string };
    await changeLoopState(runtime, id, 'pause');
    expect((await replayStream(runtime.log, `loop:${id}`)).ok).toBe(true);
    await rewriteRecordedState(runtime, `loop:${id}`, 2, 'stopped');
    const result = await replayStream(runtime.log, `loop:${id}`);
    expect(result).toMatchObject({ ok: false, firstMismatch: 2 });
    expect(result.steps[1]).toMatchObject({ stateBefore: 'active', stateAfter: 'paused', recordedState: 'stopped', matches: false, actions: ['scheduleChanged'] });
    expect(determinismError(result).message).toMatch(/diverges at version 2 \(loop\.paused\): replayed state "paused" but the log recorded "stopped"/);
  });

  it('verify reports a live row that differs from the log, and rebuild repairs it', async () => {
    const runtime = await useRuntime();
    await createCommandLoop(runtime, { name: 'a', command: 'true', schedule: { manual: true, tz: 'UTC' } });
    expect(verifyProjections(runtime.db).ok).toBe(true);
    runtime.db.exec("UPDATE loops SET status = 'paused'");
    runtime.db.exec("INSERT INTO loop_runs (id, loop_id, loop_name, slot, scheduled_for, attempt, trigger, status, target, runner_id, claimed_at, claimed_position, updated_at) VALUES ('ghost', 'x', 'x', 's', 't', 1, 'manual', 'running', '{}', 'r', 't', 99, 't')");
    const verify = verifyProjections(runtime.db);
    expect(verify.ok).toBe(false);
    const differences = verify.tables.flatMap((t) => t.differences);
    expect(differences).toContainEqual(expect.stringMatching(/^loops id=.*: status is "paused" live, "active" rebuilt from the log$/));
    expect(differences).toContain('loop_runs id=ghost: in the live table but not in the log');
    const rebuilt = rebuildProjections(runtime.db);
    expect(rebuilt).toMatchObject({
      projections: projections.map((p) => p.name),
      events: 1,
      rows: { loops: 1, loop_runs: 0, slot_decisions: 0, run_queue: 0 },
    });
    expectLogConsistent(runtime);
  });
});
