/**
 * decideDue (src/scheduling/planner.ts): what happens to every slot that came due — fired, skipped
 * for overlap, coalesced or missed by the catch-up policy — and whether the loop has ended.
 * Examples for each rule, then properties over schedules (every 1m / 1h, cron in two zones across
 * DST, --at) × catch-up (none / latest / all, window, limit) × overlap (skip / allow, running or
 * not) × max-runs / expires-at × downtime, checked against an independent enumeration of the
 * schedule and folded through the loop machine the way the log replays them.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { validateEventData, type LoopPolicies, type Schedule, type Timing } from '../../src/events/catalog.js';
import { fold } from '../../src/machines/fold.js';
import { loopMachine, type LoopContext } from '../../src/machines/loop.js';
import {
  decideDue,
  upcomingSlots,
  type Decision,
  type DecideOptions,
  type DueState,
  type PlannedSlot,
  type PolicyView,
} from '../../src/scheduling/planner.js';
import { commandTarget, policies as fullPolicies, timing as mkTiming } from '../helpers/events.js';

const SEC = 1000;
const MIN = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const GRACE = 60_000; // the default lateGraceMs
const BASE = Date.parse('2026-06-15T10:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();
const ms = (text: string) => Date.parse(text);

type DecideLoop = Parameters<typeof decideDue>[0];

interface LoopSpec {
  schedule: Schedule;
  timing?: Partial<Timing>;
  policies?: Partial<PolicyView>;
  id?: string;
}

function mkLoop(spec: LoopSpec): DecideLoop {
  return {
    id: spec.id ?? 'loop_1',
    schedule: spec.schedule,
    timing: mkTiming(spec.timing),
    policies: { overlap: 'skip', catchUp: 'latest', catchUpWindowMs: null, catchUpLimit: null, ...spec.policies },
  };
}

const every = (everyMs: number, anchorAt = BASE): Schedule => ({ kind: 'every', everyMs, anchorAt: iso(anchorAt), anchor: 'fixed-rate' });
const cron = (expr: string, tz: string): Schedule => ({ kind: 'cron', expr, tz });

function state(overrides: Partial<DueState> = {}): DueState {
  return { scheduleFrom: iso(BASE), lastSlot: null, scheduledRuns: 0, running: [], ...overrides };
}

function ids() {
  let n = 0;
  return () => `run_${++n}`;
}

function decide(loop: DecideLoop, s: DueState, nowMs: number, options: DecideOptions = {}): Decision[] {
  return decideDue(loop, s, nowMs, ids(), options);
}

// ── an independent view of the schedule ──────────────────────────────────────

const unbounded = (loop: DecideLoop): DecideLoop => ({ ...loop, timing: { ...loop.timing, maxRuns: null } });

/** Every slot of the schedule (bounds but not max-runs) strictly after `afterMs` and at or before `untilMs`. */
function slotsIn(loop: DecideLoop, afterMs: number, untilMs: number): PlannedSlot[] {
  const out: PlannedSlot[] = [];
  let cursor = afterMs;
  for (let size = 8; ; size = Math.min(size * 2, 1024)) {
    const batch = upcomingSlots(unbounded(loop), cursor, size);
    for (const s of batch) {
      if (ms(s.slot) > untilMs) return out;
      out.push(s);
    }
    if (batch.length < size) return out;
    cursor = ms(batch[batch.length - 1]!.slot);
  }
}

/**
 * The slots a range `from..to` (count) of a coalesced / missed decision stands for, checked to be
 * exact: `from` and `to` are slots of the schedule and exactly `count` slots lie between them.
 * `schedule` is every slot of the schedule in an interval holding the range (computed once per pass:
 * cron slots in a time zone are not cheap).
 */
function expandRange(loop: DecideLoop, from: string, to: string, count: number, schedule?: string[]): string[] {
  const list = schedule ?? slotsIn(loop, ms(from) - 1, ms(to)).map((s) => s.slot);
  const i = list.indexOf(from);
  const j = list.indexOf(to);
  expect(i, `range ${from}..${to} starts on a slot`).toBeGreaterThanOrEqual(0);
  expect(j, `range ${from}..${to} ends on a slot`).toBeGreaterThanOrEqual(i);
  const slots = list.slice(i, j + 1);
  expect(slots.length, `range ${from}..${to} has ${count} slots on the schedule`).toBe(count);
  return slots;
}

/** Every slot of the schedule after max(scheduleFrom, lastSlot) up to now, and the due ones among them (fireAt ≤ now). */
function dueRef(loop: DecideLoop, s: DueState, nowMs: number): { schedule: PlannedSlot[]; due: PlannedSlot[] } {
  const after = Math.max(ms(s.scheduleFrom), s.lastSlot === null ? -Infinity : ms(s.lastSlot));
  if (nowMs <= after) return { schedule: [], due: [] };
  const schedule = slotsIn(loop, after, nowMs);
  return { schedule, due: schedule.filter((p) => ms(p.fireAt) <= nowMs) };
}

interface Summary {
  /** Every decided slot, one entry per decision it got (ranges expanded). */
  decided: string[];
  fired: Array<Extract<Decision, { type: 'slot.fired' }>['data']>;
  skipped: Array<Extract<Decision, { type: 'slot.skipped' }>['data']>;
  buffered: Array<Extract<Decision, { type: 'slot.buffered' }>['data']>;
  coalesced: Array<Extract<Decision, { type: 'slot.coalesced' }>['data']>;
  missed: Array<Extract<Decision, { type: 'slot.missed' }>['data']>;
  expired: Array<Extract<Decision, { type: 'loop.expired' }>['data']>;
  nextRunAts: Array<string | null>;
}

function summarize(loop: DecideLoop, decisions: Decision[], schedule?: string[]): Summary {
  const sum: Summary = { decided: [], fired: [], skipped: [], buffered: [], coalesced: [], missed: [], expired: [], nextRunAts: [] };
  for (const d of decisions) {
    switch (d.type) {
      case 'slot.fired':
        sum.fired.push(d.data);
        sum.decided.push(d.data.slot);
        sum.nextRunAts.push(d.data.nextRunAt);
        break;
      case 'slot.buffered':
        sum.buffered.push(d.data);
        sum.decided.push(d.data.slot);
        sum.nextRunAts.push(d.data.nextRunAt);
        break;
      case 'slot.skipped':
        sum.skipped.push(d.data);
        sum.decided.push(d.data.slot);
        sum.nextRunAts.push(d.data.nextRunAt);
        break;
      case 'slot.coalesced':
        sum.coalesced.push(d.data);
        sum.decided.push(...expandRange(loop, d.data.from, d.data.to, d.data.count, schedule));
        break;
      case 'slot.missed':
        sum.missed.push(d.data);
        sum.decided.push(...expandRange(loop, d.data.from, d.data.to, d.data.count, schedule));
        sum.nextRunAts.push(d.data.nextRunAt);
        break;
      case 'loop.expired':
        sum.expired.push(d.data);
        break;
    }
  }
  return sum;
}

const sortIso = (xs: string[]) => [...xs].sort((a, b) => ms(a) - ms(b));
const lastDecidedOf = (s: DueState, sum: Summary): number =>
  Math.max(ms(s.scheduleFrom), s.lastSlot === null ? -Infinity : ms(s.lastSlot), ...sum.decided.map(ms));

/** The loop's created event, for folding decisions through the machine. */
function createdEvent(loop: DecideLoop, s: DueState) {
  const policies: LoopPolicies = fullPolicies(loop.policies);
  return {
    type: 'loop.created',
    at: s.scheduleFrom,
    data: {
      loopId: loop.id,
      name: 'job',
      description: null,
      schedule: loop.schedule,
      timing: loop.timing,
      target: commandTarget(),
      policies,
      nextRunAt: upcomingSlots(loop, ms(s.scheduleFrom), 1)[0]?.fireAt ?? null,
    },
  };
}

/**
 * Every property of one decideDue call. Returns the machine's context after folding the
 * decisions (what the next call starts from), or null when the loop expired.
 */
function checkCall(loop: DecideLoop, s: DueState, nowMs: number, decisions: Decision[], options: DecideOptions = {}) {
  const grace = options.lateGraceMs ?? GRACE;
  // Every decision is a valid event of the catalogue.
  for (const d of decisions) expect(validateEventData(d.type, d.data)).toEqual(d.data);
  const { schedule, due } = dueRef(loop, s, nowMs);
  const sum = summarize(loop, decisions, schedule.map((p) => p.slot));

  // Each due slot gets exactly one decision; nothing else is decided.
  expect(sortIso(sum.decided)).toEqual(due.map((p) => p.slot));
  expect(new Set(sum.decided).size).toBe(sum.decided.length);

  // Fired slots (and skipped ones) in strictly increasing order, with their planned fire time.
  const fireAtOf = new Map(due.map((p) => [p.slot, p.fireAt]));
  const firedSlots = [...sum.fired, ...sum.buffered].map((f) => ms(f.slot));
  for (let i = 1; i < firedSlots.length; i++) expect(firedSlots[i]!).toBeGreaterThan(firedSlots[i - 1]!);
  for (const f of [...sum.fired, ...sum.skipped, ...sum.buffered]) expect(f.fireAt).toBe(fireAtOf.get(f.slot));
  const runIds = [...sum.fired, ...sum.buffered].map((f) => f.runId);
  expect(new Set(runIds).size).toBe(runIds.length);

  const { policies, timing } = loop;
  const started = sum.fired.length + sum.skipped.length + sum.buffered.length;
  if (policies.catchUp === 'none') {
    expect(started).toBeLessThanOrEqual(1);
    for (const f of [...sum.fired, ...sum.skipped, ...sum.buffered]) expect(nowMs - ms(f.fireAt)).toBeLessThanOrEqual(grace);
    expect(sum.coalesced).toEqual([]);
  }
  if (policies.catchUp === 'latest') {
    expect(started).toBeLessThanOrEqual(1);
    for (const c of sum.coalesced) {
      const into = [...sum.fired, ...sum.skipped, ...sum.buffered].map((f) => f.slot);
      expect(into).toEqual([c.into]);
      expect(ms(c.to)).toBeLessThan(ms(c.into));
    }
    for (const f of sum.fired) expect(f.late).toBe(sum.coalesced.length > 0 || nowMs - ms(f.fireAt) > grace);
  } else {
    for (const f of sum.fired) expect(f.late).toBe(nowMs - ms(f.fireAt) > grace);
  }
  if (policies.catchUp === 'all' && policies.catchUpLimit !== null) {
    expect(started).toBeLessThanOrEqual(policies.catchUpLimit);
  }
  if (policies.catchUpWindowMs !== null) {
    for (const f of [...sum.fired, ...sum.skipped, ...sum.buffered]) {
      expect(nowMs - ms(f.fireAt)).toBeLessThanOrEqual(policies.catchUpWindowMs + grace);
    }
  }
  // A due slot is only missed for a reason: when the catch-up policy would have fired it, it fired.
  if (due.length > 0 && sum.missed.length === 0 && policies.catchUp === 'all') expect(started).toBe(due.length);
  if (due.length > 0 && policies.catchUp !== 'none' && policies.catchUpWindowMs === null && started === 0) {
    expect(sum.missed.every((m) => m.reason === 'max-runs reached')).toBe(true);
  }

  // Max runs: never more fired (or buffered: they run later) than left.
  if (timing.maxRuns !== null) expect(s.scheduledRuns + sum.fired.length + sum.buffered.length).toBeLessThanOrEqual(timing.maxRuns);
  // Overlap: skip while a run is going; buffer behind it (and behind slots already waiting); else fire.
  const waiting = s.buffered ?? 0;
  const buffers = policies.overlap === 'buffer-one' || policies.overlap === 'buffer-all' || policies.overlap === 'cancel-other';
  if (policies.overlap === 'skip' && s.running.length > 0) {
    expect(sum.fired).toEqual([]);
    expect(sum.buffered).toEqual([]);
    for (const k of sum.skipped) expect(k).toMatchObject({ reason: 'overlap', blockedBy: s.running[0] });
    expect(sum.missed.filter((m) => m.reason === 'max-runs reached')).toEqual([]);
  } else if (buffers && (s.running.length > 0 || waiting > 0)) {
    expect(sum.fired).toEqual([]);
    for (const b of sum.buffered) {
      expect(b).toMatchObject({ policy: policies.overlap, blockedBy: s.running[0] ?? null });
      expect(b.cancels).toEqual(policies.overlap === 'cancel-other' ? s.running : []);
    }
    if (policies.overlap === 'buffer-one') {
      expect(sum.buffered.length).toBeLessThanOrEqual(Math.max(0, 1 - waiting));
      for (const k of sum.skipped) expect(k.reason).toBe('buffer full');
      // Only once the one place is taken are slots skipped.
      if (sum.skipped.length) expect(waiting + sum.buffered.length).toBeGreaterThanOrEqual(1);
    } else {
      expect(sum.skipped).toEqual([]);
    }
  } else {
    expect(sum.skipped).toEqual([]);
    expect(sum.buffered).toEqual([]);
  }

  // The next due time: one value for the whole pass, strictly after now (or null), and it is the
  // fire time of the first slot still undecided — nothing is jumped over.
  const runsAfter = s.scheduledRuns + sum.fired.length + sum.buffered.length;
  const lastDecided = lastDecidedOf(s, sum);
  const nextSlot = upcomingSlots(loop, lastDecided, 1, runsAfter)[0] ?? null;
  expect(new Set(sum.nextRunAts).size).toBeLessThanOrEqual(1);
  for (const n of sum.nextRunAts) {
    if (n !== null) expect(ms(n)).toBeGreaterThan(nowMs);
    expect(n).toBe(nextSlot?.fireAt ?? null);
  }

  // loop.expired exactly when nothing is left: max-runs used up, or no slot after the last decided one.
  const maxRunsUsed = timing.maxRuns !== null && runsAfter >= timing.maxRuns;
  const noMoreSlots = upcomingSlots(unbounded(loop), lastDecided, 1).length === 0;
  const nothingLeft = loop.schedule.kind !== 'manual' && (maxRunsUsed || noMoreSlots);
  expect(sum.expired.length).toBe(nothingLeft ? 1 : 0);
  if (nothingLeft) {
    expect(decisions[decisions.length - 1]!.type).toBe('loop.expired');
    // The reason: max-runs used up; else the schedule would go on but --expires-at ends it; else it has no slot left.
    const beyondExpiry = upcomingSlots({ ...loop, timing: { ...timing, maxRuns: null, expiresAt: null } }, lastDecided, 1).length > 0;
    expect(sum.expired[0]!.reason).toBe(maxRunsUsed ? 'max-runs' : beyondExpiry ? 'expires-at' : 'no more slots');
  }

  // Folded through the loop machine (from a stream whose state is `s`): every decision accepted,
  // the context follows.
  const { snapshot, steps, lastSlotBefore } = foldWithState(loop, s, decisions, nowMs);
  for (const step of steps) expect(step.accepted, `${step.event.type} accepted in ${JSON.stringify(step.before.value)}`).toBe(true);
  const ctx = snapshot.context as LoopContext;
  expect(ctx.scheduledRuns).toBe(runsAfter);
  const decidedMax = sum.decided.length ? iso(Math.max(...sum.decided.map(ms))) : lastSlotBefore;
  expect(ctx.lastSlot).toBe(decidedMax);
  expect(snapshot.value).toBe(nothingLeft ? 'expired' : 'active');
  if (sum.nextRunAts.length && !nothingLeft) expect(ctx.nextRunAt).toBe(sum.nextRunAts[0]);
  return nothingLeft ? null : { lastSlot: ctx.lastSlot, scheduledRuns: ctx.scheduledRuns, sum, decided: sum.decided };
}

/**
 * The loop stream up to state `s` (created at scheduleFrom; the earlier decisions as one missed
 * range and `scheduledRuns` fired slots are not needed by the machine — only lastSlot and the
 * count — so they are reproduced with a synthetic prefix), then the decisions.
 */
function foldWithState(loop: DecideLoop, s: DueState, decisions: Decision[], nowMs: number) {
  const at = iso(Math.max(nowMs, ms(s.scheduleFrom)));
  const prefix: Array<{ type: string; at: string; data: unknown }> = [createdEvent(loop, s)];
  for (let i = 0; i < s.scheduledRuns; i++) {
    prefix.push({ type: 'slot.fired', at: s.scheduleFrom, data: { slot: iso(ms(s.scheduleFrom) - (i + 1) * 1000), fireAt: s.scheduleFrom, runId: `old_${i}`, late: false, nextRunAt: null } });
  }
  if (s.lastSlot !== null) {
    prefix.push({ type: 'slot.missed', at: s.scheduleFrom, data: { from: s.lastSlot, to: s.lastSlot, count: 1, reason: 'catch-up none', nextRunAt: null } });
  }
  const lastSlotBefore = (fold(loopMachine, prefix).snapshot.context as LoopContext).lastSlot;
  expect(lastSlotBefore === null || s.lastSlot === null || lastSlotBefore === s.lastSlot).toBe(true);
  return { ...fold(loopMachine, [...prefix, ...decisions.map((d) => ({ type: d.type, at, data: d.data }))]), lastSlotBefore };
}

// ── examples ─────────────────────────────────────────────────────────────────

describe('decideDue: examples (every 1h, down for 3 days and 30 minutes)', () => {
  const now = BASE + 3 * DAY + 30 * MIN;
  const hourly = (policies: Partial<PolicyView> = {}, t: Partial<Timing> = {}) => mkLoop({ schedule: every(HOUR), policies, timing: t });
  const slotN = (n: number) => iso(BASE + n * HOUR);

  it('catch-up latest: the 71 older slots are coalesced into the 72nd, which fires (late)', () => {
    const loop = hourly({ catchUp: 'latest' });
    const decisions = decide(loop, state(), now);
    expect(decisions).toEqual([
      { type: 'slot.coalesced', data: { from: slotN(1), to: slotN(71), count: 71, into: slotN(72) } },
      { type: 'slot.fired', data: { slot: slotN(72), fireAt: slotN(72), runId: 'run_1', late: true, nextRunAt: slotN(73) } },
    ]);
    checkCall(loop, state(), now, decisions);
  });

  it('catch-up none: all 72 are missed (the last is 30 min late, past the grace)', () => {
    const loop = hourly({ catchUp: 'none' });
    const decisions = decide(loop, state(), now);
    expect(decisions).toEqual([
      { type: 'slot.missed', data: { from: slotN(1), to: slotN(72), count: 72, reason: 'catch-up none', nextRunAt: slotN(73) } },
    ]);
    checkCall(loop, state(), now, decisions);
  });

  it('catch-up all with a 5 h window: 67 missed outside it, the 5 inside fire in order', () => {
    const loop = hourly({ catchUp: 'all', catchUpWindowMs: 5 * HOUR });
    const decisions = decide(loop, state(), now);
    expect(decisions[0]).toEqual({
      type: 'slot.missed',
      data: { from: slotN(1), to: slotN(67), count: 67, reason: 'outside catch-up window', nextRunAt: slotN(73) },
    });
    expect(decisions.slice(1).map((d) => [d.type, (d.data as { slot: string }).slot])).toEqual(
      [68, 69, 70, 71, 72].map((n) => ['slot.fired', slotN(n)]),
    );
    expect(decisions.slice(1).every((d) => d.type === 'slot.fired' && d.data.late)).toBe(true);
    checkCall(loop, state(), now, decisions);
  });

  it('catch-up all with a limit of 3: the most recent 3 fire, the rest are missed over the limit', () => {
    const loop = hourly({ catchUp: 'all', catchUpLimit: 3 });
    const decisions = decide(loop, state(), now);
    expect(decisions.map((d) => d.type)).toEqual(['slot.missed', 'slot.fired', 'slot.fired', 'slot.fired']);
    expect(decisions[0]!.data).toMatchObject({ from: slotN(1), to: slotN(69), count: 69, reason: 'over catch-up limit' });
    expect(decisions.slice(1).map((d) => (d.data as { slot: string }).slot)).toEqual([slotN(70), slotN(71), slotN(72)]);
    checkCall(loop, state(), now, decisions);
  });

  it('catch-up all with a window and a limit: window first, then the limit', () => {
    const loop = hourly({ catchUp: 'all', catchUpWindowMs: 5 * HOUR, catchUpLimit: 2 });
    const decisions = decide(loop, state(), now);
    expect(decisions.map((d) => [d.type, 'reason' in d.data ? d.data.reason : (d.data as { slot: string }).slot])).toEqual([
      ['slot.missed', 'outside catch-up window'],
      ['slot.missed', 'over catch-up limit'],
      ['slot.fired', slotN(71)],
      ['slot.fired', slotN(72)],
    ]);
    checkCall(loop, state(), now, decisions);
  });

  it('catch-up latest with a window: slots outside it are missed, the rest coalesced', () => {
    const loop = hourly({ catchUp: 'latest', catchUpWindowMs: 3 * HOUR });
    const decisions = decide(loop, state(), now);
    expect(decisions).toEqual([
      { type: 'slot.missed', data: { from: slotN(1), to: slotN(69), count: 69, reason: 'outside catch-up window', nextRunAt: slotN(73) } },
      { type: 'slot.coalesced', data: { from: slotN(70), to: slotN(71), count: 2, into: slotN(72) } },
      { type: 'slot.fired', data: { slot: slotN(72), fireAt: slotN(72), runId: 'run_1', late: true, nextRunAt: slotN(73) } },
    ]);
    checkCall(loop, state(), now, decisions);
  });

  it('max-runs 2 with catch-up all: the two oldest fire, the rest are missed, the loop expires', () => {
    const loop = hourly({ catchUp: 'all', catchUpWindowMs: 5 * HOUR }, { maxRuns: 2 });
    const decisions = decide(loop, state(), now);
    expect(decisions.map((d) => d.type)).toEqual(['slot.missed', 'slot.missed', 'slot.fired', 'slot.fired', 'loop.expired']);
    expect(decisions[1]!.data).toMatchObject({ from: slotN(70), to: slotN(72), count: 3, reason: 'max-runs reached', nextRunAt: null });
    expect(decisions[4]).toEqual({ type: 'loop.expired', data: { reason: 'max-runs' } });
    checkCall(loop, state(), now, decisions);
  });
});

describe('decideDue: on time, late, overlap, bounds', () => {
  const loop = (policies: Partial<PolicyView> = {}, t: Partial<Timing> = {}) => mkLoop({ schedule: every(MIN), policies, timing: t });

  it('nothing due: no decision (before the first slot, and exactly at the last decided one)', () => {
    expect(decide(loop(), state(), BASE + MIN - 1)).toEqual([]);
    expect(decide(loop(), state({ lastSlot: iso(BASE + 5 * MIN) }), BASE + 5 * MIN + 30 * SEC)).toEqual([]);
  });

  it('a wall clock set back before the last decided slot decides nothing (no slot twice)', () => {
    expect(decide(loop(), state({ lastSlot: iso(BASE + 10 * MIN) }), BASE + 2 * MIN)).toEqual([]);
    expect(decide(loop(), state({ lastSlot: iso(BASE + 10 * MIN) }), BASE - DAY)).toEqual([]);
  });

  it('a slot exactly due fires, not late, with the next due time', () => {
    expect(decide(loop(), state(), BASE + MIN)).toEqual([
      { type: 'slot.fired', data: { slot: iso(BASE + MIN), fireAt: iso(BASE + MIN), runId: 'run_1', late: false, nextRunAt: iso(BASE + 2 * MIN) } },
    ]);
  });

  it('catch-up none: the last slot fires while at most lateGraceMs late, else it is missed', () => {
    const none = mkLoop({ schedule: every(5 * MIN), policies: { catchUp: 'none' } });
    const at = BASE + 25 * MIN;
    expect(decide(none, state(), at + GRACE).map((d) => d.type)).toEqual(['slot.missed', 'slot.fired']);
    expect(decide(none, state(), at + GRACE)[1]!.data).toMatchObject({ slot: iso(at), late: false });
    expect(decide(none, state(), at + GRACE + 1)).toEqual([
      { type: 'slot.missed', data: { from: iso(BASE + 5 * MIN), to: iso(at), count: 5, reason: 'catch-up none', nextRunAt: iso(at + 5 * MIN) } },
    ]);
    // lateGraceMs is an option.
    expect(decide(none, state(), at + 10 * SEC, { lateGraceMs: 5000 }).map((d) => d.type)).toEqual(['slot.missed']);
    expect(decide(none, state(), at, { lateGraceMs: 0 }).map((d) => d.type)).toEqual(['slot.missed', 'slot.fired']);
  });

  it('a slot a little late (within the grace) fires with late = false; past the grace late = true', () => {
    const all = loop({ catchUp: 'all' });
    const lateOf = (now: number) => decide(all, state({ lastSlot: iso(BASE) }), now).map((d) => (d.data as { late: boolean }).late);
    expect(lateOf(BASE + MIN + 30 * SEC)).toEqual([false]);
    expect(lateOf(BASE + 2 * MIN + 30 * SEC)).toEqual([true, false]);
  });

  it('overlap skip with a run going: the slot is skipped, blocked by that run; nothing fires', () => {
    const decisions = decide(loop({ overlap: 'skip' }), state({ running: ['run_busy', 'run_other'] }), BASE + MIN);
    expect(decisions).toEqual([
      { type: 'slot.skipped', data: { slot: iso(BASE + MIN), fireAt: iso(BASE + MIN), reason: 'overlap', blockedBy: 'run_busy', nextRunAt: iso(BASE + 2 * MIN) } },
    ]);
    checkCall(loop({ overlap: 'skip' }), state({ running: ['run_busy', 'run_other'] }), BASE + MIN, decisions);
  });

  it('overlap allow with a run going: the slot fires', () => {
    expect(decide(loop({ overlap: 'allow' }), state({ running: ['run_busy'] }), BASE + MIN).map((d) => d.type)).toEqual(['slot.fired']);
  });

  it('overlap skip and catch-up latest: the older slots are coalesced into the skipped one', () => {
    const l = loop({ overlap: 'skip', catchUp: 'latest' });
    const s = state({ running: ['run_busy'] });
    const decisions = decide(l, s, BASE + 3 * MIN);
    expect(decisions.map((d) => d.type)).toEqual(['slot.coalesced', 'slot.skipped']);
    checkCall(l, s, BASE + 3 * MIN, decisions);
  });

  it('overlap skip, catch-up all, max-runs: every due slot is skipped for the overlap, none counted as max-runs', () => {
    const l = loop({ overlap: 'skip', catchUp: 'all' }, { maxRuns: 3 });
    const s = state({ running: ['run_busy'], scheduledRuns: 2 });
    const decisions = decide(l, s, BASE + 3 * MIN);
    expect(decisions.map((d) => d.type)).toEqual(['slot.skipped', 'slot.skipped', 'slot.skipped']);
    checkCall(l, s, BASE + 3 * MIN, decisions);
  });

  it('max-runs reached with catch-up latest: every due slot is missed, none left undecided', () => {
    const l = loop({ catchUp: 'latest' }, { maxRuns: 2 });
    const s = state({ scheduledRuns: 2 });
    const decisions = decide(l, s, BASE + 4 * MIN);
    expect(decisions).toEqual([
      { type: 'slot.missed', data: { from: iso(BASE + MIN), to: iso(BASE + 4 * MIN), count: 4, reason: 'max-runs reached', nextRunAt: null } },
      { type: 'loop.expired', data: { reason: 'max-runs' } },
    ]);
    checkCall(l, s, BASE + 4 * MIN, decisions);
  });

  it('max-runs: the firing slot that uses the last run also expires the loop', () => {
    const l = loop({}, { maxRuns: 3 });
    const decisions = decide(l, state({ scheduledRuns: 2 }), BASE + MIN);
    expect(decisions).toEqual([
      { type: 'slot.fired', data: { slot: iso(BASE + MIN), fireAt: iso(BASE + MIN), runId: 'run_1', late: false, nextRunAt: null } },
      { type: 'loop.expired', data: { reason: 'max-runs' } },
    ]);
  });

  it('max-runs is not used up by a skipped slot', () => {
    const l = loop({ overlap: 'skip' }, { maxRuns: 1 });
    expect(decide(l, state({ running: ['r'] }), BASE + MIN).map((d) => d.type)).toEqual(['slot.skipped']);
  });

  it('expires-at: the last slot at or before it fires, then the loop expires (reason expires-at)', () => {
    const l = loop({}, { expiresAt: iso(BASE + 2 * MIN + 30 * SEC) });
    const decisions = decide(l, state({ lastSlot: iso(BASE + MIN) }), BASE + 2 * MIN);
    expect(decisions).toEqual([
      { type: 'slot.fired', data: { slot: iso(BASE + 2 * MIN), fireAt: iso(BASE + 2 * MIN), runId: 'run_1', late: false, nextRunAt: null } },
      { type: 'loop.expired', data: { reason: 'expires-at' } },
    ]);
    checkCall(l, state({ lastSlot: iso(BASE + MIN) }), BASE + 2 * MIN, decisions);
  });

  it('expires-at passed while down: the due slots before it are caught up, then the loop expires', () => {
    const l = loop({ catchUp: 'latest' }, { expiresAt: iso(BASE + 10 * MIN) });
    const decisions = decide(l, state(), BASE + DAY);
    expect(decisions.map((d) => d.type)).toEqual(['slot.coalesced', 'slot.fired', 'loop.expired']);
    expect(decisions[1]!.data).toMatchObject({ slot: iso(BASE + 10 * MIN), late: true, nextRunAt: null });
    expect(decisions[2]!.data).toEqual({ reason: 'expires-at' });
  });

  it('--at: fires once, then the loop expires (no more slots)', () => {
    const l = mkLoop({ schedule: { kind: 'at', at: iso(BASE + HOUR) } });
    expect(decide(l, state(), BASE + HOUR - 1)).toEqual([]);
    const decisions = decide(l, state(), BASE + HOUR);
    expect(decisions).toEqual([
      { type: 'slot.fired', data: { slot: iso(BASE + HOUR), fireAt: iso(BASE + HOUR), runId: 'run_1', late: false, nextRunAt: null } },
      { type: 'loop.expired', data: { reason: 'no more slots' } },
    ]);
  });

  it('--at with catch-up none, long missed: missed, and the loop expires', () => {
    const l = mkLoop({ schedule: { kind: 'at', at: iso(BASE + HOUR) }, policies: { catchUp: 'none' } });
    expect(decide(l, state(), BASE + DAY).map((d) => d.type)).toEqual(['slot.missed', 'loop.expired']);
  });

  it('manual loops never have anything due and never expire', () => {
    expect(decide(mkLoop({ schedule: { kind: 'manual' } }), state(), BASE + 365 * DAY)).toEqual([]);
  });

  it('jitter: a slot whose fire time is still ahead is not due, and it is the next due time (not the slot after it)', () => {
    // 1h every with 30 min jitter: find a slot with a jitter of at least 2 minutes.
    const l = mkLoop({ schedule: every(HOUR), timing: { jitterMs: 30 * MIN } });
    const slots = upcomingSlots(l, BASE, 20);
    const pending = slots.slice(2).find((p) => ms(p.fireAt) - ms(p.slot) >= 2 * MIN)!;
    const previous = slots[slots.indexOf(pending) - 1] ?? null;
    const s = state({ lastSlot: previous?.slot ?? null });
    const now = ms(pending.slot) + MIN; // between the slot and its fire time
    const decisions = decide(l, s, now);
    // Nothing new is due, so nothing is recorded — and the loop's due time, if recorded, would be this slot's.
    expect(decisions).toEqual([]);
    // After a decision at that instant (an older slot due), the next due time is the pending slot.
    const older = slots[slots.indexOf(pending) - 2]!;
    const d2 = decide(l, state({ lastSlot: older.slot }), now);
    expect(d2.map((d) => d.type)).toEqual(['slot.fired']);
    expect((d2[0]!.data as { nextRunAt: string }).nextRunAt).toBe(pending.fireAt);
    checkCall(l, state({ lastSlot: older.slot }), now, d2);
  });

  it('--at with jitter, looked at between its slot and its fire time: not due, not expired', () => {
    const l = mkLoop({ schedule: { kind: 'at', at: iso(BASE + HOUR) }, timing: { jitterMs: 30 * MIN }, id: 'loop_at_jitter' });
    const [slot] = upcomingSlots(l, BASE, 1);
    const jitter = ms(slot!.fireAt) - ms(slot!.slot);
    expect(jitter).toBeGreaterThan(0); // this id's jitter is not zero
    expect(decide(l, state(), ms(slot!.slot) + Math.floor(jitter / 2))).toEqual([]);
    expect(decide(l, state(), ms(slot!.fireAt)).map((d) => d.type)).toEqual(['slot.fired', 'loop.expired']);
  });

  it('slots at or before scheduleFrom (creation, resume) are never due', () => {
    const l = loop({ catchUp: 'all' });
    const decisions = decide(l, state({ scheduleFrom: iso(BASE + 10 * MIN + 1) }), BASE + 12 * MIN);
    expect(decisions.map((d) => (d.data as { slot: string }).slot)).toEqual([iso(BASE + 11 * MIN), iso(BASE + 12 * MIN)]);
  });

  it('cron in a DST zone: the skipped 02:30 fires once at the end of the gap (03:00 CEST), nothing doubled', () => {
    // Europe/Berlin springs forward on 2026-03-29 at 02:00 local (01:00Z).
    const l = mkLoop({ schedule: cron('30 * * * *', 'Europe/Berlin'), policies: { catchUp: 'all' } });
    const from = ms('2026-03-28T22:00:00Z');
    const now = ms('2026-03-29T04:00:00Z');
    const s = state({ scheduleFrom: iso(from) });
    const decisions = decide(l, s, now);
    expect(decisions.filter((d) => d.type === 'slot.fired').map((d) => (d.data as { slot: string }).slot)).toEqual(
      ['22:30', '23:30', '00:30', '01:00', '01:30', '02:30', '03:30'].map((t, i) => `2026-03-${i < 2 ? 28 : 29}T${t}:00.000Z`),
    );
    checkCall(l, s, now, decisions);
  });

  it('a very long downtime with a cap on the slots looked at: decided in chunks, none twice, none lost', () => {
    const l = loop({ catchUp: 'all', catchUpLimit: 2 });
    const now = BASE + 50 * MIN;
    const first = decide(l, state(), now, { maxSlots: 20 });
    const firstSum = summarize(l, first);
    expect(firstSum.decided.length).toBeLessThanOrEqual(20);
    const lastSlot = sortIso(firstSum.decided).at(-1)!;
    const second = decide(l, state({ lastSlot, scheduledRuns: firstSum.fired.length }), now, { maxSlots: 1000 });
    const secondSum = summarize(l, second);
    const all = [...firstSum.decided, ...secondSum.decided];
    expect(sortIso(all)).toEqual(slotsIn(l, BASE, now).map((p) => p.slot));
    // The scheduler comes back at once for the rest: the due time of the first pass is not in the future.
    expect(ms(firstSum.nextRunAts[0]!)).toBeLessThanOrEqual(now);
  });
});

// ── properties ───────────────────────────────────────────────────────────────

interface Case {
  loop: DecideLoop;
  state: DueState;
  now: number;
  options: DecideOptions;
  /** Follow-up passes: wall-time offsets from the first pass (negative = the clock was set back). */
  later: number[];
  /** Whether the runs fired in a pass are still going at the next one. */
  stillRunning: boolean;
}

const BASES = ['2026-03-06T20:00:00.000Z', '2026-03-28T18:00:00.000Z', '2026-10-24T21:00:00.000Z', '2026-06-15T10:00:00.000Z'].map(ms);

/** A schedule with a jitter that keeps fire times in slot order (shorter than its shortest gap). */
/**
 * A schedule, with a jitter bound that keeps fire times in slot order (shorter than its shortest
 * gap) and a downtime bound (cron slots in a zone cost ~0.5 ms each to compute).
 */
const scheduleArb = (base: number): fc.Arbitrary<{ schedule: Schedule; maxJitter: number; maxDown: number }> =>
  fc.oneof(
    fc.integer({ min: -MIN, max: MIN }).map((o) => ({ schedule: every(MIN, base + o), maxJitter: 59 * SEC, maxDown: 3 * DAY + HOUR })),
    fc.integer({ min: -HOUR, max: HOUR }).map((o) => ({ schedule: every(HOUR, base + o), maxJitter: 59 * MIN, maxDown: 5 * DAY })),
    fc.constantFrom('Europe/Berlin', 'America/New_York').map((tz) => ({ schedule: cron('0 * * * *', tz), maxJitter: 30 * MIN, maxDown: DAY })),
    fc.constantFrom('Europe/Berlin', 'America/New_York').map((tz) => ({ schedule: cron('*/15 * * * *', tz), maxJitter: 10 * MIN, maxDown: 6 * HOUR })),
    fc.constantFrom('Europe/Berlin', 'America/New_York').map((tz) => ({ schedule: cron('30 2 * * *', tz), maxJitter: HOUR, maxDown: 10 * DAY })),
    fc.integer({ min: 1, max: 3 * DAY }).map((o) => ({ schedule: { kind: 'at', at: iso(base + o) } as Schedule, maxJitter: HOUR, maxDown: 4 * DAY })),
  );

/** Downtime: the edges around a slot and the grace, or anything up to the bound. */
const downtimeArb = (maxDown: number) =>
  fc.oneof(
    fc.constantFrom(0, 1, 30 * SEC, 59 * SEC, MIN, MIN + 1, 61 * SEC, 5 * MIN, 59 * MIN, 90 * MIN, DAY, 3 * DAY + 30 * MIN).map((d) => Math.min(d, maxDown)),
    fc.integer({ min: 0, max: maxDown }),
  );

const caseArb: fc.Arbitrary<Case> = fc
  .constantFrom(...BASES)
  .chain((base) => scheduleArb(base).map((sched) => ({ base, sched })))
  .chain(({ base, sched }) =>
    fc.record({
      base: fc.constant(base),
      sched: fc.constant(sched),
      jitterFrac: fc.option(fc.double({ min: 0, max: 1, noNaN: true }), { nil: null }),
      wholeSeconds: fc.boolean(),
      catchUp: fc.constantFrom('none', 'latest', 'all') as fc.Arbitrary<PolicyView['catchUp']>,
      window: fc.option(fc.constantFrom(30 * MIN, 2 * HOUR, 5 * HOUR, DAY), { nil: null }),
      limit: fc.option(fc.integer({ min: 1, max: 5 }), { nil: null }),
      overlap: fc.constantFrom('skip', 'allow', 'buffer-one', 'buffer-all', 'cancel-other') as fc.Arbitrary<PolicyView['overlap']>,
      running: fc.boolean(),
      waiting: fc.integer({ min: 0, max: 2 }),
      maxRuns: fc.option(fc.integer({ min: 1, max: 5 }), { nil: null }),
      runsUsedFrac: fc.double({ min: 0, max: 0.999, noNaN: true }),
      expiresIn: fc.option(fc.integer({ min: HOUR, max: 4 * DAY }), { nil: null }),
      startsIn: fc.option(fc.integer({ min: 0, max: DAY }), { nil: null }),
      decidedBefore: fc.integer({ min: 0, max: 3 }),
      downtime: downtimeArb(sched.maxDown),
      grace: fc.constantFrom(undefined, 0, 60 * SEC, 5 * MIN),
      later: fc.array(fc.oneof(fc.integer({ min: 0, max: Math.min(2 * DAY, sched.maxDown) }), fc.integer({ min: -DAY, max: 0 })), { maxLength: 3 }),
      stillRunning: fc.boolean(),
      id: fc.constantFrom('loop_a', 'loop_b', 'loop_c'),
    }),
  )
  .map((r) => {
    let jitterMs: number | null = null;
    if (r.jitterFrac !== null) {
      const raw = Math.floor(r.jitterFrac * r.sched.maxJitter);
      jitterMs = r.wholeSeconds ? Math.floor(raw / 1000) * 1000 : raw;
      if (jitterMs <= 0) jitterMs = null;
    }
    const loop = mkLoop({
      id: r.id,
      schedule: r.sched.schedule,
      timing: {
        jitterMs,
        maxRuns: r.maxRuns,
        expiresAt: r.expiresIn === null ? null : iso(r.base + r.expiresIn),
        startsAt: r.startsIn === null ? null : iso(r.base + r.startsIn),
      },
      policies: {
        overlap: r.overlap,
        catchUp: r.catchUp,
        catchUpWindowMs: r.catchUp === 'none' ? null : r.window,
        catchUpLimit: r.catchUp === 'all' ? r.limit : null,
      },
    });
    // Earlier decisions: the k-th slot after the base was the last decided one.
    const earlier = upcomingSlots(unbounded(loop), r.base, r.decidedBefore);
    const lastSlot = r.decidedBefore === 0 || earlier.length < r.decidedBefore ? null : earlier[earlier.length - 1]!.slot;
    const scheduledRuns = r.maxRuns === null ? Math.floor(r.runsUsedFrac * 10) : Math.floor(r.runsUsedFrac * r.maxRuns);
    const buffers = r.overlap === 'buffer-one' || r.overlap === 'buffer-all' || r.overlap === 'cancel-other';
    const s: DueState = {
      scheduleFrom: iso(r.base),
      lastSlot,
      scheduledRuns,
      running: r.running ? ['run_busy'] : [],
      buffered: buffers ? r.waiting : 0,
    };
    const from = Math.max(r.base, lastSlot === null ? -Infinity : ms(lastSlot));
    return {
      loop,
      state: s,
      now: from + r.downtime,
      options: r.grace === undefined ? {} : { lateGraceMs: r.grace },
      later: r.later,
      stillRunning: r.stillRunning,
    };
  });

describe('decideDue: properties', () => {
  it('every due slot gets exactly one decision; ranges are exact; fired in order; catch-up, overlap, max-runs and expiry rules hold', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const decisions = decideDue(c.loop, c.state, c.now, ids(), c.options);
        checkCall(c.loop, c.state, c.now, decisions, c.options);
        // Pure: the same inputs decide the same.
        expect(decideDue(c.loop, c.state, c.now, ids(), c.options)).toEqual(decisions);
      }),
      { numRuns: 200 },
    );
  });

  it('consecutive passes (state from the machine after each, clock forward or set back) never decide a slot twice', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        let s = c.state;
        let now = c.now;
        const seen = new Set<string>();
        const passes = [0, ...c.later];
        for (const offset of passes) {
          now = offset === 0 ? now : now + offset;
          const decisions = decideDue(c.loop, s, now, ids(), c.options);
          const result = checkCall(c.loop, s, now, decisions, c.options);
          const decided = summarize(c.loop, decisions).decided;
          for (const slot of decided) {
            expect(seen.has(slot), `${slot} decided twice`).toBe(false);
            seen.add(slot);
          }
          if (result === null) break; // expired: the machine refuses any further decision
          const fired = result.sum.fired.map((f) => f.runId);
          s = {
            scheduleFrom: s.scheduleFrom,
            lastSlot: result.lastSlot,
            scheduledRuns: result.scheduledRuns,
            running: c.stillRunning ? [...s.running, ...fired] : [],
            buffered: c.stillRunning ? (s.buffered ?? 0) + result.sum.buffered.length : 0,
          };
        }
      }),
      { numRuns: 120 },
    );
  });

  it('a punctual scheduler (a pass exactly at each next due time) fires every later slot on time, none missed or late', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        let s: DueState = { ...c.state, running: [], buffered: 0 };
        const first = decideDue(c.loop, s, c.now, ids(), c.options);
        let result = checkCall(c.loop, s, c.now, first, c.options);
        let next = result?.sum.nextRunAts[0] ?? upcomingSlots(c.loop, Math.max(ms(s.scheduleFrom), s.lastSlot ? ms(s.lastSlot) : -Infinity), 1, s.scheduledRuns)[0]?.fireAt ?? null;
        if (result) s = { ...s, lastSlot: result.lastSlot, scheduledRuns: result.scheduledRuns };
        for (let i = 0; i < 4 && result !== null && next !== null; i++) {
          const now = ms(next);
          const decisions = decideDue(c.loop, s, now, ids(), c.options);
          result = checkCall(c.loop, s, now, decisions, c.options);
          const slotDecisions = decisions.filter((d) => d.type !== 'loop.expired');
          expect(slotDecisions).toHaveLength(1);
          expect(slotDecisions[0]).toMatchObject({ type: 'slot.fired', data: { fireAt: next, late: false } });
          if (result === null) break;
          next = result.sum.nextRunAts[0]!;
          s = { ...s, lastSlot: result.lastSlot, scheduledRuns: result.scheduledRuns };
        }
      }),
      { numRuns: 120 },
    );
  });
});
