/**
 * What `loops logs` shows of a run, a workflow run or one of its steps, and reading it:
 * - its units — a loop run, or each step attempt of a workflow run — looked at again at every poll
 *   while following (`outputTracker`);
 * - a unit's stream as its files hold it now, whole or its last lines, or the head kept at the
 *   first rotation (`readOutput`);
 * - masking the run's secrets in output of a run not ended yet (the runner rewrites the files
 *   masked when each process ends): `outputMasker`, and `LiveMasker` for a stream read as it grows.
 * Following them as they grow is follow-output.ts; where the files are, run-files.ts.
 */
import { NotFoundError, UsageError } from '../../events/errors.js';
import type { Db } from '../../events/db.js';
import { isProviderId, PROVIDERS, type TranscriptFormat } from '../agents/index.js';
import { maskingSecretsSync, runSecrets } from '../execution/run-secrets.js';
import { SecretMasker, StreamMasker } from '../execution/secrets.js';
import { runDir } from '../paths.js';
import { hostId, runnerHost } from '../host.js';
import { findRun, type RunView } from './loops.js';
import {
  openSource,
  outputFiles,
  sourceChunks,
  runHasEnded,
  stepAttemptDir,
  tailStart,
  workflowRunHasEnded,
  workflowRunOfLoopRun,
  type ByteSource,
  type LogsSubject,
  type OutputFiles,
  type OutputStream,
} from './run-files.js';
import { findWorkflowRun, workflowRunSteps, workflowVersion, type WorkflowRunView } from './workflows.js';

/** What is shown as one: a loop run, or one attempt of a workflow step. */
export interface OutputUnit {
  /** `run`, or `<stepId>#<attempt>`. */
  key: string;
  /** `build (attempt 1)` for a step attempt; null for a loop run. */
  title: string | null;
  /** For messages: `run run_…`, `step build (attempt 1)`. */
  name: string;
  dir: string;
  /** The agent transcript format of stdout, or null for commands. */
  format: TranscriptFormat | null;
  provider: string | null;
  status: string;
  ended: boolean;
  pid: number | null;
  error: string | null;
  /** Bytes the process wrote per stream, when known (it ended and the runner counted them). */
  totals: Record<OutputStream, number | null>;
  stepId: string | null;
  attempt: number | null;
  /**
   * The output tails the tables keep (a loop run's, a step's last attempt's), read when the unit's
   * folder does not exist: a run imported from another tool never had one. Null otherwise.
   */
  kept: Record<OutputStream, string> | null;
  /**
   * The host whose runner ran it, when that is not this host (a fleet on a shared store,
   * docs/scaling.md): its output files are in that host's data directory. Null when it ran here.
   */
  otherHost: string | null;
}

/** The host of a runner id, when it is not this host. */
function otherHostOf(runnerId: string): string | null {
  const host = runnerHost(runnerId);
  return host === null || host === hostId() ? null : host;
}

/** One look at the subject: its units and whether it ended. */
export interface OutputView {
  units: OutputUnit[];
  ended: boolean;
  /** The status the subject ended with (or has now). */
  status: string;
  /** `run run_…` / `workflow run wfrun_…`. */
  what: string;
  /** A workflow run, when the subject is one (or a workflow loop's run that started one). */
  wfRun: WorkflowRunView | null;
  run: RunView | null;
  /** Why there are no units yet, for the note when nothing was printed. */
  why: string | null;
}

/** Which units of a workflow run: all, or one step (its last attempt, or `attempt`). */
export interface OutputSelection {
  step: string | null;
  attempt: number | null;
  /** Following: `step` without `attempt` means its last attempt at the start and every later one. */
  follow: boolean;
}

const LIVE_ATTEMPT = new Set(['spawning', 'running']);

function formatOf(provider: string | null): TranscriptFormat | null {
  return provider !== null && isProviderId(provider) ? PROVIDERS[provider].transcript : null;
}

function runUnit(dataDir: string, run: RunView, provider: string | null): OutputUnit {
  const ended = runHasEnded(run.status);
  return {
    key: 'run',
    title: null,
    name: `run ${run.id}`,
    dir: runDir(dataDir, run.id),
    format: formatOf(provider),
    provider,
    status: run.status,
    ended,
    pid: run.pid,
    error: run.error,
    totals: { stdout: ended ? run.stdoutBytes : null, stderr: ended ? run.stderrBytes : null },
    stepId: null,
    attempt: null,
    kept: ended ? { stdout: run.stdout, stderr: run.stderr } : null,
    otherHost: otherHostOf(run.runnerId),
  };
}

/**
 * Builds the function that looks at the subject again (every poll while following). Checks the
 * step against the workflow's steps as soon as there is a workflow run.
 */
export function outputTracker(db: Db, dataDir: string, subject: LogsSubject, select: OutputSelection): () => OutputView {
  if (subject.kind === 'run' && subject.target.kind !== 'workflow') {
    if (select.step !== null) {
      throw new UsageError(`loops logs: --step is for workflow runs; ${subject.run.id} is a run of the ${subject.target.kind} loop ${subject.run.loopName}`, {
        hint: 'drop --step',
      });
    }
    const provider = subject.target.kind === 'agent' ? subject.target.provider : null;
    const id = subject.run.id;
    return () => {
      const run = findRun(db, id);
      return { units: [runUnit(dataDir, run, provider)], ended: runHasEnded(run.status), status: run.status, what: `run ${run.id}`, wfRun: null, run, why: null };
    };
  }
  // A workflow run, or a workflow loop's run (whose workflow run may not have started yet).
  let minAttempt: number | null = null; // a step without an attempt, following: the last attempt at the start and later ones
  const look = (wf: WorkflowRunView, run: RunView | null): OutputView => {
    const steps = workflowRunSteps(db, wf.id);
    if (select.step !== null && !steps.some((s) => s.stepId === select.step)) {
      throw new NotFoundError(`workflow run ${wf.id} has no step ${JSON.stringify(select.step)}`, { hint: `its steps: ${steps.map((s) => s.stepId).join(', ')}` });
    }
    const units: OutputUnit[] = [];
    for (const step of steps) {
      if (select.step !== null && step.stepId !== select.step) continue;
      let attempts = step.attempts;
      if (select.step !== null) {
        if (select.attempt !== null) attempts = attempts.filter((a) => a.attempt === select.attempt);
        else if (!select.follow) attempts = attempts.slice(-1);
        else {
          minAttempt ??= step.attempt;
          attempts = attempts.filter((a) => a.attempt >= minAttempt!);
        }
      }
      for (const a of attempts) {
        const ended = !LIVE_ATTEMPT.has(a.status);
        const last = step.attempt === a.attempt && ended;
        units.push({
          key: `${step.stepId}#${a.attempt}`,
          title: `${step.stepId} (attempt ${a.attempt})`,
          name: `step ${step.stepId} (attempt ${a.attempt})`,
          dir: stepAttemptDir(dataDir, wf.id, step.stepId, a.attempt),
          format: step.targetType === 'agent' ? formatOf(step.provider) : null,
          provider: step.targetType === 'agent' ? step.provider : null,
          status: a.status,
          ended,
          pid: a.pid,
          error: a.error,
          totals: { stdout: last ? step.stdoutBytes : null, stderr: last ? step.stderrBytes : null },
          stepId: step.stepId,
          attempt: a.attempt,
          kept: last ? { stdout: step.stdout, stderr: step.stderr } : null,
          otherHost: null,
        });
      }
    }
    let why: string | null = null;
    if (units.length === 0) {
      const step = select.step === null ? null : steps.find((s) => s.stepId === select.step)!;
      if (step && select.attempt !== null && step.attempts.length > 0 && workflowRunHasEnded(wf.status)) {
        throw new NotFoundError(`step ${step.stepId} of workflow run ${wf.id} has no attempt ${select.attempt}`, {
          hint: `it has attempt${step.attempts.length > 1 ? 's' : ''} ${step.attempts.map((a) => a.attempt).join(', ')}`,
        });
      }
      why = step ? `step ${step.stepId} ${step.attempts.length ? `has no attempt ${select.attempt} yet` : `has not started (${step.status})`}` : 'no step has started';
    }
    return { units, ended: workflowRunHasEnded(wf.status), status: wf.status, what: `workflow run ${wf.id}`, wfRun: wf, run, why };
  };
  if (subject.kind === 'workflow') {
    const id = subject.wfRun.id;
    return () => look(findWorkflowRun(db, id), null);
  }
  const runId = subject.run.id;
  let wfId: string | null = null;
  return () => {
    const run = findRun(db, runId);
    const wf = wfId !== null ? findWorkflowRun(db, wfId) : workflowRunOfLoopRun(db, run);
    if (wf) {
      wfId = wf.id;
      return look(wf, run);
    }
    const ended = runHasEnded(run.status);
    const why = ended ? `it never started its workflow run${run.error ? ` (${run.error})` : ''}` : `its workflow run has not started yet (${run.status})`;
    return { units: [], ended, status: run.status, what: `run ${run.id}`, wfRun: null, run, why };
  };
}

/**
 * The secret values of the subject's runs that this process can see: the loop's --secret-env
 * variables and what its --secret-file / --secret-cmd references give now, or the workflow's `secrets:`.
 */
function secretsOf(db: Db, subject: LogsSubject, view: OutputView): string[] {
  if (subject.kind === 'run' && subject.target.kind !== 'workflow') return maskingSecretsSync(subject.target);
  const wf = view.wfRun;
  if (!wf) return [];
  try {
    return runSecrets(workflowVersion(db, wf.workflowId, wf.version).spec.secrets ?? []);
  } catch {
    return [];
  }
}

/**
 * Masks what this process's environment has of the run's secrets, for output of a run not ended
 * yet; null when it ended (the runner rewrote the files masked when each process ended) or there
 * is nothing to mask.
 */
export function outputMasker(db: Db, subject: LogsSubject, view: OutputView): SecretMasker | null {
  if (view.ended) return null;
  const masker = new SecretMasker(secretsOf(db, subject, view));
  return masker.empty ? null : masker;
}

/**
 * Masking of one stream while it grows, chunk by chunk. The stream masker holds back its last
 * (longest form − 1) bytes in case a secret continues in the next chunk; a follower that waits for
 * more output lets them go (`release`) once no suffix of them can begin a secret.
 */
export class LiveMasker {
  private readonly stream: StreamMasker;
  private readonly forms: Buffer[];
  /** The last bytes pushed (as many as the longest form). */
  private rawTail: Buffer = Buffer.alloc(0);

  constructor(private readonly masker: SecretMasker) {
    this.stream = new StreamMasker(masker);
    this.forms = masker.forms.map((f) => Buffer.from(f, 'utf8'));
  }

  /** The chunk masked (possibly empty: held back). */
  push(chunk: Buffer): Buffer {
    const keep = this.masker.maxFormBytes;
    const joined = this.rawTail.length ? Buffer.concat([this.rawTail, chunk]) : chunk;
    this.rawTail = Buffer.from(joined.subarray(Math.max(0, joined.length - keep)));
    return this.stream.push(chunk);
  }

  /** What is held back, when no suffix of the last bytes pushed can begin a secret; else nothing. */
  release(): Buffer {
    return this.canFlush() ? this.stream.flush() : Buffer.alloc(0);
  }

  /** Everything held back (the stream is over). */
  flush(): Buffer {
    return this.stream.flush();
  }

  private canFlush(): boolean {
    const tail = this.rawTail;
    for (const form of this.forms) {
      for (let k = Math.min(form.length - 1, tail.length); k > 0; k--) {
        if (tail.subarray(tail.length - k).equals(form.subarray(0, k))) return false;
      }
    }
    return true;
  }
}

/** What to read of a stream: the last `tail` lines (null: all), or the head kept at the first rotation. */
export interface ReadOutputOptions {
  tail: number | null;
  head: boolean;
}

/** What to read for one stream: `.1` then the file (or the head). */
function outputSources(files: OutputFiles, head: boolean, current: ByteSource | null): { sources: ByteSource[]; close: () => void } {
  const opened: Array<{ close(): void }> = [];
  const open = (path: string): ByteSource | null => {
    const source = openSource(path);
    if (source) opened.push(source);
    return source;
  };
  const sources: ByteSource[] = [];
  if (head) {
    // The beginning: the head kept at the first rotation; a file never rotated is its own beginning.
    const source = files.head ? open(files.head.path) : files.rotated ? null : (current ?? open(files.path));
    if (source) sources.push(source);
  } else {
    const rotated = files.rotated ? open(files.rotated.path) : null;
    if (rotated) sources.push(rotated);
    const file = current ?? open(files.path);
    if (file) sources.push(file);
  }
  return { sources, close: () => opened.forEach((o) => o.close()) };
}

/**
 * Reads one stream of a unit as its files hold it now (`current`: the file as a follower holds it
 * open, instead of opening it by path), unmasked; returns the files it looked at.
 */
export function readOutput(dir: string, stream: OutputStream, options: ReadOutputOptions, current: ByteSource | null, onChunk: (chunk: Buffer) => void): OutputFiles {
  const chunks = outputChunks(dir, stream, options, current);
  for (let next = chunks.next(); ; next = chunks.next()) {
    if (next.done) return next.value;
    onChunk(next.value);
  }
}

/** `readOutput` as an iterator: each chunk is read when asked for; returns the files it looked at. */
export function* outputChunks(dir: string, stream: OutputStream, options: ReadOutputOptions, current: ByteSource | null): Generator<Buffer, OutputFiles, undefined> {
  const files = outputFiles(dir, stream);
  const { sources, close } = outputSources(files, options.head, current);
  try {
    const from = options.tail === null ? { index: 0, offset: 0 } : tailStart(sources, options.tail);
    yield* sourceChunks(sources, from);
  } finally {
    close();
  }
  return files;
}

/** `readOutput` with the secrets masked (`masker`: from `outputMasker`), to the end; empty chunks are not given. */
export function readOutputMasked(dir: string, stream: OutputStream, options: ReadOutputOptions, masker: SecretMasker | null, onChunk: (chunk: Buffer) => void): OutputFiles {
  if (!masker) return readOutput(dir, stream, options, null, onChunk);
  const scan = new StreamMasker(masker);
  const give = (data: Buffer) => {
    if (data.length) onChunk(data);
  };
  const files = readOutput(dir, stream, options, null, (chunk) => give(scan.push(chunk)));
  give(scan.flush());
  return files;
}
