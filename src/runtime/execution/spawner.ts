/**
 * The runner's side of the spawner helper (spawner-process.ts): starts it on first use, sends it
 * spawn requests and hands back each process's pid, start time and exit.
 *
 * The helper reaps the processes it starts and writes their status files (status-file.ts), and it
 * outlives its runner: when the runner ends (a crash, `kill -9`) it stays until the last of its
 * processes ended and its status is written, which is where the next runner's recovery reads it.
 * If the helper itself dies, its processes live on (each leads its own process group and writes
 * its own output files): a spawn not yet answered fails; a process already started is watched by
 * pid and start time until it ends, and its exit is reported as `lost` — its status unknown,
 * unless the helper wrote it before it died.
 *
 * The helper is kept referenced only while a spawn or a process is pending, so it never holds a
 * finished runner open; and it is ended once nothing has been pending for `idleMs` (default 5 s,
 * `LOOPS_SPAWNER_IDLE_MS`), so an idle runner does not keep a second Node process in memory. The
 * next spawn starts a new one. The runner decides, not the helper: "nothing pending" is known here,
 * on the one thread that also sends every request, so no request can reach a helper that is
 * ending, and none is ever sent twice (see `retire`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type Clock, systemClock, type TimerHandle } from '../clock.js';
import { runnerEnv } from './env.js';
import { identityNow, type ProcessIdentity, processRunning } from './process-info.js';

export interface SpawnerRequest {
  file: string;
  args: string[];
  cwd: string | null;
  /**
   * Variables set over the runner's environment as it is now (as with `child_process.spawn`
   * without `env`: a variable the runner set or removed since the helper started counts too).
   */
  env: Record<string, string>;
  /** Inherited variables removed first (an account's run drops the others' credentials). */
  unset?: string[];
  /**
   * Check before the fork that this command resolves on the request's PATH (from `cwd`) and that
   * `cwd` exists; a miss is an ENOENT error and nothing is started.
   */
  check?: string;
  /** Written to stdin, which is then closed; omitted, stdin is not connected. */
  stdin?: string;
  /** Directories made (0700, with their parents) before the files are opened. */
  dirs?: string[];
  /** Paths the process's stdout and stderr are appended to (created 0600). */
  stdout: string;
  stderr: string;
  /**
   * The run's status file (status-file.ts): the helper writes there that the process started (its
   * pid and start time), and once it reaped it, how it ended — before it reports the exit. The
   * process then needs no exit-status wrapper of its own.
   */
  status?: string;
}

export interface SpawnerExit {
  code: number | null;
  signal: string | null;
  /** The helper died first: the process was watched until it ended; code and signal are unknown. */
  lost: boolean;
}

export interface Spawned {
  pid: number;
  startTime: string | null;
  exit: Promise<SpawnerExit>;
}

export class SpawnerError extends Error {
  constructor(
    message: string,
    readonly code: string | null,
  ) {
    super(message);
    this.name = 'SpawnerError';
  }
}

interface Pending {
  started: (s: Spawned) => void;
  failed: (e: SpawnerError) => void;
  exited: ((e: SpawnerExit) => void) | null;
  pid: number | null;
  startTime: string | null;
}

/** One helper process and what it owes its runner: each helper answers only for its own requests. */
interface Helper {
  child: ChildProcess;
  /** Requests sent to this helper not yet finished: unanswered spawns, and processes not yet reported ended. */
  pending: Map<number, Pending>;
  /** The environment it was started with. */
  base: Readonly<Record<string, string>>;
  buffer: string;
  isReady: boolean;
  ready: Promise<void>;
  resolveReady: () => void;
  /** Ended by the runner because it was idle (its exit is then no start failure). */
  retired: boolean;
  gone: boolean;
}

/** How long a helper with nothing pending is kept before it is ended. */
export const DEFAULT_SPAWNER_IDLE_MS = 5000;

function idleFromEnv(): number {
  const raw = process.env.LOOPS_SPAWNER_IDLE_MS;
  if (raw === undefined || !/^\d+$/.test(raw.trim())) return DEFAULT_SPAWNER_IDLE_MS;
  return Number(raw);
}

/** The helper's script: next to this module when built; from the build when this runs from source (tests). */
const HELPER: string | undefined = [new URL('./spawner-process.js', import.meta.url), new URL('../../../dist/runtime/execution/spawner-process.js', import.meta.url)]
  .map((url) => fileURLToPath(url))
  .find((file) => existsSync(file));
const WATCH_MS = 100;

/**
 * Resolves once the process with this identity has ended (polled: it is not our child). An
 * identity that cannot be confirmed (no start time) counts as ended at once: a pid alone may be
 * another process's by now.
 */
export function whenGone(id: ProcessIdentity): Promise<void> {
  return new Promise((resolve) => {
    const watch = () => {
      if (processRunning(id)) setTimeout(watch, WATCH_MS);
      else resolve();
    };
    watch();
  });
}

/** A helper that dies this many times in a row before it is ready is given up on. */
const MAX_START_FAILURES = 3;

export interface SpawnerOptions {
  /** The helper's entry point (tests); by default spawner-process.js from the build. */
  script?: string;
  /**
   * How long a helper with no spawn pending and no process to report on is kept before it is
   * ended (the next spawn starts another). Default `LOOPS_SPAWNER_IDLE_MS`, else 5000.
   */
  idleMs?: number;
  /** The idle timer's clock (tests inject one). */
  clock?: Clock;
  /** Which spawns go through the helper (`Spawner.use`); default `always`. */
  use?: SpawnerUse;
}

/**
 * `always`: every spawn goes through the helper, started when needed (the daemon, workflow runs).
 * `busy`: a spawn goes through the helper only while one is running and ready; else this process
 * forks it. A spawn that comes within the idle time of the one before starts the helper, so a
 * runner that starts runs one after another (an embedding app, in-process workflow steps) soon
 * forks from the small helper, and one that starts a single run (`loops run-now`) never starts it.
 * Spawns made together before the helper is ready (one pass of `loops tick`) are all forked here.
 */
export type SpawnerUse = 'always' | 'busy';

export class Spawner {
  private current: Helper | null = null;
  private readonly script: string | undefined;
  private readonly idleMs: number;
  private readonly clock: Clock;
  private idleTimer: TimerHandle | null = null;
  private startFailures = 0;
  private unavailable: string | null = null;
  private nextId = 1;
  private closed = false;
  private started = 0;
  private retiredCount = 0;
  /** Called when a helper starts or ends (a daemon shows its pid). */
  onChange: (() => void) | null = null;
  /** Which spawns go through the helper (see SpawnerUse); a runner may change it. */
  use: SpawnerUse;
  /** When a spawn last asked `wanted()` (clock ms): two close together start the helper in `busy` use. */
  private lastAsked: number | null = null;

  constructor(options: SpawnerOptions = {}) {
    this.script = options.script ?? HELPER;
    this.idleMs = options.idleMs ?? idleFromEnv();
    this.clock = options.clock ?? systemClock;
    this.use = options.use ?? 'always';
    if (this.script === undefined || !existsSync(this.script)) {
      this.unavailable = 'the spawner helper script (dist/runtime/execution/spawner-process.js) is missing: run npm run build';
    }
  }

  /**
   * Null while the helper can be used; else why not (its script is missing, or it failed to
   * start ${MAX_START_FAILURES} times in a row). Runs are then forked by the runner itself.
   */
  get unavailableReason(): string | null {
    return this.unavailable;
  }

  /** The helper's pid while it runs (null while none runs: not started yet, or ended when idle). */
  get pid(): number | null {
    return this.current?.child.pid ?? null;
  }

  /** Helpers started so far, and how many of them were ended for being idle. */
  get stats(): { started: number; retired: number } {
    return { started: this.started, retired: this.retiredCount };
  }

  /**
   * Starts the helper now rather than on the first spawn (a daemon warms it at start, and before a
   * loop is due). A helper that gets no work is ended again after the idle time.
   */
  warm(): void {
    if (this.unavailable === null && !this.closed) this.helper();
  }

  /**
   * Whether the spawn about to be made should go through the helper. In `busy` use the answer is
   * yes only while a helper is ready; a spawn within the idle time of the one before starts one
   * (that spawn itself is forked here: it does not wait for the helper to start).
   */
  wanted(): boolean {
    if (this.unavailable !== null || this.closed) return false;
    if (this.use === 'always' || this.current?.isReady) return true;
    const now = this.clock.now();
    if (this.lastAsked !== null && now - this.lastAsked <= this.idleMs) this.warm();
    this.lastAsked = now;
    return false;
  }

  /** Resolves once the helper runs with its signal handlers in place (it is started if need be). */
  ready(): Promise<void> {
    return this.helper().ready;
  }

  spawn(request: SpawnerRequest): Promise<Spawned> {
    if (this.closed) return Promise.reject(new SpawnerError('the spawner is closed', null));
    let h: Helper;
    try {
      h = this.helper();
    } catch (error) {
      return Promise.reject(error);
    }
    this.cancelIdle();
    const id = this.nextId++;
    // The helper holds the environment it was started with; what changed here since goes along.
    const unset = new Set(request.unset ?? []);
    const drift = drifted(h.base);
    for (const name of drift.unset) unset.add(name);
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(drift.set)) if (!unset.has(k)) env[k] = v;
    Object.assign(env, request.env);
    const message = { op: 'spawn', id, ...request, env, ...(unset.size ? { unset: [...unset] } : {}) };
    return new Promise<Spawned>((started, failed) => {
      h.pending.set(id, { started, failed, exited: null, pid: null, startTime: null });
      hold(h, true);
      const stdin = h.child.stdin!;
      // Requests made in one turn (steps that became ready together) go out in one write.
      if (!stdin.writableCorked) {
        stdin.cork();
        process.nextTick(() => stdin.uncork());
      }
      stdin.write(`${JSON.stringify(message)}\n`);
    });
  }

  /** Ends the helper (processes it started go on). */
  close(): void {
    this.closed = true;
    this.cancelIdle();
    const h = this.current;
    this.current = null;
    h?.child.stdin?.end();
  }

  private helper(): Helper {
    if (this.current) return this.current;
    if (this.unavailable !== null) throw new SpawnerError(this.unavailable, 'EHELPER');
    const base = runnerEnv();
    // Small heaps: the point of this process is that forking it is cheap.
    // Detached: a session of its own, so a terminal's Ctrl-C reaches the runner (which then stops
    // its runs in order and still needs their exits) but not the helper.
    // Its stderr comes through this runner (not inherited): a helper that outlives its runner to
    // reap the runs must not hold the runner's stderr — a terminal's, a pipe's — open meanwhile.
    const child = spawn(process.execPath, ['--max-semi-space-size=1', this.script!], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: base,
      detached: true,
      windowsHide: true,
    });
    let resolveReady!: () => void;
    const ready = new Promise<void>((resolve) => (resolveReady = resolve));
    const h: Helper = { child, pending: new Map(), base, buffer: '', isReady: false, ready, resolveReady, retired: false, gone: false };
    this.current = h;
    this.started += 1;
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (text: string) => this.read(h, text));
    child.stderr!.on('data', (chunk: Buffer) => process.stderr.write(chunk));
    child.stdin!.on('error', () => undefined); // its death is handled on 'exit'
    child.once('exit', () => this.died(h));
    child.once('error', () => this.died(h));
    hold(h, false);
    this.armIdle();
    this.onChange?.();
    return h;
  }

  private read(h: Helper, text: string): void {
    h.buffer += text;
    let nl: number;
    while ((nl = h.buffer.indexOf('\n')) >= 0) {
      const line = h.buffer.slice(0, nl);
      h.buffer = h.buffer.slice(nl + 1);
      let msg: { id: number; pid?: number; startTime?: string | null; error?: string; code?: string | null; exit?: { code: number | null; signal: string | null } };
      try {
        msg = JSON.parse(line);
      } catch {
        continue;
      }
      if ((msg as { ready?: boolean }).ready) {
        h.isReady = true;
        this.startFailures = 0;
        h.resolveReady();
        continue;
      }
      const p = h.pending.get(msg.id);
      if (!p) continue;
      if (msg.exit) {
        h.pending.delete(msg.id);
        p.exited?.({ code: msg.exit.code, signal: msg.exit.signal, lost: false });
      } else if (msg.pid !== undefined) {
        p.pid = msg.pid;
        p.startTime = msg.startTime ?? null;
        p.started({ pid: msg.pid, startTime: p.startTime, exit: new Promise((resolve) => (p.exited = resolve)) });
      } else {
        h.pending.delete(msg.id);
        p.failed(new SpawnerError(msg.error ?? 'spawn failed', msg.code ?? null));
      }
    }
    if (h.pending.size === 0) {
      hold(h, false);
      if (h === this.current) this.armIdle();
    }
  }

  /** The helper ended: unanswered spawns fail; started processes are watched until they end. */
  private died(h: Helper): void {
    if (h.gone) return; // 'error' then 'exit'
    h.gone = true;
    if (this.current === h) {
      this.current = null;
      this.cancelIdle();
      if (!this.closed && !h.isReady && ++this.startFailures >= MAX_START_FAILURES) {
        this.unavailable = `the spawner helper failed to start ${MAX_START_FAILURES} times in a row`;
      }
    }
    // A ready() waiting on this helper is answered: the next call starts another.
    h.resolveReady();
    const pending = [...h.pending.values()];
    h.pending.clear();
    for (const p of pending) {
      if (p.pid === null) {
        p.failed(new SpawnerError('the spawner helper process ended before it answered', 'EHELPERGONE'));
        continue;
      }
      void whenGone(identityNow(p.pid, p.startTime)).then(() => p.exited?.({ code: null, signal: null, lost: true }));
    }
    this.onChange?.();
  }

  /** (Re)starts the idle countdown of the current helper, if nothing is pending on it. */
  private armIdle(): void {
    this.cancelIdle();
    const h = this.current;
    if (!h || h.pending.size > 0 || this.closed) return;
    const timer = this.clock.setTimeout(() => {
      if (this.idleTimer !== timer) return;
      this.idleTimer = null;
      this.retire(h);
    }, this.idleMs);
    // Never what keeps a finished runner alive.
    (timer as { unref?: () => void }).unref?.();
    this.idleTimer = timer;
  }

  private cancelIdle(): void {
    if (this.idleTimer === null) return;
    this.clock.clearTimeout(this.idleTimer);
    this.idleTimer = null;
  }

  /**
   * Ends an idle helper. It is detached first — the next spawn starts a new helper — then its stdin
   * is closed, on which it exits. Nothing is lost or doubled: it has no request unanswered and no
   * process whose exit it has not reported (its `pending` is empty, checked here on the thread
   * that sends requests, so none can be sent to it in between), and after this no request goes to it.
   */
  private retire(h: Helper): void {
    if (this.current !== h || h.pending.size > 0) return;
    this.current = null;
    h.retired = true;
    this.retiredCount += 1;
    h.child.stdin!.end();
    this.onChange?.();
  }
}

/** How this process's environment (`runnerEnv()`, read once per turn) differs from `base` (the helper's). */
function drifted(base: Readonly<Record<string, string>>): { set: Record<string, string>; unset: string[] } {
  const set: Record<string, string> = {};
  const unset: string[] = [];
  const env = runnerEnv();
  if (env === base) return { set, unset };
  for (const k in env) if (base[k] !== env[k]) set[k] = env[k]!;
  for (const k in base) if (env[k] === undefined) unset.push(k);
  return { set, unset };
}

/** Whether the helper (its process handle and pipes) keeps this process's event loop alive. */
function hold(h: Helper, on: boolean): void {
  const how = on ? 'ref' : 'unref';
  h.child[how]();
  for (const pipe of [h.child.stdout, h.child.stderr, h.child.stdin]) (pipe as unknown as Partial<Record<'ref' | 'unref', () => void>>)[how]?.();
}
