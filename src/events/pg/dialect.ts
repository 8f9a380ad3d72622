/**
 * The projections' SQL on PostgreSQL: the one place that says how SQL written for SQLite
 * (src/projections, run by both stores) runs on PostgreSQL. In order of preference:
 *
 *  1. **The projections write SQL both accept** (SQLite ≥ 3.40; PostgreSQL 15 is the one tested):
 *     `COALESCE`, `CASE`, scalar subqueries, a subquery in FROM with an alias (PostgreSQL before 16
 *     requires one), `CAST(… AS BIGINT)` (SQLite reads BIGINT as INTEGER; PostgreSQL's INTEGER is
 *     32-bit), `ON CONFLICT … DO UPDATE` where an upsert is meant, and no `INSERT OR REPLACE` (an
 *     archived stream's rows replace its rows by DELETE then INSERT: src/projections/types.ts).
 *     Nothing is done here for them.
 *  2. **Statements are not rewritten** beyond the placeholders (`?` → `$n`, sql.ts
 *     `pgPlaceholders`). The three SQLite functions the projections use that have no form both
 *     accept are defined in each store's schema instead, by its migration (`SQLITE_FUNCTIONS`,
 *     below), with SQLite's meaning — so the statements stay one text, and a new use of them needs
 *     nothing here:
 *      - `julianday(text)`: the Julian day of an ISO-8601 instant, in numeric arithmetic (20
 *        decimals: `(julianday(a) - julianday(b)) * 86400000` rounds to the exact milliseconds
 *        apart, as SQLite's does). A zone-less instant is UTC, as in SQLite; NULL gives NULL. A
 *        text that is not a time is an error (SQLite gives NULL): the log's times are checked ISO.
 *      - `max(bigint, bigint)`: SQLite's scalar `MAX(a, b)` (NULL when either is NULL, which
 *        PostgreSQL's GREATEST is not). The aggregate `max(x)` is untouched (it takes one argument).
 *      - `group_concat(text, text)`: SQLite's aggregate — the non-NULL values joined with the
 *        separator, in the order they come (a sorted subquery's), NULL when there are none.
 *     Parameters: node-pg sends them untyped, and PostgreSQL infers each one's type from where it
 *     stands — `? = 'failed'` text, `x + ?` x's type, `COALESCE(?, col)` col's, a column's value
 *     its column's type — which covers every statement of the projections today (the golden logs
 *     and test/int/pg-projections.int.test.ts run them all). One whose type nothing implies
 *     (`? IS NULL`, `SELECT ?`) fails on PostgreSQL ("could not determine data type of
 *     parameter"): write it `CAST(? AS TEXT)` in the projection, which SQLite accepts too.
 *  3. **DDL is translated** by `pgDdl`: INTEGER → BIGINT (SQLite's integers are 64-bit; row
 *     counts, byte counts and milliseconds pass 2^31), `WITHOUT ROWID` dropped, an index on an
 *     expression given PostgreSQL's extra parentheses, `TEMP` for a scratch copy (verify).
 *
 * Rows read back: node-pg gives BIGINT as a JS number (connect.ts's type parser), so a projection
 * row on PostgreSQL has the types it has on SQLite (numbers and strings, NULL as null).
 */
import { ValidationError } from '../errors.js';

/**
 * The SQLite functions the projections use, in PostgreSQL, created in the store's schema (the
 * inline statements find them through the connections' search_path). Idempotent.
 */
export const SQLITE_FUNCTIONS = `
  CREATE OR REPLACE FUNCTION julianday(t text) RETURNS numeric
    LANGUAGE sql STABLE STRICT PARALLEL SAFE SET timezone TO 'UTC'
    AS $$ SELECT extract(epoch FROM t::timestamptz)::numeric(32, 20) / 86400 + 2440587.5 $$;
  CREATE OR REPLACE FUNCTION max(a bigint, b bigint) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT GREATEST(a, b) $$;
  CREATE OR REPLACE FUNCTION loops_group_concat_step(acc text, value text, sep text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT CASE WHEN value IS NULL THEN acc WHEN acc IS NULL THEN value ELSE acc || sep || value END $$;
  CREATE OR REPLACE AGGREGATE group_concat(text, text) (SFUNC = loops_group_concat_step, STYPE = text);
`;

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;
const INDEX = /^(\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?\w+\s+ON\s+\w+\s*)\(/i;

/**
 * A projection's DDL statement (SQLite's) as PostgreSQL's: the same tables, columns, constraints
 * and indexes. `temp`: the table is created as a temporary one (verify's scratch copy, which the
 * projections' unqualified names then find first). SQLite-only words with no translation here
 * (AUTOINCREMENT, STRICT tables, NOCASE) are refused rather than half-translated.
 */
export function pgDdl(sql: string, options: { temp?: boolean } = {}): string {
  const unsupported = /\bAUTOINCREMENT\b|\bNOCASE\b|\)\s*STRICT\b/i.exec(sql);
  if (unsupported) {
    throw new ValidationError(`a projection's DDL uses ${unsupported[0].trim()}, which the PostgreSQL store does not translate: ${sql}`, {
      hint: 'write the DDL in the SQL both SQLite and PostgreSQL accept, or teach src/events/pg/dialect.ts the translation',
    });
  }
  let out = sql.replace(/\bINTEGER\b/g, 'BIGINT').replace(/\)\s*WITHOUT\s+ROWID\s*$/i, ')');
  if (options.temp) out = out.replace(/^(\s*)CREATE\s+TABLE\b/i, '$1CREATE TEMP TABLE');
  const index = INDEX.exec(out);
  if (index) {
    const open = index[0].length - 1;
    const close = matchingParen(out, open);
    const columns = splitTopLevel(out.slice(open + 1, close)).map((column) => {
      const bare = column.trim();
      // A column (with its order) stays; an expression gets the parentheses PostgreSQL asks for.
      return /^[A-Za-z_][A-Za-z0-9_]*(\s+(ASC|DESC))?$/i.test(bare) ? bare : `(${bare})`;
    });
    out = `${out.slice(0, open)}(${columns.join(', ')})${out.slice(close + 1)}`;
  }
  return out;
}

/** The index of the parenthesis closing the one at `open`. */
function matchingParen(sql: string, open: number): number {
  let depth = 0;
  for (let i = open; i < sql.length; i++) {
    const c = sql[i]!;
    if (c === "'") {
      i = sql.indexOf("'", i + 1);
      if (i === -1) break;
    } else if (c === '(') depth++;
    else if (c === ')' && --depth === 0) return i;
  }
  throw new ValidationError(`a projection's DDL has unbalanced parentheses: ${sql}`);
}

/** `list` split at its top-level commas. */
function splitTopLevel(list: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < list.length; i++) {
    const c = list[i]!;
    if (c === "'") {
      const end = list.indexOf("'", i + 1);
      i = end === -1 ? list.length : end;
    } else if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) {
      parts.push(list.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(list.slice(start));
  return parts;
}

/** A projection's table or column name, checked before it is put in SQL (they come from code, but a typo should not become SQL). */
export function checkIdentifier(name: string, what: string): string {
  if (!IDENTIFIER.test(name)) throw new ValidationError(`${what} ${JSON.stringify(name)} is not a plain identifier (lower-case letters, digits, _)`);
  return name;
}
