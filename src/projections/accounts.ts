/** `accounts`: the credentials profiles agent loops can run under (`loops accounts add`). */
import type { StoredEvent } from '../events/types.js';
import { defineProjection, sql, streamKey } from './types.js';
import { PROJECTION_VERSIONS } from './versions.js';

const accountIdOf = (event: StoredEvent) => streamKey(event, 'account');

export const accountsProjection = defineProjection({
  name: 'accounts',
  version: PROJECTION_VERSIONS.accounts,
  ddl: [
    `CREATE TABLE IF NOT EXISTS accounts (
      id         TEXT PRIMARY KEY,
      name       TEXT NOT NULL,
      -- The name while the account exists (unique); NULL once removed, so a name can be reused.
      live_name  TEXT,
      tool       TEXT NOT NULL,
      dir        TEXT NOT NULL,
      status     TEXT NOT NULL,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL
    ) WITHOUT ROWID`,
    `CREATE UNIQUE INDEX IF NOT EXISTS accounts_live_name ON accounts (live_name) WHERE live_name IS NOT NULL`,
  ],
  tables: [{ name: 'accounts', orderBy: 'id' }],
  on: {
    'account.added': (e) => [
      sql(
        `INSERT INTO accounts (id, name, live_name, tool, dir, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'active', ?, ?)`,
        accountIdOf(e),
        e.data.name,
        e.data.name,
        e.data.tool,
        e.data.dir,
        e.at,
        e.at,
      ),
    ],
    'account.removed': (e) => [
      sql(`UPDATE accounts SET status = 'removed', live_name = NULL, updated_at = ? WHERE id = ?`, e.at, accountIdOf(e)),
    ],
  },
});
