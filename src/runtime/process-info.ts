/**
 * Process identity: a pid alone is reused, so a process is identified by pid + start time
 * (+ boot id). Linux reads /proc; elsewhere `ps -o lstart=` is used.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

let cachedBootId: string | null | undefined;

export function bootId(): string | null {
  if (cachedBootId !== undefined) return cachedBootId;
  try {
    cachedBootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    cachedBootId = null;
  }
  return cachedBootId;
}

/** The OS's start time of `pid` as an opaque string, or null when the process does not exist. */
export function processStartTime(pid: number): string | null {
  if (process.platform === 'linux') {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // Field 2 (comm) may contain spaces and parentheses: split after the last ')'.
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return rest[19] ?? null; // field 22: starttime in clock ticks since boot
    } catch {
      return null;
    }
  }
  try {
    const out = execFileSync('ps', ['-o', 'lstart=', '-p', String(pid)], { encoding: 'utf8' }).trim();
    return out === '' ? null : out;
  } catch {
    return null;
  }
}

/** True when a process with this pid and this start time is alive. */
export function isSameProcessAlive(pid: number, startTime: string | null): boolean {
  const current = processStartTime(pid);
  if (current === null) return false;
  return startTime === null || current === startTime;
}

/** True while any process in the group is alive. */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Sends `signal` to every process in the group; false when the group is gone. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * True while the process with this identity is running. A zombie (exited, not yet reaped — e.g.
 * reparented to an init that reaps late or never) still has its /proc entry and start time, but it
 * has ended: it counts as gone.
 */
export function processRunning(pid: number, startTime: string | null): boolean {
  if (!isSameProcessAlive(pid, startTime)) return false;
  if (process.platform !== 'linux') return true;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/**
 * Every living descendant of `pid` (children, their children, …), from /proc on Linux; [] elsewhere
 * or when /proc cannot be read. A descendant that started its own process group or session (an
 * agent CLI's helper daemon) is not reached by signalling the run's group: stopping a run signals
 * these too. Read while the leader is alive — after its death its orphans belong to init.
 */
export function descendants(pid: number): number[] {
  if (process.platform !== 'linux') return [];
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const children = new Map<number, number[]>();
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const list = children.get(ppid);
      if (list) list.push(Number(name));
      else children.set(ppid, [Number(name)]);
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const stack = [...(children.get(pid) ?? [])];
  while (stack.length) {
    const next = stack.pop()!;
    out.push(next);
    stack.push(...(children.get(next) ?? []));
  }
  return out;
}

/** The process group of a process, or null. */
export function processGroup(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
  } catch {
    return null;
  }
}

/**
 * The running process whose argv is the exit-status wrapper for `statusFile` (`… loops-run
 * <statusFile> …`; the path is unique per run and attempt), with its start time, or null. This is how
 * recovery finds a run's process when its runner died after the fork but before it recorded the
 * pid. Linux reads /proc/<pid>/cmdline; elsewhere `ps -axo pid=,args=`.
 */
export function findWrapperProcess(statusFile: string, wrapperName = 'loops-run'): { pid: number; startTime: string | null } | null {
  if (process.platform === 'linux') {
    let entries: string[];
    try {
      entries = readdirSync('/proc');
    } catch {
      return null;
    }
    const needle = `\0${wrapperName}\0${statusFile}\0`;
    for (const name of entries) {
      if (!/^\d+$/.test(name)) continue;
      let cmdline: string;
      try {
        cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8');
      } catch {
        continue;
      }
      if (!cmdline.includes(needle)) continue;
      const pid = Number(name);
      const startTime = processStartTime(pid);
      // A wrapper's subshell (`(eval …)`) carries the same argv: the group leader is the one.
      if (startTime !== null && processGroup(pid) === pid && processRunning(pid, startTime)) return { pid, startTime };
    }
    return null;
  }
  try {
    const out = execFileSync('ps', ['-axo', 'pid=,pgid=,args='], { encoding: 'utf8' });
    for (const line of out.split('\n')) {
      const m = /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(line);
      if (!m || m[1] !== m[2] || !m[3]!.includes(` ${wrapperName} ${statusFile} `)) continue;
      const pid = Number(m[1]);
      return { pid, startTime: processStartTime(pid) };
    }
  } catch {
    // no ps
  }
  return null;
}
