/**
 * Resuming a workflow run whose runner died between forking a step and recording its pid: the
 * step's process is found by its wrapper's argv, recorded as spawned by the new runner, adopted,
 * and its real exit recorded — not abandoned and started a second time. The old runner's helper is
 * a fixture that starts processes and never answers (test/fixtures/spawner-silent.mjs).
 */
import { spawn } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { filter, firstValueFrom, timeout } from 'rxjs';
import { describe, expect, it, onTestFinished } from 'vitest';
import { DurableActor } from '../../src/runtime/actor.js';
import { findRunProcess, readStatusFile } from '../../src/runtime/execution/executor.js';
import { processStartTime } from '../../src/runtime/execution/process-info.js';
import { openRuntime } from '../../src/runtime/runtime.js';
import { Spawner } from '../../src/runtime/execution/spawner.js';
import { resumeWorkflowRun, runWorkflow } from '../../src/runtime/workflows/runner.js';
import { createWorkflow } from '../../src/runtime/workflows/specs.js';
import { fixture } from '../helpers/fixtures.js';
import { eventTypes } from '../helpers/invariants.js';
import { isAlive, killGroupIfAlive, waitForGroupGone } from '../helpers/proc.js';
import { tempDir, useRuntime } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';

describe('resumeWorkflowRun: a step forked but never recorded', () => {
  it('is found by its status file, recorded as spawned by the new runner, adopted, and its real exit recorded', async () => {
    const runtime = await useRuntime({ runnerId: 'new-host:2:resumer' });
    const dir = tempDir();
    const go = join(dir, 'go');
    const spec = join(dir, 'wf.yaml');
    writeFileSync(
      spec,
      ['name: held', 'steps:', '  - id: wait', `    run: "while [ ! -e ${go} ]; do sleep 0.05; done; echo done; exit 4"`, ''].join('\n'),
    );
    await createWorkflow(runtime, spec);

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
    await waitFor(() => findRunProcess(statusFile) !== null, 10_000, "the step's process");
    const { pid } = findRunProcess(statusFile)!;
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
    const exited = (await runtime.log.readStream(`wfrun:${wfRunId}`)).find((e) => e.type === 'step.exited')!;
    // Its output, written after the old runner died, is in its file.
    expect(exited.data).toMatchObject({ stepId: 'wait', exitCode: 4, stdout: 'done\n' });
    expect(existsSync(statusFile)).toBe(true);
  });
});

describe('resumeWorkflowRun: a step whose recorded process cannot be confirmed', () => {
  it('recorded on another boot, its pid alive now: the step is abandoned saying so, never adopted, and that process is not signalled', async () => {
    const runtime = await useRuntime({ runnerId: 'new-host:2:resumer' });
    const dir = tempDir();
    const spec = join(dir, 'wf.yaml');
    writeFileSync(spec, ['name: held', 'steps:', '  - id: wait', '    run: "sleep 30"', ''].join('\n'));
    await createWorkflow(runtime, spec);

    // The old runner forks the step (through a helper that never answers); the step's process is
    // killed, leaving no status file, and the runner dies.
    const old = await openRuntime({ dataDir: runtime.dataDir, runnerId: 'old-host:1:gone' });
    old.spawner = new Spawner({ script: fixture('spawner-silent.mjs') });
    let closed = false;
    const die = () => {
      if (!closed) old.close();
      closed = true;
    };
    onTestFinished(die);
    const intent = firstValueFrom(old.log.events$.pipe(filter((e) => e.type === 'step.spawn_requested')));
    runWorkflow(old, 'held').catch(() => undefined);
    const wfRunId = (await intent).streamId.slice('wfrun:'.length);
    const statusFile = join(runtime.dataDir, 'runs', wfRunId, 'wait', '1', 'exit-status');
    await waitFor(() => findRunProcess(statusFile) !== null, 10_000, "the step's process");
    const { pid } = findRunProcess(statusFile)!;
    onTestFinished(() => killGroupIfAlive(pid));
    process.kill(-pid, 'SIGKILL');
    await waitForGroupGone(pid);
    // Its end left nothing behind: the status its helper wrote once it reaped it is removed.
    await waitFor(() => readStatusFile(statusFile) !== null, 10_000, 'the helper to write the status');
    rmSync(statusFile);
    die();

    // What the log says of the step: a process with the pid and start time of a process alive
    // now, recorded on another boot (after a reboot, pids and start times — ticks since boot — repeat).
    const other = spawn('sleep', ['30'], { detached: true, stdio: 'ignore' });
    onTestFinished(() => killGroupIfAlive(other.pid!));
    const startTime = processStartTime(other.pid!);
    await (await DurableActor.load(runtime, `wfrun:${wfRunId}`)).record('step.spawned', {
      stepId: 'wait',
      attempt: 1,
      pid: other.pid!,
      pgid: other.pid!,
      startTime,
      bootId: 'a-boot-before-this-one',
    });
    runtime.db.prepare('UPDATE leases SET expires_at = ? WHERE name = ?').run(new Date(Date.now() - 1000).toISOString(), `wfrun:${wfRunId}`);

    const ended = firstValueFrom(runtime.log.events$.pipe(filter((e) => e.type === 'step.abandoned' || e.type === 'step.exited'), timeout(10_000)));
    const resumed = resumeWorkflowRun(runtime, wfRunId);
    resumed.catch(() => undefined);
    const event = await ended;
    expect(event.type).toBe('step.abandoned');
    expect((event.data as { reason: string }).reason).toMatch(
      new RegExp(`its process identity could not be confirmed \\(it was recorded on another boot .*\\): pid ${other.pid} is alive but may be another process, so it was not signalled`),
    );
    expect((await resumed).status).toBe('failed');
    expect(isAlive(other.pid!), 'the process that has the pid now is not touched').toBe(true);
  });
});
