import { describe, expect, it } from 'vitest';
import { AlreadyExistsError, AmbiguousError, InvalidTransitionError, NotFoundError, UsageError, ValidationError } from '../../src/events/errors.js';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { changeLoopState, createCommandLoop, type CreateCommandLoopInput } from '../../src/runtime/loops/commands.js';
import { findLoop, listLoops } from '../../src/runtime/queries/loops.js';
import { eventTypes, expectLogConsistent } from '../helpers/invariants.js';
import { tempDir, useRuntime } from '../helpers/tmp.js';

const base: CreateCommandLoopInput = { name: 'nightly', command: 'echo hi', schedule: { every: '15m', tz: 'UTC' } };

describe('createCommandLoop', () => {
  it('records loop.created with the schedule, target, policies and first due time', async () => {
    const clock = new SimulatedClock('2026-06-01T08:00:00.000Z');
    const runtime = await useRuntime({ clock });
    const view = await createCommandLoop(runtime, { ...base, description: 'the nightly job', timeout: '30s', killGrace: 2000, env: { A: '1' } });
    expect(view).toMatchObject({
      name: 'nightly',
      description: 'the nightly job',
      status: 'active',
      schedule: { kind: 'every', everyMs: 900_000, anchorAt: '2026-06-01T08:00:00.000Z', anchor: 'fixed-rate' },
      target: { kind: 'command', command: 'echo hi', args: [], shell: true, cwd: null, env: { A: '1' } },
      policies: { timeoutMs: 30_000, killGraceMs: 2000 },
      timeoutMs: 30_000,
      nextRunAt: '2026-06-01T08:15:00.000Z',
      createdAt: '2026-06-01T08:00:00.000Z',
      runCount: 0,
      lastRun: null,
    });
    expect(view.id).toMatch(/^loop_/);
    expect(eventTypes(runtime.log, `loop:${view.id}`)).toEqual(['loop.created']);
    expect(await runtime.log.streamInfo(`loop:${view.id}`)).toMatchObject({ kind: 'loop', machineId: 'loops.loop', machineVersion: 1 });
    expectLogConsistent(runtime);
  });

  it('an --env value whose name says secret is refused before anything is written (it would be stored in clear), unless --not-secret', async () => {
    const runtime = await useRuntime();
    const head = await runtime.log.headPosition();
    const cases: Array<Record<string, string>> = [{ CLI_TOKEN: 'tok-4f9a1c77e2' }, { OPENAI_API_KEY: 'sk-test-1234' }, { DB_PASSWORD: 'hunter22' }, { aws_secret_access_key: 'abcd1234' }];
    for (const env of cases) {
      const name = Object.keys(env)[0]!;
      const error = await createCommandLoop(runtime, { ...base, env }).then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).message).toBe(`--env ${name}: its name says it holds a secret, and --env values are stored with the loop, in clear`);
      expect((error as ValidationError).hint).toContain(`--secret-env ${name} (export ${name}=… where loops daemon runs`);
      expect((error as ValidationError).hint).toContain(`--not-secret ${name}`);
    }
    expect(await runtime.log.headPosition()).toBe(head);
    expect(listLoops(runtime.db)).toEqual([]);
    // Not secrets: trivial values, short values, names that only look alike, and what --not-secret names.
    await createCommandLoop(runtime, { ...base, name: 'a', env: { DISABLE_AUTH: 'true', GIT_AUTHOR_NAME: 'Ann Example', TOKENIZERS_PARALLELISM: 'false', MY_TOKEN: 'x' } });
    const kept = await createCommandLoop(runtime, { ...base, name: 'b', env: { PUBLIC_TOKEN: 'pk-visible-123' }, notSecret: ['public_token'] });
    expect(kept.target).toMatchObject({ env: { PUBLIC_TOKEN: 'pk-visible-123' } });
    await expect(createCommandLoop(runtime, { ...base, name: 'c', env: {}, notSecret: ['NOPE'] })).rejects.toThrow('--not-secret NOPE: no --env NOPE=… to say it of');
    // The way to pass one: from the runner's environment, never stored.
    const passed = await createCommandLoop(runtime, { ...base, name: 'd', secretEnv: ['CLI_TOKEN'] });
    expect(passed.target).toMatchObject({ env: {}, secretEnv: ['CLI_TOKEN'] });
    expectLogConsistent(runtime);
  });

  it('a cron loop is due at the next wall-clock match in its zone', async () => {
    const runtime = await useRuntime({ clock: new SimulatedClock('2026-07-01T00:30:00.000Z') });
    const view = await createCommandLoop(runtime, { ...base, schedule: { cron: '0 3 * * *', tz: 'Europe/Berlin' } });
    expect(view.nextRunAt).toBe('2026-07-01T01:00:00.000Z');
  });

  it.each<[string, Partial<CreateCommandLoopInput>, RegExp, typeof ValidationError | typeof UsageError]>([
    ['a bad name', { name: '-bad name' }, /invalid loop name "-bad name"/, ValidationError],
    ['an empty command', { command: '  ' }, /--cmd: the command is empty/, ValidationError],
    ['args with a shell command', { args: ['x'] }, /--arg is only used with --no-shell/, ValidationError],
    ['spaces in an argv-form command', { command: 'ls -la', shell: false }, /--cmd: "ls -la" contains spaces/, ValidationError],
    ['a missing cwd', { cwd: '/definitely/not/here' }, /--cwd: directory \/definitely\/not\/here does not exist/, ValidationError],
    ['a bad env name', { env: { 'BAD-KEY': 'x' } }, /--env: invalid variable name "BAD-KEY"/, ValidationError],
    ['a timeout with a space', { timeout: '30 s' }, /--timeout: invalid duration "30 s"/, ValidationError],
    ['a fractional ms timeout', { timeout: 1.5 }, /--timeout: must be a positive number of ms/, ValidationError],
    ['no schedule', { schedule: {} }, /a schedule is required/, UsageError],
    ['a bad cron', { schedule: { cron: '* *', tz: 'UTC' } }, /--cron: /, ValidationError],
    ['an unknown zone', { schedule: { every: '1m', tz: 'Nowhere/Land' } }, /--tz: unknown time zone/, ValidationError],
  ])('refuses %s, naming the field, and appends nothing', async (_what, input, message, type) => {
    const runtime = await useRuntime();
    let caught: unknown;
    try {
      await createCommandLoop(runtime, { ...base, ...input });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(type);
    expect((caught as Error).message).toMatch(message);
    expect(await runtime.log.headPosition()).toBe(0);
  });

  it('a relative cwd is resolved against the current directory and must be a directory', async () => {
    const runtime = await useRuntime();
    const dir = tempDir();
    expect((await createCommandLoop(runtime, { ...base, cwd: dir })).target).toMatchObject({ cwd: dir });
    await expect(createCommandLoop(runtime, { ...base, name: 'file-cwd', cwd: '/etc/hostname' })).rejects.toThrow(/is not a directory/);
  });

  it('names are unique among live loops; a removed loop frees its name', async () => {
    const runtime = await useRuntime();
    const first = await createCommandLoop(runtime, base);
    const head = await runtime.log.headPosition();
    await expect(createCommandLoop(runtime, base)).rejects.toThrow(AlreadyExistsError);
    expect(await runtime.log.headPosition()).toBe(head);
    await changeLoopState(runtime, 'nightly', 'remove');
    const second = await createCommandLoop(runtime, base);
    expect(second.id).not.toBe(first.id);
    expect(findLoop(runtime.db, 'nightly').id).toBe(second.id);
    expect(findLoop(runtime.db, first.id, { includeRemoved: true }).status).toBe('removed');
    expect(listLoops(runtime.db).map((l) => l.id)).toEqual([second.id]);
    expect(listLoops(runtime.db, { all: true })).toHaveLength(2);
    expectLogConsistent(runtime);
  });
});

describe('changeLoopState', () => {
  it('pause, resume, stop, archive, remove: one event each, projected at once', async () => {
    const clock = new SimulatedClock('2026-06-01T08:00:00.000Z');
    const runtime = await useRuntime({ clock });
    const { id } = await createCommandLoop(runtime, base);
    expect(await changeLoopState(runtime, 'nightly', 'pause', { reason: 'deploy' })).toMatchObject({ status: 'paused', reason: 'deploy', nextRunAt: null });
    clock.advance(40 * 60_000);
    // Resuming re-arms on the original anchor grid, strictly after now.
    expect(await changeLoopState(runtime, id, 'resume')).toMatchObject({ status: 'active', reason: null, nextRunAt: '2026-06-01T08:45:00.000Z' });
    expect(await changeLoopState(runtime, id, 'stop')).toMatchObject({ status: 'stopped', nextRunAt: null });
    expect(await changeLoopState(runtime, id, 'archive', { reason: 'old' })).toMatchObject({ status: 'archived', reason: 'old' });
    expect(await changeLoopState(runtime, id, 'remove')).toMatchObject({ status: 'removed' });
    expect(eventTypes(runtime.log, `loop:${id}`)).toEqual(['loop.created', 'loop.paused', 'loop.resumed', 'loop.stopped', 'loop.archived', 'loop.removed']);
    expect((await runtime.log.readStream(`loop:${id}`)).map((e) => e.state)).toEqual(['active', 'paused', 'active', 'stopped', 'archived', 'removed']);
    expectLogConsistent(runtime);
  });

  it('an impossible move is an InvalidTransitionError with a hint, and appends nothing', async () => {
    const runtime = await useRuntime();
    await createCommandLoop(runtime, base);
    await changeLoopState(runtime, 'nightly', 'pause');
    const head = await runtime.log.headPosition();
    const paused = await (async () => {
      try {
        await changeLoopState(runtime, 'nightly', 'pause');
      } catch (error) {
        return error as InvalidTransitionError;
      }
      throw new Error('expected an error');
    })();
    expect(paused).toBeInstanceOf(InvalidTransitionError);
    expect(paused.message).toBe('cannot pause loop nightly: it is paused');
    expect(paused.hint).toMatch(/already paused; loops resume nightly/);
    await changeLoopState(runtime, 'nightly', 'archive');
    await expect(changeLoopState(runtime, 'nightly', 'resume')).rejects.toThrow(/cannot resume loop nightly: it is archived/);
    expect(await runtime.log.headPosition()).toBe(head + 1);
    await changeLoopState(runtime, 'nightly', 'remove');
    await expect(changeLoopState(runtime, 'nightly', 'remove')).rejects.toThrow(NotFoundError);
    expectLogConsistent(runtime);
  });
});

describe('finding loops', () => {
  it('by id, name or unique id prefix; ambiguous prefixes and unknown names are errors', async () => {
    const clock = new SimulatedClock('2026-06-01T08:00:00.000Z');
    const runtime = await useRuntime({ clock });
    const a = await createCommandLoop(runtime, { ...base, name: 'alpha' });
    const b = await createCommandLoop(runtime, { ...base, name: 'beta' });
    expect(findLoop(runtime.db, a.id).name).toBe('alpha');
    expect(findLoop(runtime.db, 'beta').id).toBe(b.id);
    // Same clock instant: the ids share their time prefix, so a short prefix is ambiguous.
    expect(() => findLoop(runtime.db, a.id.slice(0, 10))).toThrow(AmbiguousError);
    expect(findLoop(runtime.db, a.id.slice(0, -1)).id).toBe(a.id);
    const missing = (() => {
      try {
        findLoop(runtime.db, 'alphx');
      } catch (error) {
        return error as NotFoundError;
      }
      throw new Error('expected an error');
    })();
    expect(missing).toBeInstanceOf(NotFoundError);
    expect(missing.hint).toMatch(/did you mean alpha/);
  });
});
