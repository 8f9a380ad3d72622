/**
 * The non-interactive invocation of an agent CLI, the same for every provider: the checks of an
 * agent target's fields (flag values, what the provider supports), the provider's argv (its file in
 * ./providers builds it), where the prompt goes (stdin whenever the CLI reads it there, so `ps`
 * never shows it), and the configuration isolation (`configIsolationMode`: the CLI's own settings
 * flags, or an empty configuration directory's variables). Also the budget limits
 * loops enforces itself, and reading a CLI's `--version`.
 *
 * Pure: no I/O, no clock, no process access. The runner resolves the binary on PATH, writes the
 * prompt file, chooses the isolated config directory, spawns the process and parses its output
 * (./parse.ts). The exact argv per provider, and what each flag is based on, is in docs/agents.md.
 */
import { join } from 'node:path';
import { LoopsError, ValidationError } from '../../events/errors.js';
import type { AgentTarget } from '../../workflow/spec.js';
import type { AgentOutputFormat, PromptChannel } from './providers/define.js';
import { PROVIDERS, providerDefinition, providerInfo, type ProviderId, type ProviderInfo } from './providers/index.js';

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
  /** Variables to add (e.g. the empty config dir when configIsolation is 'safe'). */
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

/** The isolation a loop or a step records (src/events/catalog.ts `agentTargetSchema.configIsolation`). */
export type ConfigIsolation = 'login' | 'safe' | 'none';

/**
 * The names `--config-isolation` (and the SDK, and a predecessor-shape spec) take, and what each
 * records. `login` is the default of new agents. `safe` is the predecessor's name, whose runs kept
 * the user's login: it records `login`. The empty configuration directory is `empty`, recorded as
 * `safe` — the value every loop stored before `login` existed holds, and keeps meaning.
 */
export const CONFIG_ISOLATION_NAMES: Readonly<Record<string, ConfigIsolation>> = { login: 'login', safe: 'login', empty: 'safe', none: 'none' };

/** The recorded mode for a name of {@link CONFIG_ISOLATION_NAMES} (null: the default, `login`); a ValidationError naming `flag` otherwise. */
export function configIsolationMode(name: string | null, flag: string): ConfigIsolation {
  if (name === null) return 'login';
  const mode = Object.hasOwn(CONFIG_ISOLATION_NAMES, name) ? CONFIG_ISOLATION_NAMES[name] : undefined;
  if (mode === undefined) {
    throw new ValidationError(`${flag}: ${JSON.stringify(name)} is not a configuration isolation mode`, {
      hint: "login (default: the CLI keeps your login, its own flags shut out user and project settings), empty (an empty configuration directory of its own) or none; safe is the predecessor's name for login",
    });
  }
  return mode;
}

/** How a recorded mode is shown (`loops show`). */
export function configIsolationLabel(mode: string): string {
  return mode === 'login' ? 'login kept, settings shut out' : mode === 'safe' ? 'empty directory' : 'shared';
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

/** The argv fragment for `permissionMode`: the provider's flags, or a ValidationError listing the modes it knows. */
function permissionArgs(info: ProviderInfo, mode: string): string[] {
  const value = flagValue(info.id, 'permissionMode', mode);
  const args = providerDefinition(info.id).permissionArgs(value);
  if (args === null) {
    throw new ValidationError(`${info.id}: unknown permissionMode "${value}"`, {
      hint: `use one of: ${info.permissionModes.join(', ')}`,
      details: { provider: info.id, field: 'permissionMode', value },
    });
  }
  return args;
}

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
 * output (see `enforcedLimits`). The provider's own argv builder may refuse a value only its CLI
 * refuses (opencode: a model that is not provider/model).
 */
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

  const args = providerDefinition(id).argv({
    model,
    agent,
    permission,
    maxTurns: target.maxTurns,
    maxCostUsd: target.maxCostUsd,
    cwd: cwd ?? null,
    extraArgs: [...target.extraArgs],
    isolation: target.configIsolation === 'login' ? [...info.settingsIsolationArgs] : [],
  });

  const env: Record<string, string> = {};
  if (target.configIsolation === 'safe' && Object.keys(info.isolationEnv).length > 0) {
    if (!ctx.isolatedConfigDir) {
      throw new LoopsError('internal', `${id}: configIsolation is safe but no isolated configuration directory was given`);
    }
    for (const [name, sub] of Object.entries(info.isolationEnv)) env[name] = sub === '' ? ctx.isolatedConfigDir : join(ctx.isolatedConfigDir, sub);
  }

  return { command: info.binary, args, promptVia: info.promptVia, stdin: info.promptVia === 'stdin' ? ctx.prompt : null, env, output: info.output };
}
