/**
 * The agent CLI's own error on the recovery path: an agent run whose process ended while no runner
 * watched it is recorded from its files (exit-status, stdout.log), and its error reads the CLI's
 * error from the recorded failure in stdout.log (test/fixtures/agents/failures) before the exit. A
 * real SQLite file, a real (dead) process standing for the run's, the SimulatedClock.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, onTestFinished } from 'vitest';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { recoverRuns } from '../../src/runtime/daemon/recovery.js';
import { processStartTime } from '../../src/runtime/execution/process-info.js';
import { createAgentLoop } from '../../src/runtime/loops/commands.js';
import { findRun } from '../../src/runtime/queries/loops.js';
import { openRuntime } from '../../src/runtime/runtime.js';
import { expectLogConsistent } from '../helpers/invariants.js';
import { strandRun } from '../helpers/strand.js';
import { useRuntime } from '../helpers/tmp.js';

const FAKES = join(dirname(fileURLToPath(import.meta.url)), '../fixtures/agents');
const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const TTL = 30_000;
const OLD = 'old-host:111:gone';

/** A pid that was a process and is gone (killed and reaped), with its start time. */
async function deadProcess(): Promise<{ pid: number; startTime: string }> {
  const child = spawn('sleep', ['30'], { detached: true, stdio: 'ignore' });
  const pid = child.pid!;
  const startTime = processStartTime(pid)!;
  expect(startTime).not.toBeNull();
  child.kill('SIGKILL');
  await once(child, 'exit');
  return { pid, startTime };
}

describe('recoverRuns: an agent run that failed while no runner watched', () => {
  it.each([
    ['claude', 'claude-api-529', /^claude API error 529 overloaded_error: Overloaded; exited with code 1 \(recorded from its exit-status file after runner old-host:111:gone stopped\)$/],
    ['codex', 'codex-turn-failed', /^codex API error 429: exceeded retry limit, last status: 429 Too Many Requests, request id: req_5b2e91c0d4f7; exited with code 1 \(/],
  ] as const)('%s %s: the run is failed, its error is the CLI\'s, then the exit; no final message', async (provider, failure, expected) => {
    const path = process.env.PATH;
    process.env.PATH = `${FAKES}:${path ?? ''}`;
    onTestFinished(() => void (process.env.PATH = path));
    const clock = new SimulatedClock(T0);
    const runtime = await useRuntime({ clock, runnerId: 'new-host:222:recoverer' });
    const old = await openRuntime({ dataDir: runtime.dataDir, clock, runnerId: OLD });
    let closed = false;
    const die = () => {
      if (!closed) old.close();
      closed = true;
    };
    onTestFinished(die);
    onTestFinished(() => expectLogConsistent(runtime));
    const agent = await createAgentLoop(runtime, { name: 'fixer', provider, prompt: 'fix it', schedule: { manual: true } });
    const runId = await strandRun(old, agent, await deadProcess());
    // What the CLI left while its runner was gone: its recorded failure, and exit 1.
    const dir = join(runtime.dataDir, 'runs', runId);
    mkdirSync(dir, { recursive: true });
    copyFileSync(join(FAKES, 'failures', `${failure}.jsonl`), join(dir, 'stdout.log'));
    writeFileSync(join(dir, 'stderr.log'), '');
    writeFileSync(join(dir, 'exit-status'), 'exit 1\n');
    die();
    clock.advance(TTL + 1);
    expect((await recoverRuns(runtime)).exited).toEqual([runId]);
    const run = findRun(runtime.db, runId);
    expect(run).toMatchObject({ status: 'failed', exitCode: 1 });
    expect(run.error).toMatch(expected);
    expect(run.agent).toMatchObject({ provider, isError: true, finalMessage: null, error: { message: expect.any(String) } });
  });
});
