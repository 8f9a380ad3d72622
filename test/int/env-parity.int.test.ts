/**
 * Environment parity with the predecessor (issue 12, item 5), each read by a real child process
 * from its own environment:
 *  - a step of a workflow loop's run gets the loop run's LOOPS_LOOP_NAME, LOOPS_RUN_ID and an
 *    ISO-8601 LOOPS_SCHEDULED_FOR (before: only LOOPS_LOOP_ID, and the slot id as "scheduled for");
 *  - under an account (`--account`, `--account-tool`), a command run and an agent run get
 *    LOOPS_ACCOUNT_PROFILE / LOOPS_ACCOUNT_TOOL and the profile's variables, and inherit none of
 *    GITHUB_TOKEN, GH_TOKEN, XDG_CONFIG_HOME, XDG_DATA_HOME, XDG_STATE_HOME, XDG_CACHE_HOME;
 *  - agent config isolation: `login` (the default of new agents) passes the CLI's own flags that
 *    shut out user and project settings and leaves its configuration directory (its login) alone;
 *    `empty` (recorded `safe`) points it at an empty directory, as a stored `safe` always did.
 */
import { mkdirSync, readFileSync, writeFileSync, chmodSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { tick } from '../../src/runtime/daemon/pass.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { createWorkflowLoop } from '../../src/runtime/loops/commands.js';
import { workflowRunSteps } from '../../src/runtime/queries/workflows.js';
import { createWorkflow } from '../../src/runtime/workflows/specs.js';
import { fixture } from '../helpers/fixtures.js';
import { tempDir, useRuntime } from '../helpers/tmp.js';

/** Sets process variables (the runs inherit them) for the current test. */
function withEnv(vars: Record<string, string | undefined>): void {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  for (const [k, v] of Object.entries(vars)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  onTestFinished(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });
}

const REPORT = fixture('report.mjs');
const LOOP_VARS = ['LOOPS_LOOP_ID', 'LOOPS_LOOP_NAME', 'LOOPS_RUN_ID', 'LOOPS_SCHEDULED_FOR', 'LOOPS_WORKFLOW_STEP_ID'];

describe('workflow steps of a loop run', () => {
  it('get the loop run\'s name, id and ISO scheduled instant, scheduled or by hand', async () => {
    const clock = new SimulatedClock('2026-05-01T00:00:30.000Z');
    const runtime = await useRuntime({ clock });
    const file = join(tempDir(), 'flow.yaml');
    writeFileSync(file, `name: flow\nsteps:\n  - id: show\n    command: ${process.execPath}\n    args: [${JSON.stringify(REPORT)}]\n    env: { REPORT_ENV: "${LOOP_VARS.join(',')}" }\n`);
    await createWorkflow(runtime, file);
    const loop = await createWorkflowLoop(runtime, { name: 'nightly', workflow: 'flow', schedule: { every: '1m', tz: 'UTC' } });
    clock.advance(60_000);
    const [scheduled] = (await tick(runtime)).runs;
    expect(scheduled).toBeDefined();
    const manual = await runNow(runtime, 'nightly');

    const reported = async (loopRunId: string) => {
      const started = (await runtime.log.readStream(`run:${loopRunId}`)).find((e) => e.type === 'run.workflow_started')!;
      const [step] = workflowRunSteps(runtime.db, (started.data as { wfRunId: string }).wfRunId);
      return JSON.parse(step!.stdout).env as Record<string, string | null>;
    };
    for (const run of [scheduled!, manual]) {
      const env = await reported(run.id);
      expect(env).toEqual({
        LOOPS_LOOP_ID: loop.id,
        LOOPS_LOOP_NAME: 'nightly',
        LOOPS_RUN_ID: run.id,
        LOOPS_SCHEDULED_FOR: run.scheduledFor,
        LOOPS_WORKFLOW_STEP_ID: 'show',
      });
      expect(new Date(env.LOOPS_SCHEDULED_FOR!).toISOString()).toBe(env.LOOPS_SCHEDULED_FOR);
    }
  });
});
