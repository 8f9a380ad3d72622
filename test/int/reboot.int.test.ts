/**
 * `--cron @reboot`: once per boot of the host. A boot is a slot of the loop (its instant), decided
 * by the same pass as every other slot: a loop created during a boot waits for the next one; after
 * a reboot the first pass fires it once; later passes, and a runtime opened again within the same
 * boot (a daemon restart), find that boot decided. The boot is injected (setHostBoot).
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { tick } from '../../src/runtime/daemon/pass.js';
import { createCommandLoop } from '../../src/runtime/loops/commands.js';
import { findLoop, listRuns } from '../../src/runtime/queries/loops.js';
import { setHostBoot } from '../../src/scheduling/boot.js';
import { describeSchedule } from '../../src/scheduling/describe.js';
import { expectLogConsistent } from '../helpers/invariants.js';
import { useRuntime } from '../helpers/tmp.js';

const T0 = Date.parse('2026-03-01T10:00:00.000Z');
const HOUR = 3_600_000;

describe('@reboot', () => {
  it('fires once per boot: not in the boot it was created in; once after each reboot; never twice in one boot', async () => {
    onTestFinished(() => setHostBoot(null));
    setHostBoot(T0 - HOUR); // booted an hour before the loop is created
    const clock = new SimulatedClock(T0);
    const runtime = await useRuntime({ clock });
    onTestFinished(() => expectLogConsistent(runtime));
    const loop = await createCommandLoop(runtime, { name: 'warm', command: 'echo booted', schedule: { cron: '@reboot', tz: 'UTC' } });
    expect(describeSchedule(loop.schedule)).toBe('at each boot of the host (@reboot)');
    expect(loop.nextRunAt).toBeNull();
    clock.jumpWall(10 * 60_000);
    expect((await tick(runtime)).runs).toEqual([]);
    expect(findLoop(runtime.db, 'warm').status).toBe('active');

    // The host reboots; the first pass after it fires the loop once, for that boot.
    const boot2 = T0 + 2 * HOUR;
    setHostBoot(boot2);
    clock.jumpWall(2 * HOUR);
    const first = await tick(runtime);
    expect(first.runs.map((r) => [r.loopName, r.scheduledFor, r.status])).toEqual([['warm', new Date(boot2).toISOString(), 'succeeded']]);
    clock.jumpWall(60_000);
    expect((await tick(runtime)).runs).toEqual([]);
    // The same boot read a second later by another process (a daemon restart): still decided.
    setHostBoot(boot2 + 900);
    clock.jumpWall(60_000);
    expect((await tick(runtime)).runs).toEqual([]);

    // Another reboot: once more.
    const boot3 = T0 + 5 * HOUR;
    setHostBoot(boot3);
    clock.jumpWall(3 * HOUR);
    expect((await tick(runtime)).runs.map((r) => r.scheduledFor)).toEqual([new Date(boot3).toISOString()]);
    expect(listRuns(runtime.db, { loopId: loop.id }).map((r) => r.scheduledFor)).toEqual([new Date(boot3).toISOString(), new Date(boot2).toISOString()]);
    expect(findLoop(runtime.db, 'warm')).toMatchObject({ status: 'active', nextRunAt: null });
  });
});
