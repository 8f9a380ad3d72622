/**
 * The named scheduling policies of a loop, one const table per family: overlap, catch-up, and the
 * retry back-off. Per policy: its name (the value `loop.created` records), a one-line description
 * (`create --help`, error hints) and how the planner treats it, as data. Everything else derives
 * from these tables:
 *
 * - the catalogue's enums (`loopPoliciesSchema.overlap` / `.catchUp`, `slot.buffered.policy`: ./catalog.ts);
 * - `create`'s validation, defaults and "did you mean" (src/scheduling/policies.ts `choosePolicy`,
 *   used by src/runtime/loops/commands.ts);
 * - `create`'s flags and help (src/cli/commands/create.ts);
 * - the planner (src/scheduling/planner.ts reads the behaviour fields, never a policy's name).
 *
 * It lives in src/events, not src/scheduling, because the catalogue validates the names recorded in
 * events and src/events may import only src/events (scripts/check-layers.mjs); src/scheduling/policies.ts
 * re-exports it for every layer above. Pure data (its one import: the longest duration). How to add a policy:
 * docs/architecture.md, "How to add an overlap policy".
 */
import { MAX_DURATION_MS } from './durations.js';

/** A family of named policies: the `create` flag that picks one, what it decides, its default. */
export interface PolicyFamily<Name extends string, Rule> {
  /** The `loops create` flag that names the policy. */
  flag: string;
  /** What the family decides (help text): "a slot comes due while a run of the loop is still going". */
  about: string;
  default: Name;
  policies: { readonly [N in Name]: Rule & { readonly description: string } };
}

// ── overlap ──────────────────────────────────────────────────────────────────────────────────────

/** How the planner treats a slot that comes due while the loop is busy. */
export interface OverlapRule {
  /**
   * What the slot becomes while the loop is busy:
   * - `skip`: `slot.skipped {reason: 'overlap'}`; busy = a run of the loop is going;
   * - `wait`: `slot.buffered` (it runs when the loop is free, oldest first); busy = a run is going or
   *   a slot already waits — so waiting slots keep their order;
   * - `run`: fired at once, beside the going run (the loop is never busy; the daemon's dispatcher
   *   starts it without waiting for the loop's other runs).
   */
  whenBusy: 'skip' | 'wait' | 'run';
  /** With `wait`: how many slots may wait at once (a later one is `slot.skipped {reason: 'buffer full'}`); null: no bound. */
  maxWaiting: number | null;
  /** With `wait`: the going runs are asked to stop (recorded cancelled, never retried). */
  cancelsGoing: boolean;
}

export const OVERLAP = {
  flag: '--overlap',
  about: 'a slot comes due while a run of the loop is still going',
  default: 'skip',
  policies: {
    skip: { description: 'skip the slot; it is recorded as skipped', whenBusy: 'skip', maxWaiting: 0, cancelsGoing: false },
    'buffer-one': {
      description: 'keep it waiting and start it when the going run ends; at most one waits, later ones are skipped (buffer full)',
      whenBusy: 'wait',
      maxWaiting: 1,
      cancelsGoing: false,
    },
    'buffer-all': { description: 'keep every such slot and run them one after another, oldest first', whenBusy: 'wait', maxWaiting: null, cancelsGoing: false },
    'cancel-other': {
      description: 'ask the going run to stop (recorded cancelled, never retried) and start the new slot when it has',
      whenBusy: 'wait',
      maxWaiting: null,
      cancelsGoing: true,
    },
    allow: { description: 'run both at once', whenBusy: 'run', maxWaiting: 0, cancelsGoing: false },
  },
} as const satisfies PolicyFamily<string, OverlapRule>;

export type OverlapPolicy = keyof typeof OVERLAP.policies;
/** The overlap policies whose busy slots wait (`slot.buffered` records which one). */
export type WaitingOverlapPolicy = { [N in OverlapPolicy]: (typeof OVERLAP.policies)[N]['whenBusy'] extends 'wait' ? N : never }[OverlapPolicy];

// ── catch-up ─────────────────────────────────────────────────────────────────────────────────────

/** How the planner treats slots that came due while nothing was scheduling. */
export interface CatchUpRule {
  /**
   * What becomes of the due slots:
   * - `drop`: only the latest fires, and only when it is on time (at most the late grace, 60 s,
   *   late); the others are `slot.missed {reason: 'catch-up none'}`. A stranded slot (fired, never
   *   started) later than the grace is dropped too;
   * - `coalesce`: the latest fires once for all of them (`slot.coalesced`); a stranded slot is
   *   dropped once a later slot of the loop fired;
   * - `each`: each fires, oldest first (at most `--catch-up-limit` of the most recent).
   */
  missed: 'drop' | 'coalesce' | 'each';
  /** `--catch-up-window` applies: slots older than it are `slot.missed {reason: 'outside catch-up window'}`. */
  window: boolean;
  /** `--catch-up-limit` applies. */
  limit: boolean;
}

export const CATCH_UP = {
  flag: '--catch-up',
  about: 'slots missed while nothing was scheduling (downtime, sleep, a clock jump)',
  default: 'latest',
  policies: {
    none: { description: 'run none of them (only a slot at most 60 s late still fires)', missed: 'drop', window: false, limit: false },
    latest: { description: 'run once for all of them', missed: 'coalesce', window: true, limit: false },
    all: { description: 'run each, one after another', missed: 'each', window: true, limit: true },
  },
} as const satisfies PolicyFamily<string, CatchUpRule>;

export type CatchUpPolicy = keyof typeof CATCH_UP.policies;

// ── retry back-off ───────────────────────────────────────────────────────────────────────────────

/**
 * Retries of a failed, timed-out or abandoned run (a loop's, or a workflow step's): attempt n
 * (2, 3, …) waits `retryDelay × backoff^(n−2)`, at most `maxRetryDelay` (`backoffDelay`). The
 * back-off is a factor, not a named policy: 1 keeps the delay constant, 2 (the default) doubles
 * it. A cancelled run is never retried.
 */
export const RETRY = {
  attempts: { flag: '--attempts', default: 1, description: 'attempts per slot: a failed, timed-out or abandoned run is retried' },
  retryDelay: { flag: '--retry-delay', defaultMs: 10_000, description: 'wait before the first retry' },
  backoff: { flag: '--backoff', default: 2, min: 1, description: 'each later retry waits this many times longer (a factor; 1 keeps the delay constant)' },
  maxRetryDelay: { flag: '--max-retry-delay', defaultMs: null, description: 'the longest wait between attempts' },
} as const;

/**
 * The wait before attempt `next` (2, 3, …): delayMs × backoff^(next−2), at most maxDelayMs and at
 * most MAX_DURATION_MS (100 years) — --attempts 100 --backoff 10 grows past any date, and the
 * dueAt of such a retry was an invalid date that threw where it was written. Loops and workflow
 * steps both use it.
 */
export function backoffDelay(delayMs: number, backoff: number, maxDelayMs: number | null, next: number): number {
  const delay = delayMs <= 0 ? 0 : Math.min(Math.round(delayMs * backoff ** Math.max(0, next - 2)), MAX_DURATION_MS);
  return maxDelayMs === null ? delay : Math.min(delay, maxDelayMs);
}

// ── derived ──────────────────────────────────────────────────────────────────────────────────────

/** The names of a family, in table order (a non-empty tuple, as `z.enum` wants it). */
function namesOf<Name extends string>(family: { policies: { readonly [N in Name]: unknown } }): readonly [Name, ...Name[]] {
  return Object.keys(family.policies) as unknown as readonly [Name, ...Name[]];
}

export const OVERLAP_POLICY_NAMES = namesOf<OverlapPolicy>(OVERLAP);
export const CATCH_UP_POLICY_NAMES = namesOf<CatchUpPolicy>(CATCH_UP);
export const WAITING_OVERLAP_POLICY_NAMES = OVERLAP_POLICY_NAMES.filter(
  (name) => OVERLAP.policies[name].whenBusy === 'wait',
) as unknown as readonly [WaitingOverlapPolicy, ...WaitingOverlapPolicy[]];
