/**
 * loops as a library, a curated surface: the machines (pure, embeddable in any XState app) and
 * their fold, the event store's interfaces and its SQLite implementation, the typed errors,
 * `openRuntime` and the runtime functions a library user calls (create loops, run them, run
 * workflows, read, replay, run a daemon, embed a durable run in an XState app: `durableRun`,
 * `durableWorkflowRun`), and the SDK client. Internal helpers are not exported:
 * a change here is deliberate — test/unit/surface.unit.test.ts compares the exported names with
 * test/unit/surface-names.json.
 */

// ── errors ──
export {
  AlreadyExistsError,
  AmbiguousError,
  BusyError,
  ClaimLostError,
  ConcurrencyConflictError,
  DeterminismError,
  FormatVersionError,
  InvalidTransitionError,
  LeaseLostError,
  LoopsError,
  NotFoundError,
  UsageError,
  ValidationError,
  isLoopsError,
  type LoopsErrorCode,
} from './events/index.js';

// ── the event log ──
export {
  LOG_FORMAT_VERSION,
  SqliteEventLog,
  eventSchemas,
  formatDuration,
  isEventType,
  openDatabase,
  parseDuration,
  upcast,
  validateEventData,
  type AppendGuard,
  type AppendOptions,
  type AppendResult,
  type Batch,
  type Db,
  type EventData,
  type EventMeta,
  type EventStore,
  type EventType,
  type InlineHandler,
  type Json,
  type Lease,
  type LeaseStore,
  type LoopPolicies,
  type NewEvent,
  type ReadAllOptions,
  type Schedule,
  type SqlStatement,
  type StoredEvent,
  type StreamInfo,
  type Target,
} from './events/index.js';

// ── the machines (pure) and their fold ──
export {
  ACCOUNT_MACHINE_ID,
  ACCOUNT_MACHINE_VERSION,
  LOOP_MACHINE_ID,
  LOOP_MACHINE_VERSION,
  RUN_MACHINE_ID,
  RUN_MACHINE_VERSION,
  TERMINAL_RUN_STATUSES,
  WORKFLOW_MACHINE_ID,
  WORKFLOW_MACHINE_VERSION,
  WORKFLOW_RUN_MACHINE_ID,
  WORKFLOW_RUN_MACHINE_VERSION,
  accountMachine,
  currentMachines,
  fold,
  getMachine,
  initialSnapshot,
  loopMachine,
  runMachine,
  stateOf,
  step,
  workflowMachine,
  workflowRunMachine,
} from './machines/index.js';

// ── projections (the tables, rebuilt from the log) ──
export { inlineHandler, projections } from './projections/index.js';

// ── workflow specs and schedules (pure) ──
export { normalizeWorkflowSpec, workflowJsonSchema } from './workflow/index.js';
export { describeSchedule, nextFireAt, upcomingSlots } from './scheduling/index.js';

// ── the runtime ──
export {
  Daemon,
  DurableActor,
  SimulatedClock,
  archiveWorkflow,
  buildPolicies,
  changeLoopState,
  createAgentLoop,
  createCommandLoop,
  createWorkflow,
  createWorkflowLoop,
  explainSlot,
  findLoop,
  findRun,
  findWorkflow,
  findWorkflowRun,
  isoNow,
  listLoops,
  listRuns,
  listWorkflowRuns,
  listWorkflows,
  loadWorkflowFile,
  openReader,
  openRuntime,
  rebuildProjections,
  recentDecisions,
  replayArchived,
  replayStream,
  requestCancel,
  requestWorkflowCancel,
  resolveDataDir,
  resumeWorkflowRun,
  runNow,
  runWorkflow,
  spawnProcess,
  systemClock,
  updateWorkflow,
  verifyProjections,
  workflowRunSteps,
  type Clock,
  type CreateAgentLoopInput,
  type CreateCommandLoopInput,
  type CreateWorkflowLoopInput,
  type LoopView,
  type ReplayResult,
  type ReplayStep,
  type RunView,
  type Runtime,
  type RuntimeOptions,
  type WorkflowRunView,
  type WorkflowStepView,
  type WorkflowView,
} from './runtime/index.js';
export { liveEvents, readEvents, resolveStream, type EventFilter } from './runtime/queries/log-events.js';
export {
  durableRun,
  durableWorkflowRun,
  type DurableLogic,
  type DurableOptions,
  type DurableRunInput,
  type DurableSnapshot,
  type DurableWorkflowRunInput,
} from './runtime/durable.js';

// ── the SDK client (also `loops-scheduler/sdk`) ──
export { LoopsClient, loops, type LoopsClientOptions } from './sdk.js';
