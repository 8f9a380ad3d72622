/**
 * codex — OpenAI Codex CLI (`codex exec --json`): its description, argv and output reader.
 * docs/agents.md, "codex". codewith (./codewith.ts) is modelled on it and reuses this file's argv,
 * permission flags and reader.
 */
import { apiErrorOf, errorText, type AgentError, type Reader } from '../extract.js';
import { num, obj, str } from '../json.js';
import { defineProvider, type ArgvInput, type ProviderInfoFields, type TranscriptReader } from './define.js';

/** What a CLI modelled on codex shares with it (argv flags, output, capabilities). */
export const CODEX_SHAPE = {
  docsUrl: 'https://developers.openai.com/codex/noninteractive',
  versionArgs: ['--version'],
  promptVia: 'stdin',
  output: 'jsonl',
  supports: { stdinPrompt: true, promptFile: false, json: true, maxTurns: false, maxCostUsd: false, reportsTurns: false, reportsCost: false, model: true, agent: true, permissionMode: true },
  permissionFlag: '--sandbox',
  permissionModes: ['read-only', 'workspace-write', 'danger-full-access'],
  permissionModesStrict: false,
} satisfies Partial<ProviderInfoFields>;

/** `--sandbox`, verbatim. */
export function codexPermissionArgs(mode: string): string[] {
  return ['--sandbox', mode];
}

/** The trailing `-` makes codex exec read the prompt from stdin. */
export function codexArgv(a: ArgvInput): string[] {
  const args = ['exec', '--json', '--skip-git-repo-check', ...a.isolation];
  if (a.model !== null) args.push('--model', a.model);
  if (a.agent !== null) args.push('--profile', a.agent);
  args.push(...a.permission);
  if (a.cwd) args.push('--cd', a.cwd);
  args.push(...a.extraArgs, '-');
  return args;
}

/** codex exec --json (thread/turn/item events). */
const readCodex: Reader = (e, x) => {
  switch (e.type) {
    case 'thread.started':
      x.sessionId = str(e.thread_id) ?? x.sessionId;
      break;
    case 'turn.completed': {
      x.finished = true;
      x.turnCount++;
      const usage = obj(e.usage);
      if (usage) {
        x.add('input', num(usage.input_tokens));
        x.add('output', num(usage.output_tokens));
        x.add('cacheRead', num(usage.cached_input_tokens));
      }
      // A turn that completes after an `error` event (a retried request) succeeded.
      x.succeed();
      break;
    }
    case 'turn.failed':
      x.finished = true;
      x.turnCount++;
      x.fail(codexError(obj(e.error)?.message), true);
      break;
    case 'error':
      x.fail(codexError(e.message), false);
      break;
    case 'item.completed': {
      const item = obj(e.item);
      if (item?.type === 'agent_message') x.setLast(str(item.text));
      break;
    }
  }
};

/**
 * codex's error message (`turn.failed`'s `error.message`, an `error` event's `message`): the HTTP
 * status and the API's error type when the text carries them (`unexpected status 401 Unauthorized:
 * {"error":{…}}`, `exceeded retry limit, last status: 429 …`), else the text as it is.
 */
function codexError(message: unknown): AgentError | null {
  const text = str(message);
  if (text === null) return null;
  return apiErrorOf(text) ?? { message: errorText(text), type: null, status: null };
}

/** Turns are counted (`turn.completed` + `turn.failed`): no final event says how many. */
export const CODEX_TRANSCRIPT = { format: 'codex-exec-jsonl', read: readCodex, countsTurns: true, prefersLastText: false } satisfies TranscriptReader;

export const codex = defineProvider({
  info: {
    id: 'codex',
    name: 'OpenAI Codex CLI',
    binary: 'codex',
    ...CODEX_SHAPE,
    writtenAgainst: 'codex-rs exec (codex-rs/exec/src/cli.rs and exec_events.rs on openai/codex main, read 2026-11-30)',
    assumed: false,
    modelledOn: null,
    authEnv: ['OPENAI_API_KEY', 'CODEX_API_KEY', 'CODEX_HOME'],
    configDirEnv: 'CODEX_HOME',
    isolationEnv: { CODEX_HOME: '' },
    // $CODEX_HOME/config.toml and the execpolicy .rules files are not read; auth.json (the login) is.
    settingsIsolationArgs: ['--ignore-user-config', '--ignore-rules'],
  },
  permissionArgs: codexPermissionArgs,
  argv: codexArgv,
  transcript: CODEX_TRANSCRIPT,
});
