/**
 * gemini — Gemini CLI (headless, `--output-format stream-json`): its description, argv and output
 * reader. docs/agents.md, "gemini".
 */
import type { Reader } from '../extract.js';
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
    case 'result': {
      x.finished = true;
      x.isError = e.status === 'error' ? true : e.status === 'success' ? false : x.isError;
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
      const response = str(e.response);
      if (response !== null) x.resultText = x.cap(response);
      x.isError = obj(e.error) !== null;
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
