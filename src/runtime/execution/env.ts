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
  const env = process.env;
  const key = `${path ?? ''}\0${env.HOME ?? ''}\0${env.BUN_INSTALL ?? ''}\0${env.PNPM_HOME ?? ''}\0${env.NPM_CONFIG_PREFIX ?? ''}`;
  const now = performance.now();
  const memo = runnerPathMemo;
  if (memo !== null && memo.key === key && now - memo.at < RUNNER_PATH_TTL_MS) return memo.value;
  const value = extendPath(path, env);
  runnerPathMemo = { key, at: now, value };
  return value;
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
  // Names only: every variable of process.env has a value, and reading them all (a call into the
  // environment each) is most of what this cost; another record's undefined entries are skipped.
  const live = runner === process.env;
  for (const name of Object.keys(runner)) {
    if (name in applied || (!live && runner[name] === undefined)) continue;
    (unset.has(name) ? removed : inherited).push(name);
  }
  const sort = (names: string[]) => names.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return { set: sort(set), removed: sort(removed), secret: sort(secret), inherited: sort(inherited) };
}
