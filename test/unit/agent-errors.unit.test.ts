/**
 * The agent CLI's own error: each adapter's reader extracts it (message, error type, HTTP status)
 * from the recorded failure of its CLI (test/fixtures/agents/failures/*.jsonl, replayed by the fake
 * CLI as a real child process), a failed turn records no final message, and the run's error reads
 * the CLI's error before how the process exited.
 */
import { spawnSync } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseAgentOutput, type AgentReport } from '../../src/runtime/agents/parse.js';
import { apiErrorOf } from '../../src/runtime/agents/extract.js';
import { buildInvocation, type ProviderId } from '../../src/runtime/agents/index.js';
import { describeAgentError, withAgentError } from '../../src/runtime/agents/run.js';
import type { AgentTarget } from '../../src/workflow/spec.js';
import { agentTarget } from '../helpers/fixtures.js';

const FIXTURES = resolve(dirname(fileURLToPath(import.meta.url)), '../fixtures/agents');

const target = (provider: string): AgentTarget => agentTarget(provider);

/** Runs the provider's fake CLI with the adapter's argv and stdin, replaying a recorded failure. */
function replay(provider: ProviderId, failure: string): { status: number | null; report: AgentReport } {
  const inv = buildInvocation(target(provider), { prompt: 'fix the failing tests', promptFile: '/run/prompt.txt', isolatedConfigDir: null });
  const run = spawnSync(join(FIXTURES, inv.command), inv.args, {
    input: inv.stdin ?? '',
    env: { ...process.env, ...inv.env, FAKE_AGENT_MODE: `fail:${failure}` },
    cwd: FIXTURES,
    encoding: 'utf8',
  });
  if (run.status === 2) throw new Error(run.stderr);
  return { status: run.status, report: parseAgentOutput(provider, run.stdout) };
}

const exited1 = { error: 'exited with code 1', timedOut: false, cancelled: false };

/** Each recorded failure: what the report says and the run's error it makes (the exit is code 1 for all). */
const CASES: {
  failure: string;
  providers: ProviderId[];
  error: NonNullable<AgentReport['error']>;
  runError: string;
  also: Partial<AgentReport>;
}[] = [
  {
    failure: 'claude-max-turns',
    providers: ['claude', 'aicopilot'],
    error: { message: 'error_max_turns after 12 turns', type: 'error_max_turns', status: null },
    runError: 'claude: error_max_turns after 12 turns; exited with code 1',
    // Its result says `is_error: false`: the subtype is what makes it an error.
    also: { sessionId: '3e9b1c7a-6d25-4f80-a1c4-9b7e2d5f0a18', turns: 12, costUsd: 0.1874512, model: 'claude-sonnet-4-5-20250929', parseError: null },
  },
  {
    failure: 'claude-api-529',
    providers: ['claude', 'aicopilot'],
    error: { message: 'Overloaded', type: 'overloaded_error', status: 529 },
    runError: 'claude API error 529 overloaded_error: Overloaded; exited with code 1',
    // The `<synthetic>` message that carries the API error is not the model.
    also: { model: 'claude-sonnet-4-5-20250929', turns: 1, costUsd: 0.0176027, parseError: null },
  },
  {
    failure: 'claude-auth',
    providers: ['claude'],
    error: { message: 'Invalid API key · Please run /login', type: null, status: null },
    runError: 'claude: Invalid API key · Please run /login; exited with code 1',
    also: { sessionId: '3e9b1c7a-6d25-4f80-a1c4-9b7e2d5f0a18' },
  },
  {
    failure: 'codex-turn-failed',
    providers: ['codex', 'codewith'],
    error: { message: 'exceeded retry limit, last status: 429 Too Many Requests, request id: req_5b2e91c0d4f7', type: null, status: 429 },
    runError: 'codex API error 429: exceeded retry limit, last status: 429 Too Many Requests, request id: req_5b2e91c0d4f7; exited with code 1',
    also: { sessionId: '0199c3d4-5e6f-7a80-9b1c-2d3e4f5a6b7c', turns: 1, parseError: null },
  },
  {
    failure: 'codex-error',
    providers: ['codex'],
    error: {
      message: 'Incorrect API key provided: sk-proj-****abcd. You can find your API key at https://platform.openai.com/account/api-keys.',
      type: 'invalid_request_error',
      status: 401,
    },
    runError:
      'codex API error 401 invalid_request_error: Incorrect API key provided: sk-proj-****abcd. You can find your API key at https://platform.openai.com/account/api-keys.; exited with code 1',
    also: { sessionId: '0199c3d4-5e6f-7a80-9b1c-2d3e4f5a6b7c', parseError: 'no final result in the output: the CLI stopped before reporting one' },
  },
  {
    failure: 'gemini-error',
    providers: ['gemini'],
    error: {
      message:
        "[API Error: Quota exceeded for quota metric 'Generate Content API requests per minute' and limit 'GenerateContent request limit per minute for a region' of service 'generativelanguage.googleapis.com' (Status: 429)]",
      type: 'Error',
      status: 429,
    },
    runError:
      "gemini API error 429 Error: [API Error: Quota exceeded for quota metric 'Generate Content API requests per minute' and limit 'GenerateContent request limit per minute for a region' of service 'generativelanguage.googleapis.com' (Status: 429)]; exited with code 1",
    also: { sessionId: '5c8d2e1f-7a3b-4c9d-8e6f-0a1b2c3d4e5f', model: 'gemini-2.5-pro', tokens: { input: 8322, output: 88, cacheRead: 0, cacheWrite: null } },
  },
  {
    failure: 'opencode-error',
    providers: ['opencode'],
    error: { message: 'Overloaded', type: 'APIError', status: 529 },
    runError: 'opencode API error 529 APIError: Overloaded; exited with code 1',
    also: { sessionId: 'ses_6b2f3e4d5ffeRz8MnP3qS9tU1w' },
  },
  {
    failure: 'cursor-error',
    providers: ['cursor'],
    error: { message: "You've hit your usage limit for GPT-5. Switch to Auto or upgrade your plan.", type: null, status: null },
    runError: "cursor: You've hit your usage limit for GPT-5. Switch to Auto or upgrade your plan.; exited with code 1",
    also: { sessionId: 'd6f9b2a5-4c8e-4f3b-a07d-9e2c1f8b6d34', model: 'GPT-5' },
  },
];

describe('recorded failures, replayed by the fake CLIs through each adapter', () => {
  for (const c of CASES) {
    for (const provider of c.providers) {
      it(`${provider} ${c.failure}: the CLI's error is extracted, no final message, the run's error names it`, () => {
        const { status, report } = replay(provider, c.failure);
        expect(status).toBe(1);
        expect(report).toMatchObject({ isError: true, error: c.error, finalMessage: null, ...c.also });
        const runError = withAgentError(exited1, { provider, error: report.error! }).error;
        expect(runError).toBe(provider === 'claude' || provider === 'codex' ? c.runError : c.runError.replace(/^\w+/, provider));
      });
    }
  }
});

describe('the error readers', () => {
  it('claude: error_during_execution with its errors; error_max_budget_usd; an error result with is_error only', () => {
    const during = '{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":3,"errors":["Tool permission stream closed","aborted"],"session_id":"s"}';
    expect(parseAgentOutput('claude', during).error).toEqual({
      message: 'error_during_execution after 3 turns: Tool permission stream closed; aborted',
      type: 'error_during_execution',
      status: null,
    });
    expect(parseAgentOutput('claude', '{"type":"result","subtype":"error_max_budget_usd","num_turns":1}').error).toEqual({
      message: 'error_max_budget_usd after 1 turn',
      type: 'error_max_budget_usd',
      status: null,
    });
    // api_error_status without a parsable body: the status and the text as it is.
    const status = '{"type":"result","subtype":"success","is_error":true,"api_error_status":500,"result":"API Error: Internal server error"}';
    expect(parseAgentOutput('claude', status).error).toEqual({ message: 'API Error: Internal server error', type: null, status: 500 });
    expect(parseAgentOutput('claude', '{"type":"result","subtype":"success","is_error":true}')).toMatchObject({
      isError: true,
      finalMessage: null,
      error: { message: 'the CLI reported an error and said nothing more', type: null, status: null },
    });
  });

  it('a success records no error; an interim error followed by a completed turn (a retried request) is no error', () => {
    const ok = parseAgentOutput('claude', '{"type":"result","subtype":"success","is_error":false,"result":"done"}');
    expect(ok).toMatchObject({ isError: false, error: null, finalMessage: 'done' });
    const retried = [
      '{"type":"thread.started","thread_id":"t"}',
      '{"type":"turn.started"}',
      '{"type":"error","message":"Reconnecting... 1/5 (stream disconnected before completion)"}',
      '{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Fixed."}}',
      '{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":2}}',
    ].join('\n');
    expect(parseAgentOutput('codex', retried)).toMatchObject({ isError: false, error: null, finalMessage: 'Fixed.' });
  });

  it('codex: the failed turn\'s error wins over the stream errors before it, and a later stream error does not replace it', () => {
    const text = [
      '{"type":"error","message":"Reconnecting... 1/5"}',
      '{"type":"turn.failed","error":{"message":"stream disconnected before completion"}}',
      '{"type":"error","message":"late"}',
    ].join('\n');
    expect(parseAgentOutput('codex', text).error).toEqual({ message: 'stream disconnected before completion', type: null, status: null });
  });

  it('gemini: a warning is no error; the single --output-format json object with an error', () => {
    const warned = [
      '{"type":"error","severity":"warning","message":"Loop detection is on"}',
      '{"type":"message","role":"assistant","content":"Done.","delta":true}',
      '{"type":"result","status":"success","stats":{"input_tokens":1,"output_tokens":1}}',
    ].join('\n');
    expect(parseAgentOutput('gemini', warned)).toMatchObject({ isError: false, error: null, finalMessage: 'Done.' });
    const json = JSON.stringify({ session_id: 'g', response: 'partial', error: { type: 'FatalAuthenticationError', message: 'Please set an Auth method', code: 41 } });
    // `code` 41 is the CLI's exit code, not an HTTP status.
    expect(parseAgentOutput('gemini', json)).toMatchObject({
      isError: true,
      finalMessage: null,
      error: { message: 'Please set an Auth method', type: 'FatalAuthenticationError', status: null },
    });
  });

  it('opencode: an error with no message is named by its type', () => {
    const text = '{"type":"error","sessionID":"s","error":{"name":"MessageOutputLengthError","data":{}}}';
    expect(parseAgentOutput('opencode', text).error).toEqual({ message: 'MessageOutputLengthError', type: 'MessageOutputLengthError', status: null });
  });

  it('an error message is one line, capped', () => {
    const long = `{"type":"turn.failed","error":{"message":"line one\\nline two ${'x'.repeat(3000)}"}}`;
    const message = parseAgentOutput('codex', long).error!.message;
    expect(message.startsWith('line one line two ')).toBe(true);
    expect(message.length).toBe(2001);
  });

  it('apiErrorOf: the status, and the type and message of a JSON body', () => {
    expect(apiErrorOf('API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}')).toEqual({ message: 'Overloaded', type: 'overloaded_error', status: 529 });
    expect(apiErrorOf('unexpected status 500 Internal Server Error: not json {')).toEqual({ message: 'unexpected status 500 Internal Server Error: not json {', type: null, status: 500 });
    expect(apiErrorOf('stream disconnected before completion')).toBeNull();
  });
});

describe("the run's error", () => {
  it('the CLI error first, then how the process exited; a timeout or cancel first; a clean exit or no CLI error unchanged', () => {
    const err = { message: 'Overloaded', type: 'overloaded_error', status: 529 };
    expect(describeAgentError('claude', err)).toBe('claude API error 529 overloaded_error: Overloaded');
    expect(describeAgentError('codex', { message: 'boom', type: 'StreamError', status: null })).toBe('codex: StreamError: boom');
    expect(withAgentError({ error: 'timed out after 5m', timedOut: true, cancelled: false }, { provider: 'claude', error: err }).error).toBe(
      'timed out after 5m; claude API error 529 overloaded_error: Overloaded',
    );
    expect(withAgentError({ error: null, timedOut: false, cancelled: false }, { provider: 'claude', error: err }).error).toBeNull();
    expect(withAgentError(exited1, { provider: 'claude' }).error).toBe('exited with code 1');
    expect(withAgentError(exited1, null).error).toBe('exited with code 1');
  });
});
