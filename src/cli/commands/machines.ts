/**
 * `loops machines list` and `loops machines export <name> [--version N]`: the state machines that
 * write the log, as data — each machine's name, id and every version the registry keeps (old
 * streams replay on the machine that wrote them), and one version's definition as JSON
 * (`machine.toJSON()`: states, transitions, named actions and guards), for a visualizer or a
 * review of what a version changed. Reads no database.
 */
import { NotFoundError, UsageError } from '../../events/errors.js';
import { closest } from '../../events/suggest.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { printJson, table } from '../render.js';

interface MachineInfo {
  /** The name `machines export` takes (the key of `currentMachines`). */
  name: string;
  /** The id streams record as their owner. */
  id: string;
  current: number;
  /** Every version the registry folds (ascending). */
  versions: number[];
}

async function machineInfos(): Promise<MachineInfo[]> {
  const { currentMachines, getMachine } = await import('../../machines/registry.js');
  return Object.entries(currentMachines).map(([name, ref]) => {
    const versions: number[] = [];
    for (let v = 1; v <= ref.version; v++) if (getMachine({ id: ref.id, version: v })) versions.push(v);
    return { name, id: ref.id, current: ref.version, versions };
  });
}

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
    const infos = await machineInfos();
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
    const wanted = positionals[0]!;
    const infos = await machineInfos();
    const info = infos.find((m) => m.name === wanted || m.id === wanted);
    if (!info) {
      const guess = closest(wanted, infos.flatMap((m) => [m.name, m.id]));
      throw new NotFoundError(`no machine named ${JSON.stringify(wanted)}`, {
        hint: guess ? `did you mean ${guess}? (loops machines list shows them all)` : `one of: ${infos.map((m) => m.name).join(', ')}`,
      });
    }
    let version = info.current;
    if (values.version !== undefined) {
      const text = String(values.version);
      version = Number(text);
      if (!/^[1-9][0-9]*$/.test(text)) throw new UsageError(`--version ${text}: must be a positive whole number`, { hint: `versions of ${info.name}: ${info.versions.join(', ')}` });
      if (!info.versions.includes(version)) {
        throw new NotFoundError(`machine ${info.name} has no version ${version}`, { hint: `its versions: ${info.versions.join(', ')}` });
      }
    }
    const { getMachine } = await import('../../machines/registry.js');
    const machine = getMachine({ id: info.id, version })!;
    printJson(ctx, { name: info.name, id: info.id, version, current: version === info.current, definition: machine.toJSON() });
    return EXIT.ok;
  },
};

export const commands: Record<string, CliCommand> = { 'machines list': list, 'machines export': exportCommand };
