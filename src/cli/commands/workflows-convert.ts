/**
 * `loops workflows convert <file> [--out FILE]`: a spec file (the predecessor's JSON shape, or
 * native) written in the native form, where how steps run is the file's explicit choice
 * (src/runtime/workflows/convert.ts). Nothing is stored: the output is a file to read, edit and
 * give to `loops workflows create`.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { extname } from 'node:path';
import { UsageError } from '../../events/errors.js';
import type { CommandSpec } from '../args.js';
import type { CliCommand } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { NAME_OPTION, nameOverride } from './workflows.js';

const convertSpec: CommandSpec = {
  name: 'workflows convert',
  summary: "Write a spec file (the predecessor's JSON shape, or native) in the native form, YAML by default.",
  description: [
    "A predecessor-shape file ran one step at a time and stopped at the first failure: the converted",
    'file says so (execution: sequential, continue-on-error where the file had continueOnFailure), with',
    'a comment on how to let independent steps run at once (execution: parallel). The output is checked',
    'before it is written: read back, it gives the same spec as the source. Prints to stdout, or writes',
    '--out FILE (never over an existing file unless --force); a .json --out writes JSON (no comment).',
  ].join('\n'),
  positionals: [{ name: 'file', required: true, description: 'the spec file (.json, .yaml or .yml)' }],
  options: {
    out: { type: 'string', short: 'o', value: '<file>', description: 'write the result to this file instead of stdout' },
    format: { type: 'string', value: '<yaml|json>', description: 'output format (default: json for an --out ending in .json, else yaml)' },
    force: { type: 'boolean', description: 'overwrite --out when it exists' },
    name: NAME_OPTION,
  },
  examples: ['loops workflows convert repo-morning.json', 'loops workflows convert repo-morning.json --out repo-morning.yaml', 'loops workflows create repo-morning.yaml'],
};

const convert: CliCommand = {
  spec: convertSpec,
  async run({ positionals, values }, ctx) {
    const file = positionals[0]!;
    const name = nameOverride('workflows convert', values.name);
    const out = typeof values.out === 'string' ? values.out : null;
    const format = values.format === undefined ? (out !== null && extname(out).toLowerCase() === '.json' ? 'json' : 'yaml') : String(values.format);
    if (format !== 'yaml' && format !== 'json') {
      throw new UsageError(`loops workflows convert: --format ${JSON.stringify(format)} is not yaml or json`, { hint: 'use --format yaml (the default) or --format json' });
    }
    if (out !== null && existsSync(out) && values.force !== true) {
      throw new UsageError(`loops workflows convert: ${out} already exists`, { hint: 'choose another --out, or add --force to overwrite it' });
    }
    const { convertWorkflowFile } = await import('../../runtime/workflows/convert.js');
    const converted = convertWorkflowFile(file, { name, format, outFile: out });
    for (const warning of converted.source.warnings) ctx.err.write(`warning: ${warning}\n`);
    if (out === null) {
      ctx.out.write(converted.text);
      return EXIT.ok;
    }
    writeFileSync(out, converted.text, { mode: 0o644 });
    const how = converted.spec.execution === 'sequential' ? 'execution: sequential, one step at a time' : 'independent steps at once';
    ctx.err.write(`wrote ${out} (${format}, ${converted.spec.steps.length} step${converted.spec.steps.length === 1 ? '' : 's'}, ${how})\n`);
    return EXIT.ok;
  },
};

export const commands: Record<string, CliCommand> = { 'workflows convert': convert };
