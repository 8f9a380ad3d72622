import { rebuildProjections, verifyProjections } from '../../runtime/admin/projections.js';
import { openReader } from '../../runtime/store.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { paint, printJson } from '../render.js';

const rebuild: CliCommand = {
  spec: {
    name: 'projections rebuild',
    summary: 'Drop every projection table (loops, loop_runs) and rebuild it from the event log.',
    positionals: [],
    options: { json: JSON_OPTION },
  },
  async run(_parsed, ctx) {
    const reader = await openReader(ctx.dataDir);
    try {
      const result = rebuildProjections(reader.db);
      if (ctx.json) printJson(ctx, result);
      else {
        const rows = Object.entries(result.rows).map(([t, n]) => `${t}: ${n} row(s)`).join(', ');
        ctx.out.write(`Rebuilt ${result.projections.join(', ')} from ${result.events} event(s): ${rows}\n`);
      }
      return EXIT.ok;
    } finally {
      reader.close();
    }
  },
};

const verify: CliCommand = {
  spec: {
    name: 'projections verify',
    summary: 'Rebuild every projection into a scratch database and compare it with the live tables.',
    description: 'Exit code 0 when they are identical, 6 with a short diff otherwise (fix with loops projections rebuild).',
    positionals: [],
    options: { json: JSON_OPTION },
  },
  async run(_parsed, ctx) {
    const reader = await openReader(ctx.dataDir);
    try {
      const result = verifyProjections(reader.db);
      if (ctx.json) printJson(ctx, result);
      else {
        for (const t of result.tables) {
          const ok = t.differences.length === 0;
          ctx.out.write(
            `${ok ? paint(ctx.color, 'green', 'ok') : paint(ctx.color, 'red', 'differs')}  ${t.table}: ${t.liveRows} live row(s), ${t.rebuiltRows} rebuilt from ${result.events} event(s)\n`,
          );
          for (const d of t.differences) ctx.out.write(`    ${d}\n`);
        }
      }
      if (!result.ok) {
        ctx.err.write('loops: projections differ from the log (loops projections rebuild restores them)\n');
        return EXIT.mismatch;
      }
      return EXIT.ok;
    } finally {
      reader.close();
    }
  },
};

export const commands: Record<string, CliCommand> = { 'projections rebuild': rebuild, 'projections verify': verify };
