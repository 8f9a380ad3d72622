import { verifyLog } from '../../runtime/admin/verify-log.js';
import { openReader } from '../../runtime/store.js';
import { JSON_OPTION } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { UsageError } from '../../events/errors.js';
import { EXIT } from '../exit-codes.js';
import { paint, printJson } from '../render.js';

const verify: CliCommand = {
  spec: {
    name: 'verify',
    summary: "Check the log's invariants: file integrity, one run per slot, every stream replays, tables equal the log.",
    description: [
      'Reads the whole log; nothing is written. Checks, in order: SQLite integrity_check; each stream\'s',
      'versions are contiguous; at most one terminal event per run; one run per (loop, slot, attempt);',
      'no slot decided twice and every fired slot claimed, queued or recorded as dropped; every stream',
      'replays on the machine that wrote it; every snapshot equals a fold of the log; the projection',
      'tables equal a rebuild. With --processes, also that no process a run started is still alive',
      '(only meaningful when nothing runs). Exit 0 when all hold, 6 with one line per violation.',
      '',
      'With a file (a bundle loops export wrote), checks the bundle instead, needing no data directory:',
      'the sha256 chain and trailer, the versions of each stream, that replay reproduces every recorded',
      'state and context field, the step outputs and the output files. Exit 0 when it holds, 6 with one',
      'line per failed check (naming the line, and the stream, version and type of an event), 2 when the',
      'file is not a bundle. docs/audit.md says what it proves.',
    ].join('\n'),
    positionals: [{ name: 'bundle', required: false, description: 'a bundle file loops export wrote (default: check the data directory)' }],
    options: {
      json: JSON_OPTION,
      processes: { type: 'boolean', description: 'also check that no process a run or step started is still alive (use when nothing runs)' },
    },
    examples: ['loops verify', 'loops daemon stop && loops verify --processes', 'loops verify run_01m8pavs3mv5h5nscgtr49.loops-bundle.jsonl'],
  },
  async run({ positionals, values }, ctx) {
    if (positionals[0] !== undefined) return verifyBundleFile(positionals[0], values.processes === true, ctx);
    const reader = await openReader(ctx.dataDir);
    try {
      const report = verifyLog(reader.db, { processes: values.processes === true });
      const { events, streams, violations } = report;
      if (ctx.json) printJson(ctx, report);
      else if (violations.length === 0) ctx.out.write(`${paint(ctx.color, 'green', 'ok')}  ${events} event(s) in ${streams} stream(s): every invariant holds\n`);
      else for (const v of violations) ctx.out.write(`${paint(ctx.color, 'red', 'violated')}  ${v}\n`);
      if (violations.length > 0) {
        ctx.err.write(`loops: ${violations.length} invariant violation(s) (docs/RELIABILITY.md says what each means; loops projections rebuild repairs the tables, nothing repairs the log)\n`);
        return EXIT.mismatch;
      }
      return EXIT.ok;
    } finally {
      reader.close();
    }
  },
};

/** `loops verify <bundle>`: the bundle alone, no data directory opened. */
async function verifyBundleFile(file: string, processes: boolean, ctx: CliContext): Promise<number> {
  if (processes) throw new UsageError('loops verify: --processes checks a data directory, not a bundle', { hint: 'drop --processes, or the file' });
  const { verifyBundle } = await import('../../runtime/admin/bundle-verify.js');
  const report = verifyBundle(file);
  if (ctx.json) printJson(ctx, report);
  else if (report.ok) {
    const unchecked = report.uncheckedFields ? `; ${report.uncheckedFields} context field(s) masking changed were not hash-checked` : '';
    ctx.out.write(
      `${paint(ctx.color, 'green', 'ok')}  ${file}: ${report.subject.kind} ${report.subject.id}, ${report.events} event(s) in ${report.streams} stream(s), ${report.files} output file(s): the chain holds and replay reproduces every recorded state${unchecked}\n` +
        `head ${report.head}\n`,
    );
  } else for (const p of report.problems) ctx.out.write(`${paint(ctx.color, 'red', 'failed')}  ${p}\n`);
  if (!report.ok) {
    ctx.err.write(`loops: ${file}: ${report.problems.length} failed check(s); first: ${report.problems[0]}\n`);
    return EXIT.mismatch;
  }
  return EXIT.ok;
}

export const commands: Record<string, CliCommand> = { verify };
