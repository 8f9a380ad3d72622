/**
 * Builds the core (src/index.ts, src/machines-entry.ts and everything they import: events, machines, projections,
 * runtime — not src/cli) into dist/ with the project's compiler options, for fixtures that run the
 * built code in separate Node processes. Building from src/index.ts rather than `tsc -p .` keeps
 * these tests independent of work in progress in src/cli.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const projectRoot = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Core source files (every .ts under src/ except src/cli, and src/events/pg: the PostgreSQL store is
 * an entry of its own that the core's entries do not import) whose compiled .js in dist/ is missing or older.
 */
export function staleCoreFiles(): string[] {
  const src = join(projectRoot, 'src');
  const stale: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (path !== join(src, 'cli') && path !== join(src, 'events', 'pg')) walk(path);
      } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) {
        const out = join(projectRoot, 'dist', path.slice(src.length + 1).replace(/\.ts$/, '.js'));
        if (!existsSync(out) || statSync(out).mtimeMs < statSync(path).mtimeMs) stale.push(path);
      }
    }
  };
  walk(src);
  return stale;
}

/** Builds the core into dist/ unless every core file there is already newer than its source. */
export function ensureCoreBuilt(): void {
  if (staleCoreFiles().length > 0) buildCore();
}

export function buildCore(): void {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const dir = mkdtempSync(join(tmpdir(), 'loops-build-'));
  try {
    const config = join(dir, 'tsconfig.json');
    writeFileSync(
      config,
      JSON.stringify({
        extends: join(projectRoot, 'tsconfig.json'),
        compilerOptions: {
          rootDir: join(projectRoot, 'src'),
          outDir: join(projectRoot, 'dist'),
          typeRoots: [join(projectRoot, 'node_modules', '@types')],
        },
        // The package's entries (the main one, and ./machines for embedding) and all they import.
        files: ['index.ts', 'machines-entry.ts'].map((entry) => join(projectRoot, 'src', entry)),
        include: [],
      }),
    );
    try {
      execFileSync(process.execPath, [tsc, '-p', config], { cwd: projectRoot, stdio: 'pipe' });
    } catch (error) {
      const out = `${(error as { stdout?: Buffer }).stdout ?? ''}${(error as { stderr?: Buffer }).stderr ?? ''}`;
      throw new Error(`building the core into dist/ failed:\n${out}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  if (!existsSync(join(projectRoot, 'dist', 'events', 'index.js'))) throw new Error('dist/events/index.js missing after build');
}
