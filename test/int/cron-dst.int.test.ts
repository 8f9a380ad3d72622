/**
 * Cron rules 2 through the whole pipeline: a loop created with `--cron` (it records rules 2), the
 * daemon's pass on a real SQLite file and a real fixture process, time from a SimulatedClock
 * stepped minute by minute over New York's 2026 DST changes. A wildcard job fires on both passes of
 * the repeated hour and at no nonexistent time; a fixed-time job fires once in the repeated hour
 * and at the end of the gap. After every test the log replays and the projections verify.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { createCommandLoop } from '../../src/runtime/loops/commands.js';
import { tick } from '../../src/runtime/daemon/pass.js';
import { findLoop } from '../../src/runtime/queries/loops.js';
import { expectLogConsistent } from '../helpers/invariants.js';
import { useRuntime } from '../helpers/tmp.js';

const MIN = 60_000;

/** Steps the clock a minute at a time from `from` to `to`, a pass each minute; the slots fired, per loop name. */
async function runSpan(exprs: Record<string, string>, from: string, to: string): Promise<Record<string, string[]>> {
  const clock = new SimulatedClock(Date.parse(from));
  const runtime = await useRuntime({ clock });
  onTestFinished(() => expectLogConsistent(runtime));
  for (const [name, cron] of Object.entries(exprs)) {
    const loop = await createCommandLoop(runtime, { name, command: 'true', schedule: { cron, tz: 'America/New_York' } });
    expect(loop.schedule).toMatchObject({ kind: 'cron', rules: 2 });
  }
  const fired: Record<string, string[]> = Object.fromEntries(Object.keys(exprs).map((n) => [n, []]));
  while (clock.now() < Date.parse(to)) {
    clock.advance(MIN);
    const result = await tick(runtime);
    for (const d of result.decisions) {
      expect(d.type).toBe('slot.fired');
      fired[d.loopName]!.push((d.data as { slot: string }).slot);
    }
  }
  for (const name of Object.keys(exprs)) expect(findLoop(runtime.db, name)).toMatchObject({ status: 'active' });
  return fired;
}

describe('cron rules 2 in the daemon pass, New York 2026', () => {
  it('fall back (1 November, 01:00–01:59 twice): hourly fires on both passes, 01:30 once', async () => {
    const fired = await runSpan({ hourly: '0 * * * *', quarter: '*/30 * * * *', fixed: '30 1 * * *' }, '2026-11-01T04:30:00Z', '2026-11-01T07:10:00Z');
    // 00:00 EDT = 04:00Z … 01:00 EDT = 05:00Z, 01:00 EST = 06:00Z, 02:00 EST = 07:00Z.
    expect(fired.hourly).toEqual(['2026-11-01T05:00:00.000Z', '2026-11-01T06:00:00.000Z', '2026-11-01T07:00:00.000Z']);
    expect(fired.quarter).toEqual([
      '2026-11-01T05:00:00.000Z',
      '2026-11-01T05:30:00.000Z',
      '2026-11-01T06:00:00.000Z',
      '2026-11-01T06:30:00.000Z',
      '2026-11-01T07:00:00.000Z',
    ]);
    expect(fired.fixed).toEqual(['2026-11-01T05:30:00.000Z']);
  });

  it('spring forward (8 March, 02:00–02:59 skipped): :30 hourly fires at no nonexistent time, 02:30 fires once at 03:00', async () => {
    const fired = await runSpan({ hourly: '30 * * * *', fixed: '30 2 * * *' }, '2026-03-08T06:00:00Z', '2026-03-08T08:40:00Z');
    // 01:30 EST = 06:30Z, then 03:00 EDT = 07:00Z, 03:30 EDT = 07:30Z, 04:30 EDT = 08:30Z.
    expect(fired.hourly).toEqual(['2026-03-08T06:30:00.000Z', '2026-03-08T07:30:00.000Z', '2026-03-08T08:30:00.000Z']);
    expect(fired.fixed).toEqual(['2026-03-08T07:00:00.000Z']);
  });
});
