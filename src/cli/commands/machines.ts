/**
 * `loops machines list` and `loops machines export <name> [--version N]`: the state machines that
 * write the log, as data — each machine's name, id and every version the registry keeps (old
 * streams replay on the machine that wrote them), and one version's definition as JSON
 * (`machine.toJSON()`: states, transitions, named actions and guards), for a visualizer or a
 * review of what a version changed. Reads no database.
 */
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { printJson, table } from '../render.js';

const listSpec: CommandSpec = {
  name: 'machines list',
  summary: 'List the state machines that write the log: name, id, current version and every version kept.',
  positionals: [],
  options: { json: JSON_OPTION },
  examples: ['loops machines list', 'loops machines list --json'],
};

const list: CliCommand = {
  spec: listSpec,
  async run(_parsed, ctx: CliContext) {
    const { listMachines } = await import('../../runtime/admin/machines.js');
    const infos = listMachines();
    if (ctx.json) {
      printJson(ctx, infos);
      return EXIT.ok;
    }
    ctx.out.write(
      table(
        ['NAME', 'ID', 'CURRENT', 'VERSIONS'],
        infos.map((m) => [m.name, m.id, String(m.current), m.versions.join(', ')]),
        ctx.color,
      ),
    );
    return EXIT.ok;
  },
};

const exportSpec: CommandSpec = {
  name: 'machines export',
  summary: "Print a machine's definition as JSON (machine.toJSON()): states, transitions, actions, guards.",
  description: [
    'The name is one `loops machines list` shows (run, workflowRun, loop, …) or a machine id (loops.run).',
    'Without --version, the current version. The output is JSON either way; --json is accepted for symmetry.',
  ].join('\n'),
  positionals: [{ name: 'name', required: true, description: 'machine name or id' }],
  options: {
    version: { type: 'string', value: '<n>', description: 'a version the registry keeps (default: the current one)' },
    json: { type: 'boolean', description: 'accepted for symmetry: the output is JSON either way' },
  },
  examples: ['loops machines export run --json', 'loops machines export workflowRun --version 1 > wfrun-v1.json'],
};

const exportCommand: CliCommand = {
  spec: exportSpec,
  async run({ values, positionals }, ctx: CliContext) {
    const { exportMachine } = await import('../../runtime/admin/machines.js');
    printJson(ctx, exportMachine(positionals[0]!, values.version === undefined ? undefined : String(values.version)));
    return EXIT.ok;
  },
};

export const commands: Record<string, CliCommand> = { 'machines list': list, 'machines export': exportCommand };
