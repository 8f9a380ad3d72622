/**
 * The process executor. Every process goes through execa, as the leader of a new process group
 * (`detached`), with stdin ignored, output streamed to capped files and bounded in-memory tails.
 * Timeout and cancel kill the whole group: SIGTERM, then SIGKILL after the grace period. When
 * the leader exits, anything it left behind in its group is cleaned up the same way.
 */
import { existsSync } from 'node:fs';
import { execa } from 'execa';
import type { Clock, TimerHandle } from './clock.js';
import { formatDuration } from './durations.js';
import { CappedFile, TailBuffer } from './output.js';
import { bootId, groupAlive, processStartTime, signalGroup } from './process-info.js';

export interface SpawnSpec {
  command: string;
  args: ReadonlyArray<string>;
  shell: boolean;
  cwd: string | null;
  /** Variables added to the inherited environment. */
  env: Record<string, string>;
  timeoutMs: number | null;
  /** Time between SIGTERM and SIGKILL (default 5000 ms). */
  killGraceMs?: number;
  /** Bytes of each stream kept in memory for the run's events (default 64 KiB). */
  tailBytes?: number;
  /** Where to write the full streams (capped); omitted: not written. */
  stdoutFile?: string;
  stderrFile?: string;
  /** Cap per output file before it is rotated (default 16 MiB). */
  fileCapBytes?: number;
  /** Live output, e.g. for `run-now --show-output`. */
  onOutput?: (stream: 'stdout' | 'stderr', chunk: Buffer) => void;
}

export interface ExitInfo {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  cancelled: boolean;
  stdout: string;
  stderr: string;
  stdoutBytes: number;
  stderrBytes: number;
  durationMs: number;
  /** Human-readable reason when the run did not succeed; null on exit 0. */
  error: string | null;
}

export interface ProcessHandle {
  pid: number;
  pgid: number;
  startTime: string | null;
  bootId: string | null;
  /** Kill the process group because the run was cancelled. */
  cancel(reason?: string | null): void;
  /** Resolves once the leader exited and its streams closed (or were abandoned). */
  readonly exited: Promise<ExitInfo>;
}

export class SpawnFailedError extends Error {
  constructor(
    message: string,
    readonly code: string | null,
  ) {
    super(message);
    this.name = 'SpawnFailedError';
  }
}

const DEFAULT_GRACE_MS = 5000;
const DEFAULT_TAIL = 64 * 1024;
const DEFAULT_FILE_CAP = 16 * 1024 * 1024;

export async function spawnProcess(spec: SpawnSpec, clock: Clock): Promise<ProcessHandle> {
  const grace = spec.killGraceMs ?? DEFAULT_GRACE_MS;
  const startedMono = clock.monotonic();
  const subprocess = execa(spec.command, [...spec.args], {
    shell: spec.shell,
    cwd: spec.cwd ?? undefined,
    env: spec.env,
    extendEnv: true,
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
    buffer: false,
    reject: false,
    detached: true,
    cleanup: false,
    windowsHide: true,
  });

  if (subprocess.pid === undefined) {
    const result = await subprocess;
    const code = (result as { code?: string }).code ?? null;
    const cause = (result as { cause?: { message?: string } }).cause?.message ?? result.shortMessage ?? 'spawn failed';
    throw new SpawnFailedError(explainSpawnError(spec, code, cause), code);
  }

  const pid = subprocess.pid;
  const startTime = processStartTime(pid);
  const stdoutTail = new TailBuffer(spec.tailBytes ?? DEFAULT_TAIL);
  const stderrTail = new TailBuffer(spec.tailBytes ?? DEFAULT_TAIL);
  const stdoutFile = spec.stdoutFile ? new CappedFile(spec.stdoutFile, spec.fileCapBytes ?? DEFAULT_FILE_CAP) : null;
  const stderrFile = spec.stderrFile ? new CappedFile(spec.stderrFile, spec.fileCapBytes ?? DEFAULT_FILE_CAP) : null;
  subprocess.stdout?.on('data', (chunk: Buffer) => {
    stdoutTail.push(chunk);
    stdoutFile?.write(chunk);
    spec.onOutput?.('stdout', chunk);
  });
  subprocess.stderr?.on('data', (chunk: Buffer) => {
    stderrTail.push(chunk);
    stderrFile?.write(chunk);
    spec.onOutput?.('stderr', chunk);
  });

  let timedOut = false;
  let cancelled = false;
  let cancelReason: string | null = null;
  let leaderExited = false;
  let killTimer: TimerHandle | null = null;

  const terminateGroup = () => {
    signalGroup(pid, 'SIGTERM');
    if (killTimer === null) {
      killTimer = clock.setTimeout(() => {
        signalGroup(pid, 'SIGKILL');
      }, grace);
    }
  };

  const timeoutTimer =
    spec.timeoutMs !== null
      ? clock.setTimeout(() => {
          if (leaderExited) return;
          timedOut = true;
          terminateGroup();
        }, spec.timeoutMs)
      : null;

  const exited = new Promise<ExitInfo>((resolve) => {
    subprocess.once('exit', (code, signal) => {
      leaderExited = true;
      if (timeoutTimer !== null) clock.clearTimeout(timeoutTimer);
      // Whatever the leader left behind in its group goes with it.
      if (groupAlive(pid)) terminateGroup();
      const finish = () => {
        if (killTimer !== null && !groupAlive(pid)) clock.clearTimeout(killTimer);
        stdoutFile?.close();
        stderrFile?.close();
        const exitCode = code;
        const sig = signal ?? null;
        resolve({
          exitCode,
          signal: sig,
          timedOut,
          cancelled: cancelled && !timedOut,
          stdout: stdoutTail.toString(),
          stderr: stderrTail.toString(),
          stdoutBytes: stdoutTail.total,
          stderrBytes: stderrTail.total,
          durationMs: Math.max(0, Math.round(clock.monotonic() - startedMono)),
          error: describeExit({ exitCode, signal: sig, timedOut, cancelled, cancelReason, timeoutMs: spec.timeoutMs }),
        });
      };
      // Streams normally close right after exit; a grandchild that escaped the group may keep
      // them open, so wait at most the grace period (plus a beat) and then stop reading.
      waitForStreams(subprocess, clock, grace + 500).then(finish, finish);
    });
  });
  // With reject:false the promise never rejects; it is awaited only to release execa's resources.
  subprocess.then(
    () => undefined,
    () => undefined,
  );

  return {
    pid,
    pgid: pid,
    startTime,
    bootId: bootId(),
    cancel(reason) {
      if (leaderExited || cancelled) return;
      cancelled = true;
      cancelReason = reason ?? null;
      terminateGroup();
    },
    exited,
  };
}

function waitForStreams(
  subprocess: { stdout: NodeJS.ReadableStream | null; stderr: NodeJS.ReadableStream | null },
  clock: Clock,
  limitMs: number,
): Promise<void> {
  const streams = [subprocess.stdout, subprocess.stderr].filter(
    (s): s is NodeJS.ReadableStream & { readableEnded?: boolean; destroyed?: boolean; destroy?: () => void } => s !== null,
  );
  const pending = streams.filter((s) => !s.readableEnded && !s.destroyed);
  if (pending.length === 0) return Promise.resolve();
  return new Promise((resolve) => {
    let left = pending.length;
    const timer = clock.setTimeout(() => {
      for (const s of pending) s.destroy?.();
      resolve();
    }, limitMs);
    for (const s of pending) {
      const done = () => {
        left -= 1;
        if (left === 0) {
          clock.clearTimeout(timer);
          resolve();
        }
      };
      s.once('close', done);
    }
  });
}

function describeExit(x: {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  cancelled: boolean;
  cancelReason: string | null;
  timeoutMs: number | null;
}): string | null {
  if (x.timedOut) {
    return `timed out after ${formatDuration(x.timeoutMs ?? 0)}${x.signal ? `; process killed by ${x.signal}` : ''}`;
  }
  if (x.cancelled) return x.cancelReason ? `cancelled: ${x.cancelReason}` : 'cancelled';
  if (x.signal) return `killed by signal ${x.signal}`;
  if (x.exitCode !== null && x.exitCode !== 0) return `exited with code ${x.exitCode}`;
  return null;
}

function explainSpawnError(spec: SpawnSpec, code: string | null, cause: string): string {
  if (code === 'ENOENT') {
    // Node reports a missing cwd as `spawn <command> ENOENT`, exactly like a missing command.
    return spec.cwd && !existsSync(spec.cwd)
      ? `working directory ${spec.cwd} does not exist`
      : `command not found: ${spec.command} (searched PATH=${process.env.PATH ?? ''})`;
  }
  if (code === 'EACCES') return `permission denied: ${spec.command} is not executable`;
  return `could not start ${spec.command}: ${cause}`;
}
