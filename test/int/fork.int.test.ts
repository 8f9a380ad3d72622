/**
 * `loops fork` / `loops rerun` through the runtime, with real processes, real SQLite files and a
 * SimulatedClock: every step appends its id to a counter file, so a reused step is seen not to
 * spawn. The acceptance case: a → b → c → d, c fails; fork --from c with b's output overridden
 * completes without running a and b again, the child's events show them reused, and the parent
 * link is on both streams.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { EventData } from '../../src/events/catalog.js';
import { LoopsError, UsageError } from '../../src/events/errors.js';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { createCommandLoop, createWorkflowLoop } from '../../src/runtime/loops/commands.js';
import { executeFork, planFork } from '../../src/runtime/loops/fork-run.js';
import { runWorkflow } from '../../src/runtime/workflows/runner.js';
import { createWorkflow, updateWorkflow } from '../../src/runtime/workflows/specs.js';
import { expectInvariants } from '../helpers/invariants.js';
import { tempDir, useRuntime, type TestRuntime } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';

const T0 = Date.parse('2026-03-01T00:00:00.000Z');

function fourSteps(dir: string, extra: { secret?: boolean } = {}) {
  const counter = join(dir, 'counter');
  const fix = join(dir, 'fixed');
  const file = join(dir, 'four.yaml');
  writeFileSync(
    file,
    [
      'name: four',
      ...(extra.secret ? ['secrets: [FORK_TEST_TOKEN]'] : []),
      'steps:',
      '  - id: a',
      `    run: echo a >> ${counter}; echo "${extra.secret ? 'tok=$FORK_TEST_TOKEN' : 'tok=from-a'}" >> "$LOOPS_OUTPUT"`,
      '  - id: b',
      '    needs: a',
      `    run: echo b >> ${counter}; echo "key=from-b" >> "$LOOPS_OUTPUT"`,
      '  - id: c',
      '    needs: b',
      '    env: { KEY: "${{ steps.b.outputs.key }}" }',
      `    run: echo "c $KEY" >> ${counter}; test -e ${fix}`,
      '  - id: d',
      '    needs: c',
      `    run: echo d >> ${counter}`,
      '',
    ].join('\n'),
  );
  return { counter, fix, file, lines: () => (existsSync(counter) ? readFileSync(counter, 'utf8').trim().split('\n') : []) };
}

async function failedRun(runtime: TestRuntime, secret = false) {
  const dir = tempDir();
  const w = fourSteps(dir, { secret });
  await createWorkflow(runtime, w.file);
  const { run } = await runWorkflow(runtime, 'four');
  expect(run.status).toBe('failed');
  expect(w.lines()).toEqual(['a', 'b', 'c from-b']);
  rmSync(w.counter);
  writeFileSync(w.fix, '');
  return { ...w, parent: run.id };
}

const positionNow = (runtime: TestRuntime) => (runtime.db.prepare('SELECT MAX(position) AS p FROM events').get() as { p: number }).p;
const typesOf = async (runtime: TestRuntime, streamId: string) => (await runtime.log.readStream(streamId)).map((e) => e.type);

describe('loops fork of a workflow run', () => {
  it('fork --from c --set-output b.key=… reuses a and b without spawning them; the link is on both streams', async () => {
    const runtime = await useRuntime({ clock: new SimulatedClock(T0) });
    const { parent, lines } = await failedRun(runtime);
    const plan = await planFork(runtime, parent, { how: 'fork', from: 'c', setOutputs: [{ stepId: 'b', key: 'key', value: 'overridden' }], reason: 'fixed c' });
    expect(plan.steps.map((s) => [s.stepId, s.action])).toEqual([
      ['a', 'reuse'],
      ['b', 'reuse'],
      ['c', 'run'],
      ['d', 'run'],
    ]);
    const result = await executeFork(runtime, plan);
    expect(result.run.status).toBe('succeeded');
    // a and b never spawned again; c saw the overridden output.
    expect(lines()).toEqual(['c overridden', 'd']);

    const child = await runtime.log.readStream(`wfrun:${result.run.id}`);
    const started = child[0]!.data as EventData<'wfrun.started'>;
    expect(started.forkedFrom).toEqual({ runId: parent, from: 'c', reason: 'fixed c', how: 'fork' });
    expect(result.run.forkedFrom).toEqual(started.forkedFrom);
    expect(started.version).toBe(1);
    const reused = child.filter((e) => e.type === 'step.reused').map((e) => e.data as EventData<'step.reused'>);
    expect(reused.map((r) => [r.stepId, r.status, r.outputs, r.set])).toEqual([
      ['a', 'succeeded', { tok: 'from-a' }, []],
      ['b', 'succeeded', { key: 'overridden' }, ['key']],
    ]);
    // In the start's transaction; no intent for a or b.
    expect(child.slice(0, 3).map((e) => e.type)).toEqual(['wfrun.started', 'step.reused', 'step.reused']);
    expect(child.filter((e) => e.type === 'step.spawn_requested').map((e) => (e.data as { stepId: string }).stepId)).toEqual(['c', 'd']);
    const parentEvents = await runtime.log.readStream(`wfrun:${parent}`);
    expect(parentEvents.at(-1)!.type).toBe('stream.forked');
    expect(parentEvents.at(-1)!.data).toEqual({ childRunId: result.run.id, forkedFrom: started.forkedFrom });
    // Recorded with the child's start: one transaction, one instant.
    expect(parentEvents.at(-1)!.at).toBe(child[0]!.at);
    // The tables show the reused steps with their results.
    const rows = runtime.db.prepare('SELECT step_id, status, outputs FROM workflow_steps WHERE wfrun_id = ? ORDER BY ord').all(result.run.id);
    expect(rows).toEqual([
      { step_id: 'a', status: 'succeeded', outputs: '{"tok":"from-a"}' },
      { step_id: 'b', status: 'succeeded', outputs: '{"key":"overridden"}' },
      { step_id: 'c', status: 'succeeded', outputs: '{}' },
      { step_id: 'd', status: 'succeeded', outputs: '{}' },
    ]);
    // Replay (the annotation counts as matching) and projection rebuild agree with the log.
    expectInvariants(runtime);
  });

  it('--dry-run plans and appends nothing; unknown steps and keys are usage errors', async () => {
    const runtime = await useRuntime({ clock: new SimulatedClock(T0) });
    const { parent } = await failedRun(runtime);
    const before = positionNow(runtime);
    const plan = await planFork(runtime, parent, { how: 'rerun-failed' });
    expect(plan.steps.map((s) => [s.stepId, s.action])).toEqual([
      ['a', 'reuse'],
      ['b', 'reuse'],
      ['c', 'run'],
      ['d', 'run'],
    ]);
    expect(positionNow(runtime)).toBe(before);
    await expect(planFork(runtime, parent, { how: 'fork', from: 'nope' })).rejects.toThrow(UsageError);
    await expect(planFork(runtime, parent, { how: 'fork', from: 'c', setOutputs: [{ stepId: 'zz', key: 'k', value: 'v' }] })).rejects.toThrow(/no step "zz"/);
    await expect(planFork(runtime, parent, { how: 'fork', from: 'c', setOutputs: [{ stepId: 'b', key: 'nokey', value: 'v' }] })).rejects.toThrow(/no output "nokey"/);
    await expect(planFork(runtime, parent, { how: 'fork', from: 'c', setOutputs: [{ stepId: 'd', key: 'k', value: 'v' }] })).rejects.toThrow(/runs again/);
    expect(positionNow(runtime)).toBe(before);
  });

  it('rerun --failed runs c and d only; rerun runs every step', async () => {
    const runtime = await useRuntime({ clock: new SimulatedClock(T0) });
    const { parent, lines, counter } = await failedRun(runtime);
    const failedOnly = await executeFork(runtime, await planFork(runtime, parent, { how: 'rerun-failed' }));
    expect(failedOnly.run.status).toBe('succeeded');
    expect(lines()).toEqual(['c from-b', 'd']);
    rmSync(counter);
    const whole = await executeFork(runtime, await planFork(runtime, parent, { how: 'rerun' }));
    expect(whole.run.status).toBe('succeeded');
    expect(lines()).toEqual(['a', 'b', 'c from-b', 'd']);
    expect(await typesOf(runtime, `wfrun:${parent}`)).toEqual(expect.arrayContaining(['stream.forked']));
    expect((await typesOf(runtime, `wfrun:${parent}`)).filter((t) => t === 'stream.forked')).toHaveLength(2);
    expectInvariants(runtime);
  });

  it('a step whose output was masked as a secret runs again (and what needs it), unless --set-output gives it', async () => {
    process.env.FORK_TEST_TOKEN = 'sekrit-value-123';
    onTestFinished(() => {
      delete process.env.FORK_TEST_TOKEN;
    });
    const runtime = await useRuntime({ clock: new SimulatedClock(T0) });
    const { parent, lines, counter } = await failedRun(runtime, true);
    const recorded = (await runtime.log.readStream(`wfrun:${parent}`)).find((e) => e.type === 'step.exited' && (e.data as { stepId: string }).stepId === 'a');
    expect((recorded!.data as EventData<'step.exited'>).outputs).toEqual({ tok: '***' });
    const plan = await planFork(runtime, parent, { how: 'fork', from: 'c' });
    expect(plan.steps.map((s) => [s.stepId, s.action])).toEqual([
      ['a', 'run'],
      ['b', 'run'],
      ['c', 'run'],
      ['d', 'run'],
    ]);
    expect(plan.steps[0]!.why).toMatch(/masked as a secret/);
    expect((await executeFork(runtime, plan)).run.status).toBe('succeeded');
    expect(lines()).toEqual(['a', 'b', 'c from-b', 'd']);
    rmSync(counter);
    const given = await planFork(runtime, parent, { how: 'fork', from: 'c', setOutputs: [{ stepId: 'a', key: 'tok', value: 'sekrit-value-123' }] });
    expect(given.steps.map((s) => s.action)).toEqual(['reuse', 'reuse', 'run', 'run']);
    // A secret given back is masked like any output: never in clear in the log.
    expect(given.kind === 'workflow' && given.reused.a!.outputs).toEqual({ tok: '***' });
    expect((await executeFork(runtime, given)).run.status).toBe('succeeded');
    expect(lines()).toEqual(['c from-b', 'd']);
  });
});

describe('loops fork of a workflow loop run, and from a version', () => {
  it('is a run of the loop whose workflow run runs the pinned spec version of its parent, not the latest', async () => {
    const runtime = await useRuntime({ clock: new SimulatedClock(T0) });
    const dir = tempDir();
    const w = fourSteps(dir);
    await createWorkflow(runtime, w.file);
    await createWorkflowLoop(runtime, { name: 'wfl', workflow: 'four', schedule: { manual: true, tz: 'UTC' } });
    const parent = await runNow(runtime, 'wfl');
    expect(parent.status).toBe('failed');
    expect(w.lines()).toEqual(['a', 'b', 'c from-b']);
    rmSync(w.counter);
    writeFileSync(w.fix, '');
    // Version 2 would write 'v2' from c: the fork must not run it.
    writeFileSync(w.file, readFileSync(w.file, 'utf8').replace('echo "c $KEY"', 'echo "v2 $KEY"'));
    await updateWorkflow(runtime, 'four', w.file);
    const plan = await planFork(runtime, parent.id, { how: 'fork', from: 'c' });
    expect(plan.kind === 'workflow' && plan.version).toBe(1);
    const result = await executeFork(runtime, plan);
    expect(result.kind).toBe('run');
    expect(result.run.status).toBe('succeeded');
    expect(w.lines()).toEqual(['c from-b', 'd']);
    const claimed = (await runtime.log.readStream(`run:${result.run.id}`))[0]!.data as EventData<'run.claimed'>;
    expect(claimed.forkedFrom).toEqual({ runId: parent.id, from: 'c', reason: null, how: 'fork' });
    expect((await runtime.log.readStream(`run:${parent.id}`)).at(-1)!.type).toBe('stream.forked');
    const wfStarted = (await runtime.log.readStream(`run:${result.run.id}`)).find((e) => e.type === 'run.workflow_started')!.data as { wfRunId: string };
    const child = await runtime.log.readStream(`wfrun:${wfStarted.wfRunId}`);
    expect((child[0]!.data as EventData<'wfrun.started'>).version).toBe(1);
    expect(child.filter((e) => e.type === 'step.reused').map((e) => (e.data as { stepId: string }).stepId)).toEqual(['a', 'b']);
    expectInvariants(runtime);
  });

  it('fork --from <version> reuses the steps that had ended at that version of the parent stream', async () => {
    const runtime = await useRuntime({ clock: new SimulatedClock(T0) });
    const { parent } = await failedRun(runtime);
    const events = await runtime.log.readStream(`wfrun:${parent}`);
    const aExited = events.find((e) => e.type === 'step.exited' && (e.data as { stepId: string }).stepId === 'a')!;
    const plan = await planFork(runtime, parent, { how: 'fork', from: String(aExited.version) });
    expect(plan.steps.map((s) => [s.stepId, s.action])).toEqual([
      ['a', 'reuse'],
      ['b', 'run'],
      ['c', 'run'],
      ['d', 'run'],
    ]);
    expect(plan.steps[1]!.why).toBe(`it had not ended at version ${aExited.version}`);
    // At its last version every step had ended: nothing would run (refused before anything is recorded).
    const before = positionNow(runtime);
    const all = await planFork(runtime, parent, { how: 'fork', from: String(events.length) });
    expect(all.steps.every((s) => s.action === 'reuse')).toBe(true);
    await expect(executeFork(runtime, all)).rejects.toThrow(/nothing would run again/);
    expect(positionNow(runtime)).toBe(before);
    await expect(planFork(runtime, parent, { how: 'fork', from: '999' })).rejects.toThrow(/has versions 1 to/);
  });
});

describe('loops fork / rerun of a command run', () => {
  it('is a new run of the definition its parent was claimed with, linked on both streams', async () => {
    const runtime = await useRuntime({ clock: new SimulatedClock(T0) });
    const counter = join(tempDir(), 'counter');
    await createCommandLoop(runtime, { name: 'cmd', command: `echo "$LOOPS_RUN_ID" >> ${counter}`, schedule: { manual: true, tz: 'UTC' } });
    const first = await runNow(runtime, 'cmd');
    expect(first.status).toBe('succeeded');
    const plan = await planFork(runtime, first.id, { how: 'fork', from: 'run', reason: 'again' });
    expect(plan.kind).toBe('run');
    const before = positionNow(runtime);
    await expect(planFork(runtime, first.id, { how: 'fork', from: 'zz' })).rejects.toThrow(UsageError);
    await expect(planFork(runtime, first.id, { how: 'rerun-failed' })).rejects.toThrow(/succeeded; nothing failed/);
    expect(positionNow(runtime)).toBe(before);
    const result = await executeFork(runtime, plan);
    expect(result.run.status).toBe('succeeded');
    expect(readFileSync(counter, 'utf8').trim().split('\n')).toEqual([first.id, result.run.id]);
    const claimed = (await runtime.log.readStream(`run:${result.run.id}`))[0]!;
    expect(claimed.type).toBe('run.claimed');
    expect((claimed.data as EventData<'run.claimed'>).forkedFrom).toEqual({ runId: first.id, from: 'run', reason: 'again', how: 'fork' });
    expect(result.run.forkedFrom).toEqual({ runId: first.id, from: 'run', reason: 'again', how: 'fork' });
    expect(first.forkedFrom).toBeNull();
    expect((await runtime.log.readStream(`run:${first.id}`)).at(-1)!.data).toEqual({ childRunId: result.run.id, forkedFrom: (claimed.data as EventData<'run.claimed'>).forkedFrom });
    expectInvariants(runtime);
  });

  it('is held back by the loop overlap policy while a run of it is going', async () => {
    const runtime = await useRuntime({ clock: new SimulatedClock(T0) });
    const gate = join(tempDir(), 'gate');
    writeFileSync(gate, '');
    await createCommandLoop(runtime, { name: 'slow', command: `while [ ! -e ${gate} ]; do sleep 0.02; done`, schedule: { manual: true, tz: 'UTC' } });
    const first = await runNow(runtime, 'slow');
    rmSync(gate);
    let going = '';
    const second = runNow(runtime, 'slow', { onClaimed: (id) => (going = id) });
    onTestFinished(async () => {
      writeFileSync(gate, '');
      await second;
    });
    await waitFor(() => going !== '', 10_000, 'the second run claimed');
    const plan = await planFork(runtime, first.id, { how: 'rerun' });
    const before = positionNow(runtime);
    const held = await executeFork(runtime, plan).then(
      () => null,
      (e: unknown) => e,
    );
    expect(held).toBeInstanceOf(LoopsError);
    expect((held as LoopsError).code).toBe('conflict');
    expect((held as LoopsError).message).toContain(`held back: loop slow has overlap skip and run ${going} is going`);
    expect(positionNow(runtime)).toBe(before);
    writeFileSync(gate, '');
    expect((await second).status).toBe('succeeded');
    expect((await executeFork(runtime, plan)).run.status).toBe('succeeded');
  });
});
