/**
 * The embedding example and guide run as they are written: examples/embedding/release.mjs is run
 * with node on the built files (a real workflow run in a temp data directory) both ways — the app
 * announces when the release workflow succeeds and rolls back, with loops' error, when its publish
 * step fails; and every code block of docs/embedding.md marked ```ts run is transpiled and run with
 * node from inside the package (so `loops-scheduler/machines` resolves through package.json's
 * exports, as in an app), each asserting its own results.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureCoreBuilt, projectRoot } from '../helpers/build.js';
import { tempDir } from '../helpers/tmp.js';

beforeAll(() => ensureCoreBuilt(), 180_000);

describe('examples/embedding/release.mjs', () => {
  const example = join(projectRoot, 'examples', 'embedding', 'release.mjs');

  it('announces with the build step\'s version when the workflow succeeds, and rolls back with its error when it fails', () => {
    const data = join(tempDir(), 'data');
    const ok = JSON.parse(execFileSync(process.execPath, [example, data, '0'], { encoding: 'utf8' }).trim()) as Record<string, unknown>;
    expect(ok).toMatchObject({ state: 'announced', version: '1.2.3', error: null });
    const failed = spawnSync(process.execPath, [example, data, '3'], { encoding: 'utf8' });
    expect(failed.status).toBe(1);
    expect(JSON.parse(failed.stdout.trim())).toMatchObject({ state: 'rolledBack', version: null, error: 'failed step: publish' });
    // Two real workflow runs in the log, as the ids the app kept.
    const runs = execFileSync(process.execPath, ['--input-type=module', '-e', `
      import { openReader } from ${JSON.stringify(join(projectRoot, 'dist', 'runtime', 'store.js'))};
      const r = await openReader(${JSON.stringify(data)});
      console.log(JSON.stringify(r.db.prepare('SELECT id, status FROM workflow_runs ORDER BY started_at').all()));
      r.close();
    `], { encoding: 'utf8' });
    expect((JSON.parse(runs) as Array<{ id: string; status: string }>).map((r) => r.status)).toEqual(['succeeded', 'failed']);
    expect(JSON.parse(runs)[0].id).toBe(ok.wfRunId);
  });
});

describe('docs/embedding.md', () => {
  const text = readFileSync(join(projectRoot, 'docs', 'embedding.md'), 'utf8');
  const blocks = [...text.matchAll(/```ts run\n([\s\S]*?)```/g)].map((m) => m[1]!);

  it('has code blocks marked to run', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(2);
  });

  it.each(blocks.map((code, i) => [i + 1, code] as const))('block %i runs and its assertions hold', (i, code) => {
    const js = ts.transpileModule(code, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: false } }).outputText;
    // Inside the package (dist/ is ignored by git), so its imports resolve as an app's would.
    const dir = join(projectRoot, 'dist', '.docs-snippets');
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `embedding-${i}-${process.pid}.mjs`);
    writeFileSync(file, js);
    try {
      const r = spawnSync(process.execPath, [file], { encoding: 'utf8', cwd: projectRoot });
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
    } finally {
      rmSync(file, { force: true });
    }
  });
});
