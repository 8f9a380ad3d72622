import { UsageError } from '../../events/errors.js';
import { openRuntime } from '../../runtime/runtime.js';
import { executeFork, planFork, type ForkPlan, type ForkResult } from '../../runtime/loops/fork-run.js';
import { parseSetOutput, type ForkRequest } from '../../runtime/workflows/fork.js';
import { JSON_OPTION, type CommandSpec } from '../args.js';
import type { CliCommand, CliContext } from '../context.js';
import { exitCodeForRunStatus } from '../exit-codes.js';
import { durationText, paint, printJson, statusColor } from '../render.js';

const EXITS = 'Exit code: 0 succeeded, 3 failed, 4 timed out, 5 cancelled; 2 bad input; 75 held back by the loop\'s overlap policy (a run of it is going).';

const forkSpec: CommandSpec = {
  name: 'fork',
  summary: 'run a run again from a step, reusing the recorded results of the steps before it',
  description: [
    'A new run of the same definition version (the workflow spec version the parent ran; a loop run\'s target and',
    'policies as claimed), linked to its parent: the child records forkedFrom, the parent a stream.forked event.',
    'Steps before the fork point keep their recorded status, exit code and outputs and are not run; a step whose',
    'output was masked as a secret runs again unless --set-output gives it. A command or agent run has one step, run.',
    EXITS,
  ].join('\n'),
  positionals: [{ name: 'run', required: true, description: 'run id (a loop run or a workflow run), or a unique prefix' }],
  options: {
    from: { type: 'string', value: '<step|version>', description: 'the fork point: a step id, or a version of the parent\'s stream (loops events)' },
    'set-output': { type: 'string', multiple: true, value: '<step>.<key>=<value>', description: 'override a reused step\'s recorded output' },
    reason: { type: 'string', value: '<text>', description: 'why (recorded on both runs)' },
    'dry-run': { type: 'boolean', description: 'print which steps would be reused and which run again; record nothing' },
    json: JSON_OPTION,
  },
  examples: ['loops fork wfrun_01J… --from deploy', 'loops fork wfrun_01J… --from test --set-output build.version=1.2.3 --dry-run'],
};

const rerunSpec: CommandSpec = {
  name: 'rerun',
  summary: 'run a run again: a fresh run of the same definition version, linked to its parent',
  description: ['--failed runs only the failed and skipped steps of a workflow run again (the others\' results are reused).', EXITS].join('\n'),
  positionals: [{ name: 'run', required: true, description: 'run id (a loop run or a workflow run), or a unique prefix' }],
  options: {
    failed: { type: 'boolean', description: 'only the failed and skipped steps (workflow runs)' },
    reason: { type: 'string', value: '<text>', description: 'why (recorded on both runs)' },
    'dry-run': { type: 'boolean', description: 'print which steps would be reused and which run again; record nothing' },
    json: JSON_OPTION,
  },
  examples: ['loops rerun run_01J…', 'loops rerun wfrun_01J… --failed'],
};

function planJson(plan: ForkPlan) {
  return {
    parentRunId: plan.parentRunId,
    kind: plan.kind,
    forkedFrom: plan.forkedFrom,
    ...(plan.kind === 'workflow' ? { workflow: plan.workflowName, version: plan.version } : { loop: plan.loopName }),
    steps: plan.steps,
  };
}

function printPlan(plan: ForkPlan, ctx: CliContext): void {
  const what = plan.kind === 'workflow' ? `workflow ${plan.workflowName} version ${plan.version}` : `loop ${plan.loopName}`;
  ctx.out.write(`${plan.forkedFrom.how} of ${plan.parentRunId} (${what}):\n`);
  const width = Math.max(...plan.steps.map((s) => s.stepId.length));
  for (const s of plan.steps) {
    const action = paint(ctx.color, s.action === 'reuse' ? 'gray' : 'cyan', s.action === 'reuse' ? 'reuse' : 'run  ');
    ctx.out.write(`  ${action}  ${s.stepId.padEnd(width)}  ${s.parentStatus.padEnd(9)}  ${s.why}\n`);
  }
}

function printResult(result: ForkResult, ctx: CliContext): void {
  const run = result.run;
  const status = paint(ctx.color, statusColor(run.status), run.status);
  const detail = run.status === 'succeeded' ? '' : (run.error ?? '');
  (run.status === 'succeeded' ? ctx.out : ctx.err).write(`${result.kind === 'workflow' ? 'workflow run' : 'run'} ${run.id} ${status} in ${durationText(run.durationMs)}${detail ? ` (${detail})` : ''}\n`);
}

async function forkOrRerun(positional: string, request: ForkRequest, dryRun: boolean, ctx: CliContext): Promise<number> {
  const runtime = await openRuntime({ dataDir: ctx.dataDir, clock: ctx.clock });
  const controller = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => controller.abort(`interrupted by ${signal}`);
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    const plan = await planFork(runtime, positional, request);
    if (dryRun) {
      if (ctx.json) printJson(ctx, { dryRun: true, ...planJson(plan) });
      else printPlan(plan, ctx);
      return 0;
    }
    if (!ctx.json && ctx.err.isTTY) printPlan(plan, { ...ctx, out: ctx.err });
    const result = await executeFork(runtime, plan, { run: { signal: controller.signal }, workflow: { signal: controller.signal } });
    if (ctx.json) printJson(ctx, { kind: result.kind, forkedFrom: plan.forkedFrom, steps: plan.steps, run: result.run });
    else printResult(result, ctx);
    return exitCodeForRunStatus(result.run.status);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    runtime.close();
  }
}

const forkCommand: CliCommand = {
  spec: forkSpec,
  async run({ values, positionals }, ctx) {
    const from = values.from as string | undefined;
    if (from === undefined) throw new UsageError('loops fork: --from <step|version> is required', { hint: 'loops rerun runs a run again from its start' });
    const sets = ((values['set-output'] as string[] | undefined) ?? []).map(parseSetOutput);
    const reason = (values.reason as string | undefined) ?? null;
    return forkOrRerun(positionals[0]!, { how: 'fork', from, setOutputs: sets, reason }, values['dry-run'] === true, ctx);
  },
};

const rerunCommand: CliCommand = {
  spec: rerunSpec,
  async run({ values, positionals }, ctx) {
    const reason = (values.reason as string | undefined) ?? null;
    return forkOrRerun(positionals[0]!, { how: values.failed === true ? 'rerun-failed' : 'rerun', reason }, values['dry-run'] === true, ctx);
  },
};

export const commands: Record<string, CliCommand> = { fork: forkCommand, rerun: rerunCommand };
