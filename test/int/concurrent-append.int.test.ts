/**
 * Two real processes append to one stream with the same expected version at (nearly) the same
 * moment: exactly one wins, the other gets ConcurrencyConflictError. Both open the log, say
 * "ready", and block on stdin; the barrier is one write to both stdins.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/events/db.js';
import { SqliteEventLog } from '../../src/events/sqlite-log.js';
import { ensureCoreBuilt } from '../helpers/build.js';
import { fixture } from '../helpers/fixtures.js';
import { tempDir } from '../helpers/tmp.js';

interface Writer {
  child: ChildProcessWithoutNullStreams;
  lines: string[];
  ready: Promise<void>;
  exit: Promise<number | null>;
}

function startWriter(file: string, streamId: string, expected: number, label: string): Writer {
  const child = spawn(process.execPath, [fixture('append-once.mjs'), file, streamId, String(expected), label], { stdio: 'pipe' });
  const lines: string[] = [];
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const rl = createInterface({ input: child.stdout });
  const ready = new Promise<void>((resolve, reject) => {
    rl.on('line', (line) => {
      lines.push(line);
      if (line === 'ready') resolve();
    });
    child.once('exit', (code) => reject(new Error(`${label} exited (${code}) before ready: ${stderr}`)));
  });
  const exit = once(child, 'exit').then(([code]) => code as number | null);
  return { child, lines, ready, exit };
}

beforeAll(() => {
  // dist/ is build output: (re)build the core when any of it is missing or older than src.
  ensureCoreBuilt();
}, 60_000);

describe('two processes racing on one stream', () => {
  it('exactly one append with the same expected version succeeds; the other reports a conflict', async () => {
    const file = join(tempDir(), 'loops.db');
    const db = openDatabase(file);
    const log = new SqliteEventLog(db);
    await log.append('loop:race', [{ type: 'loop.paused', data: { reason: 'seed' }, at: new Date().toISOString() }], {
      expectedVersion: 0,
      kind: 'loop',
    });

    for (let round = 0; round < 3; round++) {
      const version = (await log.streamInfo('loop:race'))!.version;
      const a = startWriter(file, 'loop:race', version, `a${round}`);
      const b = startWriter(file, 'loop:race', version, `b${round}`);
      await Promise.all([a.ready, b.ready]);
      a.child.stdin.write('go\n');
      b.child.stdin.write('go\n');
      const [codeA, codeB] = await Promise.all([a.exit, b.exit]);

      expect([codeA, codeB].sort()).toEqual([0, 3]);
      const [winner, loser, winnerLabel] = codeA === 0 ? [a, b, `a${round}`] : [b, a, `b${round}`];
      expect(winner.lines).toEqual(['ready', `ok ${version + 1}`]);
      expect(loser.lines).toEqual([
        'ready',
        `conflict stream loop:race is at version ${version + 1}, expected ${version}: another writer appended first`,
      ]);

      // The log holds exactly one new event, from the winner.
      const stream = await log.readStream('loop:race');
      expect(stream.map((e) => e.version)).toEqual(Array.from({ length: version + 1 }, (_, i) => i + 1));
      expect(stream.at(-1)!.meta.runnerId).toBe(winnerLabel);
      expect(stream.at(-1)!.data).toEqual({ reason: winnerLabel });
    }
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    db.close();
  });
});
