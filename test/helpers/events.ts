/**
 * Builders for machine events with valid payloads (checked against the catalogue in
 * catalog.unit.test.ts). Times default to a fixed base so tests are deterministic.
 */
import type { EventData, EventType, LoopPolicies, Schedule, Target, Timing } from '../../src/events/catalog.js';

export const T0 = Date.parse('2026-03-01T12:00:00.000Z');

/** ISO instant `ms` after T0. */
export function at(ms = 0): string {
  return new Date(T0 + ms).toISOString();
}

export interface Ev<T extends EventType> {
  type: T;
  at: string;
  data: EventData<T>;
}

function ev<T extends EventType>(type: T, data: EventData<T>, when: string): Ev<T> {
  return { type, at: when, data };
}

export const commandTarget = (overrides: Partial<Extract<Target, { kind: 'command' }>> = {}): Target => ({
  kind: 'command',
  command: 'echo hi',
  args: [],
  shell: true,
  cwd: null,
  env: {},
  ...overrides,
});

export const policies = (overrides: Partial<LoopPolicies> = {}): LoopPolicies => ({
  timeoutMs: null,
  killGraceMs: 5000,
  overlap: 'skip',
  catchUp: 'latest',
  catchUpWindowMs: null,
  catchUpLimit: null,
  attempts: 1,
  retryDelayMs: 10_000,
  backoff: 2,
  maxRetryDelayMs: null,
  leaseMs: 30_000,
  ...overrides,
});

export const everySchedule: Schedule = { kind: 'every', everyMs: 60_000, anchorAt: at(0), anchor: 'fixed-rate' };

export const timing = (overrides: Partial<Timing> = {}): Timing => ({
  tz: 'UTC',
  jitterMs: null,
  startsAt: null,
  expiresAt: null,
  maxRuns: null,
  ...overrides,
});

// ── loop stream ─────────────────────────────────────────────────────────────
export const loopEv = {
  created: (data: Partial<EventData<'loop.created'>> = {}, when = at(0)) =>
    ev(
      'loop.created',
      {
        loopId: 'loop_1',
        name: 'backup',
        description: null,
        schedule: everySchedule,
        timing: timing(),
        target: commandTarget(),
        policies: policies(),
        nextRunAt: at(60_000),
        ...data,
      },
      when,
    ),
  paused: (reason: string | null = null, when = at(1000)) => ev('loop.paused', { reason }, when),
  expired: (reason: EventData<'loop.expired'>['reason'] = 'max-runs', when = at(9000)) => ev('loop.expired', { reason }, when),
  rescheduled: (nextRunAt = at(180_000), after: string | null = 'run_1', when = at(120_000)) =>
    ev('loop.rescheduled', { nextRunAt, after }, when),
  resumed: (nextRunAt: string | null = at(120_000), reason: string | null = null, when = at(2000)) =>
    ev('loop.resumed', { reason, nextRunAt }, when),
  stopped: (reason: string | null = null, when = at(3000)) => ev('loop.stopped', { reason }, when),
  archived: (reason: string | null = null, when = at(4000)) => ev('loop.archived', { reason }, when),
  removed: (reason: string | null = null, when = at(5000)) => ev('loop.removed', { reason }, when),
};

// ── run stream ──────────────────────────────────────────────────────────────
export const runEv = {
  claimed: (data: Partial<EventData<'run.claimed'>> = {}, when = at(0)) =>
    ev(
      'run.claimed',
      {
        runId: 'run_1',
        loopId: 'loop_1',
        loopName: 'backup',
        slot: 'manual:run_1',
        scheduledFor: at(0),
        attempt: 1,
        trigger: 'manual',
        target: commandTarget(),
        policies: policies(),
        runnerId: 'host:1:abc',
        leaseToken: 1,
        ...data,
      },
      when,
    ),
  spawnRequested: (data: Partial<EventData<'process.spawn_requested'>> = {}, when = at(10)) =>
    ev(
      'process.spawn_requested',
      { command: 'echo hi', args: [], shell: true, cwd: null, envKeys: ['LOOPS_RUN_ID'], timeoutAt: null, ...data },
      when,
    ),
  spawned: (data: Partial<EventData<'process.spawned'>> = {}, when = at(20)) =>
    ev('process.spawned', { pid: 4242, pgid: 4242, startTime: '123456', bootId: 'boot-1', ...data }, when),
  spawnFailed: (error = 'command not found: nope', code: string | null = 'ENOENT', when = at(30)) =>
    ev('process.spawn_failed', { error, code }, when),
  cancelRequested: (reason: string | null = null, when = at(500)) => ev('run.cancel_requested', { reason }, when),
  exited: (data: Partial<EventData<'process.exited'>> = {}, when = at(1020)) =>
    ev(
      'process.exited',
      {
        exitCode: 0,
        signal: null,
        timedOut: false,
        cancelled: false,
        stdout: 'hi\n',
        stderr: '',
        stdoutBytes: 3,
        stderrBytes: 0,
        durationMs: 1000,
        error: null,
        ...data,
      },
      when,
    ),
  abandoned: (reason = 'runner lost the process', when = at(2000)) => ev('run.abandoned', { reason }, when),
};

// ── slot decisions (loop stream) ────────────────────────────────────────────
export const slotEv = {
  fired: (data: Partial<EventData<'slot.fired'>> = {}, when = at(60_000)) =>
    ev('slot.fired', { slot: at(60_000), fireAt: at(60_000), runId: 'run_1', late: false, nextRunAt: at(120_000), ...data }, when),
  retryScheduled: (data: Partial<EventData<'slot.retry_scheduled'>> = {}, when = at(70_000)) =>
    ev('slot.retry_scheduled', { slot: at(60_000), attempt: 2, runId: 'run_2', dueAt: at(80_000), after: 'run_1', reason: 'failed: exited with code 1', ...data }, when),
  skipped: (data: Partial<EventData<'slot.skipped'>> = {}, when = at(120_000)) =>
    ev('slot.skipped', { slot: at(120_000), fireAt: at(120_000), reason: 'overlap', blockedBy: 'run_1', nextRunAt: at(180_000), ...data }, when),
  buffered: (data: Partial<EventData<'slot.buffered'>> = {}, when = at(120_000)) =>
    ev(
      'slot.buffered',
      { slot: at(120_000), fireAt: at(120_000), runId: 'run_2', policy: 'buffer-one', blockedBy: 'run_1', cancels: [], nextRunAt: at(180_000), ...data },
      when,
    ),
  coalesced: (data: Partial<EventData<'slot.coalesced'>> = {}, when = at(600_000)) =>
    ev('slot.coalesced', { from: at(60_000), to: at(540_000), count: 9, into: at(600_000), ...data }, when),
  missed: (data: Partial<EventData<'slot.missed'>> = {}, when = at(600_000)) =>
    ev('slot.missed', { from: at(60_000), to: at(540_000), count: 9, reason: 'catch-up none', nextRunAt: at(660_000), ...data }, when),
};
