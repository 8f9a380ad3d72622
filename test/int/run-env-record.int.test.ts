/**
 * A run's spawn record says which environment loops applied and where the process really started
 * (issue 13): `process.spawned` / `step.spawned` carry `env` — the names loops set, the secrets it
 * set, the runner's variables it removed and those the process inherited — and `cwd`, the absolute
 * directory with symlinks resolved. The acceptance is "what is recorded is what was applied": a
 * real child process (test/fixtures/env-names.mjs) prints the names it has and its getcwd(), and
 * they must equal the record — through execa and through the spawner helper, for a command run
 * under an account with --env, --secret-env and a symlinked cwd, for a workflow step, and for an
 * agent run. No value of any variable reaches the database.
 */
import { mkdirSync, readFileSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { SpawnEnv } from '../../src/events/catalog.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { createAgentLoop, createCommandLoop } from '../../src/runtime/loops/commands.js';
import { workflowRunSteps } from '../../src/runtime/queries/workflows.js';
import { useSpawnerHelper, type Runtime } from '../../src/runtime/runtime.js';
import { runWorkflow } from '../../src/runtime/workflows/runner.js';
import { createWorkflow } from '../../src/runtime/workflows/specs.js';
import { fixture } from '../helpers/fixtures.js';
import { expectInvariants } from '../helpers/invariants.js';
import { tempDir, useRuntime } from '../helpers/tmp.js';

const ENV_NAMES = fixture('env-names.mjs');
const SECRET = 'sekrit-Vq81/zz+Pw3';
const PLAIN = 'plain-value-Hk27x';
const INHERITED = 'inherited-value-Jq55y';
/** Runner variables an account's run must not inherit (a subset of ACCOUNT_UNSET_ENV). */
const STRIPPED = { GITHUB_TOKEN: 'ghp_runner-Zr91', XDG_CONFIG_HOME: '/runner/xdg-config-Zr91' };

/** Sets process variables (the runs inherit them) for the current test. */
function withEnv(vars: Record<string, string | undefined>): void {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  const apply = (v: Record<string, string | undefined>) => {
    for (const [k, x] of Object.entries(v)) {
      if (x === undefined) delete process.env[k];
      else process.env[k] = x;
    }
  };
  apply(vars);
  onTestFinished(() => apply(saved));
}

/** What the process printed: the names of its variables and its cwd. */
function seen(stdout: string): { names: string[]; cwd: string } {
  return JSON.parse(stdout.trim().split('\n').at(-1)!);
}

/** The data of the one event of `type` on a stream. */
async function only<T>(runtime: Runtime, streamId: string, type: string): Promise<T> {
  const events = (await runtime.log.readStream(streamId)).filter((e) => e.type === type);
  expect(events).toHaveLength(1);
  return events[0]!.data as T;
}

/** The recorded names equal the process's, and nothing removed reached it. */
function expectApplied(env: SpawnEnv, names: string[]): void {
  expect([...env.set, ...env.secret, ...env.inherited].sort()).toEqual(names);
  for (const list of Object.values(env)) expect([...list].sort()).toEqual(list);
  for (const name of env.removed) expect(names).not.toContain(name);
}

/** No event data holds `value`; and, for `anywhere`, not a byte of the database file either. */
function expectNotInLog(runtime: Runtime, values: string[], anywhere: string[]): void {
  runtime.db.pragma('wal_checkpoint(TRUNCATE)');
  const file = readFileSync(join(runtime.dataDir, 'loops.db'));
  for (const v of anywhere) expect(file.includes(v), v).toBe(false);
  const holders = (v: string) => (runtime.db.prepare("SELECT type FROM events WHERE instr(data, ?) > 0").all(v) as { type: string }[]).map((r) => r.type);
  // A plain --env value is part of the loop's definition (stored in clear, as documented): never of a spawn's record.
  for (const v of values) for (const type of holders(v)) expect(['loop.created', 'run.claimed']).toContain(type);
}

describe('a run records the environment and directory it really started with', () => {
  for (const via of ['execa', 'helper'] as const) {
    it(`command run under an account, with --env, --secret-env and a symlinked cwd (${via})`, async () => {
      withEnv({ ...STRIPPED, RUNENV_TOKEN: SECRET, RUNENV_INHERITED: INHERITED, PATH: `${fixture('accounts-bin')}${delimiter}${process.env.PATH ?? ''}` });
      const runtime = await useRuntime();
      if (via === 'helper') {
        useSpawnerHelper(runtime);
        expect(runtime.spawner!.unavailableReason).toBeNull();
        await runtime.spawner!.ready();
        // Set after the helper started: it reaches the run as the runner's drift, and is recorded.
        withEnv({ RUNENV_LATE: 'late-value-Wn40' });
      }
      const real = join(tempDir('loops-checkout-'), 'release-1');
      mkdirSync(real);
      const link = join(tempDir('loops-link-'), 'current');
      symlinkSync(real, link);
      await createCommandLoop(runtime, {
        name: 'envy',
        command: process.execPath,
        args: [ENV_NAMES],
        shell: false,
        cwd: link,
        env: { RUNENV_PLAIN: PLAIN },
        secretEnv: ['RUNENV_TOKEN'],
        account: 'ops',
        accountTool: 'gh',
        schedule: { manual: true, tz: 'UTC' },
      });
      const run = await runNow(runtime, 'envy');
      expect(run.status, run.error ?? '').toBe('succeeded');
      const { env, cwd } = await only<{ env: SpawnEnv; cwd: string }>(runtime, `run:${run.id}`, 'process.spawned');
      const process$ = seen(run.stdout);
      expectApplied(env, process$.names);
      expect(env.secret).toEqual(['FAKE_ACCOUNT_TOKEN', 'RUNENV_TOKEN']);
      expect(env.removed).toEqual(['GITHUB_TOKEN', 'XDG_CONFIG_HOME']);
      expect(env.set).toEqual(expect.arrayContaining(['FAKE_ACCOUNT_HOME', 'LOOPS_ACCOUNT_PROFILE', 'LOOPS_ACCOUNT_TOOL', 'LOOPS_RUN_ID', 'PATH', 'RUNENV_PLAIN']));
      expect(env.inherited).toContain('RUNENV_INHERITED');
      if (via === 'helper') expect(env.inherited).toContain('RUNENV_LATE');
      // The checkout the symlink pointed at, as the process's own getcwd() says.
      expect(cwd).toBe(realpathSync(real));
      expect(process$.cwd).toBe(cwd);
      expectNotInLog(runtime, [PLAIN], [SECRET, INHERITED, 'tok-ops', '/accounts/ops/gh', ...Object.values(STRIPPED)]);
      expectInvariants(runtime);
    });
  }

  it('a shell command with no cwd records the runner\'s directory', async () => {
    const runtime = await useRuntime();
    await createCommandLoop(runtime, { name: 'here', command: `'${process.execPath}' '${ENV_NAMES}'`, shell: true, schedule: { manual: true, tz: 'UTC' } });
    const run = await runNow(runtime, 'here');
    const { env, cwd } = await only<{ env: SpawnEnv; cwd: string }>(runtime, `run:${run.id}`, 'process.spawned');
    expect(cwd).toBe(realpathSync(process.cwd()));
    expect(seen(run.stdout).cwd).toBe(cwd);
    expectApplied(env, seen(run.stdout).names);
    expect(env.removed).toEqual([]);
    expect(env.secret).toEqual([]);
  });

  it('each workflow step attempt records its own', async () => {
    withEnv({ STEP_TOKEN: SECRET });
    const runtime = await useRuntime();
    const dir = tempDir('loops-step-');
    const file = join(tempDir(), 'flow.yaml');
    writeFileSync(
      file,
      [
        'name: flow',
        'secrets: [STEP_TOKEN]',
        'steps:',
        '  - id: a',
        `    command: ${process.execPath}`,
        `    args: [${JSON.stringify(ENV_NAMES)}]`,
        `    cwd: ${JSON.stringify(dir)}`,
        `    env: { STEP_PLAIN: ${PLAIN} }`,
        '  - id: b',
        `    command: ${process.execPath}`,
        `    args: [${JSON.stringify(ENV_NAMES)}]`,
        '    needs: [a]',
      ].join('\n') + '\n',
    );
    await createWorkflow(runtime, file);
    const { run } = await runWorkflow(runtime, 'flow');
    expect(run.status, run.error ?? '').toBe('succeeded');
    const spawned = (await runtime.log.readStream(`wfrun:${run.id}`)).filter((e) => e.type === 'step.spawned').map((e) => e.data as { stepId: string; env: SpawnEnv; cwd: string });
    expect(spawned.map((s) => s.stepId).sort()).toEqual(['a', 'b']);
    const steps = workflowRunSteps(runtime.db, run.id);
    for (const s of spawned) {
      const printed = seen(steps.find((x) => x.stepId === s.stepId)!.stdout);
      expectApplied(s.env, printed.names);
      expect(printed.cwd).toBe(s.cwd);
      expect(s.env.secret).toEqual(['STEP_TOKEN']);
      expect(s.env.set).toEqual(expect.arrayContaining(['LOOPS_WORKFLOW_STEP_ID', 'PATH']));
    }
    expect(spawned.find((s) => s.stepId === 'a')!.cwd).toBe(realpathSync(dir));
    expect(spawned.find((s) => s.stepId === 'a')!.env.set).toContain('STEP_PLAIN');
    expect(spawned.find((s) => s.stepId === 'b')!.cwd).toBe(realpathSync(process.cwd()));
    runtime.db.pragma('wal_checkpoint(TRUNCATE)');
    expect(readFileSync(join(runtime.dataDir, 'loops.db')).includes(SECRET)).toBe(false);
    const holders = (runtime.db.prepare("SELECT type FROM events WHERE instr(data, ?) > 0").all(PLAIN) as { type: string }[]).map((r) => r.type);
    // The step's env is part of its spec (workflow.created, wfrun.started): never of a spawn's record.
    for (const type of holders) expect(['workflow.created', 'wfrun.started']).toContain(type);
  });

  it('an agent run records what the agent CLI saw', async () => {
    const log = join(tempDir(), 'agent.jsonl');
    withEnv({ PATH: `${fixture('agents')}${delimiter}${process.env.PATH ?? ''}`, FAKE_AGENT_LOG: log });
    const runtime = await useRuntime();
    const dir = tempDir('loops-agent-');
    await createAgentLoop(runtime, { name: 'helper', provider: 'claude', prompt: 'say hi', cwd: dir, schedule: { manual: true, tz: 'UTC' } });
    const run = await runNow(runtime, 'helper');
    expect(run.status, run.error ?? '').toBe('succeeded');
    const { env, cwd } = await only<{ env: SpawnEnv; cwd: string }>(runtime, `run:${run.id}`, 'process.spawned');
    const agent = JSON.parse(readFileSync(log, 'utf8').trim().split('\n').at(-1)!) as { env: Record<string, string>; cwd: string };
    expect(cwd).toBe(realpathSync(dir));
    expect(agent.cwd).toBe(cwd);
    // The fake CLI logs every LOOPS_* variable it has: exactly those recorded (set, or inherited from the runner).
    const recorded = [...env.set, ...env.secret, ...env.inherited].filter((n) => n.startsWith('LOOPS_')).sort();
    expect(Object.keys(agent.env).filter((n) => n.startsWith('LOOPS_')).sort()).toEqual(recorded);
    expect(recorded).toEqual(expect.arrayContaining(['LOOPS_LOOP_ID', 'LOOPS_RUN_ID']));
    expect(env.inherited).toContain('FAKE_AGENT_LOG');
  });
});
