/**
 * The invariant checker: what must hold of any log loops wrote, whatever happened to its processes
 * (kill -9, restarts, races, crash points). `loops verify`, the integration suites, the daemon e2e
 * tests, the chaos driver (`npm run chaos`) and the soak (`npm run soak`) all check this one list:
 *
 *  0. SQLite's `integrity_check` is ok;
 *  1. every stream's versions are contiguous (from its archive tombstone, if archived);
 *  2. at most one terminal event per run;
 *  3. one run per (loop, slot, attempt);
 *  4. no slot decided twice; 5. every fired slot reaches a run or an explicit record of why not;
 *  6. every stream replays on the machine that wrote it; 6b. every snapshot equals a fold of the log;
 *  7. the projections equal a rebuild from the log;
 *  8. optionally, no process a run or step started is still alive.
 *
 * Synchronous: it reads through the SQLite store's `*Sync` reads.
 */
import { eventSchemas, isAnnotation } from '../../events/catalog.js';
import type { Db } from '../../events/db.js';
import { SqliteEventLog } from '../../events/sqlite-log.js';
import type { EventStore } from '../../events/types.js';
import { fold } from '../../machines/fold.js';
import { getMachine } from '../../machines/registry.js';
import { readdirSync, readFileSync } from 'node:fs';
import { bootId } from '../execution/process-info.js';
import { verifyProjections } from './projections.js';
import { replayEvents } from './replay.js';

/**
 * The log as a SQLite store, read synchronously: the data directory's own, or — on PostgreSQL —
 * this host's replica of it (which holds every event an append resolved with, replica.ts).
 */
export function syncLog(log: EventStore): SqliteEventLog {
  if (log instanceof SqliteEventLog) return log;
  // A ReplicatedEventStore (not imported: it would load the replica's code into every read command).
  const replica = (log as { replica?: { log?: unknown } }).replica;
  if (replica?.log instanceof SqliteEventLog) return replica.log;
  throw new TypeError('the invariant checker reads the log synchronously: pass a SqliteEventLog');
}

/** `replayStream` (the code `loops replay` runs) over a stream read synchronously from the SQLite store. */
export function replaySync(store: EventStore, streamId: string): { steps: number; ok: boolean; firstMismatch: number | null } {
  const log = syncLog(store);
  const info = log.streamInfoSync(streamId);
  const result = replayEvents(streamId, info, info ? log.readStreamSync(streamId) : []);
  return { steps: result.steps.length, ok: result.ok, firstMismatch: result.firstMismatch };
}

export interface InvariantOptions {
  /**
   * The system is at rest at this instant (every runner stopped or idle; for a stopped daemon, when
   * the stop was asked): claimable work due by then must have been claimed — a fired slot still
   * waiting is stranded. A buffered slot is claimable only once its loop has no run going. Without
   * it, work in the run queue counts as accounted for (it is durable; whoever passes next claims it).
   */
  settledAt?: number;
  /** Also check that no process recorded as spawned is still alive (default true). */
  processes?: boolean;
  /** Run `PRAGMA integrity_check` first (default true). */
  integrity?: boolean;
}

const FINAL_STATES = ['"succeeded"', '"failed"', '"timed_out"', '"cancelled"', '"abandoned"'];

interface DecisionRow {
  stream_id: string;
  type: string;
  data: string;
}

function tableExists(db: Db, name: string): boolean {
  return db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined;
}

/** Every violation of the log's invariants, one line each (empty when all hold). */
export function findViolations(db: Db, store: EventStore, options: InvariantOptions = {}): string[] {
  const log = syncLog(store);
  const out: string[] = [];
  // 0. SQLite's own check of the file (pages, indexes, free list).
  if (options.integrity !== false) {
    // A damaged file is reported alone: the checks below would read garbage or throw.
    try {
      const rows = db.prepare<[], { integrity_check: string }>('PRAGMA integrity_check').all();
      if (rows.length !== 1 || rows[0]!.integrity_check !== 'ok') for (const r of rows.slice(0, 20)) out.push(`integrity_check: ${r.integrity_check}`);
    } catch (error) {
      out.push(`integrity_check: ${(error as Error).message}`);
    }
    if (out.length > 0) return out;
  }
  // Archived streams (loops prune --archive) begin with their stream.archived tombstone at
  // toVersion + 1; what their deleted events said is in the tombstone.
  const tombstones = new Map(
    db
      .prepare<[], { stream_id: string; version: number; data: string }>("SELECT stream_id, version, data FROM events WHERE type = 'stream.archived'")
      .all()
      .map((r) => [r.stream_id, { version: r.version, data: JSON.parse(r.data) as { toVersion: number; rows: Record<string, Array<Record<string, unknown>>> } }]),
  );
  // 1. Every stream's versions are 1..n (or, archived, its tombstone's toVersion + 1..n), and the streams table agrees.
  for (const r of db
    .prepare<[], { stream_id: string; n: number; lo: number; hi: number; recorded: number | null }>(
      `SELECT e.stream_id, COUNT(*) AS n, MIN(e.version) AS lo, MAX(e.version) AS hi, s.version AS recorded
       FROM events e LEFT JOIN streams s ON s.stream_id = e.stream_id GROUP BY e.stream_id`,
    )
    .all()) {
    const tombstone = tombstones.get(r.stream_id);
    const first = tombstone ? tombstone.data.toVersion + 1 : 1;
    if (tombstone && tombstone.version !== first) out.push(`${r.stream_id}: stream.archived at version ${tombstone.version}, not ${first}`);
    if (r.lo !== first || r.hi !== r.n + first - 1 || r.recorded !== r.hi) {
      out.push(`${r.stream_id}: versions not contiguous (${r.n} events, versions ${r.lo}..${r.hi}, streams table says ${r.recorded})`);
    }
  }
  // 2. At most one terminal event per run (a final state accepts nothing more; an annotation is no machine's).
  const annotations = Object.keys(eventSchemas).filter(isAnnotation);
  for (const r of db
    .prepare<string[], { stream_id: string; n: number }>(
      `SELECT stream_id, COUNT(*) AS n FROM events
       WHERE (stream_id LIKE 'run:%' OR stream_id LIKE 'wfrun:%') AND state IN (${FINAL_STATES.map(() => '?').join(', ')})
         AND type NOT IN (${annotations.map(() => '?').join(', ')})
       GROUP BY stream_id HAVING n > 1`,
    )
    .all(...FINAL_STATES, ...annotations)) {
    out.push(`${r.stream_id}: ${r.n} events in a final state (at most one terminal event per run)`);
  }
  // 3. One run per (loop, slot, attempt) — an archived run's claim is its tombstone's loop_runs row,
  //    an imported run's is its run.imported.
  for (const r of db
    .prepare<[], { loop: string; slot: string; attempt: number | null; n: number; runs: string }>(
      `SELECT loop, slot, attempt, COUNT(*) AS n, group_concat(stream_id, ', ') AS runs FROM (
         SELECT json_extract(data, '$.loopId') AS loop, json_extract(data, '$.slot') AS slot, json_extract(data, '$.attempt') AS attempt, stream_id
         FROM events WHERE type IN ('run.claimed', 'run.imported')
         UNION ALL
         SELECT json_extract(data, '$.rows.loop_runs[0].loop_id'), json_extract(data, '$.rows.loop_runs[0].slot'), json_extract(data, '$.rows.loop_runs[0].attempt'), stream_id
         FROM events WHERE type = 'stream.archived' AND stream_id LIKE 'run:%'
       ) GROUP BY loop, slot, attempt HAVING n > 1`,
    )
    .all()) {
    out.push(`loop ${r.loop}: slot ${r.slot} attempt ${r.attempt} has ${r.n} runs (${r.runs})`);
  }
  // 4. No slot decided twice; 5. every fired slot reaches a run or an explicit record of why not.
  const decisions = db
    .prepare<[], DecisionRow>(
      `SELECT stream_id, type, data FROM events WHERE stream_id LIKE 'loop:%' AND type LIKE 'slot.%' ORDER BY position`,
    )
    .all();
  const perLoop = new Map<string, { singles: Map<string, string>; ranges: Array<{ from: string; to: string; type: string }> }>();
  const promised: Array<{ loop: string; runId: string; what: string }> = [];
  const dropped = new Set<string>();
  for (const d of decisions) {
    const data = JSON.parse(d.data) as Record<string, any>;
    let loop = perLoop.get(d.stream_id);
    if (!loop) perLoop.set(d.stream_id, (loop = { singles: new Map(), ranges: [] }));
    switch (d.type) {
      case 'slot.fired':
      case 'slot.skipped':
      case 'slot.buffered': {
        const before = loop.singles.get(data.slot);
        if (before) out.push(`${d.stream_id}: slot ${data.slot} decided twice (${before}, then ${d.type})`);
        loop.singles.set(data.slot, d.type);
        if (d.type !== 'slot.skipped') promised.push({ loop: d.stream_id, runId: data.runId, what: `${d.type} ${data.slot}` });
        break;
      }
      case 'slot.coalesced':
      case 'slot.missed':
        loop.ranges.push({ from: data.from, to: data.to, type: d.type });
        break;
      case 'slot.retry_scheduled':
        promised.push({ loop: d.stream_id, runId: data.runId, what: `retry (attempt ${data.attempt}) of ${data.slot}` });
        break;
      case 'slot.dropped':
        dropped.add(data.runId);
        break;
    }
  }
  for (const [stream, loop] of perLoop) {
    const ranges = [...loop.ranges].sort((a, b) => a.from.localeCompare(b.from));
    for (let i = 1; i < ranges.length; i++) {
      if (ranges[i]!.from <= ranges[i - 1]!.to) {
        out.push(`${stream}: ${ranges[i - 1]!.type} ${ranges[i - 1]!.from}..${ranges[i - 1]!.to} overlaps ${ranges[i]!.type} ${ranges[i]!.from}..${ranges[i]!.to}`);
      }
    }
    for (const [slot, type] of loop.singles) {
      const inside = ranges.find((r) => r.from <= slot && slot <= r.to);
      if (inside) out.push(`${stream}: slot ${slot} decided twice (${type}, and ${inside.type} ${inside.from}..${inside.to})`);
    }
  }
  const claimed = new Set(
    db
      .prepare<[], { id: string }>("SELECT json_extract(data, '$.runId') AS id FROM events WHERE type = 'run.claimed'")
      .all()
      .map((r) => r.id)
      .concat([...tombstones.keys()].filter((id) => id.startsWith('run:')).map((id) => id.slice(4))),
  );
  const queue = tableExists(db, 'run_queue')
    ? new Map(
        db
          .prepare<[], { run_id: string; loop_id: string; kind: string; due_at: string }>('SELECT run_id, loop_id, kind, due_at FROM run_queue')
          .all()
          .map((r) => [r.run_id, r]),
      )
    : new Map<string, { loop_id: string; kind: string; due_at: string }>();
  // A buffered slot waits for the loop's going run: it is claimable only once no run of the loop goes.
  const goingAt = db.prepare<[string, string, string], { id: string }>(
    'SELECT id FROM loop_runs WHERE loop_id = ? AND claimed_at <= ? AND (finished_at IS NULL OR finished_at > ?) LIMIT 1',
  );
  for (const p of promised) {
    if (claimed.has(p.runId) || dropped.has(p.runId)) continue;
    const queued = queue.get(p.runId);
    if (queued === undefined) out.push(`${p.loop}: ${p.what} → ${p.runId} was never claimed, and nothing records why (stranded)`);
    else if (options.settledAt !== undefined && Date.parse(queued.due_at) <= options.settledAt) {
      const settled = new Date(options.settledAt).toISOString();
      if (queued.kind === 'buffered' && goingAt.get(queued.loop_id, settled, settled)) continue;
      out.push(`${p.loop}: ${p.what} → ${p.runId} due at ${queued.due_at} still waits in the run queue`);
    }
  }
  // 6. Every stream replays on the machine that wrote it to the states recorded in the log.
  for (const { stream_id } of db.prepare<[], { stream_id: string }>('SELECT stream_id FROM streams ORDER BY stream_id').all()) {
    try {
      const result = replaySync(log, stream_id);
      if (!result.ok) out.push(`${stream_id}: replay diverges from the log at version ${result.firstMismatch}`);
    } catch (error) {
      out.push(`${stream_id}: cannot be replayed: ${(error as Error).message}`);
    }
  }
  // 6b. Every persisted stream snapshot is the state a fold of its stream up to its version gives.
  if (tableExists(db, 'stream_snapshots')) {
    for (const snap of db
      .prepare<[], { stream_id: string; version: number; machine_id: string; machine_version: number; state: string }>(
        'SELECT stream_id, version, machine_id, machine_version, state FROM stream_snapshots',
      )
      .all()) {
      // A snapshot from before an archive: its events are gone (folding starts from the tombstone).
      if ((tombstones.get(snap.stream_id)?.version ?? 0) > snap.version) continue;
      const machine = getMachine({ id: snap.machine_id, version: snap.machine_version });
      if (!machine) {
        out.push(`${snap.stream_id}: snapshot by unknown machine ${snap.machine_id}@${snap.machine_version}`);
        continue;
      }
      const folded = fold(machine, log.readStreamSync(snap.stream_id).filter((e) => e.version <= snap.version)).snapshot;
      if (JSON.stringify({ value: folded.value, context: folded.context }) !== snap.state) {
        out.push(`${snap.stream_id}: the snapshot at version ${snap.version} differs from a fold of the log`);
      }
    }
  }
  // 7. The projections equal a rebuild from the log.
  const verify = verifyProjections(db);
  if (!verify.ok) for (const t of verify.tables) for (const d of t.differences) out.push(`projection ${t.table}: ${d}`);
  // 8. No process a run or step started is still alive: /proc read once for every recorded group.
  if (options.processes !== false && process.platform === 'linux') {
    const live = liveGroups();
    const boot = bootId();
    for (const r of db
      .prepare<[], { stream_id: string; pgid: number | null; start: string | null; boot: string | null; duration: number | null }>(
        `SELECT s.stream_id, json_extract(s.data, '$.pgid') AS pgid, json_extract(s.data, '$.startTime') AS start, json_extract(s.data, '$.bootId') AS boot,
           (SELECT json_extract(x.data, '$.durationMs') FROM events x
            WHERE x.stream_id = s.stream_id AND x.position > s.position
              AND x.type = CASE s.type WHEN 'process.spawned' THEN 'process.exited' ELSE 'step.exited' END
              AND (s.type = 'process.spawned' OR (json_extract(x.data, '$.stepId') = json_extract(s.data, '$.stepId') AND json_extract(x.data, '$.attempt') = json_extract(s.data, '$.attempt')))
            ORDER BY x.position LIMIT 1) AS duration
         FROM events s WHERE s.type IN ('process.spawned', 'step.spawned')`,
      )
      .all()) {
      if (r.pgid === null) continue;
      const alive = runGroupMembers({ startTime: r.start, bootId: r.boot, durationMs: r.duration }, live.get(r.pgid) ?? [], boot, r.pgid);
      if (alive.length) out.push(`${r.stream_id}: process group ${r.pgid} is still alive (${alive.join(', ')})`);
    }
  }
  return out;
}

/** A live process: its pid and its start (clock ticks since boot, /proc/<pid>/stat field 22). */
export interface LiveMember {
  pid: number;
  startTicks: number;
}

/** Every live process group on this host (Linux), by group id, zombies left out: one pass over /proc. */
function liveGroups(): Map<number, LiveMember[]> {
  const groups = new Map<number, LiveMember[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] === 'Z' || fields[0] === 'X') continue;
      const pgid = Number(fields[2]);
      const members = groups.get(pgid) ?? [];
      members.push({ pid: Number(name), startTicks: Number(fields[19]) });
      groups.set(pgid, members);
    } catch {
      // gone meanwhile
    }
  }
  return groups;
}

/** USER_HZ: the unit of /proc start times (100 on every mainstream Linux architecture). */
const TICKS_PER_SECOND = 100;

/**
 * The pids of `members` (the live processes whose group id is the one a run's process recorded)
 * that can be the run's. A group id is not reused while any member of the group lives, so once the
 * run's group was empty a new process may lead a group with the same id — with a small pid_max
 * (32,768) within minutes of a busy host. Not the run's, then: members on another boot than the one
 * recorded, and — when the process's start and its duration were recorded — members that all
 * started after it ended (1 s of slack). A member that started before the end lived on past it.
 * And, given the group id (`pgid`, the recorded leader's pid): a live leader that started at
 * another time than the recorded one heads a new group — its id was free, so nothing of the run's
 * group was left — even when the run's end is unknown (a run abandoned after its runner died).
 */
export function runGroupMembers(
  recorded: { startTime: string | null; bootId: string | null; durationMs: number | null },
  members: readonly LiveMember[],
  currentBoot: string | null,
  pgid?: number,
): number[] {
  if (members.length === 0) return [];
  if (recorded.bootId !== null && currentBoot !== null && recorded.bootId !== currentBoot) return [];
  const start = recorded.startTime === null ? NaN : Number(recorded.startTime);
  const leader = pgid === undefined ? undefined : members.find((m) => m.pid === pgid);
  if (leader && Number.isFinite(start) && leader.startTicks !== start) return [];
  if (!Number.isFinite(start) || recorded.durationMs === null) return members.map((m) => m.pid);
  const endTicks = start + Math.ceil((recorded.durationMs / 1000 + 1) * TICKS_PER_SECOND);
  return members.some((m) => m.startTicks <= endTicks) ? members.map((m) => m.pid) : [];
}
