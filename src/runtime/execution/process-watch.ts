/**
 * Processes loops did not see end: the outcome a process left in its files (the exit-status
 * wrapper's status file, its output, an agent's transcript) — for a run or a step whose runner
 * died — and the watch over a process adopted from such a runner, which enforces the same
 * recorded deadline and stops it through the same terminate routine as a live run's.
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import type { EventData } from '../../events/catalog.js';
import { formatDuration } from '../../events/durations.js';
import type { Clock, TimerHandle } from '../clock.js';
import { agentReport, cliVersion, withAgentError } from '../agents/run.js';
import type { ProviderId } from '../agents/index.js';
import { msLeft, type Deadline, type ExitInfo } from './executor.js';
import { readStartedStatus, readStatusFile } from './status-file.js';
import { maskFiles, tailOfOutput } from './output.js';
import { processRunning, type ProcessIdentity } from './process-info.js';
import { SecretMasker } from './secrets.js';
import { DEFAULT_GRACE_MS, GroupTerminator } from './terminate.js';

export interface FileExit {
  exit: ExitInfo;
  /** An agent's own account of the run, parsed from its files; null for a command. */
  agent: EventData<'run.agent_reported'> | null;
  /** The wrapper's pid, from its status file (null in files written before it was added). */
  pid: number | null;
}

export interface FileExitOptions {
  /** Values masked in the files (rewritten) and in what is taken from them. */
  secrets: readonly string[];
  /** When the process started (the duration is measured to the status file's time). */
  startedAt: string | null;
  /** The agent CLI the process was, for its report. */
  provider: ProviderId | null;
  /** How the outcome was learnt, added to a failure's message, e.g. `recorded from its exit-status file after runner X stopped`. */
  how: string;
  /** The deadline was enforced on it (an adopted process past its deadline). */
  timedOut?: { timeoutMs: number } | null;
  /** It was stopped because its run was cancelled, for this reason. */
  cancelled?: string | null;
}

/**
 * The outcome a process recorded in `dir` (`exit-status`, `stdout.log`, `stderr.log`) when it ended
 * while no runner watched it, or null when it left no status. The process wrote its output
 * unwatched: its secrets are masked first, in the files too, so nothing unmasked reaches an event.
 */
export function exitFromFiles(dir: string, o: FileExitOptions): FileExit | null {
  const statusPath = join(dir, 'exit-status');
  const status = readStatusFile(statusPath);
  if (!status) return null;
  const masker = o.secrets.length ? new SecretMasker(o.secrets) : null;
  if (masker) for (const f of ['stdout.log', 'stderr.log']) maskFiles(join(dir, f), masker);
  const stdout = tailOfOutput(join(dir, 'stdout.log'));
  const stderr = tailOfOutput(join(dir, 'stderr.log'));
  const endedAt = statSync(statusPath).mtimeMs;
  const started = o.startedAt ? Date.parse(o.startedAt) : endedAt;
  const what = status.signal ? `killed by signal ${status.signal}` : status.exitCode === 0 ? null : `exited with code ${status.exitCode}`;
  let agent: EventData<'run.agent_reported'> | null = null;
  if (o.provider !== null) {
    agent = agentReport(o.provider, join(dir, 'stdout.log'), cliVersion(o.provider));
    if (agent.finalMessage !== null && masker) agent.finalMessage = masker.mask(agent.finalMessage);
    if (agent.error && masker) agent.error = { ...agent.error, message: masker.mask(agent.error.message) };
  }
  const error = o.timedOut
    ? `timed out after ${formatDuration(o.timedOut.timeoutMs)} (${o.how})${what ? `; process ${what.replace(/^exited/, 'then exited')}` : ''}`
    : o.cancelled !== undefined && o.cancelled !== null
      ? `cancelled: ${o.cancelled}`
      : what
        ? `${what} (${o.how})`
        : null;
  return {
    // The CLI's own error, when it reported one, says why before how the process ended.
    exit: withAgentError({
      exitCode: status.exitCode,
      signal: status.signal,
      timedOut: Boolean(o.timedOut),
      cancelled: !o.timedOut && o.cancelled !== undefined && o.cancelled !== null,
      stdout: stdout.text,
      stderr: stderr.text,
      stdoutBytes: stdout.total,
      stderrBytes: stderr.total,
      durationMs: Math.max(0, Math.round(endedAt - started)),
      error,
    }, agent),
    agent,
    pid: status.pid,
  };
}

export interface AdoptOptions extends Omit<FileExitOptions, 'timedOut' | 'cancelled'> {
  identity: ProcessIdentity;
  /** The run's (or step attempt's) directory: its status file and output. */
  dir: string;
  /** The run's deadline as its intent recorded it. */
  deadline: Deadline | null;
  /** `--kill-grace` of the run. */
  killGraceMs: number | null;
  /** How often the process is looked at (default 250 ms): nothing tells a non-parent that it ended. */
  pollMs?: number;
}

/** How long an adopter waits for the status a spawner helper writes once it reaped the process: 40 × 50 ms. */
const STATUS_WAITS = 40;
const STATUS_WAIT_MS = 50;

/** What became of an adopted process: its outcome from its files, or why it is unknown. */
export type AdoptedEnd = { kind: 'exited'; end: FileExit } | { kind: 'unknown'; reason: string };

export interface AdoptedProcess {
  readonly identity: ProcessIdentity;
  /** Stops the process group (the terminate routine) because its run was cancelled. */
  cancel(reason: string | null): void;
  /** Stops watching, signals nothing more (a runner shutting down leaves it to the next one). */
  release(): void;
  /** Resolves once the process ended (never, after `release`). */
  readonly ended: Promise<AdoptedEnd>;
}

/**
 * Watches a process that outlived its runner until it ends: enforces its recorded deadline (on
 * the monotonic clock, from what was left of it now) and stops it on cancel through the same
 * terminate routine as a live run, always honouring its `--kill-grace`. Only a process whose
 * identity is confirmed may be adopted; its group is signalled only while its leader still is it.
 */
export function adoptProcess(clock: Clock, o: AdoptOptions): AdoptedProcess {
  const { identity } = o;
  const terminator = new GroupTerminator(identity.pid, clock, o.killGraceMs ?? DEFAULT_GRACE_MS, () => processRunning(identity));
  let timedOut = false;
  let cancelled: string | null = null;
  let done = false;
  const timers = new Set<TimerHandle>();
  const later = (ms: number, fn: () => void) => {
    const t = clock.setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    timers.add(t);
  };
  let resolveEnded!: (end: AdoptedEnd) => void;
  const ended = new Promise<AdoptedEnd>((resolve) => (resolveEnded = resolve));
  const stopTimers = () => {
    for (const t of timers) clock.clearTimeout(t);
    timers.clear();
  };
  if (o.deadline !== null) {
    later(msLeft(o.deadline, clock), () => {
      if (done || cancelled !== null) return;
      timedOut = true;
      terminator.terminate();
    });
  }
  const poll = () =>
    later(o.pollMs ?? 250, () => {
      if (done) return;
      if (processRunning(identity)) return poll();
      done = true;
      stopTimers();
      // The end is read (and recorded) once the group's leftovers are gone too (see leaderExited).
      void terminator.leaderExited().then(() => settleEnd());
    });
  let statusWaits = 0;
  const settleEnd = () => {
    const stopped = { timedOut: timedOut ? { timeoutMs: o.deadline?.timeoutMs ?? 0 } : null, cancelled };
    // A member this runner could not signal (EPERM: another user's) is said, as for a live run.
    const denied = terminator.deniedNote();
    const end = exitFromFiles(o.dir, { ...o, ...stopped });
    // Started by a spawner helper, which writes the status a moment after it reaped the process:
    // looked at again for a while (the helper may also be gone, and never write it).
    if (!end && statusWaits < STATUS_WAITS && readStartedStatus(join(o.dir, 'exit-status')) !== null) {
      statusWaits += 1;
      return later(STATUS_WAIT_MS, settleEnd);
    }
    if (end) return resolveEnded({ kind: 'exited', end: denied ? { ...end, exit: { ...end.exit, error: end.exit.error ? `${end.exit.error}; ${denied}` : denied } } : end });
    const unknown = `its process (pid ${identity.pid}) ended and left no exit status${denied ? `; ${denied}` : ''}`;
    // Stopped by loops (a deadline, a cancel) and killed before its wrapper could write: what
    // loops did is known, the exit status is not. Otherwise nothing is known: abandoned.
    if (timedOut || cancelled !== null) {
      const started = o.startedAt ? Date.parse(o.startedAt) : clock.now();
      resolveEnded({
        kind: 'exited',
        end: {
          exit: {
            exitCode: null,
            signal: null,
            timedOut,
            cancelled: !timedOut,
            stdout: '',
            stderr: '',
            stdoutBytes: 0,
            stderrBytes: 0,
            durationMs: Math.max(0, clock.now() - started),
            error: `${timedOut ? `timed out after ${formatDuration(o.deadline?.timeoutMs ?? 0)}` : `cancelled: ${cancelled}`} (${o.how}); ${unknown}`,
          },
          agent: null,
          pid: null,
        },
      });
    } else resolveEnded({ kind: 'unknown', reason: unknown });
  };
  poll();
  return {
    identity,
    cancel(reason) {
      if (done || cancelled !== null) return;
      cancelled = reason ?? 'cancelled';
      terminator.terminate();
    },
    release() {
      done = true;
      stopTimers();
      terminator.dispose();
    },
    ended,
  };
}
