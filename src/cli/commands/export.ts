import { resolve } from 'node:path';
import { UsageError } from '../../events/errors.js';
import { parseDuration } from '../../events/durations.js';
import { SqliteEventLog } from '../../events/sqlite-log.js';
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

/** `--since`: an ISO time, or a duration back from now. */
function sinceOption(value: unknown, now: number): string | null {
  if (typeof value !== 'string') return null;
  if (/^\d{4}-\d{2}-\d{2}/.test(value)) {
    const ms = Date.parse(value);
    if (Number.isNaN(ms)) throw new UsageError(`loops export: --since ${JSON.stringify(value)} is not an ISO-8601 time`, { hint: 'e.g. --since 2026-12-01T00:00:00Z, or a duration: --since 7d' });
    return new Date(ms).toISOString();
  }
  return new Date(now - parseDuration(value, '--since', Infinity)).toISOString();
}

const exportCommand: CliCommand = {
  spec: exportSpec,
  async run({ positionals, values }, ctx: CliContext) {
    const now = ctx.clock.now();
    const since = sinceOption(values.since, now);
    const html = values.html === true;
    const reader = await openReader(ctx.dataDir);
    try {
      const { bundleLines, collectBundle, writeBundleFile } = await import('../../runtime/admin/bundle.js');
      const bundle = await collectBundle(reader.db, new SqliteEventLog(reader.db, { handlers: [] }), ctx.dataDir, positionals[0]!, { since, now: new Date(now).toISOString() });
      const output = typeof values.output === 'string' ? values.output : `${bundle.header.subject.id}.loops-bundle.${html ? 'html' : 'jsonl'}`;
      const lines = html ? [(await import('../../runtime/admin/bundle-html.js')).renderBundleHtml(bundle)] : [...bundleLines(bundle)];
      if (output === '-') {
        for (const line of lines) ctx.out.write(`${line}\n`);
        return EXIT.ok;
      }
      const file = resolve(output);
      writeBundleFile(file, lines);
      const { subject, streams, masked } = bundle.header;
      const summary = {
        file,
        format: html ? 'html' : 'bundle',
        subject,
        streams: streams.length,
        events: streams.reduce((n, s) => n + s.events, 0),
        files: bundle.entries.filter((e) => e.kind === 'file').length,
        masked,
        ...(html ? {} : { head: JSON.parse(lines[lines.length - 1]!).head as string }),
      };
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
