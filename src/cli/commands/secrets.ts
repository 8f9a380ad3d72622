import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { printJson } from '../render.js';
import type { ScrubReport } from '../../runtime/loops/scrub.js';

const scrubSpec: CommandSpec = {
  name: 'secrets scrub',
  summary: 'Redefine loops and workflows that hold a secret value in clear, passing it by name instead.',
  description: [
    'For every live loop (active, paused or stopped) whose --env holds a value under a secret name',
    '(the list loops doctor prints under "secrets in definitions"), records, in one transaction, its',
    'removal and a new loop with the same name, schedule and policies that reads the variable from the',
    "runner's environment (--secret-env NAME): a new loop id, the old runs stay with the old id. For",
    "every workflow whose env: holds one, records its next version with the name under secrets:.",
    'Nothing is edited or deleted: the old events keep the old values. Rotate those secrets, and set',
    "each name in the daemon's environment (the command prints them). --dry-run records nothing.",
  ].join('\n'),
  positionals: [],
  options: {
    'dry-run': { type: 'boolean', description: 'say what would be redefined; record nothing' },
    json: JSON_OPTION,
  },
  examples: ['loops secrets scrub --dry-run', 'loops secrets scrub && loops doctor'],
};

function render(ctx: CliContext, r: ScrubReport): void {
  const w = (line: string) => ctx.out.write(`${line}\n`);
  const verb = r.dryRun ? 'Would redefine' : 'Redefined';
  const done = r.loops.filter((l) => l.skipped === null);
  for (const l of done) {
    const flags = l.moved.map((n) => `--env ${n}=… → --secret-env ${n}`).join(', ');
    const state = l.status === 'active' ? '' : `, ${l.status} as before`;
    const dropped = l.dropped ? `; ${l.dropped} queued run${l.dropped > 1 ? 's' : ''} ${r.dryRun ? 'would be dropped' : 'dropped'}` : '';
    w(`${verb} loop ${l.name}: ${flags} (${l.oldId} ${r.dryRun ? 'would be removed, replaced by a new loop' : `removed, now ${l.newId}`}${state}${dropped})`);
  }
  for (const wf of r.workflows) {
    const to = r.dryRun ? `version ${wf.fromVersion + 1}` : `version ${wf.toVersion}`;
    w(`${verb} workflow ${wf.name}: ${wf.moved.join(', ')} → secrets: [${wf.names.join(', ')}] (${to}; its runs so far keep the version they started with)`);
  }
  for (const l of r.loops.filter((x) => x.skipped !== null)) w(`Not redefined: loop ${l.name} (${l.moved.map((n) => `--env ${n}`).join(', ')}): ${l.skipped}`);
  if (done.length === 0 && r.workflows.length === 0) w('No live loop or workflow definition holds a value under a secret name.');
  if (r.mustSet.length) {
    const unset = r.mustSet.filter((n) => process.env[n] === undefined);
    w('');
    w(`${r.dryRun ? 'Then you' : 'You'} must set ${r.mustSet.join(', ')} in the environment loops daemon starts from (and in your shell for run-now), then restart it:`);
    w('  loops daemon stop && loops daemon start');
    w(`  until then these runs fail at their start, naming the missing variable${unset.length ? ` (not set in this shell: ${unset.join(', ')})` : ''}.`);
    if (r.workflows.length) w(`Edit the workflow files too: they still hold the values, and loops workflows update refuses them (list the names under secrets:).`);
  }
  if (r.history.length || r.mustSet.length) {
    w('');
    w(
      `Rotate those secrets: the log's history still holds their old values${r.history.length ? ` — ${r.history.join(', ')} —` : ''} and so does the run.claimed event of every run those definitions started, and every backup or archive file made from the log. loops never rewrites history; docs/cli.md, "Secrets", says how to purge it.`,
    );
  }
  if (r.dryRun) w('Nothing was recorded (--dry-run).');
}

const scrubCommand: CliCommand = {
  spec: scrubSpec,
  async run({ values }, ctx) {
    const { openRuntime } = await import('../../runtime/runtime.js');
    const { scrubSecrets } = await import('../../runtime/loops/scrub.js');
    const runtime = await openRuntime({ dataDir: ctx.dataDir, clock: ctx.clock });
    try {
      const report = await scrubSecrets(runtime, { dryRun: values['dry-run'] === true });
      if (ctx.json) printJson(ctx, report);
      else render(ctx, report);
      return EXIT.ok;
    } finally {
      runtime.close();
    }
  },
};

export const commands: Record<string, CliCommand> = { 'secrets scrub': scrubCommand };
