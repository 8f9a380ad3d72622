export * from './errors.js';
export * from './types.js';
export * from './catalog.js';
export * from './db.js';
export * from './sqlite-log.js';
export * from './durations.js';
export {
  workflowSpecSchema,
  type AgentTarget,
  // `CommandTarget` of the loop catalogue is another shape (`kind`): the step's is renamed here.
  type CommandTarget as StepCommandTarget,
  type RetryPolicy,
  type SpecProblem,
  type StepSpec,
  type StepTarget,
  type WorkflowInput,
  type WorkflowSpec,
} from './workflow-model.js';
