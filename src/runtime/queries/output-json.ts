/**
 * A run's output as data — what `loops logs --json` prints and the SDK's `output()` returns: per
 * stream its files, sizes, whether it was rotated and how much was dropped, and its text (secrets
 * masked), for a run or for each step attempt of a workflow run.
 */
import type { Db } from '../../events/db.js';
import type { SecretMasker } from '../execution/secrets.js';
import { droppedBytes, keptBytes, resolveLogsSubject, type OutputStream } from './run-files.js';
import { outputMasker, outputTracker, readOutputMasked, type OutputUnit, type OutputView } from './run-output.js';

/** One stream of a unit's output. */
export interface StreamOutput {
  /** The current file. */
  path: string;
  /** The files read, oldest first (`.1`, then the current one). */
  files: string[];
  /** The head kept at the first rotation, or null. */
  head: string | null;
  /** Bytes the files hold now. */
  bytes: number;
  /** Bytes the run wrote in all (null while it runs). */
  totalBytes: number | null;
  rotated: boolean;
  /** Bytes lost to rotation (null: not known yet). */
  droppedBytes: number | null;
  /** The text read (the last `tail` lines, or all; secrets masked). */
  text: string;
}

/** A run's output, or a workflow run's per step attempt (as `loops logs --json` prints it). */
export type RunOutput =
  | ({ runId: string; loopId: string; loopName: string; status: string; outputPrunedAt: string | null; provider: string | null } & Partial<Record<OutputStream, StreamOutput>>)
  | { runId: string; loopId: string; loopName: string; status: string; outputPrunedAt: null; wfRunId: null; steps: [] }
  | {
      runId?: string;
      wfRunId: string;
      workflowName: string;
      status: string;
      outputPrunedAt: string | null;
      steps: Array<{ stepId: string | null; attempt: number | null; status: string; provider: string | null } & Partial<Record<OutputStream, StreamOutput>>>;
    };

/** What to read. */
export interface OutputJsonOptions {
  /** The streams, in this order (default both). */
  streams: readonly OutputStream[];
  /** Only the last `tail` lines of each stream (null: all). */
  tail: number | null;
  /** The head kept at the first rotation instead. */
  head: boolean;
}

/** The output of the subject of `view` as data (`loops logs --json`). */
export function outputJson(view: OutputView, options: OutputJsonOptions, masker: SecretMasker | null): RunOutput {
  const streams = (unit: OutputUnit) =>
    Object.fromEntries(
      options.streams.map((stream) => {
        const chunks: Buffer[] = [];
        const files = readOutputMasked(unit.dir, stream, options, masker, (chunk) => chunks.push(chunk));
        const out: StreamOutput = {
          path: files.path,
          files: [files.rotated?.path, files.exists ? files.path : undefined].filter((p): p is string => p !== undefined),
          head: files.head?.path ?? null,
          bytes: keptBytes(files),
          totalBytes: unit.totals[stream],
          rotated: files.rotated !== null,
          droppedBytes: droppedBytes(files, unit.totals[stream]),
          text: Buffer.concat(chunks).toString('utf8'),
        };
        return [stream, out];
      }),
    ) as Partial<Record<OutputStream, StreamOutput>>;
  if (view.wfRun === null) {
    const run = view.run!;
    const unit = view.units[0];
    // A workflow loop's run that never started (or not yet) its workflow run has no output.
    if (!unit) return { runId: run.id, loopId: run.loopId, loopName: run.loopName, status: run.status, outputPrunedAt: null, wfRunId: null, steps: [] };
    return { runId: run.id, loopId: run.loopId, loopName: run.loopName, status: run.status, outputPrunedAt: run.outputPrunedAt, provider: unit.provider, ...streams(unit) };
  }
  return {
    ...(view.run ? { runId: view.run.id } : {}),
    wfRunId: view.wfRun.id,
    workflowName: view.wfRun.workflowName,
    status: view.wfRun.status,
    outputPrunedAt: view.wfRun.outputPrunedAt,
    steps: view.units.map((unit) => ({ stepId: unit.stepId, attempt: unit.attempt, status: unit.status, provider: unit.provider, ...streams(unit) })),
  };
}

/** Options of `readRunOutput`. */
export interface ReadRunOutputOptions extends Partial<OutputJsonOptions> {
  /** Workflow runs: only this step. */
  step?: string | null;
  /** With `step`: this attempt (default its last). */
  attempt?: number | null;
}

/**
 * The output of a run (id or unique prefix), a loop's latest run (name or id) or a workflow run
 * (id or prefix), as `loops logs <ref> --json` gives it. NotFoundError / UsageError as `loops logs`.
 */
export function readRunOutput(db: Db, dataDir: string, ref: string, options: ReadRunOutputOptions = {}): RunOutput {
  const subject = resolveLogsSubject(db, ref);
  const view = outputTracker(db, dataDir, subject, { step: options.step ?? null, attempt: options.attempt ?? null, follow: false })();
  return outputJson(view, { streams: options.streams ?? ['stdout', 'stderr'], tail: options.tail ?? null, head: options.head ?? false }, outputMasker(db, subject, view));
}
