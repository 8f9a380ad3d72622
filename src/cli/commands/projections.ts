import { rebuildProjections, verifyProjections } from '../../runtime/admin/projections.js';
import { openReader } from '../../runtime/store.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { chooseStore } from '../../runtime/store-choice.js';
import { EXIT } from '../exit-codes.js';
import { paint, printJson } from '../render.js';

const rebuild: CliCommand = {
  spec: {
    name: 'projections rebuild',
    summary: 'Drop every projection table (loops, loop_runs) and rebuild it from the event log.',
    description: [
      "On a PostgreSQL store (docs/scaling.md): PostgreSQL's tables, rebuilt from its log in one",
      "transaction under the log's head lock (every host's writes wait for it, none is lost), then",
      "this host's replica from the events it copied; --json: {postgres, replica}.",
    ].join('\n'),
    positionals: [],
    options: { json: JSON_OPTION },
  },
  async run(_parsed, ctx) {
    const choice = chooseStore(process.env, ctx.dataDir);
    if (choice.kind === 'postgres') {
      const { openPgParts } = await import('../../runtime/pg-store.js');
      const parts = await openPgParts(ctx.dataDir, choice, { follow: false });
      try {
        const postgres = await parts.store.rebuildProjections();
        const replica = rebuildProjections(parts.db);
        if (ctx.json) printJson(ctx, { postgres, replica });
        else {
          printRebuilt(ctx, postgres, `PostgreSQL ${choice.where} (schema ${choice.schema}): `);
          printRebuilt(ctx, replica, 'replica on this host: ');
        }
        return EXIT.ok;
      } finally {
        parts.close();
        await parts.store.end();
      }
    }
    const reader = await openReader(ctx.dataDir);
    try {
      const result = rebuildProjections(reader.db);
      if (ctx.json) printJson(ctx, result);
      else printRebuilt(ctx, result, '');
      return EXIT.ok;
    } finally {
      reader.close();
    }
  },
};

function printRebuilt(ctx: CliContext, result: { projections: ReadonlyArray<string>; events: number; rows: Record<string, number> }, prefix: string): void {
  const rows = Object.entries(result.rows).map(([t, n]) => `${t}: ${n} row(s)`).join(', ');
  ctx.out.write(`${prefix}Rebuilt ${result.projections.join(', ')} from ${result.events} event(s): ${rows}\n`);
}

const verify: CliCommand = {
  spec: {
    name: 'projections verify',
    summary: 'Rebuild every projection into a scratch database and compare it with the live tables.',
    description: [
      'Exit code 0 when they are identical, 6 with a short diff otherwise (fix with loops projections rebuild).',
      "On a PostgreSQL store (docs/scaling.md): PostgreSQL's tables against a rebuild from its log, and this",
      "host's replica against a rebuild from the events it copied; --json: {ok, postgres, replica}.",
    ].join('\n'),
    positionals: [],
    options: { json: JSON_OPTION },
  },
  async run(_parsed, ctx) {
    const choice = chooseStore(process.env, ctx.dataDir);
    if (choice.kind === 'postgres') {
      const { openPgParts } = await import('../../runtime/pg-store.js');
      const parts = await openPgParts(ctx.dataDir, choice, { follow: false });
      try {
        const postgres = await parts.store.verifyProjections();
        const replica = verifyProjections(parts.db);
        const ok = postgres.ok && replica.ok;
        if (ctx.json) printJson(ctx, { ok, postgres, replica });
        else {
          printVerify(ctx, postgres, `PostgreSQL ${choice.where} (schema ${choice.schema}): `);
          printVerify(ctx, replica, 'replica on this host: ');
        }
        return ok ? EXIT.ok : mismatch(ctx);
      } finally {
        parts.close();
        await parts.store.end();
      }
    }
    const reader = await openReader(ctx.dataDir);
    try {
      const result = verifyProjections(reader.db);
      if (ctx.json) printJson(ctx, result);
      else printVerify(ctx, result, '');
      return result.ok ? EXIT.ok : mismatch(ctx);
    } finally {
      reader.close();
    }
  },
};

function mismatch(ctx: CliContext): number {
  ctx.err.write('loops: projections differ from the log (loops projections rebuild restores them)\n');
  return EXIT.mismatch;
}

function printVerify(ctx: CliContext, result: { events: number; tables: ReadonlyArray<{ table: string; liveRows: number; rebuiltRows: number; differences: ReadonlyArray<string> }> }, prefix: string): void {
  for (const t of result.tables) {
    const ok = t.differences.length === 0;
    ctx.out.write(`${ok ? paint(ctx.color, 'green', 'ok') : paint(ctx.color, 'red', 'differs')}  ${prefix}${t.table}: ${t.liveRows} live row(s), ${t.rebuiltRows} rebuilt from ${result.events} event(s)\n`);
    for (const d of t.differences) ctx.out.write(`    ${d}\n`);
  }
}

export const commands: Record<string, CliCommand> = { 'projections rebuild': rebuild, 'projections verify': verify };
