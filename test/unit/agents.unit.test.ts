import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, describe, expect, it } from 'vitest';
import { LoopsError, ValidationError } from '../../src/events/errors.js';
import type { AgentTarget } from '../../src/workflow/spec.js';
import { AgentOutputParser, parseAgentOutput, type AgentReport } from '../../src/runtime/agents/parse.js';
import {
  AUTH_ENV_VARS,
  PROVIDER_IDS,
  PROVIDERS,
  buildInvocation,
  enforcedLimits,
  limitExceeded,
  parseVersionOutput,
  providerInfo,
  type AgentInvocation,
  type InvocationContext,
  type ProviderId,
} from '../../src/runtime/agents/index.js';
import { agentTarget } from '../helpers/fixtures.js';

const FIXTURES = resolve(dirname(fileURLToPath(import.meta.url)), '../fixtures/agents');
const FINAL = 'All 42 tests pass; nothing to fix.';
const SESSIONS: Record<ProviderId, string> = {
  claude: '7f3c2a9e-5d41-4b8e-9c6a-2e1f0b3d4a55',
  aicopilot: '0b8e4f12-9a3c-4d7e-8f21-6c5a3e9d1b07',
  codex: '0199a213-81c0-7800-8aa1-bbab2a035a53',
  codewith: '0199b7c4-2e5f-7a10-9c3d-4f8e1a2b6c90',
  cursor: 'c5e8a1f4-3b7d-4e2a-9f6c-8d1b0e7a5c23',
  opencode: 'ses_5a1f2e3d4ffeQx7LmN2pR8sT0v',
  gemini: '9d2e6f1a-4c8b-4a3e-b7d5-1f0e9c2a6b48',
};

const scratch = mkdtempSync(join(tmpdir(), 'loops-agents-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const target = (provider: string, over: Partial<AgentTarget> = {}): AgentTarget => agentTarget(provider, over);

const PROMPT = 'SECRET-PROMPT-7431: fix the failing tests in src/, then run them';
const ctx: InvocationContext = { prompt: PROMPT, promptFile: '/run/prompt.txt', isolatedConfigDir: '/iso/cfg' };

function errorOf(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected an error');
}

/** Runs the fake CLI of an invocation as the runner would: stdin carries the prompt and is closed. */
function runFake(inv: AgentInvocation, env: Record<string, string> = {}) {
  const result = spawnSync(join(FIXTURES, inv.command), inv.args, {
    input: inv.stdin ?? '',
    env: { ...process.env, ...inv.env, ...env },
    cwd: scratch,
    maxBuffer: 64 * 1024 * 1024,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr.toString() };
}

function expectedReport(provider: ProviderId, model: string | null): AgentReport {
  const base = { provider, sessionId: SESSIONS[provider], finalMessage: FINAL, isError: false, error: null, parseError: null };
  switch (provider) {
    case 'claude':
    case 'aicopilot':
      return {
        ...base,
        model: model ?? 'claude-sonnet-4-5-20250929',
        turns: 3,
        durationMs: 14523,
        tokens: { input: 9, output: 342, cacheRead: 18230, cacheWrite: 5210 },
        costUsd: 0.0421335,
      };
    case 'codex':
    case 'codewith':
      return { ...base, model: null, turns: 1, durationMs: null, tokens: { input: 24763, output: 122, cacheRead: 24448, cacheWrite: null }, costUsd: null };
    case 'cursor':
      return { ...base, model: model ?? 'GPT-5', turns: null, durationMs: 9120, tokens: { input: 18342, output: 402, cacheRead: 15872, cacheWrite: 0 }, costUsd: null };
    case 'opencode':
      return { ...base, model: null, turns: 2, durationMs: null, tokens: { input: 1830, output: 121, cacheRead: 23900, cacheWrite: 640 }, costUsd: 0.0165 };
    case 'gemini':
      return { ...base, model: model ?? 'gemini-2.5-pro', turns: null, durationMs: 7310, tokens: { input: 12850, output: 245, cacheRead: 8192, cacheWrite: null }, costUsd: null };
  }
}

function expectReport(actual: AgentReport, expected: AgentReport): void {
  const { costUsd, ...rest } = actual;
  const { costUsd: expectedCost, ...expectedRest } = expected;
  expect(rest).toEqual(expectedRest);
  if (expectedCost === null) expect(costUsd).toBeNull();
  else expect(costUsd).toBeCloseTo(expectedCost, 10);
}

describe('provider table', () => {
  it('names every provider, its binary and version flag', () => {
    expect(PROVIDER_IDS).toEqual(['claude', 'codex', 'cursor', 'opencode', 'gemini', 'codewith', 'aicopilot']);
    expect(Object.fromEntries(PROVIDER_IDS.map((id) => [id, PROVIDERS[id].binary]))).toEqual({
      claude: 'claude',
      codex: 'codex',
      cursor: 'cursor-agent',
      opencode: 'opencode',
      gemini: 'gemini',
      codewith: 'codewith',
      aicopilot: 'aicopilot',
    });
    for (const id of PROVIDER_IDS) {
      expect(PROVIDERS[id].versionArgs).toEqual(['--version']);
      expect(PROVIDERS[id].promptVia).toBe('stdin');
    }
    expect(PROVIDERS.codewith).toMatchObject({ assumed: true, modelledOn: 'codex', transcript: 'codex-exec-jsonl' });
    expect(PROVIDERS.aicopilot).toMatchObject({ assumed: true, modelledOn: 'claude', transcript: 'claude-stream-json' });
  });

  it('AUTH_ENV_VARS is the sorted union of every provider\'s credential and config variables', () => {
    for (const name of ['ANTHROPIC_API_KEY', 'CLAUDE_CONFIG_DIR', 'OPENAI_API_KEY', 'CODEX_HOME', 'CURSOR_API_KEY', 'CURSOR_CONFIG_DIR', 'GEMINI_API_KEY', 'GOOGLE_API_KEY', 'GEMINI_CLI_HOME']) {
      expect(AUTH_ENV_VARS).toContain(name);
    }
    for (const id of PROVIDER_IDS) for (const name of PROVIDERS[id].authEnv) expect(AUTH_ENV_VARS).toContain(name);
    expect([...AUTH_ENV_VARS].sort()).toEqual(AUTH_ENV_VARS);
    expect(new Set(AUTH_ENV_VARS).size).toBe(AUTH_ENV_VARS.length);
    // General-purpose variables are never stripped from a run.
    expect(AUTH_ENV_VARS).not.toContain('XDG_CONFIG_HOME');
    expect(AUTH_ENV_VARS).not.toContain('HOME');
  });

  it('an unknown provider is a ValidationError listing the known ones', () => {
    const error = errorOf(() => providerInfo('copilot'));
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).message).toBe('unknown agent provider "copilot"');
    expect((error as ValidationError).hint).toContain('claude, codex, cursor, opencode, gemini, codewith, aicopilot');
    expect(() => buildInvocation(target('copilot'), ctx)).toThrow(ValidationError);
    expect(() => new AgentOutputParser('copilot' as ProviderId)).toThrow(ValidationError);
  });

  it('parses version strings', () => {
    expect(parseVersionOutput('2.1.31 (Claude Code)\n')).toBe('2.1.31');
    expect(parseVersionOutput('codex-cli 0.63.0\n')).toBe('0.63.0');
    expect(parseVersionOutput('2026.01.28-fd13201\n')).toBe('2026.01.28-fd13201');
    expect(parseVersionOutput('v1.0.68')).toBe('1.0.68');
    expect(parseVersionOutput('\n  nightly build\n')).toBe('nightly build');
    expect(parseVersionOutput('')).toBeNull();
  });
});

describe('buildInvocation: exact argv', () => {
  const cases: Array<[string, Partial<AgentTarget>, string, string[]]> = [
    ['claude, defaults', {}, 'claude', ['-p', '--output-format', 'stream-json', '--verbose']],
    [
      'claude, every field',
      { model: 'sonnet', agent: 'reviewer', permissionMode: 'acceptEdits', maxTurns: 8, maxCostUsd: 1.5, extraArgs: ['--append-system-prompt', 'be brief'] },
      'claude',
      ['-p', '--output-format', 'stream-json', '--verbose', '--model', 'sonnet', '--agent', 'reviewer', '--permission-mode', 'acceptEdits', '--max-turns', '8', '--max-budget-usd', '1.5', '--append-system-prompt', 'be brief'],
    ],
    ['claude, a tiny budget is written in decimal notation', { maxCostUsd: 0.0000001 }, 'claude', ['-p', '--output-format', 'stream-json', '--verbose', '--max-budget-usd', '0.0000001']],
    ['codex, defaults', {}, 'codex', ['exec', '--json', '--skip-git-repo-check', '-']],
    [
      'codex, every field',
      { model: 'gpt-5-codex', agent: 'ci', permissionMode: 'workspace-write', cwd: '/repo', extraArgs: ['-c', 'model_reasoning_effort=high'] },
      'codex',
      ['exec', '--json', '--skip-git-repo-check', '--model', 'gpt-5-codex', '--profile', 'ci', '--sandbox', 'workspace-write', '--cd', '/repo', '-c', 'model_reasoning_effort=high', '-'],
    ],
    ['cursor, defaults', {}, 'cursor-agent', ['--print', '--output-format', 'stream-json', '--trust']],
    [
      'cursor, force + workspace',
      { model: 'gpt-5', permissionMode: 'force', cwd: '/repo', extraArgs: ['--approve-mcps'] },
      'cursor-agent',
      ['--print', '--output-format', 'stream-json', '--trust', '--model', 'gpt-5', '--force', '--workspace', '/repo', '--approve-mcps'],
    ],
    ['cursor, plan mode', { permissionMode: 'plan' }, 'cursor-agent', ['--print', '--output-format', 'stream-json', '--trust', '--mode', 'plan']],
    ['cursor, bypassPermissions means --force', { permissionMode: 'bypassPermissions' }, 'cursor-agent', ['--print', '--output-format', 'stream-json', '--trust', '--force']],
    ['opencode, defaults', {}, 'opencode', ['run', '--format', 'json']],
    [
      'opencode, every field (maxCostUsd has no flag: enforced from the reported cost)',
      { model: 'anthropic/claude-sonnet-4-5', agent: 'build', permissionMode: 'auto', maxCostUsd: 2, cwd: '/repo', extraArgs: ['--variant', 'high'] },
      'opencode',
      ['run', '--format', 'json', '--model', 'anthropic/claude-sonnet-4-5', '--agent', 'build', '--auto', '--variant', 'high'],
    ],
    ['opencode, permissionMode default adds nothing', { permissionMode: 'default' }, 'opencode', ['run', '--format', 'json']],
    ['gemini, defaults', {}, 'gemini', ['--output-format', 'stream-json']],
    [
      'gemini, every field',
      { model: 'gemini-2.5-pro', permissionMode: 'yolo', extraArgs: ['--include-directories', '../lib'] },
      'gemini',
      ['--output-format', 'stream-json', '--model', 'gemini-2.5-pro', '--approval-mode', 'yolo', '--include-directories', '../lib'],
    ],
    [
      'codewith (codex flags)',
      { model: 'cw-large', agent: 'nightly', permissionMode: 'read-only', cwd: '/repo' },
      'codewith',
      ['exec', '--json', '--skip-git-repo-check', '--model', 'cw-large', '--profile', 'nightly', '--sandbox', 'read-only', '--cd', '/repo', '-'],
    ],
    [
      'aicopilot (claude flags)',
      { model: 'large', agent: 'reviewer', permissionMode: 'plan', maxTurns: 3, maxCostUsd: 0.25 },
      'aicopilot',
      ['-p', '--output-format', 'stream-json', '--verbose', '--model', 'large', '--agent', 'reviewer', '--permission-mode', 'plan', '--max-turns', '3', '--max-budget-usd', '0.25'],
    ],
  ];
  const providerOf: Record<string, string> = { 'cursor-agent': 'cursor' };

  it.each(cases)('%s', (_name, fields, command, args) => {
    const provider = providerOf[command] ?? command;
    const inv = buildInvocation(target(provider, fields), ctx);
    expect(inv.command).toBe(command);
    expect(inv.args).toEqual(args);
    expect(inv.promptVia).toBe('stdin');
    expect(inv.stdin).toBe(PROMPT);
    expect(inv.output).toBe('jsonl');
    expect(inv.env).toEqual({});
  });

  it('a resolved cwd from the context wins over the target\'s', () => {
    expect(buildInvocation(target('codex', { cwd: 'rel/dir' }), { ...ctx, cwd: '/abs/dir' }).args).toContain('/abs/dir');
    expect(buildInvocation(target('codex', { cwd: 'rel/dir' }), { ...ctx, cwd: null }).args).not.toContain('--cd');
  });

  it('the prompt is never in argv: it goes to stdin for every provider', () => {
    for (const id of PROVIDER_IDS) {
      const inv = buildInvocation(target(id, { model: id === 'opencode' ? 'openai/gpt-5' : 'm1', extraArgs: ['--x'] }), ctx);
      expect(inv.promptVia).toBe('stdin');
      expect(inv.stdin).toBe(PROMPT);
      for (const arg of [inv.command, ...inv.args]) expect(arg).not.toContain('SECRET-PROMPT-7431');
    }
  });

  it('configIsolation safe points the config variable at the isolated directory; none leaves the user\'s', () => {
    const expected: Record<ProviderId, Record<string, string>> = {
      claude: { CLAUDE_CONFIG_DIR: '/iso/cfg' },
      codex: { CODEX_HOME: '/iso/cfg' },
      cursor: { CURSOR_CONFIG_DIR: '/iso/cfg' },
      opencode: { XDG_CONFIG_HOME: '/iso/cfg/config', XDG_DATA_HOME: '/iso/cfg/data' },
      gemini: { GEMINI_CLI_HOME: '/iso/cfg' },
      codewith: { CODEWITH_HOME: '/iso/cfg' },
      aicopilot: { AICOPILOT_CONFIG_DIR: '/iso/cfg' },
    };
    for (const id of PROVIDER_IDS) {
      expect(buildInvocation(target(id, { configIsolation: 'safe' }), ctx).env).toEqual(expected[id]);
      expect(buildInvocation(target(id, { configIsolation: 'none' }), ctx).env).toEqual({});
      expect(PROVIDERS[id].configDirEnv).toBe(Object.keys(expected[id])[0]);
    }
    const error = errorOf(() => buildInvocation(target('claude', { configIsolation: 'safe' }), { ...ctx, isolatedConfigDir: null }));
    expect(error).toBeInstanceOf(LoopsError);
    expect((error as LoopsError).code).toBe('internal');
  });

  it('rejects what a provider cannot do, with clear messages', () => {
    const rejects: Array<[string, Partial<AgentTarget>, string]> = [
      ['cursor', { agent: 'x' }, 'cursor: agent is not supported: cursor-agent has no named agents or profiles'],
      ['gemini', { agent: 'x' }, 'gemini: agent is not supported: gemini has no named agents or profiles'],
      ['codex', { maxTurns: 3 }, 'codex: maxTurns is not supported: codex has no flag that limits turns and does not report them as it goes, so the limit could not be enforced'],
      ['gemini', { maxTurns: 3 }, 'gemini: maxTurns is not supported: gemini has no flag that limits turns and does not report them as it goes, so the limit could not be enforced'],
      ['codex', { maxCostUsd: 1 }, 'codex: maxCostUsd is not supported: codex has no budget flag and does not report its cost, so the budget could not be enforced'],
      ['cursor', { maxCostUsd: 1 }, 'cursor: maxCostUsd is not supported: cursor-agent has no budget flag and does not report its cost, so the budget could not be enforced'],
      ['gemini', { maxCostUsd: 1 }, 'gemini: maxCostUsd is not supported: gemini has no budget flag and does not report its cost, so the budget could not be enforced'],
      ['cursor', { permissionMode: 'acceptEdits' }, 'cursor: unknown permissionMode "acceptEdits"'],
      ['opencode', { permissionMode: 'plan' }, 'opencode: unknown permissionMode "plan"'],
      ['opencode', { model: 'gpt-5' }, 'opencode: model "gpt-5" must be provider/model'],
      ['claude', { model: '--dangerously-skip-permissions' }, 'claude: model "--dangerously-skip-permissions" starts with "-" and would be read as a flag'],
      ['codex', { agent: ' ' }, 'codex: agent is empty'],
      ['gemini', { permissionMode: 'yolo\n--x' }, 'gemini: permissionMode must be a single line'],
      ['claude', { maxTurns: 0 }, 'claude: maxTurns must be a positive integer'],
    ];
    for (const [provider, fields, message] of rejects) {
      const error = errorOf(() => buildInvocation(target(provider, fields), ctx));
      expect(error, `${provider} ${JSON.stringify(fields)}`).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).message).toBe(message);
    }
    expect((errorOf(() => buildInvocation(target('cursor', { permissionMode: 'x' }), ctx)) as ValidationError).hint).toBe(
      'use one of: default, force, yolo, bypassPermissions, plan, ask',
    );
    const empty = errorOf(() => buildInvocation(target('claude'), { ...ctx, prompt: '  \n' }));
    expect((empty as ValidationError).message).toBe('claude: the prompt is empty');
  });
});

describe('limits loops enforces itself', () => {
  it('only those the CLI has no flag for and reports as it goes', () => {
    expect(enforcedLimits({ provider: 'opencode', maxCostUsd: 2, maxTurns: 5 })).toEqual({ maxCostUsd: 2, maxTurns: 5 });
    expect(enforcedLimits({ provider: 'opencode', maxCostUsd: null, maxTurns: null })).toBeNull();
    // claude and aicopilot get --max-budget-usd / --max-turns: the CLI enforces them.
    expect(enforcedLimits({ provider: 'claude', maxCostUsd: 2, maxTurns: 5 })).toBeNull();
    expect(enforcedLimits({ provider: 'aicopilot', maxCostUsd: 2, maxTurns: null })).toBeNull();
    expect(enforcedLimits({ provider: 'codex', maxCostUsd: null, maxTurns: null })).toBeNull();
    // opencode takes maxTurns now (enforced from its steps); the adapter passes no flag for it.
    expect(buildInvocation(target('opencode', { maxTurns: 4, maxCostUsd: 1 }), ctx).args).toEqual(['run', '--format', 'json']);
  });

  it('says which limit was passed, by how much, and that loops stopped the run', () => {
    const limits = { maxCostUsd: 0.05, maxTurns: 3 };
    expect(limitExceeded('opencode', { costUsd: 0.05, turns: 3 }, limits)).toBeNull();
    expect(limitExceeded('opencode', { costUsd: null, turns: null }, limits)).toBeNull();
    expect(limitExceeded('opencode', { costUsd: 0.0615, turns: 3 }, limits)).toBe(
      'over budget: opencode reported a cost of $0.0615 so far, above the limit of $0.0500 (max cost); stopped by loops',
    );
    expect(limitExceeded('opencode', { costUsd: 0.01, turns: 4 }, limits)).toBe(
      'over the turn limit: opencode reported 4 turns so far, above the limit of 3 (max turns); stopped by loops',
    );
    expect(limitExceeded('opencode', { costUsd: 12.5, turns: 1 }, { maxCostUsd: 10, maxTurns: null })).toBe(
      'over budget: opencode reported a cost of $12.50 so far, above the limit of $10.00 (max cost); stopped by loops',
    );
  });
});

describe('fake CLIs: the invocation each adapter builds runs its fake', () => {
  for (const id of PROVIDER_IDS) {
    it(`${id}: argv, stdin prompt, isolated config, and the parsed transcript`, () => {
      const log = join(scratch, `${id}.log`);
      const model = id === 'opencode' ? 'anthropic/claude-sonnet-4-5' : id === 'codex' || id === 'codewith' ? 'gpt-5-codex' : `${id}-model-x`;
      const inv = buildInvocation(target(id, { model, configIsolation: 'safe' }), ctx);
      const run = runFake(inv, { FAKE_AGENT_LOG: log, ANTHROPIC_API_KEY: 'sk-test-1' });
      expect(run.stderr).toBe('');
      expect(run.status).toBe(0);
      const entries = readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(entries).toHaveLength(1);
      const entry = entries[0]!;
      expect(entry.argv).toEqual(inv.args);
      expect(entry.prompt).toBe(PROMPT);
      expect(entry.promptSource).toBe('stdin');
      expect(entry.cwd).toBe(scratch);
      expect(entry.env).toMatchObject({ ...inv.env, ANTHROPIC_API_KEY: 'sk-test-1' });
      // The CLIs that do not report the model: the report says null rather than guess.
      const reportedModel = id === 'codex' || id === 'codewith' || id === 'opencode' ? null : model;
      expectReport(parseAgentOutput(id, run.stdout), expectedReport(id, reportedModel));
    });
  }

  it('each fake answers --version, and the version parses', () => {
    const expected: Record<ProviderId, string> = {
      claude: '2.1.31',
      codex: '0.63.0',
      cursor: '2026.01.28-fd13201',
      opencode: '1.0.68',
      gemini: '0.21.0',
      codewith: '0.9.1',
      aicopilot: '1.4.2',
    };
    for (const id of PROVIDER_IDS) {
      const result = spawnSync(join(FIXTURES, PROVIDERS[id].binary), [...PROVIDERS[id].versionArgs], { stdio: ['ignore', 'pipe', 'pipe'] });
      expect(result.status).toBe(0);
      expect(parseVersionOutput(result.stdout.toString())).toBe(expected[id]);
    }
  });

  it('the fakes insist on the non-interactive flags their real CLI needs', () => {
    const claude = spawnSync(join(FIXTURES, 'claude'), ['-p', '--output-format', 'stream-json'], { input: 'hi' });
    expect(claude.status).toBe(1);
    expect(claude.stderr.toString()).toContain('requires --verbose');
    const empty = spawnSync(join(FIXTURES, 'codex'), ['exec', '--json', '-'], { stdio: ['ignore', 'pipe', 'pipe'] });
    expect(empty.status).toBe(1);
    expect(empty.stderr.toString()).toContain('Input must be provided');
  });

  it('a prompt passed in argv is seen (and logged) as such', () => {
    const log = join(scratch, 'argv.log');
    const result = spawnSync(join(FIXTURES, 'gemini'), ['--output-format', 'stream-json', '-p', 'in argv'], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, FAKE_AGENT_LOG: log } });
    expect(result.status).toBe(0);
    expect(JSON.parse(readFileSync(log, 'utf8'))).toMatchObject({ prompt: 'in argv', promptSource: 'argv' });
  });
});

describe('failure modes of the fakes parse into ordinary reports', () => {
  it('nojson: exit 1, plain text on stderr, nothing parsed', () => {
    for (const id of PROVIDER_IDS) {
      const run = runFake(buildInvocation(target(id), ctx), { FAKE_AGENT_MODE: 'nojson' });
      expect(run.status).toBe(1);
      expect(run.stderr).toContain('Invalid API key');
      expect(parseAgentOutput(id, run.stdout)).toEqual({
        provider: id,
        model: null,
        sessionId: null,
        turns: null,
        durationMs: null,
        tokens: { input: null, output: null, cacheRead: null, cacheWrite: null },
        costUsd: null,
        finalMessage: null,
        isError: null,
        error: null,
        parseError: 'no output: the CLI printed nothing on stdout',
      });
    }
  });

  it('truncated: exit 1, the JSON cut mid-object; what was said before is kept', () => {
    for (const id of PROVIDER_IDS) {
      const run = runFake(buildInvocation(target(id), ctx), { FAKE_AGENT_MODE: 'truncated' });
      expect(run.status).toBe(1);
      const parser = new AgentOutputParser(id);
      parser.push(run.stdout);
      const report = parser.end();
      expect(parser.stats.truncated).toBe(true);
      expect(report.sessionId).toBe(SESSIONS[id]);
      expect(report.parseError).toBe('truncated output: the last JSON line is incomplete and no final result was printed');
      // Only opencode reports cost per step: the steps before the cut are counted.
      if (id === 'opencode') expect(report.costUsd).toBeCloseTo(0.0123, 10);
      else expect(report.costUsd).toBeNull();
    }
    // claude's answer was printed before the (cut) result: it is the final message.
    const claude = parseAgentOutput('claude', runFake(buildInvocation(target('claude'), ctx), { FAKE_AGENT_MODE: 'truncated' }).stdout);
    expect(claude).toMatchObject({ finalMessage: FINAL, isError: null, turns: null, tokens: { input: null, output: null, cacheRead: null, cacheWrite: null } });
  });

  it('hang-stdin: the fake waits for EOF on an open stdin, and proceeds once it is closed', async () => {
    const child = spawn(join(FIXTURES, 'claude'), ['-p', '--output-format', 'stream-json', '--verbose'], {
      env: { ...process.env, FAKE_AGENT_MODE: 'hang-stdin' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out = collect(child);
    child.stdin!.write(PROMPT);
    await sleep(400);
    expect(child.exitCode).toBeNull(); // stdin still open: stuck, as the real CLIs are
    child.stdin!.end();
    const code = await exited(child);
    expect(code).toBe(0);
    expect(out.stderr()).toContain('stdin reached EOF');
    expect(parseAgentOutput('claude', out.stdout()).finalMessage).toBe(FINAL);
  });

  it('idle: one line, then silence until killed', async () => {
    const child = spawn(join(FIXTURES, 'codex'), ['exec', '--json', '-'], { env: { ...process.env, FAKE_AGENT_MODE: 'idle' }, stdio: ['pipe', 'pipe', 'pipe'] });
    child.stdin!.end(PROMPT);
    const out = collect(child);
    await waitFor(() => out.stdout().length > 0);
    await sleep(300);
    expect(child.exitCode).toBeNull();
    expect(out.stdout().toString()).toBe(`{"type":"thread.started","thread_id":"${SESSIONS.codex}"}\n`);
    child.kill('SIGKILL');
    await exited(child);
  });

  it('ignore-term: SIGTERM does not stop it, SIGKILL does', async () => {
    const child = spawn(join(FIXTURES, 'gemini'), ['--output-format', 'stream-json'], { env: { ...process.env, FAKE_AGENT_MODE: 'ignore-term' }, stdio: ['pipe', 'pipe', 'pipe'] });
    child.stdin!.end(PROMPT);
    const out = collect(child);
    await waitFor(() => out.stdout().length > 0);
    child.kill('SIGTERM');
    await waitFor(() => out.stderr().includes('ignoring SIGTERM'));
    expect(child.exitCode).toBeNull();
    child.kill('SIGKILL');
    expect(await exited(child)).toBe('SIGKILL');
  });

  it('spawn-child: a detached child in its own process group, pid written to a file', async () => {
    const pidFile = join(scratch, 'child.pid');
    const child = spawn(join(FIXTURES, 'opencode'), ['run', '--format', 'json'], {
      env: { ...process.env, FAKE_AGENT_MODE: 'spawn-child', FAKE_AGENT_CHILD_PID_FILE: pidFile },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    child.stdin!.end(PROMPT);
    const out = collect(child);
    await waitFor(() => out.stdout().length > 0 && existsSync(pidFile) && readFileSync(pidFile, 'utf8') !== '');
    const grandchild = Number(readFileSync(pidFile, 'utf8'));
    try {
      const pgid = (pid: number) => Number(spawnSync('ps', ['-o', 'pgid=', '-p', String(pid)]).stdout.toString().trim());
      expect(pgid(grandchild)).toBe(grandchild);
      expect(pgid(grandchild)).not.toBe(pgid(child.pid!));
    } finally {
      process.kill(grandchild, 'SIGKILL');
      child.kill('SIGKILL');
      await exited(child);
    }
  });
});

describe('AgentOutputParser', () => {
  const transcripts = new Map<ProviderId, Buffer>();
  const transcriptOf = (id: ProviderId): Buffer => {
    if (!transcripts.has(id)) transcripts.set(id, runFake(buildInvocation(target(id), ctx)).stdout);
    return transcripts.get(id)!;
  };

  it('gives the same report whatever the chunk boundaries', () => {
    for (const id of PROVIDER_IDS) {
      const whole = transcriptOf(id);
      const expected = parseAgentOutput(id, whole);
      expect(expected.parseError).toBeNull();
      for (const size of [1, 7, 64, 4096]) {
        const parser = new AgentOutputParser(id);
        for (let i = 0; i < whole.length; i += size) parser.push(whole.subarray(i, i + size));
        expect(parser.end()).toEqual(expected);
      }
      // A reused chunk buffer (as a stream may hand out) does not corrupt lines in progress.
      const reuse = Buffer.alloc(13);
      const parser = new AgentOutputParser(id);
      for (let i = 0; i < whole.length; i += reuse.length) {
        const n = whole.copy(reuse, 0, i, i + reuse.length);
        parser.push(reuse.subarray(0, n));
        reuse.fill(0x7b);
      }
      expect(parser.end()).toEqual(expected);
    }
  });

  it('tolerates non-JSON lines, malformed JSON, CRLF and blank lines', () => {
    const body = transcriptOf('claude').toString().split('\n').filter(Boolean);
    const noisy = ['npm warn deprecated something', '', '{"type": broken', ...body.map((l) => `${l}\r`), '   ', 'Done.'].join('\n');
    const parser = new AgentOutputParser('claude');
    parser.push(noisy);
    expect(parser.end()).toEqual(parseAgentOutput('claude', transcriptOf('claude')));
    expect(parser.stats).toMatchObject({ nonJsonLines: 2, malformedLines: 1, jsonLines: body.length, truncated: false });
  });

  it('skips and counts lines longer than maxLineBytes, in one chunk or across chunks', () => {
    const long = JSON.stringify({ type: 'user', message: { role: 'user', content: 'z'.repeat(500) } });
    const text = [
      JSON.stringify({ type: 'system', subtype: 'init', session_id: 's-1', model: 'm-1' }),
      long,
      JSON.stringify({ type: 'result', subtype: 'success', is_error: false, num_turns: 1, result: 'ok', session_id: 's-1' }),
      '',
    ].join('\n');
    for (const size of [text.length, 10]) {
      const parser = new AgentOutputParser('claude', { maxLineBytes: 200 });
      for (let i = 0; i < text.length; i += size) parser.push(text.slice(i, i + size));
      expect(parser.end()).toMatchObject({ sessionId: 's-1', model: 'm-1', turns: 1, finalMessage: 'ok', isError: false, parseError: null });
      expect(parser.stats.skippedLongLines).toBe(1);
    }
  });

  it('no JSON at all, or output cut inside the only object', () => {
    expect(parseAgentOutput('codex', 'Error: unauthorized\nplease log in\n').parseError).toBe('no JSON in the output (34 bytes, 2 lines of text)');
    expect(parseAgentOutput('cursor', '{"type":"system","subtype":"in').parseError).toBe('truncated output: it ends inside a JSON object');
    expect(parseAgentOutput('gemini', '').parseError).toBe('no output: the CLI printed nothing on stdout');
    const early = parseAgentOutput('gemini', '{"type":"init","session_id":"g-1","model":"gemini-2.5-flash"}\n');
    expect(early).toMatchObject({ sessionId: 'g-1', model: 'gemini-2.5-flash', parseError: 'no final result in the output: the CLI stopped before reporting one' });
  });

  it('claude: an error result, the single --output-format json object, and the old cost field', () => {
    const maxTurns = [
      '{"type":"system","subtype":"init","session_id":"s-2","model":"claude-haiku-4-5"}',
      '{"type":"assistant","message":{"model":"claude-haiku-4-5","role":"assistant","content":[{"type":"text","text":"Still working on it"}]},"session_id":"s-2"}',
      '{"type":"result","subtype":"error_max_turns","is_error":true,"duration_ms":50,"num_turns":2,"session_id":"s-2","total_cost_usd":0.01,"usage":{"input_tokens":4,"output_tokens":5}}',
    ].join('\n');
    expect(parseAgentOutput('claude', maxTurns)).toMatchObject({
      isError: true,
      turns: 2,
      // The interim message is no answer: the turn limit is the error.
      finalMessage: null,
      error: { message: 'error_max_turns after 2 turns', type: 'error_max_turns', status: null },
      tokens: { input: 4, output: 5, cacheRead: null, cacheWrite: null },
      parseError: null,
    });
    const budget = '{"type":"result","subtype":"error_max_budget_usd","num_turns":4,"session_id":"s-3"}\n';
    expect(parseAgentOutput('claude', budget)).toMatchObject({ isError: true, turns: 4 });
    const old = '{"type":"result","subtype":"success","is_error":false,"cost_usd":0.5,"result":"done","session_id":"s-4"}';
    expect(parseAgentOutput('claude', old)).toMatchObject({ costUsd: 0.5, finalMessage: 'done', isError: false, parseError: null });
  });

  it('codex: a failed turn and a stream error are errors', () => {
    const failed = ['{"type":"thread.started","thread_id":"t-1"}', '{"type":"turn.started"}', '{"type":"error","message":"stream disconnected"}', '{"type":"turn.failed","error":{"message":"quota exceeded"}}'].join('\n');
    expect(parseAgentOutput('codex', failed)).toMatchObject({ sessionId: 't-1', isError: true, turns: 1, finalMessage: null, parseError: null });
  });

  it('opencode: an error event makes the run an error; steps are counted as turns', () => {
    const text = [
      '{"type":"step_start","sessionID":"ses_x","part":{"type":"step-start"}}',
      '{"type":"error","sessionID":"ses_x","error":{"name":"ProviderAuthError","data":{"message":"no key"}}}',
    ].join('\n');
    expect(parseAgentOutput('opencode', text)).toMatchObject({ sessionId: 'ses_x', isError: true, turns: null, parseError: 'no final result in the output: the CLI stopped before reporting one' });
    // Stopped after a step that asked for tools: more steps were due, so there is no final result.
    const cut = transcriptOf('opencode').toString().split('\n').slice(0, 3).join('\n');
    expect(parseAgentOutput('opencode', cut)).toMatchObject({
      turns: 1,
      costUsd: 0.0123,
      isError: false,
      finalMessage: null,
      parseError: 'no final result in the output: the CLI stopped before reporting one',
    });
  });

  it('progress: the cost and turns reported so far, while the output streams', () => {
    const parser = new AgentOutputParser('opencode');
    expect(parser.progress()).toEqual({ costUsd: null, turns: null });
    const lines = transcriptOf('opencode').toString().split('\n');
    parser.push(lines.slice(0, 3).join('\n') + '\n');
    expect(parser.progress()).toEqual({ costUsd: 0.0123, turns: 1 });
    parser.push(lines.slice(3).join('\n'));
    expect(parser.progress()).toEqual({ costUsd: 0.0165, turns: 2 });
    // claude reports its turns and cost only in the final result.
    const claude = new AgentOutputParser('claude');
    const cl = transcriptOf('claude').toString().split('\n').filter(Boolean);
    claude.push(cl.slice(0, -1).join('\n') + '\n');
    expect(claude.progress()).toEqual({ costUsd: null, turns: null });
    claude.push(cl[cl.length - 1]! + '\n');
    expect(claude.progress().costUsd).toBeGreaterThan(0);
  });

  it('gemini: the final message is the assistant text after the last tool call; pretty-printed json works too', () => {
    const report = parseAgentOutput('gemini', transcriptOf('gemini'));
    expect(report.finalMessage).toBe(FINAL); // not "I'll run the tests." from before the tool call
    const pretty = JSON.stringify(
      {
        session_id: 'g-9',
        response: 'Done.',
        stats: { models: { 'gemini-2.5-pro': { api: { totalRequests: 2 }, tokens: { prompt: 100, candidates: 20, total: 150, cached: 60, thoughts: 30, tool: 0 } } } },
      },
      null,
      2,
    );
    expect(parseAgentOutput('gemini', pretty)).toEqual({
      provider: 'gemini',
      model: 'gemini-2.5-pro',
      sessionId: 'g-9',
      turns: null,
      durationMs: null,
      tokens: { input: 100, output: 20, cacheRead: 60, cacheWrite: null },
      costUsd: null,
      finalMessage: 'Done.',
      isError: false,
      error: null,
      parseError: null,
    });
    const failed = '{"type":"result","status":"error","error":{"type":"FatalTurnLimitedError","message":"turn limit"}}';
    expect(parseAgentOutput('gemini', failed)).toMatchObject({ isError: true, parseError: null });
  });

  it('cursor: without usage (older versions) tokens are null; the last assistant message is the answer', () => {
    const text = [
      '{"type":"system","subtype":"init","session_id":"c-1","model":"Auto"}',
      '{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Looking."}]},"session_id":"c-1"}',
      '{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Fixed it."}]},"session_id":"c-1"}',
      '{"type":"result","subtype":"success","duration_ms":1234,"is_error":false,"result":"Looking.Fixed it.","session_id":"c-1"}',
    ].join('\n');
    expect(parseAgentOutput('cursor', text)).toEqual({
      provider: 'cursor',
      model: 'Auto',
      sessionId: 'c-1',
      turns: null,
      durationMs: 1234,
      tokens: { input: null, output: null, cacheRead: null, cacheWrite: null },
      costUsd: null,
      finalMessage: 'Fixed it.',
      isError: false,
      error: null,
      parseError: null,
    });
    // The json format (a result object only): its result is the answer.
    expect(parseAgentOutput('cursor', '{"type":"result","subtype":"success","is_error":false,"result":"Only this.","session_id":"c-2"}').finalMessage).toBe('Only this.');
  });

  it('caps the final message', () => {
    const result = `{"type":"result","subtype":"success","is_error":false,"result":"${'a'.repeat(50)}"}`;
    expect(parseAgentOutput('claude', result, { maxMessageChars: 10 }).finalMessage).toBe(`${'a'.repeat(10)}\n…[truncated 40 characters]`);
    const deltas = Array.from({ length: 6 }, () => '{"type":"message","role":"assistant","content":"abcd","delta":true}').join('\n');
    expect(parseAgentOutput('gemini', deltas, { maxMessageChars: 10 }).finalMessage).toBe('abcdabcdab\n…[truncated 14 characters]');
  });

  it('ignores values of the wrong type instead of trusting them', () => {
    const text = '{"type":"result","subtype":"success","is_error":"no","num_turns":-1,"duration_ms":"12","total_cost_usd":null,"usage":{"input_tokens":"9"},"result":42,"session_id":7}';
    expect(parseAgentOutput('claude', text)).toEqual({
      provider: 'claude',
      model: null,
      sessionId: null,
      turns: null,
      durationMs: null,
      tokens: { input: null, output: null, cacheRead: null, cacheWrite: null },
      costUsd: null,
      finalMessage: null,
      isError: false,
      error: null,
      parseError: null,
    });
  });
});

describe('bounded memory', () => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const retained = () => {
    gc();
    gc();
    const m = process.memoryUsage();
    return m.heapUsed + m.arrayBuffers;
  };
  const MiB = 1024 * 1024;

  it('200 MB of JSONL pushed in chunks keeps memory flat', () => {
    const line = `${JSON.stringify({ type: 'user', message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'x'.repeat(900) }] }, session_id: 's' })}\n`;
    // A 1 MiB block whose lines straddle chunk boundaries (block length is not a multiple of the line length).
    const block = Buffer.from(line.repeat(Math.ceil(MiB / line.length)));
    const parser = new AgentOutputParser('claude');
    parser.push('{"type":"system","subtype":"init","session_id":"big","model":"m"}\n');
    const before = retained();
    let peak = 0;
    const chunk = 64 * 1024 + 13;
    for (let pushed = 0, n = 0; pushed < 200 * MiB; n++) {
      for (let i = 0; i < block.length; i += chunk) parser.push(block.subarray(i, i + chunk));
      pushed += block.length;
      if (n % 50 === 0) peak = Math.max(peak, retained() - before);
    }
    parser.push('{"type":"result","subtype":"success","is_error":false,"num_turns":9,"result":"done","session_id":"big"}\n');
    const report = parser.end();
    expect(report).toMatchObject({ sessionId: 'big', model: 'm', turns: 9, finalMessage: 'done', parseError: null });
    expect(parser.stats.bytes).toBeGreaterThan(200 * MiB);
    expect(peak).toBeLessThan(16 * MiB);
    expect(retained() - before).toBeLessThan(16 * MiB);
  }, 120_000);

  it('the huge fake (~200 MB, one 2 MiB line) streamed through the parser: a complete report, memory flat', async () => {
    for (const id of ['claude', 'gemini'] as const) {
      const inv = buildInvocation(target(id), ctx);
      const child = spawn(join(FIXTURES, inv.command), inv.args, { env: { ...process.env, FAKE_AGENT_MODE: 'huge' }, stdio: ['pipe', 'pipe', 'pipe'] });
      child.stdin!.end(inv.stdin);
      const parser = new AgentOutputParser(id);
      const before = retained();
      let chunks = 0;
      let peak = 0;
      child.stdout!.on('data', (chunk: Buffer) => {
        parser.push(chunk);
        if (++chunks % 500 === 0) peak = Math.max(peak, retained() - before);
      });
      const code = await exited(child);
      expect(code).toBe(0);
      const report = parser.end();
      expectReport(report, expectedReport(id, null));
      expect(parser.stats.bytes).toBeGreaterThan(200 * MiB);
      expect(parser.stats.skippedLongLines).toBe(1);
      expect(peak).toBeLessThan(32 * MiB);
    }
  }, 120_000);
});

// ── helpers ───────────────────────────────────────────────────────────────────────────────────────

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function waitFor(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await sleep(20);
  }
}

function collect(child: ChildProcess) {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout!.on('data', (c: Buffer) => out.push(c));
  child.stderr!.on('data', (c: Buffer) => err.push(c));
  return { stdout: () => Buffer.concat(out), stderr: () => Buffer.concat(err).toString() };
}

/** The exit code, or the signal name when a signal ended the process. */
function exited(child: ChildProcess): Promise<number | string> {
  return new Promise((resolveExit) => {
    if (child.exitCode !== null || child.signalCode !== null) resolveExit(child.exitCode ?? child.signalCode!);
    else child.once('exit', (code, signal) => resolveExit(code ?? signal!));
  });
}
