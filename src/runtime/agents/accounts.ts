/**
 * Credentials profiles for agent CLIs (`--account <profile>`). A profile is a directory registered
 * with `loops accounts add <name> --tool <provider> --dir <path>`: a run under it gets the CLI's
 * configuration variable (CLAUDE_CONFIG_DIR, CODEX_HOME, …) pointed at that directory. When no
 * profile of that name is registered and an external `accounts` command is installed, it is
 * asked instead (`accounts env <profile> --tool <tool>`, printing KEY=VALUE lines), as the
 * predecessor did. Either way the run's inherited credential variables are removed first
 * (`ACCOUNT_UNSET_ENV`: every provider's AUTH_ENV_VARS, and — as the predecessor did — GITHUB_TOKEN,
 * GH_TOKEN and the XDG base directories), so a run never mixes two accounts, and the run is told
 * which profile it runs under: LOOPS_ACCOUNT_PROFILE and LOOPS_ACCOUNT_TOOL.
 *
 * Command loops and command steps take an account too (`--account work --account-tool gh`): the
 * tool then names what `accounts env` resolves (any tool it knows), and a registered profile must
 * be for that tool.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { AlreadyExistsError, InvalidTransitionError, NotFoundError, ValidationError } from '../../events/errors.js';
import { checkName } from '../../events/names.js';
import { currentMachines } from '../../machines/registry.js';
import { DurableActor } from '../actor.js';
import { AUTH_ENV_VARS, isProviderId, PROVIDER_IDS, PROVIDERS } from './index.js';
import { extendPath } from '../execution/env.js';
import { resolveExecutable } from '../execution/which.js';
import { newId } from '../ids.js';
import type { Runtime } from '../runtime.js';
import type { Db } from '../../events/db.js';

export interface AccountView {
  id: string;
  name: string;
  tool: string;
  dir: string;
  status: string;
  createdAt: string;
}


interface Row {
  id: string;
  name: string;
  tool: string;
  dir: string;
  status: string;
  created_at: string;
}
const view = (r: Row): AccountView => ({ id: r.id, name: r.name, tool: r.tool, dir: r.dir, status: r.status, createdAt: r.created_at });

export function listAccounts(db: Db): AccountView[] {
  return (db.prepare("SELECT * FROM accounts WHERE status = 'active' ORDER BY name").all() as Row[]).map(view);
}

/** The registered profile of that name, or null. */
export function findAccount(db: Db, name: string): AccountView | null {
  const row = db.prepare('SELECT * FROM accounts WHERE live_name = ?').get(name) as Row | undefined;
  return row ? view(row) : null;
}

export async function addAccount(runtime: Runtime, input: { name: string; tool: string; dir: string }): Promise<AccountView> {
  checkName('account', input.name);
  if (!isProviderId(input.tool)) throw new ValidationError(`--tool: unknown provider ${JSON.stringify(input.tool)}`, { hint: `one of: ${PROVIDER_IDS.join(', ')}` });
  if (PROVIDERS[input.tool].configDirEnv === null) {
    throw new ValidationError(`--tool ${input.tool}: the ${input.tool} CLI has no configuration-directory variable, so a directory cannot select its account`, {
      hint: 'use an external `accounts env <profile> --tool <tool>` command for it',
    });
  }
  const dir = isAbsolute(input.dir) ? input.dir : resolve(input.dir);
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new ValidationError(`--dir: ${dir} is not a directory`, { hint: 'create it (and log the CLI in with it) first' });
  if (findAccount(runtime.db, input.name)) {
    throw new AlreadyExistsError(`an account named ${JSON.stringify(input.name)} already exists`, { hint: `loops accounts remove ${input.name} first` });
  }
  const accountId = newId('acct', runtime.clock.now());
  await DurableActor.create(runtime, `account:${accountId}`, 'account', currentMachines.account).record('account.added', {
    accountId,
    name: input.name,
    tool: input.tool,
    dir,
  });
  return findAccount(runtime.db, input.name)!;
}

export async function removeAccount(runtime: Runtime, name: string, reason: string | null): Promise<AccountView> {
  const account = findAccount(runtime.db, name);
  if (!account) throw new NotFoundError(`no account named ${JSON.stringify(name)}`, { hint: 'loops accounts list shows them' });
  const actor = await DurableActor.load(runtime, `account:${account.id}`);
  if (actor.state !== 'active') throw new InvalidTransitionError(`account ${name} is ${actor.state}`);
  await actor.record('account.removed', { reason });
  return { ...account, status: 'removed' };
}

/**
 * What a run under an account never inherits from the runner: every provider's credential and
 * configuration variables, and the predecessor's further list (a GitHub token, the XDG base
 * directories, OpenRouter's key). The profile's own variables and the target's `env` are set after.
 */
export const ACCOUNT_UNSET_ENV: readonly string[] = [
  ...new Set([...AUTH_ENV_VARS, 'OPENROUTER_API_KEY', 'GITHUB_TOKEN', 'GH_TOKEN', 'XDG_CONFIG_HOME', 'XDG_DATA_HOME', 'XDG_STATE_HOME', 'XDG_CACHE_HOME']),
].sort();

/** The profile and tool a target runs under, or null: an agent's tool defaults to its provider. */
export function targetAccount(target: { kind: string; account?: string | null; accountTool?: string; provider?: string }): { profile: string; tool: string } | null {
  if (target.account === undefined || target.account === null) return null;
  const tool = target.accountTool ?? (target.kind === 'agent' ? target.provider : undefined);
  if (tool === undefined) return null;
  return { profile: target.account, tool };
}

/** A tool name as `accounts env --tool` takes it: one word of letters, digits, `.`, `_`, `-`. */
export const ACCOUNT_TOOL_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Parses `KEY=VALUE` / `export KEY=VALUE` lines (quotes removed). */
export function parseEnvLines(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim().replace(/^export\s+/, '');
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (!m) continue;
    let value = m[2]!;
    if (value.length >= 2 && ((value.startsWith('"') && value.endsWith('"')) || (value.startsWith("'") && value.endsWith("'")))) value = value.slice(1, -1);
    out[m[1]!] = value;
  }
  return out;
}

/**
 * The environment of a run under `profile` for `tool`: the registered directory, else the external
 * `accounts` command's answer; with LOOPS_ACCOUNT_PROFILE and LOOPS_ACCOUNT_TOOL. Throws with a
 * clear message when neither resolves it.
 */
export function resolveAccountEnv(db: Db, tool: string, profile: string, path = extendPath(process.env.PATH)): Record<string, string> {
  return { ...profileEnv(db, tool, profile, path), LOOPS_ACCOUNT_PROFILE: profile, LOOPS_ACCOUNT_TOOL: tool };
}

function profileEnv(db: Db, tool: string, profile: string, path: string): Record<string, string> {
  const account = findAccount(db, profile);
  if (account) {
    if (account.tool !== tool || !isProviderId(tool)) {
      throw new ValidationError(`account ${profile} is for ${account.tool}, not ${tool}`, { hint: `register one for ${tool}: loops accounts add <name> --tool ${tool} --dir <path>` });
    }
    if (!existsSync(account.dir)) throw new ValidationError(`account ${profile}: its directory ${account.dir} does not exist any more`);
    return { [PROVIDERS[tool].configDirEnv!]: account.dir };
  }
  const external = resolveExecutable('accounts', path, null);
  if (external) {
    const r = spawnSync(external, ['env', profile, '--tool', tool], { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'pipe'] });
    if (r.status === 0) {
      const env = parseEnvLines(r.stdout ?? '');
      if (Object.keys(env).length) return env;
    }
    throw new ValidationError(`account ${profile} is not registered, and \`accounts env ${profile} --tool ${tool}\` did not resolve it (exit ${r.status ?? r.signal}): ${(r.stderr ?? '').trim().split('\n')[0] ?? ''}`, {
      hint: registerHint(tool, profile),
    });
  }
  throw new ValidationError(`account ${profile} is not registered`, { hint: registerHint(tool, profile) });
}

function registerHint(tool: string, profile: string): string {
  return isProviderId(tool)
    ? `register it: loops accounts add ${profile} --tool ${tool} --dir <path>`
    : `${tool} is not an agent provider, so only an external \`accounts\` command on PATH can resolve it (\`accounts env ${profile} --tool ${tool}\` printing KEY=VALUE lines)`;
}
