/**
 * The runner's side of the spawner helper (spawner-process.ts): starts it on first use, sends it
 * spawn requests and hands back each process's pid, start time and exit.
 *
 * If the helper dies, the processes it started live on (each leads its own process group, writes
 * its own files and status file). A spawn not yet answered fails; a process already started is
 * then watched by pid and start time until it ends, and its exit is reported as `lost`, for the
 * executor to read the real outcome from the run's status file — as crash recovery does.
 *
 * The helper is kept referenced only while a spawn or a process is pending, so it never holds a
 * finished runner open.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
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

export class Spawner {
  private child: ChildProcess | null = null;
  private readonly script: string | undefined;
  private startFailures = 0;
  private readonly gone = new WeakSet<ChildProcess>();
  private isReady = false;
  private unavailable: string | null = null;
  private buffer = '';
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private closed = false;
  private readyPromise: Promise<void> | null = null;
  private readyResolve: (() => void) | null = null;

  /** `script`: the helper's entry point (tests); by default spawner-process.js from the build. */
  constructor(options: { script?: string } = {}) {
    this.script = options.script ?? HELPER;
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

  /** The helper's pid while it runs. */
  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  /** Starts the helper now rather than on the first spawn (a daemon warms it at start). */
  warm(): void {
    if (this.unavailable === null) this.helper();
  }

  /** Resolves once the helper runs with its signal handlers in place (it is started if need be). */
  ready(): Promise<void> {
    this.helper();
    return this.readyPromise!;
  }

  spawn(request: SpawnerRequest): Promise<Spawned> {
    if (this.closed) return Promise.reject(new SpawnerError('the spawner is closed', null));
    let child: ChildProcess;
    try {
      child = this.helper();
    } catch (error) {
      return Promise.reject(error);
    }
    const id = this.nextId++;
    // The helper holds the environment it was started with; what changed here since goes along.
    const unset = new Set(request.unset ?? []);
    const drift = this.drift();
    for (const name of drift.unset) unset.add(name);
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(drift.set)) if (!unset.has(k)) env[k] = v;
    Object.assign(env, request.env);
    const message = { op: 'spawn', id, ...request, env, ...(unset.size ? { unset: [...unset] } : {}) };
    return new Promise<Spawned>((started, failed) => {
      this.pending.set(id, { started, failed, exited: null, pid: null, startTime: null });
      this.hold(true);
      // Requests made in one turn (steps that became ready together) go out in one write.
      if (!child.stdin!.writableCorked) {
        child.stdin!.cork();
        process.nextTick(() => child.stdin!.uncork());
      }
      child.stdin!.write(`${JSON.stringify(message)}\n`);
    });
  }

  /** Ends the helper (processes it started go on). */
  close(): void {
    this.closed = true;
    this.child?.stdin?.end();
    this.child = null;
  }

  /** The environment the running helper was started with. */
  private base: Record<string, string> = {};

  /** How this process's environment differs from the helper's. */
  private drift(): { set: Record<string, string>; unset: string[] } {
    const set: Record<string, string> = {};
    const unset: string[] = [];
    const env = process.env;
    for (const k in env) {
      const v = env[k];
      if (v !== undefined && this.base[k] !== v) set[k] = v;
    }
    for (const k in this.base) if (env[k] === undefined) unset.push(k);
    return { set, unset };
  }

  private helper(): ChildProcess {
    if (this.child) return this.child;
    const base: Record<string, string> = {};
    for (const k in process.env) if (process.env[k] !== undefined) base[k] = process.env[k]!;
    this.base = base;
    if (this.unavailable !== null) throw new SpawnerError(this.unavailable, 'EHELPER');
    // Small heaps: the point of this process is that forking it is cheap.
    // Detached: a session of its own, so a terminal's Ctrl-C reaches the runner (which then stops
    // its runs in order and still needs their exits) but not the helper.
    this.isReady = false;
    const child = spawn(process.execPath, ['--max-semi-space-size=1', this.script!], {
      stdio: ['pipe', 'pipe', 'inherit'],
      env: base,
      detached: true,
      windowsHide: true,
    });
    this.child = child;
    this.readyPromise = new Promise((resolve) => (this.readyResolve = resolve));
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (text: string) => this.read(text));
    child.stdin!.on('error', () => undefined); // its death is handled on 'exit'
    child.once('exit', () => this.died(child));
    child.once('error', () => this.died(child));
    this.hold(false);
    return child;
  }

  private read(text: string): void {
    this.buffer += text;
    let nl: number;
    while ((nl = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, nl);
      this.buffer = this.buffer.slice(nl + 1);
      let msg: { id: number; pid?: number; startTime?: string | null; error?: string; code?: string | null; exit?: { code: number | null; signal: string | null } };
      try {
        msg = JSON.parse(line);
      } catch {
        continue;
      }
      if ((msg as { ready?: boolean }).ready) {
        this.isReady = true;
        this.startFailures = 0;
        this.readyResolve?.();
        continue;
      }
      const p = this.pending.get(msg.id);
      if (!p) continue;
      if (msg.exit) {
        this.pending.delete(msg.id);
        p.exited?.({ code: msg.exit.code, signal: msg.exit.signal, lost: false });
      } else if (msg.pid !== undefined) {
        p.pid = msg.pid;
        p.startTime = msg.startTime ?? null;
        p.started({ pid: msg.pid, startTime: p.startTime, exit: new Promise((resolve) => (p.exited = resolve)) });
      } else {
        this.pending.delete(msg.id);
        p.failed(new SpawnerError(msg.error ?? 'spawn failed', msg.code ?? null));
      }
    }
    this.unrefWhenIdle();
  }

  /** The helper ended: unanswered spawns fail; started processes are watched until they end. */
  private died(child: ChildProcess): void {
    if (this.gone.has(child)) return; // 'error' then 'exit'
    this.gone.add(child);
    const current = this.child === child;
    if (current) this.child = null;
    if (current && !this.closed && !this.isReady && ++this.startFailures >= MAX_START_FAILURES) {
      this.unavailable = `the spawner helper failed to start ${MAX_START_FAILURES} times in a row`;
    }
    // A ready() waiting on this helper is answered: the next call starts another.
    this.readyResolve?.();
    const pending = [...this.pending.values()];
    this.pending.clear();
    for (const p of pending) {
      if (p.pid === null) {
        p.failed(new SpawnerError('the spawner helper process ended before it answered', 'EHELPERGONE'));
        continue;
      }
      void whenGone(identityNow(p.pid, p.startTime)).then(() => p.exited?.({ code: null, signal: null, lost: true }));
    }
  }

  /** Whether the helper (its process handle and pipes) keeps this process's event loop alive. */
  private hold(on: boolean): void {
    const child = this.child;
    if (!child) return;
    const how = on ? 'ref' : 'unref';
    child[how]();
    for (const pipe of [child.stdout, child.stdin]) (pipe as unknown as Partial<Record<'ref' | 'unref', () => void>>)[how]?.();
  }

  private unrefWhenIdle(): void {
    if (this.pending.size === 0) this.hold(false);
  }
}
