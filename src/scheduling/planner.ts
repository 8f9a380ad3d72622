/**
 * Slot planning: which instants a loop's schedule yields, with its bounds (starts-at,
 * expires-at, max-runs) and deterministic jitter. Pure functions of their arguments — no clock
 * is read here — so `loops next`, the scheduler and a replay all compute the same times.
 *
 * Overlap and catch-up decisions read each policy's behaviour from its table (./policies.ts:
 * `OVERLAP.policies[name].whenBusy`, `CATCH_UP.policies[name].missed`, …), never its name: a new
 * policy that behaves like a combination of the existing fields needs no change here.
 */
import type { Schedule, Timing } from '../events/catalog.js';
import { hostBootMs, REBOOT_TOLERANCE_MS } from './boot.js';
import { isRebootExpr, nextCronFire } from './cron.js';
import { CATCH_UP, OVERLAP, type CatchUpPolicy, type CatchUpRule, type OverlapPolicy, type OverlapRule, type WaitingOverlapPolicy } from './policies.js';

export interface PlannedSlot {
  /** The nominal scheduled instant: the slot's identity. */
  slot: string;
  /** When it fires: the slot plus its jitter. */
  fireAt: string;
}

export interface Plannable {
  id: string;
  schedule: Schedule;
  timing: Timing;
}

/** The next nominal instant of the bare schedule strictly after `afterMs` (no bounds, no jitter). */
export function nextNominal(schedule: Schedule, afterMs: number): number | null {
  switch (schedule.kind) {
    case 'every': {
      const anchor = Date.parse(schedule.anchorAt);
      const k = afterMs < anchor ? 0 : Math.floor((afterMs - anchor) / schedule.everyMs) + 1;
      return anchor + k * schedule.everyMs;
    }
    case 'cron': {
      if (isRebootExpr(schedule.expr)) {
        // The only slot is the boot of the running system, when it came after `afterMs` (the loop's
        // creation, or the boot already decided).
        const boot = hostBootMs();
        return boot !== null && boot > afterMs + REBOOT_TOLERANCE_MS ? boot : null;
      }
      return nextCronFire(schedule.expr, schedule.tz, afterMs, schedule.rules ?? 1);
    }
    case 'at': {
      const at = Date.parse(schedule.at);
      return at > afterMs ? at : null;
    }
    case 'manual':
      return null;
  }
}

/** `--cron @reboot`: once per boot of the host. */
export function isReboot(schedule: Schedule): boolean {
  return schedule.kind === 'cron' && isRebootExpr(schedule.expr);
}

/** FNV-1a, 32 bit: a small, stable hash (the same on every platform and version). */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

/**
 * The jitter of one slot: deterministic in [0, jitterMs), derived from the loop id and the slot;
 * in whole seconds when the jitter is a whole number of seconds (fire times people can read).
 */
export function jitterFor(loopId: string, slot: string, jitterMs: number | null): number {
  if (!jitterMs) return 0;
  const hash = fnv1a(`${loopId}|${slot}`);
  return jitterMs % 1000 === 0 ? (hash % (jitterMs / 1000)) * 1000 : hash % jitterMs;
}

/**
 * The next `count` slots strictly after `afterMs`, within the loop's bounds. `runsSoFar` counts
 * scheduled runs already made (for max-runs).
 */
export function upcomingSlots(loop: Plannable, afterMs: number, count: number, runsSoFar = 0): PlannedSlot[] {
  const { timing } = loop;
  const startsAt = timing.startsAt === null ? null : Date.parse(timing.startsAt);
  const expiresAt = timing.expiresAt === null ? null : Date.parse(timing.expiresAt);
  const left = timing.maxRuns === null ? Infinity : Math.max(0, timing.maxRuns - runsSoFar);
  const out: PlannedSlot[] = [];
  let cursor = startsAt !== null && startsAt - 1 > afterMs ? startsAt - 1 : afterMs;
  while (out.length < Math.min(count, left)) {
    const nominal = nextNominal(loop.schedule, cursor);
    if (nominal === null || (expiresAt !== null && nominal > expiresAt)) break;
    const slot = new Date(nominal).toISOString();
    out.push({ slot, fireAt: new Date(nominal + jitterFor(loop.id, slot, timing.jitterMs)).toISOString() });
    cursor = nominal;
  }
  return out;
}

/** When the loop next fires (jitter applied), or null when it never will again. */
export function nextFireAt(loop: Plannable, afterMs: number, runsSoFar = 0): string | null {
  return upcomingSlots(loop, afterMs, 1, runsSoFar)[0]?.fireAt ?? null;
}

// ── deciding what to do with due slots ────────────────────────────────────────

export interface PolicyView {
  overlap: OverlapPolicy;
  catchUp: CatchUpPolicy;
  catchUpWindowMs: number | null;
  catchUpLimit: number | null;
}

export interface DueState {
  /** Slots at or before this instant are not due (creation, or the last resume). */
  scheduleFrom: string;
  /** The latest slot already decided. */
  lastSlot: string | null;
  /** Slots fired so far. */
  scheduledRuns: number;
  /** Runs of this loop still going (overlap). */
  running: string[];
  /** Slots buffered earlier and not started yet (overlap buffer-one, buffer-all, cancel-other). */
  buffered?: number;
  /** The loop's current due time: what a fixed-delay loop fires next (set after each run ends). */
  nextRunAt?: string | null;
}

export type Decision =
  | { type: 'slot.fired'; data: { slot: string; fireAt: string; runId: string; late: boolean; nextRunAt: string | null } }
  | {
      type: 'slot.skipped';
      data: { slot: string; fireAt: string; reason: 'overlap' | 'buffer full'; blockedBy: string | null; nextRunAt: string | null };
    }
  | {
      type: 'slot.buffered';
      data: {
        slot: string;
        fireAt: string;
        runId: string;
        policy: WaitingOverlapPolicy;
        blockedBy: string | null;
        cancels: string[];
        nextRunAt: string | null;
      };
    }
  | { type: 'slot.coalesced'; data: { from: string; to: string; count: number; into: string } }
  | {
      type: 'slot.missed';
      data: {
        from: string;
        to: string;
        count: number;
        reason: 'catch-up none' | 'outside catch-up window' | 'over catch-up limit' | 'max-runs reached';
        nextRunAt: string | null;
      };
    }
  | { type: 'loop.expired'; data: { reason: 'expires-at' | 'max-runs' | 'no more slots' } };

export interface DecideOptions {
  /** A slot this late or less is on time, not missed (the scheduler's own lateness). Default 60 s. */
  lateGraceMs?: number;
  /**
   * Most due slots looked at in one pass, oldest first; later due slots stay undecided (the pass's
   * nextRunAt is then not in the future, so the next pass takes them). Default 100,000.
   */
  maxSlots?: number;
}

/**
 * The overlap rule for a new run of a loop with `running` runs going and `buffered` slots waiting:
 * `blocked` (skip: it does not run), `buffering` (it would wait behind them; `room`: how many more
 * may wait), or neither (it runs now). The one reading of the overlap policies: `decideDue` applies
 * it to due slots, `loops fork` / `loops rerun` to the run asked for.
 */
export function overlapVerdict(overlap: OverlapRule, running: number, buffered: number): { blocked: boolean; buffering: boolean; room: number } {
  const blocked = overlap.whenBusy === 'skip' && running > 0;
  const buffering = overlap.whenBusy === 'wait' && (running > 0 || buffered > 0);
  const room = !buffering ? 0 : overlap.maxWaiting === null ? Infinity : Math.max(0, overlap.maxWaiting - buffered);
  return { blocked, buffering, room };
}

/**
 * What to do, now, with every slot that came due since the last decision: fire, skip (overlap),
 * coalesce (catch-up latest), or miss (catch-up none, window, limit) — each slot exactly once —
 * and whether the loop has ended. Pure: `newRunId` names the runs of fired slots.
 */
export function decideDue(
  loop: Plannable & { policies: PolicyView },
  state: DueState,
  nowMs: number,
  newRunId: () => string,
  options: DecideOptions = {},
): Decision[] {
  const grace = options.lateGraceMs ?? 60_000;
  if (loop.schedule.kind === 'every' && loop.schedule.anchor === 'fixed-delay') {
    return decideFixedDelay(loop, state, nowMs, newRunId, grace);
  }
  const after = Math.max(Date.parse(state.scheduleFrom), state.lastSlot === null ? -Infinity : Date.parse(state.lastSlot));
  // Enumerate without max-runs: missed slots do not count as runs, and the latest slot matters.
  const unbounded = { ...loop, timing: { ...loop.timing, maxRuns: null } };
  const due: PlannedSlot[] = [];
  let cursor = after;
  const cap = options.maxSlots ?? 100_000;
  // Growing batches: a cron slot in a time zone costs ~0.1 ms, so do not compute a thousand
  // future slots to find the few that are due.
  let size = 8;
  while (due.length < cap) {
    const want = Math.min(size, cap - due.length);
    size = Math.min(size * 2, 1024);
    const batch = upcomingSlots(unbounded, cursor, want);
    // Due slots are a prefix, in slot order: a slot whose fire time is still ahead holds back the
    // later ones (were they decided first, lastSlot would pass it and it would never be decided).
    const pending = batch.findIndex((s) => Date.parse(s.fireAt) > nowMs);
    const ready = pending === -1 ? batch : batch.slice(0, pending);
    due.push(...ready);
    if (ready.length < batch.length || batch.length < want) break;
    cursor = Date.parse(batch[batch.length - 1]!.slot);
  }
  const decisions: Decision[] = [];
  const { policies } = loop;
  const catchUp: CatchUpRule = CATCH_UP.policies[policies.catchUp];
  const overlap: OverlapRule = OVERLAP.policies[policies.overlap];
  const isLate = (s: PlannedSlot) => nowMs - Date.parse(s.fireAt) > grace;
  const inWindow = (s: PlannedSlot) =>
    policies.catchUpWindowMs === null || nowMs - Date.parse(s.fireAt) <= policies.catchUpWindowMs + grace;

  let toFire: PlannedSlot[] = [];
  const missed: Array<{
    slots: PlannedSlot[];
    reason: 'catch-up none' | 'outside catch-up window' | 'over catch-up limit' | 'max-runs reached';
  }> = [];
  let coalesced: PlannedSlot[] = [];
  if (due.length > 0) {
    const last = due[due.length - 1]!;
    if (catchUp.missed === 'drop') {
      const older = isLate(last) ? due : due.slice(0, -1);
      if (older.length) missed.push({ slots: older, reason: 'catch-up none' });
      if (!isLate(last)) toFire = [last];
    } else {
      const outside = catchUp.window ? due.filter((s) => !inWindow(s)) : [];
      let candidates = catchUp.window ? due.filter(inWindow) : due;
      if (outside.length) missed.push({ slots: outside, reason: 'outside catch-up window' });
      if (catchUp.limit && policies.catchUpLimit !== null && candidates.length > policies.catchUpLimit) {
        missed.push({ slots: candidates.slice(0, candidates.length - policies.catchUpLimit), reason: 'over catch-up limit' });
        candidates = candidates.slice(candidates.length - policies.catchUpLimit);
      }
      if (catchUp.missed === 'coalesce') {
        if (candidates.length) {
          coalesced = candidates.slice(0, -1);
          toFire = [candidates[candidates.length - 1]!];
        }
      } else {
        toFire = candidates;
      }
    }
  }
  // Overlap: while a run is going, the slots that would fire are skipped (none of them runs, so
  // max-runs does not apply to them) or buffered behind it (they will run: max-runs applies). A
  // slot already waiting keeps the loop busy too, so buffered slots run in the order they came.
  const { blocked, buffering, room } = overlapVerdict(overlap, state.running.length, state.buffered ?? 0);
  // max-runs: only so many more slots may fire.
  const left = blocked || loop.timing.maxRuns === null ? Infinity : Math.max(0, loop.timing.maxRuns - state.scheduledRuns);
  const firing = toFire.slice(0, left);
  if (firing.length < toFire.length) {
    // With catch-up latest and no run left, the slots coalesced into the last one are missed with it.
    const over = firing.length === 0 ? [...coalesced, ...toFire] : toFire.slice(firing.length);
    if (firing.length === 0) coalesced = [];
    missed.push({ slots: over, reason: 'max-runs reached' });
  }
  const fired = blocked ? 0 : buffering ? Math.min(room, firing.length) : firing.length;
  const lastDecided = due.length ? Date.parse(due[due.length - 1]!.slot) : after;
  // The first slot not decided yet (not due: its fire time is after now). Not "the next slot after
  // now": with jitter a slot can be at or before now and still ahead of its fire time.
  const nextRunAt = nextFireAt(loop, lastDecided, state.scheduledRuns + fired);

  for (const m of missed) {
    decisions.push({
      type: 'slot.missed',
      data: { from: m.slots[0]!.slot, to: m.slots[m.slots.length - 1]!.slot, count: m.slots.length, reason: m.reason, nextRunAt },
    });
  }
  if (coalesced.length && firing.length) {
    decisions.push({
      type: 'slot.coalesced',
      data: { from: coalesced[0]!.slot, to: coalesced[coalesced.length - 1]!.slot, count: coalesced.length, into: firing[0]!.slot },
    });
  }
  let buffered = 0;
  for (const s of firing) {
    if (buffering) {
      if (buffered < room) {
        buffered += 1;
        decisions.push({
          type: 'slot.buffered',
          data: {
            slot: s.slot,
            fireAt: s.fireAt,
            runId: newRunId(),
            policy: policies.overlap as WaitingOverlapPolicy,
            blockedBy: state.running[0] ?? null,
            cancels: overlap.cancelsGoing ? [...state.running] : [],
            nextRunAt,
          },
        });
      } else {
        decisions.push({
          type: 'slot.skipped',
          data: { slot: s.slot, fireAt: s.fireAt, reason: 'buffer full', blockedBy: state.running[0] ?? null, nextRunAt },
        });
      }
    } else if (blocked) {
      decisions.push({
        type: 'slot.skipped',
        data: { slot: s.slot, fireAt: s.fireAt, reason: 'overlap', blockedBy: state.running[0] ?? null, nextRunAt },
      });
    } else {
      const late = coalesced.length > 0 || isLate(s);
      decisions.push({ type: 'slot.fired', data: { slot: s.slot, fireAt: s.fireAt, runId: newRunId(), late, nextRunAt } });
    }
  }
  // Nothing left (nextRunAt is the first undecided slot, so an --at loop whose slot is still
  // ahead of its fire time is not expired).
  // An @reboot loop has no next slot until the next boot: it never ends for want of one.
  if (loop.schedule.kind !== 'manual' && nextRunAt === null && !isReboot(loop.schedule)) {
    const reason =
      loop.timing.maxRuns !== null && state.scheduledRuns + fired >= loop.timing.maxRuns
        ? 'max-runs'
        : // The schedule itself goes on, --expires-at ends it.
          loop.timing.expiresAt !== null &&
            upcomingSlots({ ...unbounded, timing: { ...unbounded.timing, expiresAt: null } }, lastDecided, 1).length > 0
          ? 'expires-at'
          : 'no more slots';
    decisions.push({ type: 'loop.expired', data: { reason } });
  }
  return decisions;
}

/**
 * A fired slot whose runner stopped before starting it (stranded work), looked at again now: null
 * when it still runs, else why not by the loop's catch-up policy — catch-up none and later than
 * the grace; outside the catch-up window; or, catch-up latest, a later slot of the loop fired since.
 */
export function strandedVerdict(
  policies: PolicyView,
  item: { fireAt: string },
  laterSlotFired: boolean,
  nowMs: number,
  graceMs: number,
): string | null {
  const late = nowMs - Date.parse(item.fireAt);
  const catchUp: CatchUpRule = CATCH_UP.policies[policies.catchUp];
  if (catchUp.missed === 'drop') return late > graceMs ? 'catch-up none' : null;
  if (catchUp.window && policies.catchUpWindowMs !== null && late > policies.catchUpWindowMs + graceMs) return 'outside the catch-up window';
  if (catchUp.missed === 'coalesce' && laterSlotFired) return 'catch-up latest: a later slot fired since';
  return null;
}

/**
 * Fixed delay: one slot at a time, due `every` after the previous run finished (the loop's
 * nextRunAt, set by loop.rescheduled). Never overlaps; after downtime it fires once.
 */
function decideFixedDelay(
  loop: Plannable & { policies: PolicyView },
  state: DueState,
  nowMs: number,
  newRunId: () => string,
  grace: number,
): Decision[] {
  if (state.running.length > 0 || !state.nextRunAt) return [];
  const due = Date.parse(state.nextRunAt);
  if (due > nowMs) return [];
  const { expiresAt, maxRuns } = loop.timing;
  if ((expiresAt !== null && due > Date.parse(expiresAt)) || (maxRuns !== null && state.scheduledRuns >= maxRuns)) {
    return [{ type: 'loop.expired', data: { reason: maxRuns !== null && state.scheduledRuns >= maxRuns ? 'max-runs' : 'expires-at' } }];
  }
  const slot = new Date(due).toISOString();
  const decisions: Decision[] = [
    { type: 'slot.fired', data: { slot, fireAt: slot, runId: newRunId(), late: nowMs - due > grace, nextRunAt: null } },
  ];
  if (maxRuns !== null && state.scheduledRuns + 1 >= maxRuns) decisions.push({ type: 'loop.expired', data: { reason: 'max-runs' } });
  return decisions;
}

/** A fixed-delay loop's next due time after a run that finished at `finishedMs` (null: expired). */
export function fixedDelayNext(loop: Plannable, finishedMs: number): string | null {
  if (loop.schedule.kind !== 'every') return null;
  const next = finishedMs + loop.schedule.everyMs;
  if (loop.timing.expiresAt !== null && next > Date.parse(loop.timing.expiresAt)) return null;
  return new Date(next).toISOString();
}
