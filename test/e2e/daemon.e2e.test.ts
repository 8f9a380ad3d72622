/**
 * The daemon through the built binary, in temporary data directories: start / status / a second
 * start / scheduled runs of a loop created from the CLI / logs / stop; kill -9 while a run is
 * going and a restart that records the stale run as abandoned without running any slot twice;
 * `daemon run` in the foreground stopping on SIGTERM and recording its running run as cancelled.
 *
 * The daemon is another process: its progress is observed by bounded polling of what it leaves
 * (`runs --json`, its pid, /proc), never by sleeping. Every daemon started here is killed by pid
 * in afterAll should a test fail half-way; passing tests stop them and leave no process behind.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isAlive, liveGroupMembers, procStat } from '../helpers/proc.js';
import { waitFor } from '../helpers/wait.js';
import { Sandbox, pidAlive, type CliResult, useSandboxes } from './cli-helpers.js';

const sandbox = useSandboxes();
/** Process groups of runs seen, killed in afterAll if still alive. */
const groups = new Set<number>();
const foreground: Array<{ kill: (signal: NodeJS.Signals) => boolean; pid?: number | undefined }> = [];

function killGroup(pgid: number): void {
  if (liveGroupMembers(pgid).length === 0) return;
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    // gone
  }
}

afterAll(() => {
  for (const child of foreground) if (child.pid && pidAlive(child.pid)) child.kill('SIGKILL');
  for (const pgid of groups) killGroup(pgid);
});

interface Run {
  id: string;
  slot: string;
  trigger: string;
  status: string;
  pid: number | null;
  error: string | null;
  exitCode: number | null;
  runnerId: string;
}

interface Status {
  running: boolean;
  healthy: boolean;
  pid: number | null;
  lastPassAt: string | null;
  activeRuns: number;
  spawner: { mode: string; pid: number | null; reason: string | null } | null;
}

function runs(s: Sandbox, loop: string): Run[] {
  const list = s.json<Run[]>(['runs', loop, '--limit', '1000']);
  for (const r of list) if (r.pid) groups.add(r.pid);
  return list;
}

function status(s: Sandbox, env: Record<string, string> = {}): { code: number | null; view: Status } {
  const r = s.run(['daemon', 'status', '--json'], env);
  return { code: r.code, view: JSON.parse(r.stdout) as Status };
}

/** Polls `runs <loop> --json` (another process's observable state) until `cond` holds. */
async function waitForRuns(s: Sandbox, loop: string, cond: (list: Run[]) => boolean, timeoutMs: number, what: string): Promise<Run[]> {
  let last: Run[] = [];
  await waitFor(() => cond((last = runs(s, loop))), timeoutMs, `${what} (runs: ${JSON.stringify(last.map((r) => r.status))})`);
  return last;
}

function started(r: CliResult): number {
  expect(r.code, r.stderr).toBe(0);
  const m = /Started the loops daemon \(pid (\d+)\)/.exec(r.stdout);
  expect(m, r.stdout).not.toBeNull();
  return Number(m![1]);
}

/** The slots fired for a loop (from the log's slot_decisions), each must appear once. */
function firedSlots(s: Sandbox, loopId: string): string[] {
  const db = s.db();
  try {
    return (db.prepare("SELECT slot_from FROM slot_decisions WHERE loop_id = ? AND decision = 'fired' ORDER BY position").all(loopId) as Array<{ slot_from: string }>).map(
      (r) => r.slot_from,
    );
  } finally {
    db.close();
  }
}

function expectLogHealthy(s: Sandbox): void {
  const verify = s.run(['projections', 'verify']);
  expect(verify.code, verify.stdout + verify.stderr).toBe(0);
  const db = s.db();
  try {
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    // Contiguous stream versions.
    const gaps = db
      .prepare('SELECT stream_id, COUNT(*) AS n, MAX(version) AS top FROM events GROUP BY stream_id HAVING n != top')
      .all();
    expect(gaps).toEqual([]);
  } finally {
    db.close();
  }
}

describe('loops daemon start / status / stop', () => {
  const s = sandbox();

  it('start → status running and healthy → a second start exits 2 naming the pid → scheduled runs → logs → stop → not running', async () => {
    // The helper is kept however slow this machine is (its end when idle is the next describe's).
    const pid = started(s.run(['daemon', 'start'], { LOOPS_SPAWNER_IDLE_MS: '600000' }));
    expect(pidAlive(pid)).toBe(true);
    expect(s.daemonPid()).toBe(pid);

    const st = status(s);
    expect(st.code).toBe(0);
    expect(st.view).toMatchObject({ running: true, healthy: true, pid, spawner: { mode: 'helper', reason: null } });
    // Its runs are forked by its spawner helper, a child of the daemon.
    const helper = st.view.spawner!.pid!;
    expect(helper).toBe(spawnerHelperOf(pid));
    const text = s.run(['daemon', 'status']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(new RegExp(`^running  pid ${pid}`));
    expect(text.stdout).toMatch(new RegExp(`forked by the spawner helper \\(pid ${helper}\\)`));

    // Seen from ten minutes later, the last pass is stale: running, but not healthy.
    const later = status(s, { LOOPS_NOW: new Date(Date.now() + 10 * 60_000).toISOString() });
    expect(later.code).toBe(1);
    expect(later.view).toMatchObject({ running: true, healthy: false, pid });

    const second = s.run(['daemon', 'start']);
    expect(second.code).toBe(2);
    expect(second.stderr).toContain(`pid ${pid}`);
    expect(second.stdout).toBe('');
    expect(s.daemonPid()).toBe(pid);

    // A loop created from the CLI is picked up and run on schedule.
    const loop = s.json<{ id: string }>(['create', 'command', 'tick', '--cmd', 'true', '--every', '1s']);
    const list = await waitForRuns(s, 'tick', (l) => l.filter((r) => r.status === 'succeeded').length >= 3, 15_000, '3 scheduled runs');
    const done = list.filter((r) => r.status === 'succeeded');
    for (const r of done) expect(r).toMatchObject({ trigger: 'schedule', exitCode: 0 });
    expect(new Set(list.map((r) => r.slot)).size).toBe(list.length);

    const logs = s.run(['daemon', 'logs', '-n', '5']);
    expect(logs.code).toBe(0);
    const lines = logs.stdout.replace(/\n$/, '').split('\n');
    expect(lines).toHaveLength(5);
    for (const line of lines) expect(line).toMatch(/^\d{4}-\d\d-\d\dT\S+Z /);
    const all = s.run(['daemon', 'logs', '-n', '1000']).stdout;
    expect(all).toContain(`daemon started: pid ${pid}`);
    expect(all).toMatch(/tick: run run_\S+ succeeded/);

    const stop = s.run(['daemon', 'stop']);
    expect(stop.code, stop.stderr).toBe(0);
    expect(stop.stdout).toContain(`Stopped the loops daemon (pid ${pid})`);
    expect(pidAlive(pid)).toBe(false);
    expect(existsSync(join(s.dataDir, 'daemon.json'))).toBe(false);
    const after = status(s);
    expect(after.code).toBe(1);
    expect(after.view).toMatchObject({ running: false, healthy: false, pid: null });
    expect(s.run(['daemon', 'status']).stdout).toMatch(/^not running/);

    // Nothing is left running, every run ended, and each slot was fired once.
    const final = runs(s, 'tick');
    for (const r of final) expect(['succeeded', 'cancelled']).toContain(r.status);
    const slots = firedSlots(s, loop.id);
    expect(new Set(slots).size).toBe(slots.length);
    expect(final.map((r) => r.slot).sort()).toEqual([...slots].sort());
    expectLogHealthy(s);

    // Stopping again: nothing to stop, still exit 0.
    expect(s.run(['daemon', 'stop']).code).toBe(0);
  });
});

describe('kill -9 while a run is going, then start again', () => {
  const s = sandbox();

  it('the stale run is recorded with its real exit status, the schedule goes on, no slot runs twice', async () => {
    // It prints after the daemon is killed: its output goes to a file, not a pipe to the dead
    // daemon, so that `echo` does not die of SIGPIPE and the real exit code 7 is what is recorded.
    const loop = s.json<{ id: string }>(['create', 'command', 'slow', '--cmd', 'echo before; sleep 5; echo after; exit 7', '--every', '1s', '--kill-grace', '1s']);
    const first = started(s.run(['daemon', 'start']));
    const seen = await waitForRuns(s, 'slow', (l) => l.some((r) => r.status === 'running' && r.pid !== null), 10_000, 'a running run');
    const running = seen.find((r) => r.status === 'running')!;
    const pgid = running.pid!;
    expect(liveGroupMembers(pgid).length).toBeGreaterThan(0);

    process.kill(first, 'SIGKILL');
    await waitFor(() => !pidAlive(first), 5000, `daemon ${first} to die`);
    // Its pid file is left behind, naming a dead process: not running.
    expect(s.daemonPid()).toBe(first);
    expect(status(s).view).toMatchObject({ running: false, healthy: false });
    // The run's process outlives the daemon; let it end (sleep 5; exit 7) so it is gone at restart.
    expect(liveGroupMembers(pgid).length).toBeGreaterThan(0);
    await waitFor(() => liveGroupMembers(pgid).length === 0, 10_000, `run process group ${pgid} to end`);
    const before = runs(s, 'slow');
    expect(before.find((r) => r.id === running.id)!.status).toBe('running');
    const firedBefore = firedSlots(s, loop.id);

    // Restart at once: the dead daemon's leases do not block it, recovery records the run's end.
    const second = started(s.run(['daemon', 'start']));
    expect(second).not.toBe(first);
    const ended = (l: Run[]) => !['claimed', 'spawning', 'running'].includes(l.find((r) => r.id === running.id)!.status);
    const after = await waitForRuns(s, 'slow', ended, 10_000, 'the stale run to be recorded as ended');
    const recovered = after.find((r) => r.id === running.id)!;
    // The exit-status wrapper left the real outcome (sleep 5; exit 7): failed with exit code 7, not abandoned.
    expect(existsSync(join(s.dataDir, 'runs', running.id, 'exit-status'))).toBe(true);
    expect(recovered).toMatchObject({ status: 'failed', exitCode: 7 });
    expect(recovered.error).toMatch(/exited with code 7 \(recorded from its exit-status file after runner .* stopped\)/);
    expect(readFileSync(join(s.dataDir, 'runs', running.id, 'stdout.log'), 'utf8')).toBe('before\nafter\n');
    const logText = s.run(['daemon', 'logs', '-n', '1000']).stdout;
    expect(logText).toContain(`recovered run ${running.id}: `);
    expect(logText).toContain(`daemon started: pid ${second}`);

    // The schedule goes on: a new run of a later slot starts.
    const resumed = await waitForRuns(s, 'slow', (l) => l.some((r) => r.status === 'running' && r.id !== running.id), 10_000, 'a new run after the restart');
    const next = resumed.find((r) => r.status === 'running' && r.id !== running.id)!;
    expect(Date.parse(next.slot)).toBeGreaterThan(Date.parse(running.slot));

    const stop = s.run(['daemon', 'stop']);
    expect(stop.code, stop.stderr).toBe(0);
    expect(pidAlive(second)).toBe(false);
    if (next.pid) await waitFor(() => liveGroupMembers(next.pid!).length === 0, 5000, 'the cancelled run to be gone');

    // Every run ended; no slot was fired (or run) twice across the crash.
    const final = runs(s, 'slow');
    for (const r of final) expect(['abandoned', 'failed', 'cancelled'], JSON.stringify(final, null, 1)).toContain(r.status);
    expect(final.find((r) => r.id === next.id)!.status).toBe('cancelled');
    const slots = firedSlots(s, loop.id);
    expect(slots.slice(0, firedBefore.length)).toEqual(firedBefore);
    expect(new Set(slots).size).toBe(slots.length);
    expect(final.map((r) => r.slot).sort()).toEqual([...slots].sort());
    expect(new Set(final.map((r) => r.slot)).size).toBe(final.length);
    expectLogHealthy(s);
    const replay = s.run(['replay', running.id]);
    expect(replay.code, replay.stderr).toBe(0);
  });
});

describe('loops daemon run (foreground)', () => {
  const s = sandbox();

  it('exits 0 on SIGTERM and records its running run as cancelled', async () => {
    s.json(['create', 'command', 'long', '--cmd', 'sleep 30', '--every', '1s', '--kill-grace', '1s']);
    const fg = s.start(['daemon', 'run', '--concurrency', '2']);
    foreground.push(fg.child);
    await fg.waitForOutput(/daemon started: pid \d+/);
    expect(s.daemonPid()).toBe(fg.child.pid);
    const list = await waitForRuns(s, 'long', (l) => l.some((r) => r.status === 'running' && r.pid !== null), 10_000, 'a running run');
    const run = list.find((r) => r.status === 'running')!;

    fg.child.kill('SIGTERM');
    const result = await fg.exited;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('stopping: SIGTERM received; cancelling 1 running run(s)');
    expect(result.stdout).toMatch(/daemon stopped\n$/);
    expect(result.stderr).toBe('');
    await waitFor(() => liveGroupMembers(run.pid!).length === 0, 5000, 'the run process group to be gone');

    const final = runs(s, 'long');
    expect(final.find((r) => r.id === run.id)).toMatchObject({ status: 'cancelled', error: expect.stringContaining('SIGTERM received') });
    for (const r of final) expect(r.status).toBe('cancelled');
    expect(existsSync(join(s.dataDir, 'daemon.json'))).toBe(false);
    expect(status(s).code).toBe(1);
    expectLogHealthy(s);
  });
});

describe('kill -9 while a run is going, restart while it still runs: the run is adopted', () => {
  const s = sandbox();

  it('the new daemon watches the orphaned process and records its real exit code when it ends', async () => {
    s.json(['create', 'command', 'adoptee', '--cmd', 'echo before; sleep 3; echo after; exit 7', '--every', '1h', '--starts-at', new Date(Date.now() + 1500).toISOString()]);
    const first = started(s.run(['daemon', 'start']));
    const seen = await waitForRuns(s, 'adoptee', (l) => l.some((r) => r.status === 'running' && r.pid !== null), 10_000, 'a running run');
    const running = seen.find((r) => r.status === 'running')!;
    // The run was forked by the daemon's spawner helper, not by the daemon itself.
    const helper = spawnerHelperOf(first);
    expect(helper).not.toBeNull();
    expect(procStat(running.pid!)!.ppid).toBe(helper);
    process.kill(first, 'SIGKILL');
    await waitFor(() => !pidAlive(first), 5000, `daemon ${first} to die`);
    // The helper outlives its daemon (its stdin closed) to reap the run, which goes on.
    expect(isAlive(helper!)).toBe(true);
    expect(liveGroupMembers(running.pid!).length).toBeGreaterThan(0);
    const second = started(s.run(['daemon', 'start'], { LOOPS_SPAWNER_IDLE_MS: '600000' }));
    const ended = await waitForRuns(
      s,
      'adoptee',
      (l) => l.find((r) => r.id === running.id)!.status !== 'running',
      15_000,
      'the adopted run to end',
    );
    expect(ended.find((r) => r.id === running.id)).toMatchObject({ status: 'failed', exitCode: 7 });
    // The old helper wrote that exit status when it reaped the run, and then ended.
    await waitFor(() => !isAlive(helper!), 5000, `spawner helper ${helper} to end`);
    // Output written while no runner was alive is all in the run's file.
    expect(readFileSync(join(s.dataDir, 'runs', running.id, 'stdout.log'), 'utf8')).toBe('before\nafter\n');
    expect(s.run(['daemon', 'logs', '-n', '1000']).stdout).toContain(`adopted run ${running.id}`);
    expect(s.run(['replay', running.id]).code).toBe(0);
    const secondHelper = spawnerHelperOf(second);
    expect(secondHelper).not.toBeNull();
    expect(s.run(['daemon', 'stop']).code).toBe(0);
    expect(pidAlive(second)).toBe(false);
    await waitFor(() => !isAlive(secondHelper!), 5000, `spawner helper ${secondHelper} to end`);
  });
});

describe('the spawner helper ends when the daemon is idle and starts again for a run', () => {
  const s = sandbox();

  it('no helper while nothing is pending; a due run gets one, which ends again after the run', async () => {
    const pid = started(s.run(['daemon', 'start'], { LOOPS_SPAWNER_IDLE_MS: '200' }));
    // Warmed at start, then ended: nothing was due.
    await waitFor(() => spawnerHelperOf(pid) === null, 10_000, 'the idle helper to end');
    await waitFor(() => status(s).view.spawner?.pid === null, 10_000, 'status to show no helper');
    const idle = status(s);
    expect(idle.view).toMatchObject({ running: true, healthy: true, spawner: { mode: 'helper', pid: null, reason: null } });
    expect(s.run(['daemon', 'status']).stdout).toMatch(/forked by the spawner helper(?! \(pid)/);

    const go = join(s.dataDir, 'go');
    s.json(['create', 'command', 'late', '--cmd', `while [ ! -e ${go} ]; do sleep 0.05; done`, '--every', '1h', '--starts-at', new Date(Date.now() + 1500).toISOString()]);
    const seen = await waitForRuns(s, 'late', (l) => l.some((r) => r.status === 'running' && r.pid !== null), 15_000, 'a running run');
    const run = seen.find((r) => r.status === 'running')!;
    const helper = spawnerHelperOf(pid);
    expect(helper).not.toBeNull();
    expect(procStat(run.pid!)!.ppid).toBe(helper);
    // The state file follows within its write interval (250 ms).
    await waitFor(() => status(s).view.spawner?.pid === helper, 10_000, `status to show helper ${helper}`);
    expect(status(s).view.spawner).toMatchObject({ mode: 'helper', pid: helper });
    writeFileSync(go, '');
    await waitForRuns(s, 'late', (l) => l.find((r) => r.id === run.id)!.status === 'succeeded', 15_000, 'the run to succeed');
    await waitFor(() => !isAlive(helper!), 10_000, `spawner helper ${helper} to end when idle`);
    expect(spawnerHelperOf(pid)).toBeNull();
    expect(s.run(['daemon', 'stop']).code).toBe(0);
    expect(pidAlive(pid)).toBe(false);
    expectLogHealthy(s);
  });
});

/** The pid of the spawner helper a daemon started (a child running spawner-process.js), or null. */
function spawnerHelperOf(daemon: number): number | null {
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = procStat(Number(name));
    if (!stat || stat.ppid !== daemon) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes('spawner-process.js')) return stat.pid;
    } catch {
      // gone
    }
  }
  return null;
}

describe('loops cancel', () => {
  it('cancels a run-now going in another terminal: its process group is gone, the run is cancelled with the reason, run-now exits 5', async () => {
    const s = sandbox();
    s.json(['create', 'command', 'long', '--cmd', 'sleep 30', '--manual', '--kill-grace', '1s']);
    const fg = s.start(['run-now', 'long']);
    foreground.push(fg.child);
    const list = await waitForRuns(s, 'long', (l) => l.some((r) => r.status === 'running' && r.pid !== null), 10_000, 'a running run');
    const run = list[0]!;
    const r = s.run(['cancel', run.id, '--reason', 'wrong branch']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^run ${run.id}: cancel requested; its runner \\(.*\\) stops it\\n$`));
    const result = await fg.exited;
    expect(result.code).toBe(5);
    await waitFor(() => liveGroupMembers(run.pid!).length === 0, 5000, 'the run process group to be gone');
    expect(runs(s, 'long')[0]).toMatchObject({ id: run.id, status: 'cancelled', error: 'cancelled: wrong branch' });
    // Again: the run has ended, nothing to do (still exit 0); an unknown id is an error.
    expect(s.run(['cancel', run.id]).stdout).toBe(`run ${run.id}: already ended (cancelled); nothing to cancel\n`);
    const unknown = s.run(['cancel', 'run_nope']);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/run_nope/);
    expect(s.run(['replay', run.id]).code).toBe(0);
  });

  it('cancels a run the daemon executes at once (SIGUSR2 nudge); a cancelled run is not retried', async () => {
    const s = sandbox();
    s.json(['create', 'command', 'long', '--cmd', 'sleep 30', '--every', '1h', '--starts-at', new Date(Date.now() + 1000).toISOString(), '--attempts', '3', '--kill-grace', '1s']);
    started(s.run(['daemon', 'start']));
    const list = await waitForRuns(s, 'long', (l) => l.some((r) => r.status === 'running' && r.pid !== null), 10_000, 'a running run');
    const run = list[0]!;
    const json = s.json<{ outcome: string; holder: string }>(['cancel', run.id]);
    expect(json.outcome).toBe('requested');
    expect(json.holder).toBe(run.runnerId);
    const ended = await waitForRuns(s, 'long', (l) => l[0]!.status !== 'running', 5000, 'the run to be recorded cancelled');
    expect(ended[0]).toMatchObject({ id: run.id, status: 'cancelled', error: 'cancelled' });
    await waitFor(() => liveGroupMembers(run.pid!).length === 0, 5000, 'the run process group to be gone');
    expect(s.run(['daemon', 'stop']).code).toBe(0);
    expect(runs(s, 'long')).toHaveLength(1);
    const db = s.db();
    try {
      expect(db.prepare('SELECT count(*) AS n FROM run_queue').get()).toEqual({ n: 0 });
    } finally {
      db.close();
    }
  });
});

describe('kill -9 the daemon while a workflow loop runs, start it again', () => {
  it('the new daemon resumes the workflow run: the running step is adopted, finished steps are not re-run, the loop run succeeds', async () => {
    const s = sandbox();
    const dir = mkdtempSync(join(tmpdir(), 'loops-wfd-'));
    const file = join(dir, 'wf.yaml');
    writeFileSync(
      file,
      `name: wf
steps:
  - id: a
    run: echo a >> "${join(dir, 'marks')}"
  - id: b
    needs: a
    run: sleep 3; echo "n=7" >> "$LOOPS_OUTPUT"
  - id: c
    needs: b
    command: printf
    args: ["%s", "\${{ steps.b.outputs.n }}"]
`,
    );
    expect(s.run(['workflows', 'create', file]).code).toBe(0);
    s.json(['create', 'workflow', 'wfloop', '--workflow', 'wf', '--every', '1h', '--starts-at', new Date(Date.now() + 1000).toISOString()]);
    const first = started(s.run(['daemon', 'start']));
    let wfRunId = '';
    let pid = 0;
    await waitFor(
      () => {
        const list = s.json<Array<{ id: string }>>(['workflows', 'runs', 'wf']);
        if (!list.length) return false;
        wfRunId = list[0]!.id;
        const b = s.json<{ steps: Array<{ stepId: string; status: string; pid: number | null }> }>(['workflows', 'inspect', wfRunId]).steps.find((x) => x.stepId === 'b')!;
        pid = b.pid ?? 0;
        return b.status === 'running' && pid > 0;
      },
      15_000,
      'step b running under the daemon',
    );
    groups.add(pid);
    process.kill(first, 'SIGKILL');
    await waitFor(() => !pidAlive(first), 5000, `daemon ${first} to die`);
    expect(liveGroupMembers(pid).length).toBeGreaterThan(0);
    const second = started(s.run(['daemon', 'start']));
    const done = await waitForRuns(s, 'wfloop', (l) => l.length > 0 && l[0]!.status === 'succeeded', 20_000, 'the loop run to succeed');
    expect(done).toHaveLength(1);
    expect(s.json<{ status: string }>(['workflows', 'inspect', wfRunId]).status).toBe('succeeded');
    expect(readFileSync(join(dir, 'marks'), 'utf8')).toBe('a\n');
    expect(readFileSync(join(s.dataDir, 'runs', wfRunId, 'c', '1', 'stdout.log'), 'utf8')).toBe('7');
    expect(s.run(['daemon', 'logs', '-n', '1000']).stdout).toContain(`resuming run ${done[0]!.id}`);
    expect(s.run(['replay', wfRunId]).code).toBe(0);
    expect(s.run(['replay', done[0]!.id]).code).toBe(0);
    expect(s.run(['daemon', 'stop']).code).toBe(0);
    expect(pidAlive(second)).toBe(false);
  });
});
