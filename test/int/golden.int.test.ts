/**
 * Golden logs (DESIGN §7): event logs recorded by a real build driving the real binary
 * (scripts/record-golden.mjs; what each holds and how to re-record: test/fixtures/golden/README.md),
 * loaded verbatim into a fresh database of the current code, which must
 *  - replay every stream, on the machine version that wrote it, to the states recorded in the log;
 *  - rebuild the projection tables to the rows recorded with them (for projections whose version
 *    did not move; one whose version moved fails and asks for a deliberate re-recording);
 *  - pass verifyProjections.
 * A machine change that alters history therefore fails here unless its version is bumped.
 * LOOPS_GOLDEN_DIR points the test at another copy of the goldens (e.g. a doctored one).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/events/db.js';
import { projections } from '../../src/projections/registry.js';
import { rebuildProjections } from '../../src/runtime/admin/projections.js';
import { replayStream } from '../../src/runtime/admin/replay.js';
import { goldenDir, goldenScenarios, loadGolden, recordedTables, type Golden, type GoldenStream } from '../helpers/golden.js';
import { expectVerifyOk } from '../helpers/invariants.js';
import { openTestRuntime, type TestRuntime } from '../helpers/tmp.js';

const REDERIVE_CMD = 'npm run build && node scripts/record-golden.mjs --projections-only';
const REDERIVE = `re-derive the goldens' projections from their recorded events with the new build (${REDERIVE_CMD}; the events stay as recorded; see test/fixtures/golden/README.md)`;

/** The scenarios scripts/record-golden.mjs records: all must be present. */
const expectedScenarios = ['adopted-run', 'archived-run', 'cancelled-workflow', 'command-run', 'context-hashes', 'process-adopted', 'recorded-skips', 'retried-slot', 'sequential-workflow', 'timed-out-run'];

type SqlValue = string | number | null;

/** Inserts the recorded rows of `events` and `streams` verbatim, in one transaction. */
function loadLog(db: Db, golden: Golden): void {
  const insertEvent = db.prepare<SqlValue[]>(
    'INSERT INTO events (position, stream_id, version, type, v, data, meta, at, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
  );
  db.transaction(() => {
    for (const e of golden.events) {
      // The recorder checked that JSON.stringify gives back the stored text byte for byte.
      insertEvent.run(e.position, e.stream_id, e.version, e.type, e.v, JSON.stringify(e.data), JSON.stringify(e.meta), e.at, e.state === null ? null : JSON.stringify(e.state));
    }
    for (const stream of golden.streams) {
      const columns = Object.keys(stream) as Array<keyof GoldenStream>;
      db.prepare<SqlValue[]>(`INSERT INTO streams (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`).run(
        ...columns.map((c) => stream[c]),
      );
    }
  })();
}

const show = (state: unknown): string => (typeof state === 'string' ? `'${state}'` : JSON.stringify(state));

const scenarios = goldenScenarios();

it('has every recorded scenario', () => {
  expect(scenarios, `golden logs in ${goldenDir}`).toEqual(expect.arrayContaining(expectedScenarios));
});

describe.each(scenarios)('golden %s', (name) => {
  const golden = loadGolden(name);
  let runtime: TestRuntime;

  beforeAll(async () => {
    runtime = await openTestRuntime();
    loadLog(runtime.db, golden);
    rebuildProjections(runtime.db);
  });
  afterAll(() => runtime?.close());

  it('was recorded whole: every stream has contiguous versions up to its recorded version', () => {
    expect(golden.events.length, `golden ${name}: events.jsonl is empty`).toBeGreaterThan(0);
    for (const stream of golden.streams) {
      const events = golden.events.filter((e) => e.stream_id === stream.stream_id);
      // An archived stream (loops prune --archive) begins with its tombstone, after the versions it moved.
      const first = events[0]?.type === 'stream.archived' ? (events[0].data as { toVersion: number }).toVersion + 1 : 1;
      const versions = events.map((e) => e.version);
      const contiguous = Array.from({ length: stream.version - first + 1 }, (_, i) => i + first);
      expect(versions, `golden ${name}: versions of ${stream.stream_id}`).toEqual(contiguous);
    }
  });

  it('replays every stream to the states recorded in the log', async () => {
    const problems: string[] = [];
    for (const stream of golden.streams) {
      const id = stream.stream_id;
      let result: Awaited<ReturnType<typeof replayStream>>;
      try {
        result = await replayStream(runtime.log, id);
      } catch (error) {
        problems.push(`golden ${name}: ${id} cannot be replayed: ${(error as Error).message}`);
        continue;
      }
      const recorded = golden.events.filter((e) => e.stream_id === id).length;
      if (result.steps.length !== recorded) {
        problems.push(`golden ${name}: ${id} replayed ${result.steps.length} events of the ${recorded} recorded`);
      }
      const step = result.steps.find((s) => !s.matches);
      if (!step) continue;
      problems.push(
        step.accepted
          ? `golden ${name}: ${id} diverges at version ${step.version}, ${step.type} (recorded ${show(step.recordedState)}, replayed ${show(step.stateAfter)}); ` +
              `machine ${result.machine.id}@${result.machine.version} changed behaviour without a version bump (or the golden was edited)`
          : `golden ${name}: ${id} diverges at version ${step.version}: machine ${result.machine.id}@${result.machine.version} no longer accepts ` +
              `${step.type} in state ${show(step.stateBefore)} (recorded ${show(step.recordedState)})`,
      );
    }
    expect(problems, problems.join('\n')).toEqual([]);
  });

  it('was recorded with the projection versions of this code', () => {
    const moved = projections
      .filter((p) => golden.projections.versions[p.name] !== undefined && golden.projections.versions[p.name] !== p.version)
      .map((p) => `golden ${name}: projection ${p.name} is version ${p.version} now, the golden was recorded at version ${golden.projections.versions[p.name]}; if that change is intended, ${REDERIVE}`);
    expect(moved, moved.join('\n')).toEqual([]);
  });

  it('rebuilds the projection tables to the recorded rows', () => {
    // A projection new since the recording, or one whose version moved (reported above), is not compared.
    const tables = recordedTables(golden);
    for (const { projection, table, recorded } of tables) {
      const rows = runtime.db.prepare(`SELECT * FROM ${table.name} ORDER BY ${recorded.orderBy}`).all();
      expect(
        rows,
        `golden ${name}: table ${table.name} (projection ${projection.name}@${projection.version}) rebuilt from the recorded events differs from the recorded rows; ` +
          `if its evolve changed on purpose, bump the projection's version, then ${REDERIVE}`,
      ).toStrictEqual(recorded.rows);
    }
    expect(tables.length, `golden ${name}: no projection table was compared`).toBeGreaterThan(0);
  });

  it('passes verifyProjections', () => {
    expectVerifyOk(runtime.db);
  });
});
