/**
 * cursor — Cursor Agent CLI (`cursor-agent --print`): its description, argv and output reader.
 * docs/agents.md, "cursor".
 */
import { contentText, errorObject, type Reader } from '../extract.js';
import { num, obj, str } from '../json.js';
import { readResultOutcome } from './claude.js';
import { defineProvider } from './define.js';

/** cursor-agent --print --output-format stream-json (claude-like events; a `json` result object too). */
const readCursor: Reader = (e, x) => {
  if (e.type === 'system' && e.subtype === 'init') {
    x.model = str(e.model) ?? x.model;
    x.sessionId = str(e.session_id) ?? x.sessionId;
  } else if (e.type === 'assistant') {
    x.sessionId = x.sessionId ?? str(e.session_id);
    x.setLast(contentText(obj(e.message)?.content));
  } else if (e.type === 'result') {
    x.finished = true;
    x.sessionId = str(e.session_id) ?? x.sessionId;
    x.durationMs = num(e.duration_ms) ?? x.durationMs;
    // Newer versions add usage in camelCase; accept the snake_case spelling too.
    const usage = obj(e.usage);
    if (usage) {
      x.input = num(usage.inputTokens) ?? num(usage.input_tokens);
      x.output = num(usage.outputTokens) ?? num(usage.output_tokens);
      x.cacheRead = num(usage.cacheReadTokens) ?? num(usage.cache_read_input_tokens);
      x.cacheWrite = num(usage.cacheWriteTokens) ?? num(usage.cache_creation_input_tokens);
    }
    x.costUsd = num(e.total_cost_usd) ?? x.costUsd;
    // `result` concatenates every assistant text of the run; the last assistant message is the answer.
    // A failed result (claude's shape: `is_error`, a subtype other than success) is the CLI's error.
    readResultOutcome(e, x);
  } else if (e.type === 'error') {
    // Not documented; read like the other CLIs' error events: `{type: 'error', error?: {...}, message?}`.
    x.fail(errorObject(e.error) ?? errorObject(e.message), true);
  }
};

export const cursor = defineProvider({
  info: {
    id: 'cursor',
    name: 'Cursor Agent CLI',
    binary: 'cursor-agent',
    docsUrl: 'https://cursor.com/docs/cli/reference/output-format',
    versionArgs: ['--version'],
    writtenAgainst: 'cursor-agent 2026.01.x (Cursor CLI docs: headless, output format, configuration; as of 2026-11-30)',
    assumed: false,
    modelledOn: null,
    promptVia: 'stdin',
    output: 'jsonl',
    supports: { stdinPrompt: true, promptFile: false, json: true, maxTurns: false, maxCostUsd: false, reportsTurns: false, reportsCost: false, model: true, agent: false, permissionMode: true },
    permissionFlag: '--force / --mode',
    permissionModes: ['default', 'force', 'yolo', 'bypassPermissions', 'plan', 'ask'],
    permissionModesStrict: true,
    authEnv: ['CURSOR_API_KEY', 'CURSOR_CONFIG_DIR'],
    configDirEnv: 'CURSOR_CONFIG_DIR',
    isolationEnv: { CURSOR_CONFIG_DIR: '' },
    // cursor-agent has no flag that skips its settings (the predecessor passed none either).
    settingsIsolationArgs: [],
  },
  permissionArgs(mode) {
    if (mode === 'default') return [];
    if (mode === 'force' || mode === 'yolo' || mode === 'bypassPermissions') return ['--force'];
    if (mode === 'plan' || mode === 'ask') return ['--mode', mode];
    return null;
  },
  // Print mode reads a piped prompt from stdin; --trust skips the workspace-trust prompt headless runs cannot answer.
  argv(a) {
    const args = ['--print', '--output-format', 'stream-json', '--trust'];
    if (a.model !== null) args.push('--model', a.model);
    args.push(...a.permission);
    if (a.cwd) args.push('--workspace', a.cwd);
    args.push(...a.extraArgs);
    return args;
  },
  // `result` concatenates every assistant text of the run: the last assistant message is the answer.
  transcript: { format: 'cursor-stream-json', read: readCursor, countsTurns: false, prefersLastText: true },
});
