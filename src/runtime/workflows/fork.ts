/**
 * Forking and rerunning a workflow run (`loops fork`, `loops rerun`): a new run of the parent's
 * pinned spec version, with the parent's inputs, that reuses the recorded result (status, exit
 * code, outputs, agent report) of every step before the fork point and runs the rest. It extends
 * what `resume` does — a step whose result is recorded is not run again — to a new stream: its
 * `wfrun.started` lists the reused steps (`reuse`, each `reusing`), and `step.reused` events in the
 * same transaction give each its result, so planning (src/machines/workflow-run.ts) starts only the
 * others, and a reused step never spawns.
 *
 * Which steps are reused: `fork --from <step>`, the steps before it in the spec's order (the
 * predecessor's depth-first order, `sequentialOrder`); `fork --from <version>`, the steps that had
 * ended at that version of the parent's stream; `rerun --failed`, the steps that succeeded; `rerun`,
 * none. A step to reuse must have ended; one whose recorded output was masked as a secret runs again
 * unless `--set-output` gives every masked key; and every step that needs (directly or not) a step
 * that runs again runs again too, so a reused result never stands on a step being redone.
 */
import { fold } from '../../machines/fold.js';
import { getMachine } from '../../machines/registry.js';
import { stepOf, TERMINAL_STEP_STATUSES, type StepState, type WorkflowRunContext } from '../../machines/workflow-run.js';
import type { EventData, ForkedFrom, LoopPolicies, Target } from '../../events/catalog.js';
import { LoopsError, NotFoundError, UsageError } from '../../events/errors.js';
import type { Batch, StoredEvent } from '../../events/types.js';
import { sequentialOrder, type WorkflowSpec } from '../../workflow/spec.js';
import { newId } from '../ids.js';
import { DurableActor } from '../actor.js';
import type { Runtime } from '../runtime.js';
import { runSecrets } from '../execution/run-secrets.js';
import { DEFAULT_MASK, maskDeep, SecretMasker } from '../execution/secrets.js';
import { findWorkflowRun, type WorkflowRunView } from '../queries/workflows.js';
import { executeWorkflowRun, type RunWorkflowOptions } from './runner.js';

/** `--set-output <step>.<key>=<value>`. */
export interface SetOutput {
  stepId: string;
  key: string;
  value: string;
}

/** What the user asked for. */
export interface ForkRequest {
  how: ForkedFrom['how'];
  /** `fork --from`: a step id, or a version of the parent's stream (digits). */
  from?: string | null;
  setOutputs?: SetOutput[];
  reason?: string | null;
  /** The id the user named the parent by (a loop run's, when it was a workflow loop's run); default the workflow run's. */
  parentRunId?: string;
}

/** One step of the plan: reused (its recorded result) or run again, and why. */
export interface ForkStepPlan {
  stepId: string;
  action: 'reuse' | 'run';
  /** Its status in the parent (at the fork version, for `--from <version>`). */
  parentStatus: string;
  why: string;
}

/** What a fork or rerun of a workflow run will do. */
export interface WorkflowForkPlan {
  kind: 'workflow';
  parentRunId: string;
  parentWfRunId: string;
  workflowId: string;
  workflowName: string;
  version: number;
  spec: WorkflowSpec;
  inputs: Record<string, string>;
  loopId: string | null;
  forkedFrom: ForkedFrom;
  steps: ForkStepPlan[];
  /** The `step.reused` of each reused step. */
  reused: Record<string, EventData<'step.reused'>>;
  /** A workflow loop's run was named: the child is a run of that loop, with this target and policies (its parent's claim). */
  loopRun?: { target: Target; policies: LoopPolicies };
}

/** Parses `<step>.<key>=<value>` (the step id is up to the first dot). */
export function parseSetOutput(text: string): SetOutput {
  const eq = text.indexOf('=');
  const dot = text.indexOf('.');
  if (eq <= 0 || dot <= 0 || dot > eq - 2) {
    throw new UsageError(`--set-output ${JSON.stringify(text)}: expected <step>.<key>=<value>`, { hint: 'e.g. --set-output build.version=1.2.3' });
  }
  return { stepId: text.slice(0, dot), key: text.slice(dot + 1, eq), value: text.slice(eq + 1) };
}

function descendantsOf(spec: WorkflowSpec, ids: Set<string>): Set<string> {
  const out = new Set(ids);
  for (let changed = true; changed; ) {
    changed = false;
    for (const step of spec.steps) {
      if (!out.has(step.id) && step.needs.some((n) => out.has(n))) {
        out.add(step.id);
        changed = true;
      }
    }
  }
  return out;
}

/** The parent's recorded context, at its end or at stream version `atVersion`, and its events. */
async function parentState(runtime: Runtime, wfRunId: string, atVersion: number | null): Promise<{ context: WorkflowRunContext; events: StoredEvent[] }> {
  const streamId = `wfrun:${wfRunId}`;
  const info = await runtime.log.streamInfo(streamId);
  if (!info || info.machineId === null || info.machineVersion === null) throw new NotFoundError(`no workflow run ${wfRunId} in the log`);
  const machine = getMachine({ id: info.machineId, version: info.machineVersion });
  if (!machine) throw new LoopsError('format_version', `${streamId} was written by ${info.machineId}@${info.machineVersion}, which this loops does not know`);
  const all = await runtime.log.readStream(streamId);
  if (atVersion !== null && (atVersion < 1 || atVersion > all.length)) {
    throw new UsageError(`--from ${atVersion}: workflow run ${wfRunId} has versions 1 to ${all.length}`, { hint: `loops events ${wfRunId} lists them` });
  }
  const events = atVersion === null ? all : all.filter((e) => e.version <= atVersion);
  const context = fold(machine, events).snapshot.context as WorkflowRunContext;
  if (context.spec === null) {
    throw new UsageError(`workflow run ${wfRunId} cannot be forked: its history ${all[0]?.type === 'stream.archived' ? 'was archived (loops prune --archive)' : 'does not start it'}`, {
      hint: 'fork a run whose events are in the log',
    });
  }
  return { context, events };
}

/** The agent report of a step's last ended attempt, from the parent's events. */
function agentOf(events: StoredEvent[], stepId: string): EventData<'step.reused'>['agent'] {
  const exited = events.findLast((e) => e.type === 'step.exited' && (e.data as EventData<'step.exited'>).stepId === stepId);
  return (exited?.data as EventData<'step.exited'> | undefined)?.agent ?? null;
}

/** Plans a fork or rerun of workflow run `wfRunIdOrPrefix`; appends nothing. */
export async function planWorkflowFork(runtime: Runtime, wfRunIdOrPrefix: string, request: ForkRequest): Promise<WorkflowForkPlan> {
  const view = findWorkflowRun(runtime.db, wfRunIdOrPrefix);
  const from = request.how === 'fork' ? (request.from ?? null) : null;
  const atVersion = from !== null && /^\d+$/.test(from) ? Number(from) : null;
  const { context, events } = await parentState(runtime, view.id, atVersion);
  const spec = context.spec!;
  const order = sequentialOrder(spec);
  if (from !== null && atVersion === null && !order.includes(from)) {
    throw new UsageError(`--from ${from}: workflow ${spec.name} (version ${context.version}) has no step ${JSON.stringify(from)}`, {
      hint: `its steps: ${order.join(', ')}; or give a version of the run's stream (loops events ${view.id})`,
    });
  }
  const sets = request.setOutputs ?? [];
  for (const s of sets) {
    if (!order.includes(s.stepId)) {
      throw new UsageError(`--set-output ${s.stepId}.${s.key}: workflow ${spec.name} has no step ${JSON.stringify(s.stepId)}`, { hint: `its steps: ${order.join(', ')}` });
    }
  }
  const masked = (s: StepState) => (spec.secrets.length === 0 ? [] : Object.keys(s.outputs).filter((k) => s.outputs[k]!.includes(DEFAULT_MASK)));
  // First what each step would be on its own, then the closure: what needs a step run again runs again.
  const wanted = new Map<string, { reuse: boolean; why: string }>();
  const fromIndex = from !== null && atVersion === null ? order.indexOf(from) : -1;
  order.forEach((id, i) => {
    const s = stepOf(context, id)!;
    const ended = TERMINAL_STEP_STATUSES.has(s.status);
    let w: { reuse: boolean; why: string };
    if (request.how === 'rerun') w = { reuse: false, why: 'rerun runs every step' };
    else if (request.how === 'rerun-failed') w = s.status === 'succeeded' ? { reuse: true, why: 'it succeeded' } : { reuse: false, why: `it ${s.status === 'skipped' ? 'was skipped' : ended ? s.status : 'did not end'}` };
    else if (fromIndex >= 0 && i >= fromIndex) w = { reuse: false, why: i === fromIndex ? 'the fork point' : `after the fork point ${from}` };
    else if (!ended) w = { reuse: false, why: atVersion !== null ? `it had not ended at version ${atVersion}` : 'it did not end' };
    else w = { reuse: true, why: atVersion !== null ? `ended at version ${atVersion}` : `before the fork point ${from}` };
    if (w.reuse) {
      const hidden = masked(s).filter((k) => !sets.some((x) => x.stepId === id && x.key === k));
      if (hidden.length) w = { reuse: false, why: `its output ${hidden.join(', ')} was masked as a secret (give it with --set-output ${id}.${hidden[0]}=<value>)` };
    }
    wanted.set(id, w);
  });
  const again = descendantsOf(spec, new Set(order.filter((id) => !wanted.get(id)!.reuse)));
  const steps: ForkStepPlan[] = order.map((id) => {
    const w = wanted.get(id)!;
    const parentStatus = stepOf(context, id)!.status;
    if (w.reuse && again.has(id)) {
      const need = spec.steps.find((s) => s.id === id)!.needs.find((n) => again.has(n));
      return { stepId: id, action: 'run', parentStatus, why: `it needs ${need}, which runs again` };
    }
    return { stepId: id, action: w.reuse ? 'reuse' : 'run', parentStatus, why: w.why };
  });
  // --set-output: a reused step's recorded key only.
  const masker = sets.length ? new SecretMasker(runSecrets(spec.secrets)) : null;
  const reused: Record<string, EventData<'step.reused'>> = {};
  for (const p of steps) {
    if (p.action !== 'reuse') continue;
    const s = stepOf(context, p.stepId)!;
    reused[p.stepId] = {
      stepId: p.stepId,
      fromRunId: view.id,
      status: s.status as EventData<'step.reused'>['status'],
      exitCode: s.exitCode,
      signal: s.signal,
      error: s.error,
      outputs: { ...s.outputs },
      set: [],
      agent: agentOf(events, p.stepId),
      reason: s.status === 'skipped' ? s.reason : null,
    };
  }
  for (const s of sets) {
    const r = reused[s.stepId];
    if (!r) {
      const p = steps.find((x) => x.stepId === s.stepId)!;
      throw new UsageError(`--set-output ${s.stepId}.${s.key}: step ${s.stepId} runs again in this ${request.how === 'fork' ? 'fork' : 'rerun'} (${p.why})`, {
        hint: '--set-output sets the output of a step whose result is reused (one before the fork point)',
      });
    }
    const known = Object.keys(stepOf(context, s.stepId)!.outputs);
    if (!known.includes(s.key)) {
      throw new UsageError(`--set-output ${s.stepId}.${s.key}: step ${s.stepId} recorded no output ${JSON.stringify(s.key)}`, {
        hint: known.length ? `its outputs: ${known.join(', ')}` : 'it recorded no outputs',
      });
    }
    r.outputs[s.key] = masker!.empty ? s.value : maskDeep(s.value, masker!);
    if (!r.set.includes(s.key)) r.set.push(s.key);
  }
  return {
    kind: 'workflow',
    parentRunId: request.parentRunId ?? view.id,
    parentWfRunId: view.id,
    workflowId: context.workflowId!,
    workflowName: context.workflowName!,
    version: context.version!,
    spec,
    inputs: context.inputs,
    loopId: context.loopId,
    forkedFrom: { runId: request.parentRunId ?? view.id, from: request.how === 'fork' ? from : null, reason: request.reason ?? null, how: request.how },
    steps,
    reused,
  };
}

/** The parent's note naming the child (an annotation: its machine never sees it), in the child's start transaction. */
export function noteOnParent(runtime: Runtime, parentStreamId: string, childRunId: string, forkedFrom: ForkedFrom): (batch: Batch) => Promise<unknown> {
  return async (batch) => {
    const parent = await DurableActor.load(runtime, parentStreamId);
    await parent.record('stream.forked', { childRunId, forkedFrom } satisfies EventData<'stream.forked'>, { batch });
  };
}

/** Starts the planned fork as a new workflow run and runs it to its end in this process. */
export async function executeWorkflowFork(runtime: Runtime, plan: WorkflowForkPlan, options: RunWorkflowOptions = {}): Promise<WorkflowRunView> {
  const wfRunId = options.wfRunId ?? newId('wfrun', runtime.clock.now());
  const parentStream = plan.parentRunId === plan.parentWfRunId ? `wfrun:${plan.parentWfRunId}` : `run:${plan.parentRunId}`;
  return executeWorkflowRun(
    runtime,
    { workflowId: plan.workflowId, workflowName: plan.workflowName, version: plan.version, spec: plan.spec, inputs: plan.inputs },
    {
      ...options,
      wfRunId,
      trigger: 'manual',
      loopId: plan.loopId,
      fork: { forkedFrom: plan.forkedFrom, reused: plan.reused },
      withStart: noteOnParent(runtime, parentStream, wfRunId, plan.forkedFrom),
    },
  );
}
