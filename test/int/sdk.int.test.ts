/**
 * The `LoopsClient` SDK (issue 12, item 4): the predecessor's method names and result shapes over
 * loops' runtime, against a real SQLite file and real child processes; typed errors.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import {
  AlreadyExistsError,
  InvalidTransitionError,
  LoopsClient,
  LoopsError,
  NotFoundError,
  ValidationError,
  loops,
  type Loop,
} from '../../src/sdk.js';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { openReader } from '../../src/runtime/store.js';
import { sdkClient, rejection } from '../helpers/sdk-client.js';
import { tempDir } from '../helpers/tmp.js';

const client = (options: { clock?: SimulatedClock } = {}) => sdkClient({ prefix: 'loops-sdk-', runnerId: 'sdk-test:1:r', ...options });

describe('LoopsClient', () => {
  it('create → get → list: the predecessor Loop shape, stored in the SQLite file the CLI reads', async () => {
    const { client: c, dataDir, root } = client();
    const loop = await c.create({
      name: 'poll',
      description: 'polls',
      schedule: { type: 'interval', everyMs: 5000 },
      target: { type: 'command', command: 'echo hi', cwd: root, env: { MODE: 'x' }, timeoutMs: 30_000 },
      catchUp: 'all',
      catchUpLimit: 3,
      overlap: 'allow',
      maxAttempts: 2,
      retryDelayMs: 2000,
      leaseMs: 60_000,
    });
    expect(loop).toMatchObject<Partial<Loop>>({
      name: 'poll',
      description: 'polls',
      status: 'active',
      schedule: { type: 'interval', everyMs: 5000, anchor: 'fixed_rate' },
      target: { type: 'command', command: 'echo hi', args: [], cwd: root, shell: true, env: { MODE: 'x' }, timeoutMs: 30_000 },
      catchUp: 'all',
      catchUpLimit: 3,
      overlap: 'allow',
      maxAttempts: 2,
      retryDelayMs: 2000,
      leaseMs: 60_000,
    });
    expect(loop.id).toMatch(/^loop_/);
    expect(loop.nextRunAt).toEqual(expect.any(String));
    expect(await c.get('poll')).toEqual(loop);
    expect(await c.get(loop.id)).toEqual(loop);
    expect((await c.list()).map((l) => l.name)).toEqual(['poll']);
    // The same file the CLI reads.
    const reader = await openReader(dataDir);
    try {
      expect(reader.db.prepare('SELECT name FROM loops').all()).toEqual([{ name: 'poll' }]);
    } finally {
      reader.close();
    }
  });

  it('runsOn pins a loop to runners with those labels; a client with them runs it, one without is refused', async () => {
    const { client: c, root } = client();
    const loop = await c.create({ name: 'gpu-job', schedule: { type: 'manual' }, target: { type: 'command', command: 'true' }, runsOn: ['gpu'] });
    expect((await c.getLoop(loop.id)).runsOn).toEqual(['gpu']);
    expect((await rejection(c.runNow('gpu-job'))).message).toMatch(/^loop gpu-job runs on runners labelled gpu; this host \(sdk-test, no labels\) has not all of them$/);
    const { client: gpu } = sdkClient({ root, runnerId: 'gpu-box:2:r', labels: ['gpu'] });
    expect((await gpu.runNow('gpu-job')).status).toBe('succeeded');
    expect((await rejection(c.create({ name: 'bad', schedule: { type: 'manual' }, target: { type: 'command', command: 'true' }, runsOn: ['a b'] }))).message).toBe('--runs-on: invalid label "a b"');
  });

  it('a command target without cwd records the directory the caller runs in', async () => {
    const { client: c } = client();
    const loop = await c.create({ name: 'here', schedule: { type: 'manual' }, target: { type: 'command', command: 'true' } });
    expect(loop.target).toMatchObject({ cwd: process.cwd() });
  });

  it('schedules: once, cron (with its zone), dynamic (one minute after each finish, read back as fixed_delay)', async () => {
    const clock = new SimulatedClock('2026-07-01T00:00:00.000Z');
    const { client: c } = client({ clock });
    const target = { type: 'command' as const, command: 'true' };
    expect((await c.create({ name: 'once', schedule: { type: 'once', at: '2026-07-02T00:00:00Z' }, target })).schedule).toEqual({ type: 'once', at: '2026-07-02T00:00:00.000Z' });
    expect((await c.create({ name: 'cron', schedule: { type: 'cron', expression: '0 3 * * *', tz: 'UTC' }, target })).schedule).toEqual({ type: 'cron', expression: '0 3 * * *', tz: 'UTC' });
    const dynamic = await c.create({ name: 'dyn', schedule: { type: 'dynamic' }, target });
    expect(dynamic.schedule).toEqual({ type: 'interval', everyMs: 60_000, anchor: 'fixed_delay' });
    expect(dynamic.nextRunAt).toBe('2026-07-01T00:01:00.000Z');
    const slow = await c.create({ name: 'dyn5', schedule: { type: 'dynamic', minIntervalMs: 300_000 }, target });
    expect(slow.schedule).toEqual({ type: 'interval', everyMs: 300_000, anchor: 'fixed_delay' });
  });

  it('pause, resume, stop, delete; list({ status })', async () => {
    const { client: c } = client();
    const target = { type: 'command' as const, command: 'true' };
    await c.create({ name: 'a', schedule: { type: 'interval', everyMs: 60_000 }, target });
    await c.create({ name: 'b', schedule: { type: 'interval', everyMs: 60_000 }, target });
    expect((await c.pause('a')).status).toBe('paused');
    expect((await c.list({ status: 'paused' })).map((l) => l.name)).toEqual(['a']);
    expect((await c.list({ status: 'active' })).map((l) => l.name)).toEqual(['b']);
    expect((await c.resume('a')).status).toBe('active');
    const stopped = await c.stop('b');
    expect(stopped.status).toBe('stopped');
    expect(stopped.nextRunAt).toBeUndefined();
    expect(await c.delete('b')).toBe(true);
    expect((await c.list()).map((l) => l.name)).toEqual(['a']);
    expect((await c.list({ status: 'removed' })).map((l) => l.name)).toEqual(['b']);
  });

  it('runNow runs a real process and returns the predecessor LoopRun shape; runs() lists it', async () => {
    const { client: c, root } = client();
    const script = join(root, 'hello.sh');
    writeFileSync(script, 'echo "hello from $PWD"\n', { mode: 0o755 });
    await c.create({ name: 'hello', schedule: { type: 'manual' }, target: { type: 'command', command: './hello.sh', cwd: root } });
    const run = await c.runNow('hello');
    expect(run).toMatchObject({ loopName: 'hello', status: 'succeeded', exitCode: 0, attempt: 1, claimedBy: 'sdk-test:1:r' });
    expect(run.stdout).toBe(`hello from ${root}\n`);
    expect(run.pid).toEqual(expect.any(Number));
    expect(run.durationMs).toEqual(expect.any(Number));
    expect(run.finishedAt).toEqual(expect.any(String));
    const failing = await c.create({ name: 'fails', schedule: { type: 'manual' }, target: { type: 'command', command: 'exit 3' } });
    // A failed command is data (a run with status failed), not an exception.
    expect(await c.runNow(failing.id)).toMatchObject({ status: 'failed', exitCode: 3 });
    expect((await c.runs('hello')).map((r) => r.id)).toEqual([run.id]);
    expect((await c.runs()).length).toBe(2);
  });

  it('tick runs what is due at the clock and reports it as completed', async () => {
    const clock = new SimulatedClock('2026-07-01T00:00:00.000Z');
    const { client: c } = client({ clock });
    await c.create({ name: 'due', schedule: { type: 'interval', everyMs: 1000 }, target: { type: 'command', command: 'true' } });
    expect(await c.tick()).toMatchObject({ claimed: [], completed: [], skipped: [], recovered: [], expired: [] });
    clock.advance(1000);
    const result = await c.tick();
    expect(result.completed).toHaveLength(1);
    expect(result.completed[0]).toMatchObject({ loopName: 'due', status: 'succeeded', scheduledFor: '2026-07-01T00:00:01.000Z' });
    const once = await c.create({ name: 'once', schedule: { type: 'once', at: '2026-07-01T00:00:02Z' }, target: { type: 'command', command: 'true' } });
    clock.advance(1000);
    const second = await c.tick();
    expect(second.completed.map((r) => r.loopName).sort()).toEqual(['due', 'once']);
    expect(second.expired.map((l) => l.id)).toEqual([once.id]);
  });

  it('workflows: create from a file, list, get, run, runs, archive', async () => {
    const { client: c, root } = client();
    const file = join(root, 'wf.yaml');
    writeFileSync(file, ['name: build', 'steps:', '  - id: one', '    run: echo one', '  - id: two', '    run: echo two', '    needs: [one]', ''].join('\n'));
    const wf = await c.createWorkflow(file);
    expect(wf).toMatchObject({ name: 'build', version: 1 });
    expect((await c.listWorkflows()).map((w) => w.name)).toEqual(['build']);
    expect((await c.getWorkflow('build')).id).toBe(wf.id);
    const run = await c.runWorkflow('build');
    expect(run.status).toBe('succeeded');
    expect((await c.workflowRuns('build')).map((r) => r.id)).toEqual([run.id]);
    await c.create({ name: 'nightly', schedule: { type: 'cron', expression: '0 2 * * *' }, target: { type: 'workflow', workflowId: 'build' } });
    expect((await c.get('nightly')).target).toEqual({ type: 'workflow', workflowId: wf.id });
    expect((await c.archiveWorkflow('build')).status).toBe('archived');
  });

  it('typed errors: each a LoopsError with a stable code; nothing is written by a refused create', async () => {
    const { client: c, dataDir } = client();
    const target = { type: 'command' as const, command: 'true' };
    const notFound = await rejection(c.get('nope'));
    expect(notFound).toBeInstanceOf(NotFoundError);
    expect(notFound.code).toBe('not_found');
    await c.create({ name: 'x', schedule: { type: 'manual' }, target });
    const taken = await rejection(c.create({ name: 'x', schedule: { type: 'manual' }, target }));
    expect(taken).toBeInstanceOf(AlreadyExistsError);
    expect(taken.code).toBe('already_exists');
    const badSchedule = await rejection(c.create({ name: 'y', schedule: { type: 'interval', everyMs: -1 }, target }));
    expect(badSchedule).toBeInstanceOf(ValidationError);
    expect(badSchedule.message).toMatch(/^schedule.everyMs: expected a positive whole number of milliseconds/);
    const badType = await rejection(c.create({ name: 'y', schedule: { type: 'weekly' } as never, target }));
    expect(badType).toBeInstanceOf(ValidationError);
    const twice = await rejection(c.resume('x'));
    expect(twice).toBeInstanceOf(InvalidTransitionError);
    expect(twice.code).toBe('invalid_transition');
    const reader = await openReader(dataDir);
    try {
      expect(reader.db.prepare('SELECT name FROM loops').all()).toEqual([{ name: 'x' }]);
    } finally {
      reader.close();
    }
    await c.close();
    const closed = await rejection(c.list());
    expect(closed).toBeInstanceOf(LoopsError);
    expect(closed.message).toMatch(/closed/);
  });

  it('accounts: { profile, tool } on commands and agents (an agent\'s tool defaults to its provider); preflight: false is --no-preflight', async () => {
    const { client: c } = client();
    const cmd = await c.create({ name: 'gh', schedule: { type: 'manual' }, target: { type: 'command', command: 'true', account: { profile: 'work', tool: 'gh' } }, preflight: false });
    expect(cmd.target).toMatchObject({ type: 'command', account: { profile: 'work', tool: 'gh' } });
    const agent = await c.create({ name: 'ag', schedule: { type: 'manual' }, target: { type: 'agent', provider: 'claude', prompt: 'hi', account: { profile: 'work' } }, preflight: false });
    expect(agent.target).toMatchObject({ type: 'agent', provider: 'claude', prompt: 'hi', account: { profile: 'work', tool: 'claude' } });
    const noTool = await rejection(c.create({ name: 'x', schedule: { type: 'manual' }, target: { type: 'command', command: 'true', account: { profile: 'work' } }, preflight: false }));
    expect(noTool).toBeInstanceOf(ValidationError);
    expect(noTool.message).toMatch(/needs --account-tool/);
  });

  it('loops() makes a client, as the predecessor exported', async () => {
    const dataDir = join(tempDir('loops-sdk-'), 'data');
    const c = loops({ dataDir });
    try {
      expect(c).toBeInstanceOf(LoopsClient);
      expect(await c.list()).toEqual([]);
    } finally {
      await c.close();
    }
  });
});
