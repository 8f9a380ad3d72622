/** Drives the built `loops` binary in a temporary data directory. */
import Database from 'better-sqlite3';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll } from 'vitest';

export const BIN = resolve(__dirname, '..', '..', 'dist', 'cli', 'main.js');
export const FIXTURES = resolve(__dirname, '..', 'fixtures');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export class Sandbox {
  readonly dataDir: string;
  constructor() {
    this.dataDir = mkdtempSync(join(tmpdir(), 'loops-e2e-'));
  }

  env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = { ...process.env, LOOPS_DATA_DIR: this.dataDir, NO_COLOR: '1' };
    delete env.LOOPS_DEBUG;
    delete env.FORCE_COLOR;
    return { ...env, ...extra };
  }

  run(args: string[], extraEnv: Record<string, string> = {}): CliResult {
    const r = spawnSync(process.execPath, [BIN, ...args], { env: this.env(extraEnv), encoding: 'utf8', timeout: 60_000 });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  }

  /** Runs and parses stdout as JSON, failing loudly with stderr when the command failed. */
  json<T = any>(args: string[], extraEnv: Record<string, string> = {}): T {
    const r = this.run([...args, '--json'], extraEnv);
    if (r.code !== 0) throw new Error(`loops ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
    return JSON.parse(r.stdout) as T;
  }

  /** Starts the binary without waiting; resolves when it exits. */
  start(args: string[], extraEnv: Record<string, string> = {}) {
    const child = spawn(process.execPath, [BIN, ...args], { env: this.env(extraEnv), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const waitForOutput = (pattern: RegExp) =>
      new Promise<void>((resolvePromise, reject) => {
        const check = () => {
          if (pattern.test(stdout)) {
            child.stdout.off('data', check);
            resolvePromise();
          }
        };
        child.stdout.on('data', check);
        child.once('exit', () => reject(new Error(`exited before ${pattern}: ${stderr}`)));
        check();
      });
    const exited = new Promise<CliResult>((resolvePromise) =>
      child.once('close', (code) => resolvePromise({ code, stdout, stderr })),
    );
    return { child, waitForOutput, exited };
  }

  db(): Database.Database {
    return new Database(join(this.dataDir, 'loops.db'));
  }

  eventCount(): number {
    const db = this.db();
    try {
      return (db.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number }).n;
    } catch {
      return 0;
    } finally {
      db.close();
    }
  }

  /** The pid the sandbox's daemon pid file (daemon.json) names, or null. */
  daemonPid(): number | null {
    try {
      return (JSON.parse(readFileSync(join(this.dataDir, 'daemon.json'), 'utf8')) as { pid: number }).pid;
    } catch {
      return null;
    }
  }

  /** Kills a daemon still running for the sandbox (a failed test's), then removes the directory. */
  cleanup(): void {
    const pid = this.daemonPid();
    if (pid !== null && pidAlive(pid)) process.kill(pid, 'SIGKILL');
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}

/**
 * A test file's sandboxes: returns the factory, checks the binary is built before the file's first
 * test, and cleans up every sandbox it made (a leftover daemon killed) after the last.
 */
export function useSandboxes(): () => Sandbox {
  const made: Sandbox[] = [];
  beforeAll(() => {
    if (!existsSync(BIN)) throw new Error(`${BIN} is missing: run npm run build (npm test does it)`);
  });
  afterAll(() => {
    for (const s of made) s.cleanup();
  });
  return () => {
    const s = new Sandbox();
    made.push(s);
    return s;
  };
}

/** True while the process exists and is not a zombie (killed but not yet reaped by its new parent). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return process.platform === 'linux' ? false : true;
  }
}
