/**
 * `loops prune --archive`: moves the events of finished loop runs out of the live log into an
 * archive file, leaving each run's stream one `stream.archived` tombstone.
 *
 * - **What may go.** The same selection as the output prune (prune.ts): a loop run or workflow run
 *   that has ended, holds no live lease, finished before the cutoff and is not among the `keepLast`
 *   newest of its loop or workflow — and whose stream has not been archived yet. Loop, workflow,
 *   account and retention streams stay (see docs/architecture.md, "Retention").
 * - **File first.** Every selected stream's events go to `archive/<time>-<id>.jsonl` (0600): a
 *   header line, then per stream its `streams` row and its events as this loops reads them (payloads
 *   in their current schema versions). The file is fsynced, with its folder, and its sha256 taken
 *   before anything leaves the log.
 * - **Then the log, in chunks.** Per stream, in one transaction per `CHUNK`, the run's actor records
 *   its tombstone — the file, its sha256, the versions moved, the machine state they folded to and
 *   the projected rows they made — and the store deletes the versions it replaces. The stream's
 *   compare-and-set is the guard (a stream that moved since it was read is left alone), and the run
 *   is checked again inside the transaction (still ended, no live lease).
 * - **A crash in between** leaves a file some or none of whose streams were archived: the log is
 *   untouched for the rest, and the next archive selects them again into a new file. An archive file
 *   no tombstone names can be deleted.
 */
import { createHash } from 'node:crypto';
import { closeSync, fsyncSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { ConcurrencyConflictError, ValidationError } from '../../events/errors.js';
import { schemaVersion } from '../../events/catalog.js';
import { cached, type Db } from '../../events/db.js';
import type { SpaceReport } from '../../events/types.js';
import { ARCHIVED } from '../../machines/fold.js';
import { projections } from '../../projections/registry.js';
import { DurableActor } from '../actor.js';
import { newId } from '../ids.js';
import type { Runtime } from '../runtime.js';
import { CHUNK, heldRuns, selectRows, type HeldRuns, type PruneOptions } from './prune.js';

/** The first line of an archive file. */
export interface ArchiveHeader {
  loopsArchive: 1;
  createdAt: string;
  streams: number;
  events: number;
}

export interface ArchivedStream {
  streamId: string;
  /** `run`: a loop run (`run:<id>`); `workflow`: a workflow run (`wfrun:<id>`). */
  kind: 'run' | 'workflow';
  runId: string;
  /** Its loop's name (loop runs) or its workflow's (workflow runs). */
  ownerName: string;
  status: string;
  finishedAt: string;
  /** Events moved to the file. */
  events: number;
}

export interface ArchiveReport {
  dryRun: boolean;
  /** The archive file, relative to the data directory (null when nothing was selected, or in a dry run). */
  file: string | null;
  sha256: string | null;
  /** File size in bytes. */
  bytes: number;
  /** The streams archived (or, in a dry run, that would be), oldest first. */
  streams: ArchivedStream[];
  /** Events moved out of the log. */
  events: number;
  /** Streams written to the file but left in the log (they changed meanwhile, or took a lease); the next archive retries them. */
  skipped: Array<{ streamId: string; reason: string }>;
  /** The space the deleted events left in the store, after it gave back what it could (null in a dry run, or when nothing was archived). */
  space: SpaceReport | null;
}

/** Where archive files live, under the data directory. */
export const ARCHIVE_DIR = 'archive';

/** A selected stream, with the versions of it the archive file holds (once written). */
interface Selected extends ArchivedStream {
  fromVersion: number;
  toVersion: number;
}

/**
 * The selected runs' streams (not archived yet: their rows say so), with their versions. Only the
 * list is held in memory: the events are read one stream at a time as the file is written.
 */
async function select(runtime: Pick<Runtime, 'db' | 'log' | 'clock' | 'leases'>, options: PruneOptions): Promise<Selected[]> {
  const out: Selected[] = [];
  for (const row of selectRows(runtime.db, options, await heldRuns(runtime.leases, runtime.clock.now()), 'archive')) {
    const streamId = `${row.kind === 'run' ? 'run' : 'wfrun'}:${row.id}`;
    const info = await runtime.log.streamInfo(streamId);
    if (!info) continue;
    out.push({ streamId, kind: row.kind, runId: row.id, ownerName: row.owner_name, status: row.status, finishedAt: row.finished_at, events: info.version, fromVersion: 1, toVersion: info.version });
  }
  return out;
}

const summary = ({ fromVersion: _f, toVersion: _t, ...s }: Selected): ArchivedStream => s;

/** What `--archive` would move now, without writing anything. */
export async function planArchive(runtime: Pick<Runtime, 'db' | 'log' | 'clock' | 'leases'>, options: PruneOptions): Promise<ArchiveReport> {
  const streams = (await select(runtime, options)).map(summary);
  return { dryRun: true, file: null, sha256: null, bytes: 0, streams, events: streams.reduce((n, s) => n + s.events, 0), skipped: [], space: null };
}

/**
 * Writes the archive file (fsynced, with its folder), reading one stream at a time; sets each
 * selected stream's versions to the ones written. Returns the file's path relative to the data
 * directory, its size and sha256.
 */
async function writeFile(runtime: Runtime, selected: Selected[], createdAt: string): Promise<{ file: string; bytes: number; sha256: string }> {
  const dir = join(runtime.dataDir, ARCHIVE_DIR);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // e.g. runs-20261201T200312Z-k3v9x0m2p7qa.jsonl: sorts by time, unique by its random tail.
  const name = `runs-${createdAt.replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z')}-${newId('a', Date.parse(createdAt)).slice(-12)}.jsonl`;
  const fd = openSync(join(dir, name), 'wx', 0o600);
  const hash = createHash('sha256');
  let bytes = 0;
  try {
    const write = (value: unknown) => {
      const line = Buffer.from(`${JSON.stringify(value)}\n`, 'utf8');
      hash.update(line);
      for (let off = 0; off < line.length; ) off += writeSync(fd, line, off);
      bytes += line.length;
    };
    // Each stream is written as it is read now; one that changes before its tombstone is recorded
    // stays in the log (the version check), and its lines here are named by no tombstone.
    const header: ArchiveHeader = { loopsArchive: 1, createdAt, streams: selected.length, events: selected.reduce((n, s) => n + s.events, 0) };
    write(header);
    for (const s of selected) {
      const [info, history] = [await runtime.log.streamInfo(s.streamId), await runtime.log.readStream(s.streamId)];
      write({ stream: info });
      for (const event of history) write({ event: { ...event, v: schemaVersion(event.type) } });
      s.fromVersion = history[0]?.version ?? 1;
      s.toVersion = history.at(-1)?.version ?? 0;
      s.events = history.length;
    }
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  const dirFd = openSync(dir, 'r');
  try {
    fsyncSync(dirFd);
  } finally {
    closeSync(dirFd);
  }
  return { file: `${ARCHIVE_DIR}/${name}`, bytes, sha256: hash.digest('hex') };
}

/** The rows the projections hold for a stream, by table, without their bulky columns: its tombstone carries them. */
function rowsOf(db: Db, streamId: string): Record<string, Array<Record<string, string | number | null>>> {
  const [kind, id] = [streamId.slice(0, streamId.indexOf(':')), streamId.slice(streamId.indexOf(':') + 1)];
  const rows: Record<string, Array<Record<string, string | number | null>>> = {};
  for (const projection of projections) {
    for (const table of projection.tables) {
      if (table.perStream?.kind !== kind) continue;
      const slim = table.perStream.slim ?? {};
      rows[table.name] = cached<[string], Record<string, string | number | null>>(db, `SELECT * FROM ${table.name} WHERE ${table.perStream.key} = ?`)
        .all(id)
        .map((row) => ({ ...row, ...slim }));
    }
  }
  return rows;
}

/** Still archivable, read inside the transaction: ended, not archived, no live lease (`held`, read just before it). */
function stillEnded(db: Db, s: Selected, held: HeldRuns): boolean {
  if (held.has(s.kind, s.runId)) return false;
  const sql =
    s.kind === 'run'
      ? `SELECT 1 AS ok FROM loop_runs WHERE id = ? AND status NOT IN ('claimed', 'spawning', 'running') AND archived_at IS NULL`
      : `SELECT 1 AS ok FROM workflow_runs WHERE id = ? AND status <> 'running' AND archived_at IS NULL`;
  return cached<[string], { ok: number }>(db, sql).get(s.runId) !== undefined;
}

/** Archives the selected runs' streams: the file, then the tombstones (see the header). */
export async function archive(runtime: Runtime, options: PruneOptions): Promise<ArchiveReport> {
  const selected = await select(runtime, options);
  const report: ArchiveReport = { dryRun: false, file: null, sha256: null, bytes: 0, streams: [], events: 0, skipped: [], space: null };
  if (selected.length === 0) return report;
  const createdAt = new Date(runtime.clock.now()).toISOString();
  const { file, bytes, sha256 } = await writeFile(runtime, selected, createdAt);
  Object.assign(report, { file, bytes, sha256 });
  for (let i = 0; i < selected.length; i += CHUNK) {
    const chunk = selected.slice(i, i + CHUNK);
    const held = await heldRuns(runtime.leases, runtime.clock.now());
    await runtime.log.batch(async (batch) => {
      for (const s of chunk) {
        const actor = await DurableActor.load(runtime, s.streamId);
        if (s.events === 0 || actor.version !== s.toVersion || actor.snapshot.status !== 'done' || !stillEnded(runtime.db, s, held)) {
          report.skipped.push({ streamId: s.streamId, reason: actor.snapshot.status !== 'done' ? 'not ended' : 'changed since it was read' });
          continue;
        }
        const data = {
          file,
          sha256,
          fromVersion: s.fromVersion,
          toVersion: s.toVersion,
          events: s.events,
          machine: actor.machineRef,
          state: actor.snapshot.value,
          rows: rowsOf(runtime.db, s.streamId),
        };
        try {
          await actor.record(ARCHIVED, data, { batch, archive: true });
        } catch (error) {
          if (!(error instanceof ConcurrencyConflictError) && !(error instanceof ValidationError)) throw error;
          report.skipped.push({ streamId: s.streamId, reason: error.message });
          continue;
        }
        report.streams.push(summary(s));
        report.events += s.events;
      }
    });
  }
  // The pages the deleted events held, back to the file system (a little at a time, between the
  // daemon's writes) where the database allows it.
  if (report.streams.length) report.space = await runtime.log.reclaimSpace();
  return report;
}
