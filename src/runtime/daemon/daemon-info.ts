/** The daemon's pid file: who runs the daemon of a data directory, checked by process identity. */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { processRunning } from '../execution/process-info.js';

export interface DaemonInfo {
  pid: number;
  startTime: string | null;
  bootId: string | null;
  runnerId: string;
  version: string;
  startedAt: string;
  dataDir: string;
}

export function pidFile(dataDir: string): string {
  return join(dataDir, 'daemon.json');
}
/** The pid file's content, whether or not its daemon still runs; null when missing or unreadable. */
export function readPidFile(dataDir: string): DaemonInfo | null {
  const file = pidFile(dataDir);
  if (!existsSync(file)) return null;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as DaemonInfo;
  } catch {
    return null;
  }
}

/**
 * The running daemon of a data directory, or null: a stale pid file — its process gone, or its
 * identity (pid, start time, boot id) not confirmed — is ignored.
 */
export function runningDaemon(dataDir: string): DaemonInfo | null {
  const info = readPidFile(dataDir);
  return info && processRunning({ pid: info.pid, startTime: info.startTime ?? null, bootId: info.bootId ?? null }) ? info : null;
}

