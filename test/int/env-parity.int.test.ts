/**
 * Environment parity with the predecessor (issue 12, item 5), each read by a real child process
 * from its own environment:
 *  - a step of a workflow loop's run gets the loop run's LOOPS_LOOP_NAME, LOOPS_RUN_ID and an
 *    ISO-8601 LOOPS_SCHEDULED_FOR (before: only LOOPS_LOOP_ID, and the slot id as "scheduled for");
 *  - under an account (`--account`, `--account-tool`), a command run and an agent run get
 *    LOOPS_ACCOUNT_PROFILE / LOOPS_ACCOUNT_TOOL and the profile's variables, and inherit none of
 *    GITHUB_TOKEN, GH_TOKEN, XDG_CONFIG_HOME, XDG_DATA_HOME, XDG_STATE_HOME, XDG_CACHE_HOME;
 *  - agent config isolation: `login` (the default of new agents) passes the CLI's own flags that
 *    shut out user and project settings and leaves its configuration directory (its login) alone;
 *    `empty` (recorded `safe`) points it at an empty directory, as a stored `safe` always did.
 */
import { mkdirSync, readFileSync, writeFileSync, chmodSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { SimulatedClock } from '../../src/runtime/clock.js';
import { tick } from '../../src/runtime/daemon/pass.js';
import { runNow } from '../../src/runtime/execution/run-now.js';
import { addAccount } from '../../src/runtime/agents/accounts.js';
import { createAgentLoop, createCommandLoop, createWorkflowLoop } from '../../src/runtime/loops/commands.js';
import { runWorkflow } from '../../src/runtime/workflows/runner.js';
import { ValidationError } from '../../src/events/errors.js';
import { prepareSpawn } from '../../src/runtime/execution/spawn-plan.js';
import { workflowRunSteps } from '../../src/runtime/queries/workflows.js';
import { createWorkflow } from '../../src/runtime/workflows/specs.js';
import { fixture } from '../helpers/fixtures.js';
import { tempDir, useRuntime } from '../helpers/tmp.js';

/** Sets process variables (the runs inherit them) for the current test. */
function withEnv(vars: Record<string, string | undefined>): void {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  for (const [k, v] of Object.entries(vars)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  onTestFinished(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });
}

const REPORT = fixture('report.mjs');
const LOOP_VARS = ['LOOPS_LOOP_ID', 'LOOPS_LOOP_NAME', 'LOOPS_RUN_ID', 'LOOPS_SCHEDULED_FOR', 'LOOPS_WORKFLOW_STEP_ID'];

describe('workflow steps of a loop run', () => {
  it('get the loop run\'s name, id and ISO scheduled instant, scheduled or by hand', async () => {
    const clock = new SimulatedClock('2026-05-01T00:00:30.000Z');
    const runtime = await useRuntime({ clock });
    const file = join(tempDir(), 'flow.yaml');
    writeFileSync(file, `name: flow\nsteps:\n  - id: show\n    command: ${process.execPath}\n    args: [${JSON.stringify(REPORT)}]\n    env: { REPORT_ENV: "${LOOP_VARS.join(',')}" }\n`);
    await createWorkflow(runtime, file);
    const loop = await createWorkflowLoop(runtime, { name: 'nightly', workflow: 'flow', schedule: { every: '1m', tz: 'UTC' } });
    clock.advance(60_000);
    const [scheduled] = (await tick(runtime)).runs;
    expect(scheduled).toBeDefined();
    const manual = await runNow(runtime, 'nightly');

    const reported = async (loopRunId: string) => {
      const started = (await runtime.log.readStream(`run:${loopRunId}`)).find((e) => e.type === 'run.workflow_started')!;
      const [step] = workflowRunSteps(runtime.db, (started.data as { wfRunId: string }).wfRunId);
      return JSON.parse(step!.stdout).env as Record<string, string | null>;
    };
    for (const run of [scheduled!, manual]) {
      const env = await reported(run.id);
      expect(env).toEqual({
        LOOPS_LOOP_ID: loop.id,
        LOOPS_LOOP_NAME: 'nightly',
        LOOPS_RUN_ID: run.id,
        LOOPS_SCHEDULED_FOR: run.scheduledFor,
        LOOPS_WORKFLOW_STEP_ID: 'show',
      });
      expect(new Date(env.LOOPS_SCHEDULED_FOR!).toISOString()).toBe(env.LOOPS_SCHEDULED_FOR);
    }
  });
});

/** Variables the runner has that a run under an account must not inherit (the predecessor's list). */
const STRIPPED = { GITHUB_TOKEN: 'ghp_runner', GH_TOKEN: 'gho_runner', XDG_CONFIG_HOME: '/runner/xdg-config', XDG_DATA_HOME: '/runner/xdg-data', XDG_STATE_HOME: '/runner/xdg-state', XDG_CACHE_HOME: '/runner/xdg-cache' };
const ACCOUNT_VARS = ['LOOPS_ACCOUNT_PROFILE', 'LOOPS_ACCOUNT_TOOL', 'FAKE_ACCOUNT_HOME', 'CLAUDE_CONFIG_DIR', 'ANTHROPIC_API_KEY', ...Object.keys(STRIPPED)];
const manual = { manual: true, tz: 'UTC' } as const;
/** The fake agent CLIs and the fake external `accounts` command first on PATH. */
const fakesFirst = () => `${fixture('agents')}${delimiter}${fixture('accounts-bin')}${delimiter}${process.env.PATH ?? ''}`;

function reportedEnv(run: { status: string; error: string | null; stdout: string }): Record<string, string | null> {
  expect(run.status, run.error ?? '').toBe('succeeded');
  return JSON.parse(run.stdout).env;
}

describe('a command loop under an account', () => {
  it('gets the profile\'s variables and LOOPS_ACCOUNT_*, and none of the runner\'s tokens or XDG directories', async () => {
    withEnv({ ...STRIPPED, ANTHROPIC_API_KEY: 'sk-runner', PATH: fakesFirst() });
    const runtime = await useRuntime();
    const dir = tempDir();
    await addAccount(runtime, { name: 'work', tool: 'claude', dir });
    const common = { command: process.execPath, args: [REPORT], shell: false, env: { REPORT_ENV: ACCOUNT_VARS.join(',') }, schedule: manual };
    // A registered profile (its directory) and one the external `accounts env` resolves.
    await createCommandLoop(runtime, { ...common, name: 'registered', account: 'work', accountTool: 'claude' });
    await createCommandLoop(runtime, { ...common, name: 'external', account: 'ops', accountTool: 'gh' });
    await createCommandLoop(runtime, { ...common, name: 'plain' });
    const registered = await runNow(runtime, 'registered');
    const external = await runNow(runtime, 'external');
    const plain = await runNow(runtime, 'plain');
    const none = Object.fromEntries(Object.keys(STRIPPED).map((k) => [k, null]));
    expect(reportedEnv(registered)).toEqual({
      LOOPS_ACCOUNT_PROFILE: 'work',
      LOOPS_ACCOUNT_TOOL: 'claude',
      FAKE_ACCOUNT_HOME: null,
      CLAUDE_CONFIG_DIR: dir,
      ANTHROPIC_API_KEY: null,
      ...none,
    });
    expect(reportedEnv(external)).toEqual({
      LOOPS_ACCOUNT_PROFILE: 'ops',
      LOOPS_ACCOUNT_TOOL: 'gh',
      FAKE_ACCOUNT_HOME: '/accounts/ops/gh',
      CLAUDE_CONFIG_DIR: null,
      ANTHROPIC_API_KEY: null,
      ...none,
    });
    // Without an account nothing is taken away (credential values are masked in the output).
    expect(reportedEnv(plain)).toMatchObject({ LOOPS_ACCOUNT_PROFILE: null, GITHUB_TOKEN: '***', XDG_CONFIG_HOME: '/runner/xdg-config', ANTHROPIC_API_KEY: '***' });
  });

  it('is refused without its tool, or when the profile does not resolve', async () => {
    withEnv({ PATH: fakesFirst() });
    const runtime = await useRuntime();
    const common = { command: 'true', schedule: manual };
    await expect(createCommandLoop(runtime, { ...common, name: 'a', account: 'work' })).rejects.toThrow(/--account on a command loop needs --account-tool <tool>/);
    await expect(createCommandLoop(runtime, { ...common, name: 'b', accountTool: 'gh' })).rejects.toThrow('--account-tool needs --account <profile>');
    await expect(createCommandLoop(runtime, { ...common, name: 'c', account: 'missing', accountTool: 'gh' })).rejects.toThrow(ValidationError);
    await expect(createCommandLoop(runtime, { ...common, name: 'd', account: 'w', accountTool: '--x' })).rejects.toThrow(/--account-tool: invalid tool name/);
    // --no-preflight stores it; the run then fails to start, saying why, with nothing spawned.
    await createCommandLoop(runtime, { ...common, name: 'later', account: 'missing', accountTool: 'gh', preflight: false });
    const run = await runNow(runtime, 'later');
    expect(run.status).toBe('failed');
    expect(run.error).toMatch(/accounts env missing --tool gh/);
  });

  it('recorded with no tool (an imported predecessor loop), its run fails before anything starts, as the predecessor\'s did', async () => {
    const runtime = await useRuntime();
    const prepared = await prepareSpawn(runtime, {
      target: { kind: 'command', command: 'true', args: [], shell: false, cwd: null, env: {}, account: 'work' },
      secretNames: [],
      env: {},
      dir: tempDir(),
      deadline: null,
      killGraceMs: null,
    });
    expect(prepared).toEqual({ ok: false, error: "account work: a command's account needs the tool its profile is for, and none is recorded", code: 'EACCOUNT' });
  });
});

interface AgentCall {
  argv: string[];
  env: Record<string, string>;
}
function agentCalls(log: string): AgentCall[] {
  return readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as AgentCall);
}

describe('an agent run', () => {
  it('under an account: LOOPS_ACCOUNT_* and none of the runner\'s tokens or XDG directories', async () => {
    const log = join(tempDir(), 'calls.jsonl');
    withEnv({ ...STRIPPED, PATH: fakesFirst(), FAKE_AGENT_LOG: log, FAKE_AGENT_LOG_ENV: 'GITHUB_TOKEN,GH_TOKEN,XDG_STATE_HOME,XDG_CACHE_HOME,FAKE_ACCOUNT_HOME' });
    const runtime = await useRuntime();
    await createAgentLoop(runtime, { name: 'review', provider: 'codex', prompt: 'review', account: 'work', accountTool: 'codex-app', schedule: manual });
    expect((await runNow(runtime, 'review')).status).toBe('succeeded');
    const [call] = agentCalls(log);
    expect(call!.env).toMatchObject({ LOOPS_ACCOUNT_PROFILE: 'work', LOOPS_ACCOUNT_TOOL: 'codex-app', FAKE_ACCOUNT_HOME: '/accounts/work/codex-app' });
    for (const name of Object.keys(STRIPPED)) expect(call!.env).not.toHaveProperty(name);
  });

  it('login (the default) keeps the user\'s configuration directory and passes the CLI\'s settings flags; empty is the old empty directory', async () => {
    const log = join(tempDir(), 'calls.jsonl');
    const home = tempDir();
    withEnv({ PATH: fakesFirst(), FAKE_AGENT_LOG: log, CLAUDE_CONFIG_DIR: join(home, '.claude'), CODEX_HOME: join(home, '.codex') });
    const runtime = await useRuntime();
    const login = await createAgentLoop(runtime, { name: 'claude-login', provider: 'claude', prompt: 'review', schedule: manual });
    await createAgentLoop(runtime, { name: 'codex-login', provider: 'codex', prompt: 'review', schedule: manual });
    const empty = await createAgentLoop(runtime, { name: 'claude-empty', provider: 'claude', prompt: 'review', configIsolation: 'empty', schedule: manual });
    const predecessor = await createAgentLoop(runtime, { name: 'claude-safe', provider: 'claude', prompt: 'review', configIsolation: 'safe', schedule: manual });
    // Recorded: login for the new default and the predecessor's `safe`; `safe` (what every loop
    // stored before login holds) for the empty directory.
    expect([login, empty, predecessor].map((l) => (l.target as { configIsolation: string }).configIsolation)).toEqual(['login', 'safe', 'login']);
    for (const name of ['claude-login', 'codex-login', 'claude-empty']) expect((await runNow(runtime, name)).status).toBe('succeeded');
    const [claude, codex, emptyCall] = agentCalls(log);
    expect(claude!.argv).toEqual(expect.arrayContaining(['--setting-sources', 'local', '--strict-mcp-config']));
    expect(claude!.env.CLAUDE_CONFIG_DIR).toBe(join(home, '.claude'));
    expect(codex!.argv.slice(0, 5)).toEqual(['exec', '--json', '--skip-git-repo-check', '--ignore-user-config', '--ignore-rules']);
    expect(codex!.env.CODEX_HOME).toBe(join(home, '.codex'));
    expect(emptyCall!.argv).not.toContain('--setting-sources');
    expect(emptyCall!.env.CLAUDE_CONFIG_DIR).toBe(join(runtime.dataDir, 'agent-config', 'claude'));
  });
});

describe('workflow steps', () => {
  it('a command step under { profile, tool } and an agent step in login mode, as the predecessor ran them', async () => {
    const log = join(tempDir(), 'calls.jsonl');
    const home = tempDir();
    withEnv({ ...STRIPPED, PATH: fakesFirst(), FAKE_AGENT_LOG: log, CLAUDE_CONFIG_DIR: join(home, '.claude') });
    const runtime = await useRuntime();
    const file = join(tempDir(), 'flow.json');
    writeFileSync(
      file,
      JSON.stringify({
        name: 'flow',
        steps: [
          { id: 'status', account: { profile: 'ops', tool: 'gh' }, target: { type: 'command', command: process.execPath, args: [REPORT], env: { REPORT_ENV: ACCOUNT_VARS.join(',') } } },
          { id: 'review', dependsOn: ['status'], target: { type: 'agent', provider: 'claude', prompt: 'review' } },
        ],
      }),
    );
    await createWorkflow(runtime, file);
    const { run } = await runWorkflow(runtime, 'flow');
    expect(run.status).toBe('succeeded');
    const [status] = workflowRunSteps(runtime.db, run.id);
    expect(JSON.parse(status!.stdout).env).toMatchObject({ LOOPS_ACCOUNT_PROFILE: 'ops', LOOPS_ACCOUNT_TOOL: 'gh', FAKE_ACCOUNT_HOME: '/accounts/ops/gh', GITHUB_TOKEN: null, XDG_CONFIG_HOME: null });
    const [review] = agentCalls(log);
    expect(review!.argv).toEqual(expect.arrayContaining(['--setting-sources', 'local', '--strict-mcp-config']));
    expect(review!.env.CLAUDE_CONFIG_DIR).toBe(join(home, '.claude'));
  });
});
