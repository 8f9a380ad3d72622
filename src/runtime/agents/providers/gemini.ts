/**
 * gemini — Gemini CLI (headless, `--output-format stream-json`): its description, argv and output
 * reader. docs/agents.md, "gemini".
 */
import { apiErrorOf, errorObject, type AgentError, type Reader } from '../extract.js';
import { num, obj, str } from '../json.js';
import { defineProvider } from './define.js';

/** gemini --output-format stream-json (and the single `--output-format json` object). */
const readGemini: Reader = (e, x) => {
  switch (e.type) {
    case 'init':
      x.sessionId = str(e.session_id) ?? x.sessionId;
      x.model = str(e.model) ?? x.model;
      break;
    case 'message':
      if (e.role === 'assistant' && typeof e.content === 'string') {
        // Deltas are appended; a whole message replaces the segment.
        x.appendSegment(e.content, e.delta === true);
      }
      break;
    case 'tool_use':
    case 'tool_result':
      x.endSegment();
      break;
    case 'error':
      // `severity: 'warning'` is a notice the run goes on after; an error is the CLI's own.
      if (e.severity !== 'warning') x.fail(geminiError({ message: e.message }), false);
      break;
    case 'result': {
      x.finished = true;
      if (e.status === 'error') x.fail(geminiError(e.error), true);
      else if (e.status === 'success') x.succeed();
      const stats = obj(e.stats);
      if (stats) {
        x.input = num(stats.input_tokens);
        x.output = num(stats.output_tokens);
        x.cacheRead = num(stats.cached);
        x.durationMs = num(stats.duration_ms) ?? x.durationMs;
      }
      break;
    }
    case undefined: {
      // `--output-format json`: {session_id?, response, stats: {models: {<name>: {tokens: {...}}}}, error?}
      if (!('response' in e) && !('stats' in e) && !('error' in e)) break;
      x.finished = true;
      x.sessionId = str(e.session_id) ?? x.sessionId;
      const failed = obj(e.error) !== null;
      const response = str(e.response);
      if (response !== null && !failed) x.resultText = x.cap(response);
      if (failed) x.fail(geminiError(e.error), true);
      else x.succeed();
      const models = obj(obj(e.stats)?.models);
      if (models) {
        const names = Object.keys(models);
        if (names.length === 1) x.model = names[0]!;
        for (const name of names) {
          const tokens = obj(obj(models[name])?.tokens);
          x.add('input', num(tokens?.prompt));
          x.add('output', num(tokens?.candidates));
          x.add('cacheRead', num(tokens?.cached));
        }
      }
      break;
    }
  }
};

/**
 * gemini's error (`{type, message, code?}`, or an `error` event's `message`): the HTTP status is the
 * `code` when it is one, else the one its message names (`[API Error: got status: 429 …]`).
 */
function geminiError(value: unknown): AgentError | null {
  const error = errorObject(value);
  if (error === null || error.status !== null) return error;
  const api = apiErrorOf(error.message);
  return api === null ? error : { ...error, status: api.status };
}

export const gemini = defineProvider({
  info: {
    id: 'gemini',
    name: 'Gemini CLI',
    binary: 'gemini',
    docsUrl: 'https://geminicli.com/docs/cli/headless/',
    versionArgs: ['--version'],
    writtenAgainst: 'Gemini CLI 0.x (headless reference; packages/core/src/output/types.ts on google-gemini/gemini-cli, read 2026-11-30)',
    assumed: false,
    modelledOn: null,
    promptVia: 'stdin',
    output: 'jsonl',
    supports: { stdinPrompt: true, promptFile: false, json: true, maxTurns: false, maxCostUsd: false, reportsTurns: false, reportsCost: false, model: true, agent: false, permissionMode: true },
    permissionFlag: '--approval-mode',
    permissionModes: ['default', 'auto_edit', 'yolo', 'plan'],
    permissionModesStrict: false,
    authEnv: ['GEMINI_API_KEY', 'GOOGLE_API_KEY', 'GOOGLE_APPLICATION_CREDENTIALS', 'GOOGLE_CLOUD_PROJECT', 'GEMINI_CLI_HOME'],
    configDirEnv: 'GEMINI_CLI_HOME',
    isolationEnv: { GEMINI_CLI_HOME: '' },
    // The Gemini CLI has no flag that skips its user and project settings.json.
    settingsIsolationArgs: [],
  },
  permissionArgs: (mode) => ['--approval-mode', mode],
  // Headless when stdin is not a TTY: the piped text is the prompt.
  argv(a) {
    const args = ['--output-format', 'stream-json'];
    if (a.model !== null) args.push('--model', a.model);
    args.push(...a.permission);
    args.push(...a.extraArgs);
    return args;
  },
  transcript: { format: 'gemini-stream-json', read: readGemini, countsTurns: false, prefersLastText: false },
});
