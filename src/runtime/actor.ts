/**
 * The persist-then-execute loop for one stream.
 *
 *   1. `[next, actions] = transition(machine, snapshot, event)`   (pure)
 *   2. append the event with next's state, projections inline     (one transaction)
 *   3. only then execute the actions, which report back solely by recording new events.
 *
 * A stream is restored by folding its log through `transition()`; the replayed actions are
 * discarded, never executed, so nothing is spawned twice.
 */
import type { AnyMachineSnapshot, AnyStateMachine, StateMachine } from 'xstate';
import { ConcurrencyConflictError, InvalidTransitionError, NotFoundError } from '../events/errors.js';
import type { AppendGuard, Batch, EventMeta, Lease, NewEvent, StoredEvent } from '../events/types.js';
import { initialSnapshot, stateOf, step } from '../machines/fold.js';
import { contextChanges, fieldHashes } from '../machines/context-diff.js';
import { getMachine, type MachineRef } from '../machines/registry.js';
import { isoNow } from './clock.js';
import type { Runtime } from './runtime.js';
import { storageFault } from './storage-fault.js';
import { inspectActor, inspectStep } from './inspection.js';

/** How long `recordOrFail` retries a record that a storage fault (disk full, database locked) rolled back. */
export const RECORD_RETRY_MS = 120_000;

/** The named actions a machine asks for (its `setup({ actions })`), each `{ type, params }`. */
export type ActionsOf<M> = M extends StateMachine<any, any, any, any, infer A, any, any, any, any, any, any, any, any, any, any> ? A : never;
/** A machine's context type. */
export type ContextOf<M> = M extends StateMachine<infer C, any, any, any, any, any, any, any, any, any, any, any, any, any, any> ? C : never;

/** A machine snapshot whose context is typed. */
export type TypedSnapshot<M> = AnyMachineSnapshot & { context: ContextOf<M> };

/** Implementation of a named machine action. Reports back only through `actor.record`. */
export type Effect<P = any, M extends AnyStateMachine = AnyStateMachine> = (params: P, actor: DurableActor<M>) => void | Promise<void>;

/**
 * An effect whose only job is to record the next event, computed from the state it was asked in
 * (e.g. `requestSpawn` → `process.spawn_requested`). It is folded into the same append as the
 * event that asked for it: still recorded before any later effect runs, one commit fewer.
 */
export interface InlineEffect<P = any, M extends AnyStateMachine = AnyStateMachine> {
  /** `at`: the instant of the transaction the result joins (every event of one append has it). */
  inline: (params: P, snapshot: TypedSnapshot<M>, at: string) => { type: string; data: unknown } | Array<{ type: string; data: unknown }> | null;
}

/**
 * The runtime's implementations of a machine's named actions, keyed by action name: a name the
 * machine does not have is a type error, and each effect gets its action's params. Actions without
 * an implementation stay the machine's no-op defaults.
 */
export type Effects<M extends AnyStateMachine = AnyStateMachine> = AnyStateMachine extends M
  ? Record<string, Effect | InlineEffect>
  : { [A in ActionsOf<M> as A extends { type: infer T extends string } ? T : never]?: Effect<A extends { params: infer P } ? P : undefined, M> | InlineEffect<A extends { params: infer P } ? P : undefined, M> };

export interface RecordOptions {
  /**
   * Preconditions as data, checked by the store inside the append's transaction before anything is
   * written (a lease's fence, taking or releasing a lease atomically with the events, queued work
   * still unclaimed) — given the snapshot the recorded events lead to. A failing guard aborts the
   * append. See `AppendGuard`.
   */
  guards?: readonly AppendGuard[] | ((next: AnyMachineSnapshot) => readonly AppendGuard[]);
  /** Receives the leases the guards took (their tokens). */
  tookLeases?: (leases: Record<string, Lease>) => void;
  meta?: EventMeta;
  /**
   * When another process appended to this stream first (e.g. a cancel request from the CLI), catch
   * up with its events (`refresh`) and record again if the machine still accepts the events.
   * Only for a live actor that owns the stream's effects — a run's runner under its lease — never
   * for decisions whose compare-and-set is the point (a loop's slots).
   */
  retryOnConflict?: boolean;
  /** The open batch (`runtime.log.batch`) this append joins. */
  batch?: Batch;
  /** The event recorded is the stream's `stream.archived` tombstone: the store deletes the history it replaces (`AppendOptions.archivedThrough`). */
  archive?: boolean;
}

/**
 * One stream's machine, live: the persist-then-execute loop. Generic in its machine, so `context`
 * and `snapshot` are typed and its effects are checked against the machine's action names.
 */
export class DurableActor<M extends AnyStateMachine = AnyStateMachine> {
  private chain: Promise<void> = Promise.resolve();
  private resolveDone!: (snapshot: AnyMachineSnapshot) => void;
  private rejectDone!: (error: unknown) => void;
  /** Settles when the machine reaches a final state, or rejects when an effect fails. */
  readonly done: Promise<AnyMachineSnapshot>;
  private failed = false;
  /**
   * Counts the appends of this actor that failed and moved it back. A record started before such a
   * move was built on the state it undid (group commit: both were waiting for the same commit), so
   * it does not move the actor back to its own starting point when it fails too.
   */
  private rollbacks = 0;

  private constructor(
    readonly runtime: Runtime,
    readonly streamId: string,
    readonly kind: string,
    readonly machineRef: MachineRef,
    readonly machine: AnyStateMachine,
    public snapshot: TypedSnapshot<M>,
    public version: number,
    private readonly effects: Record<string, Effect<any, M> | InlineEffect<any, M>>,
  ) {
    this.done = new Promise((resolve, reject) => {
      this.resolveDone = resolve;
      this.rejectDone = reject;
    });
    this.done.catch(() => undefined);
    if (snapshot.status === 'done') this.resolveDone(snapshot);
    inspectActor(runtime.inspect, this);
  }

  /** A new, empty stream owned by the given machine. */
  static create<M extends AnyStateMachine>(runtime: Runtime, streamId: string, kind: string, ref: MachineRef<M>, effects: Effects<M> = {} as Effects<M>): DurableActor<M> {
    const machine = machineFor(ref);
    return new DurableActor<M>(runtime, streamId, kind, ref, machine, initialSnapshot(machine) as TypedSnapshot<M>, 0, effects as Record<string, Effect<any, M>>);
  }

  /**
   * Restores a stream by folding its events (actions discarded) — from the newest snapshot of it
   * this runtime holds or finds persisted (snapshots.ts), else from its first event — so only the
   * events since that snapshot are read.
   */
  static async load<M extends AnyStateMachine = AnyStateMachine>(runtime: Runtime, streamId: string, effects: Effects<M> = {} as Effects<M>, expect?: MachineRef<M>): Promise<DurableActor<M>> {
    const info = await runtime.log.streamInfo(streamId);
    if (!info || info.machineId === null || info.machineVersion === null) {
      throw new NotFoundError(`no stream ${streamId}`);
    }
    // The type the caller asked for is checked against the owner the stream recorded (any version
    // of that machine: old streams replay on the machine that wrote them).
    if (expect && info.machineId !== expect.id) {
      throw new NotFoundError(`stream ${streamId} is owned by ${info.machineId}, not ${expect.id}`);
    }
    const ref = { id: info.machineId, version: info.machineVersion };
    const machine = machineFor(ref);
    const base = runtime.snapshots?.get(streamId, ref, machine, info.version) ?? null;
    let snapshot = base?.snapshot ?? initialSnapshot(machine);
    let version = base?.version ?? 0;
    const events = version < info.version ? await runtime.log.readStream(streamId, version + 1) : [];
    for (const event of events) {
      snapshot = step(machine, snapshot, event).after;
      version = event.version;
    }
    if (runtime.snapshots) {
      runtime.snapshots.folded += events.length;
      if (events.length) runtime.snapshots.remember(streamId, ref, version, snapshot);
    }
    return new DurableActor<M>(runtime, streamId, info.kind, ref, machine, snapshot as TypedSnapshot<M>, version, effects as Record<string, Effect<any, M>>);
  }

  /** Tells the runtime's snapshot store the state this actor reached, once it is committed. */
  private share(batch?: Batch): void {
    const store = this.runtime.snapshots;
    if (!store) return;
    const { snapshot, version } = this;
    this.runtime.log.afterCommit(() => store.remember(this.streamId, this.machineRef, version, snapshot), batch);
  }

  /** The machine's context now. */
  get context(): ContextOf<M> {
    return this.snapshot.context;
  }

  get state(): string {
    return typeof this.snapshot.value === 'string' ? this.snapshot.value : JSON.stringify(this.snapshot.value);
  }

  /** True when the machine accepts `type` in its current state. */
  accepts(type: string, data: unknown): boolean {
    return this.snapshot.can({ type, at: isoNow(this.runtime.clock), data });
  }

  /**
   * Steps the machine, appends the event (state included) — plus the events of any inline
   * effects it triggers — and their projections in one transaction, and only then schedules the
   * remaining actions. Returns the first appended event.
   */
  async record(type: string, data: unknown, options: RecordOptions = {}): Promise<StoredEvent> {
    return (await this.recordAll([{ type, data }], options))[0]!;
  }

  /**
   * Like `record`, for several events recorded together in one transaction (e.g. the decisions of
   * one scheduling pass): all of them, in order, or none. Returns the appended events.
   */
  async recordAll(inputs: ReadonlyArray<{ type: string; data: unknown }>, options: RecordOptions = {}): Promise<StoredEvent[]> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.recordOnce(inputs, options);
      } catch (error) {
        if (!(error instanceof ConcurrencyConflictError) || !options.retryOnConflict || attempt >= 3) throw error;
        await this.refresh(options);
      }
    }
  }

  /**
   * Catches up with events other processes appended to this stream since this actor last read or
   * wrote it, and runs their actions here: this actor is the live one, so a cancel request
   * appended by `loops cancel` makes *its* process be killed. Returns the events it caught up with.
   */
  async refresh(options: RecordOptions = {}): Promise<StoredEvent[]> {
    const events = await this.runtime.log.readStream(this.streamId, this.version + 1);
    const follow: Array<{ type: string; data: unknown }> = [];
    for (const event of events) {
      const result = step(this.machine, this.snapshot, event);
      this.snapshot = result.after;
      this.version = event.version;
      inspectStep(this.runtime.inspect, this, event, result.after);
      for (const action of result.actions) {
        const effect = this.effects[action.type];
        if (typeof effect === 'function') this.schedule(action.type, action.params);
        else if (effect) {
          // An inline effect asked for by someone else's event: recorded now, in a transaction of its own.
          const more = effect.inline(action.params, this.snapshot, isoNow(this.runtime.clock));
          if (more) follow.push(...(Array.isArray(more) ? more : [more]));
        }
      }
    }
    if (events.length) this.share();
    if (events.length && this.snapshot.status === 'done') this.chain.then(() => this.resolveDone(this.snapshot), () => undefined);
    if (follow.length) await this.recordAll(follow, options);
    return events;
  }

  private async recordOnce(inputs: ReadonlyArray<{ type: string; data: unknown }>, options: RecordOptions): Promise<StoredEvent[]> {
    const meta = { runnerId: this.runtime.runnerId, ...(this.runtime.actedBy ? { by: this.runtime.actedBy } : {}), ...options.meta };
    const batch: NewEvent[] = [];
    const deferred: Array<{ type: string; params?: unknown }> = [];
    /** The snapshot after each event of the batch, for an inspector (told once they are in the log). */
    const steps: AnyMachineSnapshot[] = [];
    let snapshot = this.snapshot;
    const queue = [...inputs];
    let next: { type: string; data: unknown } | null = queue.shift() ?? null;
    // One instant for the whole append: its events are one commit, and an inline effect's
    // deadlines (a run's timeout) are computed from the same instant its intent is recorded at.
    const at = isoNow(this.runtime.clock);
    while (next !== null) {
      const result = step(this.machine, snapshot, { type: next.type, at, data: next.data });
      if (!result.accepted) {
        const state = typeof snapshot.value === 'string' ? snapshot.value : JSON.stringify(snapshot.value);
        throw new InvalidTransitionError(`${this.streamId} is ${state}; it does not accept ${next.type}`);
      }
      const ctx = fieldHashes(contextChanges(result.before.context, result.after.context));
      batch.push({ type: next.type, data: next.data, at, state: stateOf(result.after), meta: { ...meta, ctx } });
      snapshot = result.after;
      steps.push(result.after);
      next = null;
      let inline: Array<{ type: string; data: unknown }> | null = null;
      for (const action of result.actions) {
        const effect = this.effects[action.type];
        if (effect && typeof effect === 'object') {
          const follow = effect.inline(action.params, snapshot, at);
          if (follow && (!Array.isArray(follow) || follow.length > 0)) {
            if (inline) throw new Error(`two inline effects in one step of ${this.streamId}`);
            inline = Array.isArray(follow) ? follow : [follow];
          }
        } else deferred.push(action);
      }
      if (inline) queue.unshift(...inline);
      next = queue.shift() ?? null;
    }
    // Move first: the log publishes on events$ inside append (after the commit), and a listener
    // may record the next event on this actor at once; it must see this state and version. A
    // second record made before this one is committed (group commit: both wait for the end of the
    // turn) expects this version, so the compare-and-set keeps their order.
    const before = { snapshot: this.snapshot, version: this.version, rollbacks: this.rollbacks };
    this.snapshot = snapshot;
    this.version = before.version + batch.length;
    let appended;
    try {
      const guards = typeof options.guards === 'function' ? options.guards(snapshot) : options.guards;
      appended = await this.runtime.log.append(this.streamId, batch, {
        expectedVersion: before.version,
        kind: this.kind,
        machine: this.machineRef,
        nowMs: this.runtime.clock.now(),
        ...(guards?.length ? { guards } : {}),
        ...(options.tookLeases ? { onLeases: options.tookLeases } : {}),
        ...(options.batch ? { batch: options.batch } : {}),
        ...(options.archive ? { archivedThrough: before.version } : {}),
      });
    } catch (error) {
      // Undo the move — unless an earlier record this one was built on already failed and undid
      // both (its events are not in the log, so neither are these).
      if (this.rollbacks === before.rollbacks) {
        this.snapshot = before.snapshot;
        this.version = before.version;
        this.rollbacks++;
      }
      throw error;
    }
    this.share(options.batch);
    if (this.runtime.inspect) batch.forEach((event, i) => inspectStep(this.runtime.inspect, this, event, steps[i]!));
    for (const action of deferred) this.schedule(action.type, action.params);
    // Done once the record that ended the stream is committed — not when an earlier record
    // completes while a later one, moved first, is still on its way (a slow store shows it).
    if (snapshot.status === 'done') {
      this.chain.then(() => this.resolveDone(snapshot), () => undefined);
    }
    return appended.events;
  }

  /**
   * `recordAll` for callers with no one to report a failure to (a timer, a process's exit, a
   * cancel request): a failure to record ends the actor with it (`done` rejects). Never rejects.
   *
   * A storage fault (the disk full, the database locked beyond its busy timeout, an I/O error:
   * storage-fault.ts) rolled the append back and may pass: the same events are recorded again
   * with back-off (0.1 s doubling to 5 s) for up to `RECORD_RETRY_MS`, so a process's end that
   * happened while the disk was full is recorded once there is space — by its runner, who knows
   * it. A runner fenced out meanwhile (its lease expired and taken over) fails the next try.
   */
  async recordOrFail(inputs: ReadonlyArray<{ type: string; data: unknown }>, options: RecordOptions = {}): Promise<void> {
    const since = this.runtime.clock.monotonic();
    for (let delay = 100; ; delay = Math.min(delay * 2, 5000)) {
      try {
        await this.recordAll(inputs, options);
        return;
      } catch (error) {
        if (this.failed || storageFault(error) === null || this.runtime.clock.monotonic() - since + delay > RECORD_RETRY_MS) {
          this.fail(error);
          return;
        }
      }
      await new Promise<void>((resolve) => this.runtime.clock.setTimeout(resolve, delay));
    }
  }

  /** `refresh`, ending the actor with its failure (see `recordOrFail`). Never rejects. */
  async refreshOrFail(options: RecordOptions = {}): Promise<void> {
    try {
      await this.refresh(options);
    } catch (error) {
      this.fail(error);
    }
  }

  /** Ends the actor with an error (e.g. an outcome that could not be recorded). */
  fail(error: unknown): void {
    this.failed = true;
    this.rejectDone(error);
  }

  private schedule(type: string, params: unknown): void {
    const effect = this.effects[type];
    if (typeof effect !== 'function') return;
    this.chain = this.chain
      .then(() => (this.failed ? undefined : effect(params, this)))
      .catch((error: unknown) => {
        this.failed = true;
        this.rejectDone(error);
      });
  }
}

function machineFor(ref: MachineRef): AnyStateMachine {
  const machine = getMachine(ref);
  if (!machine) {
    throw new NotFoundError(`machine ${ref.id}@${ref.version} is not known to this version of loops`, {
      hint: 'upgrade loops to read streams written by a newer version',
    });
  }
  return machine;
}
