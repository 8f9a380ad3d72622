/**
 * `hosts`: one row per runner host that ever started a daemon — its current daemon's runner id,
 * pid and boot, the labels it runs loops for (`--runs-on`), and whether its daemon last started or
 * stopped. Whether that daemon is alive now is its daemon lease's to say (a killed daemon records
 * no stop): readers join the two (src/runtime/daemon/hosts.ts).
 */
import type { StoredEvent } from '../events/types.js';
import { defineProjection, sql, streamKey } from './types.js';
import { PROJECTION_VERSIONS } from './versions.js';

const hostIdOf = (event: StoredEvent) => streamKey(event, 'host');

export const hostsProjection = defineProjection({
  name: 'hosts',
  // v2: clock_offset_ms.
  version: PROJECTION_VERSIONS.hosts,
  ddl: [
    `CREATE TABLE IF NOT EXISTS hosts (
      id          TEXT PRIMARY KEY,
      runner_id   TEXT NOT NULL,
      -- JSON array of the labels its daemon was started with (its id is a label too, not listed).
      labels      TEXT NOT NULL,
      pid         INTEGER NOT NULL,
      boot_id     TEXT,
      version     TEXT NOT NULL,
      -- The database server's clock less the host's, measured at its daemon's start (shared store only).
      clock_offset_ms INTEGER,
      -- up: its daemon started and did not record a stop; down: it stopped.
      status      TEXT NOT NULL,
      started_at  TEXT NOT NULL,
      stopped_at  TEXT,
      updated_at  TEXT NOT NULL
    )`,
  ],
  tables: [{ name: 'hosts', orderBy: 'id' }],
  on: {
    'host.started': (e) => [
      sql(
        `INSERT INTO hosts (id, runner_id, labels, pid, boot_id, version, clock_offset_ms, status, started_at, stopped_at, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, 'up', ?, NULL, ?)
         ON CONFLICT (id) DO UPDATE SET runner_id = excluded.runner_id, labels = excluded.labels, pid = excluded.pid,
           boot_id = excluded.boot_id, version = excluded.version, clock_offset_ms = excluded.clock_offset_ms, status = 'up',
           started_at = excluded.started_at, stopped_at = NULL, updated_at = excluded.updated_at`,
        hostIdOf(e),
        e.data.runnerId,
        JSON.stringify(e.data.labels),
        e.data.pid,
        e.data.bootId,
        e.data.version,
        e.data.clockOffsetMs ?? null,
        e.at,
        e.at,
      ),
    ],
    'host.stopped': (e) => [sql(`UPDATE hosts SET status = 'down', stopped_at = ?, updated_at = ? WHERE id = ?`, e.at, e.at, hostIdOf(e))],
  },
});
