/**
 * Agent-CLI adapters: for each provider, the non-interactive argv built from an agent target, where
 * the prompt goes (stdin whenever the CLI reads it there, so `ps` never shows it), which output
 * format is forced, and which environment variables carry credentials and configuration.
 *
 * Pure: no I/O, no clock, no process access. The runner resolves the binary on PATH, writes the
 * prompt file, chooses the isolated config directory, spawns the process and parses its output
 * (see ./parse.ts). The exact argv per provider, and what each flag is based on, is documented in
 * docs/agents.md.
 */
import { join } from 'node:path';
import { LoopsError, ValidationError } from '../../events/errors.js';
import type { AgentTarget } from '../../workflow/spec.js';

export type ProviderId = 'claude' | 'codex' | 'cursor' | 'opencode' | 'gemini' | 'codewith' | 'aicopilot';

export const PROVIDER_IDS: readonly ProviderId[] = ['claude', 'codex', 'cursor', 'opencode', 'gemini', 'codewith', 'aicopilot'];

/** How the prompt reaches the CLI. */
export type PromptChannel = 'stdin' | 'file' | 'argv';

/** What the CLI prints on stdout once its machine-readable output is forced. */
export type AgentOutputFormat = 'json' | 'jsonl' | 'text';

/** The shape of the JSON a provider prints, i.e. which parser reads it (see ./parse.ts). */
export type TranscriptFormat = 'claude-stream-json' | 'codex-exec-jsonl' | 'cursor-stream-json' | 'opencode-run-json' | 'gemini-stream-json';

export interface ProviderSupports {
  /** The CLI reads the prompt from stdin (then it is written there and stdin is closed). */
  stdinPrompt: boolean;
  /** The CLI accepts a path to a file holding the prompt. */
  promptFile: boolean;
  /** The CLI has a machine-readable (JSON / JSONL) output mode. */
  json: boolean;
  /** A CLI flag caps the number of agent turns. */
  maxTurns: boolean;
  /** A CLI flag caps the cost in USD. */
  maxCostUsd: boolean;
  /** The output reports the cost in USD (opencode: per step, as it goes — so loops can enforce `maxCostUsd` itself). */
  reportsCost: boolean;
  /** The output reports each turn as it ends (opencode: steps), so loops can enforce `maxTurns` itself. */
  reportsTurns: boolean;
  /** A CLI flag selects the model. */
  model: boolean;
  /** A CLI flag selects a named agent / profile. */
  agent: boolean;
  /** A CLI flag selects the permission / sandbox / approval mode. */
  permissionMode: boolean;
}

export interface ProviderInfo {
  id: ProviderId;
  /** Display name. */
  name: string;
  /** The executable, resolved on PATH by the caller. */
  binary: string;
  /** Where the non-interactive flags are documented. */
  docsUrl: string;
  /** Argv that prints the CLI's version and exits 0. */
  versionArgs: readonly string[];
  /** The CLI version (or source revision) the adapter was written against, and when. */
  writtenAgainst: string;
  /** True for the predecessor's CLIs whose flags are not public: modelled on another provider. */
  assumed: boolean;
  /** The CLI this one is modelled on, when `assumed`. */
  modelledOn: ProviderId | null;
  promptVia: PromptChannel;
  output: AgentOutputFormat;
  transcript: TranscriptFormat;
  supports: ProviderSupports;
  /** What `permissionMode` means for this CLI (the flag it becomes). */
  permissionFlag: string | null;
  /** The documented `permissionMode` values. */
  permissionModes: readonly string[];
  /** True when only `permissionModes` are accepted (they are mapped); false = passed to the CLI verbatim. */
  permissionModesStrict: boolean;
  /** Credential and configuration variables the CLI reads (removed from a run's inherited environment before an account's are set). */
  authEnv: readonly string[];
  /** The variable pointed at the isolated configuration directory under `configIsolation: 'safe'`, or null. */
  configDirEnv: string | null;
  /**
   * Every variable set under `configIsolation: 'safe'`, each to a sub-directory of the isolated
   * directory ('' = the directory itself).
   */
  isolationEnv: Readonly<Record<string, string>>;
}

const CLAUDE_PERMISSION_MODES = ['default', 'acceptEdits', 'plan', 'bypassPermissions', 'dontAsk'] as const;
const CODEX_SANDBOX_MODES = ['read-only', 'workspace-write', 'danger-full-access'] as const;

/** What a CLI modelled on claude shares with it (argv flags, output, capabilities). */
const CLAUDE_SHAPE = {
  docsUrl: 'https://code.claude.com/docs/en/cli-reference',
  versionArgs: ['--version'],
  promptVia: 'stdin',
  output: 'jsonl',
  transcript: 'claude-stream-json',
  supports: { stdinPrompt: true, promptFile: false, json: true, maxTurns: true, maxCostUsd: true, reportsTurns: false, reportsCost: true, model: true, agent: true, permissionMode: true },
  permissionFlag: '--permission-mode',
  permissionModes: CLAUDE_PERMISSION_MODES,
  permissionModesStrict: false,
} satisfies Partial<ProviderInfo>;

/** What a CLI modelled on codex shares with it (argv flags, output, capabilities). */
const CODEX_SHAPE = {
  docsUrl: 'https://developers.openai.com/codex/noninteractive',
  versionArgs: ['--version'],
  promptVia: 'stdin',
  output: 'jsonl',
  transcript: 'codex-exec-jsonl',
  supports: { stdinPrompt: true, promptFile: false, json: true, maxTurns: false, maxCostUsd: false, reportsTurns: false, reportsCost: false, model: true, agent: true, permissionMode: true },
  permissionFlag: '--sandbox',
  permissionModes: CODEX_SANDBOX_MODES,
  permissionModesStrict: false,
} satisfies Partial<ProviderInfo>;

export const PROVIDERS: Readonly<Record<ProviderId, ProviderInfo>> = {
  claude: {
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
  },
  codex: {
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
  },
  cursor: {
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
    transcript: 'cursor-stream-json',
    supports: { stdinPrompt: true, promptFile: false, json: true, maxTurns: false, maxCostUsd: false, reportsTurns: false, reportsCost: false, model: true, agent: false, permissionMode: true },
    permissionFlag: '--force / --mode',
    permissionModes: ['default', 'force', 'yolo', 'bypassPermissions', 'plan', 'ask'],
    permissionModesStrict: true,
    authEnv: ['CURSOR_API_KEY', 'CURSOR_CONFIG_DIR'],
    configDirEnv: 'CURSOR_CONFIG_DIR',
    isolationEnv: { CURSOR_CONFIG_DIR: '' },
  },
  opencode: {
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
    transcript: 'opencode-run-json',
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
  },
  gemini: {
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
    transcript: 'gemini-stream-json',
    supports: { stdinPrompt: true, promptFile: false, json: true, maxTurns: false, maxCostUsd: false, reportsTurns: false, reportsCost: false, model: true, agent: false, permissionMode: true },
    permissionFlag: '--approval-mode',
    permissionModes: ['default', 'auto_edit', 'yolo', 'plan'],
    permissionModesStrict: false,
    authEnv: ['GEMINI_API_KEY', 'GOOGLE_API_KEY', 'GOOGLE_APPLICATION_CREDENTIALS', 'GOOGLE_CLOUD_PROJECT', 'GEMINI_CLI_HOME'],
    configDirEnv: 'GEMINI_CLI_HOME',
    isolationEnv: { GEMINI_CLI_HOME: '' },
  },
  codewith: {
    id: 'codewith',
    name: 'codewith (assumed codex-compatible)',
    binary: 'codewith',
    ...CODEX_SHAPE,
    writtenAgainst: 'no public documentation: assumed to take codex exec flags and print codex exec --json events',
    assumed: true,
    modelledOn: 'codex',
    authEnv: ['OPENAI_API_KEY', 'CODEWITH_API_KEY', 'CODEWITH_HOME'],
    configDirEnv: 'CODEWITH_HOME',
    isolationEnv: { CODEWITH_HOME: '' },
  },
  aicopilot: {
    id: 'aicopilot',
    name: 'aicopilot (assumed claude-compatible)',
    binary: 'aicopilot',
    ...CLAUDE_SHAPE,
    writtenAgainst: 'no public documentation: assumed to take claude -p flags and print claude stream-json events',
    assumed: true,
    modelledOn: 'claude',
    authEnv: ['ANTHROPIC_API_KEY', 'AICOPILOT_API_KEY', 'AICOPILOT_CONFIG_DIR'],
    configDirEnv: 'AICOPILOT_CONFIG_DIR',
    isolationEnv: { AICOPILOT_CONFIG_DIR: '' },
  },
};

/** Every provider's credential and configuration variables, deduplicated, sorted. */
export const AUTH_ENV_VARS: readonly string[] = [...new Set(PROVIDER_IDS.flatMap((id) => PROVIDERS[id].authEnv))].sort();

export function isProviderId(value: string): value is ProviderId {
  return (PROVIDER_IDS as readonly string[]).includes(value);
}

/** The provider's description; a ValidationError naming the known providers for anything else. */
export function providerInfo(provider: string): ProviderInfo {
  if (isProviderId(provider)) return PROVIDERS[provider];
  throw new ValidationError(`unknown agent provider "${provider}"`, {
    hint: `use one of: ${PROVIDER_IDS.join(', ')}`,
    details: { provider },
  });
}

/**
 * The version string in a CLI's `--version` output: the first `x.y[.z…]` token (with any
 * pre-release or build suffix), else the first non-empty line (at most 200 characters), else null.
 */
export function parseVersionOutput(output: string): string | null {
  const match = /(?<![\w.])v?(\d+\.\d+(?:\.\d+)*(?:[-+][0-9A-Za-z.-]*[0-9A-Za-z])?)/.exec(output);
  if (match) return match[1]!;
  const line = output.split(/\r?\n/).find((l) => l.trim() !== '');
  return line === undefined ? null : line.trim().slice(0, 200);
}

export interface AgentInvocation {
  /** Binary name (resolved on PATH by the caller). */
  command: string;
  /** Exact argv after the command. */
  args: string[];
  /** How the prompt reaches the CLI: written to stdin and closed, or a file path in argv, or (documented exception) in argv. */
  promptVia: PromptChannel;
  /** The prompt when `promptVia` is 'stdin', else null (stdin is then ignored/closed). */
  stdin: string | null;
  /** Variables to add (e.g. an isolated config dir when configIsolation is 'safe'). */
  env: Record<string, string>;
  output: AgentOutputFormat;
}

export interface InvocationContext {
  /** The prompt text (templates already expanded). */
  prompt: string;
  /** A file holding the same prompt, written by the caller (0600); the source of stdin when the runner pipes from a file. */
  promptFile: string;
  /** The directory the CLI's configuration variable points at under `configIsolation: 'safe'`. */
  isolatedConfigDir: string | null;
  /** The resolved working directory, when the CLI takes it as a flag too; defaults to `target.cwd`. */
  cwd?: string | null;
}

/** The target fields an adapter reads (the whole AgentTarget also fits). */
export type AgentTargetFields = Pick<
  AgentTarget,
  'provider' | 'model' | 'agent' | 'cwd' | 'permissionMode' | 'extraArgs' | 'configIsolation' | 'maxTurns' | 'maxCostUsd'
>;

/** A value given to a flag: non-empty, one line, and not something the CLI would read as another flag. */
function flagValue(provider: ProviderId, field: string, value: string): string {
  if (value.trim() === '') throw new ValidationError(`${provider}: ${field} is empty`, { details: { provider, field } });
  if (value.startsWith('-')) {
    throw new ValidationError(`${provider}: ${field} "${value}" starts with "-" and would be read as a flag`, { details: { provider, field } });
  }
  if (/[\r\n\0]/.test(value)) throw new ValidationError(`${provider}: ${field} must be a single line`, { details: { provider, field } });
  return value;
}

function unsupported(info: ProviderInfo, field: string, why: string, hint: string): never {
  throw new ValidationError(`${info.id}: ${field} is not supported: ${why}`, { hint, details: { provider: info.id, field } });
}

function numberText(value: number): string {
  // Plain decimal notation (never 1e-7), trailing zeros dropped.
  return Number.isInteger(value) ? String(value) : value.toFixed(10).replace(/0+$/, '').replace(/\.$/, '');
}

/** The argv fragment for `permissionMode`, per provider (see docs/agents.md). */
function permissionArgs(info: ProviderInfo, mode: string): string[] {
  const value = flagValue(info.id, 'permissionMode', mode);
  const reject = (): never => {
    throw new ValidationError(`${info.id}: unknown permissionMode "${value}"`, {
      hint: `use one of: ${info.permissionModes.join(', ')}`,
      details: { provider: info.id, field: 'permissionMode', value },
    });
  };
  switch (info.id) {
    case 'claude':
    case 'aicopilot':
      return ['--permission-mode', value];
    case 'codex':
    case 'codewith':
      return ['--sandbox', value];
    case 'gemini':
      return ['--approval-mode', value];
    case 'cursor':
      if (value === 'default') return [];
      if (value === 'force' || value === 'yolo' || value === 'bypassPermissions') return ['--force'];
      if (value === 'plan' || value === 'ask') return ['--mode', value];
      return reject();
    case 'opencode':
      if (value === 'default') return [];
      if (value === 'auto' || value === 'bypassPermissions') return ['--auto'];
      return reject();
  }
}

/**
 * The command, argv, stdin and added environment that run `target` non-interactively with
 * machine-readable output. The prompt never goes into argv: every supported CLI reads it from
 * stdin, which the caller writes and closes (or feeds from `ctx.promptFile`).
 *
 * Throws a ValidationError for an unknown provider, an empty prompt, a flag value that starts with
 * "-", a permissionMode the provider does not know (cursor, opencode), `agent` or `maxTurns` on a
 * provider without such a flag, and `maxCostUsd` / `maxTurns` on a provider that neither has a
 * flag for it nor reports it as it goes (loops could not enforce it). A limit that the provider
 * reports but has no flag for (opencode: cost and steps) is accepted: loops enforces it from the
 * output (see `enforcedLimits`).
 */
/**
 * The limits of `target` that loops enforces itself, from what the CLI reports while it runs: those
 * its CLI has no flag for (a limit with a flag is passed to the CLI and left to it). Null when none.
 */
export function enforcedLimits(target: Pick<AgentTargetFields, 'provider' | 'maxTurns' | 'maxCostUsd'>): { maxCostUsd: number | null; maxTurns: number | null } | null {
  const info = providerInfo(target.provider);
  const maxCostUsd = target.maxCostUsd !== null && !info.supports.maxCostUsd && info.supports.reportsCost ? target.maxCostUsd : null;
  const maxTurns = target.maxTurns !== null && !info.supports.maxTurns && info.supports.reportsTurns ? target.maxTurns : null;
  return maxCostUsd === null && maxTurns === null ? null : { maxCostUsd, maxTurns };
}

/**
 * Why a run must stop, given what its CLI reported so far and the limits loops enforces for it
 * (`enforcedLimits`), or null while it is within them. A limit is exceeded when the reported figure
 * is above it (a run that spent exactly its budget may finish).
 */
export function limitExceeded(
  provider: ProviderId,
  progress: { costUsd: number | null; turns: number | null },
  limits: { maxCostUsd: number | null; maxTurns: number | null },
): string | null {
  const name = PROVIDERS[provider].binary;
  if (limits.maxCostUsd !== null && progress.costUsd !== null && progress.costUsd > limits.maxCostUsd) {
    return `over budget: ${name} reported a cost of ${usd(progress.costUsd)} so far, above the limit of ${usd(limits.maxCostUsd)} (max cost); stopped by loops`;
  }
  if (limits.maxTurns !== null && progress.turns !== null && progress.turns > limits.maxTurns) {
    return `over the turn limit: ${name} reported ${progress.turns} turns so far, above the limit of ${limits.maxTurns} (max turns); stopped by loops`;
  }
  return null;
}

function usd(amount: number): string {
  return `$${amount.toFixed(amount < 1 ? 4 : 2)}`;
}

export function buildInvocation(target: AgentTargetFields, ctx: InvocationContext): AgentInvocation {
  const info = providerInfo(target.provider);
  const id = info.id;
  if (ctx.prompt.trim() === '') {
    throw new ValidationError(`${id}: the prompt is empty`, { hint: 'give a prompt text or a prompt file that is not empty', details: { provider: id } });
  }
  if (target.agent !== null && !info.supports.agent) {
    unsupported(info, 'agent', `${info.binary} has no named agents or profiles`, 'remove agent, or pass the CLI\'s own flag with extraArgs');
  }
  if (target.maxTurns !== null && !info.supports.maxTurns && !info.supports.reportsTurns) {
    unsupported(
      info,
      'maxTurns',
      `${info.binary} has no flag that limits turns and does not report them as it goes, so the limit could not be enforced`,
      'remove maxTurns and rely on the timeout / idle timeout',
    );
  }
  if (target.maxCostUsd !== null && !info.supports.maxCostUsd && !info.supports.reportsCost) {
    unsupported(
      info,
      'maxCostUsd',
      `${info.binary} has no budget flag and does not report its cost, so the budget could not be enforced`,
      'remove maxCostUsd and rely on the timeout / idle timeout',
    );
  }
  if (target.maxTurns !== null && !(Number.isInteger(target.maxTurns) && target.maxTurns > 0)) {
    throw new ValidationError(`${id}: maxTurns must be a positive integer`, { details: { provider: id, field: 'maxTurns' } });
  }
  if (target.maxCostUsd !== null && !(Number.isFinite(target.maxCostUsd) && target.maxCostUsd > 0)) {
    throw new ValidationError(`${id}: maxCostUsd must be a positive number`, { details: { provider: id, field: 'maxCostUsd' } });
  }
  const model = target.model === null ? null : flagValue(id, 'model', target.model);
  const agent = target.agent === null ? null : flagValue(id, 'agent', target.agent);
  const permission = target.permissionMode === null ? [] : permissionArgs(info, target.permissionMode);
  const cwd = ctx.cwd !== undefined ? ctx.cwd : target.cwd;
  const extra = [...target.extraArgs];

  let args: string[];
  switch (id) {
    case 'claude':
    case 'aicopilot':
      // `-p` with no prompt argument reads the prompt from stdin; stream-json requires --verbose.
      args = ['-p', '--output-format', 'stream-json', '--verbose'];
      if (model !== null) args.push('--model', model);
      if (agent !== null) args.push('--agent', agent);
      args.push(...permission);
      if (target.maxTurns !== null) args.push('--max-turns', String(target.maxTurns));
      if (target.maxCostUsd !== null) args.push('--max-budget-usd', numberText(target.maxCostUsd));
      args.push(...extra);
      break;
    case 'codex':
    case 'codewith':
      // The trailing `-` makes codex exec read the prompt from stdin.
      args = ['exec', '--json', '--skip-git-repo-check'];
      if (model !== null) args.push('--model', model);
      if (agent !== null) args.push('--profile', agent);
      args.push(...permission);
      if (cwd) args.push('--cd', cwd);
      args.push(...extra, '-');
      break;
    case 'cursor':
      // Print mode reads a piped prompt from stdin; --trust skips the workspace-trust prompt headless runs cannot answer.
      args = ['--print', '--output-format', 'stream-json', '--trust'];
      if (model !== null) args.push('--model', model);
      args.push(...permission);
      if (cwd) args.push('--workspace', cwd);
      args.push(...extra);
      break;
    case 'opencode':
      // `run` with no message reads it from a non-TTY stdin.
      if (model !== null && !/^[^/]+\/.+/.test(model)) {
        throw new ValidationError(`opencode: model "${model}" must be provider/model`, {
          hint: 'e.g. anthropic/claude-sonnet-4-5 or openai/gpt-5',
          details: { provider: id, field: 'model' },
        });
      }
      args = ['run', '--format', 'json'];
      if (model !== null) args.push('--model', model);
      if (agent !== null) args.push('--agent', agent);
      args.push(...permission);
      args.push(...extra);
      break;
    case 'gemini':
      // Headless when stdin is not a TTY: the piped text is the prompt.
      args = ['--output-format', 'stream-json'];
      if (model !== null) args.push('--model', model);
      args.push(...permission);
      args.push(...extra);
      break;
  }

  const env: Record<string, string> = {};
  if (target.configIsolation === 'safe' && Object.keys(info.isolationEnv).length > 0) {
    if (!ctx.isolatedConfigDir) {
      throw new LoopsError('internal', `${id}: configIsolation is safe but no isolated configuration directory was given`);
    }
    for (const [name, sub] of Object.entries(info.isolationEnv)) env[name] = sub === '' ? ctx.isolatedConfigDir : join(ctx.isolatedConfigDir, sub);
  }

  return { command: info.binary, args, promptVia: info.promptVia, stdin: info.promptVia === 'stdin' ? ctx.prompt : null, env, output: info.output };
}
