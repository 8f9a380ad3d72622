/**
 * claude — Claude Code (`claude -p`): its description, argv and output reader. docs/agents.md, "claude".
 * aicopilot (./aicopilot.ts) is modelled on it and reuses this file's argv, permission flags and reader.
 */
import { apiErrorOf, contentText, errorText, type AgentError, type Extract, type Reader } from '../extract.js';
import type { Json } from '../json.js';
import { bool, num, obj, str } from '../json.js';
import { defineProvider, numberText, type ArgvInput, type ProviderInfoFields, type TranscriptReader } from './define.js';

/** What a CLI modelled on claude shares with it (argv flags, output, capabilities). */
export const CLAUDE_SHAPE = {
  docsUrl: 'https://code.claude.com/docs/en/cli-reference',
  versionArgs: ['--version'],
  promptVia: 'stdin',
  output: 'jsonl',
  supports: { stdinPrompt: true, promptFile: false, json: true, maxTurns: true, maxCostUsd: true, reportsTurns: false, reportsCost: true, model: true, agent: true, permissionMode: true },
  permissionFlag: '--permission-mode',
  permissionModes: ['default', 'acceptEdits', 'plan', 'bypassPermissions', 'dontAsk'],
  permissionModesStrict: false,
} satisfies Partial<ProviderInfoFields>;

/** `--permission-mode`, verbatim. */
export function claudePermissionArgs(mode: string): string[] {
  return ['--permission-mode', mode];
}

/** `-p` with no prompt argument reads the prompt from stdin; stream-json requires --verbose. */
export function claudeArgv(a: ArgvInput): string[] {
  const args = ['-p', '--output-format', 'stream-json', '--verbose', ...a.isolation];
  if (a.model !== null) args.push('--model', a.model);
  if (a.agent !== null) args.push('--agent', a.agent);
  args.push(...a.permission);
  if (a.maxTurns !== null) args.push('--max-turns', String(a.maxTurns));
  if (a.maxCostUsd !== null) args.push('--max-budget-usd', numberText(a.maxCostUsd));
  args.push(...a.extraArgs);
  return args;
}

/** claude -p --output-format stream-json --verbose (and a single `--output-format json` result). */
const readClaude: Reader = (e, x) => {
  if (e.type === 'system' && e.subtype === 'init') {
    x.model = str(e.model) ?? x.model;
    x.sessionId = str(e.session_id) ?? x.sessionId;
  } else if (e.type === 'assistant') {
    const message = obj(e.message);
    // An API error arrives as a `<synthetic>` message: not a model.
    const model = str(message?.model);
    if (x.model === null && model !== '<synthetic>') x.model = model;
    x.sessionId = x.sessionId ?? str(e.session_id);
    x.setLast(contentText(message?.content));
  } else if (e.type === 'result') {
    x.finished = true;
    x.sessionId = str(e.session_id) ?? x.sessionId;
    x.turns = num(e.num_turns) ?? x.turns;
    x.durationMs = num(e.duration_ms) ?? x.durationMs;
    // `cost_usd` is the name older versions used.
    x.costUsd = num(e.total_cost_usd) ?? num(e.cost_usd) ?? x.costUsd;
    const usage = obj(e.usage);
    if (usage) {
      x.input = num(usage.input_tokens);
      x.output = num(usage.output_tokens);
      x.cacheRead = num(usage.cache_read_input_tokens);
      x.cacheWrite = num(usage.cache_creation_input_tokens);
    }
    readResultOutcome(e, x);
  }
};

/**
 * The outcome of a claude-shaped `result` event (claude, aicopilot, cursor): a success's `result` is
 * the final message; a failure's (`is_error: true`, or a subtype other than `success` — an
 * `error_max_turns` result says `is_error: false`) is the CLI's error, never the final message.
 */
export function readResultOutcome(e: Json, x: Extract): void {
  const subtype = str(e.subtype);
  const result = str(e.result);
  if (bool(e.is_error) !== true && (subtype === null || subtype === 'success')) {
    if (result !== null) x.resultText = x.cap(result);
    if (bool(e.is_error) === false || subtype === 'success') x.succeed();
    return;
  }
  x.fail(resultError(e, subtype, result, x.turns), true);
}

/**
 * A failed result's error: the subtype with the turns and the CLI's `errors`
 * (`error_max_turns after 12 turns`), or the API error its `result` text carries (`API Error: 529
 * {…overloaded_error…}`, with `api_error_status` when the CLI gives it), or that text as it is.
 */
function resultError(e: Json, subtype: string | null, result: string | null, turns: number | null): AgentError {
  const errors = Array.isArray(e.errors) ? e.errors.filter((m): m is string => typeof m === 'string' && m.trim() !== '') : [];
  const status = num(e.api_error_status);
  const api = result !== null ? apiErrorOf(result) : null;
  if (api !== null || status !== null) {
    const text = result ?? (errors.length > 0 ? errors.join('; ') : null) ?? subtype ?? 'API error';
    const base = api ?? { message: errorText(text), type: null, status: null };
    return { ...base, status: status ?? base.status };
  }
  // `error_max_turns`, `error_during_execution`, `error_max_budget_usd`…: the subtype says why (a bare `error` does not).
  if (subtype !== null && subtype.startsWith('error_')) {
    const detail = errors.length > 0 ? `: ${errors.join('; ')}` : result !== null ? `: ${result}` : '';
    return { message: errorText(`${subtype}${turns !== null ? ` after ${turns} turn${turns === 1 ? '' : 's'}` : ''}${detail}`), type: subtype, status: null };
  }
  const text = result ?? (errors.length > 0 ? errors.join('; ') : null);
  return { message: text !== null ? errorText(text) : 'the CLI reported an error and said nothing more', type: null, status: null };
}

export const CLAUDE_TRANSCRIPT = { format: 'claude-stream-json', read: readClaude, countsTurns: false, prefersLastText: false } satisfies TranscriptReader;

export const claude = defineProvider({
  info: {
    id: 'claude',
    name: 'Claude Code',
    binary: 'claude',
    ...CLAUDE_SHAPE,
    writtenAgainst: 'Claude Code 2.1.x (CLI reference and headless docs as of 2026-11-30)',
    assumed: false,
    modelledOn: null,
    authEnv: ['ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'CLAUDE_CODE_OAUTH_TOKEN', 'CLAUDE_CONFIG_DIR'],
    configDirEnv: 'CLAUDE_CONFIG_DIR',
    isolationEnv: { CLAUDE_CONFIG_DIR: '' },
    // Only the project's own .claude/settings.local.json (as the predecessor's safe mode), and no MCP
    // servers but those given with --mcp-config; the login (CLAUDE_CONFIG_DIR, ~/.claude) is kept.
    settingsIsolationArgs: ['--setting-sources', 'local', '--strict-mcp-config'],
  },
  permissionArgs: claudePermissionArgs,
  argv: claudeArgv,
  transcript: CLAUDE_TRANSCRIPT,
});
