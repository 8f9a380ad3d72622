/**
 * `loops secrets scrub`: live definitions that hold a secret value in clear (stored-secrets.ts) are
 * redefined forward, the value replaced by a reference to the variable of the same name in the
 * runner's environment — never by editing or deleting an event.
 *
 * - **A loop** has no event that changes its definition: it is redefined the way a user would do
 *   it by hand, `loops remove` then `loops create`, in one transaction — the old loop is removed
 *   (its fired or buffered slots and scheduled retries dropped, as `remove` does; the reason names
 *   the new loop), and a new loop with the same name, description, schedule, timing and policies
 *   is created with `--secret-env NAME` in place of `--env NAME=…`, then paused or stopped again if
 *   the old one was. The new loop has a new id; the old one's runs stay with it (`loops runs
 *   <old id>`). Its `--max-runs` counts the runs left; its jitter (derived from the id) differs.
 * - **A workflow** gets its next version (`workflow.updated`, as `loops workflows update` records
 *   it): the names leave `env:` (the workflow's and its steps') and join `secrets:` — which every
 *   step then gets from the runner's environment. The spec file it was read from still holds them.
 *
 * What stays: every event recorded before (the old `loop.created` and each of its runs'
 * `run.claimed`, the workflow's older versions), archive files and backups holding them.
 */
import type { EventData } from '../../events/catalog.js';
import { inlineSecretNames } from '../../events/secret-names.js';
import type { WorkflowSpec } from '../../workflow/spec.js';
import { DurableActor } from '../actor.js';
import { LIVE_LOOP_STATES, specSecrets, storedSecrets } from '../admin/stored-secrets.js';
import { newId } from '../ids.js';
import { listLoops, type LoopView } from '../queries/loops.js';
import { listWorkflows, workflowVersion, workflowVersions, type WorkflowView } from '../queries/workflows.js';
import type { Runtime } from '../runtime.js';
import { queuedWork } from '../daemon/run-queue.js';
import { nextFireAt } from '../../scheduling/planner.js';
import { changeLoopState, recordLoopCreated } from './commands.js';

export interface ScrubbedLoop {
  name: string;
  /** The loop that held the values (removed by the scrub). */
  oldId: string;
  /** The loop that replaces it (null in a dry run, or when it was not redefined). */
  newId: string | null;
  /** Its state, carried over: active, paused or stopped. */
  status: string;
  /** The variables moved from `--env` to `--secret-env`. */
  moved: string[];
  /** Fired or buffered slots and scheduled retries the removal dropped (would drop, in a dry run). */
  dropped: number;
  /** Why it was not redefined, when it was not (e.g. no run left under --max-runs). */
  skipped: string | null;
}

export interface ScrubbedWorkflow {
  name: string;
  id: string;
  fromVersion: number;
  /** The new version (null in a dry run). */
  toVersion: number | null;
  /** Where each moved variable was: `env.GH_TOKEN`, `step deploy: env.NPM_TOKEN`. */
  moved: string[];
  /** The variables now listed under `secrets:`. */
  names: string[];
}

export interface ScrubReport {
  dryRun: boolean;
  loops: ScrubbedLoop[];
  workflows: ScrubbedWorkflow[];
  /** Every variable the runner's environment must now set (the daemon's, and the shell of run-now). */
  mustSet: string[];
  /** What still holds values in the log's history after the scrub (stored-secrets.ts), besides the runs' `run.claimed` events. */
  history: string[];
}

/**
 * Redefines every live definition that holds a secret value (see the top of this file), all in one
 * transaction; with `dryRun`, says what it would do and records nothing.
 */
export async function scrubSecrets(runtime: Runtime, options: { dryRun?: boolean } = {}): Promise<ScrubReport> {
  const dryRun = options.dryRun === true;
  const now = runtime.clock.now();
  const loops = listLoops(runtime.db, { all: true }).filter((l) => LIVE_LOOP_STATES.has(l.status) && l.target.kind !== 'workflow');
  const workflows = listWorkflows(runtime.db, { all: true }).filter((w) => w.status !== 'archived');
  const plans = loops.map((loop) => planLoop(runtime, loop, now)).filter((p) => p !== null);
  const wfPlans = workflows.map(planWorkflow).filter((p) => p !== null);

  const report: ScrubReport = {
    dryRun,
    loops: plans.map((p) => p.report),
    workflows: wfPlans.map((p) => p.report),
    mustSet: [...new Set([...plans.filter((p) => p.report.skipped === null).flatMap((p) => p.report.moved), ...wfPlans.flatMap((p) => p.report.names)])].sort(),
    history: [],
  };
  if (!dryRun && (plans.some((p) => p.report.skipped === null) || wfPlans.length)) {
    await runtime.log.batch(async (batch) => {
      for (const plan of plans) {
        if (plan.report.skipped !== null) continue;
        const { loop, created } = plan;
        await changeLoopState(runtime, loop.id, 'remove', { reason: `replaced by loop ${created.loopId}, its secrets passed by name (loops secrets scrub)`, batch });
        await recordLoopCreated(runtime, created, batch);
        if (loop.status === 'paused' || loop.status === 'stopped') {
          await changeLoopState(runtime, created.loopId, loop.status === 'paused' ? 'pause' : 'stop', { reason: loop.reason, batch });
        }
        plan.report.newId = created.loopId;
      }
      for (const plan of wfPlans) {
        const actor = await DurableActor.load(runtime, `workflow:${plan.workflow.id}`);
        const version = (actor.snapshot.context as { version: number }).version;
        await actor.record('workflow.updated', { version: version + 1, spec: plan.spec, sourceFile: null, sha256: null }, { batch });
        plan.report.toVersion = version + 1;
      }
    });
  }
  report.history = historyAfter(runtime, report);
  return report;
}

function planLoop(runtime: Runtime, loop: LoopView, now: number): { loop: LoopView; created: EventData<'loop.created'>; report: ScrubbedLoop } | null {
  const t = loop.target;
  if (t.kind === 'workflow') return null;
  const moved = inlineSecretNames(t.env, t.notSecret);
  if (moved.length === 0) return null;
  const env = Object.fromEntries(Object.entries(t.env).filter(([k]) => !moved.includes(k)));
  const secretEnv = [...new Set([...(t.secretEnv ?? []), ...moved])];
  const notSecret = (t.notSecret ?? []).filter((n) => Object.hasOwn(env, n));
  const target = { ...t, env, secretEnv };
  if (notSecret.length) target.notSecret = notSecret;
  else delete target.notSecret;
  const maxRuns = loop.timing.maxRuns === null ? null : loop.timing.maxRuns - loop.scheduledRuns;
  const loopId = newId('loop', now);
  const timing = { ...loop.timing, maxRuns };
  const report: ScrubbedLoop = {
    name: loop.name,
    oldId: loop.id,
    newId: null,
    status: loop.status,
    moved,
    dropped: queuedWork(runtime, loop.id).length,
    skipped: maxRuns !== null && maxRuns < 1 ? `it has no run left under --max-runs ${loop.timing.maxRuns}: remove it (loops remove ${loop.name})` : null,
  };
  const created: EventData<'loop.created'> = {
    loopId,
    name: loop.name,
    description: loop.description,
    schedule: loop.schedule,
    timing: maxRuns !== null && maxRuns < 1 ? loop.timing : timing,
    target,
    policies: loop.policies,
    nextRunAt: maxRuns !== null && maxRuns < 1 ? null : nextFireAt({ id: loopId, schedule: loop.schedule, timing }, now, 0),
  };
  return { loop, created, report };
}

function planWorkflow(workflow: WorkflowView): { workflow: WorkflowView; spec: WorkflowSpec; report: ScrubbedWorkflow } | null {
  const found = specSecrets(workflow.spec);
  if (found.env.length === 0 && found.steps.length === 0) return null;
  const names = [...new Set([...found.env, ...found.steps.flatMap((s) => s.names)])];
  const without = (env: Record<string, string>, drop: readonly string[]) => Object.fromEntries(Object.entries(env).filter(([k]) => !drop.includes(k)));
  const spec: WorkflowSpec = {
    ...workflow.spec,
    env: without(workflow.spec.env, found.env),
    secrets: [...new Set([...workflow.spec.secrets, ...names])],
    steps: workflow.spec.steps.map((step) => {
      const drop = found.steps.find((s) => s.stepId === step.id)?.names ?? [];
      return drop.length ? { ...step, target: { ...step.target, env: without(step.target.env, drop) } } : step;
    }),
  };
  const moved = [...found.env.map((n) => `env.${n}`), ...found.steps.flatMap((s) => s.names.map((n) => `step ${s.stepId}: env.${n}`))];
  return { workflow, spec, report: { name: workflow.name, id: workflow.id, fromVersion: workflow.version, toVersion: null, moved, names } };
}

/** What the log's history holds after the scrub (or would, after a dry run). */
function historyAfter(runtime: Runtime, report: ScrubReport): string[] {
  const loops = listLoops(runtime.db, { all: true }).map((l) =>
    // In a dry run, the loops it would replace count as removed.
    report.dryRun && report.loops.some((r) => r.oldId === l.id && r.skipped === null) ? { ...l, status: 'removed' } : l,
  );
  const workflows = listWorkflows(runtime.db, { all: true });
  const older: Array<{ name: string; version: number; spec: WorkflowSpec }> = [];
  for (const wf of workflows) {
    for (const v of workflowVersions(runtime.db, wf.id)) {
      if (v.version !== wf.version || (report.dryRun && report.workflows.some((r) => r.id === wf.id))) {
        older.push({ name: wf.name, version: v.version, spec: workflowVersion(runtime.db, wf.id, v.version).spec });
      }
    }
  }
  const dryWorkflows = report.dryRun ? workflows.filter((w) => !report.workflows.some((r) => r.id === w.id)) : workflows;
  return storedSecrets(loops, dryWorkflows, older)
    .filter((f) => !f.live)
    .map((f) => f.where);
}
