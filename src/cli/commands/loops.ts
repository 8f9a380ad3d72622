import { configIsolationLabel, enforcedLimits } from '../../runtime/agents/providers.js';
import { describeSchedule, describeTiming } from '../../scheduling/describe.js';
import { formatDuration } from '../../events/durations.js';
import { UsageError } from '../../events/errors.js';
import type { LoopNotify, SecretRef } from '../../events/catalog.js';
import { loopNotify, noticeOfHookRun, runNotices } from '../../runtime/queries/notices.js';
import { findLoop, findRun, listRuns, type LoopView } from '../../runtime/queries/loops.js';
import { hostsWithLabels } from '../../runtime/queries/hosts.js';
import type { Db } from '../../events/db.js';
import { runTarget, workflowRunOfLoopRun } from '../../runtime/queries/run-files.js';
import { isRunId, runDetail } from '../run-view.js';
import { runSpawnRecord } from '../../runtime/queries/spawn-record.js';
import { openReader } from '../../runtime/store.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { agentUsage, durationText, paint, printJson, statusColor, table, when } from '../render.js';

const showSpec: CommandSpec = {
  name: 'show',
  summary: 'Show one loop (definition, schedule, state and recent runs), or one run in full.',
  positionals: [{ name: 'loop|run', required: true, description: 'loop name or id, or a run id (run_…, or a unique prefix of one)' }],
  options: {
    reveal: { type: 'boolean', description: "show an agent's prompt and environment values (redacted otherwise)" },
    json: JSON_OPTION,
  },
};

/** An agent loop's limits, and who enforces each: the CLI (a flag) or loops (from what the CLI reports). */
function limitsText(t: Extract<LoopView['target'], { kind: 'agent' }>): string {
  const byLoops = enforcedLimits(t);
  const who = (enforced: boolean) => (enforced ? ' (enforced by loops)' : ' (by the CLI)');
  return [
    t.maxTurns ? `max ${t.maxTurns} turns${who(byLoops?.maxTurns != null)}` : null,
    t.maxCostUsd ? `max $${t.maxCostUsd} per run${who(byLoops?.maxCostUsd != null)}` : null,
    t.idleTimeoutMs ? `idle timeout ${formatDuration(t.idleTimeoutMs)}` : null,
  ]
    .filter(Boolean)
    .join(', ');
}

function targetText(loop: LoopView, reveal: boolean): string[] {
  const t = loop.target;
  if (t.kind === 'agent') {
    const prompt =
      t.prompt === null ? `from ${t.promptFile}` : reveal ? JSON.stringify(t.prompt) : `(${t.prompt.length} characters; --reveal shows it)`;
    const env = Object.keys(t.env);
    return [
      `agent       ${t.provider}${t.model ? `, model ${t.model}` : ''}${t.agent ? `, agent ${t.agent}` : ''}${t.permissionMode ? `, permission ${t.permissionMode}` : ''}, config ${configIsolationLabel(t.configIsolation)}${t.account ? `, account ${t.account}${t.accountTool ? ` (${t.accountTool})` : ''}` : ''}`,
      `prompt      ${prompt}`,
      `cwd         ${t.cwd ?? '(the directory loops runs in)'}`,
      ...(env.length ? [`env         ${Object.entries(t.env).map(([k, v]) => `${k}=${reveal ? quote(v) : '***'}`).join(' ')}`] : []),
      ...secretsText(t),
      ...(t.extraArgs.length ? [`extra args  ${t.extraArgs.map(quote).join(' ')}`] : []),
      ...(t.maxTurns || t.maxCostUsd || t.idleTimeoutMs ? [`limits      ${limitsText(t)}`] : []),
    ];
  }
  if (t.kind === 'workflow') return [`workflow    ${t.workflowName} (${t.workflowId}), its latest version when each run starts`];
  const lines = t.shell
    ? [`command     ${t.command}   (run by /bin/sh)`]
    : [`command     ${[t.command, ...t.args].map(quote).join(' ')}   (no shell)`];
  lines.push(`cwd         ${t.cwd ?? '(the directory loops runs in)'}`);
  if (t.account !== undefined) lines.push(`account     ${t.account}${t.accountTool ? ` (${t.accountTool})` : ''}`);
  const env = Object.entries(t.env);
  if (env.length) lines.push(`env         ${env.map(([k, v]) => `${k}=${reveal ? quote(v) : '***'}`).join(' ')}${reveal ? '' : '   (--reveal shows the values)'}`);
  lines.push(...secretsText(t));
  return lines;
}

/** Where each secret of a run comes from (never a value: the log has none). */
function secretsText(t: { secretEnv?: string[]; secretRefs?: SecretRef[] }): string[] {
  const from = [
    ...(t.secretEnv ?? []).map((n) => `${n} from the runner's environment`),
    ...(t.secretRefs ?? []).map((r) => (r.from === 'file' ? `${r.name} from file ${r.path}` : `${r.name} from command ${quote(r.command)}`)),
  ];
  return from.length ? [`secrets     ${from.join(', ')}`] : [];
}

function quote(s: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/** Who the loop tells of its run ends (`--on-failure`, `--notify-url`). */
function notifyText(notify: LoopNotify | null): string[] {
  if (!notify) return [];
  return [
    ...(notify.onFailure !== null ? [`on failure  ${notify.onFailure}`] : []),
    ...(notify.url !== null ? [`notify      POST ${notify.url} on ${notify.on.join(' and ')}`] : []),
  ];
}

/** Where the loop's runs may run (`--runs-on`), and which hosts known to the store have those labels. */
function runsOnText(db: Db, runsOn: string[] | null): string[] {
  if (!runsOn) return [];
  const hosts = hostsWithLabels(db, runsOn).map((h) => `${h.id}${h.status === 'down' ? ' (stopped)' : ''}`);
  return [`runs on     runners labelled ${runsOn.join(',')} — ${hosts.length ? `hosts with them: ${hosts.join(', ')}` : 'no daemon with them has started yet'}`];
}

/** The loop as `show --json` prints it: environment values and an agent's prompt redacted unless revealed. */
function redacted(loop: LoopView): LoopView {
  const t = loop.target;
  if (t.kind === 'workflow') return loop;
  const env = Object.fromEntries(Object.keys(t.env).map((k) => [k, '***']));
  return { ...loop, target: t.kind === 'agent' ? { ...t, env, prompt: t.prompt === null ? null : '***' } : { ...t, env } } as LoopView;
}

const show: CliCommand = {
  spec: showSpec,
  async run({ positionals, values }, ctx) {
    const reader = await openReader(ctx.dataDir);
    try {
      const what = positionals[0]!;
      if (isRunId(what)) {
        const run = findRun(reader.db, what);
        const workflowRun = runTarget(reader.db, run.id).kind === 'workflow' ? workflowRunOfLoopRun(reader.db, run) : undefined;
        const told = { notices: runNotices(reader.db, run.id), hookOf: noticeOfHookRun(reader.db, run) };
        // Only when there are some: a run nobody was told of prints as it did before.
        const notices = { ...(told.notices.length ? { notices: told.notices } : {}), ...(told.hookOf ? { hookOf: told.hookOf.runId } : {}) };
        // Where its process started and with which environment (names only), when its spawn recorded them.
        const spawn = workflowRun === undefined ? runSpawnRecord(reader.db, run.id) : null;
        const started = spawn ? { ...(spawn.cwd !== null ? { cwd: spawn.cwd } : {}), ...(spawn.env !== null ? { env: spawn.env } : {}) } : {};
        if (ctx.json) printJson(ctx, workflowRun === undefined ? { ...run, ...started, ...notices } : { ...run, workflowRunId: workflowRun?.id ?? null, ...notices });
        else ctx.out.write(runDetail(run, ctx, workflowRun, told, spawn));
        return EXIT.ok;
      }
      if (what.startsWith('wfrun_')) {
        throw new UsageError(`${what} is a workflow run`, { hint: `loops workflows inspect ${what} shows it` });
      }
      const loop = findLoop(reader.db, what, { includeRemoved: true });
      const runs = listRuns(reader.db, { loopId: loop.id, limit: 5 });
      if (ctx.json) {
        const notify = loopNotify(reader.db, loop.id);
        printJson(ctx, { ...(values.reveal === true ? loop : redacted(loop)), ...(notify ? { notify } : {}) });
        return EXIT.ok;
      }
      const c = ctx.color;
      const lines = [
        `${paint(c, 'bold', loop.name)}  ${paint(c, statusColor(loop.status), loop.status)}${loop.reason ? ` (${loop.reason})` : ''}`,
        `id          ${loop.id}`,
        ...(loop.description ? [`description ${loop.description}`] : []),
        `schedule    ${describeSchedule(loop.schedule)}${loop.schedule.kind === 'cron' ? '' : ` (zone ${loop.timing.tz})`}`,
        ...(describeTiming(loop.timing) ? [`bounds      ${describeTiming(loop.timing)}`] : []),
        `next run    ${loop.nextRunAt ? `${when(loop.nextRunAt, ctx)}${ctx.out.isTTY ? ` (${loop.nextRunAt})` : ''}` : '-'}`,
        ...targetText(loop, values.reveal === true),
        `policies    overlap ${loop.policies.overlap}, catch-up ${loop.policies.catchUp}${loop.policies.catchUpWindowMs ? ` within ${formatDuration(loop.policies.catchUpWindowMs)}` : ''}${loop.policies.catchUpLimit ? ` (at most ${loop.policies.catchUpLimit})` : ''}${loop.policies.attempts > 1 ? `, ${loop.policies.attempts} attempts (retry after ${formatDuration(loop.policies.retryDelayMs)}, ×${loop.policies.backoff}${loop.policies.maxRetryDelayMs ? `, at most ${formatDuration(loop.policies.maxRetryDelayMs)}` : ''})` : ''}`,
        `timeout     ${loop.policies.timeoutMs ? formatDuration(loop.policies.timeoutMs) : 'none'} (kill grace ${formatDuration(loop.policies.killGraceMs)})`,
        ...notifyText(loopNotify(reader.db, loop.id)),
        ...runsOnText(reader.db, loop.runsOn),
        `created     ${when(loop.createdAt, ctx)}`,
        `updated     ${when(loop.updatedAt, ctx)}`,
        `runs        ${loop.runCount}`,
      ];
      ctx.out.write(lines.join('\n') + '\n');
      if (runs.length) {
        ctx.out.write('\nRecent runs:\n');
        ctx.out.write(
          table(
            ['RUN', 'STATUS', 'STARTED', 'DURATION', 'EXIT', ...(loop.target.kind === 'agent' ? ['TOKENS/COST', 'SESSION'] : [])],
            runs.map((r) => [
              r.id,
              paint(c, statusColor(r.status), r.status),
              when(r.startedAt ?? r.claimedAt, ctx),
              durationText(r.durationMs),
              r.exitCode === null ? (r.signal ?? '-') : String(r.exitCode),
              ...(loop.target.kind === 'agent' ? [agentUsage(r.agent), r.agent?.sessionId ?? '-'] : []),
            ]),
            c,
          ),
        );
      }
      return EXIT.ok;
    } finally {
      reader.close();
    }
  },
};

type StateCommand = 'pause' | 'resume' | 'stop' | 'archive' | 'remove';
const past: Record<StateCommand, string> = {
  pause: 'Paused',
  resume: 'Resumed',
  stop: 'Stopped',
  archive: 'Archived',
  remove: 'Removed',
};
const summaries: Record<StateCommand, string> = {
  pause: 'Pause a loop: it does not fire until resumed. run-now still works.',
  resume: 'Resume a paused or stopped loop; it is scheduled again from now.',
  stop: 'Stop a loop: it does not fire until resumed.',
  archive: 'Archive a loop: its history is kept and it never runs again.',
  remove: 'Remove a loop. Its runs and events stay in the log; its name can be reused.',
};

function stateCommand(command: StateCommand): CliCommand {
  return {
    spec: {
      name: command,
      summary: summaries[command],
      positionals: [{ name: 'loop', required: true, description: 'loop name or id' }],
      options: {
        reason: { type: 'string', value: '<text>', description: 'why (recorded in the log)' },
        json: JSON_OPTION,
      },
    },
    async run({ values, positionals }, ctx: CliContext) {
      const [{ openRuntime }, { changeLoopState }] = await Promise.all([
        import('../../runtime/runtime.js'),
        import('../../runtime/loops/commands.js'),
      ]);
      const runtime = await openRuntime({ dataDir: ctx.dataDir, clock: ctx.clock });
      try {
        const loop = await changeLoopState(runtime, positionals[0]!, command, {
          reason: (values.reason as string | undefined) ?? null,
        });
        if (ctx.json) printJson(ctx, loop);
        else {
          const next = command === 'resume' && loop.nextRunAt ? `; next run ${when(loop.nextRunAt, ctx)}` : '';
          ctx.out.write(`${past[command]} loop ${paint(ctx.color, 'bold', loop.name)} (${loop.id})${next}\n`);
          // Resumed with nothing left to run: its slots passed while it was paused or stopped.
          if (command === 'resume' && loop.status === 'expired') {
            ctx.out.write('it has expired at once: its last slot passed while it was not active, and such slots are not run late\n');
          }
        }
        return EXIT.ok;
      } finally {
        runtime.close();
      }
    },
  };
}

/** `list` is ./list.ts, a module of its own (main.ts loads it alone). */
export const commands: Record<string, CliCommand> = {
  show,
  pause: stateCommand('pause'),
  resume: stateCommand('resume'),
  stop: stateCommand('stop'),
  archive: stateCommand('archive'),
  remove: stateCommand('remove'),
};
