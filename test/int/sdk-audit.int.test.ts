/**
 * The SDK's audit methods (issue 13 part 5): diff of two runs, fork and rerun of a workflow run,
 * export of a bundle and verifyBundle of it — the runtime functions `loops diff`, `fork`, `rerun`,
 * `export` and `verify <bundle>` call. Real SQLite, real child processes.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { LoopsClient, NotFoundError, UsageError, ValidationError } from '../../src/sdk.js';
import { tempDir } from '../helpers/tmp.js';

function client(): { client: LoopsClient; root: string } {
  const root = tempDir('loops-sdk-audit-');
  const c = new LoopsClient({ dataDir: join(root, 'data'), runnerId: 'sdk-audit:1:r' });
  onTestFinished(() => c.close());
  return { client: c, root };
}

async function workflow(c: LoopsClient, root: string): Promise<void> {
  const file = join(root, 'wf.yaml');
  const flag = join(root, 'flag');
  // Step b fails until the flag file exists: a rerun of the failed steps then succeeds.
  writeFileSync(file, ['name: pipe', 'steps:', '  - id: a', '    run: echo a', '  - id: b', `    run: test -e ${flag}`, '    needs: [a]', ''].join('\n'));
  await c.createWorkflow(file);
}

describe('LoopsClient: diff, fork, rerun, export, verifyBundle', () => {
  it('diff: two runs of one loop have the same shape; runs of two loops are refused unless force', async () => {
    const { client: c } = client();
    await c.create({ name: 'ok', schedule: { type: 'manual' }, target: { type: 'command', command: 'true' } });
    await c.create({ name: 'flaky', schedule: { type: 'manual' }, target: { type: 'command', command: 'exit "$(cat n 2>/dev/null || echo 0)"' } });
    const one = await c.runNow('ok');
    const two = await c.runNow('ok');
    const same = await c.diff(one.id, two.id);
    expect(same).toMatchObject({ identical: true, divergence: null });
    const other = await c.runNow('flaky');
    expect(await c.diff(one.id, other.id).catch((e: unknown) => e)).toBeInstanceOf(UsageError);
    expect((await c.diff(one.id, other.id, { force: true })).transitions).toBeGreaterThan(0);
    await expect(c.diff(one.id, 'run_nope')).rejects.toBeInstanceOf(NotFoundError);
  });

  it('rerun --failed of a workflow run: a dry run plans it, the rerun reuses a and runs b again', async () => {
    const { client: c, root } = client();
    await workflow(c, root);
    const failed = await c.runWorkflow('pipe');
    expect(failed.status).toBe('failed');
    const dry = await c.rerun(failed.id, { failed: true, dryRun: true });
    expect(dry.result).toBeNull();
    expect(dry.plan.steps.map((s) => [s.stepId, s.action])).toEqual([
      ['a', 'reuse'],
      ['b', 'run'],
    ]);
    writeFileSync(join(root, 'flag'), '');
    const rerun = await c.rerun(failed.id, { failed: true, reason: 'flag fixed' });
    expect(rerun.result).toMatchObject({ kind: 'workflow', run: { status: 'succeeded' } });
    expect(rerun.result!.run.id).not.toBe(failed.id);
    const fork = await c.fork(failed.id, { from: 'b', setOutputs: [], dryRun: true });
    expect(fork.plan.forkedFrom).toMatchObject({ how: 'fork' });
    await expect(c.fork(failed.id, { from: 'nope' })).rejects.toBeInstanceOf(UsageError);
  });

  it('export writes a bundle that verifyBundle checks; a changed byte is a problem; "-" gives the lines', async () => {
    const { client: c, root } = client();
    await c.create({ name: 'say', schedule: { type: 'manual' }, target: { type: 'command', command: 'echo audited' } });
    const run = await c.runNow('say');
    const output = join(root, 'say.jsonl');
    const result = await c.export(run.id, { output });
    expect(result).toMatchObject({ kind: 'file', summary: { file: output, format: 'bundle', subject: { id: run.id } } });
    const report = await c.verifyBundle(output);
    expect(report).toMatchObject({ ok: true, problems: [] });
    if (result.kind !== 'file') throw new Error('expected a file');
    expect(report.head).toBe(result.summary.head);
    const lines = await c.export(run.id, { output: '-' });
    expect(lines.kind === 'lines' && lines.lines.length).toBe(readFileSync(output, 'utf8').trimEnd().split('\n').length);
    writeFileSync(output, readFileSync(output, 'utf8').replace('audited', 'edited!'));
    expect((await c.verifyBundle(output)).ok).toBe(false);
    writeFileSync(join(root, 'not.jsonl'), 'hello\n');
    await expect(c.verifyBundle(join(root, 'not.jsonl'))).rejects.toBeInstanceOf(ValidationError);
    await expect(c.export('say', { since: 'soon-ish' })).rejects.toBeInstanceOf(ValidationError);
    await expect(c.export('say', { since: '2026-13-45' })).rejects.toBeInstanceOf(UsageError);
  });
});
