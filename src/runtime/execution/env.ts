/**
 * The environment a run starts with. A daemon started by systemd or launchd gets a minimal PATH
 * (/usr/bin:/bin), so the agent CLIs a user installed with npm, pnpm, bun, cargo or Homebrew are
 * not found there although they are in the user's shell. Every run's PATH is therefore the
 * inherited one extended — after it, so the user's own order wins — with the usual user bin
 * directories that exist, and always ends with the system baseline `/usr/bin:/bin:/usr/sbin:/sbin`
 * (as the predecessor's runs did): a daemon started with an empty environment (`env -i`, PATH
 * unset) still finds `ls`.
 *
 * What a process's environment was is recorded with its spawn, as names ({@link spawnEnvNames}).
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import type { SpawnEnv } from '../../events/catalog.js';

/** The user bin directories a run's PATH is extended with (those that exist), in this order. */
export function userBinDirs(env: Record<string, string | undefined> = process.env, home = homedir()): string[] {
  return [
    join(home, '.local', 'bin'),
    join(home, 'bin'),
    join(home, '.bun', 'bin'),
    ...(env.BUN_INSTALL ? [join(env.BUN_INSTALL, 'bin')] : []),
    join(home, '.cargo', 'bin'),
    join(home, '.deno', 'bin'),
    join(home, '.volta', 'bin'),
    env.PNPM_HOME ?? join(home, '.local', 'share', 'pnpm'),
    join(home, 'Library', 'pnpm'),
    env.NPM_CONFIG_PREFIX ? join(env.NPM_CONFIG_PREFIX, 'bin') : join(home, '.npm-global', 'bin'),
    '/usr/local/bin',
    '/opt/homebrew/bin',
  ];
}

/** The system directories every run's PATH ends with, whether or not the inherited PATH named them. */
export const SYSTEM_PATH_DIRS: readonly string[] = ['/usr/bin', '/bin', '/usr/sbin', '/sbin'];

/**
 * `path` followed by the user bin directories that exist and are not in it yet, then the system
 * baseline ({@link SYSTEM_PATH_DIRS}) where it is missing. The home directory is `$HOME` when
 * set, else the account's (`os.homedir()` reads the password database when HOME is unset).
 */
export function extendPath(path: string | undefined, env: Record<string, string | undefined> = process.env, home = env.HOME || homedir()): string {
  const parts = (path ?? '').split(delimiter).filter((p) => p !== '');
  const seen = new Set(parts);
  for (const dir of userBinDirs(env, home)) {
    if (!seen.has(dir) && existsSync(dir)) {
      parts.push(dir);
      seen.add(dir);
    }
  }
  for (const dir of SYSTEM_PATH_DIRS) {
    if (!seen.has(dir)) {
      parts.push(dir);
      seen.add(dir);
    }
  }
  return parts.join(delimiter);
}

let envThisTurn: Readonly<Record<string, string>> | null = null;
/** The sorted names of each `runnerEnv()` read (never changed once made), for `spawnEnvNames`. */
const sortedNames = new WeakMap<object, readonly string[]>();

/**
 * This process's environment as a plain object, read from `process.env` once per turn of the event
 * loop. Every property read of `process.env` is a call into the C environment (~0.5–1 µs each); a
 * run's start read all of it three times over — the helper's drift, the names recorded with the
 * spawn, the secret scan — which was ~5 % of a daemon's CPU in a burst. Runs that start in the same
 * turn share one read; a change made to `process.env` is seen by runs started from the next turn.
 */
export function runnerEnv(): Readonly<Record<string, string>> {
  if (envThisTurn !== null) return envThisTurn;
  const copy: Record<string, string> = {};
  const env = process.env;
  for (const name in env) {
    const value = env[name];
    if (value !== undefined) copy[name] = value;
  }
  envThisTurn = copy;
  sortedNames.set(copy, sort(Object.keys(copy)));
  setImmediate(() => {
    envThisTurn = null;
  }).unref();
  return copy;
}

let runnerPathMemo: { key: string; at: number; value: string } | null = null;

/** How long {@link runnerPath} trusts what it found of the user bin directories. */
export const RUNNER_PATH_TTL_MS = 1000;

/**
 * `extendPath(path)` for a process started now from this runner's environment, as the executor
 * needs it for every run: the same value, but the user bin directories are looked at (~10 stats,
 * ~75 µs) at most once a second for the same PATH and HOME — a directory created since (a CLI just
 * installed) is on the PATH of the runs that start a second later at the latest.
 */
export function runnerPath(path: string | undefined): string {
  const env = runnerEnv();
  const key = `${path ?? ''}\0${env.HOME ?? ''}\0${env.BUN_INSTALL ?? ''}\0${env.PNPM_HOME ?? ''}\0${env.NPM_CONFIG_PREFIX ?? ''}`;
  const now = performance.now();
  const memo = runnerPathMemo;
  if (memo !== null && memo.key === key && now - memo.at < RUNNER_PATH_TTL_MS) return memo.value;
  const value = extendPath(path, env);
  runnerPathMemo = { key, at: now, value };
  return value;
}

function sort(names: string[]): string[] {
  return names.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * The names of the environment a process starts with — what is recorded with its spawn
 * (`process.spawned`, `step.spawned`): its environment is the runner's (`runner`) without
 * `unset`, then `applied` on top (PATH included), so every variable it has is either one loops
 * applied (`set`, or `secret` when `secretNames` has it) or one it `inherited`; `removed` are the
 * runner's variables `unset` dropped and nothing put back. Names only, sorted: no value is ever
 * returned, so none can reach the log.
 */
export function spawnEnvNames(
  runner: Record<string, string | undefined>,
  applied: Record<string, string>,
  unset: ReadonlySet<string>,
  secretNames: Iterable<string> = [],
): SpawnEnv {
  const secrets = new Set(secretNames);
  const set: string[] = [];
  const secret: string[] = [];
  for (const name of Object.keys(applied)) (secrets.has(name) ? secret : set).push(name);
  const inherited: string[] = [];
  const removed: string[] = [];
  // A runnerEnv() read comes with its names sorted (once per turn, shared by the runs of a burst).
  const names = sortedNames.get(runner) ?? sort(Object.keys(runner).filter((name) => runner[name] !== undefined));
  for (const name of names) {
    if (name in applied) continue;
    (unset.has(name) ? removed : inherited).push(name);
  }
  return { set: sort(set), removed, secret: sort(secret), inherited };
}
