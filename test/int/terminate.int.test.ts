/**
 * The terminate routine's rule for a group whose leader exited: what is left of the run's group is
 * stopped, and nothing else. A group id is reused only once its group is empty, by a process that
 * then leads it with that pid — another run's wrapper, quite possibly — so a live process whose
 * pid is the group id, after the leader exited, is someone else's and is never signalled. Real
 * processes, a real clock (the routine's timers are short: a 300 ms grace).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { systemClock } from '../../src/runtime/clock.js';
import { groupAlive } from '../../src/runtime/execution/process-info.js';
import { GroupTerminator, stopLeftovers } from '../../src/runtime/execution/terminate.js';
import { isAlive, killGroupIfAlive } from '../helpers/proc.js';
import { waitFor } from '../helpers/wait.js';

/** A process leading its own group (as a run's wrapper does), killed when the test ends. */
function groupLeader(): number {
  const child = spawn('sleep', ['30'], { detached: true, stdio: 'ignore' });
  onTestFinished(() => killGroupIfAlive(child.pid!));
  return child.pid!;
}

describe('GroupTerminator after the leader exited', () => {
  it('a live process leading a group with the exited leader’s id is another’s: never signalled, and the end is not held up', async () => {
    // Stands for a new run's wrapper that got the id once the old group was empty.
    const stranger = groupLeader();
    const started = performance.now();
    await new GroupTerminator(stranger, systemClock, 300).leaderExited();
    expect(performance.now() - started, 'resolved at once: nothing of the run is left').toBeLessThan(250);
    expect(isAlive(stranger)).toBe(true);
    await stopLeftovers(stranger, systemClock, 300);
    expect(isAlive(stranger), 'stopLeftovers leaves it alone too').toBe(true);
  });

  it('members left behind by the exited leader are stopped: SIGTERM, then SIGKILL after the grace when they ignore it', async () => {
    const child = spawn('sh', ['-c', "trap '' TERM; sleep 300 & echo $!; read x"], { detached: true, stdio: ['pipe', 'pipe', 'ignore'] });
    const leader = child.pid!;
    onTestFinished(() => killGroupIfAlive(leader));
    const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
    const leftover = Number(line);
    child.stdin!.end();
    await once(child, 'exit');
    expect(isAlive(leftover)).toBe(true);
    const started = performance.now();
    await new GroupTerminator(leader, systemClock, 300).leaderExited();
    expect(performance.now() - started, 'the SIGKILL waited for the grace').toBeGreaterThanOrEqual(290);
    // leaderExited resolves once the SIGKILL is sent; the kernel finishes the process a moment later
    // (under load, after the check). Waited for, bounded, not assumed.
    await waitFor(() => !isAlive(leftover), 2000, `leftover ${leftover} to be killed`);
    expect(isAlive(leftover)).toBe(false);
  });
});

describe('groupAlive', () => {
  it('a live group is alive; a group whose members all ended is gone — found without an exception (the usual end of a run)', async () => {
    const child = spawn('sleep', ['30'], { detached: true, stdio: 'ignore' });
    onTestFinished(() => killGroupIfAlive(child.pid!));
    expect(groupAlive(child.pid!)).toBe(true);
    const ended = spawn('true', [], { detached: true, stdio: 'ignore' });
    await once(ended, 'exit'); // reaped: its group is empty
    // process.kill throws for a group that is gone (an Error, its stack captured, at every run's
    // end); groupAlive asks the OS the same question without it.
    const kill = vi.spyOn(process, 'kill');
    onTestFinished(() => kill.mockRestore());
    expect(groupAlive(ended.pid!)).toBe(false);
    expect(kill).not.toHaveBeenCalled();
  });
});
