/**
 * spawnEnvNames (runtime/execution/env.ts): the names recorded with a spawn partition the
 * environment the process gets — runner's minus `unset`, plus `applied` — into set / secret /
 * inherited, with `removed` the runner's variables dropped and not put back; sorted; no value.
 */
import { describe, expect, it } from 'vitest';
import { spawnEnvNames } from '../../src/runtime/execution/env.js';

describe('spawnEnvNames', () => {
  const runner = { HOME: '/home/u', PATH: '/usr/bin', GH_TOKEN: 'gho_x', XDG_CONFIG_HOME: '/c', LANG: 'C', GONE: undefined };

  it('splits into set, secret, removed and inherited, sorted, names only', () => {
    const names = spawnEnvNames(runner, { PATH: '/usr/bin:/bin', ZED: '1', API_TOKEN: 'v', LOOPS_RUN_ID: 'run_1' }, new Set(['GH_TOKEN', 'XDG_CONFIG_HOME', 'NOT_THERE']), ['API_TOKEN']);
    expect(names).toEqual({ set: ['LOOPS_RUN_ID', 'PATH', 'ZED'], secret: ['API_TOKEN'], removed: ['GH_TOKEN', 'XDG_CONFIG_HOME'], inherited: ['HOME', 'LANG'] });
    expect(JSON.stringify(names)).not.toMatch(/gho_x|\/home\/u|\/usr\/bin/);
  });

  it('a removed name that loops sets again is set, not removed; an undefined runner variable is nothing', () => {
    const names = spawnEnvNames(runner, { GH_TOKEN: 'mine' }, new Set(['GH_TOKEN']), ['GH_TOKEN']);
    expect(names.removed).toEqual([]);
    expect(names.secret).toEqual(['GH_TOKEN']);
    expect([...names.set, ...names.secret, ...names.inherited]).not.toContain('GONE');
  });
});
