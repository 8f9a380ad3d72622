/**
 * `loops import hasna-loops` in process, on the predecessor's own database (the shared fixture,
 * rebuilt from its SQL text) with rows added in its schema: what the importer makes of what the predecessor kept —
 * a secret-named env value (not stored, masked in imported output), a run still `running` there
 * (abandoned), an overlap skip (no run), two loops of one name (renamed), and a slot the
 * predecessor was due to fire while neither tool ran (decided by the catch-up policy on the first
 * pass, once). Each ends with the log checks every integration test runs.
 */
import Database from 'better-sqlite3';
import { describe, expect, it, onTestFinished } from 'vitest';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { tick } from '../../src/runtime/daemon/pass.js';
import { importHasnaLoops } from '../../src/runtime/admin/import-hasna.js';
import { findLoop, listRuns } from '../../src/runtime/queries/loops.js';
import { expectLogConsistent } from '../helpers/invariants.js';
import { secretHolders } from '../helpers/secrets.js';
import { predecessorDatabase } from '../helpers/predecessor.js';
import { tempDir, useRuntime } from '../helpers/tmp.js';

const SECRET = 'tok-very-secret-9f8e7d6c';

/** A copy of the predecessor's database, with `mutate` applied in its own schema. */
function predecessorDb(mutate: (db: Database.Database) => void = () => {}): string {
  const file = predecessorDatabase(tempDir('loops-pred-'));
  const db = new Database(file);
  mutate(db);
  db.close();
  return file;
}

function addLoop(db: Database.Database, row: { id: string; name: string; target: object; schedule?: object; next?: string | null; status?: string }) {
  const now = '2026-12-01T14:00:00.000Z';
  db.prepare(
    `INSERT INTO loops (id, name, description, status, schedule_json, target_json, next_run_at, retry_scheduled_for, catch_up, catch_up_limit,
       overlap, max_attempts, retry_delay_ms, lease_ms, expires_at, created_at, updated_at)
     VALUES (?, ?, NULL, ?, ?, ?, ?, NULL, 'latest', 50, 'skip', 1, 60000, 1800000, NULL, ?, ?)`,
  ).run(row.id, row.name, row.status ?? 'active', JSON.stringify(row.schedule ?? { type: 'interval', everyMs: 3_600_000, anchor: 'fixed_rate' }), JSON.stringify(row.target), row.next ?? null, now, now);
}

function addRun(db: Database.Database, row: { id: string; loopId: string; loopName: string; status: string; scheduledFor: string; stdout?: string; exit?: number | null }) {
  db.prepare(
    `INSERT INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status, started_at, finished_at, claimed_by, lease_expires_at, pid,
       exit_code, duration_ms, stdout, stderr, error, created_at, updated_at)
     VALUES (?, ?, ?, ?, 1, ?, ?, ?, 'host:1:x', NULL, 999, ?, 10, ?, '', NULL, ?, ?)`,
  ).run(row.id, row.loopId, row.loopName, row.scheduledFor, row.status, row.scheduledFor, row.status === 'running' ? null : row.scheduledFor, row.exit ?? null, row.stdout ?? '', row.scheduledFor, row.scheduledFor);
}

describe('import hasna-loops (in process)', () => {
  it('a secret-named env value is not stored: it becomes a secret-env name, and imported output has it masked', async () => {
    const file = predecessorDb((db) => {
      addLoop(db, { id: 'aaaa00000001', name: 'deploy', target: { type: 'command', command: 'deploy.sh', shell: true, env: { API_TOKEN: SECRET, REGION: 'eu-west-1' } }, next: '2026-12-01T15:00:00.000Z' });
      addRun(db, { id: 'bbbb00000001', loopId: 'aaaa00000001', loopName: 'deploy', status: 'failed', scheduledFor: '2026-12-01T14:00:00.000Z', stdout: `using ${SECRET}\n`, exit: 1 });
    });
    const runtime = await useRuntime({ clock: new SimulatedClock(Date.parse('2026-12-01T14:30:00.000Z')) });
    onTestFinished(() => expectLogConsistent(runtime));
    const report = await importHasnaLoops(runtime, { db: file, withHistory: true });
    const row = report.rows.find((r) => r.sourceId === 'aaaa00000001')!;
    expect(row.outcome).toBe('imported');
    expect(row.notes.join('; ')).toMatch(/API_TOKEN: secret value not stored; the runner's environment must provide it \(--secret-env\)/);
    const loop = findLoop(runtime.db, 'deploy');
    expect(loop.target).toMatchObject({ kind: 'command', env: { REGION: 'eu-west-1' }, secretEnv: ['API_TOKEN'] });
    const run = listRuns(runtime.db, { loopId: loop.id })[0]!;
    expect(run.stdout).toBe('using ***\n');
    expect(secretHolders(runtime.dataDir, [SECRET])).toEqual([]);
  });

  it("accounts and isolation: a command's { profile, tool } account comes across; an agent under the predecessor's safe (its default) keeps the login (loops' login mode)", async () => {
    const file = predecessorDb((db) => {
      addLoop(db, { id: 'eeee00000001', name: 'gh-sync', target: { type: 'command', command: 'gh repo sync', shell: true, account: { profile: 'work', tool: 'gh' } } });
      addLoop(db, { id: 'eeee00000002', name: 'review', target: { type: 'agent', provider: 'claude', prompt: 'review', account: { profile: 'work' } } });
    });
    const runtime = await useRuntime({ clock: new SimulatedClock(Date.parse('2026-12-01T14:30:00.000Z')) });
    onTestFinished(() => expectLogConsistent(runtime));
    await importHasnaLoops(runtime, { db: file });
    expect(findLoop(runtime.db, 'gh-sync').target).toMatchObject({ kind: 'command', account: 'work', accountTool: 'gh' });
    expect(findLoop(runtime.db, 'review').target).toMatchObject({ kind: 'agent', provider: 'claude', account: 'work', configIsolation: 'login' });
    expect(findLoop(runtime.db, 'fixer').target).toMatchObject({ kind: 'agent', configIsolation: 'none' });
  });

  it('a run still running there is abandoned here; an overlap skip is no run; two loops of one name: the second is renamed', async () => {
    const file = predecessorDb((db) => {
      addLoop(db, { id: 'cccc00000001', name: 'twin', target: { type: 'command', command: 'echo a', shell: true } });
      addLoop(db, { id: 'cccc00000002', name: 'twin', target: { type: 'command', command: 'echo b', shell: true } });
      addRun(db, { id: 'dddd00000001', loopId: 'cccc00000001', loopName: 'twin', status: 'running', scheduledFor: '2026-12-01T13:00:00.000Z' });
      addRun(db, { id: 'dddd00000002', loopId: 'cccc00000001', loopName: 'twin', status: 'skipped', scheduledFor: '2026-12-01T12:00:00.000Z' });
    });
    const runtime = await useRuntime({ clock: new SimulatedClock(Date.parse('2026-12-01T14:30:00.000Z')) });
    onTestFinished(() => expectLogConsistent(runtime));
    const report = await importHasnaLoops(runtime, { db: file, withHistory: true });
    const twins = report.rows.filter((r) => r.kind === 'loop' && r.sourceId.startsWith('cccc'));
    expect(twins.map((r) => [r.name, r.outcome])).toEqual([
      ['twin', 'imported'],
      ['twin-cccc00000002', 'imported'],
    ]);
    expect(twins[1]!.notes.join('; ')).toMatch(/renamed from twin: 2 loops there share that name \(the oldest keeps it\)/);
    const runs = report.rows.filter((r) => r.kind === 'run' && r.sourceId.startsWith('dddd'));
    expect(runs.map((r) => r.sourceId)).toEqual(['dddd00000001']);
    const run = listRuns(runtime.db, {}).find((r) => r.id === 'run_dddd00000001')!;
    expect(run).toMatchObject({ status: 'abandoned', error: expect.stringMatching(/unfinished in @hasna\/loops/) });
    expect(report.rows.find((r) => r.sourceId === 'cccc00000001')!.notes.join('; ')).toMatch(/1 skipped slot there not imported/);
  });

  it('a slot the predecessor was due to fire while neither ran is decided by the catch-up policy on the first pass: once, late', async () => {
    // `report` (cron 30 8 * * 1, catch-up latest) was next due 2026-12-07T08:30Z; loops imports it a day later.
    const file = predecessorDb();
    const clock = new SimulatedClock(Date.parse('2026-12-08T09:00:00.000Z'));
    const runtime = await useRuntime({ clock });
    onTestFinished(() => expectLogConsistent(runtime));
    await importHasnaLoops(runtime, { db: file });
    const loop = findLoop(runtime.db, 'report');
    expect(loop.nextRunAt).toBe('2026-12-07T08:30:00.000Z');
    const pass = await tick(runtime);
    const fired = pass.runs.filter((r) => r.loopName === 'report');
    expect(fired.map((r) => [r.scheduledFor, r.status])).toEqual([['2026-12-07T08:30:00.000Z', 'succeeded']]);
    expect(findLoop(runtime.db, 'report').nextRunAt).toBe('2026-12-14T08:30:00.000Z');
    // The next pass has nothing more for it.
    expect((await tick(runtime)).runs.filter((r) => r.loopName === 'report')).toEqual([]);
  });
});
