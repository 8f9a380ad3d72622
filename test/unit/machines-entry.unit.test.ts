/**
 * `loops-scheduler/machines` (src/machines-entry.ts → dist/machines-entry.js) is pure: imported in a
 * child Node process whose loader hook records every module resolved, it loads xstate and zod and
 * none of better-sqlite3, execa, rxjs, node:child_process or node:fs. The child then runs a machine
 * from the entry (a typed fold), so the entry works without the rest of loops. Also: package.json
 * exports it as `./machines`, and xstate is a peer dependency with a narrow range (fold.ts's
 * `pureTransition` calls `machine.transition` with a hand-made scope, so a minor XState release may
 * break it) that includes the installed (tested) version.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureCoreBuilt, projectRoot } from '../helpers/build.js';
import { tempDir } from '../helpers/tmp.js';

const entry = join(projectRoot, 'dist', 'machines-entry.js');

beforeAll(() => ensureCoreBuilt(), 180_000);

describe('the machines entry', () => {
  it('loads no SQLite, no process or file-system module, and runs a machine', () => {
    const dir = tempDir();
    const log = join(dir, 'resolved.txt');
    // The loader hook: every specifier resolved, with the URL it resolved to, one per line.
    const hooks = join(dir, 'hooks.mjs');
    writeFileSync(
      hooks,
      `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  if (context.parentURL && !context.parentURL.startsWith('data:')) appendFileSync(${JSON.stringify(log)}, specifier + ' ' + result.url + '\\n');
  return result;
}
`,
    );
    const register = `data:text/javascript,import { register } from 'node:module'; register(${JSON.stringify(pathToFileURL(hooks).href)});`;
    const script = `
      const m = await import(${JSON.stringify(pathToFileURL(entry).href)});
      const at = '2026-01-01T00:00:00.000Z';
      const snapshot = m.foldAs(m.runMachine, [m.machineEvent('run.imported', at, {
        runId: 'run_1', loopId: 'l', loopName: 'l', slot: 's', scheduledFor: at, attempt: 1, trigger: 'manual',
        target: { kind: 'command', command: 'true', args: [], shell: false, cwd: null, env: {} },
        status: 'succeeded', exitCode: 0, pid: null, error: null, stdout: '', stderr: '', stdoutBytes: 0, stderrBytes: 0,
        startedAt: at, finishedAt: at, durationMs: 0, importedFrom: { tool: 'x', id: '1' },
      })]);
      console.log(JSON.stringify({ value: snapshot.value, output: snapshot.output, machines: Object.keys(m.currentMachines) }));
    `;
    const out = execFileSync(process.execPath, ['--import', register, '--input-type=module', '-e', script], { cwd: dir, encoding: 'utf8' });
    const result = JSON.parse(out.trim().split('\n').pop()!) as { value: string; output: { status: string }; machines: string[] };
    expect(result.machines).toContain('workflowRun');
    const resolved = readFileSync(log, 'utf8').trim().split('\n');
    const urls = resolved.map((line) => line.split(' ')[1]!);
    // The hook saw the entry's graph: xstate and zod are in it (a hook that saw nothing fails here).
    expect(urls.some((u) => u.includes('/node_modules/xstate/'))).toBe(true);
    expect(urls.some((u) => u.includes('/node_modules/zod/'))).toBe(true);
    expect(urls.some((u) => u.endsWith('/dist/machines/run.js'))).toBe(true);
    const forbidden = resolved.filter((line) =>
      /\/node_modules\/(better-sqlite3|execa|rxjs)\/| node:(child_process|fs|fs\/promises|os|worker_threads|net)$|\/dist\/(runtime|events\/(db|sqlite-[a-z-]+))\.?/.test(line),
    );
    expect(forbidden).toEqual([]);
    // The run imported as succeeded folds to done, with its output (not `null`: the event is accepted).
    expect(result.value).toBe('succeeded');
    expect(result.output).toMatchObject({ status: 'succeeded', exitCode: 0 });
  });

  it('is exported as ./machines, with xstate a narrow peer dependency (and a dev dependency)', () => {
    const pkg = JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as {
      exports: Record<string, { import: string; types: string }>;
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
      peerDependencies: Record<string, string>;
    };
    expect(pkg.exports['./machines']).toEqual({ types: './dist/machines-entry.d.ts', import: './dist/machines-entry.js' });
    expect(pkg.dependencies.xstate).toBeUndefined();
    const installed = (JSON.parse(readFileSync(join(projectRoot, 'node_modules', 'xstate', 'package.json'), 'utf8')) as { version: string }).version;
    expect(pkg.devDependencies.xstate).toBe(installed);
    // ~major.minor.patch: patch releases only, from the version the pure transition is tested with.
    expect(pkg.peerDependencies.xstate).toBe(`~${installed}`);
    const lock = JSON.parse(readFileSync(join(projectRoot, 'package-lock.json'), 'utf8')) as { packages: Record<string, Record<string, unknown>> };
    expect((lock.packages[''] as { peerDependencies: Record<string, string> }).peerDependencies).toEqual({ xstate: `~${installed}` });
    expect(lock.packages['node_modules/xstate']).toMatchObject({ version: installed, dev: true });
  });
});
