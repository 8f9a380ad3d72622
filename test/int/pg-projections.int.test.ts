/**
 * The project's projections on PostgreSQL (issue 15): `openPgStore({ projections })` creates their
 * tables in the store's schema, runs them inline in every append, rebuilds the ones whose version
 * moved when it opens, and verifies them against a rebuild from the log — with the same SQL as on
 * SQLite (src/projections; what PostgreSQL needs besides: src/events/pg/dialect.ts), so
 *  - every golden log (test/fixtures/golden, test/int/golden.int.test.ts), appended through the
 *    PostgreSQL store, gives exactly the projection rows recorded from SQLite: same rows, same
 *    values, same JS types;
 *  - a version bump rebuilds on open (the bumped projections only) and gives the same rows;
 *  - verify passes on good tables and names each kind of damage;
 *  - the `queued` guard works with the real run_queue table;
 *  - two stores appending to one schema concurrently leave tables equal to a rebuild.
 *
 * PostgreSQL comes from LOOPS_TEST_PG_URL (default postgres://postgres@127.0.0.1:5432/test). Not
 * answering: these tests are skipped, loudly, or fail under CI=true (test/helpers/prerequisite.ts).
 * Every test uses a schema of its own (loops_test_<random>), dropped when it ends.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { upcast } from '../../src/events/catalog.js';
import { openDatabase } from '../../src/events/db.js';
import { ClaimLostError, ConcurrencyConflictError } from '../../src/events/errors.js';
import { openPgStore, pgDdl, type PgProjection, type PgStore, type PgStoreOptions } from '../../src/events/pg/index.js';
import { SqliteEventLog } from '../../src/events/sqlite-log.js';
import type { AppendOptions, NewEvent } from '../../src/events/types.js';
import { inlineHandler, projections } from '../../src/projections/registry.js';
import { accountEv, at, loopEv, retentionEv, runEv, slotEv, wfSpec, wfStep, wfrunEv, workflowEv } from '../helpers/events.js';
import { goldenScenarios, loadGolden, recordedTables, type Golden } from '../helpers/golden.js';
import { DEFAULT_PG_URL, PG_URL, adminClient, dropSchemas, pgReachable, tableRows, testSchemaName } from '../helpers/pg.js';
import { requirePrerequisite } from '../helpers/prerequisite.js';

const pgVerdict = await pgReachable();
const havePg = requirePrerequisite(`PostgreSQL for the PostgreSQL projections' tests (LOOPS_TEST_PG_URL, default ${DEFAULT_PG_URL})`, () => pgVerdict);

const schemas: string[] = [];
afterAll(async () => {
  if (havePg) await dropSchemas(schemas);
});

type Row = Record<string, unknown>;

/** A schema of the test's own, stores on it (with the project's projections unless told otherwise), and a connection of the test's own. */
async function pgSchema() {
  const schema = testSchemaName();
  schemas.push(schema);
  const stores: PgStore[] = [];
  const admin = await adminClient();
  onTestFinished(async () => {
    for (const store of stores) await store.end().catch(() => {});
    await admin.end();
    await dropSchemas([schema]);
  });
  return {
    schema,
    admin,
    open: async (more: Partial<PgStoreOptions> = {}) => {
      const store = await openPgStore({ url: PG_URL, schema, projections, ...more });
      stores.push(store);
      return store;
    },
    /** A projection table's rows in its orderBy (text by bytes, as SQLite). */
    rows: (table: string) => tableRows(admin, schema, table, orderByOf(table)),
    /** Every projection table's rows, by table. */
    async all(): Promise<Record<string, Row[]>> {
      const out: Record<string, Row[]> = {};
      for (const p of projections) for (const t of p.tables) out[t.name] = await tableRows(admin, schema, t.name, t.orderBy);
      return out;
    },
    versions: async () =>
      Object.fromEntries((await admin.query<{ name: string; version: number }>(`SELECT name, version FROM "${schema}".projections ORDER BY name`)).rows.map((r) => [r.name, r.version])),
  };
}

const orderByOf = (table: string) => projections.flatMap((p) => p.tables).find((t) => t.name === table)!.orderBy;

// ── golden logs ─────────────────────────────────────────────────────────────

const scenarios = goldenScenarios();

/**
 * The golden log, appended through the store: each run of consecutive events of one stream is one
 * append, so every event lands at its recorded position and version, and the inline projections
 * see each event as a rebuild on SQLite does (its payload upcast to the current shape: the store
 * stores the current schema version). Two things of the recorded log cannot be appended and are
 * put in place by hand: a gap in positions (archived events, deleted — the log head is moved past
 * it) and a stream that begins at its tombstone (its `streams` row at the version before it).
 */
async function appendGolden(store: PgStore, admin: Awaited<ReturnType<typeof adminClient>>, schema: string, golden: Golden): Promise<void> {
  const streams = new Map(golden.streams.map((s) => [s.stream_id, s]));
  const versions = new Map<string, number>();
  let head = 0;
  const events = golden.events;
  for (let i = 0; i < events.length; ) {
    let j = i + 1;
    while (j < events.length && events[j]!.stream_id === events[i]!.stream_id && events[j]!.position === events[j - 1]!.position + 1) j++;
    const group = events.slice(i, j);
    const first = group[0]!;
    const stream = streams.get(first.stream_id)!;
    if (first.position > head + 1) await admin.query(`UPDATE "${schema}".log_head SET position = $1`, [first.position - 1]);
    let expected = versions.get(first.stream_id) ?? 0;
    if (expected === 0 && first.version > 1) {
      expected = first.version - 1;
      await admin.query(
        `INSERT INTO "${schema}".streams (stream_id, kind, version, machine_id, machine_version, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6)`,
        [stream.stream_id, stream.kind, expected, stream.machine_id, stream.machine_version, stream.created_at],
      );
    }
    const appended: NewEvent[] = group.map((e) => ({ type: e.type, data: upcast(e.type, e.v, e.data), meta: e.meta, at: e.at, state: e.state }));
    const result = await store.events.append(first.stream_id, appended, {
      expectedVersion: expected,
      kind: stream.kind,
      ...(stream.machine_id !== null ? { machine: { id: stream.machine_id, version: stream.machine_version! } } : {}),
    });
    expect(result.events.map((e) => [e.position, e.version])).toEqual(group.map((e) => [e.position, e.version]));
    versions.set(first.stream_id, result.version);
    head = result.position;
    i = j;
  }
}

/** The recorded rows of every table of a projection whose version is the recorded one, against the schema's. */
async function expectGoldenRows(name: string, golden: Golden, rows: (table: string) => Promise<Row[]>, how: string): Promise<void> {
  const tables = recordedTables(golden);
  for (const { table, recorded } of tables) {
    expect(recorded.orderBy).toBe(table.orderBy);
    expect(await rows(table.name), `golden ${name}: table ${table.name} on PostgreSQL (${how}) differs from the rows recorded on SQLite`).toStrictEqual(recorded.rows);
  }
  expect(tables.length, `golden ${name}: no table compared`).toBeGreaterThan(0);
}

describe.skipIf(!havePg)('golden logs on PostgreSQL', () => {
  it.each(scenarios)('%s: appended with the projections inline, then rebuilt on a version bump: the rows recorded on SQLite, and verify passes', async (name) => {
    const golden = loadGolden(name);
    const db = await pgSchema();
    const store = await db.open();
    await appendGolden(store, db.admin, db.schema, golden);
    await expectGoldenRows(name, golden, db.rows, 'appended, inline');
    expect(await store.verifyProjections()).toMatchObject({ ok: true, events: golden.events.length });
    await store.end();

    // Every table emptied by hand, then every projection's version moved: the open rebuilds them all from the log.
    for (const p of projections) for (const t of p.tables) await db.admin.query(`DELETE FROM "${db.schema}".${t.name}`);
    const bumped: PgProjection[] = projections.map((p) => ({ ...p, version: p.version + 1 }));
    const reopened = await db.open({ projections: bumped });
    await expectGoldenRows(name, golden, db.rows, 'rebuilt at open');
    expect(await db.versions()).toEqual(Object.fromEntries(bumped.map((p) => [p.name, p.version])));
    expect(await reopened.verifyProjections()).toMatchObject({ ok: true });
  });
});

// ── a small log of the test's own ───────────────────────────────────────────

/** A loop whose slot fired, its run claimed through the `queued` guard, spawned and exited; a second loop paused. */
async function smallLog(store: PgStore): Promise<void> {
  const ev = store.events;
  await ev.append('loop:loop_1', [loopEv.created(), slotEv.fired({ runId: 'run_1' })], { expectedVersion: 0, kind: 'loop' });
  await ev.append('run:run_1', [runEv.claimed({ slot: at(60_000), trigger: 'schedule' })], { expectedVersion: 0, kind: 'run', guards: [{ kind: 'queued', runId: 'run_1' }] });
  await ev.append(
    'run:run_1',
    [
      { ...runEv.spawnRequested({}, at(61_000)), state: 'spawning' },
      { ...runEv.spawned({}, at(61_010)), state: 'running' },
      { ...runEv.exited({ durationMs: 2000 }, at(63_000)), state: 'succeeded' },
    ],
    { expectedVersion: 1 },
  );
  await ev.append('loop:loop_2', [loopEv.created({ loopId: 'loop_2', name: 'second' }), { ...loopEv.paused('by hand'), state: 'paused' }], { expectedVersion: 0, kind: 'loop' });
}


// ── every statement, on both ────────────────────────────────────────────────

/**
 * The same appends to a SQLite store and a PostgreSQL store, both with the project's projections
 * inline; each append's outcome must be the same on both. Versions are tracked per stream.
 */
async function twoStores() {
  const dir = mkdtempSync(join(tmpdir(), 'loops-pg-projections-'));
  const db = openDatabase(join(dir, 'loops.db'));
  for (const projection of projections) for (const ddl of projection.ddl) db.exec(ddl);
  const lite = new SqliteEventLog(db, { handlers: [inlineHandler()] });
  onTestFinished(async () => {
    await lite.settled();
    lite.close();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const pgdb = await pgSchema();
  const store = await pgdb.open();
  const versions = new Map<string, number>();
  return {
    db,
    pg: pgdb,
    store,
    version: (streamId: string) => versions.get(streamId) ?? 0,
    async append(streamId: string, events: NewEvent[], options: Partial<AppendOptions> = {}): Promise<void> {
      const full: AppendOptions = { expectedVersion: versions.get(streamId) ?? 0, kind: streamId.split(':')[0]!, ...options };
      const [a, b] = await Promise.allSettled([lite.append(streamId, events, full), store.events.append(streamId, events, full)]);
      if (a.status === 'rejected' || b.status === 'rejected') {
        throw new Error(`${streamId} ${events.map((e) => e.type).join(', ')}: sqlite ${a.status === 'rejected' ? String(a.reason) : 'ok'}, postgres ${b.status === 'rejected' ? String(b.reason) : 'ok'}`);
      }
      expect(b.value.position).toBe(a.value.position);
      versions.set(streamId, a.value.version);
    },
    /** Every projection table: SQLite's rows and PostgreSQL's, in orderBy order. */
    async tables(): Promise<{ sqlite: Record<string, Row[]>; postgres: Record<string, Row[]> }> {
      const sqlite: Record<string, Row[]> = {};
      for (const p of projections) for (const t of p.tables) sqlite[t.name] = db.prepare(`SELECT * FROM ${t.name} ORDER BY ${t.orderBy}`).all() as Row[];
      return { sqlite, postgres: await pgdb.all() };
    },
  };
}

const s = <T extends NewEvent>(event: T, state: string): T => ({ ...event, state });

describe.skipIf(!havePg)('the same events on SQLite and PostgreSQL', () => {
  it('every event type the projections handle gives the same rows in both (durations, failed-step lists, archived streams, imports, notices, accounts)', async () => {
    const both = await twoStores();
    const { append } = both;
    // Accounts: added, removed, the name reused.
    await append('account:acct_1', [accountEv.added()]);
    await append('account:acct_1', [accountEv.removed('gone')]);
    await append('account:acct_2', [accountEv.added({ accountId: 'acct_2' }, at(2000))]);

    // A loop through every slot decision and status change; another that expires.
    await append('loop:loop_1', [
      s(loopEv.created({ notify: { onFailure: 'echo failed', url: 'http://127.0.0.1:9/hook', on: ['failure'] } }), 'active'),
      s(slotEv.fired({ runId: 'run_1' }), 'active'),
      s(slotEv.skipped(), 'active'),
      s(slotEv.buffered({ runId: 'run_2', policy: 'buffer-one' }), 'active'),
      s(slotEv.coalesced(), 'active'),
      s(slotEv.missed(), 'active'),
      s(slotEv.retryScheduled({ runId: 'run_3' }), 'active'),
      s(slotEv.dropped({ runId: 'run_3', attempt: 2 }), 'active'),
      s(loopEv.rescheduled(), 'active'),
      s(loopEv.paused('a pause'), 'paused'),
      s(loopEv.resumed(at(900_000)), 'active'),
      s(loopEv.stopped('stop'), 'stopped'),
      s(loopEv.archived('old'), 'archived'),
      s(loopEv.removed('bye'), 'removed'),
    ]);
    await append('loop:loop_e', [
      s(loopEv.created({ loopId: 'loop_e', name: 'expiring' }), 'active'),
      s(slotEv.fired({ runId: 'run_9' }), 'active'),
      s(loopEv.expired(), 'expired'),
    ]);

    // Runs: a spawn failure (no start: no duration), a failed run adopted and reported, a cancel
    // before the spawn, a cancel that waits for the exit, an import, a workflow loop's run, an abandoned one.
    const claim = (runId: string, when = at(0)) => s(runEv.claimed({ runId, slot: `manual:${runId}` }, when), 'claimed');
    await append('run:run_1', [claim('run_1'), s(runEv.spawnFailed(), 'failed')]);
    await append('run:run_2', [
      claim('run_2'),
      s(runEv.spawnRequested({}, at(10)), 'spawning'),
      s(runEv.spawned({ pid: 31 }, at(20)), 'running'),
      s(runEv.adopted({ runnerId: 'host:2:daemon' }), 'running'),
      s(runEv.exited({ exitCode: 1, error: 'exited with code 1', stdout: 'naïve ☃\n', stdoutBytes: 12, durationMs: 2_999_999_999 }, at(1_800_000)), 'failed'),
      s(runEv.agentReported(), 'failed'),
    ]);
    await append('run:run_3', [claim('run_3'), s(runEv.cancelRequested('not now', at(7)), 'cancelled')]);
    await append('run:run_4', [claim('run_4'), s(runEv.spawnRequested({}, at(10)), 'spawning'), s(runEv.cancelRequested(null, at(400)), 'cancelling')]);
    await append('run:run_4', [s(runEv.exited({ exitCode: null, signal: 'SIGTERM', cancelled: true, durationMs: 444 }, at(455)), 'cancelled')]);
    await append('run:run_abc123', [s(runEv.imported(), 'failed')]);
    await append('run:run_6', [claim('run_6'), s(runEv.workflowStarted({}, at(1000)), 'running'), s(runEv.workflowEnded({ status: 'failed', error: 'a step failed' }, at(3_000_000_000)), 'failed')]);
    await append('run:run_7', [claim('run_7', at(100)), s(runEv.spawnRequested({}, at(123)), 'spawning'), s(runEv.abandoned('lost it', at(86_400_000 * 30 + 7)), 'abandoned')]);

    // Notices: a hook that ran, a URL delivered after a failed try, one given up.
    const requested = (noticeId: string, channel: 'command' | 'url') => ({
      type: 'notice.requested',
      at: at(5000),
      data: {
        noticeId,
        loopId: 'loop_1',
        loopName: 'backup',
        runId: 'run_2',
        runStatus: 'failed',
        channel,
        command: channel === 'command' ? 'echo failed' : null,
        env: null,
        url: channel === 'url' ? 'http://127.0.0.1:9/hook' : null,
        payload: channel === 'url' ? { run: 'run_2' } : null,
        attempts: 3,
        timeoutMs: 5000,
        retryDelayMs: 1000,
      },
      state: 'pending',
    });
    await append('notice:n1', [
      requested('n1', 'command'),
      s({ type: 'notice.hook_claimed', at: at(5100), data: { hookRunId: 'run_h1', replaces: null } }, 'pending'),
      s({ type: 'notice.hook_ended', at: at(5200), data: { hookRunId: 'run_h1', status: 'succeeded', error: null } }, 'ran'),
    ]);
    await append('notice:n2', [
      requested('n2', 'url'),
      s({ type: 'notice.attempt_failed', at: at(5100), data: { attempt: 1, error: 'ECONNREFUSED', httpStatus: null, retryAt: at(6100) } }, 'pending'),
      s({ type: 'notice.delivered', at: at(6200), data: { attempt: 2, httpStatus: 204 } }, 'delivered'),
    ]);
    await append('notice:n3', [requested('n3', 'url'), s({ type: 'notice.given_up', at: at(9000), data: { attempts: 3, error: 'HTTP 500' } }, 'given_up')]);

    // Workflows: created, updated, archived.
    await append('workflow:wf_1', [s(workflowEv.created(), 'active'), s(workflowEv.updated({ version: 2, spec: wfSpec({ description: 'v2' }) }), 'active')]);
    await append('workflow:wf_2', [s(workflowEv.created({ workflowId: 'wf_2', name: 'other' }), 'active'), s(workflowEv.archived('unused'), 'archived')]);

    // A recorded run whose two middle steps fail: "failed steps: b, c", in the spec's order.
    const started = (wfRunId: string, more: Parameters<typeof wfrunEv.started>[0] = {}, when = at(0)) =>
      s(wfrunEv.started({ wfRunId, idempotencyKey: `manual:${wfRunId}`, ...more }, when), 'running');
    await append('wfrun:wfrun_1', [
      started('wfrun_1'),
      s(wfrunEv.spawnRequested('a', 1, at(10)), 'running'),
      s(wfrunEv.spawned('a', 1, at(20)), 'running'),
      s(wfrunEv.exited('a', 1, at(1020)), 'running'),
      s(wfrunEv.spawnRequested('c', 1, at(1030)), 'running'),
      s(wfrunEv.spawnRequested('b', 1, at(1031)), 'running'),
      s(wfrunEv.exited('c', 1, at(2000), { exitCode: 2, error: 'exited with code 2' }), 'running'),
      s(wfrunEv.exited('b', 1, at(2100), { exitCode: 1, error: 'exited with code 1', agent: null }), 'running'),
      s(wfrunEv.skipped('d', 'needs b which failed', at(2100)), 'failed'),
    ]);
    // A derived run (from before decisions were events): a failed attempt with attempts left is
    // retrying, until the cancel stops it; its pending steps end skipped.
    const retrying = wfSpec({ steps: [wfStep('a', { retries: { attempts: 3, delayMs: 1000, backoff: 2, maxDelayMs: null } }), wfStep('b', { needs: ['a'] })] });
    await append('wfrun:wfrun_2', [
      started('wfrun_2', { decisions: 'derived', spec: retrying }),
      s(wfrunEv.spawnRequested('a', 1, at(10)), 'running'),
      s(wfrunEv.exited('a', 1, at(500), { exitCode: 1, error: 'exited with code 1' }), 'running'),
      s(wfrunEv.cancelRequested('enough', at(800)), 'cancelled'),
    ]);
    // A recorded run: an abandoned attempt (its duration from its start), a retry, a spawn failure, the workflow timeout.
    await append('wfrun:wfrun_3', [
      started('wfrun_3', { spec: retrying }, at(100)),
      s(wfrunEv.spawnRequested('a', 1, at(110)), 'running'),
      s(wfrunEv.spawned('a', 1, at(120)), 'running'),
      s(wfrunEv.abandoned('a', 1, at(3_000_000_111)), 'running'),
      s(wfrunEv.retryScheduled('a', 2, at(3_000_001_000), 'attempt 1 abandoned', at(3_000_000_111)), 'running'),
      s(wfrunEv.retryDue('a', 2, at(3_000_001_000)), 'running'),
      s(wfrunEv.spawnRequested('a', 2, at(3_000_001_010)), 'running'),
      s(wfrunEv.spawnFailed('a', 2, at(3_000_001_020)), 'running'),
      s(wfrunEv.timedOut(60_000, at(3_000_002_000)), 'timed_out'),
    ]);
    await append('wfrun:wfrun_abc123', [s(wfrunEv.imported({ status: 'failed', error: 'step c failed' }), 'failed')]);
    await append('wfrun:wfrun_5', [
      started('wfrun_5', { forkedFrom: { runId: 'wfrun_1', from: 'b', reason: 'again', how: 'fork' } }),
      s(wfrunEv.reused('a', { fromRunId: 'wfrun_1', outputs: { x: '1' } }), 'running'),
    ]);

    // Retention: outputs pruned, then a run and a workflow run archived live (their rows replaced by the tombstone's, slimmed).
    await append('retention:output', [
      s(retentionEv.runOutputPruned({ runId: 'run_2' }), 'keeping'),
      s(retentionEv.wfrunOutputPruned({ wfRunId: 'wfrun_1', loopRunId: 'run_6' }), 'keeping'),
    ]);
    const rowsOf = (table: string, key: string, id: string, slim: Row = {}) =>
      (both.db.prepare(`SELECT * FROM ${table} WHERE ${key} = ?`).all(id) as Row[]).map((r) => ({ ...r, ...slim })) as Array<Record<string, string | number | null>>;
    const tombstone = (streamId: string, machine: string, state: string, rows: Record<string, Array<Record<string, string | number | null>>>) => {
      const through = both.version(streamId);
      return retentionEv.archived({ fromVersion: 1, toVersion: through, events: through, machine: { id: machine, version: 1 }, state, rows }, at(3 * 86_400_000));
    };
    const runTomb = tombstone('run:run_2', 'loops.run', 'failed', { loop_runs: rowsOf('loop_runs', 'id', 'run_2', { stdout: '', stderr: '' }) });
    await append('run:run_2', [runTomb], { archivedThrough: runTomb.data.toVersion });
    const wfTomb = tombstone('wfrun:wfrun_1', 'loops.workflow-run', 'failed', {
      workflow_runs: rowsOf('workflow_runs', 'id', 'wfrun_1'),
      workflow_steps: rowsOf('workflow_steps', 'wfrun_id', 'wfrun_1', { stdout: '', stderr: '' }),
      workflow_step_attempts: rowsOf('workflow_step_attempts', 'wfrun_id', 'wfrun_1'),
    });
    await append('wfrun:wfrun_1', [wfTomb], { archivedThrough: wfTomb.data.toVersion });

    const { sqlite, postgres } = await both.tables();
    for (const table of Object.keys(sqlite)) {
      expect(postgres[table], `table ${table}: PostgreSQL's rows differ from SQLite's`).toStrictEqual(sqlite[table]);
    }
    // What the SQL PostgreSQL needed help with, as SQLite computes it.
    expect(sqlite.workflow_runs!.find((r) => r.id === 'wfrun_1')).toMatchObject({ status: 'failed', error: 'failed steps: b, c', archived_at: at(3 * 86_400_000) });
    expect(sqlite.workflow_step_attempts!.find((r) => r.wfrun_id === 'wfrun_3' && r.attempt === 1)).toMatchObject({ status: 'abandoned', duration_ms: 3_000_000_111 - 110 });
    expect(sqlite.loop_runs!.find((r) => r.id === 'run_7')).toMatchObject({ status: 'abandoned', duration_ms: 86_400_000 * 30 + 7 - 123 });
    expect(sqlite.loop_runs!.find((r) => r.id === 'run_6')).toMatchObject({ duration_ms: 3_000_000_000 - 1000 });
    expect(sqlite.loop_runs!.find((r) => r.id === 'run_2')).toMatchObject({ stdout: '', archived_at: at(3 * 86_400_000), output_pruned_at: expect.any(String) });
    for (const table of ['loop_runs', 'workflow_runs', 'workflow_steps', 'workflow_step_attempts', 'notices', 'accounts', 'loops', 'slot_decisions', 'run_queue', 'loop_notify', 'workflows', 'workflow_versions']) {
      expect(sqlite[table]!.length, `table ${table} has rows`).toBeGreaterThan(0);
    }
    // And a rebuild from PostgreSQL's log (the archived streams from their tombstones) agrees.
    expect(await both.store.verifyProjections()).toMatchObject({ ok: true });
  });
});

describe.skipIf(!havePg)('projections on PostgreSQL', () => {
  it("the projections' DDL in PostgreSQL's dialect: BIGINT, no WITHOUT ROWID, an expression index in its own parentheses", () => {
    const ddl = projections.flatMap((p) => p.ddl.map((d) => pgDdl(d)));
    expect(ddl.filter((d) => /\bINTEGER\b|WITHOUT ROWID/i.test(d))).toEqual([]);
    expect(ddl).toContain('CREATE INDEX IF NOT EXISTS loop_runs_time ON loop_runs ((COALESCE(started_at, claimed_at)))');
    expect(ddl).toContain("CREATE INDEX IF NOT EXISTS loop_runs_live ON loop_runs (loop_id, claimed_position) WHERE status IN ('claimed', 'spawning', 'running')");
    expect(pgDdl('CREATE TABLE IF NOT EXISTS t (a INTEGER PRIMARY KEY) WITHOUT ROWID', { temp: true })).toBe('CREATE TEMP TABLE IF NOT EXISTS t (a BIGINT PRIMARY KEY)');
    expect(() => pgDdl('CREATE TABLE t (a INTEGER PRIMARY KEY AUTOINCREMENT)')).toThrow(/AUTOINCREMENT/);
  });

  it("a projection that would own one of the store's tables (a rebuild drops its tables) is refused before anything is opened", async () => {
    const bad = { ...projections[0]!, tables: [{ name: 'events', orderBy: 'position' }] };
    await expect(openPgStore({ url: PG_URL, schema: testSchemaName(), projections: [bad] })).rejects.toThrow(/names the store's own table events/);
    await expect(openPgStore({ url: PG_URL, schema: testSchemaName(), projections: [projections[0]!, projections[0]!] })).rejects.toThrow(/given twice/);
  });

  it('opening creates every table and records every version; opening again changes nothing', async () => {
    const db = await pgSchema();
    const store = await db.open();
    expect(await db.versions()).toEqual(Object.fromEntries(projections.map((p) => [p.name, p.version])));
    await smallLog(store);
    const before = await db.all();
    expect(before.loop_runs).toHaveLength(1);
    await (await db.open()).end();
    expect(await db.all()).toEqual(before);
  });

  it('the queued guard uses the real run_queue: a fired slot is claimable once, and the claim takes it off the queue', async () => {
    const db = await pgSchema();
    const store = await db.open();
    await store.events.append('loop:loop_1', [loopEv.created(), slotEv.fired({ runId: 'run_1' })], { expectedVersion: 0, kind: 'loop' });
    expect(await db.rows('run_queue')).toMatchObject([{ run_id: 'run_1', loop_id: 'loop_1', kind: 'fired', attempt: 1, position: 2 }]);
    const claim = (streamId: string) =>
      store.events.append(streamId, [runEv.claimed({ slot: at(60_000), trigger: 'schedule' })], { expectedVersion: 0, kind: 'run', guards: [{ kind: 'queued', runId: 'run_1' }] });
    await claim('run:run_1');
    expect(await db.rows('run_queue')).toEqual([]);
    // Not queued any more: a second claim (another stream, so the guard decides, not the CAS) loses.
    await expect(claim('run:run_other')).rejects.toThrow(ClaimLostError);
    expect(await db.rows('loop_runs')).toMatchObject([{ id: 'run_1', status: 'claimed', claimed_position: 3 }]);
  });

  it('a version bump rebuilds that projection on open, from the log, with its new DDL; the others are left as they are', async () => {
    const db = await pgSchema();
    await smallLog(await db.open());
    const good = await db.all();
    // Damage in two projections' tables.
    await db.admin.query(`UPDATE "${db.schema}".loop_runs SET status = 'bogus', stdout = 'x'`);
    await db.admin.query(`UPDATE "${db.schema}".loops SET status = 'bogus' WHERE id = 'loop_1'`);
    const bumped = projections.map((p) =>
      p.name === 'loop_runs' ? { ...p, version: p.version + 1, ddl: [...p.ddl, 'CREATE INDEX IF NOT EXISTS loop_runs_by_status ON loop_runs (status)'] } : p,
    );
    const store = await db.open({ projections: bumped });
    expect(await db.rows('loop_runs')).toEqual(good.loop_runs);
    expect((await db.rows('loops')).find((r) => r.id === 'loop_1')).toMatchObject({ status: 'bogus' });
    expect(await db.versions()).toMatchObject({ loop_runs: projections.find((p) => p.name === 'loop_runs')!.version + 1, loops: projections.find((p) => p.name === 'loops')!.version });
    const index = await db.admin.query(`SELECT 1 FROM pg_indexes WHERE schemaname = $1 AND indexname = 'loop_runs_by_status'`, [db.schema]);
    expect(index.rowCount).toBe(1);
    // The inline projection goes on from the rebuilt table.
    await store.events.append('run:run_1', [{ ...runEv.agentReported(), state: 'succeeded' }], { expectedVersion: 4 });
    expect((await db.rows('loop_runs'))[0]).toMatchObject({ status: 'succeeded', agent: expect.stringContaining('claude') });
    // The loops table was not rebuilt: verify still finds its damage.
    const verdict = await store.verifyProjections();
    expect(verdict.ok).toBe(false);
    expect(verdict.tables.filter((t) => t.differences.length > 0).map((t) => t.table)).toEqual(['loops']);
  });

  it('a missing table is rebuilt at open even when its version is recorded', async () => {
    const db = await pgSchema();
    await smallLog(await db.open());
    const good = await db.all();
    await db.admin.query(`DROP TABLE "${db.schema}".slot_decisions`);
    await db.open();
    expect(await db.all()).toEqual(good);
  });

  it('verify: ok on good tables; then names a changed column, a missing row, a row not in the log and a missing table — and a rebuild repairs them', async () => {
    const db = await pgSchema();
    const store = await db.open();
    await smallLog(store);
    const good = await store.verifyProjections();
    expect(good.ok).toBe(true);
    expect(good.events).toBe(8);
    expect(good.tables.map((t) => t.table)).toEqual(projections.flatMap((p) => p.tables.map((t) => t.name)));
    expect(good.tables.find((t) => t.table === 'loops')).toEqual({ table: 'loops', liveRows: 2, rebuiltRows: 2, differences: [] });

    await db.admin.query(`UPDATE "${db.schema}".loop_runs SET exit_code = 7 WHERE id = 'run_1'`);
    await db.admin.query(`DELETE FROM "${db.schema}".loops WHERE id = 'loop_2'`);
    await db.admin.query(`INSERT INTO "${db.schema}".run_queue (run_id, loop_id, kind, slot, attempt, due_at, position) VALUES ('run_ghost', 'loop_1', 'fired', 's', 1, 'd', 99)`);
    await db.admin.query(`DROP TABLE "${db.schema}".slot_decisions`);
    const bad = await store.verifyProjections();
    expect(bad.ok).toBe(false);
    const diffs = Object.fromEntries(bad.tables.filter((t) => t.differences.length > 0).map((t) => [t.table, t.differences]));
    expect(diffs).toEqual({
      loop_runs: ['loop_runs id=run_1: exit_code is 7 live, 0 rebuilt from the log'],
      loops: ['loops id=loop_2: missing from the live table'],
      run_queue: ['run_queue run_id=run_ghost: in the live table but not in the log'],
      slot_decisions: ['the table is missing from the schema: a rebuild of its projection recreates it from the log'],
    });
    expect(bad.tables.find((t) => t.table === 'loops')).toMatchObject({ liveRows: 1, rebuiltRows: 2 });
    // `limit`: the first n, then '…'.
    await db.admin.query(`UPDATE "${db.schema}".loop_runs SET stdout = 'x', stderr = 'y' WHERE id = 'run_1'`);
    expect((await store.verifyProjections({ limit: 2 })).tables.find((t) => t.table === 'loop_runs')!.differences).toEqual([
      'loop_runs id=run_1: exit_code is 7 live, 0 rebuilt from the log',
      'loop_runs id=run_1: stdout is "x" live, "hi\\n" rebuilt from the log',
      '…',
    ]);
    // Verify left nothing behind (its scratch tables were temporary, rolled back).
    expect(await db.rows('loop_runs')).toMatchObject([{ exit_code: 7 }]);

    const rebuilt = await store.rebuildProjections();
    expect(rebuilt).toMatchObject({ events: 8, rows: { loops: 2, loop_runs: 1, run_queue: 0, slot_decisions: 1 } });
    expect(await store.verifyProjections()).toMatchObject({ ok: true });
  });

  it('two stores appending to one schema concurrently (claims racing drops through the queued guard, rebuilds in between) leave tables equal to a rebuild', async () => {
    const db = await pgSchema();
    const a = await db.open();
    const b = await db.open();
    const LOOPS = 24;
    const outcomes = { claimed: 0, lost: 0 };
    const chain = async (i: number) => {
      const [mine, other] = i % 2 === 0 ? [a, b] : [b, a];
      const loop = `loop:loop_${i}`;
      const runId = `run_${i}`;
      const slot = at(60_000);
      const t = (ms: number) => at(60_000 + i * 7 + ms);
      await mine.events.append(loop, [loopEv.created({ loopId: `loop_${i}`, name: `race-${i}` }, t(0))], { expectedVersion: 0, kind: 'loop' });
      await other.events.append(loop, [slotEv.fired({ runId, slot }, t(1))], { expectedVersion: 1 });
      const claim = mine.events.append(`run:${runId}`, [runEv.claimed({ runId, loopId: `loop_${i}`, loopName: `race-${i}`, slot, trigger: 'schedule' }, t(2))], {
        expectedVersion: 0,
        kind: 'run',
        guards: [{ kind: 'queued', runId }],
      });
      // A third of the slots are dropped while they are being claimed: one of the two wins.
      const drop = i % 3 === 0 ? other.events.append(loop, [slotEv.dropped({ runId, slot }, t(2))], { expectedVersion: 2 }) : Promise.resolve();
      const [claimed] = await Promise.allSettled([claim, drop]);
      if (claimed.status === 'rejected') {
        expect(claimed.reason).toBeInstanceOf(ClaimLostError);
        outcomes.lost += 1;
        return;
      }
      outcomes.claimed += 1;
      const run = `run:${runId}`;
      await other.events.append(run, [{ ...runEv.spawnRequested({}, t(10)), state: 'spawning' }], { expectedVersion: 1 });
      // Endings through each duration path: measured, from the start (julianday) and a cancel.
      const end =
        i % 4 === 0
          ? { ...runEv.exited({ durationMs: 1000 + i }, t(2000)), state: 'succeeded' }
          : i % 4 === 1
            ? { ...runEv.abandoned('runner lost', t(3000 + i)), state: 'abandoned' }
            : { ...runEv.cancelRequested('stop', t(4000 + i)), state: 'cancelled' };
      await mine.events.append(run, [end], { expectedVersion: 2 });
      // Both stores bump the same loop row's counter; the loop's stream version comes from the log.
      const version = (await other.events.streamInfo(loop))!.version;
      await other.events.append(loop, [{ ...loopEv.paused('done'), state: 'paused', at: t(5000) }], { expectedVersion: version });
    };
    // Rebuilds by either store while both append: the appends wait for them, then go on from the rebuilt tables
    // (including the queued guard's statement each connection prepared against the run_queue a rebuild replaced).
    const rebuilds = { a: 0, b: 0 };
    const rebuildWhileAppending = async (store: PgStore, which: 'a' | 'b', afterMs: number) => {
      await new Promise((resolve) => setTimeout(resolve, afterMs));
      await store.rebuildProjections();
      rebuilds[which] += 1;
    };
    await Promise.all([...Array.from({ length: LOOPS }, (_, i) => chain(i)), rebuildWhileAppending(a, 'a', 20), rebuildWhileAppending(b, 'b', 60)]);
    expect(rebuilds).toEqual({ a: 1, b: 1 });
    await Promise.all([a.events.settled(), b.events.settled()]);
    expect(outcomes.claimed + outcomes.lost).toBe(LOOPS);

    // Gap-free positions, and the tables equal to a rebuild from the log.
    const head = await db.admin.query<{ n: number; max: number }>(`SELECT count(*)::bigint AS n, max(position) AS max FROM "${db.schema}".events`);
    expect(head.rows[0]!.n).toBe(head.rows[0]!.max);
    const verdict = await b.verifyProjections();
    expect(verdict.tables.filter((t) => t.differences.length > 0)).toEqual([]);
    expect(verdict.ok).toBe(true);
    expect((await db.rows('loop_runs')).length).toBe(outcomes.claimed);
    expect(await db.rows('run_queue')).toEqual([]);
    const live = await db.all();
    await a.rebuildProjections();
    expect(await db.all()).toEqual(live);
    // Durations to the millisecond: measured, or from the spawn request to the end (julianday).
    for (const row of await db.rows('loop_runs')) {
      const i = Number(String(row.id).slice('run_'.length));
      const expected = { succeeded: 1000 + i, abandoned: 3000 + i - 10, cancelled: 4000 + i - 10 }[row.status as string];
      expect([row.id, row.duration_ms]).toEqual([row.id, expected]);
    }
  });

  it('a CAS conflict on a stream still rolls back only that append, its projection statements with it', async () => {
    const db = await pgSchema();
    const store = await db.open();
    await store.events.append('loop:loop_1', [loopEv.created()], { expectedVersion: 0, kind: 'loop' });
    const results = await Promise.allSettled([
      store.events.append('loop:loop_1', [slotEv.fired({ runId: 'run_1' })], { expectedVersion: 1 }),
      store.events.append('loop:loop_1', [slotEv.fired({ runId: 'run_2' })], { expectedVersion: 1 }),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected']);
    expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(ConcurrencyConflictError);
    expect(await db.rows('run_queue')).toMatchObject([{ run_id: 'run_1' }]);
    expect(await store.verifyProjections()).toMatchObject({ ok: true });
  });
});
