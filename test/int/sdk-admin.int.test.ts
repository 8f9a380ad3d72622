/**
 * The SDK covers the CLI (issue 13 part 5): next, runs and one run in loops' shape, a run's
 * output, cancel, archive, workflow resume / cancel / inspect, stats, why, doctor, verify, backup
 * and replay — each the function the CLI command calls — and their typed errors. Real SQLite
 * files, real child processes, a SimulatedClock where time matters.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { AmbiguousError, InvalidTransitionError, LoopsClient, LoopsError, NotFoundError, UsageError, ValidationError } from '../../src/sdk.js';
import { sdkClient, rejection } from '../helpers/sdk-client.js';
import { tempDir } from '../helpers/tmp.js';

const client = (options: { clock?: SimulatedClock } = {}) => sdkClient({ prefix: 'loops-sdk-admin-', runnerId: 'sdk-admin:1:r', ...options });

describe('LoopsClient: everything the CLI does', () => {
  it('next: the next fires at the clock, in the loop zone; none when paused; UsageError for a bad count', async () => {
    const clock = new SimulatedClock('2026-07-01T00:00:30.000Z');
    const { client: c } = client({ clock });
    await c.create({ name: 'every', schedule: { type: 'interval', everyMs: 60_000 }, target: { type: 'command', command: 'true' } });
    await c.create({ name: 'cron', schedule: { type: 'cron', expression: '0 3 * * *', tz: 'Europe/Paris' }, target: { type: 'command', command: 'true' } });
    const fires = await c.next('every', { count: 3 });
    expect(fires.map((f) => f.fireAt)).toEqual(['2026-07-01T00:01:30.000Z', '2026-07-01T00:02:30.000Z', '2026-07-01T00:03:30.000Z']);
    expect(await c.next('cron', { count: 1 })).toEqual([{ slot: '2026-07-01T01:00:00.000Z', fireAt: '2026-07-01T01:00:00.000Z', local: expect.stringContaining('03:00') }]);
    expect(await c.next('cron')).toHaveLength(5);
    await c.pause('every');
    expect(await c.next('every')).toEqual([]);
    expect(await rejection(c.next('every', { count: 1001 }))).toBeInstanceOf(UsageError);
    expect(await rejection(c.next('nope'))).toBeInstanceOf(NotFoundError);
  });

  it("listRuns, getRun and output: loops' own run shape and the run's output as loops logs --json gives it", async () => {
    const { client: c } = client();
    await c.create({ name: 'talk', schedule: { type: 'manual' }, target: { type: 'command', command: 'printf "one\\ntwo\\nthree\\n"; echo oops >&2' } });
    await c.create({ name: 'fail', schedule: { type: 'manual' }, target: { type: 'command', command: 'exit 4' } });
    const ok = await c.runNow('talk');
    await c.runNow('fail');
    const runs = await c.listRuns();
    expect(runs.map((r) => r.loopName)).toEqual(['fail', 'talk']);
    expect((await c.listRuns({ loop: 'talk' })).map((r) => r.id)).toEqual([ok.id]);
    expect((await c.listRuns({ status: 'failed' })).map((r) => r.loopName)).toEqual(['fail']);
    expect(await c.listRuns({ limit: 1 })).toHaveLength(1);
    const run = await c.getRun(ok.id);
    expect(await rejection(c.getRun('run_'))).toBeInstanceOf(AmbiguousError);
    expect(run).toMatchObject({ id: ok.id, loopName: 'talk', status: 'succeeded', exitCode: 0, trigger: 'manual' });
    const out = await c.output(ok.id);
    expect(out).toMatchObject({ runId: ok.id, status: 'succeeded', stdout: { text: 'one\ntwo\nthree\n', rotated: false }, stderr: { text: 'oops\n' } });
    expect(await c.output('talk', { tail: 1, streams: ['stdout'] })).toMatchObject({ runId: ok.id, stdout: { text: 'three\n' } });
    expect('stderr' in (await c.output('talk', { streams: ['stdout'] }))).toBe(false);
    expect(await rejection(c.getRun('run_nope'))).toBeInstanceOf(NotFoundError);
    expect(await rejection(c.output('talk', { step: 'x' }))).toBeInstanceOf(UsageError);
  });

  it('cancel of an ended run leaves it (outcome ended); archive; typed errors of a state change', async () => {
    const { client: c } = client();
    await c.create({ name: 'done', schedule: { type: 'manual' }, target: { type: 'command', command: 'true' } });
    const run = await c.runNow('done');
    expect(await c.cancel(run.id, { reason: 'too late' })).toEqual({ runId: run.id, outcome: 'ended', status: 'succeeded', holder: null });
    expect(await rejection(c.cancel('run_nope'))).toBeInstanceOf(NotFoundError);
    const archived = await c.archive('done', { reason: 'kept for history' });
    expect(archived.status).toBe('archived');
    expect((await c.getLoop('done')).reason).toBe('kept for history');
    const refused = await rejection(c.resume('done'));
    expect(refused).toBeInstanceOf(InvalidTransitionError);
    expect(refused.code).toBe('invalid_transition');
    expect((await c.listLoops()).map((l) => l.name)).toEqual(['done']);
  });

  it('workflows: inspect a run (steps, skip reasons), cancel an ended one, resume refuses an ended one', async () => {
    const { client: c, root } = client();
    const file = join(root, 'wf.yaml');
    writeFileSync(file, ['name: pipe', 'steps:', '  - id: a', '    run: exit 1', '  - id: b', '    run: echo b', '    needs: [a]', ''].join('\n'));
    await c.createWorkflow(file);
    const run = await c.runWorkflow('pipe');
    expect(run.status).toBe('failed');
    const inspected = await c.inspectWorkflowRun(run.id);
    expect(inspected).toMatchObject({ id: run.id, status: 'failed', agent: null });
    expect(inspected.steps.map((s) => [s.stepId, s.status])).toEqual([
      ['a', 'failed'],
      ['b', 'skipped'],
    ]);
    expect(inspected.steps[1]!.skipReason).toMatch(/a/);
    expect(await c.cancelWorkflowRun(run.id)).toMatchObject({ outcome: 'ended', status: 'failed' });
    // Nothing left to do: resume gives the ended run back as it is.
    expect(await c.resumeWorkflow(run.id)).toMatchObject({ id: run.id, status: 'failed' });
    expect(await rejection(c.inspectWorkflowRun('wfrun_nope'))).toBeInstanceOf(NotFoundError);
    // The workflow run's stream, by the name the predecessor used (`workflows events`).
    expect((await c.events(run.id)).map((e) => e.type)[0]).toBe('wfrun.started');
  });

  it('stats, why (recent decisions and one slot), at a SimulatedClock', async () => {
    const clock = new SimulatedClock('2026-07-01T00:00:00.000Z');
    const { client: c } = client({ clock });
    await c.create({ name: 'tick', schedule: { type: 'interval', everyMs: 1000 }, target: { type: 'command', command: 'true' } });
    clock.advance(1000);
    await c.tick();
    const stats = await c.stats();
    expect(stats.loops.map((l) => [l.name, l.runs])).toEqual([['tick', 1]]);
    expect((await c.stats({ since: '1h' })).loops.map((l) => l.runs)).toEqual([1]);
    expect((await c.stats({ loop: 'tick', since: '2026-07-01T00:00:00.500Z' })).loops.map((l) => l.runs)).toEqual([1]);
    expect(await rejection(c.stats({ since: 'whenever' }))).toBeInstanceOf(UsageError);
    expect(await rejection(c.stats({ since: '2026-07-02T00:00:00Z' }))).toBeInstanceOf(UsageError);
    expect(await rejection(c.stats({ loop: 'nope' }))).toBeInstanceOf(NotFoundError);
    const decisions = await c.why('tick');
    expect(decisions).toMatchObject([{ decision: 'fired', from: '2026-07-01T00:00:01.000Z' }]);
    const slot = await c.why('tick', { at: '2026-07-01T00:00:01Z' });
    expect(slot).toMatchObject({ slot: '2026-07-01T00:00:01.000Z', decision: { decision: 'fired' } });
    expect(await rejection(c.why('tick', { at: 'not a time' }))).toBeInstanceOf(ValidationError);
  });

  it('doctor, verify, backup and replay: reports as the CLI prints them with --json', async () => {
    const { client: c, root } = client();
    await c.create({ name: 'r', schedule: { type: 'manual' }, target: { type: 'command', command: 'echo hi' } });
    const run = await c.runNow('r');
    const doctor = await c.doctor();
    expect(doctor.checks.length).toBeGreaterThan(0);
    expect(typeof doctor.ok).toBe('boolean');
    const verify = await c.verify();
    expect(verify).toMatchObject({ ok: true, violations: [] });
    expect(verify.events).toBeGreaterThan(3);
    const target = join(root, 'copy.db');
    const backup = await c.backup(target);
    expect(backup).toMatchObject({ file: target, events: verify.events });
    expect(existsSync(target)).toBe(true);
    expect(backup.bytes).toBeGreaterThan(0);
    expect(await rejection(c.backup(target))).toBeInstanceOf(UsageError);
    const replay = await c.replay(run.id);
    expect(replay.ok).toBe(true);
    expect(replay.steps.length).toBe((await c.events(run.id)).length);
    expect(await c.replay(run.id, { strict: true })).toMatchObject({ ok: true });
    expect(await rejection(c.replay('run_nope'))).toBeInstanceOf(NotFoundError);
  });

  it('accounts, projections rebuild and verify, secrets scrub (dry run)', async () => {
    const { client: c, root } = client();
    mkdirSync(join(root, 'claude-work'));
    const account = await c.addAccount('work', { tool: 'claude', dir: join(root, 'claude-work') });
    expect(account).toMatchObject({ name: 'work', tool: 'claude' });
    expect((await c.listAccounts()).map((a) => a.name)).toEqual(['work']);
    expect(await rejection(c.addAccount('work', { tool: 'claude', dir: root }))).toBeInstanceOf(LoopsError);
    expect((await c.removeAccount('work', { reason: 'left' })).name).toBe('work');
    expect(await c.listAccounts()).toEqual([]);
    expect(await rejection(c.removeAccount('work'))).toBeInstanceOf(NotFoundError);
    await c.create({ name: 'keep', schedule: { type: 'manual' }, target: { type: 'command', command: 'true' } });
    await c.runNow('keep');
    const rebuilt = await c.rebuildProjections();
    expect(rebuilt.rows).toMatchObject({ loops: 1, loop_runs: 1 });
    expect((await c.verifyProjections()).ok).toBe(true);
    expect((await c.getLoop('keep')).runCount).toBe(1);
    const scrub = await c.scrubSecrets({ dryRun: true });
    expect(scrub).toMatchObject({ loops: [], workflows: [] });
  });
});
