/**
 * The run path's per-run shortcuts (issue 14) give what the plain functions give: the memoised
 * PATH, the environment's names read without their values, the secret scan that reads only the
 * values of variables that can hold a secret.
 */
import { describe, expect, it } from 'vitest';
import { extendPath, runnerPath, spawnEnvNames } from '../../src/runtime/execution/env.js';
import { secretValues } from '../../src/runtime/execution/secrets.js';

describe('runnerPath', () => {
  it('is extendPath of this process environment, for each PATH it is given', () => {
    for (const path of [process.env.PATH, '/usr/bin', undefined, '/opt/x:/usr/bin']) {
      expect(runnerPath(path)).toBe(extendPath(path));
      expect(runnerPath(path)).toBe(extendPath(path)); // memoised: the same again
    }
  });
});

describe('spawnEnvNames', () => {
  it('gives the same names for process.env as for a copy of it', () => {
    const applied = { PATH: '/usr/bin', LOOPS_RUN_ID: 'run_1', MY_TOKEN: 'abcdef' };
    const unset = new Set(['HOME']);
    expect(spawnEnvNames(process.env, applied, unset, ['MY_TOKEN'])).toEqual(spawnEnvNames({ ...process.env }, applied, unset, ['MY_TOKEN']));
  });

  it('skips the undefined entries of another record', () => {
    expect(spawnEnvNames({ A: 'x', B: undefined }, {}, new Set()).inherited).toEqual(['A']);
  });
});

describe('secretValues', () => {
  it('reads the variables named and those named like secrets, nothing else', () => {
    const env: Record<string, string | undefined> = {
      GH_TOKEN: 'ghp_secretvalue',
      PLAIN: 'not-a-secret-value',
      MY_PASS: ' padded-secret ',
      DISABLE_AUTH: 'true',
      OPENAI_API_KEY: undefined,
      short_secret: 'abc',
    };
    expect(secretValues(env, ['my_pass'])).toEqual(['ghp_secretvalue', ' padded-secret ', 'padded-secret']);
    expect(secretValues(env)).toEqual(['ghp_secretvalue']);
  });
});
