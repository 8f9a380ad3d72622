/**
 * `loops import hasna-loops` through the built binary, on a database the predecessor wrote itself
 * (../shared/fixtures/seed-0.3.1: 6 loops, 2 runs, the workflow `ship` at version 3 and one of its
 * runs; rebuilt from its SQL text, test/helpers/predecessor.ts): dry run writes nothing; the import brings every record
 * across with the predecessor's meaning; list, show, runs, stats, workflows list/inspect, replay,
 * projections verify and verify agree with what the predecessor recorded; a second import is a
 * no-op; its lease and a name taken here are refused as documented; and loops never writes into a
 * predecessor database it is pointed at by LOOPS_DATA_DIR.
 */
import Database from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { predecessorDatabase } from '../helpers/predecessor.js';
import { makeTempDir, removeDir, tempDir } from '../helpers/tmp.js';
import { expectDataDirInvariants } from '../helpers/invariants.js';
import { waitFor } from '../helpers/wait.js';
import { useSandboxes } from './cli-helpers.js';

const sandbox = useSandboxes();

/** What the predecessor recorded, read straight from its tables. */
function predecessorRows(file: string) {
  const db = new Database(file, { readonly: true });
  try {
    return {
      loops: db.prepare('SELECT * FROM loops ORDER BY name').all() as Array<{ id: string; name: string; status: string; description: string | null; next_run_at: string | null }>,
      runs: db.prepare('SELECT * FROM loop_runs ORDER BY id').all() as Array<{ id: string; loop_name: string; status: string; exit_code: number | null; started_at: string; finished_at: string; stdout: string }>,
      workflows: db.prepare('SELECT * FROM workflow_specs').all() as Array<{ id: string; name: string; version: number }>,
      steps: db.prepare('SELECT * FROM workflow_step_runs ORDER BY sequence').all() as Array<{ step_id: string; status: string; exit_code: number | null }>,
    };
  } finally {
    db.close();
  }
}

function sha(file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

describe('loops import hasna-loops', () => {
  const s = sandbox();
  let db = '';
  let before = '';
  let dir = '';
  beforeAll(() => {
    dir = makeTempDir('loops-import-');
    db = predecessorDatabase(dir);
    before = sha(db);
  });
  afterAll(() => removeDir(dir));

  it('--dry-run lists what would come across and writes nothing', () => {
    const r = s.run(['import', 'hasna-loops', '--db', db, '--with-history', '--dry-run']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^dry run: nothing written\./);
    expect(r.stdout).toMatch(/would import 6 loops, 1 workflow, 2 runs, 1 workflow run\n/);
    expect(s.eventCount()).toBe(0);
    expect(sha(db)).toBe(before);
  });

  it('brings every loop, the workflow and the history across; the tables agree with what the predecessor recorded', () => {
    const r = s.run(['import', 'hasna-loops', '--db', db, '--with-history', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as { counts: Record<string, Record<string, number>>; events: number };
    expect(report.counts).toMatchObject({ loop: { imported: 6 }, workflow: { imported: 1 }, run: { imported: 2 }, 'workflow run': { imported: 1 } });
    expect(sha(db)).toBe(before); // read-only there

    const pred = predecessorRows(db);
    const loops = s.json<Array<{ id: string; name: string; status: string; description: string | null; schedule: { kind: string }; target: { kind: string }; policies: { timeoutMs: number | null; attempts: number; retryDelayMs: number; backoff: number; overlap: string } }>>(['list']);
    expect(loops.map((l) => [l.name, l.status, l.id]).sort()).toEqual(pred.loops.map((l) => [l.name, l.status, `loop_${l.id}`]).sort());
    const byName = new Map(loops.map((l) => [l.name, l]));
    expect(byName.get('report')).toMatchObject({ description: 'weekly', schedule: { kind: 'cron' }, policies: { timeoutMs: 1_800_000 } });
    // attempts 2, a constant 5 s retry delay, overlap allow — as the predecessor ran it.
    expect(byName.get('sync')).toMatchObject({ status: 'paused', policies: { attempts: 2, retryDelayMs: 5000, backoff: 1, overlap: 'allow' } });
    expect(byName.get('tick')).toMatchObject({ schedule: { kind: 'every', anchor: 'fixed-delay', everyMs: 60_000 } });
    expect(byName.get('ship-nightly')).toMatchObject({ target: { kind: 'workflow', workflowId: 'wf_0180cda0c4c3', workflowName: 'ship' } });
    expect(byName.get('fixer')).toMatchObject({ target: { kind: 'agent', provider: 'codex', configIsolation: 'none' }, policies: { timeoutMs: 1_800_000 } });

    const show = s.run(['show', 'report']);
    expect(show.stdout).toMatch(/description weekly/);
    expect(show.stdout).toMatch(/cwd\s+\/tmp/);
    expect(show.stdout).toMatch(/timeout\s+30m/);

    const runs = s.json<Array<{ id: string; loopName: string; status: string; exitCode: number | null; startedAt: string; finishedAt: string; stdout: string }>>(['runs']);
    expect(runs.map((x) => [x.id, x.loopName, x.status, x.exitCode, x.startedAt, x.finishedAt]).sort()).toEqual(
      pred.runs.map((x) => [`run_${x.id}`, x.loop_name, x.status, x.exit_code, x.started_at, x.finished_at]).sort(),
    );
    const failed = s.run(['show', 'run_afad3f283bfd']);
    expect(failed.stdout).toMatch(/exit\s+code 2/);
    expect(failed.stdout).toMatch(/sync/);
    expect(s.run(['logs', 'run_6a2fc9c3c8a1']).stdout).toContain('weekly report');

    const workflows = s.json<Array<{ id: string; name: string; status: string }>>(['workflows', 'list']);
    expect(workflows).toEqual([expect.objectContaining({ id: 'wf_0180cda0c4c3', name: 'ship', status: 'active' })]);
    // Read as a predecessor-shape file: it runs one step at a time, stopping at the first failure; its version is its label.
    expect(s.json<{ spec: { execution: string; versionLabel: string } }>(['workflows', 'show', 'ship']).spec).toMatchObject({ execution: 'sequential', versionLabel: '3' });
    const inspect = s.json<{ status: string; finishedAt: string; steps: Array<{ stepId: string; status: string; exitCode: number | null }> }>(['workflows', 'inspect', 'wfrun_2a3256ac51c0']);
    expect(inspect.status).toBe('failed');
    expect(inspect.finishedAt).toBe('2026-12-01T14:01:20.287Z');
    expect(inspect.steps.map((x) => [x.stepId, x.status, x.exitCode])).toEqual(pred.steps.map((x) => [x.step_id, x.status, x.exit_code]));

    const stats = s.json<{ loops: Array<{ name: string; runs: number; failed: number }> }>(['stats']);
    expect(stats.loops.find((l) => l.name === 'sync')).toMatchObject({ runs: 1, failed: 1 });

    // Marked as imported in the log; replay shows it and never executes anything.
    const events = s.json<Array<{ type: string; data: { importedFrom?: { tool: string; id: string } } }>>(['events', 'run_afad3f283bfd']);
    expect(events).toEqual([expect.objectContaining({ type: 'run.imported', data: expect.objectContaining({ importedFrom: expect.objectContaining({ id: 'afad3f283bfd' }) }) })]);
    for (const id of ['run_6a2fc9c3c8a1', 'run_afad3f283bfd', 'wfrun_2a3256ac51c0']) {
      const replay = s.run(['replay', id]);
      expect(replay.code, replay.stdout + replay.stderr).toBe(0);
    }
    expect(s.run(['projections', 'verify']).code).toBe(0);
    const verify = s.run(['verify']);
    expect(verify.code, verify.stdout).toBe(0);
    expectDataDirInvariants(s.dataDir);
  });

  it('the real daemon runs the imported loops: the dynamic loop the predecessor was due to run fires at once, on its cadence after', async () => {
    // `tick` (dynamic: /bin/true a minute after each finish) was due 2026-12-01T14:02:20Z, long past.
    const daemon = s.start(['daemon', 'run']);
    onTestFinished(() => {
      if (daemon.child.exitCode === null) daemon.child.kill('SIGKILL');
    });
    await daemon.waitForOutput(/daemon started/);
    await waitFor(() => s.json<Array<{ loopName: string; status: string }>>(['runs', 'tick']).some((r) => r.status === 'succeeded'), 30_000, 'a run of tick');
    daemon.child.kill('SIGTERM');
    expect((await daemon.exited).code).toBe(0);
    const tick = s.json<Array<{ trigger: string; status: string; exitCode: number }>>(['runs', 'tick']);
    expect(tick).toEqual([expect.objectContaining({ trigger: 'schedule', status: 'succeeded', exitCode: 0 })]);
    // Its next run is a minute after that one finished (fixed-delay), as in the predecessor.
    const loop = s.json<{ nextRunAt: string; lastRun: { finishedAt: string } | null }>(['show', 'tick']);
    expect(Date.parse(loop.nextRunAt)).toBeGreaterThan(Date.now());
    expectDataDirInvariants(s.dataDir);
  });

  it('a second import changes nothing and says so', () => {
    const events = s.eventCount();
    const r = s.run(['import', 'hasna-loops', '--db', db, '--with-history']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/nothing to import: all 10 records were imported before/);
    expect(s.eventCount()).toBe(events);
  });
});

describe('loops import hasna-loops: what is refused', () => {
  const sb = sandbox();

  it('while the predecessor daemon holds its lease: exit 2, nothing written', () => {
    const s = sb;
    const db = predecessorDatabase(tempDir('loops-import-'));
    const w = new Database(db);
    const at = new Date().toISOString();
    w.prepare('INSERT INTO daemon_lease (id, pid, hostname, heartbeat_at, expires_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)').run(
      'lease1',
      process.pid,
      hostname(),
      at,
      new Date(Date.now() + 600_000).toISOString(),
      at,
      at,
    );
    w.close();
    const r = s.run(['import', 'hasna-loops', '--db', db]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/the @hasna\/loops daemon \(pid \d+ on .*\) holds its lease until .*; stop it first/);
    expect(s.eventCount()).toBe(0);
  });

  it('a name taken here: that loop is not imported (exit 1, the rest is); --prefix brings it across under a new name', () => {
    const s = sb;
    const db = predecessorDatabase(tempDir('loops-import-'));
    expect(s.run(['create', 'command', 'report', '--cmd', 'true', '--manual']).code).toBe(0);
    const r = s.run(['import', 'hasna-loops', '--db', db]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/report\s+310a5c22ffcc\s+loop_310a5c22ffcc\s+not imported\s+a loop named report already exists here \(loop_\w+\): rename it, or import with --prefix/);
    expect(r.stdout).toMatch(/imported 5 loops, 1 workflow; 1 not imported/);
    // The existing loop is untouched.
    expect(sb.json<{ target: { command: string } }>(['show', 'report']).target.command).toBe('true');
    const again = s.run(['import', 'hasna-loops', '--db', db, '--prefix', 'old-']);
    // Loops already imported keep their names; the refused one comes across prefixed.
    expect(again.stdout).toMatch(/old-report\s+310a5c22ffcc\s+loop_310a5c22ffcc\s+imported/);
    expect(s.json<{ id: string }>(['show', 'old-report']).id).toBe('loop_310a5c22ffcc');
  });

  it('not a predecessor database, or a missing one: exit 2 with what to pass', () => {
    const missing = sb.run(['import', 'hasna-loops', '--db', '/nonexistent/loops.db']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--db: \/nonexistent\/loops.db does not exist/);
    const own = sb.run(['import', 'hasna-loops', '--db', join(sb.dataDir, 'loops.db')]);
    expect(own.code).toBe(2);
    expect(own.stderr).toMatch(/is not a @hasna\/loops database: it is a loops database/);
  });

  it('LOOPS_DATA_DIR pointing at the predecessor data directory: loops refuses it and leaves the file as it was', () => {
    const dir = tempDir('loops-pred-');
    predecessorDatabase(dir);
    const digest = sha(join(dir, 'loops.db'));
    const r = sb.run(['list'], { LOOPS_DATA_DIR: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/is a database of @hasna\/loops \(the predecessor\), not of loops.*loops import hasna-loops --db/);
    expect(sha(join(dir, 'loops.db'))).toBe(digest);
  });
});
