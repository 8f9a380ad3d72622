/**
 * Read side of notices (src/runtime/loops/notify.ts): who a loop tells of its run ends, and how a
 * run's end was told — a hook run, a POST — for `loops show`.
 */
import type { LoopNotify } from '../../events/catalog.js';
import { cached, type Db } from '../../events/db.js';

export interface NoticeView {
  id: string;
  loopId: string;
  /** The run whose end is told. */
  runId: string;
  runStatus: string;
  channel: 'command' | 'url';
  /** The command line, or the URL. */
  target: string;
  /** pending, delivered, ran (the hook command ran) or given_up. */
  status: string;
  /** POSTs made (failed ones, and the one delivered). */
  attempts: number;
  retryAt: string | null;
  lastError: string | null;
  httpStatus: number | null;
  /** The `--on-failure` command's own run. */
  hookRunId: string | null;
  hookStatus: string | null;
  requestedAt: string;
  finishedAt: string | null;
}

interface NoticeRow {
  id: string;
  loop_id: string;
  run_id: string;
  run_status: string;
  channel: 'command' | 'url';
  target: string;
  status: string;
  attempts: number;
  retry_at: string | null;
  last_error: string | null;
  http_status: number | null;
  hook_run_id: string | null;
  hook_status: string | null;
  requested_at: string;
  finished_at: string | null;
}

function toView(r: NoticeRow): NoticeView {
  return {
    id: r.id,
    loopId: r.loop_id,
    runId: r.run_id,
    runStatus: r.run_status,
    channel: r.channel,
    target: r.target,
    status: r.status,
    attempts: r.attempts,
    retryAt: r.retry_at,
    lastError: r.last_error,
    httpStatus: r.http_status,
    hookRunId: r.hook_run_id,
    hookStatus: r.hook_status,
    requestedAt: r.requested_at,
    finishedAt: r.finished_at,
  };
}

/** A database last opened by a loops without notices has no such tables yet: nothing to show. */
function orNone<T>(read: () => T, none: T): T {
  try {
    return read();
  } catch (error) {
    if (/no such table/.test(String(error))) return none;
    throw error;
  }
}

/** Who the loop tells of its run ends (null: nobody). */
export function loopNotify(db: Db, loopId: string): LoopNotify | null {
  const row = orNone(
    () => cached<[string], { on_failure: string | null; url: string | null; notify_on: string }>(db, 'SELECT on_failure, url, notify_on FROM loop_notify WHERE loop_id = ?').get(loopId),
    undefined,
  );
  if (!row) return null;
  const on = row.notify_on.split(',').filter((o): o is 'failure' | 'success' => o === 'failure' || o === 'success');
  return { onFailure: row.on_failure, url: row.url, on };
}

/** The slot of an `--on-failure` command's run: `hook:<notice id>`. */
export const HOOK_SLOT = 'hook:';

/** The notices of a run's end, oldest first. */
export function runNotices(db: Db, runId: string): NoticeView[] {
  return orNone(() => cached<[string], NoticeRow>(db, 'SELECT * FROM notices WHERE run_id = ? ORDER BY requested_at, id').all(runId).map(toView), []);
}

/**
 * The notice whose `--on-failure` command ran as this run (null: the run is no hook). By its slot,
 * `hook:<notice>`: a hook run that was replaced (it never started) is that notice's too.
 */
export function noticeOfHookRun(db: Db, run: { slot: string }): NoticeView | null {
  if (!run.slot.startsWith(HOOK_SLOT)) return null;
  const row = orNone(() => cached<[string], NoticeRow>(db, 'SELECT * FROM notices WHERE id = ?').get(run.slot.slice(HOOK_SLOT.length)), undefined);
  return row ? toView(row) : null;
}
