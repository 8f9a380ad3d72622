/**
 * The daemon seen from outside — what `loops daemon start|stop|status|logs` and the SDK's
 * `startDaemon`, `stopDaemon`, `daemonStatus` and `daemonLogs` call: start it in the background
 * (a detached `loops daemon run` logging to daemon.log), stop it (SIGTERM, then wait for its
 * process, checked by identity, to end), tell whether it runs and is healthy (its pid file and
 * state file), and read the end of its log. The daemon itself is daemon.ts.
 */
import { chooseStore } from '../store-choice.js';
import { parseLabels } from '../../events/names.js';
import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { formatDuration } from '../../events/durations.js';
import { AlreadyExistsError, LoopsError, UsageError } from '../../events/errors.js';
import { processRunning } from '../execution/process-info.js';
import { databaseFile } from '../paths.js';
import { ensureDataDir } from '../store.js';
import { databaseSize, logFile, readDaemonState, runningDaemon } from './daemon.js';
import { daemonLogMaxBytes, daemonLogTail } from './log-file.js';

/**
 * How often the daemon looks for changes others made to the log (a loop created, paused or run
 * from the CLI or the SDK): `--interval-ms`, else `LOOPS_DAEMON_INTERVAL_MS` (the predecessor's
 * poll interval, whose tick both fired loops and noticed changes), else 1000. Due loops fire on
 * their own timer whatever it is; it bounds how late a change made elsewhere is noticed.
 */
export function watchInterval(flag: unknown): number {
  const fromEnv = process.env.LOOPS_DAEMON_INTERVAL_MS;
  const [source, raw] = typeof flag === 'string' ? ['--interval-ms', flag] : fromEnv !== undefined && fromEnv !== '' ? ['LOOPS_DAEMON_INTERVAL_MS', fromEnv] : [null, null];
  if (raw === null) return 1000;
  const ms = Number(raw.trim());
  if (!/^\s*\d+\s*$/.test(raw) || ms < 10 || ms > 30_000) {
    throw new UsageError(`${source}: ${JSON.stringify(raw)} is not a number of milliseconds from 10 to 30000`, {
      hint: source === '--interval-ms' ? 'e.g. --interval-ms 1000' : 'e.g. LOOPS_DAEMON_INTERVAL_MS=1000, or unset it',
    });
  }
  return ms;
}

/** Waits (bounded) for an OS-visible condition: a pid file to appear, a process to exit. */
async function until(cond: () => boolean, timeoutMs: number, stepMs = 50): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (cond()) return true;
    await new Promise((r) => setTimeout(r, stepMs));
  }
  return cond();
}

/** The CLI's entry (dist/cli/main.js): next to this module's folder when built; from the build when this runs from source (tests). */
export function cliEntry(): string {
  const candidates = [new URL('../../cli/main.js', import.meta.url), new URL('../../../dist/cli/main.js', import.meta.url)].map((url) => fileURLToPath(url));
  const found = candidates.find((file) => existsSync(file));
  if (!found) throw new LoopsError('internal', `the loops CLI entry is missing (looked for ${candidates.join(', ')})`, { hint: 'build loops first (npm run build)' });
  return found;
}

/** Options of `startDaemon` (`loops daemon start`). */
export interface StartDaemonOptions {
  /** Runs at once (default 4): a positive whole number. */
  concurrency?: number;
  /** How often changes made elsewhere are looked for, 10 to 30000 ms (default `$LOOPS_DAEMON_INTERVAL_MS` or 1000). */
  intervalMs?: string | number;
  /** Rotate daemon.log past this size (`10M`, `512K`; `0` never; default `$LOOPS_DAEMON_LOG_MAX_BYTES` or 10M). */
  logMaxSize?: string;
  /** The store (`LOOPS_STORE`'s form, store-choice.ts): given to the daemon in its environment, never on its command line (where `ps` would show a password). */
  store?: string;
  /** The labels its runner has, for loops pinned with `--runs-on` (comma-separated or a list; default `$LOOPS_HOST_LABELS`). */
  labels?: string | ReadonlyArray<string>;
}

/** A daemon `startDaemon` started. */
export interface DaemonStarted {
  pid: number;
  /** Its log file (daemon.log in the data directory). */
  log: string;
}

/**
 * Starts the daemon of `dataDir` in the background — a detached `loops daemon run` writing to
 * daemon.log — and resolves once its pid file names it (within 10 s). AlreadyExists when one runs;
 * UsageError for a bad option; `internal` when it exits at once or does not come up.
 */
export async function startDaemon(dataDir: string, options: StartDaemonOptions = {}): Promise<DaemonStarted> {
  const concurrency = options.concurrency ?? 4;
  if (typeof concurrency !== 'number' || !Number.isSafeInteger(concurrency) || concurrency <= 0) {
    throw new UsageError(`loops daemon start: --concurrency must be a positive whole number, got ${JSON.stringify(concurrency)}`);
  }
  const intervalArgs = ['--interval-ms', String(watchInterval(options.intervalMs === undefined ? undefined : String(options.intervalMs)))];
  // Checked here (with LOOPS_DAEMON_LOG_MAX_BYTES), so a bad value is one line now, not a daemon that exits.
  if (options.logMaxSize !== undefined && typeof options.logMaxSize !== 'string') {
    throw new UsageError(`loops daemon start: --log-max-size must be a size (10M, 512K, 0), got ${JSON.stringify(options.logMaxSize)}`);
  }
  daemonLogMaxBytes(options.logMaxSize);
  const labels = options.labels !== undefined ? parseLabels(options.labels, '--labels') : null;
  // Checked here, so a bad URL is one line now, not a daemon that exits.
  if (options.store !== undefined) chooseStore({ LOOPS_STORE: options.store });
  const existing = runningDaemon(dataDir);
  if (existing) {
    throw new AlreadyExistsError(`a daemon is already running for ${dataDir} (pid ${existing.pid})`, {
      hint: 'loops daemon status shows it; loops daemon stop stops it',
    });
  }
  const main = cliEntry();
  ensureDataDir(dataDir);
  const out = openSync(logFile(dataDir), 'a', 0o600);
  const logArgs = options.logMaxSize !== undefined ? ['--log-max-size', options.logMaxSize] : [];
  const labelArgs = labels !== null ? ['--labels', labels.join(',')] : [];
  const child = spawn(process.execPath, [main, 'daemon', 'run', '--concurrency', String(concurrency), ...intervalArgs, ...logArgs, ...labelArgs], {
    detached: true,
    stdio: ['ignore', out, out],
    env: { ...process.env, LOOPS_DATA_DIR: dataDir, ...(options.store !== undefined ? { LOOPS_STORE: options.store } : {}) },
  });
  let exited = false;
  child.once('exit', () => (exited = true));
  child.unref();
  closeSync(out);
  const up = await until(() => exited || runningDaemon(dataDir)?.pid === child.pid, 10_000);
  if (exited) {
    const tail = existsSync(logFile(dataDir)) ? readFileSync(logFile(dataDir), 'utf8').trim().split('\n').slice(-1).join('') : '';
    throw new LoopsError('internal', `the daemon exited right after starting${tail ? `: ${tail}` : ''}`, { hint: `see ${logFile(dataDir)}` });
  }
  if (!up) {
    const tail = existsSync(logFile(dataDir)) ? readFileSync(logFile(dataDir), 'utf8').trim().split('\n').slice(-3).join(' | ') : '';
    throw new LoopsError('internal', `the daemon did not start${tail ? `: ${tail}` : ''}`, { hint: `see ${logFile(dataDir)}` });
  }
  return { pid: child.pid!, log: logFile(dataDir) };
}

/** What `stopDaemon` did: nothing when no daemon ran, or stopped the one of `pid`. */
export type DaemonStopped = { stopped: false; running: false } | { stopped: true; pid: number };

/**
 * Stops the daemon of `dataDir` gracefully (SIGTERM: no new runs, running ones cancelled and
 * recorded) and resolves once its process has ended; none running is `{ stopped: false }`.
 * UsageError for a bad timeout; `internal` when it has not ended within `timeoutMs` (default 60 s).
 */
export async function stopDaemon(dataDir: string, options: { timeoutMs?: number } = {}): Promise<DaemonStopped> {
  const timeoutMs = options.timeoutMs ?? 60_000;
  if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs < 0) {
    throw new UsageError(`loops daemon stop: --timeout must be a duration of 0 or more, got ${JSON.stringify(timeoutMs)}`);
  }
  const info = runningDaemon(dataDir);
  if (!info) return { stopped: false, running: false };
  process.kill(info.pid, 'SIGTERM');
  const gone = await until(() => !processRunning(info), timeoutMs, 100);
  if (!gone) {
    throw new LoopsError('internal', `the daemon (pid ${info.pid}) did not stop within ${formatDuration(timeoutMs)}`, {
      hint: `its runs may still be shutting down; kill -9 ${info.pid} forces it (runs are then recovered on the next start)`,
    });
  }
  return { stopped: true, pid: info.pid };
}

/** `loops daemon status --json`: whether the daemon of a data directory runs and is healthy, and what it reports. */
export interface DaemonStatus {
  running: boolean;
  healthy: boolean;
  /** Why it is not healthy, or null. */
  problem: string | null;
  pid: number | null;
  startedAt: string | null;
  uptimeMs: number | null;
  version: string | null;
  dataDir: string;
  database: { path: string; bytes: number };
  activeRuns: number;
  queuedRuns: number;
  nextFireAt: string | null;
  lastPassAt: string | null;
  lastError: string | null;
  /**
   * Writes fail for a reason of the machine's (the disk full, the database locked beyond its busy
   * timeout, an I/O error): since when, why, how many failed, the next retry. Null when not.
   */
  degraded: { since: string; kind: string; reason: string; failures: number; retryInMs: number } | null;
  /** Who forks the runs: the spawner helper (and its pid) or the daemon itself (and why). */
  spawner: { mode: 'helper' | 'inline'; pid: number | null; reason: string | null } | null;
}

/**
 * The daemon of `dataDir` at `now`: not running; degraded (writes fail); no pass for 2 minutes;
 * passes that spin; or due runs waiting for a minute while nothing runs — each unhealthy, with
 * `problem` saying which. Reads its pid and state files only.
 */
export function daemonStatus(dataDir: string, now: number): DaemonStatus {
  const info = runningDaemon(dataDir);
  const state = info ? readDaemonState(dataDir) : null;
  const recent = state?.lastPassAt ? now - Date.parse(state.lastPassAt) < 120_000 : false;
  const stalled = state?.stalledSince ? now - Date.parse(state.stalledSince) >= 60_000 : false;
  const degraded = state?.degraded ?? null;
  const problem = !info
    ? 'not running'
    : degraded
      ? `degraded since ${degraded.since}: ${degraded.reason} (${degraded.failures} failed write(s); next try in ${formatDuration(Math.max(1000, degraded.retryInMs))})`
      : !recent
        ? `no pass since ${state?.lastPassAt ?? 'it started'}`
        : state?.spinning
          ? 'its passes spin: something stays due right after every pass'
          : stalled
            ? `due runs have waited since ${state!.stalledSince} while nothing runs`
            : null;
  return {
    running: info !== null,
    healthy: problem === null,
    problem,
    pid: info?.pid ?? null,
    startedAt: info?.startedAt ?? null,
    uptimeMs: info ? now - Date.parse(info.startedAt) : null,
    version: info?.version ?? null,
    dataDir,
    database: { path: databaseFile(dataDir), bytes: databaseSize(dataDir) },
    activeRuns: state?.activeRuns ?? 0,
    queuedRuns: state?.queuedRuns ?? 0,
    nextFireAt: state?.nextFireAt ?? null,
    lastPassAt: state?.lastPassAt ?? null,
    lastError: state?.lastError ?? null,
    degraded: info ? degraded : null,
    spawner: state?.spawner ?? null,
  };
}

/** The end of the daemon's log (`loops daemon logs`). */
export interface DaemonLogTail {
  /** daemon.log in the data directory. */
  file: string;
  /** False when the daemon has written no log there yet (`text` is then empty). */
  exists: boolean;
  /** The last lines (across the latest rotation), each ending in a newline. */
  text: string;
  /** The size of daemon.log as read: where a follower starts. */
  offset: number;
}

/** The last `lines` lines of the daemon's log of `dataDir` (a positive whole number; UsageError otherwise). */
export function daemonLogLines(dataDir: string, lines: number): DaemonLogTail {
  if (typeof lines !== 'number' || !Number.isSafeInteger(lines) || lines <= 0) {
    throw new UsageError(`loops daemon logs: --lines must be a positive whole number, got ${JSON.stringify(lines)}`);
  }
  const file = logFile(dataDir);
  return { file, exists: existsSync(file), ...daemonLogTail(file, lines) };
}
