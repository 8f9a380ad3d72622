/**
 * `loops diff <runA> <runB>`: where two runs of the same loop or workflow part ways
 * (src/runtime/admin/run-diff.ts). Exit codes as diff(1) and `git diff --exit-code`: 0 the same
 * shape, 1 they differ, 2 bad input (and 6 when either run's replay does not match its log).
 */
import { SqliteEventLog } from '../../events/sqlite-log.js';
import { divergenceError } from '../../runtime/admin/replay.js';
import { diffRuns, type RunDiff } from '../../runtime/admin/run-diff.js';
import { openReader } from '../../runtime/store.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { paint } from '../render.js';
import { changeText, stepLines, valueText } from '../replay-render.js';
import { resolveStream } from '../../runtime/queries/log-events.js';

const diffSpec: CommandSpec = {
  name: 'diff',
  summary: 'Replay two runs of the same loop or workflow side by side and show where they part ways.',
  description: [
    'Both runs are replayed from the log in lockstep; they part ways at the first transition with a',
    'different event type, a different state after it, or other context fields changed (compared by',
    "name, in order: ids and times always differ in value). Prints that transition in each run and the",
    'context fields that differ there.',
    '',
    'Exit code (as diff and git diff --exit-code): 0 the runs have the same shape, 1 they differ,',
    '2 bad input (an unknown run; runs of different loops or workflows without --force), 6 when a',
    "run's replay does not match its log.",
  ].join('\n'),
  positionals: [
    { name: 'runA', required: true, description: 'run or workflow run id (or unique prefix)' },
    { name: 'runB', required: true, description: 'another run of the same loop or workflow' },
  ],
  options: {
    force: { type: 'boolean', description: 'compare runs of different loops or workflows too' },
    json: JSON_OPTION,
  },
  examples: ['loops diff run_01m8pavs3m run_01m8pb2k4x', 'loops diff wfrun_01m8pb2k4x wfrun_01m8pc7q1z --json'],
};

function render(ctx: CliContext, diff: RunDiff): void {
  const c = ctx.color;
  const lines = [`${paint(c, 'bold', 'A')} ${diff.a.streamId}  ${paint(c, 'bold', 'B')} ${diff.b.streamId}  (${diff.a.owner}${diff.a.owner === diff.b.owner ? '' : ` / ${diff.b.owner}`})`];
  const d = diff.divergence;
  if (!d) {
    lines.push('', `${paint(c, 'green', 'same shape')}: ${diff.transitions} transition(s), the same event types, states and changed fields`);
  } else {
    const why = {
      type: 'a different event',
      state: 'a different state after it',
      fields: 'other context fields changed',
      length: `${d.a ? 'B' : 'A'} has no more events`,
    }[d.kind];
    lines.push('', `${paint(c, 'red', 'part ways')} at transition ${d.index}: ${why}`);
    for (const [name, step] of [['A', d.a], ['B', d.b]] as const) {
      lines.push('', paint(c, 'bold', `${name}:`));
      if (step) lines.push(...stepLines(step, c).map((l) => `  ${l}`));
      else lines.push('  (no more events)');
    }
    if (d.fields.length) {
      lines.push('', paint(c, 'bold', 'fields changed there that differ after it (A → B):'));
      for (const f of d.fields) lines.push(`  ${changeText({ path: f.path, before: f.a, after: f.b })}`);
    }
    const others = d.context.filter((x) => !d.fields.some((f) => f.path === x.path));
    if (others.length) {
      lines.push('', paint(c, 'gray', `other context differences (A → B): ${others.map((x) => x.path).join(', ')}`));
      for (const x of others.slice(0, 20)) lines.push(paint(c, 'gray', `  ${x.path}: ${valueText(x.before, 120)} → ${valueText(x.after, 120)}`));
    }
  }
  ctx.out.write(lines.join('\n') + '\n');
}

const diff: CliCommand = {
  spec: diffSpec,
  async run({ positionals, values }, ctx) {
    const reader = await openReader(ctx.dataDir);
    const log = new SqliteEventLog(reader.db);
    try {
      const a = await resolveStream(reader.db, log, positionals[0]!);
      const b = await resolveStream(reader.db, log, positionals[1]!);
      const result = await diffRuns(log, a, b, { force: values.force === true });
      if (ctx.json) ctx.out.write(JSON.stringify(result, null, 2) + '\n');
      else render(ctx, result);
      for (const side of [result.a, result.b]) if (side.mismatch) throw divergenceError(side.streamId, side.machine, side.mismatch);
      return result.identical ? EXIT.ok : EXIT.error;
    } finally {
      log.close();
      reader.close();
    }
  },
};

export const commands: Record<string, CliCommand> = { diff };
