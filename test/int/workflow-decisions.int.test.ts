/**
 * Decisions are facts: a workflow run records each skip (`step.skipped {reason}`) and each retry
 * decision (`step.retry_scheduled {attempt, dueAt, reason}`) in the transaction of the event that
 * caused it, through the real runner with real processes — so the tables and `skipReasons` (what
 * `loops workflows inspect` shows) have them while the run still goes on; a cancel appended by
 * another process has its skips recorded by the runner when it catches up; the log replays and
 * projects identically (expectInvariants). Runs recorded before decisions were events (the golden
 * `cancelled-workflow` log) still get their skip reasons, from a fold of their stream.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { filter, firstValueFrom } from 'rxjs';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { StoredEvent } from '../../src/events/types.js';
import { rebuildProjections } from '../../src/runtime/admin/projections.js';
import { requestWorkflowCancel } from '../../src/runtime/execution/cancel.js';
import { workflowRunSteps } from '../../src/runtime/queries/workflows.js';
import { openRuntime } from '../../src/runtime/runtime.js';
import { runWorkflow } from '../../src/runtime/workflows/runner.js';
import { skipReasons } from '../../src/runtime/workflows/explain.js';
import { createWorkflow } from '../../src/runtime/workflows/specs.js';
import { expectInvariants } from '../helpers/invariants.js';
import { openTestRuntime, tempDir, useRuntime } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';

type Row = Record<string, unknown>;

const stepRow = (db: { prepare(sql: string): { get(...a: unknown[]): unknown } }, wfRunId: string, stepId: string) =>
  db.prepare('SELECT status, skip_reason, retry_at, attempts FROM workflow_steps WHERE wfrun_id = ? AND step_id = ?').get(wfRunId, stepId) as Row;

describe('recorded decisions, through the runner', () => {
  it('a step whose need failed is skipped, with its reason, while another branch still runs; a retry is scheduled with the failed attempt', async () => {
    const runtime = await useRuntime();
    const dir = tempDir();
    const go = join(dir, 'go');
    const spec = join(dir, 'live.yaml');
    writeFileSync(
      spec,
      [
        'name: live-skip',
        'steps:',
        '  - id: fail',
        '    run: exit 3',
        '  - id: after-fail',
        '    needs: fail',
        '    run: echo never',
        '  - id: flaky',
        '    run: test "$LOOPS_ATTEMPT" = 2',
        '    retries: { limit: 1, delay: 300ms }',
        '  - id: long',
        `    run: "while [ ! -e ${go} ]; do sleep 0.05; done"`,
        '  - id: after-long',
        '    needs: long',
        '    run: echo done',
        '',
      ].join('\n'),
    );
    await createWorkflow(runtime, spec);
    // The row of a step whose retry is recorded, read as soon as that append committed.
    let waiting: Row | null = null;
    const sub = runtime.log.events$.subscribe((e: StoredEvent) => {
      if (e.type === 'step.retry_scheduled') waiting = stepRow(runtime.db, e.streamId.slice('wfrun:'.length), 'flaky');
    });
    onTestFinished(() => sub.unsubscribe());
    let wfRunId = '';
    const done = runWorkflow(runtime, 'live-skip', { onStarted: (id) => (wfRunId = id) });
    onTestFinished(() => writeFileSync(go, ''));

    // While `long` runs: after-fail is skipped with its reason, in the table and for inspect.
    await waitFor(() => wfRunId !== '' && stepRow(runtime.db, wfRunId, 'after-fail').status === 'skipped', 10_000, 'after-fail skipped');
    expect(stepRow(runtime.db, wfRunId, 'after-fail')).toEqual({ status: 'skipped', skip_reason: 'needs fail which failed', retry_at: null, attempts: 0 });
    expect(stepRow(runtime.db, wfRunId, 'long')).toMatchObject({ status: 'running' });
    expect(runtime.db.prepare('SELECT status, decisions FROM workflow_runs WHERE id = ?').get(wfRunId)).toEqual({ status: 'running', decisions: 'recorded' });
    expect(skipReasons(runtime.db, wfRunId)).toEqual({ 'after-fail': 'needs fail which failed' });
    expect(workflowRunSteps(runtime.db, wfRunId).find((s) => s.stepId === 'after-fail')!.status).toBe('skipped');

    // The skip was recorded right after the exit that caused it, in the same append (same instant, next position).
    const stream = await runtime.log.readStream(`wfrun:${wfRunId}`);
    const failExit = stream.findIndex((e) => e.type === 'step.exited' && (e.data as { stepId: string }).stepId === 'fail');
    expect(stream[failExit + 1]).toMatchObject({ type: 'step.skipped', data: { stepId: 'after-fail', reason: 'needs fail which failed' }, at: stream[failExit]!.at });
    expect(stream[failExit + 1]!.position).toBe(stream[failExit]!.position + 1);

    // flaky failed once: its retry decision follows its exit, with the delay and the attempt that failed.
    await waitFor(() => stepRow(runtime.db, wfRunId, 'flaky').status === 'succeeded', 10_000, 'flaky retried');
    const flaky = (await runtime.log.readStream(`wfrun:${wfRunId}`)).filter((e) => (e.data as { stepId?: string }).stepId === 'flaky');
    expect(flaky.map((e) => e.type)).toEqual([
      'step.spawn_requested',
      'step.spawned',
      'step.exited',
      'step.retry_scheduled',
      'step.retry_due',
      'step.spawn_requested',
      'step.spawned',
      'step.exited',
    ]);
    const [exit1, scheduled, due] = [flaky[2]!, flaky[3]!, flaky[4]!];
    expect(scheduled.data).toEqual({ stepId: 'flaky', attempt: 2, dueAt: new Date(Date.parse(exit1.at) + 300).toISOString(), reason: 'attempt 1 failed: exited with code 1' });
    expect(scheduled.at).toBe(exit1.at);
    expect(Date.parse(due.at)).toBeGreaterThanOrEqual(Date.parse((scheduled.data as { dueAt: string }).dueAt));
    // The scheduled retry was in the table while it waited.
    expect(waiting).toEqual({ status: 'retrying', skip_reason: null, retry_at: (scheduled.data as { dueAt: string }).dueAt, attempts: 1 });

    writeFileSync(go, '');
    const { run } = await done;
    expect(run.status).toBe('failed');
    expect(Object.fromEntries(workflowRunSteps(runtime.db, wfRunId).map((s) => [s.stepId, s.status]))).toEqual({
      fail: 'failed',
      'after-fail': 'skipped',
      flaky: 'succeeded',
      long: 'succeeded',
      'after-long': 'succeeded',
    });
    expectInvariants(runtime);
  });

  it('a cancel appended by another process: the runner records the skips it decided, with the reason; the run ends cancelled', async () => {
    const runtime = await useRuntime();
    const dir = tempDir();
    const spec = join(dir, 'cancel.yaml');
    writeFileSync(
      spec,
      [
        'name: to-cancel',
        'concurrency: 1',
        'steps:',
        '  - id: long',
        '    run: sleep 30',
        // Ready, but waiting for a free slot: the cancel decides its skip.
        '  - id: next',
        '    run: echo never',
        '  - id: last',
        '    needs: next',
        '    run: echo never',
        '',
      ].join('\n'),
    );
    await createWorkflow(runtime, spec);
    const spawned = firstValueFrom(runtime.log.events$.pipe(filter((e) => e.type === 'step.spawned')));
    const done = runWorkflow(runtime, 'to-cancel');
    const wfRunId = (await spawned).streamId.slice('wfrun:'.length);

    const other = await openRuntime({ dataDir: runtime.dataDir, runnerId: 'cli-host:2:cancel' });
    try {
      expect((await requestWorkflowCancel(other, wfRunId, 'enough')).outcome).toBe('requested');
    } finally {
      other.close();
    }
    const { run } = await done;
    expect(run.status).toBe('cancelled');
    const stream = await runtime.log.readStream(`wfrun:${wfRunId}`);
    // The cancel was appended by the other process, without the runner's effects; the skips it
    // decided were recorded by the runner as it caught up, right after it.
    const cancel = stream.findIndex((e) => e.type === 'wfrun.cancel_requested');
    expect(stream[cancel]!.meta.runnerId).toBe('cli-host:2:cancel');
    expect(stream.slice(cancel + 1, cancel + 3).map((e) => [e.type, e.data, e.meta.runnerId])).toEqual([
      ['step.skipped', { stepId: 'next', reason: 'the workflow was cancelled' }, runtime.runnerId],
      ['step.skipped', { stepId: 'last', reason: 'the workflow was cancelled' }, runtime.runnerId],
    ]);
    expect(Object.fromEntries(workflowRunSteps(runtime.db, wfRunId).map((s) => [s.stepId, s.status]))).toEqual({ long: 'cancelled', next: 'skipped', last: 'skipped' });
    expect(skipReasons(runtime.db, wfRunId)).toEqual({ next: 'the workflow was cancelled', last: 'the workflow was cancelled' });
    expectInvariants(runtime);
  });
});

describe('runs recorded before decisions were events', () => {
  it('the golden cancelled-workflow log (machine v1, wfrun.started v1) keeps its skips, with reasons folded from its log', async () => {
    const runtime = await openTestRuntime();
    onTestFinished(() => runtime.close());
    const golden = fileURLToPath(new URL('../fixtures/golden/cancelled-workflow/', import.meta.url));
    const events = readFileSync(join(golden, 'events.jsonl'), 'utf8')
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as Row);
    const streams = JSON.parse(readFileSync(join(golden, 'streams.json'), 'utf8')) as Row[];
    const insert = runtime.db.prepare('INSERT INTO events (position, stream_id, version, type, v, data, meta, at, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)');
    runtime.db.transaction(() => {
      for (const e of events) {
        insert.run(e.position, e.stream_id, e.version, e.type, e.v, JSON.stringify(e.data), JSON.stringify(e.meta), e.at, JSON.stringify(e.state));
      }
      for (const s of streams) {
        const columns = Object.keys(s);
        runtime.db.prepare(`INSERT INTO streams (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`).run(...columns.map((c) => s[c] as never));
      }
    })();
    rebuildProjections(runtime.db);
    const wfRunId = (streams.find((s) => String(s.stream_id).startsWith('wfrun:'))!.stream_id as string).slice('wfrun:'.length);
    expect(runtime.db.prepare('SELECT status, decisions FROM workflow_runs WHERE id = ?').get(wfRunId)).toEqual({ status: 'cancelled', decisions: 'derived' });
    expect(runtime.db.prepare("SELECT step_id, skip_reason FROM workflow_steps WHERE wfrun_id = ? AND status = 'skipped' ORDER BY ord").all(wfRunId)).toEqual([
      { step_id: 'after-fail', skip_reason: null },
      { step_id: 'after-long', skip_reason: null },
    ]);
    expect(skipReasons(runtime.db, wfRunId)).toEqual({ 'after-fail': 'needs fail which failed', 'after-long': 'the workflow was cancelled' });
    expectInvariants(runtime, { processes: false });
  });
});
