/**
 * `--cron @reboot` through the built binary and the real daemon: created during a boot, it waits;
 * a daemon started after a reboot runs it once; that daemon killed -9 and started again within the
 * same boot does not run it again; the next reboot runs it once more. The boot is given by
 * LOOPS_TEST_BOOT_TIME (tests only) and the time by LOOPS_NOW, so "a reboot" takes no waiting.
 */
import { describe, expect, it } from 'vitest';
import { expectDataDirInvariants } from '../helpers/invariants.js';
import { waitFor } from '../helpers/wait.js';
import { useSandboxes } from './cli-helpers.js';

const sandbox = useSandboxes();
const T0 = Date.parse('2026-03-01T10:00:00.000Z');
const HOUR = 3_600_000;
const at = (ms: number) => new Date(T0 + ms).toISOString();

describe('@reboot under the daemon', () => {
  it('runs once per boot of the host, never twice in one boot, across a kill -9', async () => {
    const s = sandbox();
    const created = s.run(['create', 'command', 'warm', '--cron', '@reboot', '--cmd', 'echo booted'], { LOOPS_NOW: at(0), LOOPS_TEST_BOOT_TIME: at(-HOUR) });
    expect(created.code, created.stderr).toBe(0);
    expect(s.run(['show', 'warm']).stdout).toMatch(/schedule\s+at each boot of the host \(@reboot\)/);
    const runsOf = () => s.json<Array<{ scheduledFor: string; status: string }>>(['runs', 'warm']);

    const daemonAt = async (boot: number, now: number, expectRuns: number, kill: 'SIGKILL' | 'SIGTERM') => {
      const d = s.start(['daemon', 'run'], { LOOPS_NOW: at(now), LOOPS_TEST_BOOT_TIME: at(boot) });
      await d.waitForOutput(/daemon started/);
      await waitFor(() => runsOf().filter((r) => r.status === 'succeeded').length >= expectRuns, 20_000, `${expectRuns} run(s) of warm`);
      // A pass or two more: nothing else may fire.
      await waitFor(() => s.run(['daemon', 'status']).stdout.includes('running'), 10_000, 'daemon status');
      d.child.kill(kill);
      await d.exited;
    };
    // Same boot as the creation: the daemon runs nothing.
    const same = s.start(['daemon', 'run'], { LOOPS_NOW: at(10 * 60_000), LOOPS_TEST_BOOT_TIME: at(-HOUR) });
    await same.waitForOutput(/daemon started/);
    same.child.kill('SIGTERM');
    expect((await same.exited).code).toBe(0);
    expect(runsOf()).toEqual([]);

    await daemonAt(2 * HOUR, 2 * HOUR + 30_000, 1, 'SIGKILL');
    // Killed -9 and started again within that boot: still the one run.
    await daemonAt(2 * HOUR, 2 * HOUR + 120_000, 1, 'SIGTERM');
    expect(runsOf().map((r) => r.scheduledFor)).toEqual([at(2 * HOUR)]);
    // The next boot: once more.
    await daemonAt(5 * HOUR, 5 * HOUR + 30_000, 2, 'SIGTERM');
    expect(runsOf().map((r) => r.scheduledFor)).toEqual([at(5 * HOUR), at(2 * HOUR)]);
    expectDataDirInvariants(s.dataDir);
  });
});
