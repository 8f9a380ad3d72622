import Database from 'better-sqlite3';
import { chmodSync, existsSync, mkdirSync, readdirSync, readlinkSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LOG_FORMAT_VERSION, openDatabase, refuseForeign } from '../../src/events/db.js';
import { FormatVersionError } from '../../src/events/errors.js';
import { createCommandLoop } from '../../src/runtime/loops/commands.js';
import { openRuntime } from '../../src/runtime/runtime.js';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { databaseFile } from '../../src/runtime/paths.js';
import { staleProjections } from '../../src/runtime/store.js';
import { tempDir } from '../helpers/tmp.js';

const mode = (path: string) => statSync(path).mode & 0o777;

describe('opening a data directory', () => {
  it('creates the data directory 0700 and the database 0600 (WAL files too)', async () => {
    const dataDir = join(tempDir(), 'nested', 'data');
    const runtime = await openRuntime({ dataDir, clock: new SimulatedClock() });
    try {
      await createCommandLoop(runtime, { name: 'a', command: 'true', schedule: { manual: true, tz: 'UTC' } });
      expect(mode(dataDir)).toBe(0o700);
      const file = databaseFile(dataDir);
      expect(mode(file)).toBe(0o600);
      for (const suffix of ['-wal', '-shm']) {
        if (existsSync(file + suffix)) expect(mode(file + suffix)).toBe(0o600);
      }
      expect(existsSync(file + '-wal')).toBe(true);
    } finally {
      runtime.close();
    }
  });

  it('tightens an existing, too-open data directory to 0700', async () => {
    const dataDir = join(tempDir(), 'data');
    mkdirSync(dataDir);
    chmodSync(dataDir, 0o755);
    const runtime = await openRuntime({ dataDir });
    runtime.close();
    expect(mode(dataDir)).toBe(0o700);
  });

  it('sets WAL, synchronous=FULL, a busy timeout and records the log format version', async () => {
    const runtime = await openRuntime({ dataDir: join(tempDir(), 'data') });
    try {
      expect(runtime.db.pragma('journal_mode', { simple: true })).toBe('wal');
      expect(runtime.db.pragma('synchronous', { simple: true })).toBe(2);
      expect(runtime.db.pragma('busy_timeout', { simple: true })).toBe(5000);
      // Format 1: only an archive (loops prune --archive) raises it to 2, which LOG_FORMAT_VERSION reads.
      expect(runtime.db.pragma('user_version', { simple: true })).toBe(1);
      expect(LOG_FORMAT_VERSION).toBe(2);
      expect(staleProjections(runtime.db)).toEqual([]);
    } finally {
      runtime.close();
    }
  });

  // SQLite keeps what a savepoint would restore in memory up to 64 KiB, then in a temporary file
  // it creates, writes page by page and deletes (named etilqs_*); the log's group commit opens a
  // savepoint per append. The file shows as an open descriptor while the transaction runs.
  it.runIf(existsSync('/proc/self/fd'))('keeps a savepoint\'s journal in memory, never in a temporary file', () => {
    const openTempFiles = () =>
      readdirSync('/proc/self/fd').filter((fd) => {
        try {
          return /etilqs_/.test(readlinkSync(`/proc/self/fd/${fd}`));
        } catch {
          return false;
        }
      }).length;
    const duringSavepoint = (db: Database.Database) => {
      db.exec('CREATE TABLE scratch (id INTEGER PRIMARY KEY, pad TEXT NOT NULL)');
      const insert = db.prepare('INSERT INTO scratch (pad) VALUES (?)');
      db.transaction(() => {
        for (let i = 0; i < 400; i++) insert.run('x'.repeat(500));
      })();
      db.exec('BEGIN IMMEDIATE');
      db.exec('SAVEPOINT s');
      // ~50 pages changed inside the savepoint: past the 64 KiB kept in memory by default.
      db.exec('UPDATE scratch SET pad = upper(pad)');
      const open = openTempFiles();
      db.exec('ROLLBACK');
      return open;
    };
    const dir = tempDir();
    // The check can fail: a connection with SQLite's default settings makes the file.
    const plain = new Database(join(dir, 'plain.db'));
    plain.pragma('journal_mode = WAL');
    try {
      expect(duringSavepoint(plain)).toBeGreaterThan(0);
    } finally {
      plain.close();
    }
    const db = openDatabase(join(dir, 'loops.db'));
    try {
      expect(duringSavepoint(db)).toBe(0);
    } finally {
      db.close();
    }
  });

  it('reopening keeps the data', async () => {
    const dataDir = join(tempDir(), 'data');
    const first = await openRuntime({ dataDir });
    await createCommandLoop(first, { name: 'keep-me', command: 'true', schedule: { manual: true, tz: 'UTC' } });
    first.close();
    const second = await openRuntime({ dataDir });
    try {
      expect(second.db.prepare('SELECT name FROM loops').all()).toEqual([{ name: 'keep-me' }]);
      expect(await second.log.headPosition()).toBe(1);
    } finally {
      second.close();
    }
  });

  it('two processes opening a new data directory at once: the one that read the format before the other created the tables still opens it', () => {
    // `loops daemon start` and `loops create` at once on a new directory (CI saw the create fail with
    // "is not a loops database"): one read the format (0, nothing there yet), the other then created
    // the tables and the format in one transaction, and the first found those tables.
    const file = databaseFile(join(tempDir(), 'data'));
    mkdirSync(join(file, '..'), { recursive: true });
    const first = new Database(file);
    try {
      expect(first.pragma('user_version', { simple: true })).toBe(0);
      openDatabase(file).close(); // the other process: tables and format, committed
      expect(() => refuseForeign(first, file)).not.toThrow();
      expect(first.open).toBe(true);
    } finally {
      first.close();
    }
    // A database whose tables came with no format is still refused, and nothing is written into it.
    const foreignFile = join(tempDir(), 'foreign.db');
    const foreign = new Database(foreignFile);
    foreign.exec('CREATE TABLE events (id INTEGER PRIMARY KEY)');
    expect(() => refuseForeign(foreign, foreignFile)).toThrow(/is not a loops database \(it holds tables loops did not make: events\)/);
    expect(() => openDatabase(foreignFile)).toThrow(FormatVersionError);
  });

  it('refuses a database written by a newer log format with FormatVersionError', async () => {
    const dataDir = join(tempDir(), 'data');
    (await openRuntime({ dataDir })).close();
    const raw = new Database(databaseFile(dataDir));
    raw.pragma(`user_version = ${LOG_FORMAT_VERSION + 1}`);
    raw.close();

    const error = await openRuntime({ dataDir }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(FormatVersionError);
    expect(error).toMatchObject({ code: 'format_version' });
    expect((error as Error).message).toContain(`uses log format ${LOG_FORMAT_VERSION + 1}`);
    expect((error as FormatVersionError).hint).toMatch(/upgrade loops/);
    expect(() => openDatabase(databaseFile(dataDir))).toThrow(FormatVersionError);
    // The refused database is left as it was.
    const check = new Database(databaseFile(dataDir), { readonly: true });
    expect(check.pragma('user_version', { simple: true })).toBe(LOG_FORMAT_VERSION + 1);
    check.close();
  });

  it('a projection built by another version is rebuilt from the log on open', async () => {
    const dataDir = join(tempDir(), 'data');
    const first = await openRuntime({ dataDir });
    await createCommandLoop(first, { name: 'rebuilt', command: 'true', schedule: { manual: true, tz: 'UTC' } });
    first.db.exec("DELETE FROM loops; UPDATE projections SET version = 0 WHERE name = 'loops'");
    expect(staleProjections(first.db)).toEqual(['loops']);
    first.close();
    const second = await openRuntime({ dataDir });
    try {
      expect(staleProjections(second.db)).toEqual([]);
      expect(second.db.prepare('SELECT name, status FROM loops').all()).toEqual([{ name: 'rebuilt', status: 'active' }]);
    } finally {
      second.close();
    }
  });
});
