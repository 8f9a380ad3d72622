// agentReport (the report of an agent run parsed from its files, for a run no runner fed a parser):
// past the size cap the beginning of the output is only in `<file>.head`, and the session id and
// model the CLI printed first come back from it — and nothing else, so no token is counted twice.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { agentReport } from '../../src/runtime/agents/run.js';
import { OutputFile, TailBuffer } from '../../src/runtime/execution/output.js';
import { tempDir } from '../helpers/tmp.js';

const FIXTURES = resolve(dirname(fileURLToPath(import.meta.url)), '../fixtures/agents');
const FINAL = 'All 42 tests pass; nothing to fix.';
const CLAUDE_SESSION = '7f3c2a9e-5d41-4b8e-9c6a-2e1f0b3d4a55';
const CLAUDE_MODEL = 'claude-sonnet-4-5-20250929';
const line = (o: unknown) => `${JSON.stringify(o)}\n`;

describe('agentReport past the size cap', () => {
  it('a whole claude run (the recorded shapes, 4 MiB through a 1 MiB cap): the full report, tokens and cost once', () => {
    const path = join(tempDir(), 'stdout.log');
    const out = new OutputFile(path, 1024 * 1024, new TailBuffer(64 * 1024));
    const r = spawnSync(join(FIXTURES, 'claude'), ['-p', '--output-format', 'stream-json', '--verbose'], {
      input: 'fix the failing tests',
      stdio: ['pipe', out.writeFd, 'pipe'],
      env: { ...process.env, FAKE_AGENT_MODE: 'huge', FAKE_AGENT_HUGE_BYTES: String(3 * 1024 * 1024) },
    });
    expect(r.status, r.stderr?.toString()).toBe(0);
    out.close(); // the final read: past the cap, rotated
    expect(out.total).toBeGreaterThan(4 * 1024 * 1024);
    // The init line (session, model) is only in the head now.
    expect(readFileSync(`${path}.1`, 'utf8')).not.toContain('"subtype":"init"');
    expect(readFileSync(`${path}.head`, 'utf8')).toContain('"subtype":"init"');

    const report = agentReport('claude', path, '2.1.31');
    expect(report).toMatchObject({
      provider: 'claude',
      cliVersion: '2.1.31',
      sessionId: CLAUDE_SESSION,
      model: CLAUDE_MODEL,
      turns: 3,
      durationMs: 14523,
      tokens: { input: 9, output: 342, cacheRead: 18230, cacheWrite: 5210 },
      finalMessage: FINAL,
      isError: false,
    });
    expect(report.costUsd).toBeCloseTo(0.0421335, 10);
  });

  it('a claude run cut off in a huge tool output: the session id and model come from the head alone', () => {
    const path = join(tempDir(), 'stdout.log');
    const cap = 256 * 1024;
    const out = new OutputFile(path, cap, new TailBuffer(1024));
    const write = (text: string) => writeSync(out.writeFd, text);
    const msg = (id: string, content: unknown[], usage: Record<string, number>) => ({
      type: 'assistant',
      message: { model: CLAUDE_MODEL, id, type: 'message', role: 'assistant', content, stop_reason: null, stop_sequence: null, usage },
      parent_tool_use_id: null,
      session_id: CLAUDE_SESSION,
      uuid: `${id}-u`,
    });
    write(
      line({ type: 'system', subtype: 'init', cwd: '/repo', session_id: CLAUDE_SESSION, tools: ['Bash', 'Read'], mcp_servers: [], model: CLAUDE_MODEL, permissionMode: 'default', apiKeySource: 'none', claude_code_version: '2.1.31', uuid: 'a1d0c4e2-0001' }) +
        line(msg('msg_01VQ8rT3x', [{ type: 'text', text: "I'll run the test suite first." }], { input_tokens: 3, cache_creation_input_tokens: 5210, cache_read_input_tokens: 0, output_tokens: 9 })) +
        line(msg('msg_01VQ8rT3x', [{ type: 'tool_use', id: 'toolu_01Hk2', name: 'Bash', input: { command: 'npm test' } }], { input_tokens: 3, cache_creation_input_tokens: 5210, cache_read_input_tokens: 0, output_tokens: 71 })),
    );
    // Then a tool's output, 1.5 MiB of tool_result lines (no session id the parser reads), followed
    // by a runner reading every 100 KiB: several rotations. The CLI never got to its result.
    const text = 'x'.repeat(900);
    for (let i = 0, written = 0; written < 1.5 * 1024 * 1024; i++) {
      const l = line({ type: 'user', message: { role: 'user', content: [{ tool_use_id: `toolu_fill${i}`, type: 'tool_result', content: text }] }, parent_tool_use_id: null, session_id: CLAUDE_SESSION });
      write(l);
      written += l.length;
      if (Math.floor(written / (100 * 1024)) !== Math.floor((written - l.length) / (100 * 1024))) out.drain();
    }
    out.close();
    expect(out.total).toBeGreaterThan(3 * cap);

    const report = agentReport('claude', path, null);
    expect(report).toMatchObject({
      sessionId: CLAUDE_SESSION,
      model: CLAUDE_MODEL,
      // Only the identity comes from the head: not its assistant text, not its usage.
      finalMessage: null,
      turns: null,
      tokens: { input: null, output: null, cacheRead: null, cacheWrite: null },
      costUsd: null,
      isError: null,
    });
    // Without the head, both are lost (what the head is for).
    unlinkSync(`${path}.head`);
    expect(agentReport('claude', path, null)).toMatchObject({ sessionId: null, model: null });
  });

  it('codex (tokens summed per turn): the head overlaps the rotated part, and no turn is counted twice', () => {
    const path = join(tempDir(), 'stdout.log');
    const cap = 60 * 1024; // smaller than the head (64 KiB): whatever lies in both is in the head and in .1
    const out = new OutputFile(path, cap, new TailBuffer(1024));
    const thread = '0199a213-81c0-7800-8aa1-bbab2a035a53';
    let text = line({ type: 'thread.started', thread_id: thread });
    const turns: Array<{ line: string; input: number; cached: number; output: number }> = [];
    for (let i = 0; text.length < 100 * 1024; i++) {
      text += line({ type: 'turn.started' });
      text += line({ type: 'item.completed', item: { id: `item_${i}`, type: 'agent_message', text: `step ${i} ${'.'.repeat(1500)}` } });
      const usage = { input_tokens: 1000 + i, cached_input_tokens: 10 * i, output_tokens: 7 + i };
      const l = line({ type: 'turn.completed', usage });
      turns.push({ line: l, input: usage.input_tokens, cached: usage.cached_input_tokens, output: usage.output_tokens });
      text += l;
    }
    writeSync(out.writeFd, text);
    out.close(); // one read, one rotation: .1 holds the last 60 KiB
    const kept = text.slice(text.length - cap);
    expect(readFileSync(`${path}.1`, 'utf8')).toBe(kept);
    const head = readFileSync(`${path}.head`, 'utf8');
    expect(text.startsWith(head)).toBe(true);
    // The overlap holds turns the rotated part has too.
    const inRotated = turns.filter((t) => kept.includes(t.line));
    expect(inRotated.filter((t) => head.includes(t.line)).length).toBeGreaterThan(0);
    expect(inRotated.length).toBeLessThan(turns.length);
    expect(kept).not.toContain('thread.started');

    const report = agentReport('codex', path, null);
    expect(report.sessionId).toBe(thread);
    expect(report.turns).toBe(inRotated.length);
    expect(report.tokens).toEqual({
      input: inRotated.reduce((s, t) => s + t.input, 0),
      output: inRotated.reduce((s, t) => s + t.output, 0),
      cacheRead: inRotated.reduce((s, t) => s + t.cached, 0),
      cacheWrite: null,
    });
  });

  it('a run under the cap has no head and its report is as before', () => {
    const path = join(tempDir(), 'stdout.log');
    const out = new OutputFile(path, 1024 * 1024, new TailBuffer(1024));
    const r = spawnSync(join(FIXTURES, 'claude'), ['-p', '--output-format', 'stream-json', '--verbose'], {
      input: 'fix the failing tests',
      stdio: ['pipe', out.writeFd, 'pipe'],
    });
    expect(r.status, r.stderr?.toString()).toBe(0);
    out.close();
    expect(existsSync(`${path}.head`)).toBe(false);
    expect(agentReport('claude', path, null)).toMatchObject({
      sessionId: CLAUDE_SESSION,
      model: CLAUDE_MODEL,
      tokens: { input: 9, output: 342, cacheRead: 18230, cacheWrite: 5210 },
      finalMessage: FINAL,
    });
  });
});
