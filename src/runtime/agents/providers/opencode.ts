/**
 * opencode (`opencode run --format json`): its description, argv and output reader. docs/agents.md,
 * "opencode". It has no budget flags but reports cost and steps as it goes, so loops enforces
 * `maxCostUsd` / `maxTurns` itself (`supports.reportsCost` / `reportsTurns`).
 */
import { ValidationError } from '../../../events/errors.js';
import { errorObject, type Reader } from '../extract.js';
import { num, obj, str } from '../json.js';
import { defineProvider } from './define.js';

/** opencode run --format json ({type, timestamp, sessionID, part} events). */
const readOpencode: Reader = (e, x) => {
  const part = obj(e.part);
  x.sessionId = x.sessionId ?? str(e.sessionID) ?? str(part?.sessionID);
  switch (e.type) {
    case 'step_finish': {
      // A step that ends in tool calls is followed by another step: only a step that stops is final.
      if (part?.reason !== 'tool-calls') x.finished = true;
      x.turnCount++;
      const tokens = obj(part?.tokens);
      if (tokens) {
        x.add('input', num(tokens.input));
        // Reasoning tokens are billed as output.
        const out = num(tokens.output);
        const reasoning = num(tokens.reasoning);
        x.add('output', out === null && reasoning === null ? null : (out ?? 0) + (reasoning ?? 0));
        const cache = obj(tokens.cache);
        x.add('cacheRead', num(cache?.read));
        x.add('cacheWrite', num(cache?.write));
      }
      x.add('costUsd', num(part?.cost));
      if (x.isError === null) x.isError = false;
      break;
    }
    case 'text':
      x.setLast(str(part?.text));
      break;
    case 'error':
      // The session's error (`{name, data: {message, statusCode?, …}}`): opencode stops and exits 1.
      x.fail(errorObject(e.error), true);
      break;
    case 'done':
      x.finished = true;
      break;
  }
};

export const opencode = defineProvider({
  info: {
    id: 'opencode',
    name: 'opencode',
    binary: 'opencode',
    docsUrl: 'https://opencode.ai/docs/cli/#run',
    versionArgs: ['--version'],
    writtenAgainst: 'opencode 1.x (packages/opencode/src/cli/cmd/run.ts on anomalyco/opencode, read 2026-11-30)',
    assumed: false,
    modelledOn: null,
    promptVia: 'stdin',
    output: 'jsonl',
    supports: { stdinPrompt: true, promptFile: false, json: true, maxTurns: false, maxCostUsd: false, reportsTurns: true, reportsCost: true, model: true, agent: true, permissionMode: true },
    permissionFlag: '--auto',
    permissionModes: ['default', 'auto', 'bypassPermissions'],
    permissionModesStrict: true,
    authEnv: [
      'ANTHROPIC_API_KEY',
      'OPENAI_API_KEY',
      'OPENROUTER_API_KEY',
      'GEMINI_API_KEY',
      'GOOGLE_API_KEY',
      'OPENCODE_CONFIG',
      'OPENCODE_CONFIG_DIR',
      'OPENCODE_CONFIG_CONTENT',
    ],
    configDirEnv: 'XDG_CONFIG_HOME',
    isolationEnv: { XDG_CONFIG_HOME: 'config', XDG_DATA_HOME: 'data' },
    // --pure: no external plugins (as the predecessor's safe mode); its login (auth.json) is kept.
    settingsIsolationArgs: ['--pure'],
  },
  permissionArgs(mode) {
    if (mode === 'default') return [];
    if (mode === 'auto' || mode === 'bypassPermissions') return ['--auto'];
    return null;
  },
  // `run` with no message reads it from a non-TTY stdin.
  argv(a) {
    if (a.model !== null && !/^[^/]+\/.+/.test(a.model)) {
      throw new ValidationError(`opencode: model "${a.model}" must be provider/model`, {
        hint: 'e.g. anthropic/claude-sonnet-4-5 or openai/gpt-5',
        details: { provider: 'opencode', field: 'model' },
      });
    }
    const args = ['run', '--format', 'json', ...a.isolation];
    if (a.model !== null) args.push('--model', a.model);
    if (a.agent !== null) args.push('--agent', a.agent);
    args.push(...a.permission);
    args.push(...a.extraArgs);
    return args;
  },
  // Steps are counted (one per model call): no final event says how many.
  transcript: { format: 'opencode-run-json', read: readOpencode, countsTurns: true, prefersLastText: false },
});
