/**
 * Cancelling a run from anywhere: `loops cancel`, the overlap policy `cancel-other`, a workflow
 * cancel. The request is an event (`run.cancel_requested`) appended to the run's stream by
 * whoever asks; the run's runner — the only one allowed to record its outcome, under its lease —
 * learns of it and kills the process group, then records the end (`cancelled`).
 *
 * How the runner learns of it: every runner process keeps one `CancelWatch` for the runs it
 * executes. After a request in the same process it is told at once; a request from another
 * process is seen at the runner's next look at the log's head (one indexed read, every 250 ms
 * while it runs something), and a daemon is also woken at once by SIGUSR2 (sent only after its
 * pid file's process identity — pid and start time — checks out). No per-run database polling.
 */
import { currentMachines } from '../../machines/registry.js';
import { DurableActor } from '../actor.js';
import type { TimerHandle } from '../clock.js';
import { runningDaemon } from '../daemon/daemon-info.js';
import type { Runtime } from '../runtime.js';
import type { Batch } from '../../events/types.js';

export type CancelOutcome =
  /** The request is recorded; the runner will stop the process. */
  | 'requested'
  /** A request was already recorded earlier. */
  | 'already requested'
  /** The run had already ended; nothing to do. */
  | 'ended';

export interface CancelResult {
  runId: string;
  outcome: CancelOutcome;
  /** The run's status when asked. */
  status: string;
  /** The runner holding the run's lease, when one does. */
  holder: string | null;
}

/** Asks for the run to be cancelled (see the module comment). Never kills anything itself. */
export async function requestCancel(runtime: Runtime, runId: string, reason: string | null, batch?: Batch): Promise<CancelResult> {
  const actor = await DurableActor.load(runtime, `run:${runId}`, {}, currentMachines.run);
  const status = actor.state;
  const holder = await liveHolder(runtime, `run:${runId}`);
  if (actor.snapshot.status === 'done') return { runId, outcome: 'ended', status, holder };
  if (actor.context.cancelRequested) return { runId, outcome: 'already requested', status, holder };
  await actor.record('run.cancel_requested', { reason }, { retryOnConflict: true, ...(batch ? { batch } : {}) });
  // Inside a batch, the runners are told once it commits (before, they would not see the request).
  runtime.log.afterCommit(() => notifyRunners(runtime, holder), batch);
  return { runId, outcome: 'requested', status, holder };
}

/** The runner holding a live lease on `name`, or null. */
async function liveHolder(runtime: Runtime, name: string): Promise<string | null> {
  const lease = await runtime.leases.get(name);
  return lease !== null && lease.expiresAt > runtime.clock.now() ? lease.holder : null;
}

/** Tells the run's runner now: in this process directly; a daemon holding it by SIGUSR2. */
function notifyRunners(runtime: Runtime, holder: string | null): void {
  void watchOf(runtime)?.check();
  if (holder === null || holder === runtime.runnerId) return;
  const daemon = runningDaemon(runtime.dataDir);
  if (daemon && daemon.runnerId === holder) {
    try {
      process.kill(daemon.pid, 'SIGUSR2');
    } catch {
      // gone since: its successor's recovery deals with the run
    }
  }
}

const watches = new WeakMap<Runtime, CancelWatch>();

function watchOf(runtime: Runtime): CancelWatch | undefined {
  return watches.get(runtime);
}

/**
 * Registers a run (`run:<id>`) or workflow run (`wfrun:<id>`) this process executes: `onCancel`
 * is called when a cancel request for it is appended by anyone (including this process). Returns
 * the function that unregisters it.
 */
export function watchCancel(runtime: Runtime, streamId: string, onCancel: () => void): () => void {
  let watch = watches.get(runtime);
  if (!watch) watches.set(runtime, (watch = new CancelWatch(runtime)));
  return watch.add(streamId, onCancel);
}

/** Asks for a workflow run to be cancelled: its runner stops the running steps' process groups. */
export async function requestWorkflowCancel(runtime: Runtime, wfRunId: string, reason: string | null): Promise<CancelResult> {
  const streamId = `wfrun:${wfRunId}`;
  const actor = await DurableActor.load(runtime, streamId);
  const status = actor.state;
  const holder = await liveHolder(runtime, streamId);
  if (actor.snapshot.status === 'done') return { runId: wfRunId, outcome: 'ended', status, holder };
  if ((actor.snapshot.context as { cancelRequested: boolean }).cancelRequested) return { runId: wfRunId, outcome: 'already requested', status, holder };
  await actor.record('wfrun.cancel_requested', { reason }, { retryOnConflict: true });
  notifyRunners(runtime, holder);
  return { runId: wfRunId, outcome: 'requested', status, holder };
}

/** Checks for new cancel requests now (e.g. on SIGUSR2), instead of at the next look. */
export function checkCancelRequests(runtime: Runtime): void {
  void watchOf(runtime)?.check();
}

class CancelWatch {
  private readonly runs = new Map<string, () => void>();
  /** The log's head when last looked at; -1 until the first look, once watching starts. */
  private position = 0;
  private timer: TimerHandle | null = null;
  private checking: Promise<void> | null = null;

  constructor(private readonly runtime: Runtime) {}

  add(streamId: string, onCancel: () => void): () => void {
    if (this.runs.size === 0) {
      this.position = -1;
      void this.runtime.log.headPosition().then(
        (head) => {
          if (this.position === -1) this.position = head;
        },
        () => undefined,
      );
      this.arm();
    }
    this.runs.set(streamId, onCancel);
    return () => {
      this.runs.delete(streamId);
      if (this.runs.size === 0 && this.timer !== null) {
        this.runtime.clock.clearTimeout(this.timer);
        this.timer = null;
      }
    };
  }

  private arm(): void {
    this.timer = this.runtime.clock.setTimeout(() => {
      this.timer = null;
      // A runtime closed while it still ran something (its process going away) looks no more.
      if (!this.runtime.db.open) this.runs.clear();
      if (this.runs.size === 0) return;
      void this.check().finally(() => {
        if (this.runs.size > 0 && this.timer === null) this.arm();
      });
    }, 250);
  }

  /** Looks for cancel requests appended since the last look (one look at a time; never rejects). */
  check(): Promise<void> {
    if (this.runs.size === 0 || this.position < 0) return Promise.resolve();
    this.checking ??= this.look().finally(() => (this.checking = null));
    return this.checking;
  }

  private async look(): Promise<void> {
    try {
      const head = await this.runtime.log.headPosition();
      if (head === this.position || this.position < 0) return;
      const streams = await this.runtime.log.streamsWithEvents(this.position, head, ['run.cancel_requested', 'wfrun.cancel_requested']);
      this.position = head;
      for (const stream of streams) this.runs.get(stream)?.();
    } catch {
      // a closed or busy database: the next look tries again
    }
  }
}
