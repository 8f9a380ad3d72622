/**
 * A loop's next fire times, as `loops next` previews them: none unless the loop is active; for a
 * fixed-delay loop only its set next slot (each later one is due after the previous run ends);
 * otherwise the planner's upcoming slots (zone, bounds and jitter applied), each with its local time.
 */
import { upcomingSlots } from '../../scheduling/planner.js';
import { formatInZone } from '../../scheduling/zone.js';
import type { LoopView } from './loops.js';

/** One upcoming fire of a loop. */
export interface NextFire {
  /** The slot: its nominal time (ISO-8601 UTC). */
  slot: string;
  /** When it fires: the slot plus the loop's jitter (ISO-8601 UTC). */
  fireAt: string;
  /** `fireAt` in the loop's zone. */
  local: string;
}

/** Up to `count` next fires of `loop` after `nowMs` (empty when it is not active or never fires again). */
export function nextFires(loop: LoopView, nowMs: number, count: number): NextFire[] {
  const active = loop.status === 'active';
  const fixedDelay = loop.schedule.kind === 'every' && loop.schedule.anchor === 'fixed-delay';
  const slots = !active
    ? []
    : fixedDelay
      ? loop.nextRunAt
        ? [{ slot: loop.nextRunAt, fireAt: loop.nextRunAt }]
        : []
      : upcomingSlots(loop, nowMs, count, loop.scheduledRuns);
  return slots.map((s) => ({ ...s, local: formatInZone(Date.parse(s.fireAt), loop.timing.tz) }));
}
