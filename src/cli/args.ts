/**
 * A small declarative layer over `node:util` parseArgs: one spec per command gives parsing,
 * strict errors that name the command and the flag, and `--help` text. No dependencies, so
 * the CLI starts fast.
 */
import { parseArgs } from 'node:util';
import { UsageError } from '../events/errors.js';
import { distance } from '../events/suggest.js';
import { shownRef } from '../runtime/queries/refs.js';

export interface OptionSpec {
  type: 'string' | 'boolean';
  short?: string;
  multiple?: boolean;
  /** Placeholder in help, e.g. `<duration>`. */
  value?: string;
  description: string;
}

export interface PositionalSpec {
  name: string;
  required: boolean;
  description: string;
  /** Accept any number of values (only for the last positional). */
  variadic?: boolean;
}

export interface CommandSpec {
  /** Full command path, e.g. `create command`. */
  name: string;
  summary: string;
  description?: string;
  positionals: PositionalSpec[];
  options: Record<string, OptionSpec>;
  examples?: string[];
}

export interface Parsed {
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
}

export const JSON_OPTION: OptionSpec = { type: 'boolean', description: 'print machine-readable JSON on stdout' };
export const HELP_OPTION: OptionSpec = { type: 'boolean', short: 'h', description: 'show this help' };

export function parseCommand(spec: CommandSpec, argv: string[]): Parsed {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: boolean }> = {};
  for (const [name, o] of Object.entries({ ...spec.options, help: HELP_OPTION })) {
    options[name] = { type: o.type, ...(o.short ? { short: o.short } : {}), ...(o.multiple ? { multiple: true } : {}) };
  }
  // `-j` is `--json`, as in the predecessor (its global `-j, --json`), where no option of the command takes `-j`.
  if (options.json && !options.json.short && !Object.values(options).some((o) => o.short === 'j')) options.json.short = 'j';
  let result;
  try {
    result = parseArgs({ args: withDashValues(spec, argv), options, allowPositionals: true, strict: true });
  } catch (error) {
    throw translate(spec, error as Error & { code?: string }, argv);
  }
  const values = result.values as Parsed['values'];
  if (values.help) return { values, positionals: result.positionals };
  for (const [name, o] of Object.entries(spec.options)) {
    const v = values[name];
    if (o.type === 'string' && !o.multiple && typeof v === 'string' && v.startsWith('--') && v.length > 2) {
      throw new UsageError(`loops ${spec.name}: --${name} needs a value, got the flag ${shownFlag(v)}`, {
        hint: `write --${name} ${o.value ?? '<value>'}`,
      });
    }
  }
  const max = spec.positionals.some((p) => p.variadic) ? Infinity : spec.positionals.length;
  const required = spec.positionals.filter((p) => p.required).length;
  if (result.positionals.length < required) {
    const missing = spec.positionals[result.positionals.length]!;
    throw new UsageError(`loops ${spec.name}: missing <${missing.name}>`, {
      hint: `usage: ${usageLine(spec)}`,
    });
  }
  if (result.positionals.length > max) {
    const extra = result.positionals.slice(max);
    throw new UsageError(`loops ${spec.name}: unexpected argument ${shownRef(extra[0]!)}`, {
      hint: /\s/.test(extra[0]!) ? 'quote values that contain spaces' : `usage: ${usageLine(spec)}`,
    });
  }
  return { values, positionals: result.positionals };
}

/**
 * A string option's value may start with a dash, as commander (the predecessor's parser) takes
 * it: `--arg -fsS`, `--env -x=1`, `--timeout -5s` (then refused by its own check). node's
 * parseArgs reads such a value as an option, so the pair is joined (`--arg=-fsS`) first. A value
 * that looks like a long option (`--cwd --every`) stays an error — a forgotten value — except for
 * an option with `multiple` (`--arg --verbose`, `--extra-arg --yolo`): arguments handed on verbatim.
 * Nothing after `--` is touched.
 */
function withDashValues(spec: CommandSpec, argv: string[]): string[] {
  const byShort = new Map(Object.entries(spec.options).flatMap(([name, o]) => (o.short ? [[o.short, name] as const] : [])));
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    out.push(arg);
    if (arg === '--') {
      out.push(...argv.slice(i + 1));
      break;
    }
    const name = /^--([^=]+)$/.exec(arg)?.[1] ?? (/^-([^-])$/.test(arg) ? byShort.get(arg[1]!) : undefined);
    const o = name === undefined ? undefined : spec.options[name];
    const next = argv[i + 1];
    if (o?.type !== 'string' || next === undefined || !next.startsWith('-') || next === '-' || next === '--') continue;
    if (next.startsWith('--') && !o.multiple) continue;
    out[out.length - 1] = `--${name}=${next}`;
    i += 1;
  }
  return out;
}

function translate(spec: CommandSpec, error: Error & { code?: string }, argv: string[]): UsageError {
  const message = error.message;
  const flag = /'(-{1,2}[^'\s]+)/.exec(message)?.[1];
  switch (error.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION': {
      const known = Object.keys(spec.options).map((o) => `--${o}`);
      const near = flag ? known.filter((k) => similar(k, flag)) : [];
      return new UsageError(`loops ${spec.name}: unknown option ${flag === undefined ? '' : shownFlag(flag)}`.trim(), {
        hint: near.length ? `did you mean ${near.join(' or ')}?` : `see loops ${spec.name} --help`,
      });
    }
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE': {
      const name = flag?.replace(/^-+/, '') ?? '';
      const o = spec.options[name] ?? Object.values(spec.options).find((x) => x.short === name);
      if (o?.type === 'boolean') return new UsageError(`loops ${spec.name}: ${shownFlag(flag!)} does not take a value`);
      // A value that starts with a dash (-1, -5s) is read as an option: say so, and how to write it.
      const next = flag ? argv[argv.indexOf(flag) + 1] : undefined;
      if (flag && next !== undefined && /^-[^-]/.test(next)) {
        return new UsageError(`loops ${spec.name}: ${flag} ${shownFlag(next)}: a value starting with "-" reads as an option`, {
          hint: next.length <= 80 ? `write ${flag}=${next} to pass it as the value` : `write ${flag}=<value> to pass it as the value`,
        });
      }
      return new UsageError(`loops ${spec.name}: ${flag === undefined ? 'an option' : shownFlag(flag)} needs a value`, {
        hint: o ? `write ${flag} ${o.value ?? '<value>'}` : `see loops ${spec.name} --help`,
      });
    }
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return new UsageError(`loops ${spec.name}: unexpected argument`, { hint: `see loops ${spec.name} --help` });
    default:
      return new UsageError(`loops ${spec.name}: ${message.length <= 200 ? message : `${message.slice(0, 200)}…`}`, { hint: `see loops ${spec.name} --help` });
  }
}

/** A flag or a flag-like value as typed, or its start and length when it is too long to repeat. */
function shownFlag(text: string): string {
  return text.length <= 80 ? text : shownRef(text);
}

export function similar(a: string, b: string): boolean {
  if (a.startsWith(b) || b.startsWith(a)) return true;
  // The distance is at least the difference in length: a long word is compared with nothing.
  return Math.abs(a.length - b.length) <= 2 && distance(a, b) <= 2;
}

export function usageLine(spec: CommandSpec): string {
  const pos = spec.positionals.map((p) => (p.required ? `<${p.name}>` : `[${p.name}]`) + (p.variadic ? '...' : ''));
  return ['loops', spec.name, ...pos, Object.keys(spec.options).length ? '[options]' : ''].filter(Boolean).join(' ');
}

export function helpText(spec: CommandSpec): string {
  const lines = [`Usage: ${usageLine(spec)}`, '', spec.summary];
  if (spec.description) lines.push('', spec.description);
  if (spec.positionals.length) {
    lines.push('', 'Arguments:');
    for (const p of spec.positionals) lines.push(`  ${pad(p.name, 24)}${p.description}`);
  }
  const opts = Object.entries({ ...spec.options, help: HELP_OPTION });
  lines.push('', 'Options:');
  const jTaken = opts.some(([, o]) => o.short === 'j');
  for (const [name, o] of opts) {
    const short = o.short ?? (name === 'json' && !jTaken ? 'j' : undefined);
    const left = `${short ? `-${short}, ` : '    '}--${name}${o.type === 'string' ? ` ${o.value ?? '<value>'}` : ''}`;
    lines.push(`  ${pad(left, 30)}${o.description}${o.multiple ? ' (repeatable)' : ''}`);
  }
  if (spec.examples?.length) {
    lines.push('', 'Examples:');
    for (const e of spec.examples) lines.push(`  ${e}`);
  }
  return lines.join('\n') + '\n';
}

function pad(text: string, width: number): string {
  return text.length >= width ? `${text}  ` : text + ' '.repeat(width - text.length);
}

/** Reads a positive integer flag. */
export function intOption(spec: CommandSpec, name: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (typeof value !== 'string' || !/^\d+$/.test(value) || n <= 0) {
    throw new UsageError(`loops ${spec.name}: --${name} must be a positive whole number, got ${typeof value === 'string' ? shownRef(value) : JSON.stringify(value)}`);
  }
  return n;
}
