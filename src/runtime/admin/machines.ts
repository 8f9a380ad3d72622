/**
 * `loops machines list` and `loops machines export` (and the SDK's `listMachines` and
 * `exportMachine`): the state machines that write the log, as data — each machine's name, id and
 * every version the registry keeps (old streams replay on the machine that wrote them), and one
 * version's definition as JSON (`machine.toJSON()`: states, transitions, named actions and
 * guards), for a visualizer or a review of what a version changed. Reads no database.
 */
import { NotFoundError, UsageError } from '../../events/errors.js';
import { closest } from '../../events/suggest.js';
import { currentMachines, getMachine } from '../../machines/registry.js';

/** A machine the registry keeps (`loops machines list --json`). */
export interface MachineInfo {
  /** The name `exportMachine` takes (the key of `currentMachines`). */
  name: string;
  /** The id streams record as their owner. */
  id: string;
  /** The version new streams are written by. */
  current: number;
  /** Every version the registry folds (ascending). */
  versions: number[];
}

/** One version of a machine as JSON (`loops machines export`). */
export interface MachineExport {
  name: string;
  id: string;
  version: number;
  /** True when `version` is the one new streams are written by. */
  current: boolean;
  /** `machine.toJSON()`: states, transitions, named actions and guards. */
  definition: unknown;
}

/** Every machine that writes the log, with the versions the registry keeps. */
export function listMachines(): MachineInfo[] {
  return Object.entries(currentMachines).map(([name, ref]) => {
    const versions: number[] = [];
    for (let v = 1; v <= ref.version; v++) if (getMachine({ id: ref.id, version: v })) versions.push(v);
    return { name, id: ref.id, current: ref.version, versions };
  });
}

/**
 * The definition of machine `wanted` (a name `listMachines` gives, or a machine id) at `version`
 * (a positive whole number, as a number or its digits; default the current one). NotFoundError for
 * an unknown machine or version, UsageError for a version that is not a positive whole number.
 */
export function exportMachine(wanted: string, version?: string | number): MachineExport {
  const infos = listMachines();
  const info = typeof wanted === 'string' ? infos.find((m) => m.name === wanted || m.id === wanted) : undefined;
  if (!info) {
    const guess = typeof wanted === 'string' ? closest(wanted, infos.flatMap((m) => [m.name, m.id])) : null;
    throw new NotFoundError(`no machine named ${JSON.stringify(wanted)}`, {
      hint: guess ? `did you mean ${guess}? (loops machines list shows them all)` : `one of: ${infos.map((m) => m.name).join(', ')}`,
    });
  }
  let chosen = info.current;
  if (version !== undefined) {
    const text = String(version);
    chosen = Number(text);
    if (!/^[1-9][0-9]*$/.test(text)) throw new UsageError(`--version ${text}: must be a positive whole number`, { hint: `versions of ${info.name}: ${info.versions.join(', ')}` });
    if (!info.versions.includes(chosen)) {
      throw new NotFoundError(`machine ${info.name} has no version ${chosen}`, { hint: `its versions: ${info.versions.join(', ')}` });
    }
  }
  const machine = getMachine({ id: info.id, version: chosen })!;
  return { name: info.name, id: info.id, version: chosen, current: chosen === info.current, definition: machine.toJSON() };
}
