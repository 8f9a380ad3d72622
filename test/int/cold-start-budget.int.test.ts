/**
 * The cold-start budget (issue 14): what each command of the built CLI loads, traced by
 * scripts/module-trace.mjs (ES modules as they resolve, CommonJS files from require.cache; a chunk of
 * the bundled CLI stands for the sources in it, dist/cli/bundle-inputs.json). It asserts on the set of
 * modules, never on time: read commands load no executor (execa), no agent adapter, no workflow
 * language or runner; rxjs, where the log's writer brings it, is its Subject, not the whole package.
 * Timing is `npm run bench:cold`'s job (docs/PERFORMANCE.md).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTempDir, removeDir } from '../helpers/tmp.js';

const ROOT = resolve(__dirname, '..', '..');
const BIN = join(ROOT, 'dist', 'cli', 'main.js');
const TRACE = join(ROOT, 'scripts', 'module-trace.mjs');

interface Loaded {
  packages: string[];
  /** The project's own files (src/… when bundled, dist/… when not), without extension. */
  own: string[];
  files: string[];
  /** Files of the bundled CLI loaded (relative to dist/cli). */
  bundleFiles: string[];
}

let dataDir = '';
let runId = '';
let summarize: (text: string, root: string) => Loaded;

function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env, LOOPS_DATA_DIR: dataDir, NO_COLOR: '1', ...extra };
  delete e.LOOPS_DEBUG;
  delete e.LOOPS_NOW;
  return e;
}

function loops(args: string[]): string {
  const r = spawnSync(process.execPath, [BIN, ...args], { env: env(), encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) throw new Error(`loops ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

/** Runs the built CLI once with the module trace on; what it loaded. */
function loaded(args: string[]): Loaded {
  const out = join(dataDir, 'modules.txt');
  rmSync(out, { force: true });
  const r = spawnSync(process.execPath, ['--import', pathToFileURL(TRACE).href, BIN, ...args], {
    env: env({ LOOPS_MODULE_TRACE: out }),
    encoding: 'utf8',
    timeout: 60_000,
  });
  expect(r.status, r.stderr).toBe(0);
  const s = summarize(existsSync(out) ? readFileSync(out, 'utf8') : '', ROOT);
  return { ...s, own: s.own.map((f) => f.replace(/\.(ts|js)$/, '')) };
}

const ownMatching = (l: Loaded, re: RegExp) => l.own.filter((f) => re.test(f));
// Running an agent (preparing its argv, accounts, its CLI's version). The provider table (agents/providers,
// parse: pure descriptions) is what list/show/logs render agent loops and transcripts with.
const AGENT_ADAPTERS = /\/runtime\/agents\/(run|accounts)$/;
const WORKFLOW_LANGUAGE = /\/workflow\/(expr|spec|formats|convert)|\/runtime\/workflows\//;
const EXECUTOR = /\/runtime\/execution\/(executor|attempt|spawn-plan)$/;
/** rxjs files other than what `Subject` needs (its CommonJS bundle, operators, schedulers). */
const rxjsBeyondSubject = (l: Loaded) => l.files.filter((f) => f.includes('/node_modules/rxjs/') && (f.includes('/dist/cjs/index') || f.includes('/operators/') || f.includes('/observable/')));

beforeAll(async () => {
  ({ summarize } = (await import(pathToFileURL(TRACE).href)) as { summarize: typeof summarize });
  dataDir = makeTempDir('loops-cold-budget-');
  loops(['create', 'command', 't', '--cmd', 'true', '--no-shell', '--manual']);
  loops(['create', 'command', 'nightly', '--cmd', 'echo hello', '--cron', '0 3 * * *']);
  runId = (JSON.parse(loops(['run-now', 't', '--json'])) as { id: string }).id;
}, 120_000);

afterAll(() => removeDir(dataDir));

describe('cold start: what each command of the built CLI loads', () => {
  it('--help loads no package at all', () => {
    expect(loaded(['--help']).packages).toEqual([]);
    expect(loaded(['list', '--help']).packages.filter((p) => p !== 'better-sqlite3' && p !== 'bindings' && p !== 'file-uri-to-path')).toEqual([]);
  });

  it.each([
    ['list', ['list', '--json']],
    ['show', ['show', 't', '--json']],
    ['runs', ['runs', '--json']],
    ['stats', ['stats', '--json']],
    ['workflows list', ['workflows', 'list', '--json']],
  ])('%s reads the tables only: no execa, rxjs, zod, xstate, yaml, agent runner or workflow language', (_name, args) => {
    const l = loaded(args);
    for (const pkg of ['execa', 'rxjs', 'zod', 'xstate', 'yaml']) expect(l.packages).not.toContain(pkg);
    expect(ownMatching(l, AGENT_ADAPTERS)).toEqual([]);
    expect(ownMatching(l, WORKFLOW_LANGUAGE)).toEqual([]);
    expect(ownMatching(l, EXECUTOR)).toEqual([]);
  });

  it('logs reads a run\'s output without the executor (execa) or the agent runner', () => {
    const l = loaded(['logs', runId]);
    expect(l.packages).not.toContain('execa');
    expect(ownMatching(l, AGENT_ADAPTERS)).toEqual([]);
    expect(ownMatching(l, EXECUTOR)).toEqual([]);
  });

  it.each([
    ['events', () => ['events', runId, '--json']],
    ['replay', () => ['replay', runId, '--json']],
  ])('%s reads the log (catalogue upcasts: zod) without execa, yaml, agents or the workflow runner; rxjs only its Subject', (_name, args) => {
    const l = loaded(args());
    for (const pkg of ['execa', 'yaml']) expect(l.packages).not.toContain(pkg);
    expect(ownMatching(l, AGENT_ADAPTERS)).toEqual([]);
    expect(ownMatching(l, /\/runtime\/workflows\//)).toEqual([]);
    expect(ownMatching(l, EXECUTOR)).toEqual([]);
    expect(rxjsBeyondSubject(l)).toEqual([]);
  });

  it.each([
    ['run-now', ['run-now', 't'], 'only-run-now/'],
    ['list', ['list', '--json'], 'only-list/'],
    ['ls (its alias)', ['ls'], 'only-list/'],
    ['show', ['show', 't', '--json'], 'only-loops/'],
    ['runs', ['runs', '--json'], 'only-runs/'],
    ['tick', ['tick', '--json'], 'only-tick/'],
  ])('%s runs from its own build (scripts/postbuild.mjs): a handful of files, none of loops.js', (_name, args, dir) => {
    const l = loaded(args);
    expect(l.bundleFiles.filter((f) => f !== 'main.js' && !f.startsWith(dir))).toEqual([]);
    // 9: `show`'s eight, and since issue 15 the store choice (store-choice.ts), a small chunk every command shares.
    expect(l.bundleFiles.length).toBeLessThanOrEqual(9);
  });

  it('every other command runs from loops.js and its chunks', () => {
    const l = loaded(['stats', '--json']);
    expect(l.bundleFiles).toContain('loops.js');
    expect(l.bundleFiles.filter((f) => f.startsWith('only-'))).toEqual([]);
  });

  it('run-now of a command loads the executor, but not the workflow runner, yaml or rxjs beyond Subject', () => {
    const l = loaded(['run-now', 't']);
    expect(l.packages).toContain('execa');
    expect(l.packages).not.toContain('yaml');
    expect(ownMatching(l, /\/runtime\/workflows\//)).toEqual([]);
    expect(rxjsBeyondSubject(l)).toEqual([]);
  });
});
