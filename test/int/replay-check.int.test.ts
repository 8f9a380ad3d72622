/**
 * Replay checks each event field by field (the hashes the runtime records in `meta.ctx`), and says
 * at which event and in which field it first differs; events from before loops recorded them are
 * checked on the state only. Steps carry what changed (`steps.<id>` for a workflow run), never
 * whole contexts; paged reads replay exactly as a whole read; `diffRuns` finds where two runs of a
 * loop part ways. Real runtime, real processes, real SQLite files.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DeterminismError, UsageError } from '../../src/events/errors.js';
import type { EventMeta } from '../../src/events/types.js';
import { hashValue } from '../../src/machines/context-diff.js';
import { determinismError, failureAt, replayEvents, replayStream, StreamReplay, streamPages } from '../../src/runtime/admin/replay.js';
import { diffRuns } from '../../src/runtime/admin/run-diff.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { createCommandLoop } from '../../src/runtime/loops/commands.js';
import { runWorkflow } from '../../src/runtime/workflows/runner.js';
import { createWorkflow } from '../../src/runtime/workflows/specs.js';
import { tempDir, useRuntime, type TestRuntime } from '../helpers/tmp.js';

const manual = { manual: true, tz: 'UTC' };

function setMeta(runtime: TestRuntime, streamId: string, version: number, change: (meta: EventMeta) => EventMeta): void {
  const row = runtime.db.prepare('SELECT position, meta FROM events WHERE stream_id = ? AND version = ?').get(streamId, version) as { position: number; meta: string };
  runtime.db.prepare('UPDATE events SET meta = ? WHERE position = ?').run(JSON.stringify(change(JSON.parse(row.meta) as EventMeta)), row.position);
}

describe('replay checks every field an event changed', () => {
  it('names the first event and field whose replayed change differs from the recorded hash, with the values it can know', async () => {
    const runtime = await useRuntime();
    await createCommandLoop(runtime, { name: 'job', command: 'exit 3', schedule: manual });
    const run = await runNow(runtime, 'job');
    const streamId = `run:${run.id}`;
    const clean = await replayStream(runtime.log, streamId);
    expect(clean.ok).toBe(true);
    expect(clean.steps.every((s) => s.contextChecked)).toBe(true);
    const exited = clean.steps.find((s) => s.type === 'process.exited')!;
    expect(exited.changes.map((c) => c.path)).toContain('exitCode');
    expect(exited.changes.find((c) => c.path === 'exitCode')).toEqual({ path: 'exitCode', before: null, after: 3 });

    // The log says exitCode became something else: named with the replayed value.
    setMeta(runtime, streamId, exited.version, (meta) => ({ ...meta, ctx: { ...meta.ctx, exitCode: hashValue(4) } }));
    const edited = await replayStream(runtime.log, streamId);
    expect(edited).toMatchObject({ ok: false, firstMismatch: exited.version });
    const step = edited.steps.find((s) => !s.matches)!;
    expect(step.fieldMismatch).toEqual({ path: 'exitCode', recordedHash: hashValue(4), replayedHash: hashValue(3), replayed: 3 });
    expect(determinismError(edited)).toBeInstanceOf(DeterminismError);
    expect(determinismError(edited).message).toBe(
      `replay of ${streamId} diverges at version ${exited.version} (process.exited): field exitCode: replay changed it to 3, the log recorded a change to another value (hash ${hashValue(4)})`,
    );

    // The log says exitCode did not change: the recorded value is the one before (null).
    setMeta(runtime, streamId, exited.version, (meta) => {
      const { exitCode: _gone, ...ctx } = meta.ctx!;
      return { ...meta, ctx };
    });
    const unchanged = (await replayStream(runtime.log, streamId)).steps.find((s) => !s.matches)!;
    expect(unchanged.fieldMismatch).toEqual({ path: 'exitCode', recordedHash: null, replayedHash: hashValue(3), recorded: null, replayed: 3 });

    // A field the log says changed that replay leaves alone.
    setMeta(runtime, streamId, 1, (meta) => ({ ...meta, ctx: { ...meta.ctx, stdout: hashValue('x') } }));
    const first = await replayStream(runtime.log, streamId);
    expect(first.firstMismatch).toBe(1);
    expect(first.steps[0]!.fieldMismatch).toEqual({ path: 'stdout', recordedHash: hashValue('x'), replayedHash: null, replayed: '' });
  });

  it('events without meta.ctx (before loops recorded it) are checked on the state only', async () => {
    const runtime = await useRuntime();
    await createCommandLoop(runtime, { name: 'job', command: 'true', schedule: manual });
    const run = await runNow(runtime, 'job');
    const streamId = `run:${run.id}`;
    runtime.db.prepare("UPDATE events SET meta = json_remove(meta, '$.ctx') WHERE stream_id = ?").run(streamId);
    const replay = new StreamReplay(streamId, await runtime.log.streamInfo(streamId));
    const steps = (await runtime.log.readStream(streamId)).map((e) => replay.step(e));
    expect(replay.ok).toBe(true);
    expect(steps.every((s) => !s.contextChecked && s.fieldMismatch === undefined)).toBe(true);
    expect(replay.unrecorded).toEqual({ from: 1, to: steps.length, events: steps.length });
    // The state is still checked.
    runtime.db.prepare(`UPDATE events SET state = '"failed"' WHERE stream_id = ? AND type = 'process.exited'`).run(streamId);
    const edited = await replayStream(runtime.log, streamId);
    expect(edited.ok).toBe(false);
    expect(determinismError(edited).message).toMatch(/replayed state "succeeded" but the log recorded "failed"/);
  });

  it('paged reads replay exactly as a whole read, page boundaries anywhere', async () => {
    const runtime = await useRuntime();
    await createCommandLoop(runtime, { name: 'job', command: 'true', schedule: manual });
    for (let i = 0; i < 3; i++) await runNow(runtime, 'job');
    const runs = runtime.db.prepare('SELECT id FROM loop_runs').all() as Array<{ id: string }>;
    for (const streamId of runs.map((r) => `run:${r.id}`)) {
      const whole = await runtime.log.readStream(streamId);
      expect(whole.length).toBeGreaterThan(2);
      for (const size of [1, 2, whole.length, whole.length + 5]) {
        const pages: number[][] = [];
        for await (const page of streamPages(runtime.log, streamId, 1, size)) pages.push(page.map((e) => e.version));
        expect(pages.flat()).toEqual(whole.map((e) => e.version));
        expect(pages.every((p) => p.length <= size && p.length > 0)).toBe(true);
      }
      expect(await runtime.log.readStreamPage(streamId, 2, 2)).toEqual(whole.slice(1, 3));
      const replay = new StreamReplay(streamId, await runtime.log.streamInfo(streamId));
      const paged = [];
      for await (const page of streamPages(runtime.log, streamId, 1, 2)) for (const e of page) paged.push(replay.step(e));
      expect(paged).toEqual(replayEvents(streamId, await runtime.log.streamInfo(streamId), whole).steps);
    }
  });
});

describe('a workflow run replays step by step', () => {
  it('changes name the step (steps.<id>), never the whole map; the first failure is the failed step', async () => {
    const runtime = await useRuntime();
    const dir = tempDir();
    const spec = join(dir, 'wf.yaml');
    writeFileSync(spec, ['name: three', 'steps:', '  - id: a', '    run: echo a', '  - id: b', '    needs: a', '    run: exit 3', '  - id: c', '    needs: b', '    run: echo c', ''].join('\n'));
    await createWorkflow(runtime, spec);
    const { run } = await runWorkflow(runtime, 'three');
    expect(run.status).toBe('failed');
    const result = await replayStream(runtime.log, `wfrun:${run.id}`);
    expect(result.ok).toBe(true);
    const paths = result.steps.flatMap((s) => s.changes.map((c) => c.path));
    expect(paths).not.toContain('steps');
    expect(paths).toEqual(expect.arrayContaining(['steps.a', 'steps.b', 'steps.c']));
    const failures = result.steps.map((s) => [s.type, failureAt(s)]).filter(([, f]) => f !== null);
    expect(failures[0]).toEqual(['step.exited', 'steps.b failed']);
    expect(failures.at(-1)).toEqual([expect.any(String), 'failed']);
    const exited = result.steps.find((s) => s.type === 'step.exited' && s.changes.some((c) => c.path === 'steps.b' && (c.after as { status: string }).status === 'failed'))!;
    const change = exited.changes.find((c) => c.path === 'steps.b')!;
    expect(change.before).toMatchObject({ status: 'running', exitCode: null });
    expect(change.after).toMatchObject({ status: 'failed', exitCode: 3 });
  });
});

describe('diffRuns', () => {
  it('two runs of one loop: the same shape until the exit that differs, with the fields there; other loops refused unless forced', async () => {
    const runtime = await useRuntime();
    const dir = tempDir();
    const flag = join(dir, 'fail');
    await createCommandLoop(runtime, { name: 'job', command: `test ! -e ${flag}`, schedule: manual });
    await createCommandLoop(runtime, { name: 'other', command: 'true', schedule: manual });
    const ok1 = await runNow(runtime, 'job');
    const ok2 = await runNow(runtime, 'job');
    writeFileSync(flag, '');
    const bad = await runNow(runtime, 'job');
    const other = await runNow(runtime, 'other');

    const same = await diffRuns(runtime.log, `run:${ok1.id}`, `run:${ok2.id}`);
    expect(same).toMatchObject({ identical: true, divergence: null, transitions: 4 });
    expect(same.a.owner).toBe(same.b.owner);

    const differ = await diffRuns(runtime.log, `run:${ok1.id}`, `run:${bad.id}`);
    expect(differ.identical).toBe(false);
    expect(differ.divergence).toMatchObject({ index: 4, kind: 'state', a: { type: 'process.exited', stateAfter: 'succeeded' }, b: { type: 'process.exited', stateAfter: 'failed' } });
    expect(differ.divergence!.fields).toEqual(expect.arrayContaining([{ path: 'exitCode', a: 0, b: 1 }]));
    expect(differ.divergence!.context.map((c) => c.path)).toEqual(expect.arrayContaining(['runId', 'exitCode']));

    await expect(diffRuns(runtime.log, `run:${ok1.id}`, `run:${other.id}`)).rejects.toThrow(UsageError);
    await expect(diffRuns(runtime.log, `run:${ok1.id}`, `run:${other.id}`)).rejects.toThrow(/runs of different loops/);
    // Forced: both succeed, so the shape is the same; only the values differ.
    const forced = await diffRuns(runtime.log, `run:${ok1.id}`, `run:${other.id}`, { force: true });
    expect(forced.a.owner).not.toBe(forced.b.owner);
    expect(forced).toMatchObject({ identical: true, transitions: 4 });
  });
});
