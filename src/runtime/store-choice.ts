/**
 * Which store a process uses (issue 15): the embedded SQLite database of its data directory (the
 * default), or a PostgreSQL log shared by a fleet, named by `LOOPS_STORE` (`loops daemon --store`
 * sets it for the daemon):
 *
 *   LOOPS_STORE=postgres://user@db.example:5432/loops?schema=team   (schema: default `loops`)
 *
 * With PostgreSQL, the log, the projections and the leases are in the database, and the data
 * directory keeps this host's read replica (`pg-<schema>.db`, src/runtime/replica.ts), its runs'
 * output files and its daemon's files — and remembers its store (`store.json`: the URL without
 * its password, and the schema), so that every later command on that data directory uses the
 * same store without `LOOPS_STORE` (a daemon started with `--store`, then `loops list` on its
 * host). `LOOPS_STORE=sqlite` overrides a remembered store for one command; deleting `store.json`
 * forgets it. A password in the URL is used to connect and never written anywhere or shown;
 * `PGPASSWORD` or `~/.pgpass` keep it out of the URL altogether (and serve the remembered store).
 */
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { UsageError, ValidationError } from '../events/errors.js';

export type StoreChoice =
  | { kind: 'sqlite' }
  | {
      kind: 'postgres';
      /** The URL to connect with (the `schema` parameter taken out). */
      url: string;
      schema: string;
      /** The URL without its password, for messages and `daemon status`. */
      where: string;
    };

const DEFAULT_SCHEMA = 'loops';

/**
 * The store `LOOPS_STORE` names, else the one the data directory remembers (`store.json`), else
 * SQLite. `LOOPS_STORE=sqlite` (or empty) is SQLite whatever the data directory remembers.
 */
export function chooseStore(env: NodeJS.ProcessEnv = process.env, dataDir?: string): StoreChoice {
  const given = env.LOOPS_STORE;
  if (given === undefined && dataDir !== undefined) {
    const remembered = rememberedStore(dataDir);
    if (remembered !== null) return parseStore(remembered, `${join(dataDir, STORE_FILE)}`);
  }
  return parseStore(given ?? '', 'LOOPS_STORE');
}

const STORE_FILE = 'store.json';

/** The store a data directory remembers, as a URL (no password), or null. */
function rememberedStore(dataDir: string): string | null {
  const file = join(dataDir, STORE_FILE);
  if (!existsSync(file)) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ValidationError(`${file} is not valid JSON (${(error as Error).message})`, { hint: `fix it, or delete it to use the data directory's own SQLite database` });
  }
  const store = (parsed as { store?: unknown } | null)?.store;
  if (typeof store !== 'string') throw new ValidationError(`${file} has no "store" URL`, { hint: `delete it to use the data directory's own SQLite database` });
  return store;
}

/**
 * Remembers a PostgreSQL store in the data directory (written when a runtime first opens it there;
 * never with a password), so later commands there use it without `LOOPS_STORE`.
 */
export function rememberStore(dataDir: string, choice: Extract<StoreChoice, { kind: 'postgres' }>): void {
  const text = `${JSON.stringify({ store: storeUrl(choice) }, null, 2)}\n`;
  const file = join(dataDir, STORE_FILE);
  if (existsSync(file) && readFileSync(file, 'utf8') === text) return;
  writeFileSync(`${file}.tmp`, text, { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
}

/**
 * Makes a data directory forget the PostgreSQL store it remembers (`store.json`), so later
 * commands there use its own SQLite database again (`loops store copy --to sqlite --switch`).
 * Returns whether there was one.
 */
export function forgetStore(dataDir: string): boolean {
  const file = join(dataDir, STORE_FILE);
  if (!existsSync(file)) return false;
  rmSync(file);
  return true;
}

/** A store named by `raw` (a PostgreSQL URL, `sqlite` or empty), `from` naming where it was given, for messages. */
export function parseStore(raw: string, from: string): StoreChoice {
  const value = raw.trim();
  if (value === '' || value === 'sqlite') return { kind: 'sqlite' };
  if (!/^postgres(ql)?:\/\//i.test(value)) {
    throw new UsageError(`${from}: ${JSON.stringify(hidePassword(value))} is not a store loops knows`, {
      hint: 'unset it (or set it to sqlite) for the data directory’s own database, or give a PostgreSQL URL: postgres://user@host:5432/database?schema=loops',
    });
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError(`${from}: not a valid URL: ${JSON.stringify(hidePassword(value))}`, {
      hint: 'e.g. postgres://loops@db.example:5432/loops?schema=loops (percent-encode special characters in the user or password)',
    });
  }
  const schema = url.searchParams.get('schema') ?? DEFAULT_SCHEMA;
  url.searchParams.delete('schema');
  const where = new URL(url.href);
  if (where.password) where.password = '';
  return { kind: 'postgres', url: url.href, schema, where: where.href };
}

/** The replica file of a PostgreSQL store in a data directory: one per schema. */
export function replicaFileName(schema: string): string {
  return `pg-${schema}.db`;
}

/** A PostgreSQL store as a URL without its password, with its schema: what `store.json` holds, and messages show. */
export function storeUrl(choice: Extract<StoreChoice, { kind: 'postgres' }>): string {
  const where = new URL(choice.where);
  where.searchParams.set('schema', choice.schema);
  return where.href;
}

/** `value` with the password of a URL in it replaced by `***` (for messages). */
export function hidePassword(value: string): string {
  return value.replace(/^([a-z]+:\/\/[^:/@]*:)[^@]*@/i, '$1***@');
}
