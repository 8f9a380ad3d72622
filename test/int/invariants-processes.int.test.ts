/**
 * The invariant checker's process check (`loops verify --processes`, the soak, the chaos driver):
 *  - a run whose process is still going is reported, with its group's live pids; once it ended,
 *    nothing is;
 *  - a recorded group id that a process started after the run ended leads now (pid reuse: with a
 *    pid_max of 32,768 a busy host reuses ids within minutes — the 10-minute soak spawns ~20,000
 *    processes) is not the run's; nor is a group recorded on another boot; a member that started
 *    before the run ended is (it lived on past it); with no recorded end, every member counts.
 */
import { filter, firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { findViolations, runGroupMembers } from '../../src/runtime/admin/invariants.js';
import { bootId } from '../../src/runtime/execution/process-info.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { createCommandLoop } from '../../src/runtime/loops/commands.js';
import { useRuntime } from '../helpers/tmp.js';

describe('the checker: no process a run started is still alive', () => {
  it.skipIf(process.platform !== 'linux')('reports a run whose process group lives, and nothing once it ended', async () => {
    const runtime = await useRuntime();
    await createCommandLoop(runtime, { name: 'long', command: 'sleep 30', schedule: { manual: true, tz: 'UTC' } });
    const spawned = firstValueFrom(runtime.log.events$.pipe(filter((e) => e.type === 'process.spawned')));
    const controller = new AbortController();
    const run = runNow(runtime, 'long', { signal: controller.signal });
    const event = await spawned;
    const { pgid } = event.data as { pgid: number };
    const violations = findViolations(runtime.db, runtime.log, { integrity: false });
    expect(violations).toHaveLength(1);
    expect(violations[0]).toMatch(new RegExp(`^${event.streamId}: process group ${pgid} is still alive \\((\\d+, )*${pgid}(, \\d+)*\\)$`));
    controller.abort('the test is done');
    expect((await run).status).toBe('cancelled');
    expect(findViolations(runtime.db, runtime.log, {})).toEqual([]);
  });
});

describe('runGroupMembers: which live members of a recorded group are the run’s', () => {
  const boot = 'boot-a';
  // A process that started at tick 10,000 and ran 2.5 s: it ended at tick 10,250 (1 s of slack: 10,350).
  const recorded = { startTime: '10000', bootId: boot, durationMs: 2500 };

  it('a member that started while the run went (or within the slack) is the run’s: the whole group is reported', () => {
    expect(runGroupMembers(recorded, [{ pid: 7, startTicks: 10_000 }], boot)).toEqual([7]);
    expect(runGroupMembers(recorded, [{ pid: 7, startTicks: 10_350 }, { pid: 9, startTicks: 20_000 }], boot)).toEqual([7, 9]);
  });

  it('a group whose every member started after the run ended reuses its id: not the run’s', () => {
    expect(runGroupMembers(recorded, [{ pid: 7, startTicks: 10_351 }], boot)).toEqual([]);
    expect(runGroupMembers(recorded, [{ pid: 7, startTicks: 90_000 }, { pid: 8, startTicks: 90_001 }], boot)).toEqual([]);
  });

  it('a group recorded on another boot is never the run’s', () => {
    expect(runGroupMembers(recorded, [{ pid: 7, startTicks: 10_000 }], 'boot-b')).toEqual([]);
  });

  it('without a recorded end or start, every live member counts', () => {
    expect(runGroupMembers({ ...recorded, durationMs: null }, [{ pid: 7, startTicks: 90_000 }], boot)).toEqual([7]);
    expect(runGroupMembers({ ...recorded, startTime: null }, [{ pid: 7, startTicks: 90_000 }], boot)).toEqual([7]);
    expect(runGroupMembers({ ...recorded, bootId: null }, [{ pid: 7, startTicks: 10_000 }], bootId())).toEqual([7]);
  });

  it('no live member: nothing', () => {
    expect(runGroupMembers(recorded, [], boot)).toEqual([]);
  });
});
