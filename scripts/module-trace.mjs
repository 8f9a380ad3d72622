// Records every module a Node process loads, for the cold-start budget test and bench:cold.
//
//   LOOPS_MODULE_TRACE=/tmp/mods.txt node --import ./scripts/module-trace.mjs dist/cli/main.js list --json
//
// Writes one file URL a line: ES modules as they are resolved (a module.register resolve hook, which runs
// on the loader thread), CommonJS files from require.cache when the process exits. `node:` builtins are left out.
import { appendFileSync, readFileSync } from 'node:fs';
import { createRequire, isBuiltin, register } from 'node:module';
import { pathToFileURL } from 'node:url';
import { isMainThread } from 'node:worker_threads';

let out = null;

/** Loader-thread hook: the URL of every ES module (and CommonJS file imported from one) as it is resolved. */
export function initialize(data) {
  out = data.out;
}

export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  if (out && resolved.url.startsWith('file:')) appendFileSync(out, `${resolved.url}\n`);
  return resolved;
}

const target = process.env.LOOPS_MODULE_TRACE;
if (isMainThread && target && !globalThis.__loopsModuleTrace) {
  globalThis.__loopsModuleTrace = true;
  register(import.meta.url, { data: { out: target } });
  const cache = createRequire(import.meta.url).cache;
  process.once('exit', () => {
    const files = Object.keys(cache).filter((id) => !isBuiltin(id));
    if (files.length) appendFileSync(target, `${files.map((f) => pathToFileURL(f).href).join('\n')}\n`);
  });
}

/**
 * The distinct package names (`execa`, `@scope/x`) among traced URLs, and the project's own files (relative to `root`).
 * A file of the bundled CLI (dist/cli/loops.js, the only-<command>/ builds and their chunks) stands for the
 * sources esbuild put in it, as dist/cli/bundle-inputs.json lists them (scripts/postbuild.mjs); the
 * launcher dist/cli/main.js holds none. `bundleFiles` are the files of the bundled CLI that were loaded.
 */
export function summarize(text, root) {
  const urls = [...new Set(text.split('\n').filter(Boolean))];
  const rootUrl = pathToFileURL(root.endsWith('/') ? root : `${root}/`).href;
  const cliUrl = `${rootUrl}dist/cli/`;
  let bundle = {};
  try {
    bundle = JSON.parse(readFileSync(new URL('bundle-inputs.json', cliUrl), 'utf8'));
  } catch {
    // not bundled: every module is a file of its own
  }
  const files = urls.flatMap((url) => {
    const inputs = url.startsWith(cliUrl) ? bundle[url.slice(cliUrl.length)] : undefined;
    return inputs ? inputs.map((input) => `${rootUrl}${input}`) : [url];
  });
  const packages = new Set();
  const own = new Set();
  for (const url of files) {
    const nm = url.lastIndexOf('/node_modules/');
    if (nm !== -1) {
      const parts = url.slice(nm + '/node_modules/'.length).split('/');
      packages.add(parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]);
    } else if (url.startsWith(rootUrl)) own.add(url.slice(rootUrl.length));
  }
  const bundleFiles = urls.filter((url) => url.startsWith(cliUrl) && url.endsWith('.js')).map((url) => url.slice(cliUrl.length));
  return { urls, files: [...new Set(files)], packages: [...packages].sort(), own: [...own].sort(), bundleFiles };
}
