/**
 * Property: any sequence of valid and invalid commands (create, pause/resume/stop/archive/remove,
 * run-now of `true`/`false`, clock moves) leaves a log whose projections verify, rebuild to the
 * same rows, and whose streams replay to their recorded states — and the projected loops agree
 * with a simple model of the loop lifecycle. Refused commands append nothing.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AlreadyExistsError, InvalidTransitionError, NotFoundError } from '../../src/events/errors.js';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { changeLoopState, createCommandLoop, type LoopStateCommand } from '../../src/runtime/loops/commands.js';
import { findLoop, listRuns } from '../../src/runtime/queries/loops.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import type { ScheduleFlags } from '../../src/scheduling/schedule.js';
import { expectLogConsistent } from '../helpers/invariants.js';
import { openTestRuntime } from '../helpers/tmp.js';

type Status = 'active' | 'paused' | 'stopped' | 'archived' | 'removed' | 'expired';

const ALLOWED: Record<Status, Partial<Record<LoopStateCommand, Status>>> = {
  active: { pause: 'paused', stop: 'stopped', archive: 'archived', remove: 'removed' },
  paused: { resume: 'active', stop: 'stopped', archive: 'archived', remove: 'removed' },
  stopped: { resume: 'active', archive: 'archived', remove: 'removed' },
  archived: { remove: 'removed' },
  expired: { archive: 'archived', remove: 'removed' },
  removed: {},
};

type Cmd =
  | { kind: 'create'; name: string; schedule: (nowMs: number) => ScheduleFlags; label: string; argv: boolean; ok: boolean }
  | { kind: 'state'; target: number; command: LoopStateCommand; reason: string | null }
  | { kind: 'run'; target: number }
  | { kind: 'advance'; ms: number };

const scheduleArb = fc.oneof(
  fc.constantFrom('30s', '5m', '1h', '1h30m', '1d').map((every) => ({ label: `every ${every}`, schedule: () => ({ every, tz: 'UTC' }) })),
  fc
    .tuple(fc.constantFrom('*/5 * * * *', '0 3 * * *', '30 9 * * MON-FRI', '0 0 1 * *'), fc.constantFrom('UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Tokyo'))
    .map(([cron, tz]) => ({ label: `cron ${cron} ${tz}`, schedule: () => ({ cron, tz }) })),
  fc.integer({ min: 60_000, max: 30 * 86_400_000 }).map((ahead) => ({
    label: `at +${ahead}`,
    schedule: (now: number) => ({ at: new Date(now + ahead).toISOString(), tz: 'UTC' }),
  })),
  fc.constant({ label: 'manual', schedule: () => ({ manual: true, tz: 'Europe/Berlin' }) }),
);

const createArb: fc.Arbitrary<Cmd> = fc
  .record({ name: fc.constantFrom('alpha', 'beta', 'gamma'), s: scheduleArb, argv: fc.boolean(), ok: fc.boolean() })
  .map(({ name, s, argv, ok }) => ({ kind: 'create' as const, name, schedule: s.schedule, label: s.label, argv, ok }));

const cmdArb: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 3, arbitrary: createArb },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('state' as const),
      target: fc.nat(9),
      command: fc.constantFrom<LoopStateCommand>('pause', 'resume', 'stop', 'archive', 'remove'),
      reason: fc.option(fc.string({ maxLength: 12 }), { nil: null }),
    }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('run' as const), target: fc.nat(9) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 3 * 86_400_000 }) }) },
);

async function errorOf(fn: () => Promise<unknown>): Promise<unknown> {
  try {
    await fn();
    return null;
  } catch (error) {
    return error;
  }
}

describe('model-based property: commands → log → projections', () => {
  it('projections verify, rebuild identically, streams replay, and loops match the model', async () => {
    await fc.assert(
      fc.asyncProperty(fc.tuple(createArb, fc.array(cmdArb, { minLength: 6, maxLength: 20 })), async ([first, rest]) => {
        const cmds = [first, ...rest];
        const clock = new SimulatedClock('2026-03-28T12:00:00.000Z');
        const runtime = await openTestRuntime({ clock });
        const model: Array<{
          id: string;
          name: string;
          ok: boolean;
          status: Status;
          runs: number;
          lastRun: string | null;
          /** For a one-shot (--at) loop: its instant. */
          atMs: number | null;
        }> = [];
        try {
          for (const cmd of cmds) {
            const head = await runtime.log.headPosition();
            switch (cmd.kind) {
              case 'create': {
                const taken = model.some((l) => l.name === cmd.name && l.status !== 'removed');
                const attempt = () =>
                  createCommandLoop(runtime, {
                    name: cmd.name,
                    command: cmd.ok ? 'true' : 'false',
                    shell: !cmd.argv,
                    schedule: cmd.schedule(clock.now()),
                  });
                if (taken) {
                  expect(await errorOf(attempt)).toBeInstanceOf(AlreadyExistsError);
                  expect(await runtime.log.headPosition()).toBe(head);
                } else {
                  const view = await attempt();
                  expect(view.status).toBe('active');
                  const atMs = view.schedule.kind === 'at' ? Date.parse(view.schedule.at) : null;
                  model.push({ id: view.id, name: cmd.name, ok: cmd.ok, status: 'active', runs: 0, lastRun: null, atMs });
                }
                break;
              }
              case 'state': {
                if (model.length === 0) break;
                const loop = model[cmd.target % model.length]!;
                const next = ALLOWED[loop.status][cmd.command];
                const attempt = () => changeLoopState(runtime, loop.id, cmd.command, { reason: cmd.reason });
                if (loop.status === 'removed') {
                  expect(await errorOf(attempt)).toBeInstanceOf(NotFoundError);
                } else if (!next) {
                  expect(await errorOf(attempt)).toBeInstanceOf(InvalidTransitionError);
                } else {
                  const view = await attempt();
                  // A one-shot resumed at or after its instant has nothing left to run: its slot
                  // passed while it was paused, and it expires at once.
                  const expires = cmd.command === 'resume' && loop.atMs !== null && loop.atMs <= clock.now();
                  expect(view.status).toBe(expires ? 'expired' : next);
                  if (!expires) expect(view.reason).toBe(cmd.reason);
                  if (next !== 'active' || expires) expect(view.nextRunAt).toBeNull();
                  loop.status = expires ? 'expired' : next;
                  break;
                }
                expect(await runtime.log.headPosition()).toBe(head);
                break;
              }
              case 'run': {
                if (model.length === 0) break;
                const loop = model[cmd.target % model.length]!;
                if (loop.status === 'removed') {
                  await expect(runNow(runtime, loop.id)).rejects.toBeInstanceOf(NotFoundError);
                  expect(await runtime.log.headPosition()).toBe(head);
                } else if (loop.status === 'archived' || loop.status === 'expired') {
                  await expect(runNow(runtime, loop.id)).rejects.toBeInstanceOf(InvalidTransitionError);
                  expect(await runtime.log.headPosition()).toBe(head);
                } else {
                  // An active one-shot whose instant has come: run-now takes its slot, and the loop,
                  // having no slot left, expires.
                  const takesLastSlot = loop.status === 'active' && loop.atMs !== null && loop.atMs <= clock.now();
                  const run = await runNow(runtime, loop.id);
                  expect(run).toMatchObject({ status: loop.ok ? 'succeeded' : 'failed', exitCode: loop.ok ? 0 : 1 });
                  if (takesLastSlot) {
                    expect(run).toMatchObject({ trigger: 'schedule', slot: new Date(loop.atMs!).toISOString() });
                    loop.status = 'expired';
                  }
                  loop.runs += 1;
                  loop.lastRun = run.id;
                }
                break;
              }
              case 'advance':
                clock.advance(cmd.ms);
                break;
            }
          }
          for (const loop of model) {
            const view = findLoop(runtime.db, loop.id, { includeRemoved: true });
            expect(view).toMatchObject({ name: loop.name, status: loop.status, runCount: loop.runs });
            expect(view.lastRun?.id ?? null).toBe(loop.lastRun);
          }
          expect(listRuns(runtime.db, { limit: 1000 }).length).toBe(model.reduce((n, l) => n + l.runs, 0));
          expectLogConsistent(runtime);
        } finally {
          runtime.close();
        }
      }),
      { numRuns: 50 },
    );
  });
});
