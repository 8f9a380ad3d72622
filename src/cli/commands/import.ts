import { importHasnaLoops, type ImportReport, type ImportRow } from '../../runtime/admin/import-hasna.js';
import { openRuntime } from '../../runtime/runtime.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { paint, printJson, table } from '../render.js';

const spec: CommandSpec = {
  name: 'import hasna-loops',
  summary: 'Bring the loops, workflows and (--with-history) runs of @hasna/loops across.',
  description: [
    'Reads the predecessor\'s database read-only (default ~/.hasna/loops/loops.db) and records',
    'everything that can come across in one transaction: all of it, or nothing on any error. Each',
    'record keeps its id behind loops\' prefix (loop 310a5c22ffcc becomes loop_310a5c22ffcc) and is',
    'marked as imported in the log, so a second import changes nothing. A table says what came',
    'across and what did not, and why; a name already taken here is refused (--prefix renames).',
    'Imported loops keep the predecessor\'s effective settings explicitly (30-minute default',
    'timeout, constant retry delay, cron in this machine\'s zone); see docs/migrating.md.',
    'Refused while the predecessor\'s daemon holds its lease: stop it first.',
    'Exit 0 when every record came across (or was there already), 1 when some did not.',
  ].join('\n'),
  positionals: [],
  options: {
    db: { type: 'string', value: '<path>', description: "the predecessor's database (default ~/.hasna/loops/loops.db)" },
    'with-history': { type: 'boolean', description: 'also bring finished loop runs and workflow runs across, as imported history' },
    'dry-run': { type: 'boolean', description: 'show what would come across; write nothing' },
    prefix: { type: 'string', value: '<text>', description: 'put before every imported loop and workflow name (e.g. old-)' },
    json: JSON_OPTION,
  },
  examples: ['loops import hasna-loops --dry-run', 'loops import hasna-loops --with-history', 'loops import hasna-loops --db /srv/old/loops.db --prefix old-'],
};

const importCommand: CliCommand = {
  spec,
  async run({ values }, ctx) {
    const runtime = await openRuntime({ dataDir: ctx.dataDir, clock: ctx.clock });
    let report: ImportReport;
    try {
      report = await importHasnaLoops(runtime, {
        ...(typeof values.db === 'string' ? { db: values.db } : {}),
        dryRun: values['dry-run'] === true,
        withHistory: values['with-history'] === true,
        ...(typeof values.prefix === 'string' ? { prefix: values.prefix } : {}),
      });
    } finally {
      runtime.close();
    }
    const refused = report.rows.filter((r) => r.outcome === 'not imported').length;
    if (ctx.json) {
      printJson(ctx, report);
      return refused ? EXIT.error : EXIT.ok;
    }
    const c = ctx.color;
    const color = (r: ImportRow) => (r.outcome === 'imported' ? 'green' : r.outcome === 'not imported' ? 'red' : 'dim');
    const verb = report.dryRun ? 'would import' : 'imported';
    ctx.out.write(`${report.dryRun ? 'dry run: nothing written. ' : ''}${report.tool} database ${report.db}\n`);
    if (report.rows.length) {
      ctx.out.write(
        table(
          ['KIND', 'NAME', 'FROM', 'ID HERE', 'RESULT', 'NOTES'],
          report.rows.map((r) => [
            r.kind,
            r.name,
            r.sourceId,
            r.id,
            paint(c, color(r), r.outcome === 'imported' && report.dryRun ? 'would import' : r.outcome),
            r.notes.join('; '),
          ]),
          c,
        ),
      );
    }
    const total = (kind: ImportRow['kind']) => report.counts[kind];
    const parts = (['loop', 'workflow', 'run', 'workflow run'] as const)
      .filter((k) => k !== 'run' && k !== 'workflow run' ? true : report.withHistory)
      .map((k) => `${total(k).imported} ${k}${total(k).imported === 1 ? '' : 's'}`);
    const already = report.rows.filter((r) => r.outcome === 'already imported').length;
    const nothing = report.rows.every((r) => r.outcome !== 'imported');
    if (nothing && !refused) ctx.out.write(`nothing to import: ${already ? `all ${already} records were imported before` : 'the database holds no loops or workflows'}\n`);
    else ctx.out.write(`${verb} ${parts.join(', ')}${already ? `; ${already} already imported` : ''}${refused ? `; ${refused} not imported (see NOTES)` : ''}${report.dryRun ? '' : ` (${report.events} events)`}\n`);
    if (!report.withHistory && report.rows.length) ctx.out.write('runs stay behind: --with-history brings them across\n');
    return refused ? EXIT.error : EXIT.ok;
  },
};

export const commands: Record<string, CliCommand> = { 'import hasna-loops': importCommand };
