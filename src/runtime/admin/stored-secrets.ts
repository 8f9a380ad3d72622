/**
 * Values stored in clear under names that say they are secrets: `--env` values of loops created
 * before such values were refused, and `env:` values of workflows registered before. One finder
 * for `loops doctor` (stored-secrets) and `loops secrets scrub`.
 *
 * A definition is **live** when it can still start a process: a loop that is active, paused or
 * stopped (it can be resumed), a workflow's latest version while it is not archived. Everything
 * else that holds such a value is **history**: a removed, archived or expired loop (never runs
 * again), an archived workflow, a workflow's older versions — and, not listed here, the
 * `run.claimed` event of every run those definitions started. Scrubbing redefines live
 * definitions forward; history is never rewritten.
 */
import { inlineSecretNames } from '../../events/secret-names.js';
import type { WorkflowSpec } from '../../workflow/spec.js';
import type { LoopView } from '../queries/loops.js';
import type { WorkflowView } from '../queries/workflows.js';

/** Loop states that can still start a run (a stopped loop can be resumed). */
export const LIVE_LOOP_STATES: ReadonlySet<string> = new Set(['active', 'paused', 'stopped']);

export interface StoredSecret {
  /** `loop backup: --env CLI_TOKEN`, `workflow ship, step deploy: env.NPM_TOKEN`, … */
  where: string;
  live: boolean;
}

/** The names in a workflow spec's `env:` and its steps' that hold a secret value, per place. */
export function specSecrets(spec: WorkflowSpec): { env: string[]; steps: Array<{ stepId: string; names: string[] }> } {
  return {
    env: inlineSecretNames(spec.env),
    steps: spec.steps.map((s) => ({ stepId: s.id, names: inlineSecretNames(s.target.env) })).filter((s) => s.names.length > 0),
  };
}

/**
 * Every place a definition holds a secret value: `loops` and `workflows` as listed with removed
 * and archived ones, `older` the workflow versions before each one's latest.
 */
export function storedSecrets(
  loops: readonly LoopView[],
  workflows: readonly WorkflowView[],
  older: ReadonlyArray<{ name: string; version: number; spec: WorkflowSpec }> = [],
): StoredSecret[] {
  const found: StoredSecret[] = [];
  for (const loop of loops) {
    const t = loop.target;
    if (t.kind === 'workflow') continue;
    const live = LIVE_LOOP_STATES.has(loop.status);
    const label = live ? `loop ${loop.name}` : `loop ${loop.name} (${loop.status}${loop.id ? `, ${loop.id}` : ''})`;
    for (const name of inlineSecretNames(t.env, t.notSecret)) found.push({ where: `${label}: --env ${name}`, live });
  }
  const fromSpec = (label: string, spec: WorkflowSpec, live: boolean) => {
    const s = specSecrets(spec);
    for (const name of s.env) found.push({ where: `${label}: env.${name}`, live });
    for (const step of s.steps) for (const name of step.names) found.push({ where: `${label}, step ${step.stepId}: env.${name}`, live });
  };
  for (const workflow of workflows) {
    const live = workflow.status !== 'archived';
    fromSpec(live ? `workflow ${workflow.name}` : `workflow ${workflow.name} (archived)`, workflow.spec, live);
  }
  for (const v of older) fromSpec(`workflow ${v.name} v${v.version}`, v.spec, false);
  return found;
}
