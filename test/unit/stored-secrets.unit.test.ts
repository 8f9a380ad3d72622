/**
 * `loops doctor`'s check of definitions that hold a value under a secret name (loops created, and
 * workflows registered, before such values were refused): where each one is, whether it is live
 * (a warning pointing to `loops secrets scrub`) or only history (ok, saying the log still holds it).
 */
import { describe, expect, it } from 'vitest';
import { checkStoredSecrets } from '../../src/runtime/admin/doctor.js';
import type { LoopView } from '../../src/runtime/queries/loops.js';
import type { WorkflowView } from '../../src/runtime/queries/workflows.js';
import type { WorkflowSpec } from '../../src/workflow/spec.js';

const loop = (name: string, env: Record<string, string>, extra: Record<string, unknown> = {}, status = 'active') =>
  ({ id: `loop_${name}`, name, status, target: { kind: 'command', command: 'true', args: [], shell: true, cwd: null, env, ...extra } }) as unknown as LoopView;
const spec = (env: Record<string, string>, stepEnv: Record<string, string>) => ({ env, steps: [{ id: 'deploy', target: { kind: 'command', env: stepEnv } }] }) as unknown as WorkflowSpec;
const workflow = (name: string, env: Record<string, string>, stepEnv: Record<string, string>, status = 'active') =>
  ({ name, status, spec: spec(env, stepEnv) }) as unknown as WorkflowView;

describe('doctor: secrets in definitions', () => {
  it('ok when no definition holds one: trivial values, look-alike names and --not-secret names (any case) are not secrets', () => {
    const check = checkStoredSecrets(
      [loop('a', { DISABLE_AUTH: 'true', GIT_AUTHOR_NAME: 'Ann' }), loop('b', { PUBLIC_TOKEN: 'pk-visible-1' }, { notSecret: ['public_token'] })],
      [workflow('w', { CI: 'true' }, { TOKENIZERS_PARALLELISM: 'false' })],
    );
    expect(check).toMatchObject({ id: 'stored-secrets', status: 'ok', detail: 'no loop or workflow definition holds a value under a secret name' });
  });

  it('warns about live definitions (active, paused, stopped loops; workflows not archived), naming each loop, workflow and step, and points to loops secrets scrub', () => {
    const check = checkStoredSecrets(
      [loop('backup', { CLI_TOKEN: 'tok-4f9a1c77e2' }), loop('held', { DB_PASSWORD: 'hunter22' }, {}, 'paused'), loop('halt', { API_KEY: 'k-12345' }, {}, 'stopped')],
      [workflow('ship', { GH_TOKEN: 'ghp_abcdef' }, { NPM_TOKEN: 'npm_abcdef' })],
    );
    expect(check.status).toBe('warn');
    expect(check.detail).toBe(
      '5 values under secret names stored in clear in live definitions: loop backup: --env CLI_TOKEN, loop held: --env DB_PASSWORD, loop halt: --env API_KEY, workflow ship: env.GH_TOKEN, workflow ship, step deploy: env.NPM_TOKEN',
    );
    expect(check.hint).toMatch(/^loops secrets scrub \(try --dry-run first\) redefines them with each secret passed by name/);
    expect(check.hint).toMatch(/rotate those secrets: their old values stay in the log's history/);
  });

  it('values only in history (removed, archived or expired loops, archived workflows, older workflow versions) are ok, and said to be in the log still', () => {
    const check = checkStoredSecrets(
      [loop('old', { DB_PASSWORD: 'hunter22' }, {}, 'removed'), loop('done', { CLI_TOKEN: 'tok-4f9a1c77e2' }, {}, 'expired'), loop('clean', {}, { secretEnv: ['CLI_TOKEN'] })],
      [workflow('gone', { GH_TOKEN: 'ghp_abcdef' }, {}, 'archived'), workflow('ship', {}, {})],
      [{ name: 'ship', version: 1, spec: spec({}, { NPM_TOKEN: 'npm_abcdef' }) }],
    );
    expect(check.status).toBe('ok');
    expect(check.detail).toBe(
      'no live loop or workflow definition holds a value under a secret name; the log\'s history still holds 4 values under secret names (rotate them; no command removes history, see docs/cli.md, "Secrets"): loop old (removed, loop_old): --env DB_PASSWORD, loop done (expired, loop_done): --env CLI_TOKEN, workflow gone (archived): env.GH_TOKEN, workflow ship v1, step deploy: env.NPM_TOKEN',
    );
  });

  it('live and history together: a warning about the live ones that mentions the history', () => {
    const check = checkStoredSecrets([loop('backup', { CLI_TOKEN: 'tok-4f9a1c77e2' }), loop('backup', { CLI_TOKEN: 'tok-old-value' }, {}, 'removed')], []);
    expect(check.status).toBe('warn');
    expect(check.detail).toMatch(/^1 value under secret names stored in clear in live definitions: loop backup: --env CLI_TOKEN; the log's history still holds 1 value .*: loop backup \(removed, loop_backup\): --env CLI_TOKEN$/);
  });
});
