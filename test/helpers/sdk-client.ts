/**
 * SDK tests' shared pieces: a `LoopsClient` on a fresh data directory (closed when the test ends)
 * and the error a promise rejects with.
 */
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import type { Clock } from '../../src/runtime/clock.js';
import { LoopsClient, type LoopsError } from '../../src/sdk.js';
import { tempDir } from './tmp.js';

/** A client of `<a new temp dir>/data` (or `<root>/data`), closed when the current test finishes. */
export function sdkClient(options: { prefix?: string; root?: string; runnerId?: string; clock?: Clock; labels?: string[] } = {}): { client: LoopsClient; dataDir: string; root: string } {
  const root = options.root ?? tempDir(options.prefix ?? 'loops-sdk-');
  const dataDir = join(root, 'data');
  const c = new LoopsClient({ dataDir, runnerId: options.runnerId ?? 'sdk-test:1:r', ...(options.clock ? { clock: options.clock } : {}), ...(options.labels ? { labels: options.labels } : {}) });
  onTestFinished(() => c.close());
  return { client: c, dataDir, root };
}

/** The error `promise` rejects with; fails the test when it resolves. */
export async function rejection(promise: Promise<unknown>): Promise<LoopsError> {
  try {
    await promise;
  } catch (error) {
    return error as LoopsError;
  }
  throw new Error('expected a rejection');
}
