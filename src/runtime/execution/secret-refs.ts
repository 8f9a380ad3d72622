/**
 * Secrets a run reads when its process starts — from a file (`--secret-file NAME=PATH`) or from
 * what a command prints (`--secret-cmd NAME='pass show x'`). The loop records only the reference
 * (`SecretRef`: the name and where the value is); the value is read on the runner that starts the
 * process, given to it as the variable NAME, and masked in its output like every secret.
 *
 * Here: the checks when a loop is defined (`buildSecretRefs`), and the resolution when a process
 * starts (`resolveSecretRefs`), or — best effort, to mask output — when a run's output is read
 * after its runner is gone (`resolveForMasking`).
 */
import { spawn, spawnSync } from 'node:child_process';
import { accessSync, closeSync, constants, existsSync, fstatSync, openSync, readSync, realpathSync, statSync } from 'node:fs';
import { isAbsolute, resolve, sep } from 'node:path';
import type { SecretRef } from '../../events/catalog.js';
import { ValidationError } from '../../events/errors.js';
import { secretByConvention } from '../../events/secret-names.js';
import type { Clock } from '../clock.js';
import { extendPath } from './env.js';
import { checkCommand, effectivePath } from './preflight.js';

export type { SecretRef };

/** A `--secret-cmd` that has not finished after this long fails the attempt (its process group is killed). */
export const SECRET_CMD_TIMEOUT_MS = 30_000;
/** A secret larger than this is refused (a file or a command's output): it is not a secret but a mistake. */
export const MAX_SECRET_BYTES = 1024 * 1024;

const ENV_KEY_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The value without one trailing line end (`\n` or `\r\n`), as a file or `pass show` ends it. */
export function stripNewline(value: string): string {
  if (value.endsWith('\r\n')) return value.slice(0, -2);
  if (value.endsWith('\n')) return value.slice(0, -1);
  return value;
}

// ── when a loop is defined ────────────────────────────────────────────────────────────────────

export interface SecretRefInput {
  /** `--secret-file NAME=PATH`: a relative path is read against `baseDir`, once, and stored absolute. */
  secretFiles?: ReadonlyArray<{ name: string; path: string }>;
  /** `--secret-cmd NAME=COMMAND`: stored as written. */
  secretCmds?: ReadonlyArray<{ name: string; command: string }>;
}

export interface SecretRefContext {
  /** Where a relative path is read from (the CLI's working directory). */
  baseDir: string;
  /** The data directory: no secret file may be in it. */
  dataDir?: string;
  /** The loop's working directory, where a command runs (null: the runner's). */
  cwd: string | null;
  /** The loop's stored (non-secret) environment, which a command also gets. */
  env: Record<string, string>;
  /** Check now that each file can be read and each command's executable is found (default true). */
  preflight: boolean;
  /** Names already given by another flag (`--env`, `--secret-env`), with that flag. */
  taken: ReadonlyMap<string, string>;
}

const NO_PREFLIGHT = 'or pass --no-preflight to create the loop anyway (e.g. the file is put in place before the first run, or only the daemon can read it)';

/**
 * The references of a loop's `--secret-file` and `--secret-cmd` flags, each checked before anything
 * is recorded: a valid variable name given once across every flag; a file outside the data
 * directory (a relative path must name a file that exists; with preflight, any file must be a
 * readable regular file); a command that does not hold a secret itself — an assignment whose name
 * says secret (`TOKEN=… cmd`) or an `echo`/`printf` of literal text would store the value in the log,
 * in clear — and, with preflight, whose executable is found on the effective PATH of runs.
 */
export function buildSecretRefs(input: SecretRefInput, ctx: SecretRefContext): SecretRef[] {
  const refs: SecretRef[] = [];
  const taken = new Map(ctx.taken);
  const claim = (flag: string, name: string) => {
    if (!ENV_KEY_RE.test(name)) {
      throw new ValidationError(`${flag}: invalid variable name ${JSON.stringify(name)}`, {
        hint: `give ${flag} NAME=${flag === '--secret-file' ? 'PATH' : 'COMMAND'}, with NAME made of letters, digits and _ (the variable the run reads)`,
      });
    }
    const other = taken.get(name);
    if (other !== undefined) {
      throw new ValidationError(`${flag} ${name}: ${name} is also given with ${other}`, { hint: `give each variable once: drop one of them` });
    }
    taken.set(name, flag);
  };
  for (const { name, path } of input.secretFiles ?? []) {
    claim('--secret-file', name);
    refs.push({ name, from: 'file', path: checkSecretFile(name, path, ctx) });
  }
  for (const { name, command } of input.secretCmds ?? []) {
    claim('--secret-cmd', name);
    checkSecretCommand(name, command, ctx);
    refs.push({ name, from: 'cmd', command });
  }
  return refs;
}

/** `path` resolved (`~` is the shell's business: it arrives expanded or not at all) and checked; the absolute path. */
function checkSecretFile(name: string, path: string, ctx: SecretRefContext): string {
  const flag = `--secret-file ${name}`;
  if (path.trim() === '') throw new ValidationError(`${flag}: the path is empty`, { hint: `e.g. --secret-file ${name}=$HOME/.config/loops/${name.toLowerCase()}` });
  if (path.includes('\0')) throw new ValidationError(`${flag}: the path contains a NUL byte (\\0), which no path can hold`, { hint: 'remove it' });
  const relative = !isAbsolute(path);
  const file = resolve(ctx.baseDir, path);
  if (ctx.dataDir !== undefined && insideDir(file, ctx.dataDir)) {
    throw new ValidationError(`${flag}: ${file} is inside the data directory ${ctx.dataDir}, where a secret must not live (it is copied by loops backup and read by anyone given the directory)`, {
      hint: `move the file out of it, e.g. to ~/.config/loops/secrets/ (mode 0600), and give that path`,
    });
  }
  if (!existsSync(file)) {
    if (relative) {
      throw new ValidationError(`${flag}: ${JSON.stringify(path)} does not resolve: there is no file ${file} (relative to ${ctx.baseDir})`, {
        hint: 'give the path of an existing file (an absolute path when the file is put in place later, with --no-preflight)',
      });
    }
    if (ctx.preflight) throw new ValidationError(`${flag}: there is no file ${file}`, { hint: `create it (mode 0600), ${NO_PREFLIGHT}` });
    return file;
  }
  if (ctx.dataDir !== undefined && existsSync(ctx.dataDir) && insideDir(realpathSync(file), realpathSync(ctx.dataDir))) {
    throw new ValidationError(`${flag}: ${file} leads into the data directory ${ctx.dataDir} (through a link), where a secret must not live`, {
      hint: 'move the file out of it, e.g. to ~/.config/loops/secrets/ (mode 0600), and give that path',
    });
  }
  const stat = statSync(file);
  if (!stat.isFile()) throw new ValidationError(`${flag}: ${file} is not a regular file`, { hint: 'give the path of a file holding the value (one line)' });
  if (ctx.preflight) {
    try {
      accessSync(file, constants.R_OK);
    } catch (error) {
      throw new ValidationError(`${flag}: ${file} cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`, { hint: `make it readable by the user loops runs as, ${NO_PREFLIGHT}` });
    }
    if (stat.size > MAX_SECRET_BYTES) throw new ValidationError(`${flag}: ${file} holds ${stat.size} bytes, more than a secret (at most ${MAX_SECRET_BYTES})`, { hint: 'give a file holding only the value' });
  }
  return file;
}

function isDirectory(dir: string): boolean {
  try {
    return statSync(dir).isDirectory();
  } catch {
    return false;
  }
}

/** Whether `file` is `dir` or inside it (paths compared as given: resolve them first). */
function insideDir(file: string, dir: string): boolean {
  const d = resolve(dir);
  const f = resolve(file);
  return f === d || f.startsWith(d.endsWith(sep) ? d : d + sep);
}

/** Shell assignments (`NAME=value` before or inside the command line), their value unquoted. */
const ASSIGNMENT = /(?:^|[\s;&|(`])(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=('([^']*)'|"([^"]*)"|([^\s;&|)]*))/g;

function checkSecretCommand(name: string, command: string, ctx: SecretRefContext): void {
  const flag = `--secret-cmd ${name}`;
  if (command.trim() === '') throw new ValidationError(`${flag}: the command is empty`, { hint: `e.g. --secret-cmd ${name}='pass show ${name.toLowerCase()}'` });
  if (command.includes('\0')) throw new ValidationError(`${flag}: the command contains a NUL byte (\\0), which no command line can hold`, { hint: 'remove it' });
  // The command is stored as written: it must say where the value is, not hold it.
  for (const m of command.matchAll(ASSIGNMENT)) {
    const value = m[3] ?? m[4] ?? m[5] ?? '';
    if (secretByConvention(m[1]!, value) && !/[$`]/.test(value)) {
      throw new ValidationError(`${flag}: the command sets ${m[1]} to a value, and the command is stored with the loop, in clear`, {
        hint: `keep the value where the command reads it (a password store, a file, the daemon's environment), not in the command line`,
      });
    }
  }
  const literal = /^\s*(echo|printf)\s+(.*)$/s.exec(command);
  if (literal && !/[$`<|;&]/.test(literal[2]!)) {
    throw new ValidationError(`${flag}: the command prints literal text: that text is the secret, and the command is stored with the loop, in clear`, {
      hint: `put the value in a file outside the data directory and pass --secret-file ${name}=PATH, or export it where loops daemon runs and pass --secret-env ${name}`,
    });
  }
  if (!ctx.preflight) return;
  const problem = checkCommand({ command, shell: true, cwd: ctx.cwd }, effectivePath(ctx.env), ctx.baseDir);
  if (problem !== null) throw new ValidationError(`${flag}: ${problem.message}`, { hint: `${problem.hint}, or pass --no-preflight to create the loop anyway` });
}

/**
 * What the user may want to hear about a loop's secret files once it is defined: one that others
 * than its owner can read (group or world permission bits). A warning, not a refusal: the file's
 * permissions are the user's (a container's mounted secrets are often 0644 in a one-user
 * filesystem), and loops never widens them; but a secret others can read is worth knowing about.
 */
export function secretFileWarnings(refs: readonly SecretRef[] | undefined): string[] {
  const warnings: string[] = [];
  for (const ref of refs ?? []) {
    if (ref.from !== 'file') continue;
    let mode: number;
    try {
      mode = statSync(ref.path).mode;
    } catch {
      continue;
    }
    if ((mode & 0o044) === 0) continue;
    const who = mode & 0o004 ? 'every user' : 'its group';
    warnings.push(`--secret-file ${ref.name}: ${ref.path} can be read by ${who} (mode ${(mode & 0o777).toString(8).padStart(4, '0')}); chmod 600 ${ref.path} keeps it to you`);
  }
  return warnings;
}

// ── when a process starts ─────────────────────────────────────────────────────────────────────

export type ResolvedSecrets = { ok: true; values: Record<string, string> } | { ok: false; error: string; code: string };

export interface ResolveOptions {
  /** The loop's working directory (a command runs there; null: the runner's). */
  cwd: string | null;
  /** The loop's stored environment (a command gets it, over the runner's). */
  env: Record<string, string>;
  clock: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
  timeoutMs?: number;
}

type One = { ok: true; value: string } | { ok: false; error: string; code: string };

/**
 * The value of every reference, read now on this runner, or why one cannot be read — naming the
 * variable and the file or command, never a value (the reason is recorded as the attempt's spawn
 * failure). Files are read first, then the commands run, one after another.
 */
export async function resolveSecretRefs(refs: readonly SecretRef[], options: ResolveOptions): Promise<ResolvedSecrets> {
  const values: Record<string, string> = {};
  for (const ref of refs) {
    const one = ref.from === 'file' ? readSecretFile(ref) : await runSecretCommand(ref, options);
    if (!one.ok) return one;
    values[ref.name] = one.value;
  }
  return { ok: true, values };
}

/**
 * The values that can be read now, to mask a run's output when its process is no longer watched
 * (a run adopted or finished after its runner stopped): what cannot be read is left out.
 */
export async function resolveForMasking(refs: readonly SecretRef[], options: ResolveOptions): Promise<string[]> {
  const out: string[] = [];
  for (const ref of refs) {
    const one = ref.from === 'file' ? readSecretFile(ref) : await runSecretCommand(ref, options);
    if (one.ok) out.push(one.value);
  }
  return out;
}

/** `resolveForMasking` without waiting on the event loop, for a command-line reader (`loops logs`). */
export function resolveForMaskingSync(refs: readonly SecretRef[], options: Omit<ResolveOptions, 'clock'>): string[] {
  const out: string[] = [];
  for (const ref of refs) {
    if (ref.from === 'file') {
      const one = readSecretFile(ref);
      if (one.ok) out.push(one.value);
      continue;
    }
    const r = spawnSync('/bin/sh', ['-c', ref.command], {
      cwd: options.cwd ?? undefined,
      env: commandEnv(options.env),
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: options.timeoutMs ?? SECRET_CMD_TIMEOUT_MS,
      killSignal: 'SIGKILL',
      maxBuffer: MAX_SECRET_BYTES,
    });
    if (r.status === 0 && r.stdout) out.push(stripNewline(r.stdout.toString('utf8')));
  }
  return out;
}

function fileFailure(ref: { name: string; path: string }, what: string, code: string): One {
  return { ok: false, error: `secret ${ref.name}: its file ${ref.path} ${what}`, code };
}

/** A secret file's value: a regular file (opened without blocking: a FIFO never hangs a runner), at most MAX_SECRET_BYTES. */
export function readSecretFile(ref: { name: string; path: string }): One {
  let fd: number;
  try {
    fd = openSync(ref.path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'EIO';
    const what = code === 'ENOENT' ? 'does not exist' : code === 'EACCES' || code === 'EPERM' ? 'cannot be read (permission denied)' : `cannot be opened (${code})`;
    return fileFailure(ref, `${what} on this runner`, code);
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return fileFailure(ref, 'is not a regular file', 'EINVAL');
    if (stat.size > MAX_SECRET_BYTES) return fileFailure(ref, `holds ${stat.size} bytes, more than a secret (at most ${MAX_SECRET_BYTES})`, 'EFBIG');
    const buf = Buffer.alloc(stat.size + 1);
    let length = 0;
    for (;;) {
      const n = readSync(fd, buf, length, buf.length - length, null);
      if (n === 0) break;
      length += n;
      if (length === buf.length) return fileFailure(ref, `grew past ${stat.size} bytes while it was read`, 'EFBIG');
    }
    const value = stripNewline(buf.subarray(0, length).toString('utf8'));
    if (value === '') return fileFailure(ref, 'is empty', 'ENODATA');
    return { ok: true, value };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'EIO';
    return fileFailure(ref, `cannot be read (${code})`, code);
  } finally {
    closeSync(fd);
  }
}

/** The environment a secret command runs in: the runner's, the loop's stored variables over it, PATH extended as for runs. */
function commandEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  return { ...process.env, ...env, PATH: extendPath(env.PATH ?? process.env.PATH) };
}

/**
 * Runs a `--secret-cmd` with /bin/sh in its own process group, stdin closed: its stdout (one
 * trailing line end stripped) is the value. A non-zero exit, a signal, no output, more than
 * MAX_SECRET_BYTES or no end within the timeout (the group is then killed) is a failure naming the
 * variable and the exit code. Its stderr is read and dropped: it may hold the value, or part of it.
 */
export function runSecretCommand(ref: { name: string; command: string }, options: ResolveOptions): Promise<One> {
  const timeoutMs = options.timeoutMs ?? SECRET_CMD_TIMEOUT_MS;
  const fail = (what: string, code: string): One => ({ ok: false, error: `secret ${ref.name}: its command ${what} (its output is not recorded; run it yourself to see why)`, code });
  if (options.cwd !== null && !isDirectory(options.cwd)) return Promise.resolve(fail(`could not start: its working directory ${options.cwd} does not exist`, 'ENOENT'));
  return new Promise<One>((done) => {
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn('/bin/sh', ['-c', ref.command], {
        cwd: options.cwd ?? undefined,
        env: commandEnv(options.env),
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      });
    } catch (error) {
      done(fail(`could not start (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`, 'ESECRETCMD'));
      return;
    }
    const chunks: Buffer[] = [];
    let bytes = 0;
    let stopped: One | null = null;
    const kill = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    };
    const timer = options.clock.setTimeout(() => {
      stopped ??= fail(`did not finish within ${Math.round(timeoutMs / 1000)} s and was killed`, 'ETIMEDOUT');
      kill();
    }, timeoutMs);
    child.stdout!.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > MAX_SECRET_BYTES) {
        stopped ??= fail(`printed more than ${MAX_SECRET_BYTES} bytes, more than a secret, and was killed`, 'EFBIG');
        kill();
        return;
      }
      chunks.push(chunk);
    });
    child.stderr!.resume();
    child.once('error', (error: NodeJS.ErrnoException) => {
      options.clock.clearTimeout(timer);
      done(stopped ?? fail(`could not start (${error.code ?? error.message})`, 'ESECRETCMD'));
    });
    child.once('close', (code, signal) => {
      options.clock.clearTimeout(timer);
      if (stopped) return done(stopped);
      if (signal !== null) return done(fail(`was killed by ${signal}`, 'ESECRETCMD'));
      if (code !== 0) return done(fail(`exited with code ${code}`, 'ESECRETCMD'));
      const value = stripNewline(Buffer.concat(chunks).toString('utf8'));
      if (value === '') return done(fail('exited with code 0 but printed nothing', 'ENODATA'));
      done({ ok: true, value });
    });
  });
}
