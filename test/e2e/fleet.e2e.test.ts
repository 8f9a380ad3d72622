/**
 * The fleet's CI version (issue 15's acceptance, "a short version in CI"): `node bench/fleet.mjs
 * --quick --json` — three daemons (hosts h1–h3, each its own data directory) on one PostgreSQL log
 * of a private cluster the bench starts, for 60 s of loops firing every second with retries and the
 * skip / buffer-one / cancel-other / allow overlap policies (`ttl-3s`: 5 s runs under a 3 s lease),
 * one at a time: a daemon's node process SIGSTOPped for 18 s (past its runs' 3 s lease and its
 * 15 s daemon lease) and SIGCONTed, a daemon killed with SIGKILL and started again 2 s later,
 * PostgreSQL restarted with the daemons running, and a daemon killed and left down 8 s (a
 * takeover kill) — and what it found: no (loop, slot, attempt) with two runs, no slot decided twice
 * and every due slot decided, every run terminal, no command run twice, `loops verify` and `loops
 * projections verify` passing, PostgreSQL's tables equal to a rebuild, no daemon exit the bench did
 * not cause, every host claiming runs and writing again after the restart; the paused daemon's runs
 * taken over by other hosts only once their lease expired, none of its late appends accepted (over
 * the whole log: no run appended to by a runner it was taken from), the paused daemon working again
 * after SIGCONT with its daemon lease its own; the killed daemon's runs taken over by another host
 * and retried. Its table is printed to the test output. `npm run fleet` is the 10-minute version.
 *
 * Prerequisites (test/helpers/prerequisite.ts: skipped loudly locally, a failure under CI): the
 * PostgreSQL server programs (initdb, pg_ctl, postgres), and as root `setpriv` to run them as uid
 * 65534 (PostgreSQL refuses root). The bench stops its daemons and cluster whatever ends it; should
 * this test fail half-way, the bench is sent SIGTERM (which does that) and waited for.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { canSetpriv, requirePrerequisite } from '../helpers/prerequisite.js';
import { BIN } from './cli-helpers.js';

const FLEET = resolve(__dirname, '..', '..', 'bench', 'fleet.mjs');

/** Where initdb, pg_ctl and postgres are (as bench/lib.mjs findPgBinDir looks), or why not. */
function pgServerPrograms(): true | string {
  const has = (dir: string) => ['initdb', 'pg_ctl', 'postgres'].every((name) => existsSync(join(dir, name)));
  const candidates: string[] = [];
  if (process.env.LOOPS_PG_BINDIR) candidates.push(process.env.LOOPS_PG_BINDIR);
  candidates.push(...(process.env.PATH ?? '').split(':').filter(Boolean));
  const config = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' });
  if (config.status === 0 && config.stdout.trim()) candidates.push(config.stdout.trim());
  if (existsSync('/usr/lib/postgresql')) {
    for (const v of readdirSync('/usr/lib/postgresql')) candidates.push(join('/usr/lib/postgresql', v, 'bin'));
  }
  if (candidates.some(has)) return true;
  return 'initdb, pg_ctl and postgres are not on PATH, in pg_config --bindir, in /usr/lib/postgresql/*/bin or in $LOOPS_PG_BINDIR (Debian: apt-get install postgresql)';
}

const havePg = requirePrerequisite('PostgreSQL server programs for the fleet bench’s private cluster', pgServerPrograms);
const canRunPg = process.getuid?.() !== 0 || requirePrerequisite('setpriv, to run PostgreSQL as uid 65534 (it refuses root)', () => canSetpriv(65534));

/** What became of a run the paused or killed daemon held (bench/fleet.mjs, fatesOf). */
interface RunFate {
  runId: string;
  loop: string;
  attempt: number | null;
  leaseMs: number | null;
  leaseExpiresMs: number;
  takenOverBy: string | null;
  takeoverType: string | null;
  takeoverMs: number | null;
  afterExpiryMs: number | null;
  expiredByRestart: boolean;
  reason: string | null;
  retry: { host: string; claimedMs: number; status: string } | null;
}

interface FleetResult {
  ok: boolean;
  failed: string[];
  config: { seconds: number; daemons: number; pgRestarts: number; pauseSeconds: number; takeovers: number; loops: Array<{ name: string; due: number; decided: number }> };
  runs: { total: number; byStatus: Record<string, number>; perHost: Record<string, number>; perMinute: number[]; dueSlots: number };
  executions: { total: number; duplicates: string[]; stray: string[] };
  pauses: Array<{
    host: string;
    runnerId: string;
    pausedMs: number;
    runs: RunFate[];
    takenOver: number;
    daemonLease: { seenExpiredDuringPause: boolean; after: { holder: string } | null };
    eventsWhileStopped: number;
    claimsAfter: number;
    stuckTransactions: unknown[];
  }>;
  takeoverKills: Array<{ host: string; downMs: number; runs: RunFate[] }>;
  takeoverFigures: Record<string, { leaseMs: number; takeoverMs: { n: number; p50: number; max: number } }>;
  fencing: { takeovers: number; lateAppends: string[] };
  restarts: {
    kills: Array<{ host: string; pid: number | null; newPid: number | null }>;
    takeoverKills: Array<{ host: string | null; newPid: number | null; error: string | null }>;
    pg: Array<{ n: number; downMs: number | null; error: string | null }>;
    unexpectedExits: Array<{ host: string; error: string }>;
  };
  reconnects: Array<{ n: number; firstWriteMs: Record<string, number | null> }>;
  checks: {
    duplicateRuns: number;
    slotsDecidedTwice: number;
    undecided: string[];
    nonTerminal: number;
    leftQueued: number;
    verify: { ok: boolean; violations: string[] };
    projections: { ok: boolean };
    pgProjections: { ok: boolean };
    exercised: Record<string, number>;
  };
  stalls: Array<{ host: string; pid: number; lastPassAt: string | null }>;
  stops: Array<{ host: string; stopped: boolean; code?: number | null; signal?: string | null }>;
}

beforeAll(() => {
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: run npm run build (npm test does it)`);
});

const running: ChildProcess[] = [];
afterEach(async () => {
  for (const child of running.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    // SIGTERM: the bench kills its daemons and stops its cluster, then exits.
    child.kill('SIGTERM');
    await new Promise((done) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        done(undefined);
      }, 20_000);
      child.once('close', () => {
        clearTimeout(timer);
        done(undefined);
      });
    });
  }
});

describe('fleet (60 s, 3 daemons on one PostgreSQL: a SIGSTOP past the leases, kill -9, a PostgreSQL restart, a takeover kill)', () => {
  it.skipIf(!havePg || !canRunPg)('runs every due slot once, no run twice, every run terminal, late appends fenced, takeovers after the lease only, and the log and tables verify', async () => {
    const fleet = spawn(process.execPath, [FLEET, '--quick', '--json'], {
      env: { ...process.env, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    running.push(fleet);
    let stdout = '';
    let stderr = '';
    fleet.stdout!.on('data', (d) => (stdout += d));
    fleet.stderr!.on('data', (d) => (stderr += d));
    const code = await new Promise<number | null>((done) => fleet.once('close', (c) => done(c)));
    // The bench's progress and table (stderr with --json) in the test output.
    console.log(stderr);
    expect(stdout, `the bench printed no JSON (exit ${code}): ${stderr}`).toMatch(/^\{/);
    const r = JSON.parse(stdout) as FleetResult;

    // The faults happened: a kill -9 and a takeover kill (each daemon started again), a PostgreSQL
    // restart, the pause, three hosts.
    expect(r.config.daemons).toBe(3);
    expect(r.restarts.kills.length).toBeGreaterThanOrEqual(1);
    for (const k of r.restarts.kills) expect(k.newPid, `daemon ${k.host} was started again`).not.toBeNull();
    expect(r.restarts.takeoverKills).toHaveLength(r.config.takeovers);
    expect(r.config.takeovers).toBeGreaterThanOrEqual(1);
    for (const k of r.restarts.takeoverKills) expect(k, `daemon ${k.host} killed, then started again`).toMatchObject({ error: null, newPid: expect.any(Number) });
    expect(r.restarts.pg.length).toBe(r.config.pgRestarts);
    expect(r.restarts.pg.length).toBeGreaterThanOrEqual(1);
    for (const p of r.restarts.pg) expect(p.error).toBeNull();
    // No daemon went by itself (a crash on the restart would be here, with its error), and none
    // lingered alive without working (a start that failed but did not exit).
    expect(r.restarts.unexpectedExits).toEqual([]);
    expect(r.stalls).toEqual([]);
    // Every host claimed runs, and wrote again after each restart.
    expect(Object.keys(r.runs.perHost).sort()).toEqual(['h1', 'h2', 'h3']);
    for (const n of Object.values(r.runs.perHost)) expect(n).toBeGreaterThan(0);
    expect(r.reconnects).toHaveLength(r.restarts.pg.length);
    for (const rc of r.reconnects) for (const [host, ms] of Object.entries(rc.firstWriteMs)) expect(ms, `${host} after restart ${rc.n}`).not.toBeNull();

    // The acceptance: zero duplicate runs per slot, zero slots decided twice, every run terminal.
    expect(r.checks.duplicateRuns).toBe(0);
    expect(r.checks.slotsDecidedTwice).toBe(0);
    expect(r.checks.undecided).toEqual([]);
    for (const l of r.config.loops) expect(l.decided, l.name).toBe(l.due);
    expect(r.checks.nonTerminal).toBe(0);
    expect(r.checks.leftQueued).toBe(0);
    expect(r.executions.duplicates).toEqual([]);
    expect(r.executions.stray).toEqual([]);
    expect(r.checks.verify).toMatchObject({ ok: true, violations: [] });
    expect(r.checks.projections.ok).toBe(true);
    expect(r.checks.pgProjections.ok).toBe(true);
    // What the window exercised: retries that succeeded, each overlap policy.
    for (const [what, n] of Object.entries(r.checks.exercised)) expect(n, what).toBeGreaterThan(0);
    expect(r.runs.total).toBeGreaterThan(0);
    for (const s of r.stops) expect(s, `daemon ${s.host} stopped gracefully on SIGTERM`).toMatchObject({ stopped: true, code: 0 });

    // The pause: the daemon's node process stopped past its runs' 3 s lease and its 15 s daemon
    // lease. Runs taken over by other hosts, each only once its lease had expired, abandoned with a
    // reason naming the stopped runner, and retried; nothing written by it while stopped; none of
    // its appends accepted after a takeover; working again after SIGCONT, its daemon lease its own.
    expect(r.config.pauseSeconds).toBeGreaterThan(15);
    expect(r.pauses).toHaveLength(1);
    const p = r.pauses[0]!;
    expect(p.pausedMs).toBeGreaterThan(15_000);
    expect(p.stuckTransactions).toEqual([]);
    expect(p.takenOver).toBeGreaterThan(0);
    for (const f of p.runs.filter((x) => x.takenOverBy !== null && x.takenOverBy !== p.host)) {
      expect(f.afterExpiryMs, `run ${f.runId} taken over after its lease expired`).toBeGreaterThanOrEqual(-20);
      if (f.takeoverType === 'run.abandoned') expect(f.reason).toContain(p.runnerId);
      // (Its second attempt, taken over, is its last.)
      if (f.loop === 'ttl-3s' && f.attempt === 1) expect(f.retry, `run ${f.runId} retried`).not.toBeNull();
    }
    expect(p.daemonLease.seenExpiredDuringPause).toBe(true);
    expect(p.daemonLease.after?.holder).toBe(p.runnerId);
    expect(p.eventsWhileStopped).toBe(0);
    expect(p.claimsAfter).toBeGreaterThan(0);
    expect(r.fencing.lateAppends).toEqual([]);
    expect(r.fencing.takeovers).toBeGreaterThan(0);

    // The takeover kill: another host ended the killed daemon's 3 s-lease runs within the lease and
    // a pass or so of the kill, and their retries started.
    expect(r.takeoverKills).toHaveLength(r.config.takeovers);
    for (const k of r.takeoverKills) {
      const taken = k.runs.filter((f) => f.takenOverBy !== null && f.takenOverBy !== k.host && !f.expiredByRestart);
      expect(taken.length, `runs of ${k.host} taken over by another host`).toBeGreaterThan(0);
      for (const f of taken) expect(f.afterExpiryMs).toBeGreaterThanOrEqual(-20);
    }
    const short = r.takeoverFigures['3000'];
    expect(short?.takeoverMs.n).toBeGreaterThan(0);
    expect(short!.takeoverMs.max).toBeLessThan(3000 + 5000); // the lease, plus a pass on a busy machine
    expect(r.failed).toEqual([]);
    expect(r.ok).toBe(true);
    expect(code, stderr).toBe(0);
  }, 300_000);
});
