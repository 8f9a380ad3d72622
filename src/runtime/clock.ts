/**
 * The one injected source of time. Wall time (`now`) drives schedules; monotonic time drives
 * timeouts and back-offs. Tests use `SimulatedClock` and advance it explicitly.
 */
export type TimerHandle = { readonly id: number } | ReturnType<typeof globalThis.setTimeout>;

export interface Clock {
  /** Wall-clock time in epoch ms. */
  now(): number;
  /** Monotonic ms (never jumps with NTP or suspend). */
  monotonic(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

export function isoNow(clock: Clock): string {
  return new Date(clock.now()).toISOString();
}

export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  setTimeout: (fn, ms) => globalThis.setTimeout(fn, ms),
  clearTimeout: (handle) => globalThis.clearTimeout(handle as ReturnType<typeof globalThis.setTimeout>),
};

interface SimTimer {
  id: number;
  due: number;
  fn: () => void;
}

/** A clock that only moves when told to. Timers fire in due order during `advance`. */
export class SimulatedClock implements Clock {
  private wall: number;
  private mono = 0;
  private nextId = 1;
  private timers: SimTimer[] = [];

  constructor(start: number | string | Date = '2026-01-01T00:00:00.000Z') {
    this.wall = typeof start === 'number' ? start : new Date(start).getTime();
  }

  now(): number {
    return this.wall;
  }

  monotonic(): number {
    return this.mono;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const timer = { id: this.nextId++, due: this.mono + Math.max(0, ms), fn };
    this.timers.push(timer);
    return { id: timer.id };
  }

  clearTimeout(handle: TimerHandle): void {
    const id = (handle as { id: number }).id;
    this.timers = this.timers.filter((t) => t.id !== id);
  }

  /** Moves both clocks forward by `ms`, firing due timers in order. */
  advance(ms: number): void {
    const target = this.mono + ms;
    for (;;) {
      this.timers.sort((a, b) => a.due - b.due || a.id - b.id);
      const next = this.timers[0];
      if (!next || next.due > target) break;
      this.timers.shift();
      this.wall += next.due - this.mono;
      this.mono = next.due;
      next.fn();
    }
    this.wall += target - this.mono;
    this.mono = target;
  }

  /** Jumps the wall clock only (an NTP step or a suspend); monotonic time does not move. */
  jumpWall(ms: number): void {
    this.wall += ms;
  }

  pendingTimers(): number {
    return this.timers.length;
  }
}

/**
 * The system clock shifted so that it reads `startIso` now and runs on from there: `LOOPS_NOW`,
 * for trying out schedules ("what would a pass at 03:00 tomorrow do?") and for end-to-end tests.
 * Timers and monotonic time are the real ones.
 */
export function shiftedClock(startIso: string): Clock {
  const offset = Date.parse(startIso) - Date.now();
  return { ...systemClock, now: () => Date.now() + offset };
}
