/**
 * Secrets never reach the data directory, on the paths a user runs: a workflow's `secrets:` value
 * that a step writes to $LOOPS_OUTPUT is masked before it is recorded (`step.exited`,
 * `workflow_steps.outputs`), before it is substituted into a later step's recorded command line,
 * and in the step's `output` file; the later step still reads the real value from its environment.
 * Afterwards no file under the data directory (database, WAL, run files) holds the value in raw,
 * base64 or URL-encoded form.
 */
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { workflowRunSteps } from '../../src/runtime/queries/workflows.js';
import { runWorkflow } from '../../src/runtime/workflows/runner.js';
import { createWorkflow } from '../../src/runtime/workflows/specs.js';
import { expectInvariants } from '../helpers/invariants.js';
import { tempDir, useRuntime } from '../helpers/tmp.js';

const SECRET = 'tok-Zq8/4f9a+1c77e2d0';

/** Every file under `dir`, recursively. */
function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : [join(dir, e.name)]));
}

/** The files under `dir` holding the secret in raw, base64 or URL-encoded form. */
function holders(dir: string): string[] {
  const forms = [SECRET, Buffer.from(SECRET).toString('base64'), encodeURIComponent(SECRET)];
  return files(dir).filter((f) => statSync(f).isFile() && forms.some((form) => readFileSync(f).includes(form)));
}

describe('secrets: workflow outputs', () => {
  it('a secret a step writes to $LOOPS_OUTPUT is masked in the log, the tables, later command lines and the output file; the next step still has it in its environment', async () => {
    process.env.CLI_TOKEN = SECRET;
    onTestFinished(() => {
      delete process.env.CLI_TOKEN;
    });
    const runtime = await useRuntime();
    const file = join(tempDir(), 'wf.yaml');
    writeFileSync(
      file,
      [
        'name: leak',
        'secrets: [CLI_TOKEN]',
        'steps:',
        '  - id: login',
        '    run: echo "session=$CLI_TOKEN" >> "$LOOPS_OUTPUT"',
        '    outputs: [session]',
        '  - id: use',
        '    needs: login',
        '    command: sh',
        // The output substituted into the recorded argv; the secret itself checked by its length only
        // (the file is stored with the workflow).
        `    args: ['-c', 'echo "got $1"; test "\${#CLI_TOKEN}" = ${SECRET.length} && echo "env ok"', sh, '\${{ steps.login.outputs.session }}']`,
        '',
      ].join('\n'),
    );
    await createWorkflow(runtime, file);
    const { run } = await runWorkflow(runtime, 'leak');
    expect(run.status).toBe('succeeded');
    const steps = workflowRunSteps(runtime.db, run.id);
    expect(steps.find((s) => s.stepId === 'login')!.outputs).toEqual({ session: '***' });
    expect(steps.find((s) => s.stepId === 'use')!.stdout).toBe('got ***\nenv ok\n');
    runtime.db.pragma('wal_checkpoint(TRUNCATE)');
    expect(holders(runtime.dataDir)).toEqual([]);
    expectInvariants(runtime);
  });
});
