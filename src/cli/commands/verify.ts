import { findViolations } from '../../runtime/admin/invariants.js';
import { SqliteEventLog } from '../../events/sqlite-log.js';
import { openReader } from '../../runtime/store.js';
import { JSON_OPTION } from '../args.js';
import type { CliCommand } from '../context.js';
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
    ].join('\n'),
    positionals: [],
    options: {
      json: JSON_OPTION,
      processes: { type: 'boolean', description: 'also check that no process a run or step started is still alive (use when nothing runs)' },
    },
    examples: ['loops verify', 'loops daemon stop && loops verify --processes'],
  },
  async run({ values }, ctx) {
    const reader = await openReader(ctx.dataDir);
    try {
      const events = reader.db.prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM events').get()!.n;
      const streams = reader.db.prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM streams').get()!.n;
      const violations = findViolations(reader.db, new SqliteEventLog(reader.db, { handlers: [] }), { processes: values.processes === true });
      if (ctx.json) printJson(ctx, { ok: violations.length === 0, events, streams, violations });
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

export const commands: Record<string, CliCommand> = { verify };
