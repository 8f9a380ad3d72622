/**
 * The read side stays flat as the history grows (issue 14), asserted on query plans, not timings:
 *  - every statement `list`, `runs`, `stats --since`, `show <loop>` and `why <loop>` run (the same
 *    runtime functions the CLI calls, on a real data directory, captured as they are prepared) reads
 *    the run and decision history through an index, or under a LIMIT without sorting it first;
 *    `stats --since` finds its window through loop_runs_time / workflow_runs_loop_started;
 *  - `projections verify`, which walks the live and rebuilt tables together in key order, reports
 *    the differences it always did: changed columns and rows missing from the live table in key
 *    order, then rows only in the live table, the first `limit` of them and `…`.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { Db } from '../../src/events/db.js';
import { DurableActor } from '../../src/runtime/actor.js';
import { verifyProjections } from '../../src/runtime/admin/projections.js';
import { runStats } from '../../src/runtime/admin/stats.js';
import { recentDecisions } from '../../src/runtime/admin/why.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { decide } from '../../src/runtime/daemon/pass.js';
import { recoverRuns } from '../../src/runtime/daemon/recovery.js';
import { createCommandLoop, createWorkflowLoop } from '../../src/runtime/loops/commands.js';
import { runWorkflow } from '../../src/runtime/workflows/runner.js';
import { createWorkflow } from '../../src/runtime/workflows/specs.js';
import { findLoop, listLoops, listRuns } from '../../src/runtime/queries/loops.js';
import { loopNotify } from '../../src/runtime/queries/notices.js';
import { openReader } from '../../src/runtime/store.js';
import { tempDir, useRuntime, type TestRuntime } from '../helpers/tmp.js';

/** Tables that grow with the history (runs, decisions, workflow runs and their steps). */
const HISTORY = ['loop_runs', 'slot_decisions', 'workflow_runs', 'workflow_steps', 'workflow_step_attempts'];

interface Seen {
  sql: string;
  params: unknown[];
}

/**
 * Records every statement run on `db` from now on, with its parameters: prepared now or earlier
 * (statements are cached per database, so a hot path's were prepared before the capture began).
 * Read statements (`all`, `get`, `iterate`) are recorded; the capture ends with the test.
 */
function capture(db: Db): Seen[] {
  const seen: Seen[] = [];
  const proto = Object.getPrototypeOf(db.prepare('SELECT 1')) as Record<string, (...params: unknown[]) => unknown>;
  const originals = new Map<string, (...params: unknown[]) => unknown>();
  for (const method of ['all', 'get', 'iterate']) {
    const run = proto[method]!;
    originals.set(method, run);
    proto[method] = function (this: { database: Db; source: string }, ...params: unknown[]) {
      if (this.database === db) seen.push({ sql: this.source, params });
      return run.apply(this, params);
    };
  }
  onTestFinished(() => {
    for (const [method, run] of originals) proto[method] = run;
  });
  return seen;
}

/** The plan lines of a captured statement. */
function planOf(db: Db, seen: Seen): string[] {
  return (db.prepare(`EXPLAIN QUERY PLAN ${seen.sql}`).all(...seen.params) as Array<{ detail: string }>).map((r) => r.detail);
}

/** The names a history table goes by in a statement: itself and its aliases. */
function historyNames(sql: string): Map<string, string> {
  const names = new Map<string, string>();
  for (const table of HISTORY) {
    if (!new RegExp(`\\b${table}\\b`).test(sql)) continue;
    names.set(table, table);
    for (const m of sql.matchAll(new RegExp(`\\b${table}\\s+(?:AS\\s+)?([a-z_]+)\\b`, 'gi'))) {
      if (!/^(WHERE|JOIN|LEFT|ON|ORDER|GROUP|LIMIT|USING|INDEXED|NOT)$/i.test(m[1]!)) names.set(m[1]!, table);
    }
  }
  return names;
}

/**
 * Why a statement's plan reads more than its answer needs of a history table, or null: a full
 * SCAN of one outside a LIMIT, or a sort of its rows before a LIMIT.
 */
function growsWithHistory(sql: string, plan: string[]): string | null {
  const names = historyNames(sql);
  const limited = /\bLIMIT\b/i.test(sql);
  for (const line of plan) {
    const scan = /^SCAN (\w+)(?: USING (COVERING )?INDEX (\w+))?/.exec(line);
    // loop_runs_live holds the runs still going, not the history.
    if (scan && names.has(scan[1]!) && !limited && scan[3] !== 'loop_runs_live') return `${line}: a scan of ${names.get(scan[1]!)} without a LIMIT`;
  }
  if (limited && names.size > 0 && plan.some((l) => l.includes('USE TEMP B-TREE FOR ORDER BY'))) return 'sorts the history before its LIMIT';
  return null;
}

async function historyOf(runtime: TestRuntime): Promise<string> {
  const manual = { manual: true, tz: 'UTC' };
  const loop = await createCommandLoop(runtime, { name: 'often', command: 'true', schedule: manual });
  await createCommandLoop(runtime, { name: 'other', command: 'true', schedule: manual });
  for (const name of ['often', 'often', 'other']) expect((await runNow(runtime, name)).status).toBe('succeeded');
  // Slot decisions for `why`, recorded through the loop's actor.
  const actor = await DurableActor.load(runtime, `loop:${loop.id}`);
  const at = (i: number) => new Date(Date.parse('2026-01-01T00:00:00Z') + i * 60_000).toISOString();
  await actor.recordAll(
    [0, 1, 2].map((i) => ({ type: 'slot.skipped', data: { slot: at(i), fireAt: at(i), reason: 'overlap', blockedBy: `run_${i}`, nextRunAt: at(i + 1) } })),
  );
  return loop.id;
}

describe('read paths use indexes, not the whole history', () => {
  it('list, runs, stats --since, show <loop> and why <loop>', async () => {
    const runtime = await useRuntime();
    const loopId = await historyOf(runtime);
    const reader = await openReader(runtime.dataDir);
    try {
      const db = reader.db;
      const seen = capture(db);
      const commands: Record<string, () => unknown> = {
        list: () => listLoops(db),
        runs: () => listRuns(db),
        'stats --since': () => runStats(db, { since: '2020-01-01T00:00:00.000Z' }),
        'stats <loop> --since': () => runStats(db, { loop: 'often', since: '2020-01-01T00:00:00.000Z' }),
        show: () => {
          const loop = findLoop(db, 'often', { includeRemoved: true });
          return [listRuns(db, { loopId: loop.id, limit: 5 }), loopNotify(db, loop.id)];
        },
        why: () => recentDecisions(db, findLoop(db, 'often', { includeRemoved: true }).id, 20),
      };
      const plans = new Map<string, Array<{ sql: string; plan: string[] }>>();
      for (const [name, command] of Object.entries(commands)) {
        seen.length = 0;
        expect(command()).toBeTruthy();
        plans.set(name, seen.map((s) => ({ sql: s.sql, plan: planOf(db, s) })));
        for (const s of plans.get(name)!) {
          expect(growsWithHistory(s.sql, s.plan), `${name}: ${s.sql}\n${s.plan.join('\n')}`).toBeNull();
        }
      }
      const lines = (name: string) => plans.get(name)!.flatMap((p) => p.plan);
      // The window through its indexes: the sums, the medians and the workflow loops' step sums.
      const stats = lines('stats --since');
      expect(stats.filter((l) => /^SEARCH loop_runs USING INDEX loop_runs_time \(<expr>>\?\)/.test(l)).length).toBeGreaterThanOrEqual(2);
      expect(stats).toContainEqual(expect.stringMatching(/^SEARCH r USING INDEX workflow_runs_loop_started \(started_at>\?\)/));
      expect(stats.filter((l) => /^SCAN (loop_runs|r)\b/.test(l))).toEqual([]);
      // The newest runs and decisions: a LIMIT over an index in its order, nothing sorted.
      expect(lines('runs')).toEqual(['SCAN loop_runs']);
      expect(plans.get('runs')![0]!.sql).toMatch(/ORDER BY claimed_position DESC LIMIT \?/);
      expect(lines('why')).toContainEqual(expect.stringMatching(/^SEARCH d USING INDEX slot_decisions_recent \(loop_id=\?\)/));
      expect(lines('show')).toContainEqual(expect.stringMatching(/^SEARCH loop_runs USING INDEX loop_runs_loop \(loop_id=\?\)/));
      // A loop's run count and last run come from loop_runs_loop (count: the index alone).
      expect(lines('list')).toContainEqual(expect.stringMatching(/^SEARCH c USING COVERING INDEX loop_runs_loop \(loop_id=\?\)/));
      expect(recentDecisions(db, loopId, 2).map((d) => d.from)).toEqual(['2026-01-01T00:02:00.000Z', '2026-01-01T00:01:00.000Z']);
    } finally {
      reader.close();
    }
  });
});

describe('a run reads its loop, not the loop\'s history', () => {
  it('run-now resolves the loop without counting its runs (a cost that grows with every run)', async () => {
    const runtime = await useRuntime();
    await historyOf(runtime);
    const seen = capture(runtime.db);
    expect((await runNow(runtime, 'often')).status).toBe('succeeded');
    const lines = seen.map((s) => ({ sql: s.sql, plan: planOf(runtime.db, s) }));
    expect(lines.length).toBeGreaterThan(0);
    for (const { sql, plan } of lines) {
      const why = `${sql}\n${plan.join('\n')}`;
      expect(sql, why).not.toMatch(/COUNT\(\*\)\s+FROM\s+loop_runs\b/i);
      expect(plan.filter((l) => /\bloop_runs_loop\b/.test(l)), why).toEqual([]);
      expect(growsWithHistory(sql, plan), why).toBeNull();
    }
    // The loop's runs still going (overlap) come from the index of live runs alone.
    expect(lines.flatMap((l) => l.plan)).toContainEqual(expect.stringMatching(/^SEARCH r USING INDEX loop_runs_live \(loop_id=\?\)/));
  });

  it("a workflow loop's run and a workflow run resolve the workflow without counting its runs", async () => {
    const runtime = await useRuntime();
    const file = join(tempDir(), 'flow.yaml');
    writeFileSync(file, 'name: flow\nsteps:\n  - id: one\n    run: echo one\n');
    await createWorkflow(runtime, file);
    await createWorkflowLoop(runtime, { name: 'wf', workflow: 'flow', schedule: { manual: true, tz: 'UTC' } });
    for (let i = 0; i < 2; i++) expect((await runNow(runtime, 'wf')).status).toBe('succeeded');
    const seen = capture(runtime.db);
    expect((await runNow(runtime, 'wf')).status).toBe('succeeded');
    expect((await runWorkflow(runtime, 'flow')).run.status).toBe('succeeded');
    expect(seen.length).toBeGreaterThan(0);
    for (const { sql } of seen) expect(sql).not.toMatch(/COUNT\(\*\)\s+FROM\s+(loop|workflow)_runs\b/i);
  });
});

describe('recovery, which every daemon pass runs', () => {
  it('finds the runs still going through their own index, never by walking the run history', async () => {
    const runtime = await useRuntime();
    await historyOf(runtime);
    const seen = capture(runtime.db);
    await recoverRuns(runtime);
    const plans = seen.filter((q) => /\bloop_runs\b/.test(q.sql)).map((q) => ({ sql: q.sql, plan: planOf(runtime.db, q) }));
    expect(plans.length).toBeGreaterThan(0);
    for (const { sql, plan } of plans) expect(growsWithHistory(sql, plan), `${sql}\n${plan.join('\n')}`).toBeNull();
    expect(plans.flatMap((p) => p.plan)).toContainEqual('SCAN r USING INDEX loop_runs_live');
  });
});

describe('a scheduling pass with nothing due', () => {
  it('finds due loops through the (status, next_run_at) index, never by scanning every loop', async () => {
    const runtime = await useRuntime();
    for (const name of ['a', 'b', 'c']) await createCommandLoop(runtime, { name, command: 'true', schedule: { every: '1h', tz: 'UTC' } });
    await createCommandLoop(runtime, { name: 'boot', command: 'true', schedule: { cron: '@reboot', tz: 'UTC' } });
    const seen = capture(runtime.db);
    await decide(runtime, Date.now());
    const plans = seen.filter((q) => /\bFROM loops\b/.test(q.sql)).map((q) => ({ sql: q.sql, plan: planOf(runtime.db, q) }));
    expect(plans.length).toBeGreaterThan(0);
    for (const { sql, plan } of plans) {
      const why = `${sql}\n${plan.join('\n')}`;
      expect(plan.filter((l) => /^SCAN loops\b/.test(l)), why).toEqual([]);
      // The index's range, not only its status prefix (which is every active loop).
      for (const line of plan.filter((l) => /^SEARCH loops USING INDEX loops_due/.test(l))) expect(line, why).toMatch(/\(status=\? AND next_run_at[<=]\?\)/);
    }
  });
});

describe('projections verify, walked in key order', () => {
  it('reports changed, missing and extra rows as before, the first `limit` of them', async () => {
    const runtime = await useRuntime();
    await historyOf(runtime);
    const db = runtime.db;
    expect(verifyProjections(db)).toMatchObject({ ok: true });
    const ids = (db.prepare('SELECT id FROM loop_runs ORDER BY id').all() as Array<{ id: string }>).map((r) => r.id);
    expect(ids).toHaveLength(3);
    db.prepare("UPDATE loop_runs SET status = 'failed', exit_code = 9 WHERE id = ?").run(ids[0]);
    db.prepare('DELETE FROM loop_runs WHERE id = ?').run(ids[1]);
    db.prepare(
      `INSERT INTO loop_runs (claimed_position, id, loop_id, loop_name, slot, scheduled_for, attempt, trigger, status, target, runner_id, claimed_at, updated_at)
       VALUES (999999, 'run_000', 'loop_x', 'x', 'manual:x', 'now', 1, 'manual', 'succeeded', '{}', 'r', 'now', 'now')`,
    ).run();
    const result = verifyProjections(db);
    expect(result.ok).toBe(false);
    const runs = result.tables.find((t) => t.table === 'loop_runs')!;
    expect(runs).toEqual({
      table: 'loop_runs',
      liveRows: 3,
      rebuiltRows: 3,
      differences: [
        `loop_runs id=${ids[0]}: status is "failed" live, "succeeded" rebuilt from the log`,
        `loop_runs id=${ids[0]}: exit_code is 9 live, 0 rebuilt from the log`,
        `loop_runs id=${ids[1]}: missing from the live table`,
        // Only in the live table: after the rest, though its key sorts first.
        'loop_runs id=run_000: in the live table but not in the log',
      ],
    });
    expect(result.tables.filter((t) => t.table !== 'loop_runs').every((t) => t.differences.length === 0)).toBe(true);
    expect(verifyProjections(db, 2).tables.find((t) => t.table === 'loop_runs')!.differences).toEqual([...runs.differences.slice(0, 2), '…']);
    expect(verifyProjections(db, 4).tables.find((t) => t.table === 'loop_runs')!.differences).toEqual(runs.differences);
    // A dropped table is reported, not a crash.
    db.exec('DROP TABLE run_queue');
    expect(verifyProjections(db).tables.find((t) => t.table === 'run_queue')!.differences).toEqual([
      'the table is missing from the database: loops projections rebuild recreates it from the log',
    ]);
  });
});
