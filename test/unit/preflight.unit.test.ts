/** Preflight of a command (preflight.ts): the first word of a shell command line, and whether a command can start. */
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkCommand, commandWord, commandWords } from '../../src/runtime/execution/preflight.js';

describe('commandWord', () => {
  it.each<[string, string | null]>([
    // plain commands
    ['restic backup ~/src', 'restic'],
    ['  make test', 'make'],
    ['make test && ./deploy', 'make'],
    ['make; ./deploy', 'make'],
    ['make | tee log', 'make'],
    ['make & wait', 'make'],
    ['./poll.sh --fast', './poll.sh'],
    ['/usr/bin/env', '/usr/bin/env'],
    ['../bin/run', '../bin/run'],
    ['git\tpull', 'git'],
    ['curl -fsS https://example.com?a=1', 'curl'],
    ['restic\nrestic check', 'restic'],
    ['restic # nightly', 'restic'],
    // assignments
    ['FOO=1 restic backup', 'restic'],
    ['A=1 B="two words" C=\'x\' restic', 'restic'],
    ['A=$HOME B=$(date) restic', 'restic'],
    ['FOO=1', null],
    ['FOO=1 true && echo', null],
    ['PATH=/opt/bin:$PATH restic', null],
    ['a-b=1 restic', 'a-b=1'],
    // quoting that leaves a static word
    ["'restic' backup", 'restic'],
    ['"restic" backup', 'restic'],
    ['"my tool" x', 'my tool'],
    ['\\rm -f x', 'rm'],
    ['re"stic" backup', 'restic'],
    // dynamic words
    ['$TOOL run', null],
    ['${TOOL} run', null],
    ['"$TOOL" run', null],
    ['$(which restic) backup', null],
    ['`which restic` backup', null],
    ['${{ inputs.tool }} run', null],
    ['restic-${{ inputs.v }} run', null],
    ["'$TOOL' run", '$TOOL'],
    // globs, tilde, groups, subshells, functions
    ['./bin/*.sh', null],
    ['ba?h -c x', null],
    ['~/bin/backup.sh', null],
    ['{ make; }', null],
    ['(cd app && make)', null],
    ['f() { make; }; f', null],
    ['f () { make; }; f', null],
    // keywords and builtins
    ['if true; then make; fi', null],
    ['for i in 1 2; do make; done', null],
    ['while true; do sleep 1; done', null],
    ['case x in x) make;; esac', null],
    ['until make; do :; done', null],
    ['! make', null],
    ['[ -f x ] && make', null],
    ['[[ -f x ]] && make', null],
    ['test -f x && make', null],
    ['cd /tmp && make', null],
    ['export A=1; make', null],
    ['set -e; make', null],
    ['. ./env.sh && make', null],
    ['source ./env.sh && make', null],
    ['eval "$CMD"', null],
    ['true', null],
    ['false', null],
    [': noop', null],
    ['echo hi', null],
    ['printf "%s" x', null],
    ['read x', null],
    ['exit 3', null],
    ['echo oops >&2; exit 3', null],
    ['umask 077; make', null],
    ['ulimit -n 1024; make', null],
    ['trap "rm x" EXIT; make', null],
    ['type make', null],
    ['time make', null],
    // redirections
    ['restic backup > log 2>&1', 'restic'],
    ['>log restic backup', 'restic'],
    ['2>/dev/null restic', 'restic'],
    ['< input sort', 'sort'],
    ['cat <<EOF\nhi\nEOF', 'cat'],
    // wrappers
    ['exec restic backup', 'restic'],
    ['exec echo hi', null],
    ['exec -a name restic', null],
    ['exec', null],
    ['command restic backup', 'restic'],
    ['command -v restic', null],
    ['env restic', 'restic'],
    ['env FOO=1 BAR=2 restic', 'restic'],
    ['env -i restic', null],
    ['env PATH=/x restic', null],
    ['env', 'env'],
    ['nohup restic &', 'restic'],
    ['nice restic', 'restic'],
    ['nice -n 10 restic', 'restic'],
    ['nice -10 restic', 'restic'],
    ['nice -x restic', null],
    ['timeout 5m restic backup', 'restic'],
    ['timeout -s KILL 5 restic', 'restic'],
    ['timeout --signal=TERM -k 10 --preserve-status 5 restic', 'restic'],
    ['timeout 5', null],
    ['timeout --weird 5 restic', null],
    ['timeout $T restic', null],
    ['nohup nice -n 5 timeout 1h env A=1 restic', 'restic'],
    ['FOO=1 exec env restic', 'restic'],
    ['sudo restic', 'sudo'],
    // nothing to run, or text that does not parse
    ['', null],
    ['   ', null],
    ['# only a comment', null],
    ['; make', null],
    ['"unterminated', null],
    ["'unterminated", null],
    ['$(unterminated', null],
    ['`unterminated', null],
    ['""', null],
  ])('%j → %j', (text, word) => {
    expect(commandWord(text)).toBe(word);
  });

  it('lists the wrappers an external program runs under, then the program', () => {
    expect(commandWords('nohup nice -n 5 timeout 1h env A=1 restic backup')).toEqual(['nohup', 'nice', 'timeout', 'env', 'restic']);
    expect(commandWords('exec command restic')).toEqual(['restic']);
    expect(commandWords('echo hi')).toBeNull();
  });
});

describe('checkCommand', () => {
  const bin = mkdtempSync(join(tmpdir(), 'loops-preflight-'));
  const tool = join(bin, 'my-tool');
  writeFileSync(tool, '#!/bin/sh\nexit 0\n', { mode: 0o755 });
  const plain = join(bin, 'not-exec.sh');
  writeFileSync(plain, '#!/bin/sh\nexit 0\n');
  chmodSync(plain, 0o644);
  const work = join(bin, 'work');
  mkdirSync(join(work, 'scripts'), { recursive: true });
  writeFileSync(join(work, 'scripts', 'run.sh'), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
  const path = `${bin}:/usr/bin:/bin`;
  const shell = (command: string, cwd: string | null = null) => ({ command, shell: true, cwd });
  const argv = (command: string, cwd: string | null = null) => ({ command, args: [], shell: false, cwd });

  it('accepts commands found on PATH, by absolute path, or relative to the cwd', () => {
    expect(checkCommand(shell('my-tool --flag'), path)).toBeNull();
    expect(checkCommand(shell('FOO=1 true && echo'), path)).toBeNull();
    expect(checkCommand(shell('$TOOL run'), path)).toBeNull();
    expect(checkCommand(argv('my-tool'), path)).toBeNull();
    expect(checkCommand(argv(tool), '')).toBeNull();
    expect(checkCommand(shell('./scripts/run.sh x', work), path)).toBeNull();
    expect(checkCommand(argv('./scripts/run.sh'), path, work)).toBeNull();
    expect(checkCommand(shell('timeout 5 my-tool'), path)).toBeNull();
  });

  it('names the missing first word of a shell command and the PATH searched', () => {
    expect(checkCommand(shell('definitely-not-installed-xyz --flag'), path)).toEqual({
      field: 'command',
      executable: 'definitely-not-installed-xyz',
      message: `command not found: definitely-not-installed-xyz (searched PATH=${path})`,
      hint: 'install definitely-not-installed-xyz, or give its absolute path',
    });
    expect(checkCommand(shell('env A=1 nope-xyz'), path)?.message).toBe(`command not found: nope-xyz (searched PATH=${path})`);
    // The wrapper itself must be there too.
    expect(checkCommand(shell('nope-wrapper-xyz'), '/nowhere')?.executable).toBe('nope-wrapper-xyz');
    expect(checkCommand(shell('timeout 5 my-tool'), bin)?.message).toBe(`command not found: timeout (searched PATH=${bin})`);
  });

  it('checks an argv command, and explains a path that is missing or not executable', () => {
    expect(checkCommand(argv('nope-xyz'), path)?.message).toBe(`command not found: nope-xyz (searched PATH=${path})`);
    expect(checkCommand(argv('./missing.sh'), path, work)).toMatchObject({
      message: `command not found: ./missing.sh (no file ${join(work, 'missing.sh')})`,
      hint: `check that ${join(work, 'missing.sh')} exists and is executable`,
    });
    expect(checkCommand(shell(`${plain} --x`), path)).toMatchObject({ message: `${plain} is not executable`, hint: `make it executable (chmod +x ${plain})` });
    expect(checkCommand(argv(work), path)?.message).toBe(`${work} is not a file`);
  });

  it('leaves a missing cwd to the caller: a relative path is then not checked', () => {
    expect(checkCommand(argv('./scripts/run.sh', join(bin, 'gone')), path)).toBeNull();
    expect(checkCommand(argv('nope-xyz', join(bin, 'gone')), path)?.executable).toBe('nope-xyz');
  });
});
