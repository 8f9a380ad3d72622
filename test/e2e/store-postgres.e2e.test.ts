/**
 * The built binary on a PostgreSQL store (issue 15), as a fleet's user runs it: two "hosts" (each
 * its own data directory and LOOPS_HOST_ID) on one schema. A loop created on one host is listed,
 * run and explained on the other; the data directory remembers its store (store.json, no
 * password), so commands there need no LOOPS_STORE; two daemons run the loop's slots, each slot
 * once, and `daemon status --fleet` lists both; a bad LOOPS_STORE is one clear line and exit 2.
 *
 * The daemons are other processes: their progress is observed by bounded polling of what they
 * leave (`runs --json`), never by sleeping. Each test uses a schema of its own, dropped at the end.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_PG_URL, PG_URL, dropSchemas, pgReachable, testSchemaName } from '../helpers/pg.js';
import { requirePrerequisite } from '../helpers/prerequisite.js';
import { waitFor } from '../helpers/wait.js';
import { useSandboxes } from './cli-helpers.js';

const pgVerdict = await pgReachable();
const havePg = requirePrerequisite(`PostgreSQL for the PostgreSQL store's tests (LOOPS_TEST_PG_URL, default ${DEFAULT_PG_URL})`, () => pgVerdict);
const sandbox = useSandboxes();
const schemas: string[] = [];
afterAll(async () => {
  if (havePg) await dropSchemas(schemas);
});

function storeUrl(): string {
  const schema = testSchemaName();
  schemas.push(schema);
  return `${PG_URL}?schema=${schema}`;
}

interface Run {
  id: string;
  slot: string;
  attempt: number;
  status: string;
}

describe.skipIf(!havePg)('loops on a PostgreSQL store (LOOPS_STORE)', () => {
  it('two hosts share loops, runs and history; the data directory remembers its store, never a password', () => {
    const store = storeUrl();
    const a = sandbox();
    const b = sandbox();
    const onA = { LOOPS_STORE: store, LOOPS_HOST_ID: 'host-a' };
    expect(a.run(['create', 'command', 'hello', '--manual', '--cmd', 'echo hi from $LOOPS_RUN_ID'], onA).code).toBe(0);
    const run = a.json(['run-now', 'hello'], onA) as { id: string; status: string };
    expect(run.status).toBe('succeeded');
    // Host B, with no LOOPS_STORE in its environment once it has used the store.
    const listed = b.json(['list'], { LOOPS_STORE: store, LOOPS_HOST_ID: 'host-b' }) as Array<{ name: string }>;
    expect(listed.map((l) => l.name)).toEqual(['hello']);
    const remembered = JSON.parse(readFileSync(join(b.dataDir, 'store.json'), 'utf8')) as { store: string };
    expect(remembered.store).toBe(store);
    const runs = b.json(['runs'], { LOOPS_HOST_ID: 'host-b' }) as Run[];
    expect(runs.map((r) => [r.id, r.status])).toEqual([[run.id, 'succeeded']]);
    expect(b.run(['show', 'hello'], { LOOPS_HOST_ID: 'host-b' }).stdout).toMatch(/hello/);
    // Its output files are on host A; host B shows the tail the log keeps, and says where the files are.
    const logs = b.run(['logs', run.id], { LOOPS_HOST_ID: 'host-b' });
    expect(logs.code).toBe(0);
    expect(logs.stdout).toBe(`hi from ${run.id}\n`);
    expect(logs.stderr).toMatch(new RegExp(`run ${run.id} ran on host host-a: its output files are in that host's data directory \\(runs/${run.id}/\\)`));
    expect(a.run(['logs', run.id], { LOOPS_HOST_ID: 'host-a' }).stderr).toBe('');
    // The replica is the data directory's; its own SQLite log was never made.
    expect(existsSync(join(b.dataDir, `pg-${store.split('schema=')[1]}.db`))).toBe(true);
    expect(existsSync(join(b.dataDir, 'loops.db'))).toBe(false);
    // LOOPS_STORE=sqlite: this data directory's own (empty) database, for one command.
    expect(b.json(['list'], { LOOPS_STORE: 'sqlite' })).toEqual([]);
    // A password given in the URL is used, and written nowhere.
    const withPassword = store.replace('postgres@', 'postgres:s3cret-pw@');
    expect(a.run(['list'], { LOOPS_STORE: withPassword }).code).toBe(0);
    expect(readFileSync(join(a.dataDir, 'store.json'), 'utf8')).not.toContain('s3cret-pw');
  });

  it('two daemons on one store run each slot once; daemon status --fleet lists both hosts', async () => {
    const store = storeUrl();
    const [a, b, cli] = [sandbox(), sandbox(), sandbox()];
    expect(cli.run(['create', 'command', 'tick', '--every', '1s', '--cmd', 'true'], { LOOPS_STORE: store }).code).toBe(0);
    for (const [s, host] of [[a, 'host-a'], [b, 'host-b']] as const) {
      const started = s.run(['daemon', 'start', '--store', store], { LOOPS_HOST_ID: host });
      expect(started.code, started.stderr).toBe(0);
    }
    try {
      await waitFor(() => (cli.json(['runs', '--limit', '100'], { LOOPS_STORE: store }) as Run[]).filter((r) => r.status === 'succeeded').length >= 6, 30_000, 'six runs of the loop');
      const fleet = cli.json(['daemon', 'status', '--fleet'], { LOOPS_STORE: store }) as { store: { kind: string; listening: boolean }; runners: Array<{ host: string; kind: string }> };
      expect(fleet.store).toMatchObject({ kind: 'postgres', listening: true });
      expect(fleet.runners.filter((r) => r.kind === 'daemon').map((r) => r.host)).toEqual(['host-a', 'host-b']);
    } finally {
      for (const s of [a, b]) s.run(['daemon', 'stop']);
    }
    const runs = cli.json(['runs', '--limit', '1000'], { LOOPS_STORE: store }) as Run[];
    const slots = runs.map((r) => `${r.slot}#${r.attempt}`);
    expect(new Set(slots).size).toBe(slots.length);
    expect(runs.filter((r) => !['succeeded', 'cancelled'].includes(r.status))).toEqual([]);
    const verified = cli.run(['verify'], { LOOPS_STORE: store });
    expect(verified.code, verified.stdout + verified.stderr).toBe(0);
    // PostgreSQL's tables and this host's replica, each against a rebuild.
    const projections = cli.json(['projections', 'verify'], { LOOPS_STORE: store }) as { ok: boolean; postgres: { ok: boolean; events: number }; replica: { ok: boolean; events: number } };
    expect(projections).toMatchObject({ ok: true, postgres: { ok: true }, replica: { ok: true } });
    expect(projections.replica.events).toBe(projections.postgres.events);
  }, 90_000);

  it('--runs-on gpu: only the daemon started with --labels gpu runs the loop; why and status --fleet say so', async () => {
    const store = storeUrl();
    const [plain, gpu, cli] = [sandbox(), sandbox(), sandbox()];
    const onCli = { LOOPS_STORE: store, LOOPS_HOST_ID: 'laptop' };
    expect(cli.run(['create', 'command', 'train', '--every', '1s', '--cmd', 'echo $LOOPS_RUN_ID', '--runs-on', 'gpu'], onCli).code).toBe(0);
    expect(cli.run(['create', 'command', 'any', '--every', '1s', '--cmd', 'true'], onCli).code).toBe(0);
    expect(cli.run(['show', 'train'], onCli).stdout).toMatch(/runs on {5}runners labelled gpu — no daemon with them has started yet/);
    expect(plain.run(['daemon', 'start', '--store', store], { LOOPS_HOST_ID: 'host-plain' }).code).toBe(0);
    try {
      // Only the plain host runs: train's slots are decided (by it) and wait for a gpu runner.
      await waitFor(() => (cli.json(['runs', 'any', '--limit', '100'], onCli) as Run[]).length >= 3, 30_000, 'three runs of the unpinned loop');
      expect(cli.json(['runs', 'train'], onCli)).toEqual([]);
      const waiting = cli.json(['daemon', 'status', '--fleet'], onCli) as { noRunner: Array<{ runsOn: string[]; loops: string[] }> };
      expect(waiting.noRunner).toMatchObject([{ runsOn: ['gpu'], loops: ['train'] }]);
      expect(cli.run(['why', 'train'], onCli).stdout).toMatch(/it waits for a runner labelled gpu/);
      const started = gpu.run(['daemon', 'start', '--store', store, '--labels', 'gpu,linux'], { LOOPS_HOST_ID: 'host-gpu' });
      expect(started.code, started.stderr).toBe(0);
      await waitFor(() => (cli.json(['runs', 'train', '--limit', '100'], onCli) as Run[]).filter((r) => r.status === 'succeeded').length >= 3, 30_000, 'three runs of train');
      const fleet = cli.json(['daemon', 'status', '--fleet'], onCli) as { runners: Array<{ host: string; kind: string; labels: string[]; clockOffsetMs: number | null }>; noRunner: unknown[] };
      expect(fleet.runners.filter((r) => r.kind === 'daemon').map((r) => [r.host, r.labels])).toEqual([
        ['host-gpu', ['gpu', 'linux']],
        ['host-plain', []],
      ]);
      // Each daemon measured its clock against the server's as it started (one machine here: close).
      for (const r of fleet.runners.filter((d) => d.kind === 'daemon')) expect(Math.abs(r.clockOffsetMs!)).toBeLessThan(1000);
      expect(readFileSync(join(gpu.dataDir, 'daemon.log'), 'utf8')).toMatch(/this host's clock is \d+ ms (behind|ahead of) the database server's \(±\d+ ms\)/);
    } finally {
      for (const s of [plain, gpu]) s.run(['daemon', 'stop']);
    }
    const runs = cli.json(['runs', 'train', '--limit', '1000'], onCli) as Array<Run & { runnerId: string }>;
    expect(runs.length).toBeGreaterThanOrEqual(3);
    expect(runs.filter((r) => !r.runnerId.startsWith('host-gpu:'))).toEqual([]);
    // No daemon live: exit 1, and both hosts listed as stopped.
    const after = cli.run(['daemon', 'status', '--fleet', '--json'], onCli);
    expect(after.code).toBe(1);
    const down = JSON.parse(after.stdout) as { down: Array<{ host: string; status: string }> };
    expect(down.down.map((h) => [h.host, h.status])).toEqual([
      ['host-gpu', 'stopped'],
      ['host-plain', 'stopped'],
    ]);
    expect(cli.run(['verify'], onCli).code).toBe(0);
    // Rebuilt on a fleet: PostgreSQL's tables from its log, and this host's replica.
    const rebuilt = cli.json(['projections', 'rebuild'], onCli) as { postgres: { events: number; projections: string[] }; replica: { events: number } };
    expect(rebuilt.postgres.projections).toContain('hosts');
    expect(rebuilt.replica.events).toBe(rebuilt.postgres.events);
    expect(cli.json(['projections', 'verify'], onCli)).toMatchObject({ ok: true, postgres: { ok: true }, replica: { ok: true } });
    // A bad label is one clear line, before anything starts.
    const bad = plain.run(['daemon', 'start', '--labels', 'gpu box'], { LOOPS_STORE: store, LOOPS_HOST_ID: 'host-plain' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--labels: invalid label "gpu box"/);
  }, 120_000);

  it('a LOOPS_STORE that is not a store is one clear line and exit 2 — with the password hidden', () => {
    const s = sandbox();
    const r = s.run(['list'], { LOOPS_STORE: 'mysql://root:hunter2@db/loops' });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/LOOPS_STORE: "mysql:\/\/root:\*\*\*@db\/loops" is not a store loops knows/);
    expect(r.stderr).not.toContain('hunter2');
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});
