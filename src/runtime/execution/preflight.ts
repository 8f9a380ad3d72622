/**
 * Preflight of a command: will it start here? Shared by `loops create command` (which refuses a
 * loop whose command cannot start, unless `--no-preflight`), `loops doctor` (active loops) and
 * `loops workflows validate --preflight` (command steps).
 *
 * An argv command (`--no-shell`) must resolve on the effective PATH (or, with a `/`, relative to the
 * working directory). A shell command needs /bin/sh and, when the first word of its command line
 * can be known without running anything ({@link commandWord}), that word must resolve too — so
 * `restic backup ~/src` is refused when restic is not installed, while `cd app && make`,
 * `$TOOL run` or `if …; then …; fi` only need the shell. Only the first simple command of the line
 * is looked at: `make && ./deploy` checks make, not ./deploy (make may create it).
 *
 * Pure apart from looking at the file system (resolveExecutable, stat).
 */
import { statSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, resolve } from 'node:path';
import { extendPath } from './env.js';
import { resolveExecutable } from './which.js';

/** Shell keywords and builtins (POSIX sh, dash and bash): a command line starting with one needs nothing but the shell. */
const SHELL_WORDS = new Set([
  // keywords
  'if', 'then', 'else', 'elif', 'fi', 'for', 'while', 'until', 'do', 'done', 'case', 'esac', 'in', 'select',
  'function', '{', '}', '!', '[[', ']]', 'time', 'coproc',
  // builtins
  'cd', 'export', 'set', 'unset', 'source', '.', 'exec', 'eval', 'test', '[', 'true', 'false', ':', 'echo',
  'printf', 'read', 'wait', 'trap', 'ulimit', 'umask', 'command', 'builtin', 'type', 'alias', 'unalias',
  'shift', 'return', 'exit', 'break', 'continue', 'readonly', 'local', 'let', 'getopts', 'hash', 'jobs',
  'fg', 'bg', 'kill', 'pwd', 'times', 'declare', 'typeset', 'shopt', 'pushd', 'popd', 'dirs', 'disown',
  'suspend', 'logout', 'enable', 'help', 'history', 'mapfile', 'readarray', 'compgen', 'complete',
]);

const NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Characters that end a word (besides blanks). */
const OPERATORS = ';&|()<>\n';

interface Word {
  /** The word after quote removal. */
  value: string;
  /** Contains an expansion (`$…`, backquotes) outside single quotes: known only when it runs. */
  dynamic: boolean;
  /** Contains an unquoted glob character (`*`, `?`, `[`). */
  glob: boolean;
  /** Starts with an unquoted `~` or `{` (tilde or brace expansion, a group). */
  expands: boolean;
  /** The variable a leading unquoted `NAME=` assigns, or null. */
  assigns: string | null;
}

interface Parsed {
  words: Word[];
  /** The operator the first simple command ended at (`;`, `&`, `|`, `(`, `)`, newline), or null at the end. */
  stop: string | null;
}

/** The words of the first simple command of a shell command line (redirections dropped), or null when it does not parse. */
function parseFirstCommand(text: string): Parsed | null {
  const words: Word[] = [];
  let i = 0;
  const n = text.length;
  const blank = (c: string | undefined) => c === ' ' || c === '\t';
  const skipBlanks = () => {
    for (;;) {
      if (blank(text[i])) i++;
      else if (text[i] === '\\' && text[i + 1] === '\n') i += 2;
      else return;
    }
  };
  /** Skips a balanced `$(…)` / `${…}` / `$((…))` starting at the `$`; false when unterminated. */
  const skipExpansion = (): boolean => {
    const open = text[i + 1]!;
    const close = open === '(' ? ')' : '}';
    let depth = 0;
    for (i += 1; i < n; i++) {
      if (text[i] === open) depth++;
      else if (text[i] === close && --depth === 0) {
        i++;
        return true;
      }
    }
    return false;
  };
  const readWord = (): Word | null => {
    const start = i;
    const word: Word = { value: '', dynamic: false, glob: false, expands: text[i] === '~' || text[i] === '{', assigns: null };
    while (i < n && !blank(text[i]) && !OPERATORS.includes(text[i]!)) {
      const c = text[i]!;
      if (c === "'") {
        const end = text.indexOf("'", i + 1);
        if (end < 0) return null;
        word.value += text.slice(i + 1, end);
        i = end + 1;
      } else if (c === '"') {
        i++;
        for (;;) {
          if (i >= n) return null;
          const d = text[i]!;
          if (d === '"') break;
          if (d === '\\' && i + 1 < n && '$`"\\\n'.includes(text[i + 1]!)) {
            if (text[i + 1] !== '\n') word.value += text[i + 1];
            i += 2;
            continue;
          }
          if (d === '$' || d === '`') word.dynamic = true;
          word.value += d;
          i++;
        }
        i++;
      } else if (c === '\\') {
        if (i + 1 >= n) return null;
        if (text[i + 1] !== '\n') word.value += text[i + 1];
        i += 2;
      } else if (c === '$' && (text[i + 1] === '(' || text[i + 1] === '{')) {
        word.dynamic = true;
        if (!skipExpansion()) return null;
      } else if (c === '`') {
        word.dynamic = true;
        const end = text.indexOf('`', i + 1);
        if (end < 0) return null;
        i = end + 1;
      } else {
        if (c === '$') word.dynamic = true;
        if (c === '*' || c === '?' || c === '[') word.glob = true;
        if (c === '=' && word.assigns === null && NAME_RE.test(text.slice(start, i))) word.assigns = text.slice(start, i);
        word.value += c;
        i++;
      }
    }
    return word;
  };

  for (;;) {
    skipBlanks();
    if (i >= n) return { words, stop: null };
    const c = text[i]!;
    if (c === '#') return { words, stop: null };
    if (c === '<' || c === '>') {
      // A redirection: the operator, then its target word; neither is a command word.
      while (i < n && '<>&|'.includes(text[i]!)) i++;
      skipBlanks();
      if (i < n && !OPERATORS.includes(text[i]!) && readWord() === null) return null;
      continue;
    }
    if (OPERATORS.includes(c)) return { words, stop: c };
    const word = readWord();
    if (word === null) return null;
    // `2>file`: the digits are the redirected descriptor, not a word.
    if ((text[i] === '<' || text[i] === '>') && /^\d+$/.test(word.value) && !word.dynamic) continue;
    words.push(word);
  }
}

/** Moves past the leading `NAME=value` words from `index`; -1 when one assigns PATH (the lookup would change). */
function skipAssignments(words: Word[], index: number): number {
  let i = index;
  while (i < words.length && words[i]!.assigns !== null) {
    if (words[i]!.assigns === 'PATH') return -1;
    i++;
  }
  return i;
}

/**
 * The executables a shell command line starts, in order: the wrappers loops understands (`env`,
 * `nice`, `nohup`, `timeout <duration>`) and then the program they run — `['timeout', 'restic']` for
 * `timeout 5m restic backup`. `exec` and `command` are builtins and add nothing. Leading `NAME=value`
 * assignments and redirections are skipped. Null when the program cannot be known without running
 * the line: it is a shell keyword or builtin, contains an expansion (`$`, backquotes), a glob or a
 * tilde, starts a group or subshell (`{`, `(`), defines a function, assigns PATH, or uses an option
 * of a wrapper that is not understood.
 */
export function commandWords(text: string): string[] | null {
  const parsed = parseFirstCommand(text);
  if (parsed === null || parsed.stop === '(') return null;
  const { words } = parsed;
  const chain: string[] = [];
  let i = skipAssignments(words, 0);
  if (i < 0) return null;
  const option = () => i < words.length && words[i]!.value.startsWith('-');
  for (;;) {
    if (i >= words.length) return chain.length > 0 ? chain : null;
    const word = words[i]!;
    if (word.dynamic || word.glob || word.expands || word.value === '') return null;
    const value = word.value;
    switch (value) {
      case 'exec':
      case 'command':
        i++;
        if (option() || i >= words.length) return null;
        continue;
      case 'env':
        chain.push(value);
        i = skipAssignments(words, i + 1);
        if (i < 0 || option()) return null;
        continue;
      case 'nohup':
        chain.push(value);
        i++;
        if (option()) return null;
        continue;
      case 'nice':
        chain.push(value);
        i++;
        if (i < words.length && words[i]!.value === '-n') i += 2;
        else if (i < words.length && /^(-\d+|-n-?\d+|--adjustment=-?\d+)$/.test(words[i]!.value)) i++;
        if (option()) return null;
        continue;
      case 'timeout': {
        chain.push(value);
        i++;
        while (option()) {
          const opt = words[i]!.value;
          if (['--preserve-status', '--foreground', '-v', '--verbose'].includes(opt)) i++;
          else if (opt === '-s' || opt === '-k' || opt === '--signal' || opt === '--kill-after') i += 2;
          else if (/^(-[sk].+|--signal=.+|--kill-after=.+)$/.test(opt)) i++;
          else return null;
        }
        // The duration, then the program.
        if (i >= words.length || words[i]!.dynamic) return null;
        i++;
        if (i >= words.length) return null;
        continue;
      }
      default:
        if (SHELL_WORDS.has(value)) return null;
        chain.push(value);
        return chain;
    }
  }
}

/**
 * The program a shell command line runs first, when it can be known statically (see
 * {@link commandWords}): `restic` for `RESTIC_REPO=/x restic backup`, `./poll.sh` for
 * `./poll.sh --fast > log`, null for `cd app && make`, `$TOOL run` or `echo hi`.
 */
export function commandWord(text: string): string | null {
  const chain = commandWords(text);
  return chain === null ? null : chain[chain.length - 1]!;
}

/** The effective PATH of a run: the target's own PATH or the inherited one, plus the user bin directories (env.ts). */
export function effectivePath(targetEnv: Record<string, string> = {}, vars: Record<string, string | undefined> = process.env, home = homedir()): string {
  return extendPath(targetEnv.PATH ?? vars.PATH, vars, home);
}

export interface CommandCheckTarget {
  /** Shell text when `shell`, otherwise the executable. */
  command: string;
  args?: readonly string[];
  shell: boolean;
  /** The run's working directory (absolute), or null for the runner's. */
  cwd: string | null;
}

export interface CommandProblem {
  field: 'command';
  /** One line, e.g. `command not found: restic (searched PATH=/usr/bin:/bin)`. */
  message: string;
  /** How to fix it, without a trailing full stop (callers may add to it). */
  hint: string;
  /** The executable that was not found (`/bin/sh`, the first word, or the argv command). */
  executable: string;
}

function isDirectory(dir: string): boolean {
  try {
    return statSync(dir).isDirectory();
  } catch {
    return false;
  }
}

/** The executables a command target needs, in the order they are checked. */
export function commandExecutables(target: CommandCheckTarget): string[] {
  return target.shell ? ['/bin/sh', ...(commandWords(target.command) ?? [])] : [target.command];
}

/**
 * Whether a command target can start: null, or the first problem. `path` is the effective PATH
 * ({@link effectivePath}); a relative path (`./x`) is resolved against the target's cwd, or
 * `baseDir` without one. A cwd that does not exist is the caller's to report: relative paths are
 * then not checked.
 */
export function checkCommand(target: CommandCheckTarget, path: string, baseDir: string = process.cwd()): CommandProblem | null {
  const dir = target.cwd ?? baseDir;
  const dirOk = isDirectory(dir);
  for (const executable of commandExecutables(target)) {
    const relative = executable.includes('/') && !isAbsolute(executable);
    if (relative && !dirOk) continue;
    if (resolveExecutable(executable, path, dir) !== null) continue;
    return problemFor(executable, path, dir, target.shell && executable === '/bin/sh');
  }
  return null;
}

function problemFor(executable: string, path: string, dir: string, isShell: boolean): CommandProblem {
  if (isShell) {
    return {
      field: 'command',
      executable,
      message: 'the shell /bin/sh is missing: a shell command cannot start',
      hint: 'run the executable without a shell (--no-shell --cmd <exe> --arg …)',
    };
  }
  if (!executable.includes('/')) {
    return {
      field: 'command',
      executable,
      message: `command not found: ${executable} (searched PATH=${path})`,
      hint: `install ${executable}, or give its absolute path`,
    };
  }
  const file = isAbsolute(executable) ? executable : resolve(dir, executable);
  let exists = false;
  let isFile = false;
  try {
    const st = statSync(file);
    exists = true;
    isFile = st.isFile();
  } catch {
    // missing
  }
  const where = file === executable ? '' : ` (${file})`;
  if (exists && isFile) {
    return { field: 'command', executable, message: `${executable} is not executable${where}`, hint: `make it executable (chmod +x ${file})` };
  }
  if (exists) {
    return { field: 'command', executable, message: `${executable} is not a file${where}`, hint: 'give the path of an executable file' };
  }
  return { field: 'command', executable, message: `command not found: ${executable}${where ? ` (no file ${file})` : ''}`, hint: `check that ${file} exists and is executable` };
}
