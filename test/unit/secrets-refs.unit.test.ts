/**
 * `--secret-file NAME=PATH` and `--secret-cmd NAME=COMMAND` when a loop is defined: what is refused
 * before anything is written (a bad or repeated name, a path inside the data directory, a command
 * that holds the value itself), and the one trailing line end a value loses.
 */
import { describe, expect, it } from 'vitest';
import { buildSecretRefs, stripNewline, type SecretRefContext } from '../../src/runtime/execution/secret-refs.js';

const ctx = (over: Partial<SecretRefContext> = {}): SecretRefContext => ({
  baseDir: '/home/ann/app',
  dataDir: '/home/ann/.local/share/loops',
  cwd: null,
  env: {},
  preflight: false,
  taken: new Map(),
  ...over,
});

describe('secret references', () => {
  it('a value loses one trailing \\n or \\r\\n, nothing else', () => {
    expect(stripNewline('tok\n')).toBe('tok');
    expect(stripNewline('tok\r\n')).toBe('tok');
    expect(stripNewline('tok\n\n')).toBe('tok\n');
    expect(stripNewline('  tok  ')).toBe('  tok  ');
    expect(stripNewline('line1\nline2')).toBe('line1\nline2');
    expect(stripNewline('tok\r')).toBe('tok\r');
  });

  it('records the reference only: the absolute path, the command as written', () => {
    const refs = buildSecretRefs(
      { secretFiles: [{ name: 'API_TOKEN', path: '/etc/loops/token' }], secretCmds: [{ name: 'DB_PASSWORD', command: 'pass show db/prod' }] },
      ctx(),
    );
    expect(refs).toEqual([
      { name: 'API_TOKEN', from: 'file', path: '/etc/loops/token' },
      { name: 'DB_PASSWORD', from: 'cmd', command: 'pass show db/prod' },
    ]);
  });

  it('refuses an invalid name, and a name given twice across --env, --secret-env, --secret-file and --secret-cmd', () => {
    expect(() => buildSecretRefs({ secretFiles: [{ name: 'API-TOKEN', path: '/x' }] }, ctx())).toThrow('--secret-file: invalid variable name "API-TOKEN"');
    expect(() => buildSecretRefs({ secretCmds: [{ name: '', command: 'pass x' }] }, ctx())).toThrow('--secret-cmd: invalid variable name ""');
    expect(() => buildSecretRefs({ secretFiles: [{ name: 'TOKEN', path: '/x' }] }, ctx({ taken: new Map([['TOKEN', '--secret-env']]) }))).toThrow(
      '--secret-file TOKEN: TOKEN is also given with --secret-env',
    );
    expect(() => buildSecretRefs({ secretFiles: [{ name: 'TOKEN', path: '/x' }], secretCmds: [{ name: 'TOKEN', command: 'pass x' }] }, ctx())).toThrow(
      '--secret-cmd TOKEN: TOKEN is also given with --secret-file',
    );
  });

  it('refuses a file inside the data directory (the directory itself too), before looking for it', () => {
    for (const path of ['/home/ann/.local/share/loops/token', '/home/ann/.local/share/loops', '/home/ann/.local/share/loops/runs/../secret']) {
      expect(() => buildSecretRefs({ secretFiles: [{ name: 'TOKEN', path }] }, ctx())).toThrow(/^--secret-file TOKEN: .* is inside the data directory \/home\/ann\/.local\/share\/loops, where a secret must not live/);
    }
    // A sibling whose name starts like it is not inside.
    expect(buildSecretRefs({ secretFiles: [{ name: 'TOKEN', path: '/home/ann/.local/share/loops-secrets/token' }] }, ctx())).toHaveLength(1);
    expect(() => buildSecretRefs({ secretFiles: [{ name: 'TOKEN', path: '../.local/share/loops/t' }] }, ctx({ baseDir: '/home/ann/app' }))).toThrow(/inside the data directory/);
  });

  it('refuses an empty path or command, and a NUL byte in either', () => {
    expect(() => buildSecretRefs({ secretFiles: [{ name: 'T', path: ' ' }] }, ctx())).toThrow('--secret-file T: the path is empty');
    expect(() => buildSecretRefs({ secretFiles: [{ name: 'T', path: '/x\0y' }] }, ctx())).toThrow(/NUL byte/);
    expect(() => buildSecretRefs({ secretCmds: [{ name: 'T', command: '' }] }, ctx())).toThrow('--secret-cmd T: the command is empty');
    expect(() => buildSecretRefs({ secretCmds: [{ name: 'T', command: 'pass\0show' }] }, ctx())).toThrow(/NUL byte/);
  });

  it('refuses a command that holds the value itself (it is stored as written): a secret-named assignment, or echo/printf of literal text', () => {
    for (const command of ['echo sk-live-abcdef123', "printf '%s' hunter2hunter", 'API_TOKEN=abc123def vault read x', 'export DB_PASSWORD="s3cr3t-pw"; get-it', 'env GH_TOKEN=ghp_abc123 gh auth token']) {
      expect(() => buildSecretRefs({ secretCmds: [{ name: 'T', command }] }, ctx()), command).toThrow(/^--secret-cmd T: the command (prints literal text|sets \w+ to a value)/);
    }
    // Where the value is, not the value: accepted.
    for (const command of ['pass show api/token', 'echo "$VAULT_TOKEN"', 'cat ~/.token | tr -d "\\n"', 'security find-generic-password -s x -w', 'VAULT_ADDR=https://vault:8200 vault kv get -field=token secret/x', 'TOKEN="$(cat /run/t)" sh -c \'printf %s "$TOKEN"\'']) {
      expect(buildSecretRefs({ secretCmds: [{ name: 'T', command }] }, ctx()), command).toEqual([{ name: 'T', from: 'cmd', command }]);
    }
  });

  it('with preflight, a command whose executable is not on the PATH of runs is refused, pointing to --no-preflight', () => {
    expect(() => buildSecretRefs({ secretCmds: [{ name: 'T', command: 'no-such-password-tool-xyz show t' }] }, ctx({ preflight: true, baseDir: '/' }))).toThrow(
      /^--secret-cmd T: .*no-such-password-tool-xyz/,
    );
  });
});
