/**
 * `loops store copy`: a log copied between stores — this data directory's SQLite database into a
 * PostgreSQL schema, or back — verbatim, in one transaction, then verified
 * (src/runtime/admin/store-copy.ts).
 */
import { UsageError } from '../../events/errors.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { paint, printJson } from '../render.js';
import type { StoreCopyReport } from '../../runtime/admin/store-copy.js';

const copySpec: CommandSpec = {
  name: 'store copy',
  summary: 'Copy a log into another store (SQLite into PostgreSQL, or back), verbatim and verified.',
  description: [
    "Copies every event as it is stored (its position, stream, version, type, data, meta, time and",
    "state), every stream's row (kind, machine, archived history) and the lease table, from the store",
    'this data directory uses (or --from) into --to, in one transaction: interrupted or failing, it',
    'writes nothing. The destination must hold no log. Its projections are written with the events,',
    'as appends write them. Then verified: both logs read back and compared (counts and sha256 of',
    "events and stream rows), and the destination's tables against a rebuild from its log.",
    'Refused while a daemon runs on this data directory or on the source (stop it first).',
    'Exit 0 when everything matches, 6 when the copy differs (the source is untouched), 2 for a',
    'refusal or a bad store. Passwords in URLs are used, never shown or stored (PGPASSWORD works too).',
    '',
    'Stores: postgres://user@host:5432/database?schema=S (default schema loops); sqlite (this data',
    "directory's loops.db); sqlite:<file> (another SQLite file: a new one, or a loops database with no",
    'events). Archive files (archive/) and run output (runs/) stay in the data directory.',
  ].join('\n'),
  positionals: [],
  options: {
    to: { type: 'string', value: '<store>', description: 'where to copy the log: postgres://…?schema=S, sqlite or sqlite:<file>' },
    from: { type: 'string', value: '<store>', description: 'where to copy it from (default: the store this data directory uses)' },
    switch: { type: 'boolean', description: 'once verified, make this data directory use the destination (store.json)' },
    json: JSON_OPTION,
  },
  examples: [
    "loops daemon stop && loops store copy --to 'postgres://loops@db.internal:5432/ops?schema=team' --switch && loops daemon start",
    "loops store copy --to 'postgres://loops@db.internal:5432/ops?schema=team'",
    'loops store copy --to sqlite:/backups/fleet-copy.db',
    'loops store copy --to sqlite --switch            # a data directory on the fleet back onto its own loops.db',
  ],
};

const copyCommand: CliCommand = {
  spec: copySpec,
  async run({ values }, ctx) {
    const to = values.to;
    if (typeof to !== 'string' || to.trim() === '') {
      throw new UsageError('loops store copy: missing --to <store>', { hint: "e.g. --to 'postgres://user@host:5432/database?schema=loops', or --to sqlite" });
    }
    const { copyStore } = await import('../../runtime/admin/store-copy.js');
    const report = await copyStore(ctx.dataDir, {
      to,
      ...(typeof values.from === 'string' ? { from: values.from } : {}),
      switch: values.switch === true,
      nowMs: ctx.clock.now(),
    });
    if (ctx.json) printJson(ctx, report);
    else printReport(ctx, report);
    if (!report.ok) {
      ctx.err.write(`loops store copy: ${report.next.join('; ')}\n`);
      return EXIT.mismatch;
    }
    return EXIT.ok;
  },
};

function printReport(ctx: CliContext, r: StoreCopyReport): void {
  const mark = (ok: boolean) => (ok ? paint(ctx.color, 'green', 'ok') : paint(ctx.color, 'red', 'differs'));
  ctx.out.write(
    `Copied ${r.events} event(s) of ${r.streams} stream(s) and ${r.leases} lease(s) from ${r.from.store} to ${r.to.store} in ${(r.elapsedMs / 1000).toFixed(1)} s (head ${r.head}).\n`,
  );
  ctx.out.write(`${mark(r.verified.events)}  events: ${r.source.events} in the source, ${r.destination.events} in the copy, sha256 ${r.source.sha256.slice(0, 16)}… / ${r.destination.sha256.slice(0, 16)}…\n`);
  ctx.out.write(`${mark(r.verified.streams)}  streams: ${r.source.streams} in the source, ${r.destination.streams} in the copy\n`);
  const tables = r.projections.tables;
  const differing = tables.filter((t) => t.differences.length > 0);
  ctx.out.write(`${mark(r.verified.projections)}  projections: ${tables.length} table(s) compared with a rebuild from the copy's ${r.projections.events} event(s)${differing.length ? `, ${differing.length} differ` : ''}\n`);
  for (const t of differing) for (const d of t.differences) ctx.out.write(`    ${d}\n`);
  if (r.ok) for (const line of r.next) ctx.out.write(`${r.switched ? '' : 'Next: '}${line}\n`);
}

export const commands: Record<string, CliCommand> = { 'store copy': copyCommand };
