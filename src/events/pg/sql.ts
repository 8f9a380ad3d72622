/**
 * The little SQL the PostgreSQL store needs to say differently: quoted names of its tables (each
 * store's schema), and the inline projections' SQLite placeholders (`?`) as PostgreSQL's (`$1`…).
 */
import { ValidationError } from '../errors.js';

/** A quoted identifier. */
export function ident(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** The store's tables, qualified with its schema (its own SQL never depends on search_path), and its NOTIFY channel. */
export interface Names {
  schema: string;
  events: string;
  streams: string;
  leases: string;
  logHead: string;
  migrations: string;
  /** Which version of each projection built its tables (projections.ts). */
  projections: string;
  runQueue: string;
  /** The LISTEN/NOTIFY channel of this schema's log (quoted). */
  channel: string;
}

export function namesFor(schema: string): Names {
  const s = ident(schema);
  return {
    schema,
    events: `${s}.events`,
    streams: `${s}.streams`,
    leases: `${s}.leases`,
    logHead: `${s}.log_head`,
    migrations: `${s}.loops_migrations`,
    projections: `${s}.projections`,
    runQueue: `${s}.run_queue`,
    channel: ident(`loops_events_${schema}`),
  };
}

/** The columns of `events`, in the order both stores read and write them. */
export const EVENT_COLUMNS = 'position, stream_id, version, type, v, data, meta, at, state';

/**
 * A statement used in more than one place, as a prepared statement: PostgreSQL keeps one text per
 * name on each connection, so a name is defined once, here.
 */
export function selectHead(names: Names): { name: string; text: string } {
  return { name: 'loops_head', text: `SELECT position FROM ${names.logHead}` };
}

export function selectLease(names: Names): { name: string; text: string } {
  return { name: 'loops_lease_get', text: `SELECT holder, token, expires_at FROM ${names.leases} WHERE name = $1` };
}

const translated = new Map<string, string>();

/**
 * `sql` (an inline projection's statement, written for SQLite) with its `?` placeholders numbered
 * for PostgreSQL (`$1`, `$2`, …), leaving `?` inside string literals, quoted names and comments
 * alone. Numbered SQLite placeholders (`?1`) are refused, with the statement.
 */
export function pgPlaceholders(sql: string): string {
  const known = translated.get(sql);
  if (known !== undefined) return known;
  let out = '';
  let n = 0;
  let i = 0;
  while (i < sql.length) {
    const c = sql[i]!;
    const next = sql[i + 1];
    if (c === "'" || c === '"') {
      // A literal or a quoted name, up to its closing quote (a doubled quote is an escaped one).
      let j = i + 1;
      for (;;) {
        if (j >= sql.length) break;
        if (sql[j] === c) {
          if (sql[j + 1] === c) j += 2;
          else break;
        } else j++;
      }
      out += sql.slice(i, j + 1);
      i = j + 1;
    } else if (c === '-' && next === '-') {
      const end = sql.indexOf('\n', i);
      const j = end === -1 ? sql.length : end;
      out += sql.slice(i, j);
      i = j;
    } else if (c === '/' && next === '*') {
      const end = sql.indexOf('*/', i + 2);
      const j = end === -1 ? sql.length : end + 2;
      out += sql.slice(i, j);
      i = j;
    } else if (c === '?') {
      if (next !== undefined && /[0-9]/.test(next)) {
        throw new ValidationError(`an inline projection's statement uses a numbered placeholder, which the PostgreSQL store does not translate: ${sql}`, {
          hint: 'write its placeholders as plain ? in the order of the params',
        });
      }
      out += `$${++n}`;
      i++;
    } else {
      out += c;
      i++;
    }
  }
  translated.set(sql, out);
  return out;
}
