/**
 * A log written by the first event format (loop.created / run.claimed v1) opens, rebuilds its
 * projections, replays and runs under the current code: old events are upcast when read, never
 * rewritten.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findLoop, listRuns } from '../../src/runtime/queries/loops.js';
import { replayStream } from '../../src/runtime/admin/replay.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { openRuntime } from '../../src/runtime/runtime.js';
import { verifyProjections } from '../../src/runtime/admin/projections.js';
import { tempDir } from '../helpers/tmp.js';

describe('an old log (v1 events)', () => {
  it('opens, rebuilds, replays and keeps running', async () => {
    const dataDir = join(tempDir(), 'data');
    (await openRuntime({ dataDir })).close();
    const db = new Database(join(dataDir, 'loops.db'));
    const at = '2026-11-30T13:42:22.000Z';
    const created = {
      loopId: 'loop_old',
      name: 'old',
      description: null,
      schedule: { kind: 'every', everyMs: 3_600_000, anchorAt: at },
      target: { kind: 'command', command: 'echo still here', args: [], shell: true, cwd: null, env: {} },
      policies: { timeoutMs: null, killGraceMs: 5000 },
      nextRunAt: '2026-11-30T14:42:22.000Z',
    };
    db.prepare("INSERT INTO streams VALUES ('loop:loop_old', 'loop', 1, 'loops.loop', 1, ?, ?)").run(at, at);
    db.prepare("INSERT INTO events (stream_id, version, type, v, data, meta, at, state) VALUES ('loop:loop_old', 1, 'loop.created', 1, ?, '{}', ?, '\"active\"')").run(
      JSON.stringify(created),
      at,
    );
    db.prepare('DELETE FROM projections').run();
    db.close();

    const runtime = await openRuntime({ dataDir });
    try {
      const loop = findLoop(runtime.db, 'old');
      expect(loop.timing).toEqual({ tz: 'UTC', jitterMs: null, startsAt: null, expiresAt: null, maxRuns: null });
      expect(loop.policies).toMatchObject({ overlap: 'skip', catchUp: 'latest', attempts: 1 });
      expect((await replayStream(runtime.log, 'loop:loop_old')).ok).toBe(true);
      const run = await runNow(runtime, 'old');
      expect(run.status).toBe('succeeded');
      expect(listRuns(runtime.db, {})).toHaveLength(1);
      expect(verifyProjections(runtime.db).ok).toBe(true);
    } finally {
      runtime.close();
    }
  });
});
