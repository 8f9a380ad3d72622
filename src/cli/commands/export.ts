import { openReader } from '../../runtime/store.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { printJson } from '../render.js';

const exportSpec: CommandSpec = {
  name: 'export',
  summary: 'Write an audit bundle of a run, a workflow run or a loop: its events, outputs and output files, chained by sha256.',
  description: [
    'A bundle is one JSON Lines file: a header (format, loops version, subject, every stream with the',
    'machine that wrote it, the workflow spec versions and loop definition events), then each stream\'s',
    'events, the step outputs and the output files (runs/<id>/…), each line carrying prev and hash =',
    'sha256(prev + canonical JSON), then a trailer (count, head hash). Secret values are masked (***).',
    'A loop brings its own stream and its runs (and their workflow runs) claimed since --since.',
    'loops verify <bundle> checks it anywhere, without a data directory. --html writes one',
    'self-contained page instead: the timeline, the events and a slider over the states.',
    'docs/audit.md says what a bundle proves and what it does not.',
  ].join('\n'),
  positionals: [{ name: 'run-or-loop', required: true, description: 'a run or workflow run id (or unique prefix), or a loop name or id' }],
  options: {
    since: { type: 'string', value: '<ISO|duration>', description: "a loop's runs claimed at or after this time (2026-12-01T00:00:00Z, or 7d ago)" },
    output: { type: 'string', short: 'o', value: '<file>', description: 'where to write (default <id>.loops-bundle.jsonl, or .html; - for stdout)' },
    html: { type: 'boolean', description: 'write a self-contained HTML page (timeline, events, states) instead of the bundle' },
    json: JSON_OPTION,
  },
  examples: ['loops export run_01m8pavs3mv5h5nscgtr49', 'loops export backup --since 7d -o backup-week.jsonl', 'loops export wfrun_01m8pb2k4x --html -o run.html', 'loops verify backup-week.jsonl'],
};

const exportCommand: CliCommand = {
  spec: exportSpec,
  async run({ positionals, values }, ctx: CliContext) {
    const reader = await openReader(ctx.dataDir);
    try {
      const { exportBundle } = await import('../../runtime/admin/export-bundle.js');
      const result = await exportBundle(reader.db, ctx.dataDir, positionals[0]!, {
        since: typeof values.since === 'string' ? values.since : null,
        output: typeof values.output === 'string' ? values.output : null,
        html: values.html === true,
        now: ctx.clock.now(),
      });
      if (result.kind === 'lines') {
        for (const line of result.lines) ctx.out.write(`${line}\n`);
        return EXIT.ok;
      }
      const { output, summary } = result;
      const { file, masked } = summary;
      const html = summary.format === 'html';
      if (ctx.json) printJson(ctx, summary);
      else {
        ctx.out.write(`Wrote ${file}: ${summary.events} event(s) of ${summary.streams} stream(s), ${summary.files} output file(s)${masked.secrets ? `, ${masked.secrets} secret value(s) masked` : ''}\n`);
        if (!html) ctx.out.write(`head ${summary.head}  (loops verify ${output} checks it; keep this hash elsewhere to prove the file unchanged)\n`);
      }
      return EXIT.ok;
    } finally {
      reader.close();
    }
  },
};

export const commands: Record<string, CliCommand> = { export: exportCommand };
