import { defineConfig } from 'vitest/config';

const shared = { testTimeout: 30_000, hookTimeout: 30_000, pool: 'forks' as const };

export default defineConfig({
  test: {
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
    ],
  },
});
