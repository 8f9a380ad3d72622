import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

/** Where loops keeps everything: `LOOPS_DATA_DIR`, else the per-user data directory. */
export function resolveDataDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.LOOPS_DATA_DIR && env.LOOPS_DATA_DIR.trim() !== '') return resolve(env.LOOPS_DATA_DIR);
  if (process.platform === 'darwin') return join(homedir(), 'Library', 'Application Support', 'loops');
  const xdg = env.XDG_DATA_HOME && env.XDG_DATA_HOME.trim() !== '' ? env.XDG_DATA_HOME : join(homedir(), '.local', 'share');
  return join(xdg, 'loops');
}

export function databaseFile(dataDir: string): string {
  return join(dataDir, 'loops.db');
}

export function runDir(dataDir: string, runId: string): string {
  return join(dataDir, 'runs', runId);
}
