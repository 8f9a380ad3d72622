import { runDoctor, type CheckStatus, type DoctorCheck } from '../../runtime/admin/doctor.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { paint, printJson, type Color } from '../render.js';

const spec: CommandSpec = {
  name: 'doctor',
  summary: 'Check the data directory, the database, the daemon, the agent CLIs, the accounts and every active loop.',
  description: [
    'One line per check: ✓ ok, ! warning, ✗ failure, with what was found and how to fix it.',
    'What an active loop needs and is missing (its executable or agent CLI on the effective PATH, its',
    'working directory, its prompt file, its account, its workflow) is a failure; a CLI that nothing',
    'uses is only reported. Secret variables are checked in this environment and, when the daemon',
    "runs and its environment can be read (Linux), in the daemon's too.",
    'Exit code 1 when any check failed (also with --json), else 0.',
  ].join('\n'),
  positionals: [],
  options: { json: JSON_OPTION },
  examples: ['loops doctor', 'loops doctor --json | jq \'.checks[] | select(.status != "ok")\''],
};

const GLYPH: Record<CheckStatus, { mark: string; color: Color }> = {
  ok: { mark: '✓', color: 'green' },
  warn: { mark: '!', color: 'yellow' },
  fail: { mark: '✗', color: 'red' },
};

/** The longest title the column is padded to; longer ones push their detail right. */
const MAX_TITLE = 28;

export function renderChecks(checks: DoctorCheck[], color: boolean): string {
  const width = Math.min(MAX_TITLE, Math.max(0, ...checks.map((c) => c.title.length)));
  const indent = ' '.repeat(2 + width + 2);
  const lines: string[] = [];
  for (const c of checks) {
    const g = GLYPH[c.status];
    lines.push(`${paint(color, g.color, g.mark)} ${c.title.padEnd(width)}  ${c.detail}`);
    if (c.hint && c.status !== 'ok') lines.push(`${indent}${paint(color, 'gray', `hint: ${c.hint}`)}`);
  }
  const count = (s: CheckStatus) => checks.filter((c) => c.status === s).length;
  const fails = count('fail');
  const warns = count('warn');
  lines.push('');
  if (fails === 0 && warns === 0) lines.push(paint(color, 'green', `All ${checks.length} checks passed.`));
  else {
    const parts = [`${count('ok')} ok`];
    if (warns) parts.push(paint(color, 'yellow', `${warns} warning${warns === 1 ? '' : 's'}`));
    if (fails) parts.push(paint(color, 'red', `${fails} failed`));
    lines.push(`${checks.length} checks: ${parts.join(', ')}${fails ? ' — an active loop will not run as it should' : ''}.`);
  }
  return lines.join('\n') + '\n';
}

const doctor: CliCommand = {
  spec,
  async run(_parsed, ctx: CliContext) {
    const report = await runDoctor({ dataDir: ctx.dataDir, now: ctx.now });
    if (ctx.json) printJson(ctx, report);
    else ctx.out.write(renderChecks(report.checks, ctx.color));
    return report.ok ? EXIT.ok : EXIT.error;
  },
};

export const commands: Record<string, CliCommand> = { doctor };
