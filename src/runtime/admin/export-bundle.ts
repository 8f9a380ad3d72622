/**
 * `loops export` as a function: collects the audit bundle of a run, a workflow run or a loop
 * (./bundle.ts), renders it as JSON Lines (or one HTML page) and writes it, or gives the lines.
 * The CLI and the SDK call it; they only differ in how they print the summary.
 */
import { resolve } from 'node:path';
import type { Db } from '../../events/db.js';
import { parseDuration } from '../../events/durations.js';
import { UsageError } from '../../events/errors.js';
import { SqliteEventLog } from '../../events/sqlite-log.js';
import { bundleLines, collectBundle, writeBundleFile, type CollectedBundle } from './bundle.js';

/** What to export and where. */
export interface ExportBundleOptions {
  /** A loop's runs claimed at or after this time: an ISO time, or a duration back from `now` (`7d`). */
  since?: string | null;
  /** Where to write (default `<id>.loops-bundle.jsonl`, or `.html`); `-`: write nothing, give the lines. */
  output?: string | null;
  /** A self-contained HTML page instead of the bundle. */
  html?: boolean;
  /** The export's time (epoch ms). */
  now: number;
  /** Where `--since` came from, for the error message (default `since`). */
  flag?: string;
}

/** What was written (`loops export --json`). */
export interface ExportSummary {
  /** The absolute path written. */
  file: string;
  format: 'html' | 'bundle';
  subject: CollectedBundle['header']['subject'];
  streams: number;
  events: number;
  /** Output files included. */
  files: number;
  masked: CollectedBundle['header']['masked'];
  /** The last chained line's hash (bundles only). */
  head?: string;
}

/** The lines of the export (`output: '-'`), or the summary of the file written. */
export type ExportResult = { kind: 'lines'; lines: string[] } | { kind: 'file'; output: string; summary: ExportSummary };

/** `--since`: an ISO time, or a duration back from now; null when absent. UsageError otherwise. */
export function exportSince(value: string | null | undefined, now: number, flag = '--since'): string | null {
  if (typeof value !== 'string') return null;
  if (/^\d{4}-\d{2}-\d{2}/.test(value)) {
    const ms = Date.parse(value);
    if (Number.isNaN(ms)) throw new UsageError(`loops export: ${flag} ${JSON.stringify(value)} is not an ISO-8601 time`, { hint: 'e.g. --since 2026-12-01T00:00:00Z, or a duration: --since 7d' });
    return new Date(ms).toISOString();
  }
  return new Date(now - parseDuration(value, flag, Infinity)).toISOString();
}

/** Exports `ref` (a run or workflow run id or prefix, a loop name or id) of the log in `db`. NotFoundError, UsageError. */
export async function exportBundle(db: Db, dataDir: string, ref: string, options: ExportBundleOptions): Promise<ExportResult> {
  const since = exportSince(options.since, options.now, options.flag);
  const html = options.html === true;
  const bundle = await collectBundle(db, new SqliteEventLog(db, { handlers: [] }), dataDir, ref, { since, now: new Date(options.now).toISOString() });
  const output = options.output ?? `${bundle.header.subject.id}.loops-bundle.${html ? 'html' : 'jsonl'}`;
  const lines = html ? [(await import('./bundle-html.js')).renderBundleHtml(bundle)] : [...bundleLines(bundle)];
  if (output === '-') return { kind: 'lines', lines };
  const file = resolve(output);
  writeBundleFile(file, lines);
  const { subject, streams, masked } = bundle.header;
  return {
    kind: 'file',
    output,
    summary: {
      file,
      format: html ? 'html' : 'bundle',
      subject,
      streams: streams.length,
      events: streams.reduce((n, s) => n + s.events, 0),
      files: bundle.entries.filter((e) => e.kind === 'file').length,
      masked,
      ...(html ? {} : { head: JSON.parse(lines[lines.length - 1]!).head as string }),
    },
  };
}
