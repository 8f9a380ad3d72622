import type { SpaceReport } from '../../events/types.js';
import type { ArchiveReport } from '../../runtime/admin/archive.js';
import type { PruneReport } from '../../runtime/admin/prune.js';
import type { PruneOutcome } from '../../runtime/admin/prune-request.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { paint, printJson, statusColor, table, when } from '../render.js';

const spec: CommandSpec = {
  name: 'prune',
  summary: 'Remove the output folders of finished runs (older than a cutoff, beyond the last N per loop).',
  description: [
    'Removes runs/<runId>/ of finished loop runs and runs/<wfRunId>/ of finished workflow runs: those',
    'finished before --older-than, except the --keep-last most recent finished runs of each loop and',
    'each workflow, whatever their age. A run still claimed, spawning or running, or holding a live lease,',
    'is never touched. Give --older-than, --keep-last or both: without them nothing is selected.',
    '',
    'Each removal is recorded in the log (stream retention:output) before the folder goes, so',
    'loops logs, show and runs --json say the output was pruned and when. The runs and their events',
    'stay; only the output files go. --dry-run lists what would go and removes nothing.',
    '',
    '--archive also moves the events of the selected finished runs (loop runs and workflow runs) out',
    'of the log, into a file under archive/ in the data directory (0600, its sha256 recorded): each',
    'run keeps its rows (status, exit, output tails, timings, steps) and one stream.archived event naming',
    'the file. loops show, runs, stats, why and workflows inspect read as before; loops replay <run>',
    '--archive replays the moved events from the file.',
    'A loops older than this one cannot open a data directory once something was archived in it.',
    '',
    'The space archived events held inside loops.db goes back to the disk as the archive ends, in',
    'small steps between the daemon\'s writes. A loops.db created before archiving existed only reuses',
    'it: --vacuum (the daemon stopped; alone or after a prune) rewrites it once and gives it all back,',
    'and later archives then give space back as they go.',
  ].join('\n'),
  positionals: [],
  options: {
    'older-than': {
      type: 'string',
      value: '<duration|time>',
      description: 'only runs finished before this: how long ago (30d, 12h; 0s = now) or an ISO time',
    },
    'keep-last': { type: 'string', value: '<n>', description: 'keep the n most recent finished runs of each loop and each workflow' },
    archive: { type: 'boolean', description: "also move the selected runs' events from the log to an archive file" },
    vacuum: { type: 'boolean', description: 'rewrite loops.db to give its free space back to the disk (the daemon must be stopped)' },
    'dry-run': { type: 'boolean', description: 'list what would be removed and the bytes; remove nothing, record nothing' },
    json: JSON_OPTION,
  },
  examples: [
    'loops prune --older-than 30d --dry-run',
    'loops prune --older-than 30d --keep-last 10',
    'loops prune --keep-last 5 --json',
    'loops prune --older-than 90d --archive',
    'loops daemon stop && loops prune --vacuum && loops daemon start',
  ],
};

const prune: CliCommand = {
  spec,
  async run({ values }, ctx) {
    const { runPrune } = await import('../../runtime/admin/prune-request.js');
    const { openRuntime } = await import('../../runtime/runtime.js');
    const runtime = await openRuntime({ dataDir: ctx.dataDir, clock: ctx.clock });
    let outcome: PruneOutcome;
    try {
      outcome = await runPrune(runtime, {
        olderThan: typeof values['older-than'] === 'string' ? values['older-than'] : null,
        keepLast: typeof values['keep-last'] === 'string' ? values['keep-last'] : null,
        archive: values.archive === true,
        vacuum: values.vacuum === true,
        dryRun: values['dry-run'] === true,
      }, ctx.now);
    } finally {
      runtime.close();
    }
    const { prune: report, archive: archived, vacuum: vacuumed } = outcome;
    if (report === null) {
      // --vacuum alone: the free space of loops.db back to the disk.
      if (ctx.json) printJson(ctx, { vacuum: vacuumed });
      else ctx.out.write(renderVacuum(vacuumed!));
      return EXIT.ok;
    }
    const code = report.failed.length > 0 ? EXIT.error : EXIT.ok;
    if (ctx.json) {
      printJson(ctx, { ...report, ...(archived ? { archive: archived } : {}), ...(vacuumed ? { vacuum: vacuumed } : {}) });
      return code;
    }
    ctx.out.write(render(report, ctx));
    if (archived) ctx.out.write(renderArchive(archived, ruleText(report), vacuumed !== null));
    if (vacuumed) ctx.out.write(renderVacuum(vacuumed));
    for (const f of report.failed) ctx.err.write(`loops prune: could not remove ${f.path}: ${f.error}\n`);
    if (report.failed.length > 0) {
      ctx.err.write(`loops prune: ${count(report.failed.length, 'folder')} not removed (recorded as pruned); fix the cause and run loops prune again to remove them\n`);
    }
    return code;
  },
};

function renderVacuum(space: SpaceReport): string {
  return `Vacuumed loops.db: ${bytesText(space.freedBytes)} given back to the disk; later archives give their space back as they go.\n`;
}

/** `finished before 2026-05-01T00:00:00.000Z, keeping the last 10 of each loop and workflow`. */
function ruleText(report: PruneReport): string {
  const parts: string[] = [];
  if (report.cutoff !== null) parts.push(`finished before ${report.cutoff}`);
  if (report.keepLast !== null) parts.push(`keeping the last ${report.keepLast} of each loop and workflow`);
  return parts.join(', ');
}

export function render(report: PruneReport, ctx: Pick<CliContext, 'now' | 'color' | 'out' | 'err'>): string {
  const lines: string[] = [];
  const loops = new Set(report.runs.filter((r) => r.kind === 'run').map((r) => r.ownerId)).size;
  const workflows = new Set(report.runs.filter((r) => r.kind === 'workflow').map((r) => r.ownerId)).size;
  const owners = [loops ? count(loops, 'loop') : null, workflows ? count(workflows, 'workflow') : null].filter(Boolean).join(', ');
  if (report.dryRun && report.runs.length > 0) {
    lines.push(
      table(
        ['RUN', 'LOOP / WORKFLOW', 'STATUS', 'FINISHED', 'SIZE', 'FOLDER'],
        report.runs.map((r) => [
          r.id,
          r.kind === 'workflow' ? `${r.ownerName} (workflow)` : r.ownerName,
          paint(ctx.color, statusColor(r.status), r.status),
          when(r.finishedAt, ctx),
          bytesText(r.bytes),
          r.path,
        ]),
        ctx.color,
      ).trimEnd(),
      '',
    );
  }
  const rule = ruleText(report);
  if (report.runs.length === 0 && report.completed.length === 0) {
    lines.push(`Nothing to prune: no finished run with output ${rule}.`);
  } else {
    const what = `${count(report.runs.length, 'run')}${owners ? ` (${owners})` : ''}`;
    const finishing = report.completed.length
      ? ` ${report.dryRun ? 'It would also remove' : 'Also removed'} ${count(report.completed.length, 'folder')} an earlier prune recorded but left behind.`
      : '';
    lines.push(
      report.dryRun
        ? `Would prune ${what}, ${rule}: ${bytesText(report.bytes)}.${finishing} Dry run: nothing was removed.`
        : `Pruned ${what}, ${rule}: ${bytesText(report.bytes)} freed.${finishing}${report.runs.length ? ' loops events retention:output lists them.' : ''}`,
    );
  }
  return lines.join('\n') + '\n';
}

/** What `--archive` moved (or would), and the space it gave back (or left inside loops.db). */
export function renderArchive(report: ArchiveReport, rule: string, vacuuming = false): string {
  const what = `${count(report.streams.length, 'run')} (${count(report.events, 'event')})`;
  const skipped = report.skipped.length
    ? ` ${count(report.skipped.length, 'run')} changed meanwhile and stayed in the log (the next archive retries them): ${report.skipped.map((s) => s.streamId).join(', ')}.`
    : '';
  if (report.dryRun) {
    return report.streams.length
      ? `Would archive the events of ${what}, ${rule}. Dry run: nothing was archived.\n`
      : `Nothing to archive: no finished run ${rule} still has its events in the log.\n`;
  }
  if (report.file === null) return `Nothing to archive: no finished run ${rule} still has its events in the log.\n`;
  const space = report.space;
  const disk =
    space === null || vacuuming
      ? ''
      : space.incremental
        ? `${bytesText(space.freedBytes)} of loops.db went back to the disk.\n`
        : space.freeBytes > 0
          ? `${bytesText(space.freeBytes)} are now free inside loops.db and are reused by new events; to give them back to the disk, once: loops daemon stop && loops prune --vacuum && loops daemon start (later archives then give space back as they go).\n`
          : '';
  return (
    `Archived the events of ${what} to ${report.file} (${bytesText(report.bytes)}, sha256 ${report.sha256!.slice(0, 12)}…).${skipped}\n` +
    `Their rows stay; loops replay <run> --archive replays their events from the file. Keep the file with your backups.\n` +
    disk
  );
}

function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

/** 512 → `512 B`; 1536 → `1.5 KiB`; 5 MiB → `5.0 MiB`. */
export function bytesText(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 * 1024 * 1024) return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  return `${(n / 1024 / 1024 / 1024).toFixed(2)} GiB`;
}

export const commands: Record<string, CliCommand> = { prune };
