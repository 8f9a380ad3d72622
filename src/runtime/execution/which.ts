/**
 * Where a command's executable is: a path as is, a bare name looked up on PATH. Only node builtins,
 * so the spawner helper can use it.
 */
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join, resolve as resolvePath } from 'node:path';

/**
 * The executable `command` would run, or null: a path is checked as is, a name on PATH. A PATH
 * directory's entry is looked at with a stat that does not throw when it is missing — a usual PATH
 * lacks the command in most of its directories (`true` is in the 8th), and an exception per
 * directory costs ~10-20 µs — and only an entry that exists is checked: a file, executable by us.
 */
export function resolveExecutable(command: string, path: string | undefined, cwd: string | null): string | null {
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
