/**
 * `loops import hasna-loops`: brings a predecessor (`@hasna/loops` 0.3.x) database across — its
 * loops, workflow specs and, with `withHistory`, its finished runs — as ordinary events of this log.
 *
 * - **Read-only there.** The other database is opened read-only and never written; refused while
 *   the other tool's daemon holds its lease (it would keep firing the same loops).
 * - **One batch here.** Everything is planned first (every row mapped and checked, nothing
 *   written); then every event is appended in one transaction: all of it, or — on any error —
 *   nothing. A dry run stops after planning.
 * - **The same ids.** Each record keeps its id behind loops' prefix (`310a5c22ffcc` becomes loop
 *   `loop_310a5c22ffcc`, run `run_…`, workflow `wf_…`, workflow run `wfrun_…`), and every event
 *   names it in `importedFrom`. That is also what makes a second import a no-op: a stream that
 *   exists already is reported `already imported` and left alone.
 * - **Its meaning, explicitly.** An imported loop carries the predecessor's effective settings as
 *   loops settings: its 30-minute default timeout where none was set, constant retry delays, its
 *   cron read in this machine's zone (the predecessor used the process's local time), the slot it
 *   was due next (a slot missed while neither tool ran is decided by its catch-up policy). What
 *   cannot come across is reported per record with the reason, never dropped silently.
 * - **No secret in clear.** An `env` value whose name says it is a secret is not carried: the
 *   variable becomes a `--secret-env` name (its value must come from the daemon's environment), and
 *   imported output has every form of the value masked.
 */
import { createHash } from 'node:crypto';
import { homedir } from 'node:os';
import { resolve } from 'node:path';
import type { EventData, ImportedFrom, LoopPolicies, Schedule, Target, Timing } from '../../events/catalog.js';
import { CATCH_UP, OVERLAP } from '../../events/policies.js';
import { UsageError } from '../../events/errors.js';
import type { Batch } from '../../events/types.js';
import { currentMachines } from '../../machines/registry.js';
import { nextFireAt } from '../../scheduling/planner.js';
import { systemTimeZone } from '../../scheduling/schedule.js';
import { parseCronPattern } from '../../scheduling/cron.js';
import { DurableActor } from '../actor.js';
import { isProviderId } from '../agents/index.js';
import { secretByConvention, SecretMasker } from '../execution/secrets.js';
import { DEFAULT_KILL_GRACE_MS, recordLoopCreated } from '../loops/commands.js';
import type { Runtime } from '../runtime.js';
import { parseWorkflowText } from '../workflows/files.js';
import type { WorkflowSpec } from '../../workflow/spec.js';
import { checkName } from '../../events/names.js';
import { checkLease, PREDECESSOR, readPredecessor, type PLoop, type Predecessor, type PStepRun } from './predecessor-db.js';

import { firstLine, iso, mapId, mapPolicies, mapSchedule, mapTarget, parseJson, posInt, RUN_STATUS, statusEvent, tail } from './import-map.js';

export { PREDECESSOR };
export { PREDECESSOR_TIMEOUT_MS } from './import-map.js';


export interface ImportOptions {
  /** The predecessor's database (default: `~/.hasna/loops/loops.db`); an empty path is a UsageError. */
  db?: string;
  dryRun?: boolean;
  withHistory?: boolean;
  /** Put before every imported loop and workflow name (to avoid a clash with names taken here). */
  prefix?: string;
}

export type ImportOutcome = 'imported' | 'already imported' | 'not imported';

export interface ImportRow {
  kind: 'loop' | 'workflow' | 'run' | 'workflow run';
  /** The record's name (a run: its loop's name). */
  name: string;
  /** Its id in the predecessor's database. */
  sourceId: string;
  /** Its id here (also when not imported: the id it would have). */
  id: string;
  outcome: ImportOutcome;
  /** Why not, or what changed on the way (a renamed loop, a secret not carried, …). */
  notes: string[];
}

export interface ImportReport {
  db: string;
  tool: string;
  dryRun: boolean;
  withHistory: boolean;
  rows: ImportRow[];
  /** Records of each kind by outcome. */
  counts: Record<ImportRow['kind'], Record<ImportOutcome, number>>;
  /** Events appended (0 in a dry run, or when everything was there already). */
  events: number;
}

/** The predecessor's default database: `$LOOPS_DATA_DIR/loops.db` there meant its own data directory, so only the home default is assumed. */
export function defaultPredecessorDb(home: string): string {
  return resolve(home, '.hasna', 'loops', 'loops.db');
}

// ── planning ──────────────────────────────────────────────────────────────────────────────────

interface Planned {
  row: ImportRow;
  /** Appends this record's events (in the import's batch); absent when nothing is written. */
  write?: (batch: Batch) => Promise<number>;
}

async function streamExists(runtime: Runtime, streamId: string): Promise<boolean> {
  return (await runtime.log.streamInfo(streamId)) !== undefined;
}

/** Plans, then (unless a dry run) writes everything in one batch. */
export async function importHasnaLoops(runtime: Runtime, options: ImportOptions): Promise<ImportReport> {
  const given = options.db ?? defaultPredecessorDb(homedir());
  if (given.trim() === '') throw new UsageError('--db: the path is empty', { hint: 'e.g. --db ~/.hasna/loops/loops.db' });
  const file = resolve(given);
  const p = readPredecessor(file);
  const nowMs = runtime.clock.now();
  const staleLease = checkLease(p, nowMs);
  const tool = `${PREDECESSOR} 0.3`;
  const from = (id: string): ImportedFrom => ({ tool, db: file, id });
  const prefix = options.prefix ?? '';
  if (prefix !== '') checkName('loop', `${prefix}x`, '--prefix');
  const tz = systemTimeZone();
  const planned: Planned[] = [];

  // Workflows first: loops of workflows refer to them.
  const workflowIds = new Map<string, { id: string; name: string }>();
  const specs = new Map<string, WorkflowSpec>();
  const takenWorkflowNames = new Set<string>();
  for (const w of p.workflows) {
    const id = mapId('wf', w.id);
    const name = `${prefix}${w.name}`;
    const row: ImportRow = { kind: 'workflow', name, sourceId: w.id, id, outcome: 'imported', notes: [] };
    planned.push({ row });
    if (await streamExists(runtime, `workflow:${id}`)) {
      row.outcome = 'already imported';
      workflowIds.set(w.id, { id, name: workflowNameOf(runtime, id) ?? name });
      const spec = currentSpecOf(runtime, id);
      if (spec) specs.set(w.id, spec);
      continue;
    }
    let spec: WorkflowSpec;
    try {
      const steps = JSON.parse(w.steps_json) as unknown;
      const loaded = parseWorkflowText(JSON.stringify({ name, ...(w.description ? { description: w.description } : {}), version: w.version, steps }), `${file}: workflow ${w.name}`);
      spec = loaded.spec;
      row.notes.push(...loaded.warnings.map((x) => x.replace(`${file}: workflow ${w.name}: `, '')));
    } catch (error) {
      row.outcome = 'not imported';
      row.notes.push(firstLine(error));
      continue;
    }
    const archived = w.status === 'archived';
    if (!archived) {
      const clash = runtime.db.prepare<[string], { id: string }>('SELECT id FROM workflows WHERE live_name = ?').get(name);
      if (clash || takenWorkflowNames.has(name)) {
        row.outcome = 'not imported';
        row.notes.push(`a workflow named ${name} already exists here${clash ? ` (${clash.id})` : ''}: rename it, or import with --prefix`);
        continue;
      }
      takenWorkflowNames.add(name);
    } else row.notes.push('archived there: archived here');
    workflowIds.set(w.id, { id, name });
    specs.set(w.id, spec);
    if (w.version !== 1) row.notes.push(`version ${w.version} there: version 1 here (the number is kept in the log)`);
    const data: EventData<'workflow.created'> = { workflowId: id, name, version: 1, spec, sourceFile: null, sha256: null, importedFrom: { ...from(w.id), version: Math.max(1, w.version) } };
    planned[planned.length - 1]!.write = async (batch) => {
      const actor = DurableActor.create(runtime, `workflow:${id}`, 'workflow', currentMachines.workflow);
      await actor.record('workflow.created', data, { batch });
      if (archived) await actor.record('workflow.archived', { reason: `archived in ${PREDECESSOR}` }, { batch });
      return archived ? 2 : 1;
    };
  }

  // Loops.
  const loopTargets = new Map<string, { id: string; name: string; target: Target; masker: SecretMasker }>();
  const seenNames = new Map<string, number>();
  const firstOfName = new Map<string, string>();
  for (const l of p.loops) {
    seenNames.set(l.name, (seenNames.get(l.name) ?? 0) + 1);
    if (!firstOfName.has(l.name)) firstOfName.set(l.name, l.id);
  }
  const takenLoopNames = new Set<string>();
  for (const l of p.loops) {
    const id = mapId('loop', l.id);
    let name = `${prefix}${l.name}`;
    const row: ImportRow = { kind: 'loop', name, sourceId: l.id, id, outcome: 'imported', notes: [] };
    planned.push({ row });
    if (await streamExists(runtime, `loop:${id}`)) {
      row.outcome = 'already imported';
      const target = loopTargetOf(runtime, id);
      if (target) loopTargets.set(l.id, { id, name: target.name, target: target.target, masker: new SecretMasker([]) });
      continue;
    }
    try {
      if ((seenNames.get(l.name) ?? 0) > 1 && firstOfName.get(l.name) !== l.id) {
        // The predecessor allowed two loops of one name; loops names are unique: the oldest keeps
        // it, each later one is told apart by its id.
        const renamed = `${name}-${l.id}`;
        row.notes.push(`renamed from ${name}: ${seenNames.get(l.name)} loops there share that name (the oldest keeps it)`);
        name = renamed;
        row.name = name;
      }
      checkName('loop', name, 'name');
      const clash = runtime.db.prepare<[string], { id: string }>('SELECT id FROM loops WHERE live_name = ?').get(name);
      if (clash || takenLoopNames.has(name)) {
        throw new Error(`a loop named ${name} already exists here${clash ? ` (${clash.id})` : ''}: rename it, or import with --prefix`);
      }
      takenLoopNames.add(name);
      const mapped = mapTarget(parseJson(l.target_json, 'its target'), workflowIds);
      row.notes.push(...mapped.notes);
      const next = iso(l.next_run_at);
      const anchorAt = next ?? iso(l.created_at) ?? new Date(nowMs).toISOString();
      const schedule = mapSchedule(parseJson(l.schedule_json, 'its schedule'), anchorAt, tz);
      if (schedule.kind === 'cron') row.notes.push(`cron read in ${tz} (the predecessor used the local time)`);
      const timing: Timing = { tz, jitterMs: null, startsAt: null, expiresAt: iso(l.expires_at), maxRuns: null };
      const policies = mapPolicies(l, mapped.timeoutMs);
      // Where the predecessor's schedule stood: its next slot (or pending retry) is still to decide.
      const due = [next, iso(l.retry_scheduled_for)].filter((x): x is string => x !== null).sort()[0] ?? null;
      const scheduleFrom = due !== null && schedule.kind !== 'every' ? new Date(Date.parse(due) - 1).toISOString() : undefined;
      const plannable = { id, schedule, timing };
      const nextRunAt = schedule.kind === 'every' && schedule.anchor === 'fixed-delay' ? (next ?? nextFireAt(plannable, nowMs, 0)) : nextFireAt(plannable, scheduleFrom ? Date.parse(scheduleFrom) : nowMs, 0);
      if (l.retry_scheduled_for) row.notes.push(`a retry was due at ${l.retry_scheduled_for}: its slot is decided again by the catch-up policy`);
      const data: EventData<'loop.created'> = {
        loopId: id,
        name,
        description: l.description ?? null,
        schedule,
        timing,
        target: mapped.target,
        policies,
        nextRunAt,
        ...(scheduleFrom ? { scheduleFrom } : {}),
        importedFrom: from(l.id),
      };
      const follow = statusEvent(l.status);
      if (follow === undefined) throw new Error(`unknown status ${JSON.stringify(l.status)}`);
      if (follow) row.notes.push(`${l.status} there: ${l.status} here`);
      loopTargets.set(l.id, { id, name, target: mapped.target, masker: new SecretMasker(mapped.secrets) });
      planned[planned.length - 1]!.write = async (batch) => {
        await recordLoopCreated(runtime, data, batch);
        if (!follow) return 1;
        const actor = await DurableActor.load(runtime, `loop:${id}`);
        await actor.record(follow.type, follow.data, { batch });
        return 2;
      };
    } catch (error) {
      row.outcome = 'not imported';
      row.notes.push(firstLine(error));
    }
  }

  if (options.withHistory) await planHistory(runtime, p, planned, loopTargets, workflowIds, specs, from);

  const report: ImportReport = {
    db: file,
    tool,
    dryRun: options.dryRun === true,
    withHistory: options.withHistory === true,
    rows: planned.map((x) => x.row),
    counts: {
      loop: { imported: 0, 'already imported': 0, 'not imported': 0 },
      workflow: { imported: 0, 'already imported': 0, 'not imported': 0 },
      run: { imported: 0, 'already imported': 0, 'not imported': 0 },
      'workflow run': { imported: 0, 'already imported': 0, 'not imported': 0 },
    },
    events: 0,
  };
  if (staleLease) report.rows.unshift({ kind: 'loop', name: '(daemon)', sourceId: '-', id: '-', outcome: 'not imported', notes: [staleLease] });
  for (const r of planned) report.counts[r.row.kind][r.row.outcome] += 1;
  if (staleLease) report.rows.shift();
  const writes = planned.filter((x) => x.write && x.row.outcome === 'imported');
  if (report.dryRun || writes.length === 0) return report;
  await runtime.log.batch(async (batch) => {
    for (const w of writes) report.events += await w.write!(batch);
  });
  return report;
}

async function planHistory(
  runtime: Runtime,
  p: Predecessor,
  planned: Planned[],
  loops: Map<string, { id: string; name: string; target: Target; masker: SecretMasker }>,
  workflowIds: Map<string, { id: string; name: string }>,
  specs: Map<string, WorkflowSpec>,
  from: (id: string) => ImportedFrom,
): Promise<void> {
  const skipped = new Map<string, number>();
  const loopRunSlots = new Map<string, { id: string; loopId: string; slot: string }>();
  const wfRunOfLoopRun = new Map<string, string>();
  for (const w of p.workflowRuns) if (w.loop_run_id) wfRunOfLoopRun.set(w.loop_run_id, mapId('wfrun', w.id));
  for (const r of p.runs) {
    const loop = loops.get(r.loop_id);
    const id = mapId('run', r.id);
    if (r.status === 'skipped') {
      // A slot skipped for overlap: loops records those as slot decisions, not runs.
      skipped.set(r.loop_name, (skipped.get(r.loop_name) ?? 0) + 1);
      continue;
    }
    const row: ImportRow = { kind: 'run', name: loop?.name ?? r.loop_name, sourceId: r.id, id, outcome: 'imported', notes: [] };
    planned.push({ row });
    if (await streamExists(runtime, `run:${id}`)) {
      row.outcome = 'already imported';
      continue;
    }
    if (!loop) {
      row.outcome = 'not imported';
      row.notes.push('its loop is not imported');
      continue;
    }
    const scheduledFor = iso(r.scheduled_for) ?? iso(r.created_at);
    const status = RUN_STATUS[r.status];
    if (scheduledFor === null || status === undefined) {
      row.outcome = 'not imported';
      row.notes.push(scheduledFor === null ? `its scheduled time ${JSON.stringify(r.scheduled_for)} is not a time` : `unknown status ${JSON.stringify(r.status)}`);
      continue;
    }
    const manual = (r.claimed_by ?? '').startsWith('manual');
    const slot = manual ? `manual:${id}` : scheduledFor;
    loopRunSlots.set(r.id, { id, loopId: loop.id, slot });
    const out = tail(r.stdout, loop.masker);
    const err = tail(r.stderr, loop.masker);
    const startedAt = iso(r.started_at);
    const finishedAt = iso(r.finished_at) ?? (r.status === 'running' ? null : startedAt);
    if (r.status === 'running') row.notes.push('was running there: imported as abandoned');
    const data: EventData<'run.imported'> = {
      runId: id,
      loopId: loop.id,
      loopName: loop.name,
      slot,
      scheduledFor,
      attempt: posInt(r.attempt) ?? 1,
      trigger: manual ? 'manual' : 'schedule',
      target: loop.target,
      status,
      exitCode: Number.isInteger(r.exit_code) ? r.exit_code : null,
      pid: posInt(r.pid),
      error: r.status === 'running' ? `unfinished in ${PREDECESSOR} (its daemon stopped during the run); its end is unknown` : r.error === null ? null : loop.masker.mask(r.error),
      stdout: out.text,
      stderr: err.text,
      stdoutBytes: out.bytes,
      stderrBytes: err.bytes,
      startedAt,
      finishedAt,
      durationMs: r.duration_ms !== null && r.duration_ms >= 0 ? Math.round(r.duration_ms) : null,
      wfRunId: wfRunOfLoopRun.get(r.id) ?? null,
      importedFrom: from(r.id),
    };
    planned[planned.length - 1]!.write = async (batch) => {
      await DurableActor.create(runtime, `run:${id}`, 'run', currentMachines.run).record('run.imported', data, { batch });
      return 1;
    };
  }
  for (const [name, n] of skipped) {
    const loopRow = planned.find((x) => x.row.kind === 'loop' && x.row.sourceId === p.loops.find((l) => l.name === name)?.id);
    loopRow?.row.notes.push(`${n} skipped slot${n > 1 ? 's' : ''} there not imported (loops records skips as slot decisions)`);
  }

  const steps = new Map<string, PStepRun[]>();
  for (const s of p.stepRuns) steps.set(s.workflow_run_id, [...(steps.get(s.workflow_run_id) ?? []), s]);
  for (const w of p.workflowRuns) {
    const id = mapId('wfrun', w.id);
    const wf = workflowIds.get(w.workflow_id);
    const row: ImportRow = { kind: 'workflow run', name: wf?.name ?? w.workflow_name, sourceId: w.id, id, outcome: 'imported', notes: [] };
    planned.push({ row });
    if (await streamExists(runtime, `wfrun:${id}`)) {
      row.outcome = 'already imported';
      continue;
    }
    const spec = specs.get(w.workflow_id);
    if (!wf || !spec) {
      row.outcome = 'not imported';
      row.notes.push('its workflow is not imported');
      continue;
    }
    const startedAt = iso(w.started_at) ?? iso(w.created_at)!;
    const unfinished = w.status === 'running';
    const finishedAt = iso(w.finished_at) ?? startedAt;
    const status: EventData<'wfrun.imported'>['status'] = unfinished ? 'failed' : w.status === 'succeeded' || w.status === 'cancelled' || w.status === 'timed_out' ? w.status : 'failed';
    if (unfinished) row.notes.push('was running there: imported as failed');
    const loopRun = w.loop_run_id ? loopRunSlots.get(w.loop_run_id) : undefined;
    const known = new Set(spec.steps.map((s) => s.id));
    const masker = new SecretMasker([]);
    const stepData = (steps.get(w.id) ?? [])
      .filter((s) => known.has(s.step_id))
      .map((s) => {
        const ran = iso(s.started_at) !== null;
        const st: EventData<'wfrun.imported'>['steps'][number]['status'] =
          s.status === 'succeeded' || s.status === 'failed' || s.status === 'timed_out' || s.status === 'cancelled' || s.status === 'skipped'
            ? s.status
            : s.status === 'running'
              ? 'abandoned'
              : 'skipped';
        const out = tail(s.stdout, masker);
        const err = tail(s.stderr, masker);
        return {
          stepId: s.step_id,
          status: st,
          reason: st === 'skipped' ? (s.error ?? `not run in ${PREDECESSOR}`) : null,
          exitCode: Number.isInteger(s.exit_code) ? s.exit_code : null,
          pid: posInt(s.pid),
          error: st === 'skipped' ? null : s.error,
          stdout: out.text,
          stderr: err.text,
          stdoutBytes: out.bytes,
          stderrBytes: err.bytes,
          startedAt: ran ? iso(s.started_at) : null,
          finishedAt: iso(s.finished_at),
          durationMs: s.duration_ms !== null && s.duration_ms >= 0 ? Math.round(s.duration_ms) : null,
        };
      });
    const data: EventData<'wfrun.imported'> = {
      wfRunId: id,
      workflowId: wf.id,
      workflowName: wf.name,
      version: 1,
      spec,
      trigger: w.loop_id ? 'schedule' : 'manual',
      loopId: loopRun?.loopId ?? null,
      loopRunId: loopRun?.id ?? null,
      slot: loopRun?.slot ?? null,
      status,
      startedAt,
      finishedAt,
      error: unfinished ? `unfinished in ${PREDECESSOR} (its daemon stopped during the run)` : w.error,
      steps: stepData,
      importedFrom: from(w.id),
    };
    planned[planned.length - 1]!.write = async (batch) => {
      await DurableActor.create(runtime, `wfrun:${id}`, 'wfrun', currentMachines.workflowRun).record('wfrun.imported', data, { batch });
      return 1;
    };
  }
}

function workflowNameOf(runtime: Runtime, id: string): string | null {
  return runtime.db.prepare<[string], { name: string }>('SELECT name FROM workflows WHERE id = ?').get(id)?.name ?? null;
}

function currentSpecOf(runtime: Runtime, id: string): WorkflowSpec | null {
  const row = runtime.db.prepare<[string], { spec: string }>('SELECT spec FROM workflow_versions WHERE workflow_id = ? AND version = 1').get(id);
  return row ? (JSON.parse(row.spec) as WorkflowSpec) : null;
}

function loopTargetOf(runtime: Runtime, id: string): { name: string; target: Target } | null {
  const row = runtime.db.prepare<[string], { name: string; target: string }>('SELECT name, target FROM loops WHERE id = ?').get(id);
  return row ? { name: row.name, target: JSON.parse(row.target) as Target } : null;
}
