// After tsc: bundles the `loops` CLI, and marks the CLI entries (loops, loops-daemon) executable
// (tsc does not keep modes).
//
// The CLI is an esbuild bundle of src/cli/main.ts, in place of tsc's dist/cli/main.js:
// - dist/cli/loops.js: the entry and one chunk per lazily loaded command (dist/cli/chunks/), so a
//   command loads a handful of files instead of ~600 modules, and rxjs comes from its ES module build,
//   of which only what is imported (Subject) is kept — its package entry for Node is the whole
//   CommonJS bundle; zod is imported as a namespace so that only what is used is kept (below).
// - dist/cli/only-<module>/: for the commands scripts call most (ONLY below: run-now, list, tick,
//   runs, logs, show and the loop state commands), a build of main.ts with that command's module
//   imported statically: its entry holds the command with everything it always runs, and its own
//   chunks what it may load later (a workflow loop's runner, a projection rebuild). `run-now` loads
//   6 files instead of ~50, `list` 4 instead of ~20; the cold time of the two went down by ~15%
//   (docs/PERFORMANCE.md). They are minified (not their names), ~3% more. Each is a graph of its
//   own: a process loads one of them or loops.js, never two, so no module exists twice in it.
// - dist/cli/main.js (the `loops` binary): a launcher that imports only-<module>/index.js when the
//   first argument is such a command, else loops.js. main.ts runs itself when process.argv[1] is
//   main.js, so whichever it imports runs the command, with the same parsing, output and exit codes.
// better-sqlite3 (a native addon) stays external. Everything else in dist/ (the library entries, the
// daemon, the spawner helper) is tsc's. Every output file is one directory below dist/cli (chunks/,
// only-*/), so that the URLs the runtime builds from import.meta.url (the spawner helper, the daemon's
// binary) resolve alike. dist/cli/bundle-inputs.json lists the sources in each output file, for
// scripts/module-trace.mjs. Measured with `npm run bench:cold` (docs/PERFORMANCE.md, "Cold start").
import { chmodSync, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

/** Commands (as typed, aliases included) with a build of their own, and the module under src/cli/commands/ that holds each. */
const ONLY = {
  'run-now': 'run-now',
  list: 'list',
  ls: 'list',
  tick: 'tick',
  runs: 'runs',
  logs: 'logs',
  show: 'loops',
  pause: 'loops',
  resume: 'loops',
  stop: 'loops',
  archive: 'loops',
  remove: 'loops',
  rm: 'loops',
};

const ZOD_NAMED_Z = /^import \{ z \} from 'zod';$/m;
const root = fileURLToPath(new URL('..', import.meta.url));
const outdir = fileURLToPath(new URL('../dist/cli/', import.meta.url));
for (const dir of readdirSync(outdir)) {
  if (dir === 'chunks' || dir.startsWith('only-')) rmSync(new URL(`../dist/cli/${dir}/`, import.meta.url), { recursive: true, force: true });
}

const common = {
  absWorkingDir: root,
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
};

/** rxjs's exports send Node to dist/cjs (every operator); its ES build tree-shakes to Subject. */
const rxjsEsm = {
  name: 'rxjs-esm',
  setup(b) {
    b.onResolve({ filter: /^rxjs$/ }, () => ({ path: fileURLToPath(new URL('../node_modules/rxjs/dist/esm/index.js', import.meta.url)) }));
  },
};

/**
 * `import { z } from 'zod'` binds zod's whole namespace as one value, so esbuild keeps all of it
 * (every locale: ~750 kB for the chunk); `import * as z` used only as `z.object(…)` lets it keep what
 * is used (~200 kB). Same bindings (zod's index re-exports its namespace as `z`).
 * `transform(path, source)`, when given, rewrites a source first (the only-<command> builds' main.ts).
 */
function sources(transform) {
  return {
    name: 'sources',
    setup(b) {
      b.onLoad({ filter: /[\\/]src[\\/].*\.ts$/ }, async (args) => {
        const source = await readFile(args.path, 'utf8');
        const changed = transform?.(args.path, source) ?? source;
        const out = ZOD_NAMED_Z.test(changed) ? changed.replace(ZOD_NAMED_Z, "import * as z from 'zod';") : changed;
        return out === source ? undefined : { contents: out, loader: 'ts' };
      });
    },
  };
}

/**
 * better-sqlite3 (CommonJS, external) through the bundle's \`require\` (the banner): imported as an ES
 * module, Node would first scan it for named exports (cjs-module-lexer). The same module.exports.
 */
const sqliteByRequire = {
  name: 'better-sqlite3-require',
  setup(b) {
    b.onResolve({ filter: /^better-sqlite3$/ }, (args) => (args.kind === 'import-statement' ? { path: 'better-sqlite3', namespace: 'sqlite-require' } : undefined));
    b.onLoad({ filter: /.*/, namespace: 'sqlite-require' }, () => ({ contents: "export default require('better-sqlite3');", loader: 'js' }));
  },
};

const outputs = [];
const general = await build({
  ...common,
  entryPoints: [{ in: 'src/cli/main.ts', out: 'loops' }],
  outdir,
  chunkNames: 'chunks/[name]-[hash]',
  plugins: [rxjsEsm, sqliteByRequire, sources()],
});
outputs.push(general.metafile.outputs);

const MAIN = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));
for (const module of new Set(Object.values(ONLY))) {
  const lazy = `import('./commands/${module}.js')`;
  const result = await build({
    ...common,
    entryPoints: [{ in: 'src/cli/main.ts', out: 'index' }],
    outdir: `${outdir}only-${module}/`,
    // Without comments and blank space (names kept): a third less to read, decode and parse — the
    // sources' comments hold non-ASCII characters, which make V8 keep a file as a two-byte string.
    // Not for loops.js, whose export --html embeds a function's source text in the page.
    minifyWhitespace: true,
    minifySyntax: true,
    chunkNames: '[name]-[hash]',
    plugins: [
      rxjsEsm,
      sqliteByRequire,
      sources((path, source) => {
        if (path !== MAIN) return undefined;
        if (!source.includes(lazy)) throw new Error(`postbuild: src/cli/main.ts no longer loads ${module} with ${lazy}`);
        // The command's module, imported statically (after the shebang): its load() resolves to it.
        return source.replace(/^(#!.*\n)?/, (shebang) => `${shebang}import * as __onlyCommand from './commands/${module}.js';\n`).split(lazy).join('Promise.resolve(__onlyCommand)');
      }),
      {
        // Every other command is in loops.js: the launcher never sends it here.
        name: 'other-commands',
        setup(b) {
          b.onResolve({ filter: /^\.\/commands\/[^/]+\.js$/ }, (args) =>
            args.importer === MAIN && args.kind === 'dynamic-import' ? { path: args.path, namespace: 'other-command' } : undefined,
          );
          b.onLoad({ filter: /.*/, namespace: 'other-command' }, (args) => ({
            contents: `throw new Error(${JSON.stringify(`loops: ${args.path} is not in dist/cli/only-${module} (scripts/postbuild.mjs)`)});`,
            loader: 'js',
          }));
        },
      },
    ],
  });
  outputs.push(result.metafile.outputs);
}

const launcher = `#!/usr/bin/env node
// The \`loops\` binary, written by scripts/postbuild.mjs: the commands scripts call most have a build
// of their own (only-<command>/), every other command is in loops.js. Whichever it imports runs main().
const only = ${JSON.stringify(Object.fromEntries(Object.entries(ONLY).map(([command, module]) => [command, `./only-${module}/index.js`])))};
const command = process.argv[2];
await import(command !== undefined && Object.hasOwn(only, command) ? only[command] : './loops.js');
`;
writeFileSync(new URL('../dist/cli/main.js', import.meta.url), launcher);

// The `loops-daemon` binary (tsc's output) takes `main` from the full build: the launcher exports nothing.
{
  const daemonMain = new URL('../dist/cli/daemon-main.js', import.meta.url);
  const text = readFileSync(daemonMain, 'utf8');
  const from = "from './main.js';";
  if (!text.includes(from)) throw new Error(`postbuild: dist/cli/daemon-main.js no longer imports ${from}`);
  writeFileSync(daemonMain, text.replace(from, "from './loops.js';"));
}

const inputs = { 'main.js': [] };
for (const built of outputs) {
  for (const [file, output] of Object.entries(built)) {
    inputs[relative(outdir, `${root}/${file}`)] = Object.keys(output.inputs).filter((input) => !input.startsWith('other-command:'));
  }
}
writeFileSync(new URL('../dist/cli/bundle-inputs.json', import.meta.url), `${JSON.stringify(inputs, null, 1)}\n`);

for (const name of ['main.js', 'daemon-main.js']) {
  const bin = new URL(`../dist/cli/${name}`, import.meta.url);
  if (existsSync(bin)) chmodSync(bin, 0o755);
}
