/**
 * The chaos driver's short version (`scripts/chaos.mjs`, `npm run chaos` for the long one): the
 * real daemon, the real clock, killed with `kill -9` and at every LOOPS_FAULT crash point while
 * retries are due, runs killed meanwhile; then the invariant checker, real exit codes, no run left
 * unfinished and no secret in the data directory. Its seed is random and printed: a failure is
 * reproduced with `node scripts/chaos.mjs --cycles 20 --seed <seed>`. And the crash points one by
 * one where a single scenario shows what each must leave.
 */
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { useSandboxes } from './cli-helpers.js';
import { expectDataDirInvariants } from '../helpers/invariants.js';
import { waitFor } from '../helpers/wait.js';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const CHAOS = resolve(__dirname, '..', '..', 'scripts', 'chaos.mjs');
const sandbox = useSandboxes();

describe('npm run chaos, the short version', () => {
  it(
    '20 cycles with retries due, every crash point hit: zero invariant violations, every exit code the real one, no secret on disk',
    async () => {
      const seed = Math.floor(Math.random() * 2 ** 31);
      console.log(`chaos seed ${seed} (reproduce: node scripts/chaos.mjs --cycles 20 --seed ${seed})`);
      const child = spawn(process.execPath, [CHAOS, '--cycles', '20', '--seed', String(seed), '--json'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (err += d));
      const code = await new Promise<number | null>((r) => child.on('close', r));
      expect(err, 'the driver itself did not fail').toBe('');
      const result = JSON.parse(out) as {
        violations: string[];
        crashPoints: Record<string, { armed: number; hit: number }>;
        retries: number;
        runs: number;
        exitCodesCompared: number;
        secretLeaks: number;
      };
      console.log(JSON.stringify({ seed, ...result }, null, 2));
      expect(result.violations).toEqual([]);
      expect(code).toBe(0);
      for (const [point, c] of Object.entries(result.crashPoints)) expect(c.hit, `crash point ${point} was reached`).toBeGreaterThan(0);
      expect(result.retries, 'retries came due').toBeGreaterThan(0);
      expect(result.exitCodesCompared, "recorded exit codes were compared with the truth files").toBeGreaterThan(5);
      expect(result.secretLeaks).toBe(0);
    },
    420_000,
  );
});

describe('crash points, one scenario each', () => {
  it('a daemon killed between writing its pid file and committing its lease (mid-batch), after one killed holding the lease: the next starts at once', async () => {
    const s = sandbox();
    const first = s.start(['daemon', 'run']);
    await first.waitForOutput(/daemon started/);
    first.child.kill('SIGKILL');
    await first.exited;
    // Its lease is live for 15 s more; this one writes its pid file, then dies before its lease commits.
    const crashed = s.run(['daemon', 'run'], { LOOPS_FAULT: 'mid-batch:1' });
    expect(crashed.stderr).toMatch(/crash point mid-batch \(pass 1\)/);
    expect(crashed.code).toBeNull();
    // Both are provably gone (the pid file names the second, the lease the first): no 75, no wait.
    const third = s.start(['daemon', 'run']);
    await third.waitForOutput(/daemon started/);
    third.child.kill('SIGTERM');
    expect((await third.exited).code).toBe(0);
    expectDataDirInvariants(s.dataDir);
  });

  it.each([
    ['before-append', 'none', 'no run at all: the crash came before its claim was written'],
    ['after-append-before-spawn', 'abandoned', 'claimed and intended, never started: abandoned, naming the runner'],
    ['after-spawn-before-record', 'succeeded', 'started, never recorded: found by its wrapper, its real exit recorded'],
    ['after-exit-before-record', 'succeeded', 'ended, not recorded: its real exit recorded from its status file'],
  ])('run-now killed at %s, then a daemon recovers: %s', async (point, status) => {
    const s = sandbox();
    s.run(['create', 'command', 'job', '--cmd', 'sleep 0.2; exit 0', '--manual']);
    const crashed = s.run(['run-now', 'job'], { LOOPS_FAULT: point });
    expect(crashed.stderr).toMatch(new RegExp(`crash point ${point} \\(pass 1\\)`));
    expect(crashed.code, 'killed by its own SIGKILL').toBeNull();
    const daemon = s.start(['daemon', 'run']);
    await daemon.waitForOutput(/daemon started/);
    const runs = () => s.json<Array<{ status: string }>>(['runs']);
    if (status === 'none') expect(runs()).toEqual([]);
    else await waitFor(() => runs().length === 1 && runs()[0]!.status === status, 20_000, `the run to be ${status}`);
    daemon.child.kill('SIGTERM');
    expect((await daemon.exited).code).toBe(0);
    expectDataDirInvariants(s.dataDir);
    const verify = s.run(['verify', '--processes']);
    expect(verify.stdout).toMatch(/every invariant holds/);
    expect(verify.code).toBe(0);
  });

  it("run-now killed after its --on-failure hook's run was claimed, before its process started: the daemon runs the hook then, once, as a run that replaces it", async () => {
    const s = sandbox();
    const told = join(s.dataDir, 'told.txt');
    s.run(['create', 'command', 'job', '--cmd', 'exit 3', '--manual', '--on-failure', `echo "$LOOPS_RUN_ID" >> '${told}'`]);
    // Spawn 1 is the failing run's; spawn 2 the hook's.
    const crashed = s.run(['run-now', 'job'], { LOOPS_FAULT: 'after-append-before-spawn:2' });
    expect(crashed.stderr).toMatch(/crash point after-append-before-spawn \(pass 2\)/);
    expect(crashed.code, 'killed by its own SIGKILL').toBeNull();
    expect(existsSync(told), 'the hook never ran').toBe(false);
    const daemon = s.start(['daemon', 'run']);
    await daemon.waitForOutput(/daemon started/);
    type Notice = { channel: string; status: string; hookRunId: string };
    const failed = s.json<Array<{ id: string; status: string; trigger: string }>>(['runs']).find((r) => r.status === 'failed')!;
    const notice = () => s.json<{ notices?: Notice[] }>(['show', failed.id]).notices?.[0];
    await waitFor(() => notice()?.status === 'ran', 20_000, 'the notice to be ran');
    daemon.child.kill('SIGTERM');
    expect((await daemon.exited).code).toBe(0);
    expect(readFileSync(told, 'utf8')).toBe(`${failed.id}\n`);
    const hooks = s.json<Array<{ id: string; slot: string; status: string; attempt: number; error: string | null }>>(['runs', '--limit', '10']).filter((r) => r.slot.startsWith('hook:'));
    expect(hooks.map((h) => [h.attempt, h.status]).sort()).toEqual([
      [1, 'abandoned'],
      [2, 'succeeded'],
    ]);
    expect(hooks.find((h) => h.attempt === 1)!.error).toMatch(/stopped before the process was started/);
    expect(notice()!.hookRunId).toBe(hooks.find((h) => h.attempt === 2)!.id);
    expectDataDirInvariants(s.dataDir);
  });

  it('an unknown crash point is refused at start (exit 2), naming the points', () => {
    const s = sandbox();
    const r = s.run(['list'], { LOOPS_FAULT: 'after-lunch' });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/LOOPS_FAULT: "after-lunch" is not <point>\[:<n>\].*between-lease-and-pidfile/);
  });
});
