import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { printJson } from '../render.js';
import { bytesText } from './prune.js';

const backupSpec: CommandSpec = {
  name: 'backup',
  summary: 'Write a consistent copy of the log and its tables to a new file, while the daemon runs.',
  description: [
    'One read transaction (VACUUM INTO): a snapshot of loops.db as of that instant, compacted, written',
    '0600 to a file that must not exist yet, then checked (integrity, log format, events). The daemon',
    'goes on writing meanwhile. Not in it: archive files (archive/) and run output folders (runs/) —',
    'copy those with it if you keep them. loops restore puts a backup back.',
  ].join('\n'),
  positionals: [{ name: 'file', required: true, description: 'the new file to write' }],
  options: { json: JSON_OPTION },
  examples: ['loops backup ~/backups/loops-$(date +%F).db'],
};

const restoreSpec: CommandSpec = {
  name: 'restore',
  summary: "Put a backup in place of the data directory's database, after checking it.",
  description: [
    'Checks the file first (integrity, a log format this loops reads, an event log in it), and refuses',
    'to replace a live store: not while a daemon runs, and not over a database that holds events unless',
    '--force (the current one is then kept as loops.db.before-restore-<time>, never deleted). The copy',
    'is fsynced and renamed into place; the tables are rebuilt from the restored log if they differ.',
  ].join('\n'),
  positionals: [{ name: 'file', required: true, description: 'a file loops backup wrote' }],
  options: {
    force: { type: 'boolean', description: 'restore over a database that holds events (it is kept beside, renamed)' },
    json: JSON_OPTION,
  },
  examples: ['LOOPS_DATA_DIR=~/.loops-restored loops restore ~/backups/loops-2026-12-01.db'],
};

const backupCommand: CliCommand = {
  spec: backupSpec,
  async run({ positionals }, ctx) {
    const { backup } = await import('../../runtime/admin/backup.js');
    const report = await backup(ctx.dataDir, positionals[0]!);
    if (ctx.json) printJson(ctx, report);
    else ctx.out.write(`Backed up ${report.events} events to ${report.file} (${bytesText(report.bytes)}, log format ${report.format}, integrity ok).\n`);
    return EXIT.ok;
  },
};

const restoreCommand: CliCommand = {
  spec: restoreSpec,
  async run({ positionals, values }, ctx) {
    const { restore } = await import('../../runtime/admin/backup.js');
    const report = await restore(ctx.dataDir, positionals[0]!, { force: values.force === true, now: ctx.now });
    if (ctx.json) printJson(ctx, report);
    else {
      ctx.out.write(`Restored ${report.events} events from ${report.file} into ${ctx.dataDir} (log format ${report.format}).\n`);
      if (report.replaced) ctx.out.write(`The database it replaced is kept as ${report.replaced}.\n`);
      if (report.rebuilt) ctx.out.write('The tables differed from the restored log and were rebuilt from it.\n');
    }
    return EXIT.ok;
  },
};

export const commands: Record<string, CliCommand> = { backup: backupCommand, restore: restoreCommand };
