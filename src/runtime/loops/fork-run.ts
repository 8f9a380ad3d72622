/**
 * `loops fork` and `loops rerun` for any run: a workflow run (by hand or a workflow loop's run)
 * goes to ../workflows/fork.ts; a command or agent loop's run has one step, so its fork or rerun is
 * a new run (an ad-hoc slot, like run-now's) of the same definition version — the target and
 * policies its parent was claimed with, not the loop's current ones — through the one attempt path.
 * Either way the child's start records `forkedFrom`, and the parent's stream gets `stream.forked`
 * naming the child, in the same transaction.
 *
 * A workflow loop's run is forked as a run of that loop (its claimed target), whose workflow run is
 * the fork of the parent's workflow run (its pinned spec version, the reused steps): the loop sees
 * it as one of its runs, for overlap too.
 *
 * Both respect the loop's overlap policy, read by the planner's one rule (`overlapVerdict`): while a
 * run of the loop is going, a policy that would skip or buffer a slot holds the fork back (a
 * conflict, exit 75: try again once it ended); only `allow` runs it alongside. A fork is never
 * queued.
 */
import type { ForkedFrom } from '../../events/catalog.js';
import { LoopsError, NotFoundError, UsageError } from '../../events/errors.js';
import { OVERLAP } from '../../events/policies.js';
import type { RunContext } from '../../machines/run.js';
import { overlapVerdict } from '../../scheduling/planner.js';
import { DurableActor } from '../actor.js';
import { executeRun, type RunNowOptions } from '../execution/attempt.js';
import { newId } from '../ids.js';
import { findLoop, findRun, type RunView } from '../queries/loops.js';
import { findWorkflowRun, type WorkflowRunView } from '../queries/workflows.js';
import type { Runtime } from '../runtime.js';
import { executeWorkflowFork, noteOnParent, planWorkflowFork, type ForkRequest, type WorkflowForkPlan } from '../workflows/fork.js';
import type { RunWorkflowOptions } from '../workflows/runner.js';
import { bufferedCount, runningRunsAt } from './decisions.js';

/** A fork or rerun of a command or agent loop's run: one step, run again. */
export interface RunForkPlan {
  kind: 'run';
  parentRunId: string;
  loopId: string;
  loopName: string;
  forkedFrom: ForkedFrom;
  steps: Array<{ stepId: string; action: 'run'; parentStatus: string; why: string }>;
  context: RunContext;
}

export type ForkPlan = WorkflowForkPlan | RunForkPlan;

/** The one step name of a command or agent run (what `--from` may name). */
export const RUN_STEP = 'run';

/** Plans a fork or rerun of run `idOrPrefix` (a loop run's or a workflow run's id); appends nothing. */
export async function planFork(runtime: Runtime, idOrPrefix: string, request: ForkRequest): Promise<ForkPlan> {
  const run = findAnyRun(runtime, idOrPrefix);
  if (run.kind === 'wfrun') return planWorkflowFork(runtime, run.id, request);
  const actor = await DurableActor.load(runtime, `run:${run.id}`);
  const context = actor.context as RunContext;
  if (context.target === null || context.policies === null || context.loopId === null) {
    throw new UsageError(`run ${run.id} cannot be forked: its history does not record its claim (archived?)`, { hint: 'fork a run whose events are in the log' });
  }
  if (context.target.kind === 'workflow') {
    // A workflow loop's run: fork its workflow run; the parent named is the loop run.
    const started = (await runtime.log.readStream(`run:${run.id}`)).find((e) => e.type === 'run.workflow_started');
    if (!started) throw new UsageError(`run ${run.id} of workflow loop ${context.loopName} never started its workflow run: nothing to fork`, { hint: `loops rerun ${run.id} is not possible either; loops run-now ${context.loopName} starts a new one` });
    const plan = await planWorkflowFork(runtime, (started.data as { wfRunId: string }).wfRunId, { ...request, parentRunId: run.id });
    return { ...plan, loopRun: { target: context.target, policies: context.policies } };
  }
  if (request.setOutputs?.length) {
    throw new UsageError(`--set-output: run ${run.id} is a ${context.target.kind} run, which has no step outputs to reuse`, { hint: 'it has one step, which runs again' });
  }
  if (request.how === 'fork' && request.from != null && request.from !== RUN_STEP && request.from !== '1') {
    throw new UsageError(`--from ${request.from}: a ${context.target.kind} run has one step, ${RUN_STEP}`, { hint: `loops fork ${run.id} --from ${RUN_STEP}` });
  }
  const status = findRun(runtime.db, run.id).status;
  if (request.how === 'rerun-failed' && status === 'succeeded') {
    throw new UsageError(`rerun --failed: run ${run.id} succeeded; nothing failed to run again`, { hint: `loops rerun ${run.id} runs it again` });
  }
  return {
    kind: 'run',
    parentRunId: run.id,
    loopId: context.loopId,
    loopName: context.loopName ?? context.loopId,
    forkedFrom: { runId: run.id, from: request.how === 'fork' ? RUN_STEP : null, reason: request.reason ?? null, how: request.how },
    steps: [{ stepId: RUN_STEP, action: 'run', parentStatus: status, why: `a ${context.target.kind} run has one step` }],
    context,
  };
}

/**
 * Why the loop's overlap policy holds a new run of it back now (a run of it is going, and the policy
 * would skip or buffer a slot), or null when it may start.
 */
export async function overlapHold(runtime: Runtime, loopId: string): Promise<string | null> {
  const loop = findLoop(runtime.db, loopId, { includeRemoved: true });
  const running = await runningRunsAt(runtime, loopId, runtime.clock.now());
  const verdict = overlapVerdict(OVERLAP.policies[loop.policies.overlap], running.length, bufferedCount(runtime, loopId));
  if (!verdict.blocked && !verdict.buffering) return null;
  return `loop ${loop.name} has overlap ${loop.policies.overlap} and run ${running[0] ?? '(a buffered slot)'} is going`;
}

/** What a fork or rerun started, once it ended. */
export type ForkResult = { kind: 'run'; run: RunView } | { kind: 'workflow'; run: WorkflowRunView };

/** Runs the planned fork or rerun to its end in this process (after the overlap check). */
export async function executeFork(
  runtime: Runtime,
  plan: ForkPlan,
  options: { run?: RunNowOptions; workflow?: RunWorkflowOptions } = {},
): Promise<ForkResult> {
  if (plan.steps.every((s) => s.action === 'reuse')) {
    throw new UsageError(`${plan.forkedFrom.how === 'fork' ? 'fork' : 'rerun'} of ${plan.parentRunId}: every step's result would be reused, nothing would run again`, {
      hint: plan.forkedFrom.how === 'rerun-failed' ? 'no step of it failed or was skipped; loops rerun without --failed runs it all again' : 'fork from an earlier step or version',
    });
  }
  const loopId = plan.loopId;
  if (loopId !== null) {
    const held = await overlapHold(runtime, loopId);
    if (held) {
      throw new LoopsError('conflict', `${plan.forkedFrom.how === 'fork' ? 'fork' : 'rerun'} of ${plan.parentRunId} held back: ${held}`, {
        hint: 'try again once that run ended (or set the loop to --overlap allow)',
        retryable: true,
      });
    }
  }
  if (plan.kind === 'workflow' && !plan.loopRun) return { kind: 'workflow', run: await executeWorkflowFork(runtime, plan, options.workflow ?? {}) };
  // A loop run: of the target and policies its parent was claimed with; a workflow loop's run runs
  // its workflow run on the parent's pinned spec version, reusing the planned steps.
  const loop = findLoop(runtime.db, plan.loopId!, { includeRemoved: true });
  const claimed = plan.kind === 'workflow' ? plan.loopRun! : { target: plan.context.target!, policies: plan.context.policies! };
  const now = runtime.clock.now();
  const runId = newId('run', now);
  const run = await executeRun(runtime, { ...loop, ...claimed }, {
    ...options.run,
    runId,
    slot: `manual:${runId}`,
    scheduledFor: new Date(now).toISOString(),
    trigger: 'manual',
    forkedFrom: plan.forkedFrom,
    withClaim: noteOnParent(runtime, `run:${plan.parentRunId}`, runId, plan.forkedFrom),
    ...(plan.kind === 'workflow'
      ? {
          workflowRun: {
            pinned: { workflowId: plan.workflowId, workflowName: plan.workflowName, version: plan.version, spec: plan.spec, inputs: plan.inputs },
            fork: { forkedFrom: plan.forkedFrom, reused: plan.reused },
          },
        }
      : {}),
  });
  return { kind: 'run', run };
}

function findAnyRun(runtime: Runtime, idOrPrefix: string): { kind: 'run' | 'wfrun'; id: string } {
  try {
    return { kind: 'run', id: findRun(runtime.db, idOrPrefix).id };
  } catch (error) {
    if (!(error instanceof NotFoundError)) throw error;
  }
  try {
    return { kind: 'wfrun', id: findWorkflowRun(runtime.db, idOrPrefix).id };
  } catch (error) {
    if (!(error instanceof NotFoundError)) throw error;
    throw new NotFoundError(`no run or workflow run ${JSON.stringify(idOrPrefix)}`, { hint: 'loops runs and loops workflows runs list them' });
  }
}
