/**
 * `loops verify <bundle>`: checks an exported bundle (bundle-format.ts) with nothing but the file —
 * no data directory. In order: every line is canonical JSON whose hash is sha256(prev + its body)
 * and whose `prev` is the hash of the line before; the trailer is there, last, and names the last
 * hash and the number of chained lines; each stream's versions are the ones the header lists,
 * contiguous; replaying each stream on the machine that wrote it reproduces every recorded state
 * and every recorded context field hash (`meta.ctx`, fields masking changed excepted); each step's
 * outputs are those its last `step.exited` recorded; each output file's bytes have its sha256.
 * Every failed check names the line and what is on it (stream, version, type for an event).
 */
import { readFileSync } from 'node:fs';
import { NotFoundError, ValidationError } from '../../events/errors.js';
import type { EventMeta, Json, StoredEvent, StreamInfo } from '../../events/types.js';
import { fieldHashes, firstFieldMismatch, type FieldHashes } from '../../machines/context-diff.js';
import { replayEvents, whyMismatch, type ReplayStep } from './replay.js';
import {
  BUNDLE_FORMAT,
  BUNDLE_FORMAT_VERSION,
  bodyOf,
  canonicalJson,
  chainHash,
  sha256Hex,
  type BundleEvent,
  type BundleFile,
  type BundleHeader,
  type BundleOutputs,
  type BundleTrailer,
} from './bundle-format.js';

/** What `loops verify <bundle>` found. `problems` empty: every check held. */
export interface BundleReport {
  ok: boolean;
  file: string;
  subject: BundleHeader['subject'];
  createdAt: string;
  loops: string;
  /** Chained lines after the header, as counted. */
  entries: number;
  events: number;
  streams: number;
  files: number;
  /** The last chained line's hash (what the trailer should name). */
  head: string;
  /** Context fields not hash-checked because masking changed them. */
  uncheckedFields: number;
  problems: string[];
}

/** The bundle a file holds, parsed: its header and its lines (raw text and parsed value, or null when not JSON). */
export interface ParsedBundle {
  header: BundleHeader & { prev: string; hash: string };
  lines: Array<{ number: number; raw: string; value: Record<string, unknown> | null }>;
  /** True when the file does not end with a newline (its last line was cut). */
  cut: boolean;
}

/** Reads a bundle file; a file that is not one is a ValidationError (exit 2). */
export function readBundle(file: string): ParsedBundle {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new NotFoundError(`cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`, { hint: 'give the path of a file loops export wrote' });
  }
  const pieces = text.split('\n');
  const cut = pieces[pieces.length - 1] !== '';
  if (!cut) pieces.pop();
  const lines = pieces.map((raw, i) => ({ number: i + 1, raw, value: parseObject(raw) }));
  const first = lines[0]?.value;
  if (!first || first.kind !== 'header' || first.format !== BUNDLE_FORMAT) {
    throw new ValidationError(`${file} is not a loops bundle: its first line is not a ${BUNDLE_FORMAT} header`, { hint: 'loops export <run|loop> writes one; loops verify without a file checks the data directory' });
  }
  if (typeof first.formatVersion !== 'number' || first.formatVersion > BUNDLE_FORMAT_VERSION) {
    throw new ValidationError(`${file} is a ${BUNDLE_FORMAT} of format version ${String(first.formatVersion)}; this loops reads up to version ${BUNDLE_FORMAT_VERSION}`, { hint: 'verify it with a newer loops' });
  }
  return { header: first as unknown as ParsedBundle['header'], lines, cut };
}

function parseObject(raw: string): Record<string, unknown> | null {
  try {
    const value = JSON.parse(raw) as unknown;
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * Which event the header says is on line `number` (events come first, each stream's versions in
 * order, in the header's stream order): a line too damaged to read is still named by its place.
 */
function eventAt(header: BundleHeader, number: number): { stream: string; version: number } | null {
  let line = 2;
  for (const s of header.streams ?? []) {
    if (number < line + s.events) return { stream: s.streamId, version: s.fromVersion + (number - line) };
    line += s.events;
  }
  return null;
}

/** What is on a line, for messages: `event run:… v3 (process.spawned)`, `output file runs/…`. */
function describe(header: BundleHeader, number: number, value: Record<string, unknown> | null, raw: string): string {
  const placed = eventAt(header, number);
  const type = typeof value?.type === 'string' ? value.type : /"type":"([^"]*)"/.exec(raw)?.[1];
  if (placed) return `event ${placed.stream} v${placed.version} (${type ?? '?'})`;
  if (value?.kind === 'file' || (!value && /"kind":"file"/.test(raw))) return `output file ${typeof value?.path === 'string' ? value.path : (/"path":"([^"]*)"/.exec(raw)?.[1] ?? '?')}`;
  if (value?.kind === 'outputs') return `outputs of step ${String(value.stepId)} (attempt ${String(value.attempt)}) of wfrun:${String(value.wfRunId)}`;
  if (number === 1) return 'header';
  return typeof value?.kind === 'string' ? value.kind : 'a line that is not JSON';
}

/** Checks a bundle file; a file that is not a bundle throws (ValidationError, exit 2). */
export function verifyBundle(file: string): BundleReport {
  const { header, lines, cut } = readBundle(file);
  const problems: string[] = [];
  const at = (line: { number: number; raw: string; value: Record<string, unknown> | null }) => `line ${line.number} (${describe(header, line.number, line.value, line.raw)})`;

  // 1. The chain.
  let prevHash = '';
  let trailer: (BundleTrailer & { line: number }) | null = null;
  const chained: Array<{ number: number; value: Record<string, unknown> }> = [];
  for (const line of lines) {
    const last = line.number === lines.length;
    if (line.value === null) {
      problems.push(last && cut ? `${at(line)}: cut short (no newline at its end): the file is truncated` : `${at(line)}: not a JSON object: the line was changed`);
      prevHash = hashField(line.raw) ?? prevHash;
      continue;
    }
    const value = line.value;
    if (value.kind === 'trailer') {
      if (!last) problems.push(`line ${line.number}: a trailer before the end (${lines.length - line.number} line(s) follow it): lines were appended or moved`);
      trailer = { ...(value as unknown as BundleTrailer), line: line.number };
      if (canonicalJson(value) !== line.raw) problems.push(`line ${line.number} (trailer): not in canonical form: the line was changed`);
      continue;
    }
    if (line.number > 1 && value.kind === 'header') problems.push(`${at(line)}: a second header`);
    if (canonicalJson(value) !== line.raw) problems.push(`${at(line)}: not in canonical form: the line was changed`);
    else if (chainHash(String(value.prev), bodyOf(value)) !== value.hash) problems.push(`${at(line)}: its hash does not match its content: the ${value.kind === 'file' ? 'output file' : String(value.kind)} was changed`);
    if (value.prev !== prevHash) {
      problems.push(line.number === 1 ? `${at(line)}: the header must start the chain` : `${at(line)}: does not follow line ${line.number - 1} (its prev is not that line's hash): a line was removed, inserted or moved`);
    }
    if (value.kind === 'file') problems.push(...fileProblems(at(line), value as unknown as BundleFile));
    prevHash = typeof value.hash === 'string' ? value.hash : prevHash;
    if (line.number > 1) chained.push({ number: line.number, value });
  }
  if (!trailer) problems.push(`no trailer: the bundle ends at line ${lines.length} without one: it is truncated`);
  else {
    const count = lines.length - 2;
    if (trailer.count !== count) problems.push(`trailer (line ${trailer.line}): it counts ${trailer.count} chained line(s), the file has ${count}: lines were removed or added`);
    if (trailer.head !== prevHash) problems.push(`trailer (line ${trailer.line}): its head hash is not the last line's hash`);
  }

  // 2. The streams, replayed; the outputs against the events.
  const events = chained.filter((l) => l.value.kind === 'event') as Array<{ number: number; value: Record<string, unknown> & BundleEvent }>;
  let unchecked = 0;
  if (problems.length === 0) unchecked = checkStreams(header, events, problems);
  if (problems.length === 0) checkOutputs(chained, events, problems);

  return {
    ok: problems.length === 0,
    file,
    subject: header.subject,
    createdAt: header.createdAt,
    loops: header.loops,
    entries: Math.max(0, lines.length - 2),
    events: events.length,
    streams: header.streams?.length ?? 0,
    files: chained.filter((l) => l.value.kind === 'file').length,
    head: prevHash,
    uncheckedFields: unchecked,
    problems,
  };
}

function hashField(raw: string): string | null {
  return /"hash":"([0-9a-f]{64})"/.exec(raw)?.[1] ?? null;
}

function fileProblems(where: string, f: BundleFile): string[] {
  const bytes = f.encoding === 'base64' ? Buffer.from(f.content, 'base64') : Buffer.from(String(f.content), 'utf8');
  const problems: string[] = [];
  if (bytes.length !== f.size) problems.push(`${where}: holds ${bytes.length} byte(s), the bundle recorded ${f.size}: the output file was changed`);
  const sha = sha256Hex(bytes);
  if (sha !== f.sha256) problems.push(`${where}: its content's sha256 is ${sha}, the bundle recorded ${f.sha256}: the output file was changed`);
  return problems;
}

/**
 * The event to replay. One whose masked fields (`unchecked`) cannot match their recorded hashes is
 * replayed without them (`meta.ctx` left out: replay checks its state only) and its other fields
 * are checked here.
 */
function storedEvent(e: BundleEvent): StoredEvent {
  const meta = { ...(e.meta as EventMeta) };
  if (e.unchecked?.length) delete meta.ctx;
  return { position: e.position, streamId: e.stream, version: e.version, type: e.type, v: e.v, data: e.data, meta, at: e.at, state: e.state as Json | null };
}

function without(hashes: FieldHashes, paths: readonly string[]): FieldHashes {
  const out = { ...hashes };
  for (const p of paths) delete out[p];
  return out;
}

/** Versions per stream as the header lists them, then each stream replayed; returns the fields not checked. */
function checkStreams(header: BundleHeader, events: Array<{ number: number; value: BundleEvent }>, problems: string[]): number {
  const byStream = new Map<string, Array<{ number: number; value: BundleEvent }>>();
  for (const e of events) {
    const list = byStream.get(e.value.stream) ?? [];
    list.push(e);
    byStream.set(e.value.stream, list);
  }
  const listed = new Set(header.streams.map((s) => s.streamId));
  for (const [streamId, list] of byStream) {
    if (!listed.has(streamId)) problems.push(`line ${list[0]!.number} (event ${streamId} v${list[0]!.value.version}): stream ${streamId} is not in the header`);
  }
  let unchecked = 0;
  for (const s of header.streams) {
    const list = byStream.get(s.streamId) ?? [];
    const versions = list.map((e) => e.value.version);
    const expected = Array.from({ length: s.events }, (_, i) => s.fromVersion + i);
    if (canonicalJson(versions) !== canonicalJson(expected)) {
      problems.push(`stream ${s.streamId}: the bundle holds versions ${versions.join(',') || 'none'}, the header lists ${s.fromVersion}-${s.toVersion}: events are missing or out of order`);
      continue;
    }
    if (list.length === 0) continue;
    const info: StreamInfo = { streamId: s.streamId, kind: s.kind, version: s.toVersion, machineId: s.machineId, machineVersion: s.machineVersion, createdAt: s.createdAt, updatedAt: s.updatedAt };
    let steps: ReplayStep[];
    try {
      steps = replayEvents(s.streamId, info, list.map((e) => storedEvent(e.value))).steps;
    } catch (error) {
      problems.push(`stream ${s.streamId}: cannot be replayed: ${(error as Error).message}`);
      continue;
    }
    steps.forEach((step, i) => {
      const { number, value } = list[i]!;
      const where = `line ${number} (event ${value.stream} v${value.version} (${value.type}))`;
      if (!step.matches) {
        problems.push(`${where}: ${whyMismatch(step)}`);
        return;
      }
      const recorded = value.meta?.ctx;
      const skip = value.unchecked ?? [];
      if (!recorded || skip.length === 0) return;
      unchecked += skip.length;
      const mismatch = firstFieldMismatch(without(recorded, skip), without(fieldHashes(step.changes), skip));
      if (mismatch) {
        problems.push(`${where}: replay gives context field ${mismatch.path} ${mismatch.replayed === null ? 'unchanged' : `hash ${mismatch.replayed}`}, the log recorded ${mismatch.recorded === null ? 'no change' : `hash ${mismatch.recorded}`}`);
      }
    });
  }
  return unchecked;
}

/** Each step's outputs entry against the outputs its last `step.exited` recorded. */
function checkOutputs(chained: Array<{ number: number; value: Record<string, unknown> }>, events: Array<{ number: number; value: BundleEvent }>, problems: string[]): void {
  for (const line of chained) {
    if (line.value.kind !== 'outputs') continue;
    const o = line.value as unknown as BundleOutputs;
    const exits = events.filter((e) => e.value.stream === `wfrun:${o.wfRunId}` && e.value.type === 'step.exited' && (e.value.data as { stepId?: string }).stepId === o.stepId);
    const last = exits[exits.length - 1]?.value.data as { attempt: number; outputs: Record<string, string> } | undefined;
    const where = `line ${line.number} (outputs of step ${o.stepId} (attempt ${o.attempt}) of wfrun:${o.wfRunId})`;
    if (!last) {
      if (Object.keys(o.outputs).length > 0) problems.push(`${where}: no step.exited of that step in the bundle records outputs`);
      continue;
    }
    if (last.attempt === o.attempt && canonicalJson(last.outputs) !== canonicalJson(o.outputs)) {
      problems.push(`${where}: they differ from the outputs its step.exited recorded`);
    }
  }
}
