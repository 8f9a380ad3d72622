/**
 * Fuzzing the options of a loop (issue 11, hostile input) at the layer that checks them —
 * `createCommandLoop`, as `loops create command` calls it — with arbitrary values for the schedule
 * (--every/--cron/--at/--manual, --tz, --anchor, --jitter, --starts-at, --expires-at, --max-runs),
 * the policies (--timeout, --kill-grace, --attempts, --retry-delay, --backoff, --max-retry-delay,
 * --overlap, --catch-up, --catch-up-window, --catch-up-limit, --lease), the name, --env and the
 * command. A valid combination creates a loop whose stream replays and whose row is its projection;
 * an invalid one throws a LoopsError that exits 2, with a one-line message, and appends nothing
 * (the log's head is where it was). Afterwards the whole log is consistent.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { exitCodeFor } from '../../src/cli/exit-codes.js';
import { MAX_DURATION_MS } from '../../src/events/durations.js';
import { LoopsError, ValidationError } from '../../src/events/errors.js';
import { backoffDelay } from '../../src/events/policies.js';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { createCommandLoop, type CreateCommandLoopInput } from '../../src/runtime/loops/commands.js';
import { retryDelay } from '../../src/runtime/loops/decisions.js';
import { findLoop } from '../../src/runtime/queries/loops.js';
import { fuzzParams, hostileString } from '../helpers/fuzz.js';
import { expectLogConsistent, expectReplayOk } from '../helpers/invariants.js';
import { useRuntime } from '../helpers/tmp.js';

type Input = Omit<CreateCommandLoopInput, 'name'> & { name?: string };

const DURATIONS = ['500ms', '1s', '3s', '30s', '5m', '1h', '1h30m', '2d', '1w', '0s', '-5m', '5', '1e3s', '1.5h', '5 m', '', ' ', '5200w', '5201w', '99999999999999w', '9007199254740993ms', '0.0001s'];
const TIMES = ['2026-12-01T09:00', '2026-01-01T00:00:00Z', '2025-06-01T00:00Z', '2026-01-01T00:00:01Z', '2027-03-29T02:30', '+275760-09-13T00:00:00Z', '-271821-04-20T00:00:00Z', '2026-02-30', '2026-13-01', 'tomorrow', '1e12', ''];
const COUNTS = ['1', '2', '3', '10', '0', '-1', '1.5', '1e3', ' 3 ', '99999999999999999999', '9007199254740993', 'NaN', ''];

/** Every field a value may be broken in, with values to break it with (plausible ones, then anything). */
const BREAKS: Record<string, readonly string[]> = {
  'schedule.every': DURATIONS,
  'schedule.cron': ['0 3 * * *', '*/20 * * * * *', '@daily', '@reboot', '0 0 31 2 *', '61 * * * *', '* * * *', 'a b c d e', '0 3 * * MON-FRI', ''],
  'schedule.at': TIMES,
  'schedule.tz': ['UTC', 'europe/berlin', 'America/New_York', 'Mars/Olympus', '+02:00', 'Etc/GMT+14', ''],
  'schedule.anchor': ['fixed-rate', 'fixed-delay', 'fixed', ''],
  'schedule.jitter': DURATIONS,
  'schedule.startsAt': TIMES,
  'schedule.expiresAt': TIMES,
  'schedule.maxRuns': COUNTS,
  timeout: DURATIONS,
  killGrace: DURATIONS,
  overlap: ['skip', 'buffer-one', 'buffer-all', 'cancel-other', 'allow', 'Skip', 'queue', ''],
  catchUp: ['none', 'latest', 'all', 'All', 'some', ''],
  catchUpWindow: DURATIONS,
  catchUpLimit: COUNTS,
  attempts: COUNTS,
  retryDelay: DURATIONS,
  backoff: ['1', '2', '1.5', '0.5', '0', '-2', 'Infinity', 'NaN', '1e308', '1' + '0'.repeat(400), '2x', ''],
  maxRetryDelay: DURATIONS,
  lease: [...DURATIONS, '2s', '3s'],
  name: ['a'.repeat(64), 'a'.repeat(65), '-x', '.x', 'x.y_z-1', 'ü', 'a b', ''],
  command: ['', ' ', 'definitely-not-installed-xyz', 'a\0b'],
  description: ['', 'x'.repeat(10_000)],
};

/** A valid combination: one schedule with the timing flags it takes, policies that go together. */
const valid: fc.Arbitrary<Input> = fc
  .record({
    kind: fc.constantFrom('every', 'cron', 'at', 'manual'),
    every: fc.constantFrom('1s', '30s', '5m', '1h', '2d', '1w', '52w'),
    anchor: fc.constantFrom(undefined, 'fixed-rate', 'fixed-delay'),
    cron: fc.constantFrom('0 3 * * *', '*/5 * * * *', '*/20 * * * * *', '@daily', '0 9 * * MON-FRI', '0 0 29 2 *'),
    at: fc.constantFrom('2026-12-01T09:00', '2026-01-02T00:00:00Z', '2099-12-31T23:59'),
    tz: fc.constantFrom(undefined, 'UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Kathmandu'),
    jitter: fc.constantFrom(undefined, '500ms', '1s'),
    startsAt: fc.constantFrom(undefined, '2025-01-01T00:00Z', '2026-06-01T00:00'),
    expiresAt: fc.constantFrom(undefined, '2100-01-01T00:00Z'),
    maxRuns: fc.constantFrom(undefined, '1', '5', 1000),
    attempts: fc.constantFrom(undefined, '1', '2', '5', '100'),
    retryDelay: fc.constantFrom(undefined, '1s', '10m', '30d'),
    backoff: fc.constantFrom(undefined, '1', '2', '10'),
    maxRetryDelay: fc.constantFrom(undefined, '52w'),
    overlap: fc.constantFrom(undefined, 'skip', 'buffer-one', 'buffer-all', 'cancel-other', 'allow'),
    catchUp: fc.constantFrom(undefined, 'none', 'latest', 'all'),
    catchUpWindow: fc.constantFrom(undefined, '1h'),
    catchUpLimit: fc.constantFrom(undefined, '3'),
    timeout: fc.constantFrom(undefined, '30s', '30d', '5200w'),
    killGrace: fc.constantFrom(undefined, '1s', '1m'),
    lease: fc.constantFrom(undefined, '3s', '30s', '1h'),
    env: fc.constantFrom<Record<string, string> | undefined>(undefined, { A: '1' }, { PATH: '/usr/bin:/bin', LOOPS_X: 'a b;c' }),
    command: fc.constantFrom('true', 'echo hi | cat', 'exit 3'),
    preflight: fc.boolean(),
  })
  .map((v): Input => {
    const schedule: Input['schedule'] = { tz: v.tz };
    if (v.kind === 'manual') schedule.manual = true;
    else {
      schedule[v.kind] = v[v.kind];
      schedule.startsAt = v.startsAt;
      schedule.expiresAt = v.expiresAt;
      schedule.maxRuns = v.maxRuns;
      if (v.kind === 'every') schedule.anchor = v.anchor;
      if (v.kind !== 'at' && !(v.kind === 'every' && v.anchor === 'fixed-delay')) schedule.jitter = v.jitter;
    }
    const retrying = v.attempts !== undefined && v.attempts !== '1';
    const catchUp = v.catchUp ?? 'latest';
    return {
      command: v.command,
      ...(v.env ? { env: v.env } : {}),
      schedule,
      timeout: v.timeout ?? null,
      killGrace: v.killGrace ?? null,
      overlap: v.overlap ?? null,
      catchUp: v.catchUp ?? null,
      catchUpWindow: catchUp === 'none' ? null : (v.catchUpWindow ?? null),
      catchUpLimit: catchUp === 'all' ? (v.catchUpLimit ?? null) : null,
      attempts: v.attempts ?? null,
      retryDelay: retrying ? (v.retryDelay ?? null) : null,
      backoff: retrying ? (v.backoff ?? null) : null,
      maxRetryDelay: retrying && v.retryDelay !== '30d' ? (v.maxRetryDelay ?? null) : null,
      lease: v.lease ?? null,
      preflight: v.preflight,
    };
  });

/** A valid combination with up to three fields set to a value from BREAKS, or to anything. */
const input: fc.Arbitrary<Input> = fc
  .tuple(
    valid,
    fc.array(
      fc.tuple(fc.constantFrom(...Object.keys(BREAKS)), fc.oneof({ weight: 3, arbitrary: fc.nat() }, { weight: 1, arbitrary: hostileString })),
      { maxLength: 3 },
    ),
  )
  .map(([base, breaks]) => {
    const given = structuredClone(base) as Input & Record<string, unknown>;
    for (const [field, pick] of breaks) {
      const value = typeof pick === 'number' ? BREAKS[field]![pick % BREAKS[field]!.length]! : pick;
      if (field.startsWith('schedule.')) (given.schedule as Record<string, unknown>)[field.slice('schedule.'.length)] = value;
      else given[field] = value;
    }
    return given;
  });

describe('fuzz: loop options', () => {
  it('valid options create a loop whose events replay; invalid ones throw an exit-2 LoopsError and append nothing', async () => {
    const runtime = await useRuntime({ clock: new SimulatedClock('2026-01-01T00:00:00Z') });
    let n = 0;
    let created = 0;
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(input, async (given) => {
        const name = given.name ?? `loop-${n++}`;
        const before = await runtime.log.headPosition();
        let loop;
        try {
          loop = await createCommandLoop(runtime, { ...given, name } as CreateCommandLoopInput);
        } catch (error) {
          const what = `${JSON.stringify(given).slice(0, 600)}: ${String(error).slice(0, 300)}`;
          expect(error, what).toBeInstanceOf(LoopsError);
          expect(exitCodeFor((error as LoopsError).code), what).toBe(2);
          const message = (error as LoopsError).message;
          // One line (the CLI prints a long value quoted by its start and length: fuzz-cli).
          expect(message, what).not.toMatch(/[\r\n]/);
          expect(await runtime.log.headPosition(), `${what}: appended`).toBe(before);
          refused++;
          return;
        }
        created++;
        expect(await runtime.log.headPosition()).toBeGreaterThan(before);
        expect(findLoop(runtime.db, loop.id)).toMatchObject({ id: loop.id, name });
        expectReplayOk(runtime.log, `loop:${loop.id}`);
      }),
      fuzzParams(0x11d1, 400),
    );
    // Both sides were reached.
    expect(created).toBeGreaterThan(10);
    expect(refused).toBeGreaterThan(10);
    expectLogConsistent(runtime);
  });

  it('what it found: a duration past any date (--every 99999999999999w) is a ValidationError; before, RangeError "Invalid time value" (exit 1)', async () => {
    const runtime = await useRuntime({ clock: new SimulatedClock('2026-01-01T00:00:00Z') });
    for (const [flag, value] of [
      ['every', '99999999999999w'],
      ['every', '9007199254740993ms'],
      ['every', '5201w'],
    ] as const) {
      const error = await createCommandLoop(runtime, { name: 'far', command: 'true', schedule: { [flag]: value, tz: 'UTC' } }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as Error).message).toBe(`--every: "${value}" is longer than 5200w (100 years), the longest duration loops takes`);
    }
    expect(await runtime.log.headPosition()).toBe(0);
    expect((await createCommandLoop(runtime, { name: 'century', command: 'true', schedule: { every: '5200w', tz: 'UTC' } })).name).toBe('century');
  });

  it('what it found: a retry delay grown past any date (--backoff 1e300) is capped at 100 years; its dueAt was an invalid date that threw', async () => {
    const runtime = await useRuntime({ clock: new SimulatedClock('2026-01-01T00:00:00Z') });
    const loop = await createCommandLoop(runtime, { name: 'grows', command: 'exit 3', schedule: { manual: true, tz: 'UTC' }, attempts: '100', retryDelay: '1s', backoff: `1${'0'.repeat(300)}` });
    for (const next of [2, 3, 50, 100]) {
      const delay = retryDelay(loop.policies, next);
      expect(delay).toBe(next === 2 ? 1000 : MAX_DURATION_MS);
      expect(() => new Date(Date.parse('2026-01-01T00:00:00Z') + delay).toISOString()).not.toThrow();
    }
    // A workflow step's retries share the rule (a spec's backoff: 1e300 threw RangeError at its second retry).
    expect(backoffDelay(1, 1e300, null, 3)).toBe(MAX_DURATION_MS);
    expect(backoffDelay(10_000, 2, 60_000, 50)).toBe(60_000);
    expect(backoffDelay(10_000, 2, null, 4)).toBe(40_000);
  });

  it('what it found: a --timeout longer than 24.8 days does not kill the run at once (a Node timer that long fired after 1 ms)', async () => {
    const runtime = await useRuntime();
    await createCommandLoop(runtime, { name: 'patient', command: 'sleep 0.3; echo done', schedule: { manual: true, tz: 'UTC' }, timeout: '30d' });
    const run = await runNow(runtime, 'patient');
    expect({ status: run.status, error: run.error }).toEqual({ status: 'succeeded', error: null });
  });
});
