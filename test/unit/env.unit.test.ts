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
