/**
 * Process liveness read from /proc. A zombie counts as dead: in this sandbox PID 1 does not reap
 * orphans, so `process.kill(pid, 0)` keeps succeeding for a killed, reparented grandchild.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { waitFor } from './wait.js';

interface ProcStat {
  pid: number;
  state: string;
  ppid: number;
  pgrp: number;
}

export function procStat(pid: number): ProcStat | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { pid, state: rest[0]!, ppid: Number(rest[1]), pgrp: Number(rest[2]) };
}

/** True when the process exists and is not a zombie (Z) or dead (X). */
export function isAlive(pid: number): boolean {
  const stat = procStat(pid);
  return stat !== null && stat.state !== 'Z' && stat.state !== 'X';
}

export { liveGroupMembers } from '../../src/runtime/execution/process-info.js';
import { liveGroupMembers } from '../../src/runtime/execution/process-info.js';

/**
 * Safety net for failing tests: SIGKILLs whatever is still alive in the group. Passing tests
 * leave nothing behind (they assert it); this only stops a failure from leaking processes.
 */
export function killGroupIfAlive(pgid: number): void {
  if (liveGroupMembers(pgid).length === 0) return;
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/**
 * Waits (bounded) until no live process is left in the group. A process killed together with its
 * leader can still be in the middle of exiting (its pipes closed, not yet a zombie) when the
 * leader's exit is reported, so "gone" is observed by polling /proc, never assumed.
 */
export async function waitForGroupGone(pgid: number, timeoutMs = 2000): Promise<void> {
  await waitFor(() => liveGroupMembers(pgid).length === 0, timeoutMs, `process group ${pgid} to be gone (left: ${liveGroupMembers(pgid).join(', ')})`);
}
