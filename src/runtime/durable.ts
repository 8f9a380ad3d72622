/**
 * Durable children for host XState apps: `durableRun(runtime)` and `durableWorkflowRun(runtime)`
 * are actor logic a host machine invokes (`setup({ actors: { deploy: durableWorkflowRun(runtime) } })`).
 * The child starts a real run through the runtime — persisted, spawned, recorded like any run of
 * loops — and is done with the run machine's output (`RunOutput` / `WorkflowRunOutput`), so the
 * host branches on `onDone`'s `event.output`; a run that could not start is the child's error
 * (`onError`).
 *
 * Keyed by its run id. The id is chosen when the child is created (or given in its input) and kept
 * in the child's snapshot, so it is in the host's persisted snapshot (`actor.getPersistedSnapshot()`).
 * When the host restores that snapshot, the child starts again with the same id and re-attaches:
 *
 *   - the run is executing in this process → waits for that execution (nothing started twice);
 *   - its stream is in the log and ended → done at once with its recorded output;
 *   - its stream is in the log, not ended → waits for its end, reading the log (a workflow run
 *     whose runner is gone — its lease ran out — is resumed here, `resumeWorkflowRun`; a loop run's
 *     dead runner is recovered by the daemon's recovery, whose recorded end this then reads);
 *   - no such stream → starts it with that id.
 *
 * Stopping the host (or the child) does not cancel the run: durable means it goes on, and a
 * restored host finds it. Cancel it through the runtime (`requestCancel`, `loops cancel`).
 */
import type { ActorLogic, ActorScope, AnyEventObject, Snapshot } from 'xstate';
import { LoopsError } from '../events/errors.js';
import { currentMachines } from '../machines/registry.js';
import { runOutputOf, type RunContext, type RunOutput } from '../machines/run.js';
import { workflowRunOutputOf, type WorkflowRunContext, type WorkflowRunOutput } from '../machines/workflow-run.js';
import { DurableActor } from './actor.js';
import { executeRun } from './execution/attempt.js';
import { newId } from './ids.js';
import { findLoopRecord } from './queries/loops.js';
import type { Runtime } from './runtime.js';
import { resumeWorkflowRun, runWorkflow } from './workflows/runner.js';

/** A durable child's input: the loop whose run it is (name or id), and optionally the run's id. */
export interface DurableRunInput {
  loop: string;
  /** Default: a new id, chosen when the child is created. */
  runId?: string;
}

/** A durable workflow child's input: the workflow (name or id), its inputs, optionally the run's id. */
export interface DurableWorkflowRunInput {
  workflow: string;
  inputs?: Record<string, string>;
  /** Default: a new id, chosen when the child is created. */
  wfRunId?: string;
}

/** A durable child's snapshot: XState's, plus the id of the run it is (persisted with the host's). */
export type DurableSnapshot<TOutput, TInput> = Snapshot<TOutput> & {
  /** `run:<id>` or `wfrun:<id>`: the stream the child is keyed by. */
  streamId: string;
  input: TInput;
};

export interface DurableOptions {
  /** How often a run executed elsewhere is looked at while waiting for its end (default 250 ms, on the runtime's clock). */
  pollMs?: number;
  /** Lease time-to-live of runs the child starts or resumes (default 30 s). */
  leaseTtlMs?: number;
}

/** The actor logic `durableRun` / `durableWorkflowRun` return. */
export type DurableLogic<TOutput, TInput> = ActorLogic<DurableSnapshot<TOutput, TInput>, AnyEventObject, TInput>;

const RESOLVE = 'loops.durable.resolve';
const REJECT = 'loops.durable.reject';

/** Executions of streams started or re-attached in this process, per runtime: one per stream. */
const inflight = new WeakMap<Runtime, Map<string, Promise<unknown>>>();

function once<T>(runtime: Runtime, streamId: string, make: () => Promise<T>): Promise<T> {
  const map = inflight.get(runtime) ?? new Map<string, Promise<unknown>>();
  inflight.set(runtime, map);
  const going = map.get(streamId);
  if (going) return going as Promise<T>;
  const promise = make().finally(() => map.delete(streamId));
  map.set(streamId, promise);
  return promise;
}

/** Waits until `streamId` ends (its state read from the log), then returns its output. */
async function waitForEnd<T>(
  runtime: Runtime,
  streamId: string,
  outputOf: (snapshot: { value: unknown; context: never }) => T | null,
  options: DurableOptions,
  resume?: () => Promise<unknown>,
): Promise<T> {
  for (;;) {
    const actor = await DurableActor.load(runtime, streamId);
    const output = outputOf(actor.snapshot as never);
    if (output !== null) return output;
    if (resume && (await leaseFree(runtime, streamId))) {
      try {
        await resume();
        continue;
      } catch (error) {
        // Someone else took it over first: wait for them like for any runner.
        if (!(error instanceof LoopsError) || error.code !== 'conflict') throw error;
      }
    }
    await new Promise<void>((resolve) => runtime.clock.setTimeout(resolve, options.pollMs ?? 250));
  }
}

async function leaseFree(runtime: Runtime, name: string): Promise<boolean> {
  const lease = await runtime.leases.get(name);
  return lease === null || lease.expiresAt <= runtime.clock.now();
}

/** The output a stream in the log has, once it ended (null while it goes on). */
async function recorded<T>(runtime: Runtime, streamId: string, outputOf: (snapshot: { value: unknown; context: never }) => T | null): Promise<{ exists: boolean; output: T | null }> {
  const info = await runtime.log.streamInfo(streamId);
  if (!info) return { exists: false, output: null };
  const actor = await DurableActor.load(runtime, streamId);
  return { exists: true, output: outputOf(actor.snapshot as never) };
}

/** Attaches to (or starts) the run a loop child is keyed by; resolves with its output. */
function attachRun(runtime: Runtime, input: DurableRunInput, streamId: string, options: DurableOptions): Promise<RunOutput> {
  const runId = streamId.slice('run:'.length);
  const outputOf = (s: { value: unknown; context: RunContext }) => runOutputOf(s);
  return once(runtime, streamId, async () => {
    const known = await recorded(runtime, streamId, outputOf);
    if (known.output) return known.output;
    if (!known.exists) {
      const loop = findLoopRecord(runtime.db, input.loop);
      await executeRun(runtime, loop, {
        runId,
        slot: `manual:${runId}`,
        scheduledFor: new Date(runtime.clock.now()).toISOString(),
        trigger: 'manual',
        ...(options.leaseTtlMs !== undefined ? { leaseTtlMs: options.leaseTtlMs } : {}),
      });
    }
    return waitForEnd(runtime, streamId, outputOf, options);
  });
}

/** Attaches to (or starts) the workflow run a child is keyed by; resolves with its output. */
function attachWorkflowRun(runtime: Runtime, input: DurableWorkflowRunInput, streamId: string, options: DurableOptions): Promise<WorkflowRunOutput> {
  const wfRunId = streamId.slice('wfrun:'.length);
  const outputOf = (s: { value: unknown; context: WorkflowRunContext }) => workflowRunOutputOf(s);
  const lease = options.leaseTtlMs !== undefined ? { leaseTtlMs: options.leaseTtlMs } : {};
  return once(runtime, streamId, async () => {
    const known = await recorded(runtime, streamId, outputOf);
    if (known.output) return known.output;
    if (!known.exists) {
      // The idempotency key is the id: a second start of the same child finds the first run.
      await runWorkflow(runtime, input.workflow, { wfRunId, idempotencyKey: `durable:${wfRunId}`, inputs: input.inputs ?? {}, ...lease });
    }
    return waitForEnd(runtime, streamId, outputOf, options, () => resumeWorkflowRun(runtime, wfRunId, lease));
  });
}

function durableLogic<TOutput, TInput>(
  streamOf: (input: TInput) => string,
  attach: (input: TInput, streamId: string) => Promise<TOutput>,
): DurableLogic<TOutput, TInput> {
  type S = { status: string; output?: unknown; error?: unknown; input: TInput; streamId: string };
  const logic = {
    config: attach,
    transition: (snapshot: S, event: AnyEventObject): S => {
      if (snapshot.status !== 'active') return snapshot;
      if (event.type === RESOLVE) return { ...snapshot, status: 'done', output: (event as { data?: unknown }).data };
      if (event.type === REJECT) return { ...snapshot, status: 'error', error: (event as { data?: unknown }).data };
      // xstate.stop: the run goes on (see the module comment); the child only stops listening.
      if (event.type === 'xstate.stop') return { ...snapshot, status: 'stopped' };
      return snapshot;
    },
    start: (snapshot: S, scope: ActorScope<never, AnyEventObject>) => {
      if (snapshot.status !== 'active') return;
      const { self, system } = scope;
      const relay = (event: AnyEventObject) => {
        if ((self.getSnapshot() as S).status !== 'active') return;
        (system as unknown as { _relay(from: unknown, to: unknown, event: AnyEventObject): void })._relay(self, self, event);
      };
      attach(snapshot.input, snapshot.streamId).then(
        (output) => relay({ type: RESOLVE, data: output }),
        (error: unknown) => relay({ type: REJECT, data: error }),
      );
    },
    getInitialSnapshot: (_scope: unknown, input: TInput): S => ({ status: 'active', output: undefined, error: undefined, input, streamId: streamOf(input) }),
    getPersistedSnapshot: (snapshot: S) => snapshot,
    restoreSnapshot: (snapshot: unknown) => snapshot as S,
  };
  return logic as unknown as DurableLogic<TOutput, TInput>;
}

/**
 * Actor logic for a host machine: a run of an existing loop, started through `runtime` and keyed
 * by its run id (see the module comment). Done with the run's `RunOutput`.
 */
export function durableRun(runtime: Runtime, options: DurableOptions = {}): DurableLogic<RunOutput, DurableRunInput> {
  return durableLogic<RunOutput, DurableRunInput>(
    (input) => `run:${input.runId ?? newId('run', runtime.clock.now())}`,
    (input, streamId) => attachRun(runtime, input, streamId, options),
  );
}

/**
 * Actor logic for a host machine: a run of a stored workflow (its latest version), started
 * through `runtime` and keyed by its run id (see the module comment). Done with the run's
 * `WorkflowRunOutput` — whatever its status; `onError` only when it could not start.
 */
export function durableWorkflowRun(runtime: Runtime, options: DurableOptions = {}): DurableLogic<WorkflowRunOutput, DurableWorkflowRunInput> {
  return durableLogic<WorkflowRunOutput, DurableWorkflowRunInput>(
    (input) => `wfrun:${input.wfRunId ?? newId('wfrun', runtime.clock.now())}`,
    (input, streamId) => attachWorkflowRun(runtime, input, streamId, options),
  );
}

