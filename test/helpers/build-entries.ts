/**
 * Builds the embedding entries into dist/ — src/machines-entry.ts (the package's `./machines`) and
 * src/runtime/durable.ts (the durable children), with everything they import — unless dist is
 * newer than every source file they depend on. Like build.ts's core build, it does not depend on
 * work in progress in src/cli.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from './build.js';

const ENTRIES = ['machines-entry.ts', join('runtime', 'durable.ts')];

/** The sources the entries are made of that change with this work: the machines, the workflow model, the durable actor. */
function watched(): string[] {
  const src = join(projectRoot, 'src');
  const dirs = ['machines', 'workflow'].flatMap((d) => readdirSync(join(src, d)).filter((f) => f.endsWith('.ts')).map((f) => join(d, f)));
  return [...ENTRIES, ...dirs, join('runtime', 'actor.ts'), join('runtime', 'inspection.ts'), join('runtime', 'runtime.ts'), join('events', 'catalog.ts')];
}

function stale(): boolean {
  return watched().some((rel) => {
    const out = join(projectRoot, 'dist', rel.replace(/\.ts$/, '.js'));
    return !existsSync(out) || statSync(out).mtimeMs < statSync(join(projectRoot, 'src', rel)).mtimeMs;
  });
}

/** Compiles the entries into dist/ when stale. */
export function ensureEntriesBuilt(): void {
  if (!stale()) return;
  const dir = mkdtempSync(join(tmpdir(), 'loops-build-'));
  try {
    const config = join(dir, 'tsconfig.json');
    writeFileSync(
      config,
      JSON.stringify({
        extends: join(projectRoot, 'tsconfig.json'),
        compilerOptions: { rootDir: join(projectRoot, 'src'), outDir: join(projectRoot, 'dist'), typeRoots: [join(projectRoot, 'node_modules', '@types')] },
        files: ENTRIES.map((e) => join(projectRoot, 'src', e)),
        include: [],
      }),
    );
    const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
    try {
      execFileSync(process.execPath, [tsc, '-p', config], { cwd: projectRoot, stdio: 'pipe' });
    } catch (error) {
      const out = `${(error as { stdout?: Buffer }).stdout ?? ''}${(error as { stderr?: Buffer }).stderr ?? ''}`;
      throw new Error(`building the embedding entries into dist/ failed:\n${out}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
