/**
 * Agent loops through the built binary, against the fake provider CLIs in test/fixtures/agents
 * (first on PATH): one loop per provider records session id, tokens and (where the CLI reports
 * it) cost; the prompt is never in any argv; the failure modes end as failed / timed_out.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { FIXTURES, pidAlive, useSandboxes } from './cli-helpers.js';

const sandbox = useSandboxes();
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
  const s = sandbox();
  const dir = tempDir('loops-agents-'); // removed when the test finishes
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
    s.run(['create', 'agent', 'quiet', '--provider', 'claude', '--prompt', `${MARKER} secret plan`, '--env', 'REGION=abc123', '--manual'], env);
    const text = s.run(['show', 'quiet']).stdout;
    expect(text).not.toContain(MARKER);
    expect(text).not.toContain('abc123');
    expect(JSON.stringify(s.json(['show', 'quiet']))).not.toContain(MARKER);
    expect(s.run(['show', 'quiet', '--reveal']).stdout).toContain(MARKER);
  });
});

describe('secrets', () => {
  const SECRET = 'sk-test-S3CR3T-v4lue-9f8e7d';
  const AUTH = 'anthropic-K3Y-0a1b2c3d4e';

  function grepDataDir(dir: string, needles: string[]): string[] {
    const hits: string[] = [];
    const walk = (d: string) => {
      for (const name of readdirSync(d)) {
        const p = join(d, name);
        if (statSync(p).isDirectory()) walk(p);
        else {
          const text = readFileSync(p).toString('latin1');
          for (const n of needles) if (text.includes(n)) hits.push(`${p}: ${n}`);
        }
      }
    };
    walk(dir);
    return hits;
  }

  it('a --secret-env value and an inherited auth variable are masked in tails, run files and events; a grep of the data directory finds neither', () => {
    const { s, dir } = setup();
    const script = join(dir, 'leak.sh');
    writeFileSync(
      script,
      'echo "token=$MY_TOKEN"\nprintf %s "$MY_TOKEN" | base64\necho "{\\"k\\":\\"$MY_TOKEN\\"}" >&2\necho "auth=$ANTHROPIC_API_KEY"\nexit 1\n',
      { mode: 0o755 },
    );
    const env = { MY_TOKEN: SECRET, ANTHROPIC_API_KEY: AUTH };
    const created = s.run(['create', 'command', 'leak', '--cmd', script, '--secret-env', 'MY_TOKEN', '--manual'], env);
    expect(created.code, created.stderr).toBe(0);
    const r = s.run(['run-now', 'leak', '--json'], env);
    expect(r.code).toBe(3);
    const run = JSON.parse(r.stdout) as { id: string; stdout: string; stderr: string };
    expect(run.stdout).toContain('token=***');
    expect(run.stdout).toContain('auth=***');
    expect(run.stderr).toContain('{"k":"***"}');
    const needles = [SECRET, AUTH, Buffer.from(SECRET).toString('base64').slice(0, 20)];
    expect(grepDataDir(s.dataDir, needles)).toEqual([]);
    expect(s.run(['events', run.id]).stdout).not.toContain(SECRET);
    // The secret is not stored with the loop either: a runner without it fails the run clearly.
    const without = s.run(['run-now', 'leak', '--json'], { ANTHROPIC_API_KEY: AUTH });
    expect(JSON.parse(without.stdout)).toMatchObject({ status: 'failed', error: expect.stringMatching(/secret variable MY_TOKEN not set in the environment of runner/) });
    expect(s.run(['create', 'command', 'x', '--cmd', 'true', '--secret-env', 'A', '--env', 'A=1', '--manual']).code).toBe(2);
  });

  it('a workflow step prints a spec secret: masked in its files, events and tables', () => {
    const { s, dir } = setup();
    const file = join(dir, 'wf.yaml');
    writeFileSync(file, 'name: sec\nsecrets: [MY_TOKEN]\nsteps:\n  - id: a\n    run: echo "t=$MY_TOKEN"\n');
    s.run(['workflows', 'create', file]);
    const r = s.run(['workflows', 'run', 'sec', '--json'], { MY_TOKEN: SECRET });
    expect(r.code, r.stderr).toBe(0);
    const id = (JSON.parse(r.stdout) as { id: string }).id;
    expect(readFileSync(join(s.dataDir, 'runs', id, 'a', '1', 'stdout.log'), 'utf8')).toBe('t=***\n');
    expect(grepDataDir(s.dataDir, [SECRET])).toEqual([]);
  });
});

describe('accounts', () => {
  it('--account routes the run to the profile: its directory replaces every inherited credential; a missing profile fails before the CLI starts', () => {
    const { s, dir, log, env } = setup();
    const profile = join(dir, 'claude-work');
    mkdirSync(profile);
    expect(s.run(['accounts', 'add', 'work', '--tool', 'claude', '--dir', profile]).code).toBe(0);
    expect(s.json<Array<{ name: string }>>(['accounts', 'list']).map((a) => a.name)).toEqual(['work']);
    const missing = s.run(['create', 'agent', 'nope', '--provider', 'claude', '--prompt', 'x', '--account', 'ghost', '--manual'], env);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/account ghost is not registered/);
    expect(s.run(['create', 'agent', 'w', '--provider', 'claude', '--prompt', 'x', '--account', 'work', '--manual'], env).code).toBe(0);
    const inherited = { ...env, ANTHROPIC_API_KEY: 'inherited-key-1234', CLAUDE_CONFIG_DIR: '/home/someone/.claude' };
    const r = s.run(['run-now', 'w', '--json'], inherited);
    expect(r.code, r.stderr).toBe(0);
    const call = JSON.parse(readFileSync(log, 'utf8').trim().split('\n').at(-1)!) as { env: Record<string, string | undefined> };
    expect(call.env.CLAUDE_CONFIG_DIR).toBe(profile);
    expect(call.env.ANTHROPIC_API_KEY).toBeUndefined();
    // The profile goes away: the next run fails before the CLI starts.
    const calls = readFileSync(log, 'utf8').trim().split('\n').length;
    expect(s.run(['accounts', 'remove', 'work']).code).toBe(0);
    const after = s.run(['run-now', 'w', '--json'], inherited);
    expect(after.code).toBe(3);
    expect(JSON.parse(after.stdout)).toMatchObject({ status: 'failed', error: expect.stringMatching(/account work is not registered/) });
    expect(readFileSync(log, 'utf8').trim().split('\n').length).toBe(calls);
  });
});

describe('limits loops enforces from what the CLI reports', () => {
  it('--max-cost-usd on opencode (no budget flag): the run is stopped once the reported cost passes it, recorded failed with why', () => {
    const { s, log, env } = setup();
    const created = s.run(['create', 'agent', 'spender', '--provider', 'opencode', '--prompt', 'x', '--manual', '--max-cost-usd', '0.05', '--kill-grace', '1s'], env);
    expect(created.code, created.stderr).toBe(0);
    const r = s.run(['run-now', 'spender', '--json'], { ...env, FAKE_AGENT_MODE: 'spend' });
    expect(r.code).toBe(3);
    const run = JSON.parse(r.stdout) as AgentRun;
    expect(run.status).toBe('failed');
    expect(run.error).toMatch(/^over budget: opencode reported a cost of \$0\.\d{4} so far, above the limit of \$0\.0500 \(max cost\); stopped by loops; process killed by SIGTERM$/);
    // Each step costs $0.0123, one every 20 ms: stopped at the first report loops reads over $0.05
    // (under load several reports arrive in one read, so the total may be a few steps past), not
    // 2000 steps ($24.60) later.
    expect(run.agent!.costUsd).toBeGreaterThan(0.05);
    expect(run.agent!.costUsd).toBeLessThan(1);
    expect(run.agent!.sessionId).toEqual(expect.any(String));
    const pid = (JSON.parse(readFileSync(log, 'utf8').trim().split('\n').at(-1)!) as { pid: number }).pid;
    expect(pidAlive(pid)).toBe(false);
    expect(s.run(['replay', run.id]).code).toBe(0);
  });

  it('max-turns on an opencode workflow step: stopped once a turn over the limit is reported; the step and the run fail', () => {
    const { s, dir, env } = setup();
    const file = join(dir, 'wf.yaml');
    writeFileSync(
      file,
      `name: capped
steps:
  - id: fix
    timeout: 60s
    agent:
      provider: opencode
      prompt: fix it
      max-turns: 3
`,
    );
    expect(s.run(['workflows', 'create', file], env).code).toBe(0);
    const r = s.run(['workflows', 'run', 'capped', '--json'], { ...env, FAKE_AGENT_MODE: 'spend' });
    expect(r.code).not.toBe(0);
    const id = (JSON.parse(r.stdout) as { id: string }).id;
    const events = s.json<Array<{ type: string; data: { stepId?: string; error?: string | null; agent?: { turns: number | null } } }>>(['events', id]);
    const exited = events.find((e) => e.type === 'step.exited' && e.data.stepId === 'fix')!;
    // The runner reads the output in batches: the first check may already see more than 4 turns.
    expect(exited.data.error).toMatch(/^over the turn limit: opencode reported \d+ turns so far, above the limit of 3 \(max turns\); stopped by loops/);
    expect(exited.data.agent!.turns).toBeGreaterThan(3);
    expect(exited.data.agent!.turns).toBeLessThan(50);
  });

  it('a limit the CLI can neither take nor report is refused at create', () => {
    const { s, env } = setup();
    const r = s.run(['create', 'agent', 'g', '--provider', 'gemini', '--prompt', 'x', '--manual', '--max-turns', '3'], env);
    expect(r.code).toBe(2);
    // Said with the flag the user typed, not the adapter's field name.
    expect(r.stderr).toBe(
      'loops: --max-turns is not supported: gemini has no flag that limits turns and does not report them as it goes, so the limit could not be enforced (provider gemini); remove --max-turns and rely on the timeout / idle timeout\n',
    );
    const mode = s.run(['create', 'agent', 'c', '--provider', 'cursor', '--prompt', 'x', '--manual', '--permission-mode', 'acceptEdits'], env);
    expect(mode.stderr).toBe('loops: unknown --permission-mode "acceptEdits" (provider cursor); use one of: default, force, yolo, bypassPermissions, plan, ask\n');
    expect(s.json<unknown[]>(['list'])).toEqual([]);
  });
});

describe('agent steps in workflows', () => {
  it('an agent step gets its prompt with earlier outputs substituted, on stdin; its report is in the step event', () => {
    const { s, dir, log, env } = setup();
    const file = join(dir, 'wf.yaml');
    writeFileSync(
      file,
      `name: fixer
steps:
  - id: test
    run: echo "summary=3 failing" >> "$LOOPS_OUTPUT"
  - id: fix
    needs: test
    agent:
      provider: claude
      prompt: "${MARKER}: tests say \${{ steps.test.outputs.summary }}"
`,
    );
    expect(s.run(['workflows', 'create', file], env).code).toBe(0);
    const r = s.run(['workflows', 'run', 'fixer', '--json'], env);
    expect(r.code, r.stderr).toBe(0);
    const id = (JSON.parse(r.stdout) as { id: string }).id;
    const calls = readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { argv: string[]; prompt: string | null });
    const call = calls.find((c) => c.prompt?.includes(MARKER))!;
    expect(call.prompt).toContain(`${MARKER}: tests say 3 failing`);
    for (const c of calls) expect(c.argv.join(' ')).not.toContain(MARKER);
    const events = s.json<Array<{ type: string; data: { stepId?: string; agent?: { sessionId: string | null } } }>>(['events', id]);
    const exited = events.find((e) => e.type === 'step.exited' && e.data.stepId === 'fix')!;
    expect(exited.data.agent!.sessionId).toEqual(expect.any(String));
    expect(s.run(['replay', id]).code).toBe(0);
  });
});

describe('cancel reaches descendants in other process groups', () => {
  it('an agent whose helper left the process group: after cancel the helper is gone too', async () => {
    const { s, dir, env } = setup();
    const pidFile = join(dir, 'child.pid');
    s.run(['create', 'agent', 'spawner', '--provider', 'claude', '--prompt', 'x', '--manual', '--kill-grace', '1s'], env);
    const fg = s.start(['run-now', 'spawner'], { ...env, FAKE_AGENT_MODE: 'spawn-child', FAKE_AGENT_CHILD_PID_FILE: pidFile });
    await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').length > 0, 10_000, 'the detached helper to start');
    const child = Number(readFileSync(pidFile, 'utf8'));
    expect(pidAlive(child)).toBe(true);
    const run = s.json<Array<{ id: string; status: string }>>(['runs', 'spawner'])[0]!;
    expect(s.run(['cancel', run.id]).code).toBe(0);
    expect((await fg.exited).code).toBe(5);
    await waitFor(() => !pidAlive(child), 5000, `helper ${child} to be gone`);
  });
});

describe('huge agent output', () => {
  it('60 MB of JSONL: the run is recorded (report parsed from the files), the files stay capped, nothing crashes', () => {
    const { s, env } = setup();
    s.run(['create', 'agent', 'chatty', '--provider', 'codex', '--prompt', 'x', '--manual'], env);
    const r = s.run(['run-now', 'chatty', '--json'], { ...env, FAKE_AGENT_MODE: 'huge', FAKE_AGENT_HUGE_BYTES: String(60 * 1024 * 1024) });
    expect(r.code, r.stderr).toBe(0);
    const run = JSON.parse(r.stdout) as AgentRun & { stdoutBytes: number };
    expect(run.stdoutBytes).toBeGreaterThan(60 * 1024 * 1024);
    expect(run.agent!.sessionId).toEqual(expect.any(String));
    const dir = join(s.dataDir, 'runs', run.id);
    const size = (f: string) => (existsSync(join(dir, f)) ? statSync(join(dir, f)).size : 0);
    expect(size('stdout.log') + size('stdout.log.1')).toBeLessThanOrEqual(2 * 16 * 1024 * 1024 + 1024 * 1024);
  });
});

describe('cost and tokens in tables', () => {
  it('runs and show print tokens and cost for agent runs', () => {
    const { s, env } = setup();
    s.run(['create', 'agent', 'costly', '--provider', 'claude', '--prompt', 'x', '--manual'], env);
    expect(s.run(['run-now', 'costly'], env).code).toBe(0);
    const runs = s.run(['runs', 'costly']).stdout;
    expect(runs).toContain('TOKENS/COST');
    expect(runs).toMatch(/\$0\.0421/);
    const show = s.run(['show', 'costly']).stdout;
    expect(show).toMatch(/\$0\.0421/);
    expect(show).toContain('7f3c2a9e-5d41-4b8e-9c6a-2e1f0b3d4a55');
  });

  it('show <runId> (or a unique prefix) prints the run in full: how it ended, the report, the files; --json is the run', () => {
    const { s, env } = setup();
    s.run(['create', 'agent', 'one', '--provider', 'claude', '--prompt', 'x', '--manual'], env);
    const run = JSON.parse(s.run(['run-now', 'one', '--json'], env).stdout) as AgentRun;
    const shown = s.run(['show', run.id.slice(0, 20)]);
    expect(shown.code, shown.stderr).toBe(0);
    const text = shown.stdout;
    expect(text.split('\n')[0]).toBe(`${run.id}  succeeded`);
    expect(text).toContain('exit        code 0');
    expect(text).toContain('agent       claude 2.1.31, model claude-sonnet-4-5-20250929, session 7f3c2a9e-5d41-4b8e-9c6a-2e1f0b3d4a55');
    expect(text).toContain('usage       3 turns, tokens 9 in / 342 out, cache 18,230 read / 5,210 written, cost $0.0421');
    expect(text).toContain('final       All 42 tests pass; nothing to fix.');
    expect(text).toContain(`/runs/${run.id}/{stdout.log}`);
    // The transcript is not dumped: the report is what it says.
    expect(text).not.toContain('"type":"system"');
    expect(s.json<AgentRun>(['show', run.id]).agent!.sessionId).toBe(run.agent!.sessionId);
    const missing = s.run(['show', 'run_0000nothere']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toBe('loops: no run with id "run_0000nothere"; loops runs lists recent runs\n');
    const wf = s.run(['show', 'wfrun_01abc']);
    expect(wf.code).toBe(2);
    expect(wf.stderr).toContain('wfrun_01abc is a workflow run; loops workflows inspect wfrun_01abc shows it');
  });
});

describe("the agent CLI's own error", () => {
  // One recorded failure per CLI (test/fixtures/agents/failures), replayed by the fake on PATH.
  it.each([
    ['claude', 'claude-max-turns', 'claude: error_max_turns after 12 turns; exited with code 1'],
    ['claude', 'claude-api-529', 'claude API error 529 overloaded_error: Overloaded; exited with code 1'],
    ['codex', 'codex-turn-failed', 'codex API error 429: exceeded retry limit, last status: 429 Too Many Requests, request id: req_5b2e91c0d4f7; exited with code 1'],
    ['gemini', 'gemini-error', /^gemini API error 429 Error: \[API Error: Quota exceeded .*\(Status: 429\)\]; exited with code 1$/],
    ['opencode', 'opencode-error', 'opencode API error 529 APIError: Overloaded; exited with code 1'],
  ] as const)('%s %s: the run is failed with exit code 1, its error is the CLI\'s, no interim final message', (provider, failure, expected) => {
    const { s, env } = setup();
    expect(s.run(['create', 'agent', 'failing', '--provider', provider, '--prompt', 'x', '--manual'], env).code).toBe(0);
    const r = s.run(['run-now', 'failing', '--json'], { ...env, FAKE_AGENT_MODE: `fail:${failure}` });
    expect(r.code, r.stderr).toBe(3);
    const run = JSON.parse(r.stdout) as AgentRun & { agent: { error?: { message: string; type: string | null; status: number | null } } };
    expect(run).toMatchObject({ status: 'failed', exitCode: 1 });
    if (typeof expected === 'string') expect(run.error).toBe(expected);
    else expect(run.error).toMatch(expected);
    expect(run.agent!.finalMessage).toBeNull();
    expect(run.agent!.error!.message.length).toBeGreaterThan(0);
    expect(run.agent!.sessionId).toEqual(expect.any(String));
    // The same in every view: runs --json, show <run> (text and --json), and a replay of the log.
    expect(s.json<AgentRun[]>(['runs', 'failing'])[0]!.error).toBe(run.error);
    expect(s.json<AgentRun>(['show', run.id]).error).toBe(run.error);
    const text = s.run(['show', run.id]).stdout;
    expect(text).toContain(run.error!);
    expect(text).not.toMatch(/^final /m);
    expect(s.run(['replay', run.id]).code).toBe(0);
  });
});

describe("the agent CLI's own error in a workflow step", () => {
  it("a failed agent step's error is the CLI's, then the exit; the run fails with it", () => {
    const { s, dir, env } = setup();
    const file = join(dir, 'wf.yaml');
    writeFileSync(
      file,
      `name: failing-fix
steps:
  - id: fix
    agent:
      provider: codex
      prompt: fix the tests
`,
    );
    expect(s.run(['workflows', 'create', file], env).code).toBe(0);
    const r = s.run(['workflows', 'run', 'failing-fix', '--json'], { ...env, FAKE_AGENT_MODE: 'fail:codex-turn-failed' });
    expect(r.code).not.toBe(0);
    const id = (JSON.parse(r.stdout) as { id: string }).id;
    const events = s.json<Array<{ type: string; data: { stepId?: string; exitCode?: number; error?: string | null; agent?: { finalMessage: string | null; error?: { status: number | null } } } }>>(['events', id]);
    const exited = events.find((e) => e.type === 'step.exited' && e.data.stepId === 'fix')!;
    expect(exited.data).toMatchObject({
      exitCode: 1,
      error: 'codex API error 429: exceeded retry limit, last status: 429 Too Many Requests, request id: req_5b2e91c0d4f7; exited with code 1',
      agent: { finalMessage: null, error: { status: 429 } },
    });
    expect(s.run(['replay', id]).code).toBe(0);
  });
});
