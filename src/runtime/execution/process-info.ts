/**
 * Process identity: a pid alone is reused, so a process is identified by pid + start time + boot
 * id (`ProcessIdentity`). Linux reads /proc; elsewhere `ps -o lstart=` is used. On any doubt — no
 * start time recorded, another boot — a process is not the recorded one: it is never signalled.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { getSystemErrorName } from 'node:util';
import { hostId, runnerHost } from '../host.js';

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

/**
 * Who a recorded process is: its pid, the OS's start time of it and the boot it ran on (`bootId()`
 * then; null where the OS has none). A pid alone is reused; a start time (ticks since boot on
 * Linux) is only unique within one boot.
 */
export interface ProcessIdentity {
  pid: number;
  startTime: string | null;
  bootId: string | null;
}

/**
 * What the OS says of a recorded process now:
 *  - `running`: a process with this pid, this start time, on this boot, is alive (not a zombie);
 *  - `gone`: no process has this identity — the pid is free, a zombie, or (same boot, known start
 *    time) another process's;
 *  - `unconfirmed`: the pid is alive but the identity cannot be compared — no start time was
 *    recorded, or it was recorded on another boot (or with no boot id where there is one now). The
 *    process may be anyone's: never signal it, never adopt it. `reason` says why, for a log line.
 */
export type ProcessState = { state: 'running' } | { state: 'gone' } | { state: 'unconfirmed'; reason: string };

const RUNNING: ProcessState = { state: 'running' };
const GONE: ProcessState = { state: 'gone' };

export function processState(id: ProcessIdentity): ProcessState {
  const current = processStartTime(id.pid);
  if (current === null) return GONE;
  const boot = bootId();
  if (id.bootId !== boot) {
    return {
      state: 'unconfirmed',
      reason: id.bootId === null ? 'no boot id was recorded' : `it was recorded on another boot (${id.bootId}; this one is ${boot ?? 'unknown'})`,
    };
  }
  if (id.startTime === null) return { state: 'unconfirmed', reason: 'no start time was recorded' };
  if (current !== id.startTime) return GONE;
  return isZombie(id.pid) ? GONE : RUNNING;
}

/** A process on this boot whose start time was just read (a descendant, a wrapper found by its argv). */
export function identityNow(pid: number, startTime: string | null): ProcessIdentity {
  return { pid, startTime, bootId: bootId() };
}

/**
 * True when the process with this identity exists (a zombie included: see `processRunning`). An
 * unknown start time or another boot never matches.
 */
export function isSameProcessAlive(id: ProcessIdentity): boolean {
  if (id.startTime === null || id.bootId !== bootId()) return false;
  return processStartTime(id.pid) === id.startTime;
}

/**
 * Node's own `kill` without the exception: `process._kill` is the call `process.kill` makes, which
 * returns the OS error (0 when sent) and leaves building the exception to its caller. A run's group is
 * usually gone when its leader ended, so probing it threw — and built an Error with its stack — at the
 * end of every run. Where a Node lacks it, `process.kill` and its exception.
 */
const rawKill = (process as unknown as { _kill?: (pid: number, signal: number) => number })._kill;

/** `kill(pid, 0)`: whether `pid` (a negative one: a process group) exists, and whether it is ours. */
function probe(pid: number): 'alive' | 'not ours' | 'gone' {
  if (typeof rawKill === 'function') {
    const error = rawKill.call(process, pid, 0);
    return error === 0 ? 'alive' : getSystemErrorName(error) === 'EPERM' ? 'not ours' : 'gone';
  }
  try {
    process.kill(pid, 0);
    return 'alive';
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM' ? 'not ours' : 'gone';
  }
}

/** True while any process in the group is alive. */
export function groupAlive(pgid: number): boolean {
  const found = probe(-pgid);
  if (found !== 'alive') return found === 'not ours';
  // Zombies count as gone: where PID 1 does not reap orphans, a killed member stays one for good.
  return process.platform !== 'linux' || liveGroupMembers(pgid).length > 0;
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
 * True while the process with this identity is running: same pid, same start time, same boot. A
 * zombie (exited, not yet reaped — e.g. reparented to an init that reaps late or never) still has
 * its /proc entry and start time, but it has ended: it counts as gone. An identity that cannot be
 * confirmed (no start time, another boot: see `processState`) is not running — never signal it.
 */
export function processRunning(id: ProcessIdentity): boolean {
  return processState(id).state === 'running';
}

function isZombie(pid: number): boolean {
  if (process.platform !== 'linux') return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
    return state === 'Z' || state === 'X';
  } catch {
    return true; // gone meanwhile
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

/**
 * Pids of the live (not zombie, not dead) processes whose process group is `pgid`, from /proc on
 * Linux; [] elsewhere. A zombie counts as dead: where PID 1 does not reap orphans,
 * `process.kill(pid, 0)` keeps succeeding for a killed, reparented process.
 */
export function liveGroupMembers(pgid: number): number[] {
  if (process.platform !== 'linux') return [];
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const rest = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = rest.slice(rest.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[2]) === pgid && fields[0] !== 'Z' && fields[0] !== 'X') out.push(Number(name));
    } catch {
      // gone meanwhile
    }
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
 * pid. Linux reads /proc/<pid>/cmdline; elsewhere `ps -axo pid=,args=`. A process whose start time
 * cannot be read is not returned: it could not be told from a later process with its pid.
 */
export function findWrapperProcess(statusFile: string, wrapperName = 'loops-run'): ProcessIdentity | null {
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
      // A wrapper's child carries the same argv for a moment (the perl wrapper's before its exec, the
      // sh wrapper's `(eval …)` subshell): the group leader is the one.
      if (startTime === null || processGroup(pid) !== pid) continue;
      const id = identityNow(pid, startTime);
      if (processRunning(id)) return id;
    }
    return null;
  }
  try {
    const out = execFileSync('ps', ['-axo', 'pid=,pgid=,args='], { encoding: 'utf8' });
    for (const line of out.split('\n')) {
      const m = /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(line);
      if (!m || m[1] !== m[2] || !m[3]!.includes(` ${wrapperName} ${statusFile} `)) continue;
      const pid = Number(m[1]);
      const startTime = processStartTime(pid);
      return startTime === null ? null : identityNow(pid, startTime);
    }
  } catch {
    // no ps
  }
  return null;
}

/**
 * True when a runner (`<host>:<pid>:<tag>`, see openRuntime) provably no longer runs: it ran on
 * this host and no process has its pid now. A live pid proves nothing (pids are reused), so a
 * runner whose pid is taken is not gone by this test: its leases run out instead. Used where a
 * dead runner's leases must not hold things up: a daemon starting, and recovery (a `run-now`
 * killed mid-run, or that gave up recording its end on a full disk).
 */
export function runnerGone(runnerId: string): boolean {
  const host = runnerHost(runnerId);
  if (host === null) return false;
  const pid = Number(runnerId.split(':').at(-2));
  return host === hostId() && Number.isInteger(pid) && pid > 0 && processStartTime(pid) === null;
}
