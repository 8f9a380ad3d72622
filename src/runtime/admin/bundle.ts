/**
 * `loops export`: a portable, checkable record of a run, a workflow run, or a loop and its runs
 * since a time — the events of every stream involved (a workflow run's workflow definition
 * stream too), its step outputs and its output files, secrets masked, each line chained to the
 * one before by sha256 (the format: bundle-format.ts; checking it: bundle-verify.ts; the HTML
 * view: bundle-html.ts; docs/audit.md says what a bundle proves).
 *
 * Masked: the values the log holds under secret names (an `env` entry a definition stored in
 * clear), and the values this process's environment gives the secret names the runs declare
 * (`--secret-env`, a workflow's `secrets:`, the agent CLIs' credential variables). Values a
 * `--secret-file` / `--secret-cmd` reference gives are not read here: the runner masked them in
 * the output files when each process ended, and the log never held them.
 */
import { closeSync, existsSync, openSync, readdirSync, readFileSync, readSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import type { Db } from '../../events/db.js';
import { LoopsError, NotFoundError, UsageError } from '../../events/errors.js';
import { inlineSecretNames, MIN_SECRET_LENGTH } from '../../events/secret-names.js';
import type { EventStore, Json, StoredEvent, StreamInfo } from '../../events/types.js';
import { contextChanges, fieldHashes } from '../../machines/context-diff.js';
import { fold } from '../../machines/fold.js';
import { getMachine } from '../../machines/registry.js';
import { LOOPS_VERSION } from '../acting.js';
import { runSecrets } from '../execution/run-secrets.js';
import { maskDeep, SecretMasker } from '../execution/secrets.js';
import { runDir } from '../paths.js';
import { findLoop, findRun } from '../queries/loops.js';
import { shownRef } from '../queries/refs.js';
import { orNull } from '../queries/run-files.js';
import { findWorkflowRun, workflowRunSteps } from '../queries/workflows.js';
import {
  BUNDLE_FORMAT,
  BUNDLE_FORMAT_VERSION,
  chain,
  canonicalJson,
  sha256Hex,
  type BundleEntry,
  type BundleEvent,
  type BundleFile,
  type BundleHeader,
  type BundleStream,
  type BundleSubject,
  type BundleTrailer,
} from './bundle-format.js';

export interface ExportOptions {
  /** For a loop: only its runs claimed at or after this instant (ISO); null: all. */
  since: string | null;
  /** The export's time (the header's `createdAt`). */
  now: string;
}

/** A bundle in memory, before it is written. */
export interface CollectedBundle {
  header: Omit<BundleHeader, 'kind'>;
  entries: BundleEntry[];
}

/** Loop events that define (or redefine) what a loop runs. */
const DEFINITION_TYPES = new Set(['loop.created', 'loop.rescheduled']);
const OUTPUT_FILE = /^(stdout|stderr)\.log(\.1|\.head)?$/;

/** What `ref` names: a run id (or unique prefix), a workflow run id (or prefix), or a loop's name or id. */
export function resolveBundleSubject(db: Db, ref: string): BundleSubject {
  const run = orNull(() => findRun(db, ref));
  if (run) return { kind: 'run', id: run.id, name: run.loopName, since: null };
  const wfRun = orNull(() => findWorkflowRun(db, ref));
  if (wfRun) return { kind: 'wfrun', id: wfRun.id, name: wfRun.workflowName, since: null };
  const loop = orNull(() => findLoop(db, ref, { includeRemoved: true }));
  if (loop) return { kind: 'loop', id: loop.id, name: loop.name, since: null };
  throw new NotFoundError(`no run, workflow run or loop ${shownRef(ref)}`, {
    hint: 'loops runs lists runs, loops workflows runs the workflow runs, loops list the loops',
  });
}

/** Reads everything the bundle of `ref` holds (nothing written). */
export async function collectBundle(db: Db, log: EventStore, dataDir: string, ref: string, options: ExportOptions): Promise<CollectedBundle> {
  const subject = resolveBundleSubject(db, ref);
  if (options.since !== null && subject.kind !== 'loop') {
    throw new UsageError(`loops export: --since is for a loop; ${subject.id} is a ${subject.kind === 'run' ? 'run' : 'workflow run'}`, { hint: 'drop --since, or name the loop' });
  }
  subject.since = options.since;
  const streams = new Map<string, { info: StreamInfo; events: StoredEvent[] }>();
  const loopDefinitions = new Map<string, BundleHeader['definitions']['loops'][number]>();
  const workflows = new Map<string, BundleHeader['definitions']['workflows'][number]>();
  const wfRuns: string[] = [];

  const addStream = async (streamId: string): Promise<StoredEvent[]> => {
    const known = streams.get(streamId);
    if (known) return known.events;
    const info = await log.streamInfo(streamId);
    if (!info) throw new NotFoundError(`no stream ${streamId} in the log`, { hint: 'loops verify checks the data directory' });
    const events = await log.readStream(streamId);
    streams.set(streamId, { info, events });
    return events;
  };
  const addLoopDefinition = async (loopId: string) => {
    if (loopDefinitions.has(loopId)) return;
    const info = await log.streamInfo(`loop:${loopId}`);
    const events = info ? await log.readStream(`loop:${loopId}`) : [];
    loopDefinitions.set(loopId, {
      loopId,
      events: events.filter((e) => DEFINITION_TYPES.has(e.type)).map((e) => ({ version: e.version, type: e.type, at: e.at, data: e.data as Json })),
    });
  };
  const addWfRun = async (wfRunId: string) => {
    if (streams.has(`wfrun:${wfRunId}`)) return;
    const events = await addStream(`wfrun:${wfRunId}`);
    wfRuns.push(wfRunId);
    const started = events.find((e) => e.type === 'wfrun.started' || e.type === 'wfrun.imported')?.data as
      | { workflowId: string; workflowName: string; version: number }
      | undefined;
    if (started) {
      workflows.set(`${started.workflowId}@${started.version}`, { workflowId: started.workflowId, name: started.workflowName, version: started.version });
      if (await log.streamInfo(`workflow:${started.workflowId}`)) await addStream(`workflow:${started.workflowId}`);
    }
  };
  const addRun = async (runId: string) => {
    const events = await addStream(`run:${runId}`);
    const loopId = (events.find((e) => e.type === 'run.claimed' || e.type === 'run.imported')?.data as { loopId?: string } | undefined)?.loopId;
    if (loopId) await addLoopDefinition(loopId);
    for (const e of events) {
      const wfRunId = (e.data as { wfRunId?: string | null } | null)?.wfRunId;
      if ((e.type === 'run.workflow_started' || e.type === 'run.imported') && wfRunId) await addWfRun(wfRunId);
    }
  };

  if (subject.kind === 'run') await addRun(subject.id);
  else if (subject.kind === 'wfrun') await addWfRun(subject.id);
  else {
    await addStream(`loop:${subject.id}`);
    await addLoopDefinition(subject.id);
    const rows = db
      .prepare<[string, string], { id: string }>('SELECT id FROM loop_runs WHERE loop_id = ? AND claimed_at >= ? ORDER BY claimed_position')
      .all(subject.id, options.since ?? '');
    for (const row of rows) await addRun(row.id);
  }

  const secrets = secretsOf([...streams.values()].flatMap((s) => s.events));
  const masker = new SecretMasker(secrets);
  const masked = { secrets: secrets.length, events: 0, files: 0 };
  const entries: BundleEntry[] = [];
  const headerStreams: BundleStream[] = [];
  for (const { info, events } of streams.values()) {
    const maskedEvents = events.map((e) => ({ ...e, data: maskDeep(e.data, masker) }));
    const changed = maskedEvents.map((e, i) => canonicalJson(e.data) !== canonicalJson(events[i]!.data));
    masked.events += changed.filter(Boolean).length;
    const unchecked = changed.some(Boolean) ? uncheckedFields(info, events, maskedEvents) : events.map(() => []);
    headerStreams.push({
      streamId: info.streamId,
      kind: info.kind,
      machineId: info.machineId,
      machineVersion: info.machineVersion,
      createdAt: info.createdAt,
      updatedAt: info.updatedAt,
      fromVersion: events[0]?.version ?? 0,
      toVersion: events[events.length - 1]?.version ?? 0,
      events: events.length,
    });
    maskedEvents.forEach((e, i) => entries.push(eventEntry(e, unchecked[i]!)));
  }
  for (const wfRunId of wfRuns) {
    for (const step of workflowRunSteps(db, wfRunId)) {
      if (step.attempt === 0) continue;
      entries.push({ kind: 'outputs', wfRunId, stepId: step.stepId, attempt: step.attempt, outputs: maskDeep(step.outputs, masker) });
    }
  }
  for (const streamId of streams.keys()) {
    const [kind, id] = [streamId.slice(0, streamId.indexOf(':')), streamId.slice(streamId.indexOf(':') + 1)];
    if (kind !== 'run' && kind !== 'wfrun') continue;
    for (const file of outputFilesUnder(runDir(dataDir, id))) {
      const raw = readFileSync(file);
      const bytes = masker.maskBuffer(raw);
      if (bytes !== raw) masked.files++;
      entries.push(fileEntry(streamId, relative(dataDir, file).split(sep).join('/'), bytes));
    }
  }
  return {
    header: {
      format: BUNDLE_FORMAT,
      formatVersion: BUNDLE_FORMAT_VERSION,
      createdAt: options.now,
      loops: LOOPS_VERSION,
      subject,
      streams: headerStreams,
      definitions: {
        workflows: [...workflows.values()],
        loops: [...loopDefinitions.values()].map((d) => ({ ...d, events: d.events.map((e) => ({ ...e, data: maskDeep(e.data, masker) })) })),
      },
      masked,
    },
    entries,
  };
}

function eventEntry(e: StoredEvent, unchecked: string[]): BundleEvent {
  return {
    kind: 'event',
    stream: e.streamId,
    version: e.version,
    type: e.type,
    v: e.v,
    position: e.position,
    at: e.at,
    data: e.data as Json,
    meta: e.meta,
    state: e.state,
    unchecked,
  };
}

/** An output file's entry: UTF-8 text as it is, anything else as base64. */
export function fileEntry(stream: string, path: string, bytes: Buffer): BundleFile {
  const text = bytes.toString('utf8');
  const utf8 = Buffer.from(text, 'utf8').equals(bytes);
  return { kind: 'file', stream, path, size: bytes.length, sha256: sha256Hex(bytes), encoding: utf8 ? 'utf8' : 'base64', content: utf8 ? text : bytes.toString('base64') };
}

/** The output files (stdout/stderr, their `.1` and `.head`) under a run's folder, at any depth, sorted. */
function outputFilesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const found: string[] = [];
  const walk = (d: string) => {
    for (const entry of readdirSync(d, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      const path = join(d, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile() && OUTPUT_FILE.test(entry.name)) found.push(path);
    }
  };
  walk(dir);
  return found;
}

/**
 * The secret values to mask: those stored under secret names in any `env` of the events (honouring
 * a target's `notSecret`), and what this environment gives the names the runs declare secret.
 */
function secretsOf(events: readonly StoredEvent[]): string[] {
  const values = new Set<string>();
  const names = new Set<string>();
  const walk = (v: unknown) => {
    if (v === null || typeof v !== 'object') return;
    if (Array.isArray(v)) {
      for (const item of v) walk(item);
      return;
    }
    const record = v as Record<string, unknown>;
    if (isStringRecord(record.env)) {
      const notSecret = Array.isArray(record.notSecret) ? (record.notSecret as string[]) : [];
      for (const name of inlineSecretNames(record.env, notSecret)) {
        const value = record.env[name]!;
        for (const form of [value, value.trim()]) if ([...form].length >= MIN_SECRET_LENGTH) values.add(form);
      }
    }
    for (const key of ['secretEnv', 'secrets']) {
      const list = record[key];
      if (Array.isArray(list)) for (const n of list) if (typeof n === 'string') names.add(n);
    }
    for (const item of Object.values(record)) walk(item);
  };
  for (const e of events) walk(e.data);
  return [...new Set([...values, ...runSecrets([...names])])];
}

function isStringRecord(v: unknown): v is Record<string, string> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && Object.values(v).every((x) => typeof x === 'string');
}

/**
 * Per event, the context fields whose hash masking changed: folding the masked events gives other
 * values there than the recorded hashes (`meta.ctx`) were computed from, so verify skips them.
 */
function uncheckedFields(info: StreamInfo, events: readonly StoredEvent[], maskedEvents: readonly StoredEvent[]): string[][] {
  const machine = info.machineId !== null && info.machineVersion !== null ? getMachine({ id: info.machineId, version: info.machineVersion }) : undefined;
  if (!machine) return events.map(() => []);
  const real = fold(machine, events).steps;
  const shown = fold(machine, maskedEvents).steps;
  return real.map((s, i) => {
    const a = fieldHashes(contextChanges(s.before.context, s.after.context));
    const m = shown[i] ? fieldHashes(contextChanges(shown[i].before.context, shown[i].after.context)) : {};
    return [...new Set([...Object.keys(a), ...Object.keys(m)])].filter((p) => a[p] !== m[p]).sort();
  });
}

/** The bundle's lines, each without its newline: header, chained entries, trailer. */
export function* bundleLines(bundle: CollectedBundle): Generator<string, void, undefined> {
  const header = chain('', { kind: 'header' as const, ...bundle.header });
  yield header.text;
  let prev = header.hash;
  for (const entry of bundle.entries) {
    const line = chain(prev, entry);
    prev = line.hash;
    yield line.text;
  }
  const trailer: BundleTrailer = { kind: 'trailer', count: bundle.entries.length, head: prev };
  yield canonicalJson(trailer);
}

/** Errors that say the path given is wrong (exit 2); others (a full disk, I/O) are exit 1. */
const PATH_ERRORS = new Set(['ENOENT', 'ENOTDIR', 'EISDIR', 'EACCES', 'EPERM', 'EROFS', 'ENAMETOOLONG', 'EINVAL', 'ELOOP', 'EEXIST']);

/** How a file loops export wrote begins: a bundle's header line, or the HTML page's marker. */
const EXPORTED_STARTS = ['{"kind":"header","format":"loops-bundle"', '<!doctype html><!-- loops export -->'];

/**
 * Writes the bundle to `file` whole or not at all: into a temporary file beside it (mode 0600),
 * renamed into place once complete. Never replaces a directory or a file that is not an export
 * (a typo in `-o` must not overwrite a workflow file); a path that cannot be written is a clear error.
 */
export function writeBundleFile(file: string, lines: Iterable<string>): void {
  refuseToClobber(file);
  const tmp = `${file}.${process.pid}.tmp`;
  let fd: number;
  try {
    fd = openSync(tmp, 'w', 0o600);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'error';
    const usage = PATH_ERRORS.has(code);
    throw new LoopsError(usage ? 'usage' : 'internal', `loops export: cannot write ${file} (${code})`, { hint: 'give a path in a directory that exists and you can write, or -o - for stdout', cause: error });
  }
  let written = false;
  try {
    for (const line of lines) writeSync(fd, `${line}\n`);
    written = true;
  } finally {
    closeSync(fd);
    if (!written) rmSync(tmp, { force: true });
  }
  renameSync(tmp, file);
}

function refuseToClobber(file: string): void {
  let stat;
  try {
    stat = statSync(file);
  } catch {
    return; // nothing there
  }
  const hint = 'give a new path (or remove it first), or -o - for stdout';
  if (!stat.isFile()) throw new UsageError(`loops export: ${file} exists and is not a file`, { hint });
  const fd = openSync(file, 'r');
  const head = Buffer.alloc(64);
  let n: number;
  try {
    n = readSync(fd, head, 0, head.length, 0);
  } finally {
    closeSync(fd);
  }
  const start = head.subarray(0, n).toString('utf8');
  if (!EXPORTED_STARTS.some((s) => start.startsWith(s))) {
    throw new UsageError(`loops export: ${file} exists and is not a file loops export wrote; it is left as it is`, { hint });
  }
}
