/**
 * Where a command's executable is: a path as is, a bare name looked up on PATH. Only node builtins,
 * so the spawner helper can use it.
 */
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join, resolve as resolvePath } from 'node:path';

/** The executable `command` would run, or null: a path is checked as is, a name on PATH. */
export function resolveExecutable(command: string, path: string | undefined, cwd: string | null): string | null {
  const executable = (file: string) => {
    try {
      accessSync(file, constants.X_OK);
      return statSync(file).isFile();
    } catch {
      return false;
    }
  };
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
