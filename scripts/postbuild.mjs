// After tsc: bundles the `loops` CLI, and marks the CLI entries (loops, loops-daemon) executable
// (tsc does not keep modes).
//
// dist/cli/main.js is replaced by an esbuild bundle of src/cli/main.ts: the entry and one chunk per
// lazily loaded command (dist/cli/chunks/), so a command loads a handful of files instead of ~600
// modules, and rxjs comes from its ES module build, of which only what is imported (Subject) is kept
// — its package entry for Node is the whole CommonJS bundle. better-sqlite3 (a native addon) stays
// external. Everything else in dist/ (the library entries, the daemon, the spawner helper) is tsc's.
// dist/cli/bundle-inputs.json lists the sources in each output file, for scripts/module-trace.mjs.
// Measured with `npm run bench:cold` (docs/PERFORMANCE.md, "Cold start").
import { chmodSync, existsSync, rmSync, writeFileSync } from 'node:fs';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
const outdir = fileURLToPath(new URL('../dist/cli/', import.meta.url));
rmSync(new URL('../dist/cli/chunks/', import.meta.url), { recursive: true, force: true });
const result = await build({
  absWorkingDir: root,
  entryPoints: ['src/cli/main.ts'],
  outdir,
  entryNames: '[name]',
  chunkNames: 'chunks/[name]-[hash]',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  external: ['better-sqlite3'],
  metafile: true,
  logLevel: 'warning',
  // CommonJS dependencies bundled into ES modules (execa's cross-spawn) call require.
  banner: { js: "import { createRequire as __loopsRequire } from 'node:module'; const require = __loopsRequire(import.meta.url);" },
  plugins: [
    {
      name: 'rxjs-esm',
      setup(b) {
        // rxjs's exports send Node to dist/cjs (every operator); its ES build tree-shakes to Subject.
        b.onResolve({ filter: /^rxjs$/ }, () => ({ path: fileURLToPath(new URL('../node_modules/rxjs/dist/esm/index.js', import.meta.url)) }));
      },
    },
  ],
});
const inputs = {};
for (const [file, output] of Object.entries(result.metafile.outputs)) {
  inputs[relative(outdir, `${root}/${file}`)] = Object.keys(output.inputs);
}
writeFileSync(new URL('../dist/cli/bundle-inputs.json', import.meta.url), `${JSON.stringify(inputs, null, 1)}\n`);

for (const name of ['main.js', 'daemon-main.js']) {
  const bin = new URL(`../dist/cli/${name}`, import.meta.url);
  if (existsSync(bin)) chmodSync(bin, 0o755);
}
