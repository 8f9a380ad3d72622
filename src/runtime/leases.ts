/**
 * Leases as the runtime uses them, through the lease store (`runtime.leases`, src/events/
 * sqlite-leases.ts) and the guards an append carries as data (`AppendGuard`): never SQL here.
 *
 *  - `HeldLease`: the lease of a stream a runner executes — a loop run, a workflow run — the one
 *    implementation of take, take over, renew, fence and release;
 *  - runner leases: while a runner lives, the work it decided is its own to run.
 */
import { LeaseLostError } from '../events/errors.js';
import type { AppendGuard, Batch, Lease, LeaseStore } from '../events/types.js';
import { storageFault } from './storage-fault.js';

export type { Lease } from '../events/types.js';

/** What `HeldLease` needs of a runtime (kept structural: leases.ts sits below runtime.ts). */
interface LeaseHost {
  leases: LeaseStore;
  runnerId: string;
  clock: { now(): number; setTimeout(fn: () => void, ms: number): unknown; clearTimeout(handle: never): void };
}

/** The options of an append guarded by a lease (see DurableActor's RecordOptions). */
export interface LeaseGuarded {
  guards: (next: { status: string }) => AppendGuard[];
  meta: { leaseToken?: number };
  /** Receives the leases the append's guards took. */
  tookLeases: (leases: Record<string, Lease>) => void;
  retryOnConflict: boolean;
}

/**
 * The lease of a stream a runner executes, and its fencing. The append that starts the stream
 * takes it (`takeNew`), a runner that takes a stream over from a dead one takes it over
 * (`takeOver`, or `takeOverIn` inside the append that needs it); every later append carries
 * `fence()`: inside its transaction the store checks that this runner still holds this token (a
 * runner that lost its lease records nothing) and releases the lease with the event that ends the
 * stream.
 */
export class HeldLease {
  private lease: Lease | null = null;
  private timer: unknown = null;

  constructor(
    private readonly host: LeaseHost,
    readonly name: string,
    readonly ttlMs: number,
  ) {}

  /** The fencing token held, or null before the lease was taken. */
  get token(): number | null {
    return this.lease?.token ?? null;
  }

  private took = (leases: Record<string, Lease>) => {
    const lease = leases[this.name];
    if (lease) this.lease = lease;
  };

  /**
   * Options for the append that starts the stream: takes the lease, which must be new (its first
   * token) — a stream id two runners try to start is started by one of them only.
   */
  takeNew(extra: AppendGuard[] = []): LeaseGuarded {
    return {
      guards: (next) => [
        ...extra,
        { kind: 'take-lease', name: this.name, holder: this.host.runnerId, ttlMs: this.ttlMs, expectToken: 1, release: next.status === 'done' },
      ],
      meta: { leaseToken: 1 },
      tookLeases: this.took,
      retryOnConflict: false,
    };
  }

  /**
   * Takes the lease over from a runner that is gone (its lease expired or was expired for it), in
   * its own transaction: a new token fences the old runner out. A live holder refuses (retryable).
   */
  async takeOver(): Promise<Lease> {
    this.lease = await this.host.leases.take(this.name, this.host.runnerId, this.ttlMs, this.host.clock.now());
    return this.lease;
  }

  /** `takeOver` inside the append that needs it (atomic with its events); released if they end the stream, or when `release`. */
  takeOverIn(options: { release?: boolean } = {}): LeaseGuarded {
    return {
      guards: (next) => [{ kind: 'take-lease', name: this.name, holder: this.host.runnerId, ttlMs: this.ttlMs, release: options.release === true || next.status === 'done' }],
      meta: {},
      tookLeases: this.took,
      retryOnConflict: false,
    };
  }

  /**
   * Options for every later append: fenced by this token, releasing the lease with the event that
   * ends the stream, caught up and retried when another process appended first (a cancel request).
   */
  fence(): LeaseGuarded {
    const lease = this.lease;
    return {
      guards: (next) => {
        if (!lease) throw new LeaseLostError(`${this.name}: no lease held by ${this.host.runnerId}`);
        return [{ kind: 'lease-held', name: lease.name, holder: lease.holder, token: lease.token, release: next.status === 'done' }];
      },
      meta: lease ? { leaseToken: lease.token } : {},
      tookLeases: this.took,
      retryOnConflict: true,
    };
  }

  /** Renews the lease every third of its lifetime until `stop()`; a lost lease stops renewing (the next fenced append reports it). */
  keepAlive(): void {
    if (this.timer !== null) return;
    const beat = () => {
      this.timer = this.host.clock.setTimeout(() => {
        const lease = this.lease;
        if (!lease) return;
        // The next beat is armed now, not once the store answered: the beats keep their rhythm
        // whatever the store's latency (and a clock moved far ahead fires each of them).
        beat();
        this.host.leases.renew(lease, this.ttlMs, this.host.clock.now()).then(
          (renewed) => {
            const held = this.lease;
            if (held && held.token === renewed.token && renewed.expiresAt > held.expiresAt) this.lease = renewed;
          },
          // Lost: stop renewing (the next fenced append reports it). A storage fault (the disk
          // full, the database locked beyond its busy timeout) is no loss: the next beat tries again.
          (error: unknown) => {
            if (storageFault(error) === null) this.stop();
          },
        );
      }, Math.max(1, Math.floor(this.ttlMs / 3)));
    };
    beat();
  }

  stop(): void {
    if (this.timer !== null) this.host.clock.clearTimeout(this.timer as never);
    this.timer = null;
  }

  /** Gives the lease up now (a runner leaving a process to the next one). */
  async release(): Promise<void> {
    this.stop();
    if (this.lease) await this.host.leases.release(this.lease);
  }
}

// ── runner leases ──

/** How long a runner's claim on the work it decided outlives it (renewed every third). */
export const RUNNER_LEASE_TTL_MS = 30_000;

export function runnerLeaseName(runnerId: string): string {
  return `runner:${runnerId}`;
}

/** Takes (or renews) this runner's lease: the work it decides is its own to run while it lives. */
export async function holdRunnerLease(runtime: { leases: LeaseStore; runnerId: string; clock: { now(): number } }, ttlMs = RUNNER_LEASE_TTL_MS, batch?: Batch): Promise<void> {
  await runtime.leases.take(runnerLeaseName(runtime.runnerId), runtime.runnerId, ttlMs, runtime.clock.now(), batch);
}
