import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { openRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { systemClock, type Clock } from '../../src/runtime/clock.js';
import { killGroupIfAlive } from './proc.js';
import { dropSchemas, PG_URL, testSchemaName } from './pg.js';
import { chooseStore } from '../../src/runtime/store-choice.js';

/** A fresh directory under the OS temp dir; not removed automatically. */
export function makeTempDir(prefix = 'loops-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/** A fresh temp directory, removed when the current test finishes. */
export function tempDir(prefix?: string): string {
  const dir = makeTempDir(prefix);
  onTestFinished(() => removeDir(dir));
  return dir;
}

export interface TestRuntime extends Runtime {
  /** The temp directory holding `dataDir`. */
  root: string;
}

/**
 * Opens a runtime on a fresh data directory (not yet existing, so openRuntime creates it).
 * LOOPS_TEST_STORE=postgres (the `postgres` project of vitest.config.ts) puts it on a PostgreSQL
 * schema of its own (test/helpers/pg.ts), which the data directory then remembers: a second
 * runtime opened on it uses the same store. The schema is dropped when the runtime is closed.
 */
export async function openTestRuntime(options: { clock?: Clock; runnerId?: string; root?: string; labels?: string[] } = {}): Promise<TestRuntime> {
  const root = options.root ?? makeTempDir();
  const schema = process.env.LOOPS_TEST_STORE === 'postgres' ? testSchemaName() : null;
  const runtime = await openRuntime({
    dataDir: join(root, 'data'),
    clock: options.clock ?? systemClock,
    runnerId: options.runnerId ?? 'test-host:1:runner',
    ...(options.labels ? { labels: options.labels } : {}),
    // Runs are forked from the test's own process (inline), so which path a run takes does not
    // depend on timing; LOOPS_TEST_SPAWNER=helper runs a suite's spawns through the spawner helper
    // (the spawner-helper project); the default `auto` choice is tested in spawner-auto.int.
    spawner: process.env.LOOPS_TEST_SPAWNER === 'helper' ? ('helper' as const) : ('inline' as const),
    ...(schema ? { store: chooseStore({ LOOPS_STORE: `${PG_URL}?schema=${schema}` }) } : {}),
  });
  let closed = false;
  const closeRuntime = runtime.close;
  return Object.assign(runtime, {
    root,
    close() {
      if (closed) return;
      closed = true;
      closeRuntime();
      if (!options.root) removeDir(root);
      if (schema) void dropSchemas([schema]).catch(() => {});
    },
  });
}

/**
 * `openTestRuntime`, closed and removed when the current test finishes; any process group a run
 * spawned that is still alive then (only after a failure) is killed.
 */
export async function useRuntime(options: { clock?: Clock; runnerId?: string; labels?: string[] } = {}): Promise<TestRuntime> {
  const runtime = await openTestRuntime(options);
  const groups: number[] = [];
  const sub = runtime.log.events$.subscribe((e) => {
    if (e.type === 'process.spawned') groups.push((e.data as { pgid: number }).pgid);
  });
  onTestFinished(() => {
    sub.unsubscribe();
    for (const pgid of groups) killGroupIfAlive(pgid);
    runtime.close();
  });
  return runtime;
}
