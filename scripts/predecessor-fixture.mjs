#!/usr/bin/env node
/**
 * The database @hasna/loops 0.3.1 wrote (../shared/fixtures/seed-0.3.1/loops.db, made with
 * ../shared/anchors/seed.sh: see its README), as SQL text in test/fixtures/predecessor/seed-0.3.1.sql:
 * its schema exactly as sqlite_master holds it, and every row. The import tests rebuild the file
 * from it (test/helpers/predecessor.ts), so CI needs nothing outside the repository and no database
 * is committed.
 *
 *   node scripts/predecessor-fixture.mjs           write the .sql from the shared database
 *   node scripts/predecessor-fixture.mjs --check   exit 1 if the .sql is not what it would write
 */
import Database from 'better-sqlite3';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SOURCE = resolve(ROOT, '..', 'shared', 'fixtures', 'seed-0.3.1', 'loops.db');
const OUT = join(ROOT, 'test', 'fixtures', 'predecessor', 'seed-0.3.1.sql');

function literal(v) {
  if (v === null) return 'NULL';
  if (typeof v === 'number' || typeof v === 'bigint') return String(v);
  if (Buffer.isBuffer(v)) return `X'${v.toString('hex')}'`;
  return `'${String(v).replace(/'/g, "''")}'`;
}

export function dump(file) {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const lines = ['-- @hasna/loops 0.3.1 database, written by the predecessor itself (see scripts/predecessor-fixture.mjs)', 'BEGIN;'];
    const objects = db.prepare("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY type = 'index', rowid").all();
    for (const o of objects.filter((o) => o.type === 'table')) lines.push(`${o.sql};`);
    for (const o of objects.filter((o) => o.type === 'table')) {
      for (const row of db.prepare(`SELECT * FROM "${o.name}" ORDER BY rowid`).raw().all()) lines.push(`INSERT INTO "${o.name}" VALUES (${row.map(literal).join(', ')});`);
    }
    for (const o of objects.filter((o) => o.type !== 'table')) lines.push(`${o.sql};`);
    lines.push('COMMIT;', '');
    return lines.join('\n');
  } finally {
    db.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  if (!existsSync(SOURCE)) {
    console.error(`predecessor-fixture: ${SOURCE} not found (the shared fixtures sit next to the repository)`);
    process.exit(2);
  }
  const text = dump(SOURCE);
  if (process.argv.includes('--check')) {
    const same = existsSync(OUT) && readFileSync(OUT, 'utf8') === text;
    console.log(same ? `ok: ${OUT} is current` : `stale: ${OUT} differs from ${SOURCE}`);
    process.exit(same ? 0 : 1);
  }
  writeFileSync(OUT, text);
  console.log(`wrote ${OUT} (${text.length} bytes)`);
}
