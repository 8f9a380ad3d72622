/**
 * Workflow specs in the log: `create` stores version 1 of a spec file, `update` the next version,
 * `archive` hides it from new runs. Every version is an event on the workflow's stream; runs pin
 * the version they started with, so a spec change never affects a run already started.
 */
import { dirname, isAbsolute, resolve } from 'node:path';
import type { EventData } from '../../events/catalog.js';
import { AlreadyExistsError, InvalidTransitionError, ValidationError, uniqueViolation } from '../../events/errors.js';
import { hasTemplate } from '../../workflow/expr.js';
import type { WorkflowSpec } from '../../workflow/spec.js';
import { currentMachines } from '../../machines/registry.js';
import { DurableActor } from '../actor.js';
import { newId } from '../ids.js';
import type { Runtime } from '../runtime.js';
import { loadWorkflowFile, type LoadedWorkflow, type ParseOptions } from './files.js';
import { findWorkflow, type WorkflowView } from '../queries/workflows.js';

export interface StoredWorkflow {
  workflow: WorkflowView;
  warnings: string[];
}

/**
 * Relative `cwd` and `promptFile` are read against the spec file's directory, once, when the spec
 * is stored: the log then holds absolute paths, and a run does not depend on where the CLI was
 * started.
 */
export function anchorPaths(spec: WorkflowSpec, file: string | null): WorkflowSpec {
  if (file === null) return spec;
  const base = dirname(resolve(file));
  const fix = (p: string | null) => (p === null || isAbsolute(p) || hasTemplate(p) ? p : resolve(base, p));
  return {
    ...spec,
    steps: spec.steps.map((step) => ({
      ...step,
      target:
        step.target.type === 'command'
          ? { ...step.target, cwd: fix(step.target.cwd) }
          : { ...step.target, cwd: fix(step.target.cwd), promptFile: fix(step.target.promptFile) },
    })),
  };
}

function load(file: string, options: ParseOptions = {}): LoadedWorkflow & { spec: WorkflowSpec } {
  const loaded = loadWorkflowFile(file, options);
  return { ...loaded, spec: anchorPaths(loaded.spec, file) };
}

/** Stores version 1 of the spec in `file` (its `name` names the workflow, unless `options.name` is given). */
export async function createWorkflow(runtime: Runtime, file: string, options: ParseOptions = {}): Promise<StoredWorkflow> {
  const loaded = load(file, options);
  const name = loaded.spec.name;
  if (runtime.db.prepare('SELECT id FROM workflows WHERE live_name = ?').get(name)) throw nameTaken(name);
  const workflowId = newId('wf', runtime.clock.now());
  const data: EventData<'workflow.created'> = {
    workflowId,
    name,
    version: 1,
    spec: loaded.spec,
    sourceFile: resolve(file),
    sha256: loaded.sha256,
  };
  const actor = DurableActor.create(runtime, `workflow:${workflowId}`, 'workflow', currentMachines.workflow);
  try {
    await actor.record('workflow.created', data);
  } catch (error) {
    if (uniqueViolation(error)?.includes('live_name')) throw nameTaken(name);
    throw error;
  }
  return { workflow: findWorkflow(runtime.db, workflowId), warnings: loaded.warnings };
}

/** Stores the spec in `file` as the next version of workflow `idOrName`. */
export async function updateWorkflow(runtime: Runtime, idOrName: string, file: string): Promise<StoredWorkflow & { unchanged: boolean }> {
  const current = findWorkflow(runtime.db, idOrName);
  const loaded = load(file);
  if (loaded.spec.name !== current.name) {
    throw new ValidationError(`${file}: name: the spec is named ${JSON.stringify(loaded.spec.name)}, not ${JSON.stringify(current.name)}`, {
      hint: `a workflow keeps its name across versions; set name: ${current.name} in the file, or create a new workflow with loops workflows create ${file}`,
    });
  }
  if (current.status === 'archived') {
    throw new InvalidTransitionError(`workflow ${current.name} is archived`, { hint: 'archived workflows keep their history only; create a new one' });
  }
  const actor = await DurableActor.load(runtime, `workflow:${current.id}`);
  const version = (actor.snapshot.context as { version: number }).version;
  // The same spec again is not a new version.
  if (JSON.stringify((actor.snapshot.context as { spec: WorkflowSpec }).spec) === JSON.stringify(loaded.spec)) {
    return { workflow: current, warnings: loaded.warnings, unchanged: true };
  }
  await actor.record('workflow.updated', { version: version + 1, spec: loaded.spec, sourceFile: resolve(file), sha256: loaded.sha256 });
  return { workflow: findWorkflow(runtime.db, current.id), warnings: loaded.warnings, unchanged: false };
}

/** Hides the workflow from new runs; its versions and runs stay. */
export async function archiveWorkflow(runtime: Runtime, idOrName: string, reason: string | null): Promise<WorkflowView> {
  const current = findWorkflow(runtime.db, idOrName, { includeArchived: true });
  const actor = await DurableActor.load(runtime, `workflow:${current.id}`);
  if (actor.state !== 'active') {
    throw new InvalidTransitionError(`workflow ${current.name} is already ${actor.state}`);
  }
  await actor.record('workflow.archived', { reason });
  return findWorkflow(runtime.db, current.id, { includeArchived: true });
}

function nameTaken(name: string): AlreadyExistsError {
  return new AlreadyExistsError(`a workflow named ${JSON.stringify(name)} already exists`, {
    hint: `store a new version with loops workflows update ${name} <file>, or archive it first`,
  });
}
