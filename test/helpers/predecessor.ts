/**
 * The database @hasna/loops 0.3.1 wrote itself (../shared/fixtures/seed-0.3.1: 6 loops, 2 runs,
 * the workflow `ship` at version 3 and one of its runs), rebuilt from its SQL text
 * (test/fixtures/predecessor/seed-0.3.1.sql, written by scripts/predecessor-fixture.mjs): the same
 * schema and rows, in a file of the test's own.
 */
import Database from 'better-sqlite3';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fixture } from './fixtures.js';

/** Writes the predecessor's database as `loops.db` in `dir`; returns its path. */
export function predecessorDatabase(dir: string): string {
  const file = join(dir, 'loops.db');
  const db = new Database(file);
  try {
    db.exec(readFileSync(fixture('predecessor/seed-0.3.1.sql'), 'utf8'));
  } finally {
    db.close();
  }
  return file;
}
