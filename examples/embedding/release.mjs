#!/usr/bin/env node
/**
 * Embedding loops in an XState app: the app's own machine invokes a loops workflow run as a child
 * (`durableWorkflowRun`) and branches on its output — `announced` with the version the build step
 * reported when the run succeeded, `rolledBack` with loops' error when it did not.
 *
 *   npm run build
 *   node examples/embedding/release.mjs <data-dir> [publish-exit-code]
 *
 * prints the app's final state as JSON. The run is a real loops run: recorded in <data-dir>'s log,
 * visible to `LOOPS_DATA_DIR=<data-dir> loops workflows runs`. In an app, import these from the
 * package (`loops-scheduler`); this example imports the built files so it runs from a checkout.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { assign, createActor, setup, toPromise } from 'xstate';
import { durableWorkflowRun } from '../../dist/runtime/durable.js';
import { openRuntime } from '../../dist/runtime/runtime.js';
import { createWorkflow } from '../../dist/runtime/workflows/specs.js';

/** The app: release through loops, then announce or roll back. */
export function releaseApp(runtime) {
  return setup({
    actors: { release: durableWorkflowRun(runtime) },
  }).createMachine({
    id: 'app',
    context: ({ input }) => ({ code: input.code, version: null, error: null, wfRunId: null }),
    initial: 'releasing',
    states: {
      releasing: {
        invoke: {
          src: 'release',
          input: ({ context }) => ({ workflow: 'release', inputs: { code: String(context.code) } }),
          onDone: [
            {
              guard: ({ event }) => event.output.status === 'succeeded',
              target: 'announced',
              actions: assign({ version: ({ event }) => event.output.steps.build.outputs.version, wfRunId: ({ event }) => event.output.wfRunId }),
            },
            { target: 'rolledBack', actions: assign({ error: ({ event }) => event.output.error, wfRunId: ({ event }) => event.output.wfRunId }) },
          ],
          // The run could not start (no such workflow, a bad input): loops' error, with its hint.
          onError: { target: 'rolledBack', actions: assign({ error: ({ event }) => event.error.message }) },
        },
      },
      announced: { type: 'final' },
      rolledBack: { type: 'final' },
    },
  });
}

/** Runs the app once against the loops data directory `dataDir`; resolves with its final state. */
export async function release(dataDir, code = 0) {
  const runtime = await openRuntime({ dataDir });
  try {
    const spec = fileURLToPath(new URL('./release.yaml', import.meta.url));
    if (!runtime.db.prepare("SELECT 1 FROM workflows WHERE name = 'release'").get()) await createWorkflow(runtime, spec);
    const app = createActor(releaseApp(runtime), { input: { code } }).start();
    await toPromise(app);
    const { value, context } = app.getSnapshot();
    return { state: value, ...context };
  } finally {
    runtime.close();
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [dataDir, code] = process.argv.slice(2);
  if (!dataDir) {
    process.stderr.write('usage: node examples/embedding/release.mjs <data-dir> [publish-exit-code]\n');
    process.exit(2);
  }
  if (!existsSync(new URL('../../dist/runtime/durable.js', import.meta.url))) {
    process.stderr.write('dist/ is not built: run npm run build first\n');
    process.exit(2);
  }
  const result = await release(dataDir, Number(code ?? 0));
  process.stdout.write(JSON.stringify(result) + '\n');
  process.exitCode = result.state === 'announced' ? 0 : 1;
}
