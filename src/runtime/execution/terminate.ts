/**
 * The one way loops stops a process group — for a timeout, a cancel, `cancel-other`, a daemon's
 * shutdown, an idle agent, a budget, and a process adopted from a runner that died:
 *
 *  1. SIGTERM to the group, and to descendants that left it (setsid, their own group: an agent
 *     CLI's helper daemon), each checked by identity first;
 *  2. a moment later (LATE_TERM_MS) a SIGTERM of their own to members that joined the group since
 *     (a command the wrapper started just after the signal never got it);
 *  3. SIGKILL to the group and the strays after the grace period (`--kill-grace`) if anything of it
 *     still lives.
 *
 * The leader's identity is checked before every signal, so a reused pid is never signalled. When
 * the leader exits on its own, anything it left behind in its group is stopped the same way, and
 * the pending SIGKILL is dropped as soon as the group is gone.
 *
 * A member this runner may not signal — another user's process (a command run through setpriv,
 * su or a setuid program, under a runner without CAP_KILL): kill() says EPERM — cannot be stopped
 * by loops. It is noted when the group is signalled, and `deniedNote()` says so for the run's
 * record ("could not signal pid N (uid U) …: EPERM …; it may still be running") instead of a
 * record that only says the process was killed.
 */
import { readFileSync } from 'node:fs';
import type { Clock, TimerHandle } from '../clock.js';
import { descendants, identityNow, isSameProcessAlive, liveGroupMembers, processGroup, processStartTime, groupAlive, type ProcessIdentity, signalGroup } from './process-info.js';

export const DEFAULT_GRACE_MS = 5000;
/** After a group's SIGTERM, when members that appeared since get theirs. */
export const LATE_TERM_MS = 200;

export class GroupTerminator {
  /** Descendants that left the group, found while the leader lives: stopped with it. */
  private readonly strays = new Map<number, ProcessIdentity>();
  private lateTerm: TimerHandle | null = null;
  private kill: TimerHandle | null = null;
  private started = false;
  /** The leader exited (`leaderExited`): a live process with its pid is someone else's. */
  private leaderGone = false;
  /** Processes a signal to which was refused (EPERM), by pid: who they are, whose, which signals. */
  private readonly denied = new Map<number, { id: ProcessIdentity; uid: string | null; signals: Set<string> }>();

  /**
   * @param leader the group leader (the exit-status wrapper): its pid is the group id.
   * @param confirm whether the leader is still the process loops started (false: never signal).
   */
  constructor(
    private readonly leader: number,
    private readonly clock: Clock,
    private readonly graceMs: number = DEFAULT_GRACE_MS,
    private readonly confirm: () => boolean = () => true,
  ) {}

  /** True once `terminate()` was called. */
  get terminating(): boolean {
    return this.started;
  }

  /** SIGTERM now, late joiners a moment later, SIGKILL after the grace. Safe to call again. */
  terminate(): void {
    const pid = this.leader;
    const termed = new Set([pid]);
    // A leader that is not (or no longer) the process loops started is never signalled.
    if (!this.confirm()) return;
    for (const child of descendants(pid)) {
      termed.add(child);
      if (processGroup(child) !== pid && !this.strays.has(child)) this.strays.set(child, identityNow(child, processStartTime(child)));
    }
    this.signalGroup('SIGTERM');
    for (const [child, id] of this.strays) if (isSameProcessAlive(id)) this.signal(child, 'SIGTERM');
    this.started = true;
    if (this.lateTerm === null) {
      this.lateTerm = this.clock.setTimeout(() => {
        for (const child of descendants(pid)) if (!termed.has(child) && processGroup(child) === pid) this.signal(child, 'SIGTERM');
      }, LATE_TERM_MS);
    }
    if (this.kill === null) {
      this.kill = this.clock.setTimeout(() => {
        this.kill = null;
        if (this.groupIsOurs()) this.signalGroup('SIGKILL');
        for (const [child, id] of this.strays) if (isSameProcessAlive(id)) this.signal(child, 'SIGKILL');
      }, this.graceMs);
    }
  }

  /**
   * The leader exited: whatever it left in its group goes too, and the pending SIGKILL is dropped
   * as soon as the group is gone (watched at most for the grace period), so a finished run does
   * not keep its runner waiting out the grace. Resolves once the group is gone (or, at the latest,
   * just after its SIGKILL): a run's end is recorded only then, so a runner killed while leftovers
   * ignore their SIGTERM leaves the end unrecorded — and the next runner, recovering the run,
   * stops them (`stopLeftovers`) instead of leaving them to run forever.
   */
  leaderExited(): Promise<void> {
    this.leaderGone = true;
    if (this.groupIsOurs()) {
      this.started = true;
      this.signalGroup('SIGTERM');
      for (const [child, id] of this.strays) if (isSameProcessAlive(id)) this.signal(child, 'SIGTERM');
      if (this.kill === null) {
        this.kill = this.clock.setTimeout(() => {
          this.kill = null;
          if (this.groupIsOurs()) this.signalGroup('SIGKILL');
          for (const [child, id] of this.strays) if (isSameProcessAlive(id)) this.signal(child, 'SIGKILL');
        }, this.graceMs);
      }
    }
    const since = this.clock.monotonic();
    return new Promise<void>((resolve) => {
      const settle = () => {
        if (this.kill === null) {
          this.dropLate();
          return resolve();
        }
        if (!this.groupIsOurs()) {
          this.clock.clearTimeout(this.kill);
          this.kill = null;
          this.dropLate();
          resolve();
        } else if (this.clock.monotonic() - since < this.graceMs + 250) {
          this.clock.setTimeout(settle, 25);
        } else resolve();
      };
      settle();
    });
  }

  /**
   * Whether the group with the leader's id is still the run's. While the leader lives: when it is
   * the process loops started (`confirm`). Once it exited: when members are left and none is a new
   * process with the leader's pid — an id is reused only once its group is empty, and a process
   * that got it (another run's wrapper, quite possibly: each leads its own group) is not ours.
   * Without /proc (not Linux), any member counts.
   */
  private groupIsOurs(): boolean {
    if (!groupAlive(this.leader)) return false;
    if (process.platform !== 'linux') return true;
    const members = liveGroupMembers(this.leader);
    if (!members.includes(this.leader)) return members.length > 0;
    return !this.leaderGone && this.confirm();
  }

  /**
   * Signals the group, then notes the members the signal could not reach: a group kill succeeds
   * when any member got it, so each live member is asked (kill 0) whether it may be signalled.
   */
  private signalGroup(signal: NodeJS.Signals): void {
    signalGroup(this.leader, signal);
    for (const member of liveGroupMembers(this.leader)) {
      const known = this.denied.get(member);
      if (known) known.signals.add(signal);
      else if (signalError(member, 0) === 'EPERM') this.deny(member, signal);
    }
  }

  private signal(pid: number, signal: NodeJS.Signals): void {
    if (signalError(pid, signal) === 'EPERM') this.deny(pid, signal);
  }

  private deny(pid: number, signal: NodeJS.Signals): void {
    const known = this.denied.get(pid);
    if (known) known.signals.add(signal);
    else this.denied.set(pid, { id: identityNow(pid, processStartTime(pid)), uid: uidOf(pid), signals: new Set([signal]) });
  }

  /**
   * The processes a signal was refused to (EPERM) that still run, said for the run's record, or
   * null: "could not signal pid 123 (uid 65534) (SIGTERM, SIGKILL): EPERM (operation not
   * permitted); it may still be running".
   */
  deniedNote(): string | null {
    const alive = [...this.denied].filter(([, d]) => isSameProcessAlive(d.id));
    if (alive.length === 0) return null;
    const who = alive.map(([pid, d]) => `pid ${pid}${d.uid !== null ? ` (uid ${d.uid})` : ''} (${[...d.signals].join(', ')})`).join(', ');
    return `could not signal ${who}: EPERM (operation not permitted); ${alive.length === 1 ? 'it' : 'they'} may still be running`;
  }

  /** Forgets the pending signals (the runner is stopping and leaves the group to the next one). */
  dispose(): void {
    if (this.kill !== null) this.clock.clearTimeout(this.kill);
    this.kill = null;
    this.dropLate();
  }

  private dropLate(): void {
    if (this.lateTerm !== null) this.clock.clearTimeout(this.lateTerm);
    this.lateTerm = null;
  }
}

export function signalProcess(pid: number, signal: NodeJS.Signals): void {
  signalError(pid, signal);
}

/** Sends `signal` (0: only asks) and returns the error code when it failed (ESRCH: gone; EPERM: not ours), else null. */
function signalError(pid: number, signal: NodeJS.Signals | 0): string | null {
  try {
    process.kill(pid, signal);
    return null;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code ?? 'unknown';
  }
}

/** The real uid of a process, from /proc (null elsewhere or when gone). */
function uidOf(pid: number): string | null {
  try {
    return /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? null;
  } catch {
    return null;
  }
}

/**
 * Stops what a run's (or step's) process group still holds after its leader is gone — the same
 * routine as `leaderExited` — for a runner recovering a run whose end nobody recorded: its previous
 * runner may have died between the leader's exit and the leftovers' SIGKILL. A group id is never
 * a new process's pid while any member lives, so the members found are the run's. Resolves once
 * they are gone.
 */
export function stopLeftovers(pgid: number | null, clock: Clock, graceMs: number = DEFAULT_GRACE_MS): Promise<void> {
  if (pgid === null || pgid <= 1) return Promise.resolve();
  const members = liveGroupMembers(pgid);
  // A live leader is not a leftover: the run's own (adopted elsewhere), or a process that reused
  // the pid after the whole group was gone. Either way, not this routine's to stop.
  if (members.length === 0 || members.includes(pgid)) return Promise.resolve();
  return new GroupTerminator(pgid, clock, graceMs).leaderExited();
}

