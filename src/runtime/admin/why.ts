/**
 * `loops why`: what happened to a loop's slots, and why — answered from the log alone (the
 * slot decisions and the loop's lifecycle events), never from guesses.
 */
import { cached, type Db } from '../../events/db.js';
import type { LoopView } from '../queries/loops.js';
import { upcomingSlots } from '../../scheduling/planner.js';
import { streamEventsOfType } from '../../events/sqlite-reads.js';
import { hostsWithLabels } from '../queries/hosts.js';

export interface DecisionView {
  decision: 'fired' | 'buffered' | 'skipped' | 'coalesced' | 'missed' | 'retry' | 'dropped';
  from: string;
  to: string;
  count: number;
  fireAt: string | null;
  runId: string | null;
  reason: string | null;
  into: string | null;
  decidedAt: string;
  /** The run's status when the decision fired one. */
  runStatus: string | null;
  /** When `loops prune` removed the run's output folder (null while kept). */
  outputPrunedAt?: string | null;
  /** When `loops prune --archive` moved the run's events to an archive file (null while in the log). */
  archivedAt?: string | null;
  /** When the run it promised never ran: why (its `slot.dropped`). */
  dropped?: string | null;
  /** The retries of the slot, in order: each one's run and how it ended (or that it is pending). */
  retries?: string[];
  /** A run not started yet of a loop pinned with `--runs-on`: which runners it waits for. */
  waitingFor?: string;
}

interface Row {
  decision: DecisionView['decision'];
  slot_from: string;
  slot_to: string;
  count: number;
  fire_at: string | null;
  run_id: string | null;
  reason: string | null;
  into_slot: string | null;
  at: string;
  run_status: string | null;
  output_pruned_at: string | null;
  archived_at: string | null;
}

const SELECT = `SELECT d.*, r.status AS run_status, r.output_pruned_at, r.archived_at FROM slot_decisions d LEFT JOIN loop_runs r ON r.id = d.run_id`;

function view(row: Row): DecisionView {
  return {
    decision: row.decision,
    from: row.slot_from,
    to: row.slot_to,
    count: row.count,
    fireAt: row.fire_at,
    runId: row.run_id,
    reason: row.reason,
    into: row.into_slot,
    decidedAt: row.at,
    runStatus: row.run_status,
    ...(row.output_pruned_at ? { outputPrunedAt: row.output_pruned_at } : {}),
    ...(row.archived_at ? { archivedAt: row.archived_at } : {}),
  };
}

export function recentDecisions(db: Db, loopId: string, limit: number, runsOn: string[] | null = null): DecisionView[] {
  return cached<[string, number], Row>(db, `${SELECT} WHERE d.loop_id = ? ORDER BY d.position DESC LIMIT ?`)
    .all(loopId, limit)
    .map((row) => waiting(db, view(row), runsOn));
}

/**
 * A promised run of a loop pinned with `--runs-on` that has not started: says which runners it
 * waits for and which hosts have their labels (a run dropped since says why instead).
 */
function waiting(db: Db, d: DecisionView, runsOn: string[] | null): DecisionView {
  if (runsOn === null || d.runId === null || d.runStatus !== null || !['fired', 'buffered', 'retry'].includes(d.decision)) return d;
  const dropped = cached<[string], { n: number }>(db, "SELECT count(*) AS n FROM slot_decisions WHERE decision = 'dropped' AND run_id = ?").get(d.runId)!.n > 0;
  if (dropped) return d;
  const hosts = hostsWithLabels(db, runsOn).map((h) => `${h.id}${h.status === 'down' ? ' (stopped)' : ''}`);
  d.waitingFor = `it waits for a runner labelled ${runsOn.join(',')} (${hosts.length ? `hosts with those labels: ${hosts.join(', ')}; loops daemon status --fleet shows which are up` : 'no daemon started with those labels yet: start one with loops daemon start --labels ' + runsOn.join(',')})`;
  return d;
}

export interface SlotExplanation {
  /** The instant asked about. */
  at: string;
  /** The slot at or before it (null when the schedule had none yet). */
  slot: string | null;
  /** The decision covering that slot, if one was recorded. */
  decision: DecisionView | null;
  /** One sentence, from the log. */
  explanation: string;
}

interface LifecycleRow {
  type: string;
  at: string;
  data: string;
}

/** What happened to the slot at (or just before) `atMs`. */
export function explainSlot(db: Db, loop: LoopView, atMs: number, nowMs: number): SlotExplanation {
  const at = new Date(atMs).toISOString();
  const created = Date.parse(loop.createdAt);
  if (atMs < created) {
    return { at, slot: null, decision: null, explanation: `the loop did not exist yet: it was created at ${loop.createdAt}` };
  }
  // The covering decision: the latest whose range starts at or before the time asked about (the
  // first recorded for its slot: a retry or a drop of that slot's run is told with it).
  const row = cached<[string, string], Row>(
    db,
    `${SELECT} WHERE d.loop_id = ? AND d.slot_from <= ? AND d.decision NOT IN ('retry', 'dropped') ORDER BY d.slot_to DESC, d.position LIMIT 1`,
  ).get(loop.id, at);
  const decision = row ? waiting(db, view(row), loop.runsOn) : null;
  if (decision?.runId && decision.runStatus === null) {
    // A promised run that never ran: the record of why not.
    const drop = cached<[string, string], { reason: string | null; at: string }>(
      db,
      "SELECT reason, at FROM slot_decisions WHERE loop_id = ? AND decision = 'dropped' AND run_id = ?",
    ).get(loop.id, decision.runId);
    if (drop) decision.dropped = `${drop.reason?.replace(/^attempt \d+ not run: /, '') ?? 'dropped'} (recorded ${drop.at})`;
  }
  if (decision && (decision.decision === 'fired' || decision.decision === 'buffered')) {
    const retries = cached<[string, string], Row>(db, `${SELECT} WHERE d.loop_id = ? AND d.decision = 'retry' AND d.slot_from = ? ORDER BY d.position`).all(loop.id, decision.from);
    decision.retries = retries.map((r) => `${r.reason}: ${r.run_status ? `ran as ${r.run_id} and ${r.run_status}${pruned(r.output_pruned_at, r.archived_at)}` : `${r.run_id} is due at ${r.fire_at}`}`);
  }
  // The schedule's slot at or before the time, counted from the covering decision (or creation).
  const from = decision ? Date.parse(decision.from) - 1 : created;
  const { maxRuns: _ignored, ...timing } = loop.timing;
  let slot: string | null = null;
  for (const s of upcomingSlots({ ...loop, timing: { ...timing, maxRuns: null } }, from, 10_000)) {
    if (Date.parse(s.slot) > atMs) break;
    slot = s.slot;
  }
  if (decision && slot !== null && Date.parse(slot) <= Date.parse(decision.to)) {
    return { at, slot, decision, explanation: sentence(decision, slot) };
  }
  if (atMs > nowMs || slot === null) {
    const next = loop.nextRunAt ? `; it next fires at ${loop.nextRunAt}` : '';
    return { at, slot, decision: null, explanation: `no slot of ${loop.name} had come due by then${next}` };
  }
  const state = lifecycleAt(db, loop.id, Date.parse(slot));
  if (state) return { at, slot, decision: null, explanation: `the slot ${slot} was not run: ${state}` };
  return {
    at,
    slot,
    decision: null,
    explanation: `the slot ${slot} has no decision yet: no scheduler has run since it came due (loops tick, or the daemon, decides due slots)`,
  };
}

/**
 * Said of a run whose output folder `loops prune` removed, or whose events `--archive` moved to an
 * archive file: its outcome stands, its output or history is elsewhere.
 */
function pruned(outputAt: string | null | undefined, archivedAt?: string | null): string {
  const said = [
    ...(outputAt ? [`its output was removed by loops prune at ${outputAt}`] : []),
    ...(archivedAt ? [`its events were archived by loops prune --archive at ${archivedAt}; loops replay <run> --archive reads them`] : []),
  ];
  return said.length ? ` (${said.join('; ')})` : '';
}

function sentence(d: DecisionView, slot: string): string {
  const told = first(d, slot) + (d.decision === 'fired' || d.decision === 'buffered' ? pruned(d.outputPrunedAt, d.archivedAt) : '') + (d.waitingFor ? `; ${d.waitingFor}` : '');
  return d.retries?.length ? `${told}; retried — ${d.retries.join('; ')}` : told;
}

function first(d: DecisionView, slot: string): string {
  switch (d.decision) {
    case 'fired':
      if (d.dropped) return `the slot ${slot} fired as run ${d.runId} (decided ${d.decidedAt}), which never ran: ${d.dropped}`;
      return `the slot ${slot} fired as run ${d.runId}${d.fireAt && d.fireAt !== slot ? ` at ${d.fireAt} (jitter)` : ''}${d.reason ? `, ${d.reason}` : ''}${d.runStatus ? `; the run ${d.runStatus}` : ''} (decided ${d.decidedAt})`;
    case 'buffered':
      return `the slot ${slot} was buffered (${d.reason}); ${d.runStatus ? `it ran as run ${d.runId} and ${d.runStatus === 'running' ? 'is running' : d.runStatus}` : `it waits to run as ${d.runId}`} (decided ${d.decidedAt})`;
    case 'skipped':
      return d.reason === 'buffer full'
        ? `the slot ${slot} was skipped: overlap policy buffer-one, run ${d.runId} was still running and another slot was already waiting behind it (decided ${d.decidedAt})`
        : `the slot ${slot} was skipped: overlap policy skip, run ${d.runId} was still running (decided ${d.decidedAt})`;
    case 'coalesced':
      return `the slot ${slot} was missed (nothing was scheduling when it came due) and folded${d.count > 1 ? ` with ${d.count - 1} other missed slot(s)` : ''} into the single catch-up run of ${d.into} (catch-up latest; decided ${d.decidedAt})`;
    case 'missed':
      return `the slot ${slot} was not run: ${d.reason} (${d.count} slot(s) ${d.from} … ${d.to}; decided ${d.decidedAt})`;
    case 'dropped':
      return `the slot ${slot}'s run ${d.runId} never ran: ${d.reason} (decided ${d.decidedAt})`;
    case 'retry':
      return `the slot ${slot} was retried: ${d.reason}; the retry ran as ${d.runId}${d.runStatus ? ` and ${d.runStatus}` : ' (pending, due ' + d.fireAt + ')'} (decided ${d.decidedAt})`;
  }
}

/** The loop's lifecycle state at an instant, when it was not active; null when it was. */
function lifecycleAt(db: Db, loopId: string, atMs: number): string | null {
  const rows: LifecycleRow[] = streamEventsOfType(db, `loop:${loopId}`, 'loop.');
  let state: string | null = null;
  for (const row of rows) {
    if (Date.parse(row.at) > atMs) break;
    const reason = (JSON.parse(row.data) as { reason?: string | null }).reason;
    const why = reason ? ` (${reason})` : '';
    if (row.type === 'loop.paused') state = `the loop was paused at ${row.at}${why}`;
    else if (row.type === 'loop.stopped') state = `the loop was stopped at ${row.at}${why}`;
    else if (row.type === 'loop.resumed' || row.type === 'loop.created') state = null;
    else if (row.type === 'loop.expired') state = `the loop had expired at ${row.at}${why}`;
    else if (row.type === 'loop.archived') state = `the loop was archived at ${row.at}${why}`;
  }
  return state;
}
