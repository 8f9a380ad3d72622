/**
 * The spawner: a small helper process that starts runs for a busy runner (the daemon, a workflow
 * run). Node forks on its main thread, and a fork copies the page tables of the process that
 * forks: from a runner holding a database, machines and hundreds of runs that is milliseconds per
 * spawn, on the one thread that also records the runs. From this process — no database, no
 * dependencies, a few MB of heap — a fork is cheap, and it happens on the other core while the
 * runner goes on recording.
 *
 * Protocol: one JSON object per line. On stdin, requests:
 *   {"op":"spawn","id":N,"file","args","cwd","env","unset"?,"check"?,"dirs"?,"stdin"?,"stdout","stderr"}
 * (the process's environment is this one's — the runner's when it started — minus `unset`, plus
 * `env`, which carry whatever the runner changed since; `check` names a command that must resolve on that PATH, in an existing `cwd`, or nothing
 * is started)
 * (`stdout`/`stderr` are paths opened O_APPEND, so the process writes its output straight into
 * the run's files and outlives this helper and the runner). On stdout, replies:
 *   {"id":N,"pid":P,"startTime":"…"}                  started (start time read before reaping)
 *   {"id":N,"error":"…","code":"ENOENT"|null}          not started
 *   {"id":N,"exit":{"code":C|null,"signal":S|null}}   the process ended (reaped here)
 *   {"ready":true,"pid":P}                            once, when its signal handlers are in place
 * A request with `status` names the run's status file: this process writes there that the process
 * started (pid, start time), and how it ended once reaped (exit code, or the signal: exact), before
 * it reports the exit. That is what lets a run go without an exit-status wrapper of its own.
 * Every process is the leader of a new process group (`detached`). This process runs in a session
 * of its own, out of reach of a terminal's Ctrl-C, and ignores the signals that stop a runner: the
 * runner decides when runs stop and keeps reading their exits. When its stdin closes — the runner
 * ended, or ended it for being idle (nothing pending) — it ends once the processes it started have
 * ended and their status files are written: after a runner's crash it stays to reap them, and the
 * next runner's recovery adopts them (watching by pid) and reads their ends from those files.
 *
 * Imports nothing but node builtins (and process-info.ts and which.ts, which use only those), so it
 * starts in tens of milliseconds.
 */
import { spawn } from 'node:child_process';
import { closeSync, constants as fsConstants, existsSync, mkdirSync, openSync, unlinkSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { processStartTime } from './process-info.js';
import type { SpawnerRequest } from './spawner.js';
import { writeExitStatus, writeStartedStatus } from './status-file.js';
import { resolveExecutable } from './which.js';

/** A request as the runner writes it (spawner.ts). */
type SpawnRequest = SpawnerRequest & { op: 'spawn'; id: number };

// Replies of one turn (a burst of spawns, exits reaped together) go out in one write, so the
// runner reads them in one chunk and records them in one transaction — except in a turn that
// forks for longer than FLUSH_MS, which sends what it started so far every FLUSH_MS, so the runner
// records those while this forks the rest (`sendSoon`).
let outbox: string[] = [];
const FLUSH_MS = 10;
/** When the oldest reply waiting in the outbox was queued. */
let queuedAt = 0;
/** The runner is gone (stdin closed, or stdout broken): nothing is sent any more. */
let runnerGone = false;
/** Processes started here and not yet reaped. */
let live = 0;
const flush = () => {
  if (outbox.length === 0) return;
  const text = outbox.join('');
  outbox = [];
  if (!runnerGone) process.stdout.write(text);
};
/** `send`, and when a reply has waited FLUSH_MS in this turn (a long burst of forks), write now. */
const sendSoon = (message: object) => {
  send(message);
  if (performance.now() - queuedAt >= FLUSH_MS) flush();
};
const send = (message: object) => {
  if (runnerGone) return;
  if (outbox.push(`${JSON.stringify(message)}\n`) > 1) return;
  queuedAt = performance.now();
  setImmediate(flush);
};
/** Ends this process once its runner is gone and nothing it started is left to reap. */
const endIfDone = () => {
  if (!runnerGone || live > 0) return;
  process.exit(0);
};

/**
 * This process's environment (the runner's when it started), copied once: nothing in this process
 * changes it, and reading `process.env` (an object backed by the C environment) costs tens of µs
 * a spawn.
 */
let ownEnv: Record<string, string> | null = null;

/** The environment of a request: this process's own, minus `unset`, plus `env`. */
function environment(req: SpawnRequest): Record<string, string> {
  if (ownEnv === null) {
    ownEnv = {};
    for (const k in process.env) if (process.env[k] !== undefined) ownEnv[k] = process.env[k]!;
  }
  const env = { ...ownEnv };
  for (const k of req.unset ?? []) delete env[k];
  return Object.assign(env, req.env);
}

function removeCreated(files: string[]): void {
  for (const f of files) {
    try {
      unlinkSync(f);
    } catch {
      // not there
    }
  }
}

/** Opens `file` to append, noting it in `created` when this made it: one `open` where it is new (as usual). */
function openOutput(file: string, created: string[]): number {
  try {
    const fd = openSync(file, CREATE_NEW, 0o600);
    created.push(file);
    return fd;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return openSync(file, 'a', 0o600);
  }
}
const CREATE_NEW = fsConstants.O_WRONLY | fsConstants.O_APPEND | fsConstants.O_CREAT | fsConstants.O_EXCL;

function start(req: SpawnRequest): void {
  const created: string[] = [];
  let out: number | null = null;
  let err: number | null = null;
  try {
    const env = environment(req);
    if (req.check !== undefined) {
      if (req.cwd !== null && !existsSync(req.cwd)) {
        send({ id: req.id, error: `working directory ${req.cwd} does not exist`, code: 'ENOENT' });
        return;
      }
      if (resolveExecutable(req.check, env.PATH, req.cwd, { remember: true }) === null) {
        send({ id: req.id, error: `command not found: ${req.check}`, code: 'ENOENT' });
        return;
      }
    }
    for (const dir of req.dirs ?? []) mkdirSync(dir, { recursive: true, mode: 0o700 });
    // Files this request creates are removed again if nothing is started (as inline).
    out = openOutput(req.stdout, created);
    err = req.stderr === req.stdout ? out : openOutput(req.stderr, created);
    const child = spawn(req.file, req.args, {
      cwd: req.cwd ?? undefined,
      env,
      stdio: [req.stdin !== undefined ? 'pipe' : 'ignore', out, err],
      detached: true,
      windowsHide: true,
    });
    if (child.pid === undefined) {
      removeCreated(created);
      child.once('error', (e: NodeJS.ErrnoException) => send({ id: req.id, error: e.message, code: e.code ?? null }));
      return;
    }
    const pid = child.pid;
    const startTime = processStartTime(pid);
    live += 1;
    if (req.status !== undefined) writeStartedStatus(req.status, pid, startTime);
    sendSoon({ id: req.id, pid, startTime });
    if (req.stdin !== undefined && child.stdin) {
      // A CLI that exits without reading its stdin makes this write fail (EPIPE): not an error.
      child.stdin.on('error', () => undefined);
      child.stdin.end(req.stdin);
    }
    child.on('error', () => undefined);
    child.once('exit', (code, signal) => {
      live -= 1;
      // Written before the exit is reported: whoever learns of the end can read it there.
      if (req.status !== undefined) writeExitStatus(req.status, pid, code, signal);
      send({ id: req.id, exit: { code, signal } });
      endIfDone();
    });
  } catch (e) {
    const error = e as NodeJS.ErrnoException;
    removeCreated(created);
    send({ id: req.id, error: error.message, code: error.code ?? null });
  } finally {
    // The child has its own copies.
    if (out !== null) closeSync(out);
    if (err !== null && err !== out) closeSync(err);
  }
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGUSR2'] as const) process.on(signal, () => undefined);
process.stdout.on('error', () => {
  // The runner is gone: its processes are still reaped here, and their status files written.
  runnerGone = true;
  endIfDone();
});
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on('line', (line) => {
  if (!line) return;
  let req: SpawnRequest;
  try {
    req = JSON.parse(line) as SpawnRequest;
  } catch {
    return;
  }
  if (req.op === 'spawn') start(req);
});
// The runner closed stdin: it has ended, or it ended this helper because nothing was pending
// (spawner.ts, `retire`). Replies not yet written go out first (a pipe's writes are synchronous);
// processes still running are reaped first (their status files written), then this ends.
lines.on('close', () => {
  flush();
  runnerGone = true;
  endIfDone();
});
send({ ready: true, pid: process.pid });
