/**
 * Where a command's executable is: a path as is, a bare name looked up on PATH. Only node builtins,
 * so the spawner helper can use it.
 */
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join, resolve as resolvePath } from 'node:path';

/** What `remember` lookups found: (command, PATH, cwd) → the file, and when it was looked at. */
const found = new Map<string, { file: string; at: number }>();
/** How long a found executable is trusted without looking again. */
const FOUND_TTL_MS = 1000;
/** More distinct lookups than this in a second start the memo afresh (it stays small). */
const FOUND_MAX = 256;

/**
 * The executable `command` would run, or null: a path is checked as is, a name on PATH. A PATH
 * directory's entry is looked at with a stat that does not throw when it is missing — a usual PATH
 * lacks the command in most of its directories (`true` is in the 8th), and an exception per
 * directory costs ~10-20 µs — and only an entry that exists is checked: a file, executable by us.
 * With `remember`, what was found is trusted for a second (what was not is looked for every time):
 * for the spawner helper, which forks the file itself right after, so a file removed within that
 * second fails the spawn with ENOENT as the lookup would have — and a burst of runs of one command
 * looks along PATH once, not once per run (8 `statx` for `true` on a usual PATH, ~0.2 ms on a slow VM).
 */
export function resolveExecutable(command: string, path: string | undefined, cwd: string | null, options: { remember?: boolean } = {}): string | null {
  if (options.remember) {
    const key = `${command}\0${path ?? ''}\0${cwd ?? ''}`;
    const now = performance.now();
    const known = found.get(key);
    if (known !== undefined && now - known.at < FOUND_TTL_MS) return known.file;
    const file = resolveExecutable(command, path, cwd);
    if (file === null) return null;
    if (found.size >= FOUND_MAX) found.clear();
    found.set(key, { file, at: now });
    return file;
  }
  if (command.includes('/')) {
    const file = isAbsolute(command) ? command : resolvePath(cwd ?? process.cwd(), command);
    return executable(file) ? file : null;
  }
  for (const dir of (path ?? '').split(delimiter)) {
    if (!dir) continue;
    const file = join(dir, command);
    if (executable(file)) return file;
  }
  return null;
}

function executable(file: string): boolean {
  try {
    if (statSync(file, { throwIfNoEntry: false })?.isFile() !== true) return false;
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false; // not executable by us; ENOTDIR, EACCES: not there for us
  }
}
