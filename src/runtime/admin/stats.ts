/**
 * `loops stats`: runs, outcomes, durations and — for agent loops, and workflow loops with agent
 * steps — turns, tokens and cost, summed per loop over a time window. The sums are SQL aggregates
 * over `loop_runs` (json_extract on its `agent` column) and over the step attempts of workflow runs
 * (`workflow_step_attempts.agent`), so memory stays bounded however many runs the database holds:
 * what comes back is one row per loop and the medians.
 *
 * What counts where:
 * - runs, outcomes and durations are the loop's runs (`loop_runs`), whatever their target; a workflow
 *   loop's run is one run, however many steps its workflow run had;
 * - `agent.runs` counts the runs of agent loops (ended or not, reported or not);
 * - `agent.steps` counts the agent step attempts that ended (succeeded, failed, timed out,
 *   cancelled or abandoned; a retry is another attempt) in the workflow runs of a workflow loop
 *   (`workflow_runs.loop_id`). Workflow runs started by hand (`loops workflows run`) belong to no
 *   loop and are not counted;
 * - turns, tokens, cost, `costRuns` and the providers and models seen add both up: the reports of
 *   agent loop runs and of agent step attempts. `costRuns` counts the runs and step attempts whose
 *   CLI reported a cost;
 * - the window: a loop's run counts when it started (or was claimed, if it never started) at or
 *   after `--since`; an agent step attempt counts when its workflow run started at or after
 *   `--since` — the moment its loop run started — so a workflow loop's agent figures are those of
 *   the runs counted beside them, even for attempts that began later.
 *
 * Light on purpose (like queries.ts): no zod, xstate or rxjs.
 */
import { cached, type Db } from '../../events/db.js';
import { UsageError, isLoopsError } from '../../events/errors.js';
import { parseDuration } from '../../events/durations.js';
import { findLoop } from '../queries/loops.js';

export interface AgentStats {
  /** Runs of agent loops in the window (whether or not the CLI reported anything). */
  runs: number;
  /** Agent step attempts that ended in the workflow runs of workflow loops (whether or not the CLI reported anything). */
  steps: number;
  /** Sums of what the CLIs reported (agent runs and agent step attempts); null when none reported the number. */
  turns: number | null;
  tokens: { input: number | null; output: number | null; cacheRead: number | null; cacheWrite: number | null };
  /** Sum over the runs and step attempts whose CLI reported a cost (`costRuns` of them); null when none did. */
  costUsd: number | null;
  costRuns: number;
  /** Providers and models seen, sorted (the model the CLI reported, else the one the loop or step asked for). */
  providers: string[];
  models: string[];
  /** The (provider, model) pairs seen, sorted; model null when neither the CLI nor the loop (or step) named one. */
  seen: Array<{ provider: string; model: string | null }>;
}

export interface RunStats {
  runs: number;
  succeeded: number;
  failed: number;
  timedOut: number;
  cancelled: number;
  abandoned: number;
  /** Not ended yet (claimed, spawning or running). */
  running: number;
  /** Runs whose output folder `loops prune` removed: their outcome is counted, their output is gone. */
  outputPruned: number;
  /** succeeded / ended runs (0..1); null when no run has ended. */
  successRate: number | null;
  /** Sum and median of the ended runs' durations; null when no run has a duration. */
  totalDurationMs: number | null;
  medianDurationMs: number | null;
  agent: AgentStats;
}

export interface LoopStats extends RunStats {
  loopId: string;
  name: string;
  status: string;
}

export interface StatsReport {
  /** Start of the window (ISO), null for all time. */
  since: string | null;
  loops: LoopStats[];
  total: RunStats & { loops: number };
}

export interface StatsOptions {
  /** A loop's name, id or unique id prefix (removed loops included); all loops when absent. */
  loop?: string | undefined;
  /** Only runs claimed or started at or after this ISO time. */
  since?: string | null | undefined;
}

const TERMINAL = "('succeeded', 'failed', 'timed_out', 'cancelled', 'abandoned')";
/**
 * A run's time for the window: when it started, or was claimed if it never started. The
 * expression of the loop_runs_time index (src/projections/runs.ts): keep the two the same.
 */
const RUN_TIME = 'COALESCE(started_at, claimed_at)';
const IS_AGENT = "json_extract(target, '$.kind') = 'agent'";

/**
 * One pass over the window's runs, grouped by loop (in the order of the loop_runs_loop index, so
 * without a sort): the sums, and the distinct (provider, model) pairs of its agent runs — the model
 * the CLI reported, else the one the loop asked for.
 */
const SUMS = `
  loop_id,
  COUNT(*) AS runs,
  SUM(status = 'succeeded') AS succeeded,
  SUM(status = 'failed') AS failed,
  SUM(status = 'timed_out') AS timed_out,
  SUM(status = 'cancelled') AS cancelled,
  SUM(status = 'abandoned') AS abandoned,
  SUM(status NOT IN ${TERMINAL}) AS running,
  SUM(output_pruned_at IS NOT NULL) AS output_pruned,
  SUM(CASE WHEN status IN ${TERMINAL} THEN duration_ms END) AS total_duration_ms,
  SUM(${IS_AGENT}) AS agent_runs,
  SUM(json_extract(agent, '$.turns')) AS turns,
  SUM(json_extract(agent, '$.tokens.input')) AS tokens_input,
  SUM(json_extract(agent, '$.tokens.output')) AS tokens_output,
  SUM(json_extract(agent, '$.tokens.cacheRead')) AS tokens_cache_read,
  SUM(json_extract(agent, '$.tokens.cacheWrite')) AS tokens_cache_write,
  SUM(json_extract(agent, '$.costUsd')) AS cost_usd,
  COUNT(json_extract(agent, '$.costUsd')) AS cost_runs,
  json_group_array(DISTINCT CASE WHEN ${IS_AGENT} THEN json_array(
    COALESCE(json_extract(agent, '$.provider'), json_extract(target, '$.provider')),
    COALESCE(json_extract(agent, '$.model'), json_extract(target, '$.model'))) END) AS seen`;

/**
 * The same sums over the agent step attempts that ended, per workflow loop: its workflow runs in the
 * window (through workflow_runs_loop_started, or all of them in workflow_runs_loop's order), each
 * run's agent steps and their ended attempts (by primary key). The provider and model: the CLI's, else the step's spec's.
 */
const STEP_SUMS = `
  r.loop_id AS loop_id,
  COUNT(*) AS agent_steps,
  SUM(json_extract(a.agent, '$.turns')) AS turns,
  SUM(json_extract(a.agent, '$.tokens.input')) AS tokens_input,
  SUM(json_extract(a.agent, '$.tokens.output')) AS tokens_output,
  SUM(json_extract(a.agent, '$.tokens.cacheRead')) AS tokens_cache_read,
  SUM(json_extract(a.agent, '$.tokens.cacheWrite')) AS tokens_cache_write,
  SUM(json_extract(a.agent, '$.costUsd')) AS cost_usd,
  COUNT(json_extract(a.agent, '$.costUsd')) AS cost_runs,
  json_group_array(DISTINCT json_array(
    COALESCE(json_extract(a.agent, '$.provider'), s.provider),
    COALESCE(json_extract(a.agent, '$.model'), s.model))) AS seen`;

/** What agent runs or step attempts reported, summed (one row per loop). */
interface AgentSumsRow {
  loop_id: string;
  turns: number | null;
  tokens_input: number | null;
  tokens_output: number | null;
  tokens_cache_read: number | null;
  tokens_cache_write: number | null;
  cost_usd: number | null;
  cost_runs: number;
  /** JSON: [[provider, model], …] (null entries for runs that are not agent runs). */
  seen: string;
}

/** The agent figures of one workflow loop's step attempts. */
interface StepSumsRow extends AgentSumsRow {
  agent_steps: number;
}

interface SumsRow extends AgentSumsRow {
  runs: number;
  succeeded: number;
  failed: number;
  timed_out: number;
  cancelled: number;
  abandoned: number;
  running: number;
  output_pruned: number;
  total_duration_ms: number | null;
  agent_runs: number;
}

/** What the rows of a loop (or of all loops) add up to. */
interface Sums {
  runs: number;
  succeeded: number;
  failed: number;
  timedOut: number;
  cancelled: number;
  abandoned: number;
  running: number;
  outputPruned: number;
  totalDurationMs: number | null;
  agentRuns: number;
  agentSteps: number;
  turns: number | null;
  input: number | null;
  output: number | null;
  cacheRead: number | null;
  cacheWrite: number | null;
  costUsd: number | null;
  costRuns: number;
  seen: Map<string, { provider: string; model: string | null }>;
}

const emptySums = (): Sums => ({
  runs: 0,
  succeeded: 0,
  failed: 0,
  timedOut: 0,
  cancelled: 0,
  abandoned: 0,
  running: 0,
  outputPruned: 0,
  totalDurationMs: null,
  agentRuns: 0,
  agentSteps: 0,
  turns: null,
  input: null,
  output: null,
  cacheRead: null,
  cacheWrite: null,
  costUsd: null,
  costRuns: 0,
  seen: new Map(),
});

/** Null-safe addition: null means "nobody reported it", and stays null only while nobody did. */
const plus = (a: number | null, b: number | null): number | null => (a === null ? b : b === null ? a : a + b);

function add(into: Sums, r: SumsRow): void {
  into.runs += r.runs;
  into.succeeded += r.succeeded;
  into.failed += r.failed;
  into.timedOut += r.timed_out;
  into.cancelled += r.cancelled;
  into.abandoned += r.abandoned;
  into.running += r.running;
  into.outputPruned += r.output_pruned;
  into.totalDurationMs = plus(into.totalDurationMs, r.total_duration_ms);
  into.agentRuns += r.agent_runs;
  addAgent(into, r);
}

function addSteps(into: Sums, r: StepSumsRow): void {
  into.agentSteps += r.agent_steps;
  addAgent(into, r);
}

function addAgent(into: Sums, r: AgentSumsRow): void {
  into.turns = plus(into.turns, r.turns);
  into.input = plus(into.input, r.tokens_input);
  into.output = plus(into.output, r.tokens_output);
  into.cacheRead = plus(into.cacheRead, r.tokens_cache_read);
  into.cacheWrite = plus(into.cacheWrite, r.tokens_cache_write);
  into.costUsd = plus(into.costUsd, r.cost_usd);
  into.costRuns += r.cost_runs;
  for (const pair of JSON.parse(r.seen) as Array<[string | null, string | null] | null>) {
    if (pair === null || pair[0] === null) continue;
    into.seen.set(JSON.stringify(pair), { provider: pair[0], model: pair[1] });
  }
}

interface MedianRow {
  loop_id: string | null;
  median: number | null;
}

/**
 * Sums runs per loop (the named one, or every loop not removed plus removed loops with runs in
 * the window), and over all of them; a workflow loop's agent figures come from the agent step
 * attempts of its workflow runs (see the file header). Unknown loop → NotFoundError; several
 * matches → AmbiguousError.
 *
 * Three passes whatever the window's size: the sums per loop, the agent step sums per workflow
 * loop, and the medians (SQLite sorts the durations, spilling to temporary files rather than
 * growing without bound).
 */
export function runStats(db: Db, options: StatsOptions = {}): StatsReport {
  const since = options.since ?? null;
  const loopId = options.loop === undefined ? null : findLoop(db, options.loop, { includeRemoved: true }).id;
  // Only the filters in use, so that a named loop's runs are found through the loop_runs_loop index.
  // Not the runs of a loop's --on-failure command (slot hook:…): they would count a failure's report as a success of the loop.
  const where = [since === null ? null : `${RUN_TIME} >= @since`, loopId === null ? null : 'loop_id = @loopId', "slot NOT LIKE 'hook:%'"].filter((w) => w !== null).join(' AND ');
  const params = { ...(since === null ? {} : { since }), ...(loopId === null ? {} : { loopId }) };

  const perLoop = new Map<string, Sums>();
  const sumsOf = (id: string) => {
    let sums = perLoop.get(id);
    if (!sums) perLoop.set(id, (sums = emptySums()));
    return sums;
  };
  const total = emptySums();
  // With a window, its runs come through the loop_runs_time index (RUN_TIME) and are grouped in a
  // temporary b-tree: `+` keeps the planner from walking the whole history in loop_runs_loop's
  // order to save that sort. Without one, every run is read anyway, in that index's order.
  const groupBy = since === null ? 'GROUP BY loop_id' : 'GROUP BY +loop_id';
  for (const r of cached<[typeof params], SumsRow>(db, `SELECT ${SUMS} FROM loop_runs WHERE ${where} ${groupBy}`).iterate(params)) {
    add(sumsOf(r.loop_id), r);
    add(total, r);
  }
  // The agent step attempts of workflow loops: the window is their workflow run's start (through
  // the workflow_runs_loop_started index when there is a window). CROSS JOIN keeps the runs the
  // outer loop (SQLite does not reorder it): else the planner may start from every step of every
  // workflow run ever, hand-started ones included.
  const stepWhere = ['r.loop_id IS NOT NULL', since === null ? null : 'r.started_at >= @since', loopId === null ? null : 'r.loop_id = @loopId']
    .filter((w) => w !== null)
    .join(' AND ');
  for (const r of cached<[typeof params], StepSumsRow>(
    db,
    `SELECT ${STEP_SUMS}
       FROM workflow_runs r
       CROSS JOIN workflow_steps s ON s.wfrun_id = r.id AND s.target_type = 'agent'
       JOIN workflow_step_attempts a ON a.wfrun_id = s.wfrun_id AND a.step_id = s.step_id AND a.status IN ${TERMINAL}
      WHERE ${stepWhere}
      ${since === null ? 'GROUP BY r.loop_id' : 'GROUP BY +r.loop_id'}`,
  ).iterate(params)) {
    addSteps(sumsOf(r.loop_id), r);
    addSteps(total, r);
  }

  // Medians: the middle row (or the mean of the two middle rows) of the ended runs by duration,
  // per loop and over all (the same as the loop's when one loop is named).
  const middle = 'i IN ((n + 1) / 2, (n + 2) / 2)';
  const medianRows = cached<[typeof params], MedianRow>(
    db,
    `WITH d AS MATERIALIZED (
       SELECT loop_id, duration_ms FROM loop_runs WHERE ${where} AND status IN ${TERMINAL} AND duration_ms IS NOT NULL
     ),
     per AS (
       SELECT loop_id, duration_ms, ROW_NUMBER() OVER (PARTITION BY loop_id ORDER BY duration_ms) AS i, COUNT(*) OVER (PARTITION BY loop_id) AS n FROM d
     )
     SELECT loop_id, AVG(duration_ms) AS median FROM per WHERE ${middle} GROUP BY loop_id
     ${
       loopId !== null
         ? ''
         : `UNION ALL
     SELECT NULL, AVG(duration_ms) FROM (SELECT duration_ms, ROW_NUMBER() OVER (ORDER BY duration_ms) AS i, COUNT(*) OVER () AS n FROM d) WHERE ${middle}`
     }`,
  ).all(params);
  const medians = new Map(medianRows.map((r) => [r.loop_id, r.median]));
  const totalMedian = loopId !== null ? (medians.get(loopId) ?? null) : (medians.get(null) ?? null);

  const loopRows =
    loopId !== null
      ? cached<[string], LoopRow>(db, 'SELECT id, name, status FROM loops WHERE id = ?').all(loopId)
      : cached<[string], LoopRow>(
          db,
          `SELECT id, name, status FROM loops
            WHERE status <> 'removed' OR id IN (SELECT value FROM json_each(?))
            ORDER BY name COLLATE NOCASE, created_at, id`,
        ).all(JSON.stringify([...perLoop.keys()]));
  const loops = loopRows.map(
    (l): LoopStats => ({
      loopId: l.id,
      name: l.name,
      status: l.status,
      ...toStats(perLoop.get(l.id) ?? emptySums(), medians.get(l.id) ?? null),
    }),
  );
  return { since, loops, total: { loops: loops.length, ...toStats(total, totalMedian) } };
}

interface LoopRow {
  id: string;
  name: string;
  status: string;
}

function toStats(s: Sums, median: number | null): RunStats {
  const seen = [...s.seen.values()].sort((a, b) => a.provider.localeCompare(b.provider) || (a.model ?? '').localeCompare(b.model ?? ''));
  const ended = s.runs - s.running;
  return {
    runs: s.runs,
    succeeded: s.succeeded,
    failed: s.failed,
    timedOut: s.timedOut,
    cancelled: s.cancelled,
    abandoned: s.abandoned,
    running: s.running,
    outputPruned: s.outputPruned,
    successRate: ended > 0 ? s.succeeded / ended : null,
    totalDurationMs: s.totalDurationMs,
    medianDurationMs: median === null ? null : Math.round(median),
    agent: {
      runs: s.agentRuns,
      steps: s.agentSteps,
      turns: s.turns,
      tokens: { input: s.input, output: s.output, cacheRead: s.cacheRead, cacheWrite: s.cacheWrite },
      // Nano-dollars: enough for any price, and no floating-point noise from the sum (0.1 + 0.2).
      costUsd: s.costUsd === null ? null : Math.round(s.costUsd * 1e9) / 1e9,
      costRuns: s.costRuns,
      providers: [...new Set(seen.map((m) => m.provider))],
      models: [...new Set(seen.flatMap((m) => (m.model === null ? [] : [m.model])))].sort(),
      seen,
    },
  };
}

const ISO_START = /^\d{4}-\d{2}-\d{2}/;

/**
 * `--since`: an ISO time (without an offset it is read in the system time zone, like `--at`) or a
 * duration meaning that long before `now` (`7d`, `24h`, `1h30m`). Returns the ISO instant.
 * Anything else, or a time in the future, is a UsageError.
 */
export async function parseSince(input: string, now: number, flag = '--since'): Promise<string> {
  const text = input.trim();
  const hint = 'give an ISO time (2026-05-01, 2026-05-01T09:00, 2026-05-01T07:00Z) or how long ago (7d, 24h, 90m, 1h30m)';
  let at: number;
  try {
    if (ISO_START.test(text)) {
      const { parseInstant, systemTimeZone } = await import('../../scheduling/schedule.js');
      at = parseInstant(text, systemTimeZone(), flag);
    } else {
      at = now - parseDuration(text, flag, Infinity);
    }
  } catch (error) {
    if (!isLoopsError(error)) throw error;
    // An ISO-looking value keeps parseInstant's message (it says what is wrong with the date).
    const message = ISO_START.test(text) ? error.message : `${flag}: ${JSON.stringify(input)} is neither a time nor a duration`;
    throw new UsageError(message, { hint, cause: error });
  }
  if (!Number.isFinite(at) || at < Date.UTC(1970, 0, 1)) {
    throw new UsageError(`${flag}: ${JSON.stringify(input)} is too far back`, { hint });
  }
  if (at > now) {
    throw new UsageError(`${flag}: ${new Date(at).toISOString()} is in the future`, { hint: 'the window starts in the past, e.g. --since 7d' });
  }
  return new Date(at).toISOString();
}
