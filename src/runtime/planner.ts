/**
 * Slot planning: which instants a loop's schedule yields, with its bounds (starts-at,
 * expires-at, max-runs) and deterministic jitter. Pure functions of their arguments — no clock
 * is read here — so `loops next`, the scheduler and a replay all compute the same times.
 */
import type { Schedule, Timing } from '../events/catalog.js';
import { nextCronFire } from './cron.js';

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
    case 'cron':
      return nextCronFire(schedule.expr, schedule.tz, afterMs);
    case 'at': {
      const at = Date.parse(schedule.at);
      return at > afterMs ? at : null;
    }
    case 'manual':
      return null;
  }
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
