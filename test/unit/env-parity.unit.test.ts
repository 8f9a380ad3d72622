/**
 * Config isolation and accounts, the pure parts (issue 12, item 5):
 *  - `login` (new agents' default) passes each CLI's own settings flags and sets no configuration
 *    variable; a recorded `safe` still means the empty directory and passes no such flag;
 *  - the names `--config-isolation` takes and what each records (`safe` is the predecessor's name
 *    for `login`; `empty` records `safe`);
 *  - a workflow file's `account` — a name or `{ profile, tool }`, on a step or its target — and
 *    `config-isolation` per shape (native `safe` keeps meaning the empty directory; the
 *    predecessor's `safe` is `login`).
 */
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/events/errors.js';
import { ACCOUNT_UNSET_ENV, targetAccount } from '../../src/runtime/agents/accounts.js';
import { buildInvocation, CONFIG_ISOLATION_NAMES, configIsolationMode, PROVIDER_IDS, PROVIDERS } from '../../src/runtime/agents/index.js';
import type { AgentTarget } from '../../src/workflow/spec.js';
import { normalizeWorkflowSpec } from '../../src/workflow/spec.js';
import { agentTarget } from '../helpers/fixtures.js';

const target = (provider: string, over: Partial<AgentTarget> = {}): AgentTarget => agentTarget(provider, { configIsolation: 'login', ...over });
const ctx = { prompt: 'p', promptFile: '/run/prompt.txt', isolatedConfigDir: '/iso/cfg' };

describe('configIsolation login', () => {
  it.each([
    ['claude', ['-p', '--output-format', 'stream-json', '--verbose', '--setting-sources', 'local', '--strict-mcp-config']],
    ['codex', ['exec', '--json', '--skip-git-repo-check', '--ignore-user-config', '--ignore-rules', '-']],
    ['codewith', ['exec', '--json', '--skip-git-repo-check', '--ignore-rules', '-']],
    ['opencode', ['run', '--format', 'json', '--pure']],
  ])('%s: its own settings flags, in place, and no configuration variable (the login stays)', (provider, args) => {
    const inv = buildInvocation(target(provider), ctx);
    expect(inv.args).toEqual(args);
    expect(inv.env).toEqual({});
  });

  it('a CLI with no such flag runs with no flag and no variable added', () => {
    for (const provider of ['cursor', 'gemini', 'aicopilot']) {
      expect(PROVIDERS[provider as 'cursor'].settingsIsolationArgs).toEqual([]);
      const none = buildInvocation(target(provider, { configIsolation: 'none' }), ctx);
      expect(buildInvocation(target(provider), ctx)).toEqual(none);
    }
  });

  it('a recorded safe is still the empty directory, with none of the settings flags', () => {
    for (const provider of PROVIDER_IDS) {
      const inv = buildInvocation(target(provider, { configIsolation: 'safe' }), ctx);
      for (const flag of PROVIDERS[provider].settingsIsolationArgs) if (flag.startsWith('--')) expect(inv.args).not.toContain(flag);
      for (const name of Object.keys(PROVIDERS[provider].isolationEnv)) expect(inv.env[name]).toMatch(/^\/iso\/cfg/);
    }
  });
});

describe('--config-isolation names', () => {
  it('login is the default; safe is the predecessor\'s name for it; empty records safe', () => {
    expect(configIsolationMode(null, '--config-isolation')).toBe('login');
    expect(CONFIG_ISOLATION_NAMES).toEqual({ login: 'login', safe: 'login', empty: 'safe', none: 'none' });
    expect(configIsolationMode('empty', '--config-isolation')).toBe('safe');
  });

  it('anything else is refused naming the flag and the modes', () => {
    const error = (() => {
      try {
        configIsolationMode('toString', '--config-isolation');
      } catch (e) {
        return e;
      }
    })() as ValidationError;
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.message).toBe('--config-isolation: "toString" is not a configuration isolation mode');
    expect(error.hint).toMatch(/^login \(default/);
  });
});

describe('accounts', () => {
  it('an account run loses every credential and the predecessor\'s stripped variables', () => {
    for (const name of ['GITHUB_TOKEN', 'GH_TOKEN', 'XDG_CONFIG_HOME', 'XDG_DATA_HOME', 'XDG_STATE_HOME', 'XDG_CACHE_HOME', 'ANTHROPIC_API_KEY', 'CLAUDE_CONFIG_DIR', 'OPENAI_API_KEY', 'CODEX_HOME']) {
      expect(ACCOUNT_UNSET_ENV).toContain(name);
    }
    expect(ACCOUNT_UNSET_ENV).not.toContain('PATH');
    expect(ACCOUNT_UNSET_ENV).not.toContain('HOME');
  });

  it('an agent\'s tool is its provider unless given; a command has none of its own', () => {
    expect(targetAccount({ kind: 'agent', provider: 'codex', account: 'work' })).toEqual({ profile: 'work', tool: 'codex' });
    expect(targetAccount({ kind: 'agent', provider: 'codex', account: 'work', accountTool: 'codex-app' })).toEqual({ profile: 'work', tool: 'codex-app' });
    expect(targetAccount({ kind: 'command', account: 'work', accountTool: 'gh' })).toEqual({ profile: 'work', tool: 'gh' });
    expect(targetAccount({ kind: 'command' })).toBeNull();
  });
});

describe('workflow files: account and config-isolation', () => {
  const native = (steps: unknown[]) => normalizeWorkflowSpec({ name: 'wf', steps }).spec;
  const predecessor = (steps: unknown[]) => normalizeWorkflowSpec({ name: 'wf', steps }).spec;

  it('a step-level account on a command needs its tool: { profile, tool }', () => {
    const spec = native([{ id: 'a', run: 'gh pr list', account: { profile: 'work', tool: 'gh' } }]);
    expect(spec.steps[0]!.target).toMatchObject({ type: 'command', account: 'work', accountTool: 'gh' });
    expect(() => native([{ id: 'a', run: 'gh pr list', account: 'work' }])).toThrow(/account "work" on a command needs the tool its profile is for/);
  });

  it('an agent takes a name or { profile, tool }; the tool is kept only when it is not the provider', () => {
    const [a, b, c] = native([
      { id: 'a', agent: { provider: 'codex', prompt: 'x', account: 'work' } },
      { id: 'b', agent: { provider: 'codex', prompt: 'x', account: { profile: 'work', tool: 'codex' } } },
      { id: 'c', account: { profile: 'home', tool: 'codex-app' }, agent: { provider: 'codex', prompt: 'x', account: 'work' } },
    ]).steps.map((s) => s.target);
    expect(a).toMatchObject({ account: 'work' });
    expect(a).not.toHaveProperty('accountTool');
    expect(b).toMatchObject({ account: 'work' });
    expect(b).not.toHaveProperty('accountTool');
    // The step's account wins over its target's (the predecessor's step.account ?? target.account).
    expect(c).toMatchObject({ account: 'home', accountTool: 'codex-app' });
  });

  it('the predecessor\'s shape: account on the target and on the step, its README\'s object form', () => {
    const spec = predecessor([
      { id: 'status', target: { type: 'command', command: 'git', args: ['status'], account: { profile: 'work', tool: 'gh' } } },
      { id: 'review', dependsOn: ['status'], target: { type: 'agent', provider: 'codex', account: { profile: 'work', tool: 'codex' }, prompt: 'review' } },
      { id: 'push', dependsOn: ['review'], account: { profile: 'bot', tool: 'gh' }, target: { type: 'command', command: 'git', args: ['push'] } },
    ]);
    expect(spec.steps.map((s) => [s.target.account, s.target.type === 'command' ? s.target.accountTool : s.target.accountTool ?? null])).toEqual([
      ['work', 'gh'],
      ['work', null],
      ['bot', 'gh'],
    ]);
  });

  it('config-isolation: native safe and empty are the empty directory, the predecessor\'s safe is login, absent is login', () => {
    const iso = (v: unknown, shape: 'native' | 'predecessor') => {
      const step =
        shape === 'native'
          ? { id: 'a', agent: { provider: 'claude', prompt: 'x', ...(v === undefined ? {} : { 'config-isolation': v }) } }
          : { id: 'a', target: { type: 'agent', provider: 'claude', prompt: 'x', ...(v === undefined ? {} : { configIsolation: v }) } };
      return (normalizeWorkflowSpec({ name: 'wf', steps: [step] }).spec.steps[0]!.target as AgentTarget).configIsolation;
    };
    expect([iso(undefined, 'native'), iso('login', 'native'), iso('empty', 'native'), iso('safe', 'native'), iso('none', 'native')]).toEqual(['login', 'login', 'safe', 'safe', 'none']);
    expect([iso(undefined, 'predecessor'), iso('safe', 'predecessor'), iso('none', 'predecessor')]).toEqual(['login', 'login', 'none']);
  });
});
