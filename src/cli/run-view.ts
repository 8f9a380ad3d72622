/**
 * `loops show <runId>`: one run in full — like `gh run view` — its loop, trigger and attempt, when
 * it was scheduled, started and ended, how it ended and why, the agent CLI's report (model,
 * session, turns, tokens, cost, final message), where its output files are, and the output tails
 * recorded with its end. Everything comes from the `loop_runs` projection, except where its process
 * started and with which environment (names only), which its spawn recorded; nothing is re-run.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { runDir } from '../runtime/paths.js';
import type { RunView } from '../runtime/queries/loops.js';
import type { NoticeView } from '../runtime/queries/notices.js';
import type { SpawnRecord } from '../runtime/queries/spawn-record.js';
import type { SpawnEnv } from '../events/catalog.js';
import type { CliContext } from './context.js';
import { durationText, paint, statusColor, when } from './render.js';

const TAIL_LINES = 20;
const MESSAGE_LINES = 12;
const LINE_CHARS = 300;

/** A workflow loop's run: the workflow run it started (null before it started). */
export interface RunWorkflow {
  id: string;
  workflowName: string;
  version: number;
  status: string;
  stepCount: number;
}

/** How a run's end was told (--on-failure, --notify-url), and whose end a hook's run told. */
export interface RunNotices {
  notices: NoticeView[];
  hookOf: NoticeView | null;
}

function noticeText(n: NoticeView): string {
  if (n.channel === 'command') {
    const how = n.status === 'pending' ? (n.hookRunId ? `running as run ${n.hookRunId}` : 'pending') : n.hookRunId ? `ran as run ${n.hookRunId}, ${n.hookStatus ?? n.status}` : n.status;
    return `on-failure ${n.target}: ${how}${n.status === 'given_up' && n.lastError ? ` (${n.lastError})` : ''}`;
  }
  const tries = `${n.attempts} attempt${n.attempts === 1 ? '' : 's'}`;
  const how =
    n.status === 'delivered'
      ? `delivered (${tries}, HTTP ${n.httpStatus ?? '?'})`
      : n.status === 'pending'
        ? `pending${n.attempts ? ` after ${tries}, last: ${n.lastError ?? '?'}` : ''}${n.retryAt ? `, next try ${n.retryAt}` : ''}`
        : `given up after ${tries}: ${n.lastError ?? '?'}`;
  return `POST ${n.target}: ${how}`;
}

/**
 * The names of a process's environment in one line: `set FOO, PATH, 6 LOOPS_* · secret TOKEN ·
 * removed GH_TOKEN · 42 inherited` — loops' own LOOPS_* variables counted, empty parts left out
 * (`--json` and `loops events` have every name).
 */
export function envSummary(env: SpawnEnv): string {
  const own = env.set.filter((n) => n.startsWith('LOOPS_'));
  const set = [...env.set.filter((n) => !n.startsWith('LOOPS_')), ...(own.length ? [`${own.length} LOOPS_*`] : [])];
  return [
    set.length ? `set ${set.join(', ')}` : null,
    env.secret.length ? `secret ${env.secret.join(', ')}` : null,
    env.removed.length ? `removed ${env.removed.join(', ')}` : null,
    `${env.inherited.length} inherited`,
  ]
    .filter((p): p is string => p !== null)
    .join(' · ');
}

/** The `cwd` and `env` lines of a spawn record (none for a spawn recorded without them). */
export function spawnLines(spawn: SpawnRecord | null | undefined, indent = 'cwd         '.length): string[] {
  if (!spawn) return [];
  const pad = (label: string) => label.padEnd(indent);
  return [...(spawn.cwd !== null ? [`${pad('cwd')}${spawn.cwd}`] : []), ...(spawn.env !== null ? [`${pad('env')}${envSummary(spawn.env)}`] : [])];
}

/**
 * The run in full. `spawn`: where its process started and with which environment, as its spawn
 * recorded it (`cwd` and `env` lines after `exit`; none when not recorded).
 */
export function runDetail(run: RunView, ctx: CliContext, workflow?: RunWorkflow | null, told?: RunNotices, spawn?: SpawnRecord | null): string {
  const c = ctx.color;
  const lines: string[] = [
    `${paint(c, 'bold', run.id)}  ${paint(c, statusColor(run.status), run.status)}`,
    `loop        ${run.loopName} (${run.loopId})`,
    `trigger     ${run.trigger}, attempt ${run.attempt}${run.trigger === 'schedule' ? `, slot ${run.slot}` : ''}`,
    `scheduled   ${when(run.scheduledFor, ctx)}`,
    `claimed     ${when(run.claimedAt, ctx)} by runner ${run.runnerId}`,
    `started     ${run.startedAt ? when(run.startedAt, ctx) : '-'}${run.pid !== null ? `   pid ${run.pid}` : ''}`,
    `finished    ${run.finishedAt ? `${when(run.finishedAt, ctx)} after ${durationText(run.durationMs)}` : '-'}`,
  ];
  if (workflow !== undefined) {
    lines.push(
      workflow === null
        ? 'workflow    (its workflow run has not started)'
        : `workflow    ${workflow.workflowName} v${workflow.version}, run ${workflow.id} ${paint(c, statusColor(workflow.status), workflow.status)}, ${workflow.stepCount} step${workflow.stepCount === 1 ? '' : 's'} — loops workflows inspect ${workflow.id}`,
    );
  } else {
    lines.push(`exit        ${exitText(run)}`, ...spawnLines(spawn));
  }
  if (run.error) lines.push(`error       ${run.error}`);
  if (told?.hookOf) lines.push(`hook        the --on-failure command of run ${told.hookOf.runId} (${told.hookOf.runStatus})`);
  for (const [i, n] of (told?.notices ?? []).entries()) lines.push(`${i === 0 ? 'notified   ' : '           '} ${noticeText(n)}`);
  const a = run.agent;
  if (a) {
    lines.push(
      `agent       ${[a.provider + (a.cliVersion ? ` ${a.cliVersion}` : ''), a.model ? `model ${a.model}` : null, a.sessionId ? `session ${a.sessionId}` : null].filter(Boolean).join(', ')}`,
      `usage       ${usageText(a)}`,
    );
    if (a.parseError) lines.push(`report      ${a.parseError}`);
    if (a.finalMessage !== null) {
      const message = a.finalMessage.trimEnd().split('\n');
      lines.push('final       ' + message.slice(0, MESSAGE_LINES).join('\n            '));
      if (message.length > MESSAGE_LINES) lines.push(`            … ${message.length - MESSAGE_LINES} more lines (loops runs ${run.id.slice(0, 12)} --json has it all)`);
    }
  }
  const dir = runDir(ctx.dataDir, run.id);
  const files = ['stdout.log', 'stderr.log'].filter((f) => existsSync(join(dir, f)));
  // A workflow loop's run has no process of its own: its steps' output is the workflow run's.
  const pruned = run.outputPrunedAt ? `pruned on ${run.outputPrunedAt} (loops prune)` : null;
  if (workflow === undefined) {
    lines.push(`files       ${pruned ?? (files.length ? `${dir}/{${files.join(',')}}${rotated(dir) ? ' (rotated past the cap: .1 has the previous part, .head the first 64 KiB)' : ''}` : '-')}`);
    lines.push(`output      stdout ${bytes(run.stdoutBytes)}, stderr ${bytes(run.stderrBytes)}`);
  } else if (run.outputPrunedAt) {
    lines.push(`files       the workflow run's output was pruned on ${run.outputPrunedAt} (loops prune)`);
  }
  if (run.archivedAt) {
    lines.push(`events      archived on ${run.archivedAt} with the output tails (loops prune --archive): loops replay ${run.id} --archive`);
  }
  // An agent's stdout is its JSONL transcript: the report above is what it says; logs renders it.
  const streams = [...(a ? [] : [['stdout', run.stdout] as const]), ['stderr', run.stderr] as const];
  for (const [name, text] of streams) {
    if (text === '') continue;
    const tail = text.replace(/\n$/, '').split('\n').slice(-TAIL_LINES);
    lines.push('', paint(c, 'dim', `── ${name} (last lines) ──`), ...tail.map((l) => (l.length > LINE_CHARS ? `${l.slice(0, LINE_CHARS - 1)}…` : l)));
  }
  lines.push('', paint(c, 'dim', `${a ? `loops logs ${run.id} --pretty (the transcript)` : `loops logs ${run.id}`} · loops events ${run.id} · loops replay ${run.id}`));
  return lines.join('\n') + '\n';
}

function exitText(run: RunView): string {
  if (run.exitCode !== null) return `code ${run.exitCode}`;
  if (run.signal) return `killed by ${run.signal}`;
  return '-';
}

function usageText(a: NonNullable<RunView['agent']>): string {
  const n = (v: number | null) => (v === null ? '?' : v.toLocaleString('en-US'));
  const t = a.tokens;
  const parts = [
    a.turns !== null ? `${a.turns} turn${a.turns === 1 ? '' : 's'}` : null,
    t.input !== null || t.output !== null ? `tokens ${n(t.input)} in / ${n(t.output)} out` : null,
    t.cacheRead !== null || t.cacheWrite !== null ? `cache ${n(t.cacheRead)} read / ${n(t.cacheWrite)} written` : null,
    a.costUsd !== null ? `cost $${a.costUsd.toFixed(4)}` : null,
    a.durationMs !== null ? `${durationText(a.durationMs)} by the CLI's clock` : null,
  ].filter(Boolean);
  return parts.length ? parts.join(', ') : 'nothing reported';
}

function rotated(dir: string): boolean {
  return existsSync(join(dir, 'stdout.log.1')) || existsSync(join(dir, 'stderr.log.1'));
}

function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** Whether a `show` argument names a run rather than a loop. */
export function isRunId(text: string): boolean {
  return /^run_[0-9a-z]+$/.test(text);
}
