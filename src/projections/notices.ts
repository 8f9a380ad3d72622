/**
 * `loop_notify` and `notices`: who is told when a loop's run ends (`--on-failure`, `--notify-url`,
 * from `loop.created`), and each notice — a run's end being told — with its state: `pending`
 * (requested, not finished: the next runner finishes it), `delivered`, `ran` (the hook command
 * ran; `hook_status` says how it ended) or `given_up`. `loops show` reads both.
 */
import type { StoredEvent } from '../events/types.js';
import { defineProjection, sql, stateName, streamKey } from './types.js';
import { PROJECTION_VERSIONS } from './versions.js';

const noticeIdOf = (event: StoredEvent) => streamKey(event, 'notice');

export const noticesProjection = defineProjection({
  name: 'notices',
  version: PROJECTION_VERSIONS.notices,
  ddl: [
    `CREATE TABLE IF NOT EXISTS loop_notify (
      loop_id    TEXT PRIMARY KEY,
      on_failure TEXT,
      url        TEXT,
      notify_on  TEXT NOT NULL
    ) WITHOUT ROWID`,
    `CREATE TABLE IF NOT EXISTS notices (
      id            TEXT PRIMARY KEY,
      loop_id       TEXT NOT NULL,
      run_id        TEXT NOT NULL,
      run_status    TEXT NOT NULL,
      channel       TEXT NOT NULL,
      target        TEXT NOT NULL,
      status        TEXT NOT NULL,
      attempts      INTEGER NOT NULL,
      retry_at      TEXT,
      last_error    TEXT,
      http_status   INTEGER,
      hook_run_id   TEXT,
      hook_status   TEXT,
      requested_at  TEXT NOT NULL,
      finished_at   TEXT
    ) WITHOUT ROWID`,
    `CREATE INDEX IF NOT EXISTS notices_run ON notices (run_id)`,
    `CREATE INDEX IF NOT EXISTS notices_pending ON notices (status) WHERE status = 'pending'`,
  ],
  tables: [
    { name: 'loop_notify', orderBy: 'loop_id' },
    { name: 'notices', orderBy: 'id' },
  ],
  on: {
    'loop.created': (e) =>
      e.data.notify
        ? [
            sql(
              'INSERT INTO loop_notify (loop_id, on_failure, url, notify_on) VALUES (?, ?, ?, ?)',
              e.data.loopId,
              e.data.notify.onFailure,
              e.data.notify.url,
              e.data.notify.on.join(','),
            ),
          ]
        : [],
    'notice.requested': (e) => [
      sql(
        `INSERT INTO notices (id, loop_id, run_id, run_status, channel, target, status, attempts, requested_at)
         VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?)`,
        noticeIdOf(e),
        e.data.loopId,
        e.data.runId,
        e.data.runStatus,
        e.data.channel,
        (e.data.channel === 'command' ? e.data.command : e.data.url) ?? '',
        e.at,
      ),
    ],
    'notice.hook_claimed': (e) => [sql('UPDATE notices SET hook_run_id = ? WHERE id = ?', e.data.hookRunId, noticeIdOf(e))],
    'notice.hook_ended': (e) => [
      sql(
        'UPDATE notices SET status = ?, hook_status = ?, last_error = ?, finished_at = ? WHERE id = ?',
        stateName(e) ?? 'ran',
        e.data.status,
        e.data.error,
        e.at,
        noticeIdOf(e),
      ),
    ],
    'notice.attempt_failed': (e) => [
      sql(
        'UPDATE notices SET attempts = ?, retry_at = ?, last_error = ?, http_status = ? WHERE id = ?',
        e.data.attempt,
        e.data.retryAt,
        e.data.error,
        e.data.httpStatus,
        noticeIdOf(e),
      ),
    ],
    'notice.delivered': (e) => [
      sql(
        "UPDATE notices SET status = ?, attempts = ?, http_status = ?, retry_at = NULL, finished_at = ? WHERE id = ?",
        stateName(e) ?? 'delivered',
        e.data.attempt,
        e.data.httpStatus,
        e.at,
        noticeIdOf(e),
      ),
    ],
    'notice.given_up': (e) => [
      sql(
        'UPDATE notices SET status = ?, retry_at = NULL, last_error = ?, finished_at = ? WHERE id = ?',
        stateName(e) ?? 'given_up',
        e.data.error,
        e.at,
        noticeIdOf(e),
      ),
    ],
  },
});
