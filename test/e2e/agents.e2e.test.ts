/**
 * Agent loops through the built binary, against the fake provider CLIs in test/fixtures/agents
 * (first on PATH): one loop per provider records session id, tokens and (where the CLI reports
 * it) cost; the prompt is never in any argv; the failure modes end as failed / timed_out.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FIXTURES, Sandbox } from './cli-helpers.js';

const sandboxes: Sandbox[] = [];
afterAll(() => {
  for (const s of sandboxes) s.cleanup();
});
const FAKES = join(FIXTURES, 'agents');
const MARKER = 'PROMPT-MARKER-7f3a';

interface AgentRun {
  id: string;
  status: string;
  exitCode: number | null;
  error: string | null;
  agent: {
    provider: string;
    sessionId: string | null;
    model: string | null;
    turns: number | null;
    tokens: { input: number | null; output: number | null };
    costUsd: number | null;
    finalMessage: string | null;
    cliVersion: string | null;
  } | null;
}

function setup() {
  const s = new Sandbox();
  sandboxes.push(s);
  const dir = mkdtempSync(join(tmpdir(), 'loops-agents-'));
  const log = join(dir, 'agent.log');
  const env = { PATH: `${FAKES}${delimiter}${process.env.PATH ?? ''}`, FAKE_AGENT_LOG: log };
  return { s, dir, log, env };
}

describe('agent loops, one per provider', () => {
  it.each(['claude', 'codex', 'cursor', 'opencode', 'gemini', 'codewith', 'aicopilot'])(
    '%s: the run records the session, tokens and cost as the CLI reports them; the prompt is not in argv',
    (provider) => {
      const { s, log, env } = setup();
      const created = s.run(['create', 'agent', `a-${provider}`, '--provider', provider, '--prompt', `${MARKER}: fix the tests`, '--manual'], env);
      expect(created.code, created.stderr).toBe(0);
      const r = s.run(['run-now', `a-${provider}`, '--json'], env);
      expect(r.code, r.stderr).toBe(0);
      const run = JSON.parse(r.stdout) as AgentRun;
      expect(run.status).toBe('succeeded');
      expect(run.agent).not.toBeNull();
      expect(run.agent!.provider).toBe(provider);
      expect(run.agent!.sessionId).toEqual(expect.any(String));
      expect(run.agent!.tokens.input).toEqual(expect.any(Number));
      expect(run.agent!.tokens.output).toEqual(expect.any(Number));
      expect(run.agent!.finalMessage).toEqual(expect.any(String));
      expect(run.agent!.cliVersion).toEqual(expect.any(String));
      if (['claude', 'aicopilot', 'opencode'].includes(provider)) expect(run.agent!.costUsd).toEqual(expect.any(Number));
      const calls = readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { argv: string[]; prompt: string | null });
      const call = calls.find((c) => c.prompt !== null && c.prompt.includes(MARKER))!;
      expect(call).toBeDefined();
      for (const c of calls) expect(c.argv.join(' ')).not.toContain(MARKER);
      // The events and the table agree; replay reproduces the run.
      expect(s.json<AgentRun[]>(['runs', `a-${provider}`])[0]!.agent!.sessionId).toBe(run.agent!.sessionId);
      expect(s.run(['replay', run.id]).code).toBe(0);
    },
  );
});

describe('agent failure modes and checks', () => {
  it('a CLI that exits non-zero with no JSON is an ordinary failed run with its exit code and stderr', () => {
    const { s, env } = setup();
    s.run(['create', 'agent', 'bad', '--provider', 'claude', '--prompt', 'x', '--manual'], env);
    const r = s.run(['run-now', 'bad', '--json'], { ...env, FAKE_AGENT_MODE: 'nojson' });
    expect(r.code).toBe(3);
    const run = JSON.parse(r.stdout) as AgentRun & { stderr: string };
    expect(run).toMatchObject({ status: 'failed', exitCode: 1 });
    expect(run.agent!.sessionId).toBeNull();
    expect(run.stderr.length).toBeGreaterThan(0);
  });

  it('stdin carries the prompt and is closed: a CLI reading stdin to EOF does not hang', () => {
    const { s, env } = setup();
    s.run(['create', 'agent', 'reader', '--provider', 'codex', '--prompt', 'x', '--manual'], env);
    const r = s.run(['run-now', 'reader', '--json'], { ...env, FAKE_AGENT_MODE: 'hang-stdin' });
    expect(r.code, r.stderr).toBe(0);
  });

  it('an idle agent is stopped by --idle-timeout and recorded timed_out', () => {
    const { s, env } = setup();
    s.run(['create', 'agent', 'idle', '--provider', 'gemini', '--prompt', 'x', '--manual', '--idle-timeout', '1s', '--kill-grace', '1s'], env);
    const r = s.run(['run-now', 'idle', '--json'], { ...env, FAKE_AGENT_MODE: 'idle' });
    expect(r.code).toBe(4);
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 'timed_out', error: expect.stringMatching(/^no output for 1s \(idle timeout\)/) });
  });

  it('create refuses a provider whose CLI is not installed, naming it and the PATH searched; nothing is stored', () => {
    const { s } = setup();
    const before = s.eventCount();
    const r = s.run(['create', 'agent', 'none', '--provider', 'claude', '--prompt', 'x', '--manual'], { PATH: '/usr/bin:/bin' });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/the claude CLI \(claude\) is not installed: not found on PATH=\/usr\/bin:\/bin/);
    expect(s.eventCount()).toBe(before);
    const unknown = s.run(['create', 'agent', 'none', '--provider', 'clippy', '--prompt', 'x', '--manual']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown provider "clippy"/);
  });

  it('show redacts the prompt and env values unless --reveal', () => {
    const { s, env } = setup();
    s.run(['create', 'agent', 'quiet', '--provider', 'claude', '--prompt', `${MARKER} secret plan`, '--env', 'TOKEN=abc123', '--manual'], env);
    const text = s.run(['show', 'quiet']).stdout;
    expect(text).not.toContain(MARKER);
    expect(text).not.toContain('abc123');
    expect(JSON.stringify(s.json(['show', 'quiet']))).not.toContain(MARKER);
    expect(s.run(['show', 'quiet', '--reveal']).stdout).toContain(MARKER);
  });
});
