import { readFileSync, statSync } from 'node:fs';

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

/** The longest delay a Node timer takes (2^31 − 1 ms, 24.8 days): a longer one fires after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A timer longer than Node's: re-armed in steps of at most MAX_TIMER_MS until it is due. */
interface LongTimer {
  readonly id: number;
  current: ReturnType<typeof globalThis.setTimeout>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  setTimeout: (fn, ms) => {
    if (!(ms > MAX_TIMER_MS)) return globalThis.setTimeout(fn, ms);
    // A run's --timeout 30d (or a workflow's timeout, a retry 30 days away) fired at once before.
    const due = performance.now() + ms;
    const step = (): ReturnType<typeof globalThis.setTimeout> => {
      const left = due - performance.now();
      return left > MAX_TIMER_MS ? globalThis.setTimeout(() => (timer.current = step()), MAX_TIMER_MS) : globalThis.setTimeout(fn, Math.max(0, left));
    };
    const timer: LongTimer = { id: 0, current: undefined as unknown as ReturnType<typeof globalThis.setTimeout> };
    timer.current = step();
    return timer;
  },
  clearTimeout: (handle) => {
    const long = handle as Partial<LongTimer>;
    globalThis.clearTimeout((long.current ?? handle) as ReturnType<typeof globalThis.setTimeout>);
  },
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
  // Fixed at the first reading, so that reading is exactly `startIso` (LOOPS_NOW), whatever
  // millisecond passed since the clock was made.
  let offset: number | null = null;
  return {
    ...systemClock,
    now: () => {
      const real = Date.now();
      offset ??= Date.parse(startIso) - real;
      return real + offset;
    },
  };
}

/**
 * FOR TESTS ONLY (`LOOPS_TEST_CLOCK_OFFSET_FILE`): `base` with its wall clock moved by the number of
 * milliseconds the file holds (missing or empty: 0), re-read whenever the file changes (looked at
 * at most every 50 ms) — so a test can step a running daemon's wall clock forward or back, as an
 * NTP step or a resume from suspend would, while monotonic time and timers stay the real ones
 * (which is what such a jump leaves alone). loops reads wall time only through its Clock, so this
 * is the whole of what such a jump changes for it; process start times and file times do not move.
 */
export function offsetFileClock(file: string, base: Clock = systemClock, read: (file: string) => { mtimeMs: number; text: () => string } | null = statText): Clock {
  let offset = 0;
  let seen = -1;
  let lookedAt = -Infinity;
  const current = (): number => {
    const mono = base.monotonic();
    if (mono - lookedAt >= 50) {
      lookedAt = mono;
      const st = read(file);
      const stamp = st ? st.mtimeMs : -2;
      if (stamp !== seen) {
        seen = stamp;
        const value = st ? Number(st.text().trim() || '0') : 0;
        offset = Number.isFinite(value) ? value : 0;
      }
    }
    return offset;
  };
  return {
    now: () => base.now() + current(),
    monotonic: () => base.monotonic(),
    setTimeout: (fn, ms) => base.setTimeout(fn, ms),
    clearTimeout: (handle) => base.clearTimeout(handle),
  };
}

function statText(file: string): { mtimeMs: number; text: () => string } | null {
  try {
    const { mtimeMs, size } = statSync(file);
    return { mtimeMs: mtimeMs + size / 1e6, text: () => readFileSync(file, 'utf8') };
  } catch {
    return null;
  }
}
