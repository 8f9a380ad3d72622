/**
 * spawnEnvNames (runtime/execution/env.ts): the names recorded with a spawn partition the
 * environment the process gets — runner's minus `unset`, plus `applied` — into set / secret /
 * inherited, with `removed` the runner's variables dropped and not put back; sorted; no value.
 */
import { describe, expect, it } from 'vitest';
import { runnerEnv, spawnEnvNames } from '../../src/runtime/execution/env.js';

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

describe('runnerEnv: process.env read once per turn', () => {
  const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

  it('runs started in one turn share one read; a change to process.env is seen from the next turn', async () => {
    delete process.env.LOOPS_TEST_TURN;
    const first = runnerEnv();
    expect(runnerEnv(), 'the same turn: the same read').toBe(first);
    expect(first.LOOPS_TEST_TURN).toBeUndefined();
    process.env.LOOPS_TEST_TURN = 'one';
    try {
      await nextTurn();
      const second = runnerEnv();
      expect(second).not.toBe(first);
      expect(second.LOOPS_TEST_TURN).toBe('one');
      // Names as spawnEnvNames sees them: the new variable is inherited, nothing is undefined.
      expect(spawnEnvNames(second, {}, new Set()).inherited).toContain('LOOPS_TEST_TURN');
      expect(Object.values(second).every((v) => typeof v === 'string')).toBe(true);
    } finally {
      delete process.env.LOOPS_TEST_TURN;
    }
    await nextTurn();
    expect(runnerEnv().LOOPS_TEST_TURN, 'an unset variable is gone from the next turn').toBeUndefined();
  });

  it('spawnEnvNames on a runnerEnv read gives what it gives on the same record read by hand', async () => {
    await nextTurn();
    const env = runnerEnv();
    const byHand = Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined));
    const unset = new Set(Object.keys(byHand).slice(0, 2));
    expect(spawnEnvNames(env, { PATH: '/x', LOOPS_RUN_ID: 'r' }, unset, [])).toEqual(spawnEnvNames(byHand, { PATH: '/x', LOOPS_RUN_ID: 'r' }, unset, []));
  });
});
