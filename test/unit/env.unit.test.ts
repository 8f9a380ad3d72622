/** A run's PATH: the inherited one, then the user bin directories that exist (env.ts). */
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { extendPath, userBinDirs } from '../../src/runtime/execution/env.js';

describe('extendPath', () => {
  it('appends the user bin directories that exist, after the inherited PATH, once each', () => {
    const home = mkdtempSync(join(tmpdir(), 'loops-home-'));
    for (const d of ['.local/bin', '.cargo/bin', '.bun/bin']) mkdirSync(join(home, d), { recursive: true });
    const path = extendPath('/usr/bin:/bin', {}, home);
    const parts = path.split(':');
    expect(parts.slice(0, 2)).toEqual(['/usr/bin', '/bin']);
    expect(parts).toContain(join(home, '.local/bin'));
    expect(parts).toContain(join(home, '.cargo/bin'));
    expect(parts).toContain(join(home, '.bun/bin'));
    expect(parts).not.toContain(join(home, '.deno/bin')); // does not exist
    // Already present: not added twice, and the user's order stays.
    const again = extendPath(`${join(home, '.cargo/bin')}:/usr/bin`, {}, home).split(':');
    expect(again[0]).toBe(join(home, '.cargo/bin'));
    expect(again.filter((p) => p === join(home, '.cargo/bin'))).toHaveLength(1);
  });

  it('follows PNPM_HOME and NPM_CONFIG_PREFIX', () => {
    const dirs = userBinDirs({ PNPM_HOME: '/opt/pnpm', NPM_CONFIG_PREFIX: '/opt/npm' }, '/home/u');
    expect(dirs).toContain('/opt/pnpm');
    expect(dirs).toContain('/opt/npm/bin');
    expect(dirs).toContain('/home/u/.local/bin');
  });

  it('an empty PATH becomes just the existing user dirs', () => {
    const home = mkdtempSync(join(tmpdir(), 'loops-home-'));
    mkdirSync(join(home, '.local/bin'), { recursive: true });
    expect(extendPath(undefined, {}, home).split(':')[0]).toBe(join(home, '.local/bin'));
  });
});

describe('the system baseline', () => {
  it('an unset PATH (a daemon under env -i) still ends with /usr/bin:/bin:/usr/sbin:/sbin', () => {
    const home = mkdtempSync(join(tmpdir(), 'loops-home-'));
    mkdirSync(join(home, 'bin'), { recursive: true });
    const parts = extendPath(undefined, {}, home).split(':');
    expect(parts.slice(-4)).toEqual(['/usr/bin', '/bin', '/usr/sbin', '/sbin']);
    // ~/bin is one of the user directories, as the predecessor had it.
    expect(parts).toContain(join(home, 'bin'));
  });

  it('keeps the inherited order and adds only the system directories it lacks', () => {
    const home = mkdtempSync(join(tmpdir(), 'loops-home-'));
    const parts = extendPath('/bin:/opt/x', {}, home).split(':');
    expect(parts.slice(0, 2)).toEqual(['/bin', '/opt/x']);
    expect(parts.slice(-3)).toEqual(['/usr/bin', '/usr/sbin', '/sbin']);
    expect(parts.filter((p) => p === '/bin')).toHaveLength(1);
  });

  it('follows BUN_INSTALL', () => {
    expect(userBinDirs({ BUN_INSTALL: '/opt/bun' }, '/home/u')).toContain('/opt/bun/bin');
  });
});
