/** `accounts`: the credentials profiles agent loops can run under (`loops accounts add`). */
import type { EventData } from '../events/catalog.js';
import type { StoredEvent } from '../events/types.js';
import { sql, type Projection } from './types.js';

export const accountsProjection: Projection = {
  name: 'accounts',
  version: 1,
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
  handles: new Set(['account.added', 'account.removed']),
  evolve(event: StoredEvent) {
    const id = event.streamId.slice('account:'.length);
    if (event.type === 'account.added') {
      const d = event.data as EventData<'account.added'>;
      return [
        sql(
          `INSERT INTO accounts (id, name, live_name, tool, dir, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'active', ?, ?)`,
          id,
          d.name,
          d.name,
          d.tool,
          d.dir,
          event.at,
          event.at,
        ),
      ];
    }
    return [sql(`UPDATE accounts SET status = 'removed', live_name = NULL, updated_at = ? WHERE id = ?`, event.at, id)];
  },
};
