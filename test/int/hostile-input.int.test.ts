/**
 * Hostile or damaged input fails closed with a clear, short, specific error — never a crash, a
 * stack trace or SQLite's own words (issue 11's findings, each with a test that failed before):
 *  - a 100,000-character id or name is "not found" (not "LIKE or GLOB pattern too complex"), and
 *    the message quotes its start and length, not all of it;
 *  - a NUL byte in a command line is refused when the loop or workflow is defined, not at every run;
 *  - an event whose stored JSON is damaged makes replay and verify fail naming the event;
 *  - a dropped projection table is a difference `projections verify` reports (pointing to rebuild).
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/events/db.js';
import { SqliteEventLog } from '../../src/events/sqlite-log.js';
import { findViolations } from '../../src/runtime/admin/invariants.js';
import { LoopsError, NotFoundError, ValidationError } from '../../src/events/errors.js';
import { normalizeWorkflowSpec } from '../../src/workflow/spec.js';
import { runDoctor } from '../../src/runtime/admin/doctor.js';
import { verifyProjections } from '../../src/runtime/admin/projections.js';
import { replayStream } from '../../src/runtime/admin/replay.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { createCommandLoop } from '../../src/runtime/loops/commands.js';
import { findLoop, findRun } from '../../src/runtime/queries/loops.js';
import { findWorkflow, findWorkflowRun } from '../../src/runtime/queries/workflows.js';
import { useRuntime } from '../helpers/tmp.js';

const manual = { manual: true, tz: 'UTC' } as const;

describe('hostile input', () => {
  it('a 100,000-character id or name is simply not found, and the message quotes its start and length', async () => {
    const runtime = await useRuntime();
    await createCommandLoop(runtime, { name: 'job', command: 'true', schedule: manual });
    const huge = `loop_${'x'.repeat(100_000)}`;
    for (const find of [() => findLoop(runtime.db, huge), () => findRun(runtime.db, huge), () => findWorkflow(runtime.db, huge), () => findWorkflowRun(runtime.db, huge)]) {
      let error: unknown;
      try {
        find();
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(NotFoundError);
      expect((error as Error).message).toMatch(/"loop_x{35}"… \(100005 characters\)$/);
      expect((error as Error).message.length).toBeLessThan(200);
    }
    // A prefix still finds what it names.
    expect(findLoop(runtime.db, findLoop(runtime.db, 'job').id.slice(0, 12)).name).toBe('job');
  });

  it('--env names that are built-in object keys: constructor reaches the run, __proto__ is refused (it was dropped without a word)', async () => {
    const runtime = await useRuntime();
    await createCommandLoop(runtime, { name: 'job', command: 'printf %s "$constructor"', schedule: manual, env: Object.fromEntries([['constructor', 'x']]) });
    expect((await runNow(runtime, 'job')).stdout).toBe('x');
    const head = await runtime.log.headPosition();
    await expect(createCommandLoop(runtime, { name: 'proto', command: 'true', schedule: manual, env: Object.fromEntries([['__proto__', 'x']]) })).rejects.toThrow(
      '--env: the variable name __proto__ cannot be stored',
    );
    expect(await runtime.log.headPosition()).toBe(head);
  });

  it('a NUL byte in a command line is refused when the loop or the workflow is defined', async () => {
    const runtime = await useRuntime();
    await expect(createCommandLoop(runtime, { name: 'nul', command: 'echo a\0b', schedule: manual })).rejects.toThrow(
      /^--cmd: "echo a\\u0000b" contains a NUL byte \(\\0\), which no command line can hold$/,
    );
    await expect(createCommandLoop(runtime, { name: 'nul', command: 'echo', shell: false, args: ['a\0'], schedule: manual })).rejects.toThrow(/^--arg: .* contains a NUL byte/);
    await expect(createCommandLoop(runtime, { name: 'nul', command: 'echo', env: { A: 'x\0' }, schedule: manual })).rejects.toThrow(/^--env: .* contains a NUL byte/);
    expect(await runtime.log.headPosition()).toBe(0);
    let error: unknown;
    try {
      normalizeWorkflowSpec({ name: 'wf', steps: [{ id: 'a', run: 'echo a\0b' }, { id: 'b', command: 'echo', args: ['ok', 'x\0'] }] });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ValidationError);
    const problems = (error as ValidationError).details!.problems as Array<{ step: string; field: string; message: string }>;
    expect(problems.map((p) => [p.step, p.field])).toEqual([
      ['a', 'run'],
      ['b', 'args'],
    ]);
    expect(problems[0]!.message).toContain('contains a NUL byte (\\0), which no command line can hold');
  });
});

describe('damaged data', () => {
  it('an event whose stored JSON is damaged: replay and verify fail closed naming the event', async () => {
    const runtime = await useRuntime();
    await createCommandLoop(runtime, { name: 'job', command: 'true', schedule: manual });
    const run = await runNow(runtime, 'job');
    const row = runtime.db.prepare("SELECT position, version FROM events WHERE stream_id = ? AND type = 'process.spawned'").get(`run:${run.id}`) as { position: number; version: number };
    runtime.db.prepare('UPDATE events SET data = ? WHERE position = ?').run('{"pid": 12', row.position);
    const message = `the log is damaged: the data of event ${row.position} (run:${run.id} version ${row.version}, process.spawned) is not valid JSON`;
    await expect(replayStream(runtime.log, `run:${run.id}`)).rejects.toThrow(message);
    expect(() => verifyProjections(runtime.db)).toThrow(message);
    await expect(replayStream(runtime.log, `run:${run.id}`)).rejects.toBeInstanceOf(LoopsError);
  });

  it('an unknown event type in one run: its replay fails closed naming run and version, doctor names the event, other runs replay and new runs go on', async () => {
    const runtime = await useRuntime();
    await createCommandLoop(runtime, { name: 'job', command: 'true', schedule: manual });
    await createCommandLoop(runtime, { name: 'other', command: 'true', schedule: manual });
    const damaged = await runNow(runtime, 'job');
    const fine = await runNow(runtime, 'other');
    const row = runtime.db.prepare("SELECT position, version FROM events WHERE stream_id = ? AND type = 'process.spawned'").get(`run:${damaged.id}`) as { position: number; version: number };
    runtime.db.prepare("UPDATE events SET type = 'run.exploded' WHERE position = ?").run(row.position);
    const replay = await replayStream(runtime.log, `run:${damaged.id}`);
    expect(replay).toMatchObject({ ok: false, firstMismatch: row.version });
    expect((await replayStream(runtime.log, `run:${fine.id}`)).ok).toBe(true);
    const report = await runDoctor({ dataDir: runtime.dataDir, daemonEnv: () => null });
    expect(report.checks.find((c) => c.id === 'events')).toMatchObject({
      status: 'fail',
      detail: `1 event cannot be read: event ${row.position} (run:${damaged.id} version ${row.version}, run.exploded): its type is unknown to this loops`,
    });
    // The damage stays in its stream: another run of the same loop starts, runs and is recorded.
    expect((await runNow(runtime, 'job')).status).toBe('succeeded');
  });

  it('doctor: an event whose JSON does not parse and one of a newer schema version are named; a clean log is ok', async () => {
    const runtime = await useRuntime();
    await createCommandLoop(runtime, { name: 'job', command: 'true', schedule: manual });
    const check = async () => (await runDoctor({ dataDir: runtime.dataDir, daemonEnv: () => null })).checks.find((c) => c.id === 'events');
    expect(await check()).toMatchObject({ status: 'ok' });
    const run = await runNow(runtime, 'job');
    const rows = runtime.db.prepare('SELECT position, version, type FROM events WHERE stream_id = ? ORDER BY version').all(`run:${run.id}`) as Array<{ position: number; version: number; type: string }>;
    runtime.db.prepare('UPDATE events SET data = ? WHERE position = ?').run('{"pid": 12', rows[2]!.position);
    runtime.db.prepare('UPDATE events SET v = 99 WHERE position = ?').run(rows[3]!.position);
    const result = await check();
    expect(result?.status).toBe('fail');
    expect(result?.detail).toContain(`2 events cannot be read: event ${rows[2]!.position} (run:${run.id} version 3, ${rows[2]!.type}): its stored JSON does not parse`);
    expect(result?.detail).toMatch(/its schema v99 is newer than this loops knows \(v\d+\)/);
  });

  it('a damaged page: doctor fails the database check with what integrity_check found, and the invariant checker reports it first', async () => {
    const runtime = await useRuntime();
    await createCommandLoop(runtime, { name: 'job', command: 'true', schedule: manual });
    for (let i = 0; i < 3; i++) await runNow(runtime, 'job');
    runtime.db.pragma('wal_checkpoint(TRUNCATE)');
    const pageSize = runtime.db.pragma('page_size', { simple: true }) as number;
    const root = (runtime.db.prepare("SELECT rootpage FROM sqlite_master WHERE name = 'loop_runs'").get() as { rootpage: number }).rootpage;
    // Garbage over the cell area of the loop_runs table's page (a projection: the log is intact).
    const file = join(runtime.dataDir, 'loops.db');
    const fd = openSync(file, 'r+');
    writeSync(fd, Buffer.alloc(pageSize - 200, 0xa5), 0, pageSize - 200, (root - 1) * pageSize + 100);
    closeSync(fd);
    const report = await runDoctor({ dataDir: runtime.dataDir, daemonEnv: () => null });
    const database = report.checks.find((c) => c.id === 'database');
    expect(database?.status).toBe('fail');
    expect(database?.detail).toMatch(/PRAGMA integrity_check found \d+ problems?: /);
    expect(database?.hint).toMatch(/restore a backup/);
    const db = openDatabase(file);
    try {
      const violations = (() => {
        try {
          return findViolations(db, new SqliteEventLog(db, { handlers: [] }), { processes: false });
        } catch (error) {
          return [`threw: ${(error as Error).message}`];
        }
      })();
      expect(violations[0]).toMatch(/^integrity_check: /);
    } finally {
      db.close();
    }
  });

  it('a dropped projection table is a difference verify reports, pointing to rebuild', async () => {
    const runtime = await useRuntime();
    await createCommandLoop(runtime, { name: 'job', command: 'true', schedule: manual });
    runtime.db.exec('DROP TABLE slot_decisions');
    const result = verifyProjections(runtime.db);
    expect(result.ok).toBe(false);
    expect(result.tables.find((t) => t.table === 'slot_decisions')).toEqual({
      table: 'slot_decisions',
      liveRows: 0,
      rebuiltRows: 0,
      differences: ['the table is missing from the database: loops projections rebuild recreates it from the log'],
    });
    expect(result.tables.filter((t) => t.differences.length > 0)).toHaveLength(1);
  });
});
