/**
 * `loops doctor`'s check of definitions that hold a value under a secret name (loops created, and
 * workflows registered, before such values were refused): where each one is, and what to do.
 */
import { describe, expect, it } from 'vitest';
import { checkStoredSecrets } from '../../src/runtime/admin/doctor.js';
import type { LoopView } from '../../src/runtime/queries/loops.js';
import type { WorkflowView } from '../../src/runtime/queries/workflows.js';

const loop = (name: string, env: Record<string, string>, extra: Record<string, unknown> = {}) =>
  ({ name, status: 'active', target: { kind: 'command', command: 'true', args: [], shell: true, cwd: null, env, ...extra } }) as unknown as LoopView;
const workflow = (name: string, env: Record<string, string>, stepEnv: Record<string, string>) =>
  ({ name, spec: { env, steps: [{ id: 'deploy', target: { kind: 'command', env: stepEnv } }] } }) as unknown as WorkflowView;

describe('doctor: secrets in definitions', () => {
  it('ok when no definition holds one: trivial values, look-alike names and --not-secret names are not secrets', () => {
    const check = checkStoredSecrets(
      [loop('a', { DISABLE_AUTH: 'true', GIT_AUTHOR_NAME: 'Ann' }), loop('b', { PUBLIC_TOKEN: 'pk-visible-1' }, { notSecret: ['PUBLIC_TOKEN'] })],
      [workflow('w', { CI: 'true' }, { TOKENIZERS_PARALLELISM: 'false' })],
    );
    expect(check).toMatchObject({ id: 'stored-secrets', status: 'ok', detail: 'no loop or workflow definition holds a value under a secret name' });
  });

  it('warns, naming each loop (removed ones too), workflow and step, and says to rotate and pass them by name', () => {
    const removed = { ...loop('old', { DB_PASSWORD: 'hunter22' }), status: 'removed' } as LoopView;
    const check = checkStoredSecrets([loop('backup', { CLI_TOKEN: 'tok-4f9a1c77e2' }), removed], [workflow('ship', { GH_TOKEN: 'ghp_abcdef' }, { NPM_TOKEN: 'npm_abcdef' })]);
    expect(check.status).toBe('warn');
    expect(check.detail).toBe(
      '4 values under secret names stored in clear in the log: loop backup: --env CLI_TOKEN, loop old (removed): --env DB_PASSWORD, workflow ship: env.GH_TOKEN, workflow ship, step deploy: env.NPM_TOKEN',
    );
    expect(check.hint).toMatch(/^rotate those secrets \(their old values stay in the log\); then pass them from the environment the runs run in: recreate each loop with --secret-env NAME/);
  });
});
