/**
 * The soak's CI version (issue 11, item 6): `node bench/soak.mjs --seconds 60 --json` — 10,000 loops
 * defined, 1,000 runs a minute due, the real daemon (`loops daemon start`) for a minute of the real
 * clock — and what it measured: every invariant of the log holds (the checker `loops verify
 * --processes` runs, settled at the stop), no slot ran twice, every run succeeded, throughput and
 * firing lateness within the soak's thresholds (bench/soak.mjs says them; docs/soak-results.md says
 * why). Its table is printed to the test output. `npm run soak` is the 10-minute version.
 *
 * The soak is one child process that stops its daemon whatever ends it; should this test fail
 * half-way, the daemon its data directory names and the soak itself are killed by pid here, and the
 * directory is removed (tempDir).
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/tmp.js';
import { BIN, pidAlive } from './cli-helpers.js';

const SOAK = resolve(__dirname, '..', '..', 'bench', 'soak.mjs');

interface Spread {
  n: number;
  p50: number;
  p99: number;
  max: number;
}
interface SoakResult {
  ok: boolean;
  failed: string[];
  config: { loops: number; rate: number };
  decisions: Record<string, number>;
  runs: { due: number; slotsDecided: number; claimed: number; completed: number; endedInWindow: number; byStatus: Record<string, number>; failures: number; leftPending: number };
  throughput: { perMinute: number; target: number; ratio: number };
  latenessMs: { decided: Spread; claimed: Spread; spawned: Spread };
  daemon: { rssMiB: { start: number; peak: number; end: number }; stop: { stopped: boolean; pid: number } };
  invariants: { violations: string[] };
  thresholds: { minThroughputRatio: number; maxP99Ms: number };
}

beforeAll(() => {
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: run npm run build (npm test does it)`);
});

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

describe('soak (60 s of the real daemon, 10,000 loops, 1,000 runs/min due)', () => {
  it('keeps up, runs every due slot once, and leaves a log whose invariants hold', async () => {
    const dataDir = join(tempDir('loops-soak-'), 'data');
    const soak = spawn(process.execPath, [SOAK, '--seconds', '60', '--json', '--data-dir', dataDir], {
      env: { ...process.env, NO_COLOR: '1', LOOPS_DATA_DIR: dataDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    cleanups.push(() => {
      if (soak.exitCode === null && soak.signalCode === null) soak.kill('SIGKILL');
      try {
        const pid = (JSON.parse(readFileSync(join(dataDir, 'daemon.json'), 'utf8')) as { pid: number }).pid;
        if (pidAlive(pid)) process.kill(pid, 'SIGKILL');
      } catch {
        // no daemon.json: no daemon running
      }
    });
    let stdout = '';
    let stderr = '';
    soak.stdout.on('data', (d) => (stdout += d));
    soak.stderr.on('data', (d) => (stderr += d));
    const code = await new Promise<number | null>((done) => soak.once('close', (c) => done(c)));
    // The soak's table (stderr with --json) in the test output.
    console.log(stderr);
    expect(stdout, `the soak printed no JSON (exit ${code}): ${stderr}`).toMatch(/^\{/);
    const r = JSON.parse(stdout) as SoakResult;

    expect(r.invariants.violations).toEqual([]);
    expect(r.config.loops).toBe(10_000);
    // Every slot due in the window was decided (once: the checker says no slot was decided twice).
    expect(r.runs.slotsDecided).toBe(r.runs.due);
    expect(r.runs.claimed).toBe(r.decisions['slot.fired']);
    expect(r.runs.byStatus).toEqual({ succeeded: r.runs.claimed });
    expect(r.runs.completed).toBe(r.runs.claimed);
    expect(r.runs.leftPending).toBe(0);
    expect(r.throughput.ratio).toBeGreaterThanOrEqual(r.thresholds.minThroughputRatio);
    expect(r.latenessMs.spawned.n).toBe(r.runs.claimed);
    expect(r.latenessMs.spawned.p99).toBeLessThanOrEqual(r.thresholds.maxP99Ms);
    expect(r.daemon.stop.stopped).toBe(true);
    expect(pidAlive(r.daemon.stop.pid)).toBe(false);
    expect(r.failed).toEqual([]);
    expect(code, stderr).toBe(0);
  }, 180_000);
});
