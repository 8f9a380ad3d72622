/**
 * Nothing of the predecessor's surface (@hasna/loops 0.3.1) goes missing: every command, alias and
 * flag of its `loops` and `loops-daemon` binaries, its global flags, its SDK methods, the fields of
 * its workflow files, its environment variables and its files — as recorded from its source in
 * test/fixtures/predecessor/surface.json (scripts/predecessor-surface.mjs) — is either accepted by
 * loops with the same name (its command specs, through the same alias and global-flag handling as
 * the binary) or named in docs/migrating.md as a deliberate difference. Dropping a flag, an alias or
 * an SDK method, or a migrating.md row, fails here.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseCommand } from '../../src/cli/args.js';
import { daemonArgv } from '../../src/cli/daemon-main.js';
import { main, resolveCommand } from '../../src/cli/main.js';
import { LoopsClient, loops } from '../../src/sdk.js';
import * as sdk from '../../src/sdk.js';
import { parseWorkflowText } from '../../src/runtime/workflows/files.js';

interface Option {
  flags: string;
  long: string;
  short: string | null;
  value: string | null;
  negated?: boolean;
  required?: boolean;
}
interface Command {
  bin: 'loops' | 'loops-daemon';
  name: string;
  arguments: string[];
  aliases: string[];
  options: Option[];
  group: boolean;
}
interface Field {
  name: string;
  optional: boolean;
}
interface Surface {
  package: { name: string; bin: Record<string, string>; exports: string[] };
  globals: Option[];
  commands: Command[];
  sdk: { exports: string[]; options: string[]; properties: string[]; methods: { name: string }[] };
  workflowFile: { workflow: string[]; step: Field[]; commandTarget: Field[]; agentTarget: Field[]; account: Field[] };
  loopTargets: { workflowTarget: Field[] };
  shapes: Record<string, Field[]>;
  environment: { read: string[]; setForChildren: string[] };
  files: { fn: string; path: string }[];
}

const root = join(import.meta.dirname, '..', '..');
const surface = JSON.parse(readFileSync(join(root, 'test', 'fixtures', 'predecessor', 'surface.json'), 'utf8')) as Surface;
const migrating = readFileSync(join(root, 'docs', 'migrating.md'), 'utf8');

/** The cells of every table row of docs/migrating.md (not the header or its rule). */
const rows = migrating
  .split('\n')
  .filter((line) => line.startsWith('| ') && !/^\|\s*-+/.test(line) && !line.startsWith('| predecessor'))
  .map((line) => line.slice(2, -2).split(' | '));
/** The first cell of each: where a predecessor item is named. */
const firstCells = rows.map((cells) => cells[0]!);
/** The `code` spans of a cell. */
const spans = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
const named = firstCells.flatMap(spans);

/**
 * A deliberate difference: a row whose first cell names the command (`workflows recover <runId>`),
 * or the command with the flag (`runs [idOrName] --show-output`), and whose loops cell says
 * **not accepted** — so a flag loops drops by accident is never excused by a row that only lists it.
 */
function namedAsDifference(command: string, flag?: string): boolean {
  return rows.some(
    ([first, loopsCell]) =>
      loopsCell !== undefined &&
      loopsCell.includes('**not accepted**') &&
      spans(first!).some((span) => {
        const s = span.replace(/^loops /, '');
        if (s !== command && !s.startsWith(`${command} `)) return false;
        return flag === undefined || new RegExp(`(^|[\\s\\[|])${flag}(?![\\w-])`).test(s);
      }),
  );
}

/** The loops arguments a predecessor invocation stands for. */
function loopsArgv(command: Command, words: string[]): string[] {
  if (command.bin === 'loops') return words;
  const mapped = daemonArgv(words);
  if (mapped === null) throw new Error(`loops-daemon ${words.join(' ')} is loops-daemon's help`);
  return mapped;
}

/** Parses a predecessor invocation with loops' own command table and specs; returns the values, or the error's message. */
async function parse(command: Command, words: string[]): Promise<{ values: Record<string, unknown> } | { error: string }> {
  try {
    const found = await resolveCommand(loopsArgv(command, words));
    if (!found) return { error: `no command ${words.join(' ')}` };
    return parseCommand(found.command.spec, found.rest);
  } catch (error) {
    return { error: (error as Error).message };
  }
}

/** Placeholder values for a command's required arguments (`<name>` → `x`; `[idOrName]` left out). */
function positionals(command: Command): string[] {
  return command.arguments.filter((a) => a.startsWith('<')).map(() => 'x');
}

/** Every way the predecessor let you name a command: its name, its own aliases, and its group's (`workflow`). */
function spellings(command: Command): string[][] {
  const words = command.name.split(' ');
  const out = [words];
  for (const alias of command.aliases) out.push([...words.slice(0, -1), alias]);
  if (words.length > 1) {
    const group = surface.commands.find((c) => c.bin === command.bin && c.group && c.name === words[0]);
    for (const alias of group?.aliases ?? []) out.push([alias, ...words.slice(1)]);
  }
  return out;
}

const commands = surface.commands.filter((c) => !c.group);
const prefix = (c: Command) => (c.bin === 'loops' ? '' : 'loops-daemon ');

describe('the predecessor surface fixture', () => {
  it('was read from the predecessor source (38 commands of two binaries, the create flags, 11 SDK methods)', () => {
    expect(surface.package.name).toBe('@hasna/loops');
    expect(Object.keys(surface.package.bin).sort()).toEqual(['loops', 'loops-daemon']);
    expect(surface.commands.length).toBeGreaterThanOrEqual(38);
    const createCommand = surface.commands.find((c) => c.name === 'create command')!;
    expect(createCommand.options.map((o) => o.long)).toEqual(expect.arrayContaining(['--cmd', '--dynamic', '--every', '--description', '--account-tool', '--no-shell']));
    expect(surface.sdk.methods.map((m) => m.name)).toContain('runNow');
  });
});

describe('every predecessor command is a loops command (or a stated difference)', () => {
  for (const command of commands) {
    for (const words of spellings(command)) {
      const shown = `${prefix(command)}${words.join(' ')}`;
      it(shown, async () => {
        const result = await parse(command, [...words, ...positionals(command)]);
        if ('error' in result) {
          expect(namedAsDifference(shown), `${shown}: ${result.error}; and docs/migrating.md names no difference (**not accepted**)`).toBe(true);
        }
      });
    }
  }
});

describe('every flag of every predecessor command parses with the same name (or is a stated difference)', () => {
  for (const command of commands) {
    for (const option of command.options) {
      for (const flag of [option.long, option.short].filter((f): f is string => f !== null)) {
        const shown = `${prefix(command)}${command.name} ${flag}`;
        it(shown, async () => {
          const key = option.long.slice(2);
          const argv = [...command.name.split(' '), ...positionals(command), flag, ...(option.value ? ['1'] : [])];
          const result = await parse(command, argv);
          const ok = !('error' in result) && result.values[key] !== undefined;
          if (!ok) {
            const why = 'error' in result ? result.error : `read, but not as --${key}`;
            expect(namedAsDifference(`${prefix(command)}${command.name}`, flag), `${shown}: ${why}; and docs/migrating.md names no difference (**not accepted**)`).toBe(true);
          }
        });
      }
    }
  }
});

describe('the global flags', () => {
  const jsonCommands = commands.filter((c) => c.bin === 'loops');
  for (const command of jsonCommands) {
    it(`-j / --json, before or after: ${command.name}`, async () => {
      if (namedAsDifference(command.name)) return; // the command itself is not accepted (its row says so)
      const words = command.name.split(' ');
      const ways = [
        ['-j', ...words, ...positionals(command)],
        ['--json', ...words, ...positionals(command)],
        [...words, ...positionals(command), '-j'],
        [...words, ...positionals(command), '--json'],
      ];
      for (const argv of ways) {
        const result = await parse(command, argv);
        const ok = !('error' in result) && result.values.json === true;
        if (!ok) {
          const why = 'error' in result ? result.error : 'not read as --json';
          expect(namedAsDifference(command.name, argv.includes('-j') ? '-j' : '--json'), `loops ${argv.join(' ')}: ${why}; and docs/migrating.md names no difference (**not accepted**)`).toBe(true);
        }
      }
    });
  }

  it('-V / --version and -h / --help', async () => {
    for (const flag of ['-V', '--version']) {
      let text = '';
      const out = { write: (s: string) => ((text += s), true) } as unknown as NodeJS.WritableStream;
      expect(await main([flag], { out })).toBe(0);
      expect(text).toMatch(/^loops \d+\.\d+\.\d+/);
    }
    for (const flag of ['-h', '--help']) {
      let text = '';
      const out = { write: (s: string) => ((text += s), true) } as unknown as NodeJS.WritableStream;
      expect(await main([flag], { out })).toBe(0);
      expect(text).toContain('Usage: loops');
    }
    expect(surface.globals.map((g) => g.long).sort()).toEqual(['--help', '--json', '--version']);
  });
});

describe('docs/migrating.md has a row for each of them', () => {
  it('every command (each spelling) is named in a first cell', () => {
    // Each command by its name and its own aliases (`ls`, `rm`, `workflows ls`); a group's alias (`workflow`) by itself.
    const own = commands.flatMap((c) => [c.name, ...c.aliases.map((a) => [...c.name.split(' ').slice(0, -1), a].join(' '))].map((n) => `${prefix(c)}${n}`));
    const groups = surface.commands.filter((c) => c.group).flatMap((c) => c.aliases.map((a) => `${prefix(c)}${a}`));
    const missing = [...own, ...groups].filter((name) => !named.some((span) => { const s = span.replace(/^loops /, ''); return s === name || s.startsWith(`${name} `); }));
    expect(missing).toEqual([]);
  });

  it('every flag is named in a first cell', () => {
    const flags = [...new Set(commands.flatMap((c) => c.options.map((o) => o.long)))];
    const missing = flags.filter((flag) => !firstCells.some((cell) => new RegExp(`${flag}(?![\\w-])`).test(cell)));
    expect(missing).toEqual([]);
  });

  it('every environment variable the predecessor reads or sets for a run', () => {
    const names = [...new Set([...surface.environment.read, ...surface.environment.setForChildren])].filter((n) => n !== 'HOME');
    expect(names.filter((n) => !firstCells.some((cell) => new RegExp(`\\b${n}\\b`).test(cell)))).toEqual([]);
  });

  it('every file it keeps (database, pid file, log, service unit, plist)', () => {
    const files = surface.files.map((f) => /"([^"]+)"\)$/.exec(f.path)?.[1] ?? f.path);
    expect(files).toEqual(['loops', 'loops.db', 'daemon.pid', 'daemon.log', 'loops-daemon.service', 'com.hasna.loops.daemon.plist']);
    const missing = ['~/.hasna/loops', ...files.slice(1)].filter((f) => !firstCells.some((cell) => cell.includes(f)));
    expect(missing).toEqual([]);
  });

  it('every workflow file field and SDK method', () => {
    const { workflow, step, commandTarget, agentTarget, account } = surface.workflowFile;
    const fields = [...workflow, ...[...step, ...commandTarget, ...agentTarget, ...account, ...surface.loopTargets.workflowTarget].map((f) => f.name)];
    const missing = [...new Set(fields)].filter((f) => !firstCells.some((cell) => new RegExp(`\\b${f}\\b`).test(cell)));
    expect(missing).toEqual([]);
    const methods = surface.sdk.methods.map((m) => m.name).filter((m) => !named.some((span) => span === m || span.startsWith(`${m}(`)));
    expect(methods).toEqual([]);
  });
});

describe('the SDK', () => {
  it("has the predecessor's exports and every LoopsClient method", () => {
    const exported = sdk as Record<string, unknown>;
    for (const name of surface.sdk.exports) expect(typeof exported[name], name).toBe('function');
    const missing = surface.sdk.methods.map((m) => m.name).filter((m) => typeof (LoopsClient.prototype as unknown as Record<string, unknown>)[m] !== 'function');
    expect(missing).toEqual([]);
    expect(loops({ dataDir: '/nonexistent-never-opened' })).toBeInstanceOf(LoopsClient);
  });

  it('takes the predecessor options it can (runnerId); its store is a stated difference', () => {
    for (const option of surface.sdk.options) {
      if (option === 'runnerId') continue;
      expect(named.some((span) => span.includes(`${option}?`) || span.includes(`${option}:`) || span === option), `LoopsClientOptions.${option}`).toBe(true);
    }
  });
});

describe("the SDK's inputs and results keep the predecessor's field names", () => {
  const sdkSource = readFileSync(join(root, 'src', 'sdk.ts'), 'utf8');
  /** The field names of one of loops' SDK types: an interface, or a member of the ScheduleSpec union. */
  function loopsFields(name: string): string[] {
    const schedule = /^(Once|Interval|Cron|Dynamic)Schedule$/.exec(name)?.[1];
    const body = schedule
      ? new RegExp(`\\| \\{ type: '${schedule === 'Once' ? 'once' : schedule.toLowerCase()}';([^}]*)\\}`).exec(sdkSource)?.[1]
      : new RegExp(`export interface ${name} \\{([\\s\\S]*?)\\n\\}`).exec(sdkSource)?.[1];
    if (body === undefined) throw new Error(`src/sdk.ts has no ${name}`);
    if (schedule) return ['type', ...[...body.matchAll(/(\w+)\??:/g)].map((m) => m[1]!)];
    return [...body.replace(/\/\*\*[\s\S]*?\*\//g, '').matchAll(/(?:^|[;{\s])(\w+)\??:/gm)].map((m) => m[1]!);
  }
  /** A row naming `Type.field` whose loops cell says **absent** or **not accepted**. */
  const statedAbsent = (ref: string) =>
    rows.some(([first, loopsCell]) => spans(first!).includes(ref) && /\*\*(absent|not accepted)\*\*/.test(loopsCell ?? ''));

  for (const [name, predecessorFields] of Object.entries(surface.shapes)) {
    it(name, () => {
      const have = new Set(loopsFields(name));
      const missing = predecessorFields.map((f) => f.name).filter((f) => !have.has(f) && !statedAbsent(`${name}.${f}`));
      expect(missing, `${name}: fields of the predecessor missing from src/sdk.ts and not stated absent in docs/migrating.md`).toEqual([]);
    });
  }
});

describe('a predecessor workflow file with every field loads', () => {
  it('as the predecessor shape, every field kept or warned about', () => {
    const { workflow, step, commandTarget, agentTarget } = surface.workflowFile;
    const values: Record<string, unknown> = {
      name: 'all-fields',
      description: 'every field of the predecessor schema',
      version: 3,
      id: 'build',
      dependsOn: [],
      continueOnFailure: true,
      timeoutMs: 60000,
      account: { profile: 'work', tool: 'claude' },
      command: 'echo',
      args: ['hi'],
      cwd: '/tmp',
      shell: false,
      env: { A: '1' },
      provider: 'claude',
      prompt: 'review',
      model: 'sonnet',
      agent: 'reviewer',
      extraArgs: ['--verbose'],
      configIsolation: 'safe',
    };
    const pick = (fields: Field[], extra: Record<string, unknown>) =>
      Object.fromEntries([...fields.map((f) => [f.name, values[f.name]] as const).filter(([, v]) => v !== undefined), ...Object.entries(extra)]);
    const commandStep = { ...pick(step, { target: { type: 'command', ...pick(commandTarget.filter((f) => f.name !== 'type'), {}) } }), id: 'build', name: 'Build' };
    const agentStep = {
      ...pick(step, { target: { type: 'agent', ...pick(agentTarget.filter((f) => f.name !== 'type'), {}) } }),
      id: 'review',
      name: 'Review',
      dependsOn: ['build'],
    };
    const file = Object.fromEntries(workflow.map((k) => [k, k === 'steps' ? [commandStep, agentStep] : values[k]]));
    const loaded = parseWorkflowText(JSON.stringify(file), 'all-fields.json');
    expect(loaded.format).toBe('legacy');
    expect(loaded.spec.name).toBe('all-fields');
    expect(loaded.spec.steps.map((s) => s.id)).toEqual(['build', 'review']);
    expect(JSON.stringify(loaded.spec)).toContain('"versionLabel"');
  });
});
