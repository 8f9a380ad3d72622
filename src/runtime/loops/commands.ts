/**
 * Loop commands: create, pause, resume, stop, archive, remove. Each validates everything first,
 * then records exactly one event through the loop's machine — bad input appends nothing.
 *
 * Over 500 lines on purpose: it is the one place a loop definition is checked and built from user
 * input (policies, command and agent targets, accounts, notifications), shared by the CLI and the
 * SDK (the import records through its `recordLoopCreated`); split, the checks of one field would
 * drift between the paths that build it.
 */
import { existsSync, statSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import type { EventData, LoopAgentTarget, LoopPolicies, Target } from '../../events/catalog.js';
import { buildInvocation, configIsolationMode, isProviderId, PROVIDER_IDS, PROVIDERS } from '../agents/index.js';
import { ACCOUNT_TOOL_RE, resolveAccountEnv, targetAccount } from '../agents/accounts.js';
import { resolveExecutable } from '../execution/which.js';
import { checkCommand, effectivePath } from '../execution/preflight.js';
import { buildSecretRefs } from '../execution/secret-refs.js';
import { secretByConvention } from '../execution/secrets.js';
import { AlreadyExistsError, InvalidTransitionError, ValidationError, uniqueViolation } from '../../events/errors.js';
import { checkName, parseLabels } from '../../events/names.js';
import { runnerMayRun } from '../host.js';
import type { Batch } from '../../events/types.js';
import { currentMachines } from '../../machines/registry.js';
import { DurableActor } from '../actor.js';
import { decideLoop } from './decisions.js';
import { buildNotify } from './notify.js';
import { queuedWork } from '../daemon/run-queue.js';
import { parseFlagDuration } from '../../events/durations.js';
import { newId } from '../ids.js';
import { findLoop, type LoopView } from '../queries/loops.js';
import { findWorkflow } from '../queries/workflows.js';
import type { Runtime } from '../runtime.js';
import { nextFireAt } from '../../scheduling/planner.js';
import { CATCH_UP, CATCH_UP_POLICY_NAMES, choosePolicy, OVERLAP, RETRY } from '../../scheduling/policies.js';
import { buildSchedule, type ScheduleFlags } from '../../scheduling/schedule.js';

export const DEFAULT_KILL_GRACE_MS = 5000;
const ENV_KEY_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

export interface CreateCommandLoopInput {
  name: string;
  description?: string | null;
  /** With `shell` (default true) a shell command line; otherwise the executable. */
  command: string;
  args?: string[];
  shell?: boolean;
  cwd?: string | null;
  env?: Record<string, string>;
  /** Variables passed from the runner's environment as secrets (`--secret-env`): never stored, masked in output. */
  secretEnv?: string[];
  /**
   * Secrets read from a file when each process starts (`--secret-file NAME=PATH`): the absolute
   * path is stored, never the value. The file must be outside the data directory.
   */
  secretFiles?: Array<{ name: string; path: string }>;
  /** Secrets printed by a command (/bin/sh) when each process starts (`--secret-cmd NAME=COMMAND`): the command is stored as written. */
  secretCmds?: Array<{ name: string; command: string }>;
  /**
   * Names in `env` whose name says secret but whose value is not one (`--not-secret`): without it,
   * such a variable is refused, since `env` is stored with the loop in clear.
   */
  notSecret?: string[];
  schedule: ScheduleFlags;
  /** Duration text (`30s`) or ms. */
  timeout?: string | number | null;
  killGrace?: string | number | null;
  /** A name of `OVERLAP` (src/events/policies.ts); default `skip`. */
  overlap?: string | null;
  /** A name of `CATCH_UP`; default `latest`. */
  catchUp?: string | null;
  catchUpWindow?: string | number | null;
  catchUpLimit?: string | number | null;
  /** Attempts per slot (default 1: no retry). */
  attempts?: string | number | null;
  retryDelay?: string | number | null;
  backoff?: string | number | null;
  maxRetryDelay?: string | number | null;
  /** Run lease time-to-live (default 30s). */
  lease?: string | number | null;
  /**
   * A credentials profile the runs use (`--account`): its variables, LOOPS_ACCOUNT_PROFILE/TOOL,
   * and none of the runner's credentials (../agents/accounts.ts). A command loop needs `accountTool`.
   */
  account?: string | null;
  /** The tool the profile is resolved for (`--account-tool`); an agent's default is its provider. */
  accountTool?: string | null;
  /** `--on-failure`: a /bin/sh command run after a run's last attempt failed (./notify.ts). */
  onFailure?: string | null;
  /** `--notify-url`: an http(s) URL told of failed runs (and with `notifyOn`, successes). */
  notifyUrl?: string | null;
  /** `--notify-on`: failure, success or failure,success (default failure). */
  notifyOn?: string | null;
  /**
   * `--runs-on`: the labels a runner needs to run it (comma-separated, or a list; a host's id is
   * one of its labels). Any scheduler decides its slots; only such a runner claims them.
   */
  runsOn?: string | ReadonlyArray<string> | null;
  /**
   * Check now that a run can start (default true): the command (a shell command's first word too)
   * is found on the effective PATH; for an agent, its CLI is installed and its account resolves.
   * `false` (`--no-preflight`) creates the loop anyway, e.g. when the tool is installed later.
   */
  preflight?: boolean;
}

const NO_PREFLIGHT_HINT = "or pass --no-preflight to create the loop anyway (e.g. it is installed before the first run, or only the daemon's PATH has it)";

function positiveCount(value: string | number | null | undefined, flag: string): number | null {
  if (value === null || value === undefined) return null;
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0 || (typeof value === 'string' && !/^\s*\d+\s*$/.test(value))) {
    throw new ValidationError(`${flag} must be a positive whole number, got ${JSON.stringify(value)}`);
  }
  return n;
}

function leaseMs(value: string | number | null | undefined): number {
  const ms = toMs(value, '--lease') ?? 30_000;
  if (ms < 3000) {
    throw new ValidationError(`--lease must be at least 3s, got ${JSON.stringify(value)}`, {
      hint: 'the lease is renewed every third of it; a shorter one would be lost on a busy machine',
    });
  }
  return ms;
}

/** The catch-up policies a flag applies to, as `--catch-up all` or `--catch-up latest or all`. */
function catchUpWith(field: 'window' | 'limit', applies: boolean): string {
  return `${CATCH_UP.flag} ${CATCH_UP_POLICY_NAMES.filter((name) => CATCH_UP.policies[name][field] === applies).join(' or ')}`;
}

/**
 * The loop's policies from user input, each checked. Overlap and catch-up names, their defaults and
 * which flags each catch-up policy takes come from the policy tables (src/events/policies.ts).
 */
export function buildPolicies(input: CreateCommandLoopInput): LoopPolicies {
  const catchUp = choosePolicy(CATCH_UP, input.catchUp);
  const catchUpLimit = positiveCount(input.catchUpLimit, '--catch-up-limit');
  if (catchUpLimit !== null && !CATCH_UP.policies[catchUp].limit) {
    throw new ValidationError(`--catch-up-limit only applies to ${catchUpWith('limit', true)}`, { hint: `add ${catchUpWith('limit', true)}, or drop the limit` });
  }
  const catchUpWindowMs = toMs(input.catchUpWindow, '--catch-up-window');
  if (catchUpWindowMs !== null && !CATCH_UP.policies[catchUp].window) {
    throw new ValidationError(`--catch-up-window has no effect with ${CATCH_UP.flag} ${catchUp}`);
  }
  const attempts = positiveCount(input.attempts, RETRY.attempts.flag) ?? RETRY.attempts.default;
  let backoff: number = RETRY.backoff.default;
  if (input.backoff !== null && input.backoff !== undefined) {
    backoff = Number(input.backoff);
    if (!Number.isFinite(backoff) || backoff < RETRY.backoff.min || (typeof input.backoff === 'string' && !/^\s*\d+(\.\d+)?\s*$/.test(input.backoff))) {
      throw new ValidationError(`--backoff must be a number of at least ${RETRY.backoff.min}, got ${JSON.stringify(input.backoff)}`, {
        hint: 'e.g. --backoff 2 doubles the delay after each failed attempt; 1 keeps it constant',
      });
    }
  }
  const retryDelayMs = toMs(input.retryDelay, RETRY.retryDelay.flag) ?? RETRY.retryDelay.defaultMs;
  const maxRetryDelayMs = toMs(input.maxRetryDelay, RETRY.maxRetryDelay.flag) ?? RETRY.maxRetryDelay.defaultMs;
  if (attempts === 1) {
    for (const [flag, value] of [
      [RETRY.retryDelay.flag, input.retryDelay],
      [RETRY.backoff.flag, input.backoff],
      [RETRY.maxRetryDelay.flag, input.maxRetryDelay],
    ] as const) {
      if (value !== null && value !== undefined) {
        throw new ValidationError(`${flag} has no effect without --attempts 2 or more`, { hint: 'add --attempts <n>, or drop it' });
      }
    }
  }
  if (maxRetryDelayMs !== null && maxRetryDelayMs < retryDelayMs) {
    throw new ValidationError('--max-retry-delay must not be shorter than --retry-delay');
  }
  return {
    timeoutMs: toMs(input.timeout, '--timeout'),
    killGraceMs: toMs(input.killGrace, '--kill-grace') ?? DEFAULT_KILL_GRACE_MS,
    overlap: choosePolicy(OVERLAP, input.overlap),
    catchUp,
    catchUpWindowMs,
    catchUpLimit,
    attempts,
    retryDelayMs,
    backoff,
    maxRetryDelayMs,
    leaseMs: leaseMs(input.lease),
  };
}

export function validateLoopName(name: string): string {
  return checkName('loop', name);
}

function toMs(value: string | number | null | undefined, flag: string): number | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'number') {
    if (!Number.isInteger(value) || value <= 0) throw new ValidationError(`${flag}: must be a positive number of ms`);
    return value;
  }
  return parseFlagDuration(value, flag);
}

export function buildCommandTarget(
  input: Pick<CreateCommandLoopInput, 'command' | 'args' | 'shell' | 'cwd' | 'env' | 'secretEnv' | 'secretFiles' | 'secretCmds' | 'notSecret' | 'preflight'>,
  baseDir = process.cwd(),
  dataDir?: string,
): Target {
  const shell = input.shell ?? true;
  const command = input.command;
  const args = input.args ?? [];
  if (command.trim() === '') throw new ValidationError('--cmd: the command is empty', { hint: "e.g. --cmd 'make test'" });
  // No command line, argument, directory or environment can hold a NUL byte: refused here rather
  // than failing every run at its start.
  for (const [flag, value] of [['--cmd', command], ...args.map((a) => ['--arg', a]), ['--cwd', input.cwd ?? ''], ...Object.entries(input.env ?? {}).flatMap(([k, v]) => [['--env', k], ['--env', v]])]) {
    if (value!.includes('\0')) throw new ValidationError(`${flag}: ${JSON.stringify(value)} contains a NUL byte (\\0), which no command line can hold`, { hint: 'remove it' });
  }
  if (shell && args.length > 0) {
    throw new ValidationError('--arg is only used with --no-shell', {
      hint: "put the arguments in the --cmd text (run by a shell), or add --no-shell to pass them without one",
    });
  }
  if (!shell && /\s/.test(command) && !existsSync(command)) {
    throw new ValidationError(`--cmd: ${JSON.stringify(command)} contains spaces, but --no-shell runs it as a single executable`, {
      hint: `pass the arguments with --arg, e.g. --cmd ${command.split(/\s+/)[0]} --arg ${command.split(/\s+/).slice(1).join(' --arg ')}`,
    });
  }
  let cwd: string | null = null;
  if (input.cwd !== undefined && input.cwd !== null) {
    cwd = isAbsolute(input.cwd) ? input.cwd : resolve(baseDir, input.cwd);
    if (!existsSync(cwd)) throw new ValidationError(`--cwd: directory ${cwd} does not exist`, { hint: 'create it or give another directory' });
    if (!statSync(cwd).isDirectory()) throw new ValidationError(`--cwd: ${cwd} is not a directory`);
  }
  const env = input.env ?? {};
  for (const key of Object.keys(env)) {
    if (!ENV_KEY_RE.test(key)) {
      throw new ValidationError(`--env: invalid variable name ${JSON.stringify(key)}`, { hint: 'use KEY=VALUE with KEY made of letters, digits and _' });
    }
    // A JSON object cannot keep it through validation (it would be dropped without a word).
    if (key === '__proto__') throw new ValidationError('--env: the variable name __proto__ cannot be stored', { hint: 'rename the variable' });
  }
  const secretEnv = checkSecretEnv(input.secretEnv ?? [], env);
  const notSecret = refuseInlineSecrets(env, input.notSecret ?? []);
  const taken = new Map([...Object.keys(env).map((n) => [n, '--env'] as const), ...secretEnv.map((n) => [n, '--secret-env'] as const)]);
  const secretRefs = buildSecretRefs(input, { baseDir, ...(dataDir !== undefined ? { dataDir } : {}), cwd, env, preflight: input.preflight !== false, taken });
  return {
    kind: 'command',
    command,
    args,
    shell,
    cwd,
    env,
    ...(secretEnv.length ? { secretEnv } : {}),
    ...(secretRefs.length ? { secretRefs } : {}),
    ...(notSecret.length ? { notSecret } : {}),
  };
}

/**
 * `--env` values are stored with the loop (its events, its row, every run's claim): one whose name
 * says it holds a secret (`isSecretName`: `*_TOKEN`, `*_API_KEY`, `*PASSWORD*`, …) is refused
 * before anything is written, unless `--not-secret NAME` says it is not one. Returns the names
 * `--not-secret` gave, as written in `env` (recorded with the target: `loops doctor` reads them).
 */
function refuseInlineSecrets(env: Record<string, string>, notSecret: readonly string[]): string[] {
  const allowed = new Set(notSecret.map((n) => n.toUpperCase()));
  for (const [name, value] of Object.entries(env)) {
    if (allowed.has(name.toUpperCase()) || !secretByConvention(name, value)) continue;
    throw new ValidationError(`--env ${name}: its name says it holds a secret, and --env values are stored with the loop, in clear`, {
      hint: `pass it from where the runs run instead — --secret-env ${name} (export ${name}=… where loops daemon runs), --secret-file ${name}=PATH (a file outside the data directory) or --secret-cmd ${name}='COMMAND' (e.g. pass show …), read when each run starts: never stored, masked in output; if it is not a secret: --not-secret ${name}`,
    });
  }
  const given = new Set(Object.keys(env).map((n) => n.toUpperCase()));
  for (const name of notSecret) {
    if (!given.has(name.toUpperCase())) throw new ValidationError(`--not-secret ${name}: no --env ${name}=… to say it of`, { hint: `drop --not-secret ${name}, or add --env ${name}=VALUE` });
  }
  return Object.keys(env).filter((n) => allowed.has(n.toUpperCase()));
}

function checkSecretEnv(names: string[], env: Record<string, string>): string[] {
  for (const name of names) {
    if (!ENV_KEY_RE.test(name)) {
      throw new ValidationError(`--secret-env: invalid variable name ${JSON.stringify(name)}`, { hint: 'give the NAME of a variable set where the runs run (the daemon)' });
    }
    if (Object.hasOwn(env, name)) {
      throw new ValidationError(`--secret-env ${name}: also given with --env, whose value would be stored`, { hint: `drop --env ${name}=…; the runs read ${name} from the runner's environment` });
    }
  }
  return [...new Set(names)];
}

/**
 * Refuses a command target that cannot start here: its executable (or its shell command's first
 * word) is not on the effective PATH of runs, the one runs get (preflight.ts).
 */
export function assertCommandStarts(target: Target, baseDir = process.cwd()): void {
  if (target.kind !== 'command') return;
  const problem = checkCommand(target, effectivePath(target.env), baseDir);
  if (problem !== null) {
    throw new ValidationError(`--cmd: ${problem.message}`, { hint: `${problem.hint}, ${NO_PREFLIGHT_HINT}` });
  }
}

/**
 * The account fields of a target from `--account` / `--account-tool`, checked: a name `accounts env`
 * can take as an argument, a tool for a command (an agent's is its provider unless given), and no
 * tool without a profile.
 */
export function accountFields(input: { account?: string | null; accountTool?: string | null }, kind: 'command' | 'agent'): { account?: string; accountTool?: string } {
  const account = input.account ?? null;
  const tool = input.accountTool ?? null;
  if (account === null) {
    if (tool !== null) throw new ValidationError('--account-tool needs --account <profile>', { hint: 'give the profile, or drop --account-tool' });
    return {};
  }
  // Checked even with --no-preflight: it is stored, and handed to `accounts env <name>` as an argument.
  checkName('account', account, '--account');
  if (tool === null) {
    if (kind === 'command') {
      throw new ValidationError('--account on a command loop needs --account-tool <tool>: the tool whose profile is resolved', {
        hint: `e.g. --account ${account} --account-tool claude (a command has no provider to take it from)`,
      });
    }
    return { account };
  }
  if (!ACCOUNT_TOOL_RE.test(tool)) {
    throw new ValidationError(`--account-tool: invalid tool name ${JSON.stringify(tool)}`, { hint: 'one word of letters, digits, ., _ or -, e.g. claude, codex, gh' });
  }
  return { account, accountTool: tool };
}

/**
 * The labels of `--runs-on` (null when not given), and the input to check the target with: a loop
 * pinned to labels this runner lacks runs elsewhere, so its command, CLI and account are not
 * looked for here (`preflight: false`) — only where it runs.
 */
function pinning<T extends Pick<CreateCommandLoopInput, 'runsOn' | 'preflight'>>(runtime: Runtime, input: T): { runsOn: string[] | null; input: T } {
  const given = input.runsOn;
  if (given === undefined || given === null) return { runsOn: null, input };
  const runsOn = parseLabels(given, '--runs-on');
  return { runsOn, input: runnerMayRun(runtime, runsOn) ? input : { ...input, preflight: false } };
}

export async function createCommandLoop(runtime: Runtime, given: CreateCommandLoopInput): Promise<LoopView> {
  const { input } = pinning(runtime, given);
  const built = buildCommandTarget(input, process.cwd(), runtime.dataDir);
  const target: Target = built.kind === 'command' ? { ...built, ...accountFields(input, 'command') } : built;
  // Checked once every input is valid, right before anything is recorded.
  return createLoop(
    runtime,
    input,
    target,
    input.preflight === false
      ? undefined
      : () => {
          assertCommandStarts(target);
          // The profile must resolve now (registered, or through an external accounts command).
          const account = targetAccount(target);
          if (account !== null) resolveAccountEnv(runtime.db, account.tool, account.profile);
        },
  );
}

export interface AgentLoopFields {
  provider: string;
  /** Exactly one of prompt / promptFile. */
  prompt?: string | null;
  promptFile?: string | null;
  model?: string | null;
  agent?: string | null;
  permissionMode?: string | null;
  extraArgs?: string[];
  /**
   * `login` (default): the user's login, settings shut out by the CLI's own flags; `empty` (recorded
   * `safe`): an empty configuration directory under the data directory; `none`. `safe` is the
   * predecessor's name for `login` (see `configIsolationMode`).
   */
  configIsolation?: string | null;
  account?: string | null;
  maxTurns?: string | number | null;
  maxCostUsd?: string | number | null;
  idleTimeout?: string | number | null;
}

export type CreateAgentLoopInput = Omit<CreateCommandLoopInput, 'command' | 'args' | 'shell'> & AgentLoopFields;

/**
 * Checks an agent target the way a run will use it (the adapter builds its argv now), and — unless
 * `preflight: false` — that its CLI is installed.
 */
export function buildAgentTarget(input: Omit<CreateAgentLoopInput, 'name' | 'schedule'>, baseDir = process.cwd(), dataDir?: string): LoopAgentTarget {
  if (!isProviderId(input.provider)) {
    throw new ValidationError(`--provider: unknown provider ${JSON.stringify(input.provider)}`, { hint: `one of: ${PROVIDER_IDS.join(', ')}` });
  }
  const provider = input.provider;
  const hasPrompt = input.prompt !== undefined && input.prompt !== null;
  const hasFile = input.promptFile !== undefined && input.promptFile !== null;
  if (hasPrompt === hasFile) {
    throw new ValidationError(hasPrompt ? '--prompt and --prompt-file: give one, not both' : 'an agent needs --prompt <text> or --prompt-file <path>', {
      hint: "e.g. --prompt 'fix the failing tests' or --prompt-file ./prompts/nightly.md (read when each run starts)",
    });
  }
  if (hasPrompt && input.prompt!.trim() === '') throw new ValidationError('--prompt: the prompt is empty');
  const promptFile = hasFile ? (isAbsolute(input.promptFile!) ? input.promptFile! : resolve(baseDir, input.promptFile!)) : null;
  if (promptFile !== null && !existsSync(promptFile)) {
    throw new ValidationError(`--prompt-file: ${promptFile} does not exist`, { hint: 'the file is read when each run starts; create it first' });
  }
  const command = buildCommandTarget(
    {
      command: 'agent',
      cwd: input.cwd ?? null,
      env: input.env ?? {},
      secretEnv: input.secretEnv ?? [],
      secretFiles: input.secretFiles ?? [],
      secretCmds: input.secretCmds ?? [],
      notSecret: input.notSecret ?? [],
      ...(input.preflight !== undefined ? { preflight: input.preflight } : {}),
    },
    baseDir,
    dataDir,
  );
  const isolation = configIsolationMode(input.configIsolation ?? null, '--config-isolation');
  const maxCost = input.maxCostUsd === undefined || input.maxCostUsd === null ? null : Number(input.maxCostUsd);
  if (maxCost !== null && !(Number.isFinite(maxCost) && maxCost > 0)) {
    throw new ValidationError(`--max-cost-usd: ${JSON.stringify(input.maxCostUsd)} is not a positive amount`, { hint: 'e.g. --max-cost-usd 2.50' });
  }
  const accountOf = accountFields(input, 'agent');
  const target: LoopAgentTarget = {
    kind: 'agent',
    provider,
    prompt: hasPrompt ? input.prompt! : null,
    promptFile,
    model: input.model ?? null,
    agent: input.agent ?? null,
    cwd: command.kind === 'command' ? command.cwd : null,
    env: input.env ?? {},
    permissionMode: input.permissionMode ?? null,
    extraArgs: input.extraArgs ?? [],
    configIsolation: isolation,
    account: accountOf.account ?? null,
    ...(accountOf.accountTool !== undefined ? { accountTool: accountOf.accountTool } : {}),
    maxTurns: positiveCount(input.maxTurns ?? null, '--max-turns'),
    maxCostUsd: maxCost,
    idleTimeoutMs: toMs(input.idleTimeout ?? null, '--idle-timeout'),
    ...(command.kind === 'command' && command.secretEnv ? { secretEnv: command.secretEnv } : {}),
    ...(command.kind === 'command' && command.secretRefs ? { secretRefs: command.secretRefs } : {}),
    ...(command.kind === 'command' && command.notSecret ? { notSecret: command.notSecret } : {}),
  };
  // The adapter refuses what its CLI would (an unknown permission mode, a flag-like value).
  try {
    buildInvocation(target, { prompt: 'check', promptFile: '/dev/null', isolatedConfigDir: isolation === 'safe' ? '/dev/null' : null, cwd: target.cwd });
  } catch (error) {
    throw asFlagError(error);
  }
  if (input.preflight === false) return target;
  const path = effectivePath(target.env);
  if (resolveExecutable(PROVIDERS[provider].binary, path, target.cwd) === null) {
    throw new ValidationError(`the ${provider} CLI (${PROVIDERS[provider].binary}) is not installed: not found on PATH=${path}`, {
      hint: `install it, or put it in one of these directories (see ${PROVIDERS[provider].docsUrl}), ${NO_PREFLIGHT_HINT}`,
    });
  }
  return target;
}

/** The adapter's field names, as `create agent` spells them. */
const AGENT_FLAGS: Record<string, string> = {
  model: '--model',
  agent: '--agent',
  permissionMode: '--permission-mode',
  maxTurns: '--max-turns',
  maxCostUsd: '--max-cost-usd',
  extraArgs: '--extra-arg',
};

/** An adapter's ValidationError, reworded with the flags the user typed instead of the field names. */
function asFlagError(error: unknown): unknown {
  if (!(error instanceof ValidationError)) return error;
  const provider = error.details?.provider;
  const prefix = `${String(provider)}: `;
  if (typeof provider !== 'string' || !error.message.startsWith(prefix)) return error;
  // The camelCase field names are unambiguous anywhere; `model` and `agent` only where they name
  // the field (first word, `remove …`), not in prose like "provider/model" or "an agent".
  const flags = (text: string) =>
    text
      .replace(/\b(permissionMode|maxTurns|maxCostUsd|extraArgs)\b/g, (field) => AGENT_FLAGS[field]!)
      .replace(/^(model|agent)\b/, (field) => AGENT_FLAGS[field]!)
      .replace(/\bremove (model|agent)\b/g, (_, field: string) => `remove ${AGENT_FLAGS[field]!}`)
      .replace(/^unknown (model|agent)\b/, (_, field: string) => `unknown ${AGENT_FLAGS[field]!}`);
  return new ValidationError(`${flags(error.message.slice(prefix.length))} (provider ${provider})`, {
    ...(error.hint !== undefined ? { hint: flags(error.hint) } : {}),
    ...(error.details !== undefined ? { details: error.details } : {}),
    cause: error,
  });
}

/** A loop whose runs run an AI coding-agent CLI (`loops create agent`). */
export async function createAgentLoop(runtime: Runtime, given: CreateAgentLoopInput): Promise<LoopView> {
  const { input } = pinning(runtime, given);
  const target = buildAgentTarget(input, process.cwd(), runtime.dataDir);
  // The profile must resolve now (registered, or through an external accounts command).
  const account = targetAccount(target);
  if (account !== null && input.preflight !== false) resolveAccountEnv(runtime.db, account.tool, account.profile);
  return createLoop(runtime, { ...input, command: 'unused' }, target);
}

export type CreateWorkflowLoopInput = Omit<CreateCommandLoopInput, 'command' | 'args' | 'shell' | 'cwd' | 'env'> & {
  /** The workflow's name or id; each run runs its latest version. */
  workflow: string;
};

/** A loop whose runs are runs of a stored workflow (`loops create workflow`). */
export async function createWorkflowLoop(runtime: Runtime, input: CreateWorkflowLoopInput): Promise<LoopView> {
  const workflow = findWorkflow(runtime.db, input.workflow);
  return createLoop(runtime, { ...input, command: 'unused' }, { kind: 'workflow', workflowId: workflow.id, workflowName: workflow.name });
}

async function createLoop(runtime: Runtime, input: CreateCommandLoopInput, target: Target, preflight?: () => void): Promise<LoopView> {
  const name = validateLoopName(input.name);
  const now = runtime.clock.now();
  const loopId = newId('loop', now);
  const { schedule, timing } = buildSchedule(input.schedule, now, loopId);
  const policies = buildPolicies(input);
  const notify = buildNotify(input);
  const { runsOn } = pinning(runtime, input);
  assertNameFree(runtime, name);
  preflight?.();
  const data: EventData<'loop.created'> = {
    loopId,
    name,
    description: input.description ?? null,
    schedule,
    timing,
    target,
    policies,
    // Scheduled runs are counted from the first slot on; none exist before creation.
    nextRunAt: nextFireAt({ id: loopId, schedule, timing }, now, 0),
    // Only when given: a loop without it is recorded as loops before it were.
    ...(notify ? { notify } : {}),
    ...(runsOn ? { runsOn } : {}),
  };
  await recordLoopCreated(runtime, data);
  return findLoop(runtime.db, loopId);
}

/** Records a new loop's `loop.created` (in `batch` when given): the one place a loop stream begins. */
export async function recordLoopCreated(runtime: Runtime, data: EventData<'loop.created'>, batch?: Batch): Promise<void> {
  const actor = DurableActor.create(runtime, `loop:${data.loopId}`, 'loop', currentMachines.loop);
  try {
    await actor.record('loop.created', data, batch ? { batch } : {});
  } catch (error) {
    // The partial unique index on live names catches a concurrent create of the same name.
    if (uniqueViolation(error)?.includes('live_name')) {
      throw nameTaken(data.name);
    }
    throw error;
  }
}

function assertNameFree(runtime: Runtime, name: string): void {
  const row = runtime.db.prepare('SELECT id FROM loops WHERE live_name = ?').get(name);
  if (row) throw nameTaken(name);
}

function nameTaken(name: string): AlreadyExistsError {
  return new AlreadyExistsError(`a loop named ${JSON.stringify(name)} already exists`, {
    hint: `choose another name, or remove the existing one first with loops remove ${name}`,
  });
}

export type LoopStateCommand = 'pause' | 'resume' | 'stop' | 'archive' | 'remove';

const COMMAND_EVENTS: Record<LoopStateCommand, string> = {
  pause: 'loop.paused',
  resume: 'loop.resumed',
  stop: 'loop.stopped',
  archive: 'loop.archived',
  remove: 'loop.removed',
};

const COMMAND_PAST: Record<'stop' | 'archive' | 'remove', string> = { stop: 'stopped', archive: 'archived', remove: 'removed' };

/** Moves a loop through its lifecycle; an impossible move is an error that appends nothing. */
export async function changeLoopState(
  runtime: Runtime,
  idOrName: string,
  command: LoopStateCommand,
  options: { reason?: string | null; batch?: Batch } = {},
): Promise<LoopView> {
  const loop = findLoop(runtime.db, idOrName);
  const actor = await DurableActor.load(runtime, `loop:${loop.id}`);
  const type = COMMAND_EVENTS[command];
  const reason = options.reason ?? null;
  const data =
    command === 'resume' ? { reason, nextRunAt: nextFireAt(loop, runtime.clock.now(), loop.scheduledRuns) } : { reason };
  if (!actor.accepts(type, data)) {
    throw new InvalidTransitionError(`cannot ${command} loop ${loop.name}: it is ${actor.state}`, {
      hint: hintFor(command, actor.state, loop.name),
    });
  }
  await runtime.log.batch(async (batch) => {
    // Stopping, archiving or removing gives up the work the loop decided and nobody started (a
    // fired or buffered slot, a scheduled retry): each recorded as dropped, in the same append, so
    // every promised run ends in a run or in a record of why not. A pause keeps it waiting.
    if (command === 'stop' || command === 'archive' || command === 'remove') {
      const queued = queuedWork(runtime, loop.id);
      if (queued.length) {
        await actor.recordAll(
          [
            ...queued.map((q) => ({ type: 'slot.dropped', data: { runId: q.runId, slot: q.slot, attempt: q.attempt, reason: `loop ${COMMAND_PAST[command]} before it started` } })),
            { type, data },
          ],
          { guards: queued.map((q) => ({ kind: 'queued' as const, runId: q.runId })), batch },
        );
        return;
      }
    }
    await actor.record(type, data, { batch });
    // Resumed with nothing left to run (a one-shot whose instant, or a schedule whose last slot,
    // passed while it was paused or stopped: those slots are not run late): it expires now, as a
    // pass would decide, instead of staying active with no next run.
    if (command === 'resume' && data.nextRunAt === null && loop.schedule.kind !== 'manual') await decideLoop(runtime, loop.id, runtime.clock.now(), { batch });
  }, options.batch);
  return findLoop(runtime.db, loop.id, { includeRemoved: true });
}

function hintFor(command: LoopStateCommand, state: string, name: string): string {
  if (command === 'pause' && state === 'paused') return `it is already paused; loops resume ${name} resumes it`;
  if (command === 'resume' && state === 'active') return 'it is already active';
  if (state === 'archived') return `archived loops can only be removed (loops remove ${name})`;
  return `loops show ${name} shows its state`;
}
