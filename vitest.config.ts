import { spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

const shared = { testTimeout: 30_000, hookTimeout: 30_000, pool: 'forks' as const };

/**
 * The scenarios run again on PostgreSQL (issue 15: "the same end-to-end scenarios pass on SQLite
 * and on PostgreSQL"): LOOPS_TEST_STORE is read by test/helpers/tmp.ts, which puts each test
 * runtime on a schema of its own. Under CI always (no PostgreSQL is a failure there, as for the
 * store's own tests); elsewhere when the machine's PostgreSQL answers (LOOPS_TEST_PG_URL, default
 * 127.0.0.1:5432). LOOPS_HOST_ID: the test runtimes' runner ids (`test-host:<n>:…`) name this host, so
 * their runs are this host's to check and adopt (on a shared store only the host that ran a run
 * looks for its process). Not listed: the event store's own suites, which build their store
 * themselves — store-contract runs every case on both stores already; event-log and
 * concurrent-append are SQLite's (SqliteEventLog, its file, its locks).
 */
const POSTGRES_SCENARIOS = [
  'test/int/scheduler.int.test.ts',
  'test/int/overlap.int.test.ts',
  'test/int/retries.int.test.ts',
  'test/int/stranded.int.test.ts',
  'test/int/notify.int.test.ts',
  'test/int/stats.int.test.ts',
  'test/int/runs-on.int.test.ts',
  'test/int/run-now.int.test.ts',
  'test/int/daemon.int.test.ts',
  'test/int/actor.int.test.ts',
  'test/int/recovery.int.test.ts',
];
const pgAnswers = () => process.env.CI === 'true' || spawnSync('pg_isready', ['-q', '-d', process.env.LOOPS_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'], { timeout: 5000 }).status === 0;

export default defineConfig({
  test: {
    // At least two test files at once. Vitest's default (one fewer than the CPUs) ran the suite one
    // file at a time on a 2-core machine, and its longest files mostly wait on real clocks (daemons,
    // the fleet, the soak, chaos cycles): two at a time took the suite from 1,453 s to 876 s
    // (2026-12-03). A second CI run with two workers failed two tests that assumed an idle machine;
    // one of them had found a real bug (a hook recorded ran that never ran), since fixed.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    projects: [
      { test: { ...shared, name: 'all', include: ['test/**/*.test.ts'] } },
      // The runtime's run paths again with runs forked by the spawner helper (as the daemon runs
      // them) instead of from the test's own process: LOOPS_TEST_SPAWNER is read by test/helpers/tmp.ts.
      {
        test: {
          ...shared,
          name: 'spawner-helper',
          include: ['test/int/run-now.int.test.ts', 'test/int/recovery.int.test.ts', 'test/int/stats.int.test.ts', 'test/int/overlap.int.test.ts', 'test/int/retries.int.test.ts'],
          env: { LOOPS_TEST_SPAWNER: 'helper' },
        },
      },
      ...(pgAnswers() ? [{ test: { ...shared, name: 'postgres', include: POSTGRES_SCENARIOS, env: { LOOPS_TEST_STORE: 'postgres', LOOPS_HOST_ID: 'test-host' } } }] : []),
    ],
  },
});
