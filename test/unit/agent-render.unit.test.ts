/**
 * The transcript renderer behind `loops logs --pretty`: one function per transcript format, fed the
 * shapes the real CLIs print (as recorded in test/fixtures/agents/fake-agent.mjs and docs/agents.md).
 */
import { describe, expect, it } from 'vitest';
import { PROVIDERS } from '../../src/runtime/agents/index.js';
import { firstLine, oneLine, renderTranscript, TranscriptRenderer, type RenderedLine } from '../../src/cli/agent-report/index.js';

const jsonl = (...events: unknown[]) => events.map((e) => JSON.stringify(e)).join('\n') + '\n';
const texts = (lines: RenderedLine[]) => lines.map((l) => l.text);
const FINAL = 'All 42 tests pass; nothing to fix.';

describe('claude stream-json', () => {
  const sid = '7f3c2a9e-5d41-4b8e-9c6a-2e1f0b3d4a55';
  const model = 'claude-sonnet-4-5-20250929';
  const assistant = (content: unknown[]) => ({ type: 'assistant', message: { model, role: 'assistant', content }, session_id: sid });
  const transcript = jsonl(
    { type: 'system', subtype: 'init', session_id: sid, model, tools: ['Bash'], claude_code_version: '2.1.31' },
    assistant([{ type: 'text', text: "I'll run the test suite first." }]),
    assistant([{ type: 'tool_use', id: 'toolu_01Hk2', name: 'Bash', input: { command: 'npm test', description: 'Run the test suite' } }]),
    {
      type: 'user',
      message: { role: 'user', content: [{ tool_use_id: 'toolu_01Hk2', type: 'tool_result', content: '\n Test Files  7 passed (7)\n      Tests  42 passed (42)\n', is_error: false }] },
      session_id: sid,
    },
    assistant([{ type: 'text', text: FINAL }]),
    {
      type: 'result',
      subtype: 'success',
      is_error: false,
      duration_ms: 14523,
      num_turns: 3,
      result: FINAL,
      session_id: sid,
      total_cost_usd: 0.0421335,
      usage: { input_tokens: 9, cache_creation_input_tokens: 5210, cache_read_input_tokens: 18230, output_tokens: 342 },
    },
  );

  it('renders the session, the text, the tool call and its result, and the final line with turns, tokens and cost', () => {
    const lines = renderTranscript('claude-stream-json', transcript);
    expect(texts(lines)).toEqual([
      `● model ${model} · session ${sid}`,
      "I'll run the test suite first.",
      '▸ bash: npm test',
      '  ↳ Test Files 7 passed (7) (+1 line)',
      FINAL,
      '✓ done · 3 turns · 14.5s · tokens 9 in (18,230 cached) / 342 out · $0.0421',
    ]);
    expect(lines.map((l) => l.kind)).toEqual(['info', 'text', 'tool', 'result', 'text', 'final']);
  });

  it('a failed result says why; a tool error is an error line', () => {
    const lines = renderTranscript(
      'claude-stream-json',
      jsonl(
        { type: 'user', message: { role: 'user', content: [{ type: 'tool_result', content: [{ type: 'text', text: 'Permission denied\nmore' }], is_error: true }] } },
        { type: 'result', subtype: 'error_max_turns', is_error: true, num_turns: 30, result: 'stopped after 30 turns' },
      ),
    );
    expect(lines).toEqual([
      { kind: 'error', text: '  ✗ Permission denied (+1 line)' },
      { kind: 'error', text: '✗ error_max_turns · 30 turns' },
      { kind: 'error', text: '  stopped after 30 turns' },
    ]);
  });

  it('aicopilot is read as claude', () => {
    expect(PROVIDERS.aicopilot.transcript).toBe('claude-stream-json');
    expect(PROVIDERS.codewith.transcript).toBe('codex-exec-jsonl');
  });
});

describe('codex exec --json', () => {
  const command = (status: string, extra: Record<string, unknown> = {}) => ({
    id: 'item_1',
    type: 'command_execution',
    command: "bash -lc 'npm test'",
    aggregated_output: '',
    exit_code: null,
    status,
    ...extra,
  });

  it('shows a command once when it starts and its result when it completes, the message, and the turn with tokens', () => {
    const lines = renderTranscript(
      'codex-exec-jsonl',
      jsonl(
        { type: 'thread.started', thread_id: '0199a213-81c0' },
        { type: 'turn.started' },
        { type: 'item.completed', item: { id: 'item_0', type: 'reasoning', text: '**Running the test suite**' } },
        { type: 'item.started', item: command('in_progress') },
        { type: 'item.completed', item: command('completed', { aggregated_output: ' Tests  42 passed (42)\n', exit_code: 0 }) },
        { type: 'item.completed', item: { id: 'item_2', type: 'agent_message', text: FINAL } },
        { type: 'turn.completed', usage: { input_tokens: 24763, cached_input_tokens: 24448, output_tokens: 122 } },
      ),
    );
    expect(texts(lines)).toEqual([
      '● session 0199a213-81c0',
      '· Running the test suite',
      '▸ bash: npm test',
      '  ↳ exit 0: Tests 42 passed (42)',
      FINAL,
      '✓ done · tokens 24,763 in (24,448 cached) / 122 out',
    ]);
  });

  it('a command seen only when completed shows the call too; a non-zero exit and a failed turn are errors', () => {
    const lines = renderTranscript(
      'codex-exec-jsonl',
      jsonl(
        { type: 'item.completed', item: command('failed', { id: 'item_9', aggregated_output: 'boom\n', exit_code: 1 }) },
        { type: 'turn.failed', error: { message: 'stream disconnected' } },
        { type: 'error', message: 'Reconnecting... 1/5' },
      ),
    );
    expect(lines).toEqual([
      { kind: 'tool', text: '▸ bash: npm test' },
      { kind: 'error', text: '  ✗ exit 1: boom' },
      { kind: 'error', text: '✗ turn failed: stream disconnected' },
      { kind: 'error', text: '✗ Reconnecting... 1/5' },
    ]);
  });
});

describe('cursor-agent stream-json', () => {
  it('skips the prompt and thinking deltas; shows the tool call once with its result, and the final line', () => {
    const sid = 'c5e8a1f4';
    const call = { shellToolCall: { args: { command: 'npm test', workingDirectory: '' } } };
    const lines = renderTranscript(
      'cursor-stream-json',
      jsonl(
        { type: 'system', subtype: 'init', session_id: sid, model: 'GPT-5' },
        { type: 'user', message: { role: 'user', content: [{ type: 'text', text: 'fix the tests' }] }, session_id: sid },
        { type: 'thinking', subtype: 'delta', text: 'Run the tests', session_id: sid },
        { type: 'assistant', message: { role: 'assistant', content: [{ type: 'text', text: "I'll run the tests." }] }, session_id: sid },
        { type: 'tool_call', subtype: 'started', call_id: 'call_8KqZ', tool_call: call, session_id: sid },
        {
          type: 'tool_call',
          subtype: 'completed',
          call_id: 'call_8KqZ',
          tool_call: { shellToolCall: { ...call.shellToolCall, result: { success: { exitCode: 0, stdout: ' Tests  42 passed (42)\n', stderr: '' } } } },
          session_id: sid,
        },
        { type: 'assistant', message: { role: 'assistant', content: [{ type: 'text', text: FINAL }] }, session_id: sid },
        { type: 'result', subtype: 'success', is_error: false, duration_ms: 9120, result: `I'll run the tests.${FINAL}`, usage: { inputTokens: 18342, outputTokens: 402 } },
      ),
    );
    expect(texts(lines)).toEqual([
      `● model GPT-5 · session ${sid}`,
      "I'll run the tests.",
      '▸ shell: npm test',
      '  ↳ exit 0: Tests 42 passed (42)',
      FINAL,
      '✓ done · 9.1s · tokens 18,342 in / 402 out',
    ]);
  });

  it('a failed tool call is an error line', () => {
    const lines = renderTranscript(
      'cursor-stream-json',
      jsonl({ type: 'tool_call', subtype: 'completed', call_id: 'x', tool_call: { readToolCall: { args: { path: 'a.ts' }, result: { error: { message: 'ENOENT' } } } } }),
    );
    expect(texts(lines)).toEqual(['▸ read: a.ts', '  ✗ ENOENT']);
  });
});

describe('opencode run --format json', () => {
  const sid = 'ses_5a1f2e3d';
  const ev = (type: string, part: Record<string, unknown>) => ({ type, timestamp: 1767225600000, sessionID: sid, part: { sessionID: sid, ...part } });

  it('shows the session once, tool uses with their output, the text, and one final line summed over the steps', () => {
    const lines = renderTranscript(
      'opencode-run-json',
      jsonl(
        ev('step_start', { type: 'step-start' }),
        ev('tool_use', { type: 'tool', tool: 'bash', state: { status: 'completed', input: { command: 'npm test' }, output: ' Tests  42 passed (42)\n' } }),
        ev('step_finish', { type: 'step-finish', reason: 'tool-calls', cost: 0.0123, tokens: { input: 1520, output: 85, reasoning: 12, cache: { read: 11200, write: 640 } } }),
        ev('step_start', { type: 'step-start' }),
        ev('text', { type: 'text', text: FINAL }),
        ev('step_finish', { type: 'step-finish', reason: 'stop', cost: 0.0042, tokens: { input: 310, output: 24, reasoning: 0, cache: { read: 12700, write: 0 } } }),
        { type: 'done', sessionID: sid },
      ),
    );
    expect(texts(lines)).toEqual([
      `● session ${sid}`,
      '▸ bash: npm test',
      '  ↳ Tests 42 passed (42)',
      FINAL,
      '✓ done · 2 steps · tokens 1,830 in / 121 out · $0.0165',
    ]);
  });

  it('an error event and a failed tool are errors', () => {
    const lines = renderTranscript(
      'opencode-run-json',
      jsonl(
        ev('tool_use', { type: 'tool', tool: 'read', state: { status: 'error', input: { filePath: 'x.ts' }, error: 'File not found' } }),
        { type: 'error', sessionID: sid, error: { name: 'ProviderAuthError', data: { message: 'invalid key' } } },
      ),
    );
    expect(texts(lines).slice(1)).toEqual(['▸ read: x.ts', '  ✗ File not found', '✗ ProviderAuthError: invalid key']);
  });
});

describe('gemini stream-json', () => {
  it('joins the assistant deltas into one message; tool use, result and the final line with stats', () => {
    const lines = renderTranscript(
      'gemini-stream-json',
      jsonl(
        { type: 'init', session_id: '9d2e6f1a', model: 'gemini-2.5-pro' },
        { type: 'message', role: 'user', content: 'fix the tests' },
        { type: 'message', role: 'assistant', content: "I'll run the tests.", delta: true },
        { type: 'tool_use', tool_name: 'run_shell_command', tool_id: 't1', parameters: { command: 'npm test', description: 'Run the test suite' } },
        { type: 'tool_result', tool_id: 't1', status: 'success', output: ' Tests  42 passed (42)\n' },
        { type: 'message', role: 'assistant', content: 'All 42 tests pass;', delta: true },
        { type: 'message', role: 'assistant', content: ' nothing to fix.', delta: true },
        { type: 'result', status: 'success', stats: { input_tokens: 12850, output_tokens: 245, cached: 8192, duration_ms: 7310, tool_calls: 1 } },
      ),
    );
    expect(texts(lines)).toEqual([
      '● model gemini-2.5-pro · session 9d2e6f1a',
      "I'll run the tests.",
      '▸ run_shell_command: npm test',
      '  ↳ Tests 42 passed (42)',
      FINAL,
      '✓ done · 7.3s · tokens 12,850 in (8,192 cached) / 245 out · 1 tool call',
    ]);
  });

  it('deltas still held at the end of the transcript are printed by end()', () => {
    const r = new TranscriptRenderer('gemini-stream-json');
    expect(r.line(JSON.stringify({ type: 'message', role: 'assistant', content: 'half a', delta: true }))).toEqual([]);
    expect(r.line(JSON.stringify({ type: 'message', role: 'assistant', content: ' thought', delta: true }))).toEqual([]);
    expect(r.end()).toEqual([{ kind: 'text', text: 'half a thought' }]);
  });
});

describe('lines that are not JSON events, and long lines', () => {
  it('prints non-JSON and malformed lines as they are, skips blank lines and unknown events', () => {
    const text = 'Warning: no git repository\n\n{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]}}\n{"type":"result", truncated\n{"type":"something_new"}\n[1,2]\n';
    expect(renderTranscript('claude-stream-json', text)).toEqual([
      { kind: 'raw', text: 'Warning: no git repository' },
      { kind: 'text', text: 'hi' },
      { kind: 'raw', text: '{"type":"result", truncated' },
      { kind: 'raw', text: '[1,2]' },
    ]);
  });

  it('a non-JSON line in the middle of gemini deltas does not lose them', () => {
    const lines = renderTranscript('gemini-stream-json', jsonl({ type: 'message', role: 'assistant', content: 'part', delta: true }) + 'progress 50%\n');
    expect(lines).toEqual([
      { kind: 'text', text: 'part' },
      { kind: 'raw', text: 'progress 50%' },
    ]);
  });

  it('cuts tool calls and result summaries to the width, on one line', () => {
    const long = `echo ${'a'.repeat(500)}`;
    const lines = renderTranscript(
      'claude-stream-json',
      jsonl(
        { type: 'assistant', message: { content: [{ type: 'tool_use', name: 'Bash', input: { command: long } }] } },
        { type: 'user', message: { content: [{ type: 'tool_result', content: `${'b'.repeat(300)}\nsecond\nthird` }] } },
      ),
      { width: 40 },
    );
    expect(lines[0]!.text).toBe(`▸ bash: echo ${'a'.repeat(34)}…`);
    expect(lines[1]!.text).toBe(`  ↳ ${'b'.repeat(39)}… (+2 lines)`);
    for (const l of lines) expect(l.text).not.toContain('\n');
    // The default width is 160 characters.
    const wide = renderTranscript('claude-stream-json', jsonl({ type: 'assistant', message: { content: [{ type: 'tool_use', name: 'Bash', input: { command: long } }] } }));
    expect([...wide[0]!.text.slice('▸ bash: '.length)]).toHaveLength(160);
  });

  it('oneLine and firstLine collapse whitespace and count what follows', () => {
    expect(oneLine('  a\n\tb  ', 10)).toBe('a b');
    expect(oneLine('é'.repeat(12), 10)).toBe(`${'é'.repeat(9)}…`);
    expect(firstLine('\n\nfirst\n\nsecond\n', 80)).toBe('first (+1 line)');
    expect(firstLine('   \n', 80)).toBe('(no output)');
  });

  it('a tool call whose input has no telling field shows its JSON; none at all, just the name', () => {
    const lines = renderTranscript(
      'claude-stream-json',
      jsonl(
        { type: 'assistant', message: { content: [{ type: 'tool_use', name: 'TodoWrite', input: { todos: [{ content: 'x' }] } }] } },
        { type: 'assistant', message: { content: [{ type: 'tool_use', name: 'Noop', input: {} }] } },
      ),
    );
    expect(texts(lines)).toEqual(['▸ todowrite: {"todos":[{"content":"x"}]}', '▸ noop']);
  });
});
