import { UsageError } from '../../events/errors.js';
import { requestWorkflowCancel } from '../../runtime/execution/cancel.js';
import { openRuntime } from '../../runtime/runtime.js';
import { stepOf, type WorkflowRunContext } from '../../machines/workflow-run.js';
import { resumeWorkflowRun, runWorkflow } from '../../runtime/workflows/runner.js';
import { archiveWorkflow, createWorkflow, updateWorkflow } from '../../runtime/workflows/specs.js';
import { findWorkflowRun } from '../../runtime/queries/workflows.js';
import { formatDuration } from '../../events/durations.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { exitCodeForRunStatus } from '../exit-codes.js';
import { paint, printJson, statusColor } from '../render.js';
import { renderLiveSteps, type ViewStep } from '../workflow-view.js';
import { NAME_OPTION, nameOverride } from './workflows.js';

const createSpec: CommandSpec = {
  name: 'workflows create',
  summary: 'Store a workflow spec file (YAML or JSON) as version 1 of a new workflow.',
  description: [
    'The file is validated first (loops workflows validate); nothing is stored when it has a problem.',
    "The workflow's name comes from the file's `name`, or from --name. Relative `cwd` paths are read",
    "against the file's directory and stored absolute.",
  ].join('\n'),
  positionals: [{ name: 'file', required: true, description: 'spec file (.yaml, .yml or .json)' }],
  options: { name: NAME_OPTION, json: JSON_OPTION },
  examples: ['loops workflows create nightly.yaml', 'loops workflows create repo-morning.json --name morning', 'loops workflows run nightly'],
};

const updateSpec: CommandSpec = {
  name: 'workflows update',
  summary: 'Store a spec file as the next version of a workflow (runs already started keep theirs).',
  positionals: [
    { name: 'workflow', required: true, description: 'workflow name or id' },
    { name: 'file', required: true, description: 'spec file' },
  ],
  options: { json: JSON_OPTION },
  examples: ['loops workflows update nightly nightly.yaml'],
};

const archiveSpec: CommandSpec = {
  name: 'workflows archive',
  summary: 'Hide a workflow from new runs; its versions and runs stay in the log.',
  positionals: [{ name: 'workflow', required: true, description: 'workflow name or id' }],
  options: { reason: { type: 'string', value: '<text>', description: 'why; recorded' }, json: JSON_OPTION },
  examples: ['loops workflows archive nightly --reason replaced'],
};

const runSpec: CommandSpec = {
  name: 'workflows run',
  summary: 'Run a workflow now, in the foreground, with a live view of its steps.',
  description: [
    'Ready steps start in parallel up to the spec\'s concurrency; a failed step skips only its',
    'dependants. On a terminal each step is shown with its state and duration while it runs;',
    'otherwise one line is printed as each step ends. (--follow is accepted: run always follows.)',
    'Ctrl-C cancels the run: running steps are stopped, `always()` steps still run; again to quit.',
    'Exit code: 0 succeeded, 3 failed, 4 timed out, 5 cancelled.',
  ].join('\n'),
  positionals: [{ name: 'workflow', required: true, description: 'workflow name or id' }],
  options: {
    input: { type: 'string', multiple: true, value: '<key=value>', description: "a value for one of the spec's inputs" },
    follow: { type: 'boolean', description: 'follow the run (the default)' },
    'show-output': { type: 'boolean', description: "then print each step's stdout and stderr (loops logs <wfRunId>)" },
    json: JSON_OPTION,
  },
  examples: ['loops workflows run nightly', 'loops workflows run nightly --show-output', 'loops workflows run release --input version=1.2.3', 'loops workflows run nightly --json | jq .status'],
};

const cancelSpec: CommandSpec = {
  name: 'workflows cancel',
  summary: 'Cancel a running workflow run: running steps are stopped, it ends cancelled (never retried).',
  positionals: [{ name: 'run', required: true, description: 'workflow run id' }],
  options: { reason: { type: 'string', value: '<text>', description: 'why; recorded with the run' }, json: JSON_OPTION },
  examples: ["loops workflows cancel wfrun_01J… --reason 'wrong branch'"],
};

function inputsOf(values: Record<string, unknown>): Record<string, string> {
  const out: Array<[string, string]> = [];
  for (const item of (values.input as string[] | undefined) ?? []) {
    const eq = item.indexOf('=');
    if (eq <= 0) throw new UsageError(`--input ${JSON.stringify(item)} is not key=value`, { hint: 'e.g. --input branch=main' });
    out.push([item.slice(0, eq), item.slice(eq + 1)]);
  }
  // Own properties, whatever the key: `out[key] = …` dropped --input __proto__=x without a word.
  return Object.fromEntries(out);
}

function viewSteps(c: WorkflowRunContext): ViewStep[] {
  return (c.spec?.steps ?? []).map((step) => {
    const s = stepOf(c, step.id)!;
    return {
      id: step.id,
      needs: step.needs,
      status: s.status,
      startedAt: s.startedAt ? Date.parse(s.startedAt) : null,
      endedAt: s.endedAt ? Date.parse(s.endedAt) : null,
      attempts: s.attempt,
      exitCode: s.exitCode,
      continueOnError: step.continueOnError,
    };
  });
}

const ENDED = new Set(['succeeded', 'failed', 'timed_out', 'cancelled', 'skipped', 'abandoned', 'retrying']);

const resumeSpec: CommandSpec = {
  name: 'workflows resume',
  summary: 'Continue a workflow run whose runner stopped (kill -9, a crash, a reboot).',
  description: [
    'Takes the run over (only when its runner is gone: its lease ran out) and reconciles each step',
    'without a recorded outcome against the OS: a step whose process still runs is adopted and its',
    'real exit recorded; one that ended meanwhile gets its exit status from its file; of one nothing',
    'is known is recorded abandoned (and retried if its policy allows). Steps that did not start yet',
    'run now. A step whose success is recorded never runs again. Follows the run like workflows run.',
  ].join('\n'),
  positionals: [{ name: 'run', required: true, description: 'workflow run id (or a unique prefix)' }],
  options: { json: JSON_OPTION },
  examples: ['loops workflows resume wfrun_01J…'],
};

type Starter = (
  runtime: Awaited<ReturnType<typeof openRuntime>>,
  options: Parameters<typeof runWorkflow>[2] & object,
) => Promise<{ run: Awaited<ReturnType<typeof runWorkflow>>['run']; started: boolean }>;

async function follow(ctx: CliContext, label: string, starter: Starter): Promise<number> {
  {
    // Steps are forked by the spawner helper, as in the daemon: parallel steps start without
    // holding this thread for each fork.
    const runtime = await openRuntime({ dataDir: ctx.dataDir, clock: ctx.clock, spawner: 'helper' });
    const controller = new AbortController();
    let signals = 0;
    const onSignal = (signal: NodeJS.Signals) => {
      signals += 1;
      if (signals === 1) {
        ctx.err.write(`loops: ${signal}: cancelling the workflow run (again to force quit)\n`);
        controller.abort(`interrupted by ${signal}`);
      } else process.exit(130);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    const live = !ctx.json && ctx.err.isTTY === true;
    let latest: WorkflowRunContext | null = null;
    let drawn = 0;
    let frame = 0;
    const draw = () => {
      if (!latest) return;
      const lines = renderLiveSteps(viewSteps(latest), { now: ctx.clock.now(), frame: frame++, color: ctx.color, width: process.stderr.columns ?? 100 });
      ctx.err.write(`${drawn ? `\x1b[${drawn}A` : ''}${lines.map((l) => `\x1b[2K${l}`).join('\n')}\n`);
      drawn = lines.length;
    };
    // The live view redraws itself every 100 ms on a terminal (the screen, not the database).
    let timer: NodeJS.Timeout | null = null;
    const tick = () => {
      draw();
      timer = setTimeout(tick, 100);
    };
    if (live) timer = setTimeout(tick, 100);
    const reported = new Map<string, string>();
    try {
      const { run, started } = await starter(runtime, {
        signal: controller.signal,
        onStarted: (id) => {
          if (!ctx.json) ctx.err.write(paint(ctx.color, 'gray', `workflow ${label} run ${id}\n`));
        },
        onEvent: (_event, c) => {
          latest = c;
          if (live || ctx.json) return;
          // Piped: one line per step that ended (or waits for a retry).
          for (const step of viewSteps(c)) {
            if (!ENDED.has(step.status) || reported.get(step.id) === `${step.status}:${step.attempts}`) continue;
            reported.set(step.id, `${step.status}:${step.attempts}`);
            const s = stepOf(c, step.id)!;
            const took = step.startedAt !== null && step.endedAt !== null ? ` in ${formatDuration(step.endedAt - step.startedAt)}` : '';
            const why = s.status === 'skipped' ? ` (${s.reason})` : s.error ? ` (${s.error})` : '';
            ctx.err.write(`${step.id}: ${paint(ctx.color, statusColor(s.status), s.status)}${s.status === 'retrying' ? ` (attempt ${s.attempt} failed; retry at ${s.retryAt})` : `${took}${why}`}\n`);
          }
        },
      });
      if (timer) clearTimeout(timer);
      timer = null;
      if (live) draw();
      if (!started && !ctx.json) ctx.err.write(`already ran as ${run.id}\n`);
      if (ctx.json) printJson(ctx, run);
      else {
        const line = `workflow run ${run.id} ${paint(ctx.color, statusColor(run.status), run.status)}${run.error ? ` (${run.error})` : ''}\n`;
        (run.status === 'succeeded' ? ctx.out : ctx.err).write(line);
      }
      return exitCodeForRunStatus(run.status);
    } finally {
      if (timer) clearTimeout(timer);
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      runtime.close();
    }
  }
}

const runCommand: CliCommand = {
  spec: runSpec,
  async run({ values, positionals }, ctx) {
    const inputs = inputsOf(values);
    let runId: string | null = null;
    const code = await follow(ctx, positionals[0]!, async (runtime, options) => {
      const result = await runWorkflow(runtime, positionals[0]!, { ...options, inputs });
      runId = result.run.id;
      return result;
    });
    // --show-output (the predecessor's flag): each step's output once the run ended, as loops logs prints it.
    if (values['show-output'] === true && !ctx.json && runId !== null) {
      const { commands } = await import('./logs.js');
      await commands.logs!.run({ values: {}, positionals: [runId] }, ctx);
    }
    return code;
  },
};

const resumeCommand: CliCommand = {
  spec: resumeSpec,
  async run({ positionals }, ctx) {
    return follow(ctx, 'resumed', async (runtime, options) => ({ run: await resumeWorkflowRun(runtime, positionals[0]!, options), started: true }));
  },
};

function warn(ctx: CliContext, warnings: string[]): void {
  for (const w of warnings) ctx.err.write(`warning: ${w}\n`);
}

const createCommand: CliCommand = {
  spec: createSpec,
  async run({ positionals, values }, ctx) {
    const name = nameOverride('workflows create', values.name);
    const runtime = await openRuntime({ dataDir: ctx.dataDir, clock: ctx.clock });
    try {
      const { workflow, warnings } = await createWorkflow(runtime, positionals[0]!, { name });
      warn(ctx, warnings);
      if (ctx.json) printJson(ctx, workflow);
      else ctx.out.write(`created workflow ${workflow.name} (${workflow.id}), version 1\n`);
      return 0;
    } finally {
      runtime.close();
    }
  },
};

const updateCommand: CliCommand = {
  spec: updateSpec,
  async run({ positionals }, ctx) {
    const runtime = await openRuntime({ dataDir: ctx.dataDir, clock: ctx.clock });
    try {
      const { workflow, warnings, unchanged } = await updateWorkflow(runtime, positionals[0]!, positionals[1]!);
      warn(ctx, warnings);
      if (ctx.json) printJson(ctx, { ...workflow, unchanged });
      else ctx.out.write(unchanged ? `workflow ${workflow.name}: unchanged, still version ${workflow.version}\n` : `workflow ${workflow.name}: version ${workflow.version}\n`);
      return 0;
    } finally {
      runtime.close();
    }
  },
};

const archiveCommand: CliCommand = {
  spec: archiveSpec,
  async run({ values, positionals }, ctx) {
    const runtime = await openRuntime({ dataDir: ctx.dataDir, clock: ctx.clock });
    try {
      const workflow = await archiveWorkflow(runtime, positionals[0]!, (values.reason as string | undefined) ?? null);
      if (ctx.json) printJson(ctx, workflow);
      else ctx.out.write(`archived workflow ${workflow.name}\n`);
      return 0;
    } finally {
      runtime.close();
    }
  },
};

const cancelCommand: CliCommand = {
  spec: cancelSpec,
  async run({ values, positionals }, ctx) {
    const runtime = await openRuntime({ dataDir: ctx.dataDir, clock: ctx.clock });
    try {
      const id = findWorkflowRun(runtime.db, positionals[0]!).id;
      const result = await requestWorkflowCancel(runtime, id, (values.reason as string | undefined) ?? null);
      if (ctx.json) printJson(ctx, result);
      else
        ctx.out.write(
          result.outcome === 'requested'
            ? `workflow run ${id}: cancel requested; its running steps are being stopped\n`
            : result.outcome === 'already requested'
              ? `workflow run ${id}: a cancel was already requested\n`
              : `workflow run ${id}: already ended (${result.status}); nothing to cancel\n`,
        );
      return 0;
    } finally {
      runtime.close();
    }
  },
};

export const commands: Record<string, CliCommand> = {
  'workflows create': createCommand,
  'workflows update': updateCommand,
  'workflows archive': archiveCommand,
  'workflows run': runCommand,
  'workflows cancel': cancelCommand,
  'workflows resume': resumeCommand,
};
