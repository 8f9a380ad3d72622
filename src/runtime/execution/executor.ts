/**
 * The process executor. Every process is the leader of a new process group (`detached`), with
 * stdin ignored (or carrying an agent's prompt, then closed), output written by the process
 * straight into capped per-run files (followed by the runner for bounded in-memory tails and live
 * output). It is forked by the runner's spawner helper (spawner.ts) when it has one, else here
 * through execa.
 * The deadline is the absolute one recorded in the run's intent, enforced on the monotonic clock.
 * Deadline, cancel, idle and budget stops go through the one terminate routine (terminate.ts):
 * SIGTERM to the group, late joiners, SIGKILL after the grace period. When the leader exits,
 * anything it left behind in its group is cleaned up the same way.
 *
 * Over 500 lines on purpose: spawnProcess is one state machine over a live process (spawned,
 * running, stopping, exited, streams drained) and its exit wrapper; the pieces that stand alone
 * (plan, watch, terminate) already live beside it.
 */
import { existsSync, mkdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { execa } from 'execa';
import type { Clock, TimerHandle } from '../clock.js';
import { formatDuration } from '../../events/durations.js';
import type { SpawnEnv } from '../../events/catalog.js';
import { runnerEnv, runnerPath, spawnEnvNames } from './env.js';
import { maskFiles, OutputFile, TailBuffer } from './output.js';
import { SecretMasker, StreamMasker } from './secrets.js';
import { type Spawned, type Spawner, SpawnerError, whenGone } from './spawner.js';
import { resolveExecutable } from './which.js';
import { bootId, findWrapperProcess, identityNow, processGroup, processRunning, processStartTime, type ProcessIdentity } from './process-info.js';
import { readStartedStatus, readStatusFile } from './status-file.js';
import { DEFAULT_GRACE_MS, GroupTerminator } from './terminate.js';

export interface SpawnSpec {
  command: string;
  args: ReadonlyArray<string>;
  shell: boolean;
  cwd: string | null;
  /** Variables added to the inherited environment. */
  env: Record<string, string>;
  /**
   * The run's deadline, as its intent recorded it (wall clock, so recovery can honour it), or null.
   * Enforced on the monotonic clock from the moment the spawn starts: a wall-clock jump neither
   * kills the run early nor lets it overrun. `timeoutMs` is the timeout it came from (for messages).
   */
  deadline: Deadline | null;
  /** Time between SIGTERM and SIGKILL (default 5000 ms). */
  killGraceMs?: number;
  /** Bytes of each stream kept in memory for the run's events (default 64 KiB). */
  tailBytes?: number;
  /**
   * Where the full streams go (capped). When given, the process writes straight into the file
   * (no pipe to the runner, so it survives the runner's death) and the runner follows it;
   * omitted, the stream is piped and only its tail is kept.
   */
  stdoutFile?: string;
  stderrFile?: string;
  /** Cap per output file before it is rotated (default 16 MiB). */
  fileCapBytes?: number;
  /**
   * Written to the process's stdin, which is then closed (an agent's prompt: never in argv where
   * `ps` shows it). Omitted: stdin is not connected at all (agent CLIs hang on an open pipe).
   */
  stdin?: string;
  /**
   * Stop the process group when it writes no output for this long (an agent that hangs), like a
   * timeout; needs `stdoutFile`/`stderrFile`.
   */
  idleTimeoutMs?: number | null;
  /**
   * Secret values: masked as `***` (raw, JSON-escaped, percent-encoded, base64) in the output
   * tails, the live output and — once the process ended — the output files.
   */
  secrets?: readonly string[];
  /** Inherited variables removed before `env` is applied (an account's run drops the others' credentials). */
  unsetEnv?: readonly string[];
  /** The names in `env` whose values are secrets (recorded as `secret` in the spawn's environment names). */
  secretEnvNames?: readonly string[];
  /**
   * Every byte of stdout, in order, as the runner reads it (an agent's JSONL parser): unlike the
   * files, which keep only the end past their cap, this sees the whole stream. Not masked.
   * Returning a string stops the process group (SIGTERM, SIGKILL after the grace period) for that
   * reason — an agent over its budget; the exit then records the reason as its error.
   */
  stdoutSink?: (chunk: Buffer) => void | string;
  /** Live output, e.g. for `run-now --show-output`. */
  onOutput?: (stream: 'stdout' | 'stderr', chunk: Buffer) => void;
  /**
   * Run the command under a tiny /bin/sh wrapper that writes its exit status to this file, so a
   * process that outlives a crashed runner still has its real outcome recorded afterwards.
   */
  statusFile?: string;
}

/**
 * The exit-status wrapper: the run's process-group leader, the parent of the command. It runs the
 * command (its argv, or a shell command line), writes `exit N` or `signal S`, then `pid P` (its own
 * pid, the run's process group), to the status file (0600, one small write), and ends the same way
 * the command did. It survives SIGTERM/SIGINT/SIGHUP itself (a handled signal is reset to the
 * default in the command), so the command — in the same process group — decides how it ends, and
 * its status is still written after a timeout or a cancel.
 *
 * Exit codes above 128 are exit codes: `exit 137` is recorded as exit code 137, a command killed by
 * SIGKILL as the signal. Only the command's parent can tell them apart (a shell's `$?` is 137 for
 * both), so the wrapper is a few lines of perl when perl is there (`waitpid` gives the wait status:
 * exact), else /bin/sh (see SH_WRAPPER).
 */
const PERL_WRAPPER = [
  'my (undef, $f, $m, @c) = @ARGV;',
  // Set (empty) by spawnProcess so that perl says nothing of a locale it lacks; not the command's.
  "delete $ENV{PERL_BADLANG} if defined $ENV{PERL_BADLANG} && $ENV{PERL_BADLANG} eq '';",
  // A signal that reaches the group before the command exists is remembered, and re-raised in the
  // child once it has its default handlers back: a cancel right after the spawn is never lost in
  // the moment between fork and exec (the child would otherwise inherit the empty handler and exec
  // the command as if nothing had been sent).
  // Perl defers a signal to its next safe point and clears what is pending in a child after fork:
  // a signal that reached this process just before the fork is seen here only after it, when the
  // child no longer hears of it — so the handler forwards it to the child once there is one (and
  // the parent checks once more right after the fork; $p is cleared as soon as the child is reaped).
  'my ($g, $p);',
  '$SIG{$_} = sub { $g = $_[0]; kill $g, $p if $p } for qw(TERM INT HUP);',
  "@c = ('sh', '-c', $c[0]) if $m eq 'shell';",
  'my $s;',
  '$p = fork;',
  'if (!defined $p) { print STDERR "loops-run: cannot fork: $!\\n"; $s = 126 << 8 }',
  "elsif (!$p) { $SIG{$_} = 'DEFAULT' for qw(TERM INT HUP); kill($g, $$) if $g; exec { $m eq 'shell' ? '/bin/sh' : $c[0] } @c; print STDERR \"loops-run: $c[0]: $!\\n\"; exit($! == 2 ? 127 : 126) }",
  'else { kill $g, $p if $g; waitpid($p, 0); $s = $?; $p = 0 }',
  'my $n = $s & 127;',
  'umask 077;',
  // One short write (at close); readers ignore a partial line.
  "if (open my $h, '>', $f) { print $h ($n ? \"signal $n\" : 'exit ' . ($s >> 8)), \"\\npid $$\\n\"; close $h }",
  "if ($n) { $SIG{$_} = 'DEFAULT' for qw(TERM INT HUP); kill $n, $$ }",
  'exit($n ? 128 + $n : $s >> 8);',
].join('\n');

/**
 * The wrapper where there is no perl: /bin/sh, which cannot read the command's wait status — its
 * `$?` is 128+N both for a command killed by signal N and for one that exits 128+N. It reads a
 * status above 128 as the exit code it is, unless the wrapper itself caught that very signal (TERM,
 * INT, HUP: what a timeout, a cancel or a shutdown sends the group), which then ended the command.
 * So without perl a signal sent to the command alone (a crash, an OOM kill, `kill -9 <its pid>`)
 * is recorded as exit code 128+N. And a signal sent to the group by someone else in the instant
 * between the wrapper's fork and the command's exec can be missed (the forked shell still has the
 * trap); loops' own timeout and cancel signal the group's late joiners again, so they are not.
 */
const SH_WRAPPER = [
  'f=$1; mode=$2; shift 2',
  'g=',
  "trap 'g=TERM' TERM; trap 'g=INT' INT; trap 'g=HUP' HUP",
  // A signal that reached the group before the command started: it is not started at all.
  'case "$g" in TERM) s=143 ;; INT) s=130 ;; HUP) s=129 ;; *) if [ "$mode" = shell ]; then (eval "$1"); else "$@"; fi; s=$? ;; esac',
  // TERM, INT and HUP are 15, 2 and 1 everywhere.
  'case "$g$s" in TERM143|INT130|HUP129) r="signal $g" ;; *) r="exit $s"; g= ;; esac',
  'umask 077',
  // One short write with a builtin (no mv: an extra exec costs ~1 ms per run); readers ignore a partial line.
  'printf "%s\\npid %s\\n" "$r" "$$" > "$f"',
  'if [ -n "$g" ]; then trap - TERM INT HUP; kill -s "$g" $$ 2>/dev/null; fi',
  'exit "$s"',
].join('\n');

/** The wrapper's $0: with the status file after it, it names a run's process in `ps` and /proc. */
export const WRAPPER_NAME = 'loops-run';

/** Which exit-status wrapper runs the command: perl (exact signals) or /bin/sh. */
export type WrapperKind = 'perl' | 'sh';

let perlPath: string | null | undefined;

/** The perl the wrapper uses: the system's first, else one on the runner's PATH; null when none. */
export function findPerl(): string | null {
  if (perlPath === undefined) perlPath = resolveExecutable('perl', `/usr/bin:/bin:/usr/local/bin:/opt/homebrew/bin${delimiter}${process.env.PATH ?? ''}`, null);
  return perlPath;
}

/**
 * The wrapper new runs get: perl when there is one, else sh. `LOOPS_EXIT_WRAPPER=sh` forces the sh
 * wrapper (tests, diagnosis); `perl` asks for perl (sh still when there is none).
 */
export function wrapperKind(): WrapperKind {
  return process.env.LOOPS_EXIT_WRAPPER === 'sh' || findPerl() === null ? 'sh' : 'perl';
}

/** The argv that runs `command` under the exit-status wrapper writing `statusFile`. */
export function wrapperArgv(
  statusFile: string,
  command: string,
  args: readonly string[],
  shell: boolean,
  kind: WrapperKind = wrapperKind(),
): { file: string; args: string[] } {
  const rest = shell ? [WRAPPER_NAME, statusFile, 'shell', command] : [WRAPPER_NAME, statusFile, 'argv', command, ...args];
  const perl = kind === 'perl' ? findPerl() : null;
  return perl ? { file: perl, args: ['-e', PERL_WRAPPER, ...rest] } : { file: '/bin/sh', args: ['-c', SH_WRAPPER, ...rest] };
}

export { readStatusFile };

export { resolveExecutable };

export interface Deadline {
  /** ISO instant (wall clock), as recorded in the intent event. */
  at: string;
  /** The configured timeout the deadline was computed from. */
  timeoutMs: number;
}

/** The deadline of something that starts now with this timeout (null: none). */
export function deadlineAfter(nowMs: number, timeoutMs: number | null): Deadline | null {
  return timeoutMs === null ? null : { at: new Date(nowMs + timeoutMs).toISOString(), timeoutMs };
}

/** A recorded deadline (`timeoutAt` of an intent) with the timeout it came from, or null. */
export function recordedDeadline(timeoutAt: string | null, timeoutMs: number | null): Deadline | null {
  return timeoutAt === null ? null : { at: timeoutAt, timeoutMs: timeoutMs ?? 0 };
}

/**
 * Milliseconds left before `deadline`, read once from the wall clock: what is then enforced on the
 * monotonic clock (a timer), so later wall-clock jumps do not move it.
 */
export function msLeft(deadline: Deadline, clock: Clock): number {
  return Math.max(0, Date.parse(deadline.at) - clock.now());
}

export interface ExitInfo {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  cancelled: boolean;
  stdout: string;
  stderr: string;
  stdoutBytes: number;
  stderrBytes: number;
  durationMs: number;
  /** Human-readable reason when the run did not succeed; null on exit 0. */
  error: string | null;
}

export interface ProcessHandle {
  pid: number;
  pgid: number;
  startTime: string | null;
  bootId: string | null;
  /** The environment it started with, as names ({@link spawnEnvNames}): what its spawn records. */
  env: SpawnEnv;
  /** The directory it started in: absolute, symlinks resolved (its own getcwd()). */
  cwd: string;
  /** Kill the process group because the run was cancelled. */
  cancel(reason?: string | null): void;
  /** Resolves once the leader exited and its streams closed (or were abandoned). */
  readonly exited: Promise<ExitInfo>;
}

export class SpawnFailedError extends Error {
  constructor(
    message: string,
    readonly code: string | null,
  ) {
    super(message);
    this.name = 'SpawnFailedError';
  }
}

const DEFAULT_TAIL = 64 * 1024;
const DEFAULT_FILE_CAP = 16 * 1024 * 1024;

/**
 * Starts `spec` and returns its handle once the process runs. With a `spawner`, runs whose output
 * goes to files are started by the spawner helper process (see spawner.ts) instead of on this thread.
 */
export async function spawnProcess(spec: SpawnSpec, clock: Clock, spawner?: Spawner | null): Promise<ProcessHandle> {
  const grace = spec.killGraceMs ?? DEFAULT_GRACE_MS;
  const startedMono = clock.monotonic();
  let file = spec.command;
  let args = [...spec.args];
  let shell = spec.shell;
  // Through the spawner helper when the run has its files and status file and the runner's helper
  // (one that works) is wanted for it (Spawner.wanted; the fork then happens in a small process on
  // another core, not on this thread); else execa.
  const viaHelper = spec.statusFile !== undefined && spec.stdoutFile !== undefined && spec.stderrFile !== undefined && !!spawner && spawner.wanted();
  // The effective PATH: the inherited one (or the run's own) plus the user bin directories, so a
  // daemon started by systemd finds the CLIs the user's shell finds.
  const runner = runnerEnv();
  const path = runnerPath(spec.env.PATH ?? runner.PATH);
  const unset = new Set(spec.unsetEnv ?? []);
  // The helper applies `unset` to the environment it inherited; here a filtered copy is built.
  const inherited =
    unset.size && !viaHelper
      ? Object.fromEntries(Object.entries(runner).filter((e) => !unset.has(e[0])))
      : null;
  const env: Record<string, string> = { ...(inherited ?? {}), ...spec.env, PATH: path };
  // What the process gets, as names (for its spawn's record): the helper builds the same from its
  // own environment plus this one's drift, i.e. from this process's environment now.
  const envNames = spawnEnvNames(runner, { ...spec.env, PATH: path }, unset, spec.secretEnvNames);
  const runDirs = [...new Set([spec.statusFile, spec.stdoutFile, spec.stderrFile].filter((f) => f !== undefined).map((f) => dirname(f)))];
  if (spec.statusFile) {
    // Under the wrapper a missing program would only be the shell's exit 127: check first (the
    // helper checks on its side, off this thread).
    if (!viaHelper) {
      if (spec.cwd && !existsSync(spec.cwd)) throw new SpawnFailedError(`working directory ${spec.cwd} does not exist`, 'ENOENT');
      if (!spec.shell && resolveExecutable(spec.command, path, spec.cwd) === null) {
        throw new SpawnFailedError(explainSpawnError(spec, 'ENOENT', '', path), 'ENOENT');
      }
    }
    // The run's directories: made here, or by the helper (off this thread) before it opens the files.
    if (!viaHelper) for (const dir of runDirs) mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (viaHelper) {
      // The helper reaps the process and writes its status file itself (status-file.ts): no
      // wrapper, so no interpreter starts and no second fork per run.
      if (spec.shell) ({ file, args } = { file: '/bin/sh', args: ['-c', spec.command] });
    } else {
      const kind = wrapperKind();
      ({ file, args } = wrapperArgv(spec.statusFile, spec.command, spec.args, spec.shell, kind));
      // perl warns on stderr of a locale it lacks (a LANG forwarded by ssh): an empty PERL_BADLANG
      // silences it, and the wrapper removes it again before the command starts (a run's own is kept,
      // unless it is the empty string).
      if (kind === 'perl' && spec.env.PERL_BADLANG === undefined && (unset.has('PERL_BADLANG') || process.env.PERL_BADLANG === undefined)) {
        env.PERL_BADLANG = '';
      }
    }
    shell = false;
  }
  const tailBytes = spec.tailBytes ?? DEFAULT_TAIL;
  const cap = spec.fileCapBytes ?? DEFAULT_FILE_CAP;
  const stdoutTail = new TailBuffer(tailBytes);
  const stderrTail = new TailBuffer(tailBytes);
  const masker = spec.secrets && spec.secrets.length ? new SecretMasker(spec.secrets) : null;
  const live = (stream: 'stdout' | 'stderr') => {
    if (!spec.onOutput) return null;
    if (!masker || masker.empty) return (chunk: Buffer) => spec.onOutput!(stream, chunk);
    const stream$ = new StreamMasker(masker);
    return (chunk: Buffer) => {
      const out = stream$.push(chunk);
      if (out.length) spec.onOutput!(stream, out);
    };
  };
  const liveStdout = live('stdout');
  const sink = spec.stdoutSink;
  // Set once a sink asked to stop the run (see SpawnSpec.stdoutSink); acted on once the process runs.
  let stopReason: string | null = null;
  let stopNow: (() => void) | null = null;
  const feedSink = (chunk: Buffer) => {
    const stop = sink!(chunk);
    if (typeof stop === 'string' && stopReason === null) {
      stopReason = stop;
      stopNow?.();
    }
  };
  const stdoutConsumer = sink ? (chunk: Buffer) => (feedSink(chunk), liveStdout?.(chunk)) : liveStdout;
  // Through the helper the files are opened here once it started the process (it created them):
  // no mkdir and no creating open on this thread. Reading starts at offset 0, so nothing is missed.
  const fileOptions = { writer: !viaHelper, dirReady: spec.statusFile !== undefined };
  const openOutputs = (): [OutputFile | null, OutputFile | null] => [
    spec.stdoutFile ? new OutputFile(spec.stdoutFile, cap, stdoutTail, stdoutConsumer, undefined, fileOptions) : null,
    spec.stderrFile ? new OutputFile(spec.stderrFile, cap, stderrTail, live('stderr'), undefined, fileOptions) : null,
  ];
  let [stdoutOut, stderrOut] = viaHelper ? [null, null] : openOutputs();
  const closeOutputs = () => {
    stdoutOut?.close();
    stderrOut?.close();
    // No secret stays in the run's files once the process ended.
    if (masker && !masker.empty) {
      for (const f of [spec.stdoutFile, spec.stderrFile]) if (f) maskFiles(f, masker);
    }
  };
  let launched: Launched;
  try {
    launched = viaHelper
      ? await launchViaSpawner(spawner!, spec, file, args, env, runDirs, path)
      : await launchWithExeca(spec, file, args, shell, inherited, env, stdoutOut, stderrOut, path, clock, (stream, chunk) => {
          if (stream === 'stdout') {
            stdoutTail.push(chunk);
            if (sink) feedSink(chunk);
          } else stderrTail.push(chunk);
          spec.onOutput?.(stream, chunk);
        });
  } catch (error) {
    // (Through the helper nothing is removed here: a helper that died before answering may have
    // started the process, which then writes into those files. It removes what it created itself
    // when the fork fails.)
    closeOutputs();
    throw error;
  }
  if (viaHelper) [stdoutOut, stderrOut] = openOutputs();
  const pid = launched.pid;
  const startTime = launched.startTime;
  stdoutOut?.follow();
  stderrOut?.follow();

  let timedOut = false;
  let cancelled = false;
  let cancelReason: string | null = null;
  let leaderExited = false;
  // Our own child (or the helper's): its pid cannot be reused before it is reaped.
  const terminator = new GroupTerminator(pid, clock, grace);
  const terminateGroup = () => terminator.terminate();

  // The idle watchdog: output is read from the run's files at least once a second; no new byte for
  // idleTimeoutMs stops the group, recorded as a timeout that says why.
  let idle = false;
  let idleTimer: TimerHandle | null = null;
  if (spec.idleTimeoutMs && (stdoutOut || stderrOut)) {
    const idleMs = spec.idleTimeoutMs;
    let seen = -1;
    let lastChange = clock.monotonic();
    const check = () => {
      idleTimer = null;
      if (leaderExited) return;
      stdoutOut?.drain();
      stderrOut?.drain();
      const total = (stdoutOut?.total ?? 0) + (stderrOut?.total ?? 0);
      if (total !== seen) {
        seen = total;
        lastChange = clock.monotonic();
      } else if (clock.monotonic() - lastChange >= idleMs && stopReason === null) {
        idle = true;
        timedOut = true;
        terminateGroup();
        return;
      }
      idleTimer = clock.setTimeout(check, Math.max(10, Math.min(1000, Math.floor(idleMs / 4))));
    };
    check();
  }

  // A sink's stop (an agent over budget): acted on while the leader lives and nothing else stops it.
  let stopActed = false;
  stopNow = () => {
    if (leaderExited || cancelled || timedOut || stopActed) return;
    stopActed = true;
    terminateGroup();
  };
  if (stopReason !== null) stopNow();

  // The deadline, counted from the wall clock once, enforced on the monotonic one.
  const timeoutTimer =
    spec.deadline != null
      ? clock.setTimeout(() => {
          if (leaderExited || stopReason !== null) return;
          timedOut = true;
          terminateGroup();
        }, msLeft(spec.deadline, clock))
      : null;

  const exited = new Promise<ExitInfo>((resolve) => {
    void launched.exit.then(({ code, signal, unknown }) => {
      leaderExited = true;
      if (timeoutTimer !== null) clock.clearTimeout(timeoutTimer);
      if (idleTimer !== null) clock.clearTimeout(idleTimer);
      // Whatever the leader left behind in its group goes with it; the pending SIGKILL is dropped
      // once the group is gone — and the end is reported only then (see leaderExited).
      const groupGone = terminator.leaderExited();
      const finish = () => {
        closeOutputs();
        const exitCode = code;
        const sig = signal ?? null;
        // A stop asked for by the sink counts only when it was acted on before the leader ended.
        const stopped = stopActed ? stopReason : null;
        resolve({
          exitCode,
          signal: sig,
          timedOut,
          cancelled: cancelled && !timedOut,
          stdout: masker ? masker.mask(stdoutTail.toString()) : stdoutTail.toString(),
          stderr: masker ? masker.mask(stderrTail.toString()) : stderrTail.toString(),
          stdoutBytes: stdoutTail.total,
          stderrBytes: stderrTail.total,
          durationMs: Math.max(0, Math.round(clock.monotonic() - startedMono)),
          // A member loops may not signal (EPERM: another user's) is said, not hidden behind "killed".
          error: withNote(
            unknown
              ? unknown
              : stopped
              ? `${stopped}${sig ? `; process killed by ${sig}` : exitCode !== null ? `; it then exited with code ${exitCode}` : ''}`
              : idle
              ? `no output for ${formatDuration(spec.idleTimeoutMs!)} (idle timeout)${sig ? `; process killed by ${sig}` : ''}`
              : notFoundHint(describeExit({ exitCode, signal: sig, timedOut, cancelled, cancelReason, timeoutMs: spec.deadline?.timeoutMs ?? null }), spec.shell && exitCode === 127, path),
            terminator.deniedNote(),
          ),
        });
      };
      // Streams normally close right after exit; a grandchild that escaped the group may keep
      // them open, so wait at most the grace period (plus a beat) and then stop reading.
      void Promise.all([launched.streamsClosed(grace + 500).catch(() => undefined), groupGone]).then(finish);
    });
  });

  return {
    pid,
    pgid: pid,
    startTime,
    bootId: bootId(),
    env: envNames,
    cwd: startDir(spec.cwd),
    cancel(reason) {
      if (leaderExited || cancelled) return;
      cancelled = true;
      cancelReason = reason ?? null;
      terminateGroup();
    },
    exited,
  };
}

/**
 * The running process of a run (or step attempt) whose pid went unrecorded, found by its status
 * file: the one the spawner helper recorded as started there, or the exit-status wrapper whose argv
 * names it (runs started inline, or by an older loops). Null when neither runs.
 */
export function findRunProcess(statusFile: string): ProcessIdentity | null {
  const started = readStartedStatus(statusFile);
  if (started !== null && started.startTime !== null) {
    const startTime = processStartTime(started.pid);
    if (startTime === started.startTime && processGroup(started.pid) === started.pid) {
      const id = identityNow(started.pid, startTime);
      if (processRunning(id)) return id;
    }
  }
  return findWrapperProcess(statusFile, WRAPPER_NAME);
}

/** The process of a spawn the helper never answered, if it was started after all. */
function unansweredSpawn(statusFile: string): Spawned | null {
  const running = findRunProcess(statusFile);
  if (running) {
    return { pid: running.pid, startTime: running.startTime, exit: whenGone(running).then(() => ({ code: null, signal: null, lost: true })) };
  }
  const status = readStatusFile(statusFile);
  if (status?.pid) return { pid: status.pid, startTime: null, exit: Promise.resolve({ code: null, signal: null, lost: true }) };
  return null;
}

/** A started process, however it was started. */
interface Launched {
  pid: number;
  startTime: string | null;
  /** The leader's exit (code or signal). */
  exit: Promise<{ code: number | null; signal: string | null; unknown?: string }>;
  /** Resolves when piped streams closed, at most `limitMs` after being asked (at once for files). */
  streamsClosed(limitMs: number): Promise<void>;
}

async function launchWithExeca(
  spec: SpawnSpec,
  file: string,
  args: string[],
  shell: boolean,
  inherited: Record<string, string> | null,
  env: Record<string, string>,
  stdoutOut: OutputFile | null,
  stderrOut: OutputFile | null,
  path: string,
  clock: Clock,
  onPiped: (stream: 'stdout' | 'stderr', chunk: Buffer) => void,
): Promise<Launched> {
  const subprocess = execa(file, args, {
    shell,
    cwd: spec.cwd ?? undefined,
    env,
    // With variables to drop, the environment is built here from a filtered copy of ours.
    extendEnv: inherited === null,
    ...(spec.stdin !== undefined ? { input: spec.stdin } : { stdin: 'ignore' as const }),
    // A file descriptor when the stream goes to a file (then subprocess.stdout is null); the cast
    // keeps execa's overloads simple — the stream handlers below are optional-chained.
    stdout: (stdoutOut ? stdoutOut.writeFd : 'pipe') as 'pipe',
    stderr: (stderrOut ? stderrOut.writeFd : 'pipe') as 'pipe',
    buffer: false,
    reject: false,
    detached: true,
    cleanup: false,
    windowsHide: true,
  });
  // The child has its own copies of the descriptors now.
  stdoutOut?.releaseWriter();
  stderrOut?.releaseWriter();
  if (subprocess.pid === undefined) {
    const result = await subprocess;
    const code = (result as { code?: string }).code ?? null;
    const cause = (result as { cause?: { message?: string } }).cause?.message ?? result.shortMessage ?? 'spawn failed';
    throw new SpawnFailedError(explainSpawnError(spec, code, cause, path), code);
  }
  const pid = subprocess.pid;
  const startTime = processStartTime(pid);
  subprocess.stdout?.on('data', (chunk: Buffer) => onPiped('stdout', chunk));
  subprocess.stderr?.on('data', (chunk: Buffer) => onPiped('stderr', chunk));
  const exit = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    subprocess.once('exit', (code, signal) => resolve({ code, signal: signal ?? null })),
  );
  // With reject:false the promise never rejects; it is awaited only to release execa's resources.
  subprocess.then(
    () => undefined,
    () => undefined,
  );
  return { pid, startTime, exit, streamsClosed: (limitMs) => waitForStreams(subprocess, clock, limitMs) };
}

async function launchViaSpawner(
  spawner: Spawner,
  spec: SpawnSpec,
  file: string,
  args: string[],
  env: Record<string, string>,
  dirs: string[],
  path: string,
): Promise<Launched> {
  let spawned: Spawned;
  try {
    // The helper makes the run's directories, opens the files itself (O_APPEND), builds the
    // environment from its own plus what changed here, and checks the cwd and the executable
    // before it forks.
    spawned = await spawner.spawn({
      file,
      args,
      cwd: spec.cwd,
      env,
      ...(spec.unsetEnv?.length ? { unset: [...spec.unsetEnv] } : {}),
      ...(spec.statusFile && !spec.shell ? { check: spec.command } : {}),
      ...(spec.stdin !== undefined ? { stdin: spec.stdin } : {}),
      dirs,
      stdout: spec.stdoutFile!,
      stderr: spec.stderrFile!,
      ...(spec.statusFile ? { status: spec.statusFile } : {}),
    });
  } catch (error) {
    const code = error instanceof SpawnerError ? error.code : null;
    // The helper died before it answered, maybe right after the fork: the process is then found
    // by what its status file says (started, or already ended) and followed like one the helper
    // lost — never reported as not started while it runs.
    const found = code === 'EHELPERGONE' && spec.statusFile ? unansweredSpawn(spec.statusFile) : null;
    if (!found) throw new SpawnFailedError(explainSpawnError(spec, code, (error as Error).message, path), code);
    spawned = found;
  }
  const statusFile = spec.statusFile;
  const exit = spawned.exit.then((e) => {
    if (!e.lost) return { code: e.code, signal: e.signal };
    // The helper died while the process ran: the helper reaps its processes and writes their
    // status files, so the outcome is unknown unless it wrote it before it died.
    const status = statusFile ? readStatusFile(statusFile) : null;
    if (status) return { code: status.exitCode, signal: status.signal };
    return { code: null, signal: null, unknown: 'it ended while the spawner helper process, which reaps it, was gone: its exit status is unknown' };
  });
  return { pid: spawned.pid, startTime: spawned.startTime, exit, streamsClosed: () => Promise.resolve() };
}

function waitForStreams(
  subprocess: { stdout: NodeJS.ReadableStream | null; stderr: NodeJS.ReadableStream | null },
  clock: Clock,
  limitMs: number,
): Promise<void> {
  const streams = [subprocess.stdout, subprocess.stderr].filter(
    (s): s is NodeJS.ReadableStream & { readableEnded?: boolean; destroyed?: boolean; destroy?: () => void } => s !== null,
  );
  const pending = streams.filter((s) => !s.readableEnded && !s.destroyed);
  if (pending.length === 0) return Promise.resolve();
  return new Promise((resolve) => {
    let left = pending.length;
    const timer = clock.setTimeout(() => {
      for (const s of pending) s.destroy?.();
      resolve();
    }, limitMs);
    for (const s of pending) {
      const done = () => {
        left -= 1;
        if (left === 0) {
          clock.clearTimeout(timer);
          resolve();
        }
      };
      s.once('close', done);
    }
  });
}

function describeExit(x: {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  cancelled: boolean;
  cancelReason: string | null;
  timeoutMs: number | null;
}): string | null {
  if (x.timedOut) {
    return `timed out after ${formatDuration(x.timeoutMs ?? 0)}${x.signal ? `; process killed by ${x.signal}` : ''}`;
  }
  if (x.cancelled) return x.cancelReason ? `cancelled: ${x.cancelReason}` : 'cancelled';
  if (x.signal) return `killed by signal ${x.signal}`;
  if (x.exitCode !== null && x.exitCode !== 0) return `exited with code ${x.exitCode}`;
  return null;
}

function withNote(error: string | null, note: string | null): string | null {
  return note === null ? error : error === null ? note : `${error}; ${note}`;
}

/** A shell's exit 127 is its "command not found": say so, with the PATH it searched. */
function notFoundHint(error: string | null, shell127: boolean, path: string): string | null {
  return shell127 && error !== null ? `${error} (the shell's "command not found"; searched PATH=${path})` : error;
}

/**
 * The directory a process started in: its `cwd` (relative: from this runner's), or the runner's
 * own without one — absolute, symlinks resolved, as the process's getcwd() reports it (which
 * checkout a `current` symlink pointed at when it started). Unresolvable (removed since): as given.
 */
function startDir(cwd: string | null): string {
  const dir = resolve(process.cwd(), cwd ?? '.');
  try {
    // The C library's realpath: one call, where node's own walks the path with an lstat per part in JS.
    return realpathSync.native(dir);
  } catch {
    return dir;
  }
}

function explainSpawnError(spec: SpawnSpec, code: string | null, cause: string, path: string): string {
  if (code === 'ENOENT') {
    // Node reports a missing cwd as `spawn <command> ENOENT`, exactly like a missing command.
    return spec.cwd && !existsSync(spec.cwd)
      ? `working directory ${spec.cwd} does not exist`
      : `command not found: ${spec.command} (searched PATH=${path})`;
  }
  if (code === 'EACCES') return `permission denied: ${spec.command} is not executable`;
  return `could not start ${spec.command}: ${cause}`;
}


