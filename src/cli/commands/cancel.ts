import { requestCancel, type CancelResult } from '../../runtime/execution/cancel.js';
import { findRun } from '../../runtime/queries/loops.js';
import { openRuntime } from '../../runtime/runtime.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand } from '../context.js';
import { printJson } from '../render.js';

const spec: CommandSpec = {
  name: 'cancel',
  summary: 'Cancel a running run: its process group is stopped and the run recorded cancelled.',
  description: [
    'Records the request in the run\'s log; the runner executing the run (the daemon, a tick or a',
    'run-now in another terminal) then sends SIGTERM to the whole process group, SIGKILL after the',
    "loop's kill grace, and records the run as cancelled. A cancelled run is never retried.",
    'A run that already ended is left as it is (exit 0, says so).',
  ].join('\n'),
  positionals: [{ name: 'run', required: true, variadic: true, description: 'run id(s)' }],
  options: {
    reason: { type: 'string', value: '<text>', description: 'why; recorded with the run' },
    json: JSON_OPTION,
  },
  examples: ['loops cancel run_01J…', "loops cancel run_01J… --reason 'wrong branch'", 'loops runs --status running --json | jq -r .[].id | xargs loops cancel'],
};

function describe(r: CancelResult): string {
  switch (r.outcome) {
    case 'requested':
      return `run ${r.runId}: cancel requested${r.holder ? `; its runner (${r.holder}) stops it` : '; no runner holds it now, so recovery records it'}`;
    case 'already requested':
      return `run ${r.runId}: a cancel was already requested; its runner is stopping it`;
    case 'ended':
      return `run ${r.runId}: already ended (${r.status}); nothing to cancel`;
  }
}

const cancelCommand: CliCommand = {
  spec,
  async run({ values, positionals }, ctx) {
    const runtime = await openRuntime({ dataDir: ctx.dataDir, clock: ctx.clock });
    try {
      // Check every id first, so a typo in the second one cancels nothing.
      const ids = positionals.map((id) => findRun(runtime.db, id).id);
      const results = [];
      for (const id of ids) results.push(await requestCancel(runtime, id, (values.reason as string | undefined) ?? null));
      if (ctx.json) printJson(ctx, results.length === 1 ? results[0] : results);
      else for (const r of results) ctx.out.write(`${describe(r)}\n`);
      return 0;
    } finally {
      runtime.close();
    }
  },
};

export const commands: Record<string, CliCommand> = { cancel: cancelCommand };
