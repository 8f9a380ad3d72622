/**
 * A run's (or a step attempt's) `exit-status` file: how a process's end is known when no runner saw
 * it — after a runner's crash, a helper's death, or a restart. Written by whoever reaps the
 * process: the spawner helper for the runs it starts (spawner-process.ts), else the exit-status
 * wrapper (executor.ts). Read by the executor, recovery and adoption (process-watch.ts).
 *
 *   running\npid P\nstart T\n   the helper started the process (P leads its own group; T is its start time)
 *   exit N\npid P\n             it exited with code N
 *   signal N\npid P\n           it was killed by signal N (a number; `signal KILL`, a name, from the sh wrapper)
 *
 * One short write each (the file is truncated first): a reader that finds it empty or a first line
 * it does not know takes it as "no exit status yet".
 *
 * Node builtins only: the spawner helper imports this.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { constants as osConstants } from 'node:os';

export interface ExitStatus {
  exitCode: number | null;
  signal: string | null;
  /** The pid of the process that wrote it (the command's, or its wrapper's); null in files written before it was added. */
  pid: number | null;
}

/** What a status file says of a process's end, or null (none yet, or only that it started). */
export function readStatusFile(file: string): ExitStatus | null {
  const text = readText(file);
  if (text === null) return null;
  const [first, second] = text.split('\n');
  const pidMatch = second !== undefined ? /^pid (\d+)$/.exec(second) : null;
  const pid = pidMatch ? Number(pidMatch[1]) : null;
  const exit = /^exit (\d+)$/.exec(first ?? '');
  if (exit) return { exitCode: Number(exit[1]), signal: null, pid };
  const sig = /^signal (\w+)$/.exec(first ?? '');
  if (sig) return { exitCode: null, signal: signalName(sig[1]!), pid };
  return null;
}

/** The process a helper recorded as started in this status file (and not yet ended), or null. */
export function readStartedStatus(file: string): { pid: number; startTime: string | null } | null {
  const text = readText(file);
  if (text === null) return null;
  const m = /^running\npid (\d+)(?:\nstart (\S+))?$/.exec(text);
  return m ? { pid: Number(m[1]), startTime: m[2] ?? null } : null;
}

/** Records that the process started (the helper, right after the fork). */
export function writeStartedStatus(file: string, pid: number, startTime: string | null): void {
  write(file, `running\npid ${pid}\n${startTime !== null ? `start ${startTime}\n` : ''}`);
}

/** Records how the process ended (the helper, once it reaped it): the code, or the signal's number. */
export function writeExitStatus(file: string, pid: number, code: number | null, signal: string | null): void {
  const n = signal !== null ? (osConstants.signals as Record<string, number | undefined>)[signal] : undefined;
  const first = signal !== null ? `signal ${n ?? signal.replace(/^SIG/, '')}` : `exit ${code ?? 0}`;
  write(file, `${first}\npid ${pid}\n`);
}

/** `9` → `SIGKILL`, `KILL` / `SIGKILL` → `SIGKILL` (numbers as this OS numbers them, as node names them). */
export function signalName(token: string): string {
  if (/^\d+$/.test(token)) {
    const n = Number(token);
    const named = Object.entries(osConstants.signals).find(([, value]) => value === n);
    return named ? named[0] : `SIG${n}`;
  }
  return `SIG${token.replace(/^SIG/, '')}`;
}

function readText(file: string): string | null {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return null;
  }
}

function write(file: string, text: string): void {
  try {
    writeFileSync(file, text, { mode: 0o600 });
  } catch {
    // The run's directory is gone (pruned): nobody is left to read it.
  }
}
