/**
 * Fuzzing the CLI argument parser (issue 11, hostile input): every command's spec parses any argv —
 * unicode, NUL, very long strings, flag-looking strings, `--x=`, repeated and unknown flags —
 * into a result or a UsageError (exit 2) with a one-line message; never another exception. The
 * result honours the spec: known options only, each of its type, and the positionals it allows.
 * The commands run on that result in test/int/fuzz-cli.int.test.ts.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseCommand, type CommandSpec } from '../../src/cli/args.js';
import type { CliCommand } from '../../src/cli/context.js';
import { exitCodeFor } from '../../src/cli/exit-codes.js';
import { LoopsError, UsageError } from '../../src/events/errors.js';
import { fuzzParams, hostileString } from '../helpers/fuzz.js';

const COMMANDS_DIR = join(__dirname, '..', '..', 'src', 'cli', 'commands');
let specs: CommandSpec[] = [];

beforeAll(async () => {
  const modules = readdirSync(COMMANDS_DIR).filter((f) => f.endsWith('.ts'));
  const loaded = await Promise.all(modules.map((f) => import(join(COMMANDS_DIR, f)) as Promise<{ commands: Record<string, CliCommand> }>));
  specs = loaded.flatMap((m) => Object.values(m.commands).map((c) => c.spec));
});

/** One argv token: a flag of the spec (bare, `=value`, or `=`), an unknown one, a value, or hostile text. */
function token(spec: CommandSpec): fc.Arbitrary<string> {
  const flags = Object.entries(spec.options).flatMap(([name, o]) => [`--${name}`, ...(o.short ? [`-${o.short}`] : [])]);
  const flag = flags.length ? fc.constantFrom(...flags) : fc.constant('--json');
  return fc.oneof(
    { weight: 4, arbitrary: flag },
    { weight: 2, arbitrary: fc.tuple(flag, hostileString).map(([f, v]) => `${f}=${v}`) },
    { weight: 1, arbitrary: flag.map((f) => `${f}=`) },
    { weight: 1, arbitrary: fc.constantFrom('--help', '-h', '--', '-', '--no-such-flag', '-Z', '--json=yes', '-hx', '---', '--=x', '-5', '-1s', '--every=-1') },
    { weight: 1, arbitrary: hostileString.map((s) => `--${s}`) },
    { weight: 1, arbitrary: hostileString.map((s) => `-${s}`) },
    { weight: 4, arbitrary: hostileString },
    { weight: 2, arbitrary: fc.constantFrom('job', '5m', '0 3 * * *', 'x=y', 'A=1', 'skip', 'all', '3', '0', '1.5', 'loop_01', 'wf.yaml') },
  );
}

function specAndArgv(): fc.Arbitrary<{ spec: CommandSpec; argv: string[] }> {
  return fc.integer({ min: 0, max: specs.length - 1 }).chain((i) => {
    const spec = specs[i]!;
    return fc.array(token(spec), { maxLength: 12 }).map((argv) => ({ spec, argv }));
  });
}

describe('fuzz: the argument parser', () => {
  it('every command spec is loaded', () => {
    expect(specs.length).toBeGreaterThan(40);
  });

  it('any argv is a result that honours the spec, or a UsageError (exit 2) with a one-line message', () => {
    fc.assert(
      fc.property(specAndArgv(), ({ spec, argv }) => {
        let parsed;
        try {
          parsed = parseCommand(spec, argv);
        } catch (error) {
          expect(error).toBeInstanceOf(UsageError);
          expect(exitCodeFor((error as LoopsError).code)).toBe(2);
          const message = (error as LoopsError).message;
          expect(message).toMatch(new RegExp(`^loops ${spec.name}: `));
          expect(message).not.toMatch(/[\r\n]/);
          // A long argument is quoted by its start and length, not whole (shownRef).
          expect(message.length).toBeLessThan(400);
          expect((error as LoopsError).hint ?? '').not.toMatch(/[\r\n]/);
          return;
        }
        for (const [key, value] of Object.entries(parsed.values)) {
          if (value === undefined) continue;
          const o = key === 'help' ? { type: 'boolean' as const, multiple: false } : spec.options[key];
          expect(o, `option ${key} is not in the spec of ${spec.name}`).toBeDefined();
          if (o!.multiple) {
            expect(Array.isArray(value)).toBe(true);
            for (const v of value as unknown[]) expect(typeof v).toBe(o!.type);
          } else {
            expect(typeof value).toBe(o!.type);
          }
        }
        if (parsed.values.help) return;
        const required = spec.positionals.filter((p) => p.required).length;
        const max = spec.positionals.some((p) => p.variadic) ? Infinity : spec.positionals.length;
        expect(parsed.positionals.length).toBeGreaterThanOrEqual(required);
        expect(parsed.positionals.length).toBeLessThanOrEqual(max);
      }),
      fuzzParams(0x11a5, 1500),
    );
  });

  it('a 100,000-character argument, flag or value is quoted by its start and length: the message stays one short line', () => {
    // Found by the property above: the parser repeated the whole argument (a 100 kB error line).
    const spec = (name: string) => specs.find((s) => s.name === name)!;
    const huge = 'x'.repeat(100_000);
    const cases: Array<[string, string[], RegExp]> = [
      ['list', [huge], /^loops list: unexpected argument "x{40}"… \(100000 characters\)$/],
      ['list', [`--${huge}`], /^loops list: unknown option "--x{38}"… \(100002 characters\)$/],
      ['create command', ['job', `--cmd=--${huge}`], /^loops create command: --cmd needs a value, got the flag "--x{38}"… \(100002 characters\)$/],
    ];
    for (const [name, argv, message] of cases) {
      let error: unknown;
      try {
        parseCommand(spec(name), argv);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(UsageError);
      expect((error as UsageError).message).toMatch(message);
      expect((error as UsageError).hint!.length).toBeLessThan(200);
    }
    // A value starting with one dash is the option's value (as commander read it): its own check
    // (prune's whole-number check) refuses it later, quoting it the same way.
    expect(parseCommand(spec('prune'), ['--keep-last', `-${huge}`]).values['keep-last']).toBe(`-${huge}`);
  });

  it('a string option never takes a flag as its value by accident', () => {
    // `--cmd --every 5m` is "--cmd needs a value", not a command named "--every".
    fc.assert(
      fc.property(specAndArgv(), ({ spec, argv }) => {
        let parsed;
        try {
          parsed = parseCommand(spec, argv);
        } catch {
          return;
        }
        for (const [name, o] of Object.entries(spec.options)) {
          const v = parsed.values[name];
          if (o.type === 'string' && !o.multiple && typeof v === 'string') expect(v.startsWith('--') && v.length > 2, `--${name} took ${JSON.stringify(v)}`).toBe(false);
        }
      }),
      fuzzParams(0x11a6, 500),
    );
  });
});
