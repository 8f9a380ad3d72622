/**
 * Resuming a workflow run whose runner died between forking a step and recording its pid: the
 * step's process is found by its wrapper's argv, recorded as spawned by the new runner, adopted,
 * and its real exit recorded — not abandoned and started a second time. The old runner's helper is
 * a fixture that starts processes and never answers (test/fixtures/spawner-silent.mjs).
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { filter, firstValueFrom } from 'rxjs';
import { describe, expect, it, onTestFinished } from 'vitest';
import { WRAPPER_NAME } from '../../src/runtime/executor.js';
import { findWrapperProcess } from '../../src/runtime/process-info.js';
import { openRuntime } from '../../src/runtime/runtime.js';
import { Spawner } from '../../src/runtime/spawner.js';
import { resumeWorkflowRun, runWorkflow } from '../../src/runtime/workflow-run.js';
import { createWorkflow } from '../../src/runtime/workflows.js';
import { fixture } from '../helpers/fixtures.js';
import { eventTypes } from '../helpers/invariants.js';
import { killGroupIfAlive } from '../helpers/proc.js';
import { tempDir, useRuntime } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';

describe('resumeWorkflowRun: a step forked but never recorded', () => {
  it('is found by its wrapper, recorded as spawned by the new runner, adopted, and its real exit recorded', async () => {
    const runtime = await useRuntime({ runnerId: 'new-host:2:resumer' });
    const dir = tempDir();
    const go = join(dir, 'go');
    const spec = join(dir, 'wf.yaml');
    writeFileSync(
      spec,
      ['name: held', 'steps:', '  - id: wait', `    run: "while [ ! -e ${go} ]; do sleep 0.05; done; echo done; exit 4"`, ''].join('\n'),
    );
    createWorkflow(runtime, spec);

    // The old runner: its steps are forked by a helper that never answers.
    const old = await openRuntime({ dataDir: runtime.dataDir, runnerId: 'old-host:1:gone' });
    old.spawner = new Spawner({ script: fixture('spawner-silent.mjs') });
    let closed = false;
    const die = () => {
      if (!closed) old.close();
      closed = true;
    };
    onTestFinished(die);
    const intent = firstValueFrom(old.log.events$.pipe(filter((e) => e.type === 'step.spawn_requested')));
    const started = runWorkflow(old, 'held');
    started.catch(() => undefined);
    const wfRunId = (await intent).streamId.slice('wfrun:'.length);
    const statusFile = join(runtime.dataDir, 'runs', wfRunId, 'wait', '1', 'exit-status');
    await waitFor(() => findWrapperProcess(statusFile, WRAPPER_NAME) !== null, 10_000, "the step's process");
    const { pid } = findWrapperProcess(statusFile, WRAPPER_NAME)!;
    onTestFinished(() => killGroupIfAlive(pid));

    // The old runner dies with the step unrecorded; its lease is over.
    die();
    expect(eventTypes(runtime.log, `wfrun:${wfRunId}`).at(-1)).toBe('step.spawn_requested');
    runtime.db.prepare('UPDATE leases SET expires_at = ? WHERE name = ?').run(new Date(Date.now() - 1000).toISOString(), `wfrun:${wfRunId}`);

    const spawned = firstValueFrom(runtime.log.events$.pipe(filter((e) => e.type === 'step.spawned')));
    const resumed = resumeWorkflowRun(runtime, wfRunId);
    const event = await spawned;
    expect(event.data).toMatchObject({ stepId: 'wait', attempt: 1, pid, pgid: pid });
    expect(event.meta).toMatchObject({ runnerId: 'new-host:2:resumer' });
    writeFileSync(go, '');
    const run = await resumed;
    expect(run.status).toBe('failed');
    const types = eventTypes(runtime.log, `wfrun:${wfRunId}`);
    // Started once: one intent, one spawn, its real exit.
    expect(types.filter((t) => t === 'step.spawn_requested')).toHaveLength(1);
    expect(types.filter((t) => t === 'step.spawned')).toHaveLength(1);
    expect(types).not.toContain('step.abandoned');
    const exited = runtime.log.readStream(`wfrun:${wfRunId}`).find((e) => e.type === 'step.exited')!;
    // Its output, written after the old runner died, is in its file.
    expect(exited.data).toMatchObject({ stepId: 'wait', exitCode: 4, stdout: 'done\n' });
    expect(existsSync(statusFile)).toBe(true);
  });
});
