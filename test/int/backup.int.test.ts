/**
 * `loops backup` / `loops restore` on real data directories:
 *  - a backup is a consistent copy (0600, never over a file) that restores into an empty data
 *    directory whose every stream replays and whose tables equal a rebuild;
 *  - restore refuses a live store (unless force, which keeps the old database beside it), a file
 *    that is not a loops database, a damaged one, and one of a newer log format — changing nothing.
 */
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { FormatVersionError, LoopsError, UsageError } from '../../src/events/errors.js';
import { backup, restore } from '../../src/runtime/admin/backup.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { createCommandLoop } from '../../src/runtime/loops/commands.js';
import { openRuntime } from '../../src/runtime/runtime.js';
import { expectDataDirInvariants } from '../helpers/invariants.js';
import { openTestRuntime, tempDir, useRuntime } from '../helpers/tmp.js';

const manual = { manual: true, tz: 'UTC' } as const;
const events = (file: string) => {
  const db = new Database(file, { readonly: true });
  try {
    return (db.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number }).n;
  } finally {
    db.close();
  }
};

/** A data directory with a loop and three runs; `keep`: it outlives the runtime's close. */
async function source(keep = false) {
  const runtime = keep ? await openTestRuntime({ root: tempDir() }) : await useRuntime();
  await createCommandLoop(runtime, { name: 'job', command: 'echo hi', schedule: manual });
  for (let i = 0; i < 3; i++) await runNow(runtime, 'job');
  return runtime;
}

describe('backup and restore', () => {
  it('a backup is a consistent 0600 copy that restores into an empty data directory, every stream replaying', async () => {
    const runtime = await source();
    const file = join(tempDir(), 'loops-backup.db');
    const head = await runtime.log.headPosition();
    const report = await backup(runtime.dataDir, file);
    expect(report).toMatchObject({ file, events: head, format: 1 });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    // What happens after the backup is not in it.
    await runNow(runtime, 'job');
    expect(events(file)).toBe(head);
    await expect(backup(runtime.dataDir, file)).rejects.toThrow(UsageError);

    const target = join(tempDir(), 'restored');
    const restored = await restore(target, file);
    expect(restored).toMatchObject({ events: head, replaced: null, rebuilt: false });
    expect(statSync(join(target, 'loops.db')).mode & 0o777).toBe(0o600);
    expectDataDirInvariants(target);
    const again = await openRuntime({ dataDir: target });
    try {
      expect((await again.log.headPosition())).toBe(head);
    } finally {
      again.close();
    }
  });

  it('restore refuses a live store unless forced, and then keeps the old database beside it', async () => {
    const runtime = await source(true);
    const file = join(tempDir(), 'b.db');
    await backup(runtime.dataDir, file);
    await runNow(runtime, 'job');
    const live = await runtime.log.headPosition();
    runtime.close();
    const refused = await restore(runtime.dataDir, file).then(() => null, (e: unknown) => e);
    expect(refused).toBeInstanceOf(UsageError);
    expect((refused as Error).message).toBe(`loops restore: ${join(runtime.dataDir, 'loops.db')} already holds a log (${live} events)`);
    expect(events(join(runtime.dataDir, 'loops.db'))).toBe(live);
    const forced = await restore(runtime.dataDir, file, { force: true, now: Date.parse('2026-12-01T20:00:00Z') });
    expect(forced.replaced).toBe(join(runtime.dataDir, 'loops.db.before-restore-20261201T200000Z'));
    expect(events(forced.replaced!)).toBe(live);
    expect(events(join(runtime.dataDir, 'loops.db'))).toBe(forced.events);
    expectDataDirInvariants(runtime.dataDir);
  });

  it('restore refuses what is not a sound loops database of a format it reads, and changes nothing', async () => {
    const runtime = await source();
    const good = join(tempDir(), 'good.db');
    await backup(runtime.dataDir, good);
    const target = join(tempDir(), 'target');

    const text = join(tempDir(), 'notes.txt');
    writeFileSync(text, 'not a database at all, just some text that is long enough\n'.repeat(200));
    await expect(restore(target, text)).rejects.toThrow(/is not a SQLite database/);

    const damaged = join(tempDir(), 'damaged.db');
    const bytes = readFileSync(good);
    // Overwrite pages past the header: the integrity check fails.
    for (let i = 4096 * 2; i < Math.min(bytes.length, 4096 * 6); i++) bytes[i] = 0x5a;
    writeFileSync(damaged, bytes);
    const error = await restore(target, damaged).then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(LoopsError);
    expect((error as Error).message).toMatch(/(is damaged \(integrity check|is not a SQLite database)/);

    const newer = join(tempDir(), 'newer.db');
    writeFileSync(newer, readFileSync(good));
    const db = new Database(newer);
    db.pragma('user_version = 99');
    db.close();
    await expect(restore(target, newer)).rejects.toThrow(FormatVersionError);
    await expect(restore(target, join(tempDir(), 'missing.db'))).rejects.toThrow(/cannot open/);
    expect(existsSync(join(target, 'loops.db'))).toBe(false);
  });
});
