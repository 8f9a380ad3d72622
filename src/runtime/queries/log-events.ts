/**
 * Events of the log for a reader: which stream a reference names (a run, a loop, a workflow run,
 * a raw stream id), the events of the whole log that pass a filter (stream, types, loop, since),
 * and those same events live — every event appended from now on, by any process (the daemon, a
 * CLI in another terminal, another runtime), found by polling the log by position.
 *
 * Polling, not the store's in-process `events$`: an append of another process sends nothing to
 * this one. Each poll reads what lies past the last position seen (one indexed range read); the
 * log's positions only grow and a reader never sees a later commit before an earlier one.
 */
import { Observable } from 'rxjs';
import type { Db } from '../../events/db.js';
import { NotFoundError, UsageError } from '../../events/errors.js';
import { streamIdsWithPrefix } from '../../events/sqlite-reads.js';
import { iterateEvents } from '../../events/sqlite-log.js';
import type { EventStore, StoredEvent } from '../../events/types.js';
import { findLoop, findRun } from './loops.js';
import { shownRef } from './refs.js';

/** How often a live follower looks at the log (ms). */
export const LIVE_POLL_MS = 200;

/**
 * Which events a reader wants; every given field must hold (an empty filter passes every event).
 */
export interface EventFilter {
  /** Only events of this stream (a stream id such as `run:run_01…`, `loop:loop_01…`, `wfrun:wfrun_01…`). */
  stream?: string;
  /** Only events of these types; `run.*` names every type that starts with `run.`. */
  types?: readonly string[];
  /** Only events of this loop (its id): its own stream, its runs' and the workflow runs they started. */
  loopId?: string;
  /** Only events recorded at or after this instant (ISO-8601). */
  since?: string;
}

/**
 * The stream a reference names: a run id (or unique prefix), a workflow run id (or unique
 * prefix), a loop name or id, or a raw stream id (`run:…`, `loop:…`, `wfrun:…`, `workflow:…`,
 * `account:…`, `retention:…`). NotFoundError when nothing (or several things) match.
 */
export async function resolveStream(db: Db, log: Pick<EventStore, 'streamInfo'>, ref: string): Promise<string> {
  if (/^(run|loop|wfrun|workflow|account|retention|host|notice):/.test(ref)) {
    if (!(await log.streamInfo(ref))) throw new NotFoundError(`no stream ${shownRef(ref)} in the log`);
    return ref;
  }
  if (ref.startsWith('run_')) return `run:${findRun(db, ref).id}`;
  if (ref.startsWith('wfrun_')) {
    const rows = streamIdsWithPrefix(db, `wfrun:${ref}`, 2);
    if (rows.length === 1) return rows[0]!;
    throw rows.length === 0
      ? new NotFoundError(`no workflow run ${shownRef(ref)}`, { hint: 'loops workflows runs lists workflow run ids' })
      : new NotFoundError(`${shownRef(ref)} is the prefix of several workflow runs`, { hint: 'give more of the id' });
  }
  try {
    return `loop:${findLoop(db, ref, { includeRemoved: true }).id}`;
  } catch (error) {
    if (!(error instanceof NotFoundError)) throw error;
  }
  try {
    return `run:${findRun(db, ref).id}`;
  } catch (error) {
    if (error instanceof NotFoundError) {
      throw new NotFoundError(`no run or loop matches ${shownRef(ref)}`, { hint: 'loops runs lists run ids; loops list lists loops' });
    }
    throw error;
  }
}

/**
 * A predicate for `filter`. The loop filter asks the projection tables which loop a run or a
 * workflow run belongs to (written in the event's own transaction, so already there when the
 * event is read), once per stream.
 */
export function eventMatcher(db: Db, filter: EventFilter): (event: StoredEvent) => boolean {
  const exact = new Set<string>();
  const prefixes: string[] = [];
  for (const type of filter.types ?? []) {
    if (typeof type !== 'string' || type === '') throw new UsageError(`event type filter: expected type names, got ${JSON.stringify(type)}`, { hint: "e.g. types: ['run.succeeded', 'loop.*']" });
    if (type.endsWith('*')) prefixes.push(type.slice(0, -1));
    else exact.add(type);
  }
  const byType = exact.size > 0 || prefixes.length > 0;
  const sinceMs = filter.since === undefined ? null : Date.parse(filter.since);
  if (sinceMs !== null && Number.isNaN(sinceMs)) {
    throw new UsageError(`event filter since: ${JSON.stringify(filter.since)} is not an ISO-8601 time`, { hint: 'e.g. 2026-12-01T00:00:00Z' });
  }
  const ofLoop = filter.loopId === undefined ? null : loopStreams(db, filter.loopId);
  return (event) => {
    if (filter.stream !== undefined && event.streamId !== filter.stream) return false;
    if (byType && !exact.has(event.type) && !prefixes.some((p) => event.type.startsWith(p))) return false;
    if (sinceMs !== null && Date.parse(event.at) < sinceMs) return false;
    if (ofLoop !== null && !ofLoop(event.streamId)) return false;
    return true;
  };
}

/** Whether a stream belongs to the loop: its own, a run of it, a workflow run it started (cached per stream). */
function loopStreams(db: Db, loopId: string): (streamId: string) => boolean {
  const runLoop = db.prepare<[string], { loop_id: string }>('SELECT loop_id FROM loop_runs WHERE id = ?');
  const wfRunLoop = db.prepare<[string], { loop_id: string | null }>('SELECT loop_id FROM workflow_runs WHERE id = ?');
  const known = new Map<string, boolean>();
  return (streamId) => {
    if (streamId === `loop:${loopId}`) return true;
    const cached = known.get(streamId);
    if (cached !== undefined) return cached;
    let mine = false;
    if (streamId.startsWith('run:')) mine = runLoop.get(streamId.slice(4))?.loop_id === loopId;
    else if (streamId.startsWith('wfrun:')) mine = wfRunLoop.get(streamId.slice(6))?.loop_id === loopId;
    else return false;
    // A run's row is written with its first event, so the answer never changes: remember it (bounded).
    if (known.size < 100_000) known.set(streamId, mine);
    return mine;
  };
}

/** Options of `readEvents`. */
export interface ReadEventsOptions extends EventFilter {
  /** Only events past this position (default 0: from the start of the log). */
  afterPosition?: number;
  /** At most this many events (default: all). */
  limit?: number;
}

/** The events of the whole log that pass the filter, in position order (upcast through the catalogue). */
export function readEvents(db: Db, options: ReadEventsOptions = {}): StoredEvent[] {
  const limit = options.limit ?? Infinity;
  if (!(limit >= 0)) throw new UsageError(`limit: expected a whole number ≥ 0, got ${JSON.stringify(options.limit)}`);
  const matches = eventMatcher(db, options);
  const out: StoredEvent[] = [];
  if (limit === 0) return out;
  for (const event of iterateEvents(db, options.afterPosition ?? 0)) {
    if (!matches(event)) continue;
    out.push(event);
    if (out.length >= limit) break;
  }
  return out;
}

/** The highest position in the log (0 when empty). */
export function headPosition(db: Db): number {
  return db.prepare<[], { head: number | null }>('SELECT MAX(position) AS head FROM events').get()?.head ?? 0;
}

/** Options of `liveEvents`. */
export interface LiveEventsOptions {
  /** Start after this position instead of the log's head when subscribed (0: the whole log first). */
  afterPosition?: number;
  /** How often to look (default 200 ms). */
  pollMs?: number;
  /** Completes every subscriber (the database is about to close). */
  signal?: AbortSignal;
}

/**
 * Every event appended after the moment of subscription (or after `afterPosition`) that passes
 * the filter, by any process, in position order. Each subscriber polls on its own; unsubscribing
 * stops its polling. `db`: the database to read, and `filter` (promises: the caller resolves
 * them — opening, resolving names — and a rejection errors the observable, as a failed read does).
 */
export function liveEvents(db: Db | Promise<Db>, filter: EventFilter | Promise<EventFilter> = {}, options: LiveEventsOptions = {}): Observable<StoredEvent> {
  const pollMs = options.pollMs ?? LIVE_POLL_MS;
  return new Observable<StoredEvent>((subscriber) => {
    let timer: ReturnType<typeof setTimeout> | null = null;
    let stopped = false;
    const stop = () => {
      stopped = true;
      if (timer !== null) clearTimeout(timer);
      timer = null;
    };
    const onAbort = () => {
      stop();
      subscriber.complete();
    };
    if (options.signal?.aborted) {
      subscriber.complete();
      return stop;
    }
    options.signal?.addEventListener('abort', onAbort, { once: true });
    Promise.all([db, filter]).then(
      ([handle, wanted]) => {
        if (stopped) return;
        let last: number;
        let matches: (event: StoredEvent) => boolean;
        try {
          last = options.afterPosition ?? headPosition(handle);
          matches = eventMatcher(handle, wanted);
        } catch (error) {
          subscriber.error(error);
          return;
        }
        const poll = () => {
          timer = null;
          if (stopped) return;
          try {
            for (const event of iterateEvents(handle, last, 500)) {
              last = event.position;
              if (matches(event)) subscriber.next(event);
              if (stopped) return;
            }
          } catch (error) {
            stop();
            subscriber.error(error);
            return;
          }
          timer = setTimeout(poll, pollMs);
        };
        timer = setTimeout(poll, options.afterPosition === undefined ? pollMs : 0);
      },
      (error: unknown) => subscriber.error(error),
    );
    return () => {
      options.signal?.removeEventListener('abort', onAbort);
      stop();
    };
  });
}
