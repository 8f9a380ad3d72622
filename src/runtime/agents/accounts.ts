/**
 * Credentials profiles for agent CLIs (`--account <profile>`). A profile is a directory registered
 * with `loops accounts add <name> --tool <provider> --dir <path>`: a run under it gets the CLI's
 * configuration variable (CLAUDE_CONFIG_DIR, CODEX_HOME, …) pointed at that directory. When no
 * profile of that name is registered and an external `accounts` command is installed, it is
 * asked instead (`accounts env <profile> --tool <tool>`, printing KEY=VALUE lines), as the
 * predecessor did. Either way the run's inherited credential variables (AUTH_ENV_VARS) are removed
 * first, so a run never mixes two accounts.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { AlreadyExistsError, InvalidTransitionError, NotFoundError, ValidationError } from '../../events/errors.js';
import { checkName } from '../../events/names.js';
import { currentMachines } from '../../machines/registry.js';
import { DurableActor } from '../actor.js';
import { isProviderId, PROVIDER_IDS, PROVIDERS, type ProviderId } from './index.js';
import { extendPath } from '../execution/env.js';
import { resolveExecutable } from '../execution/executor.js';
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
 * `accounts` command's answer. Throws with a clear message when neither resolves it.
 */
export function resolveAccountEnv(db: Db, tool: ProviderId, profile: string, path = extendPath(process.env.PATH)): Record<string, string> {
  const account = findAccount(db, profile);
  if (account) {
    if (account.tool !== tool) {
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
      hint: `register it: loops accounts add ${profile} --tool ${tool} --dir <path>`,
    });
  }
  throw new ValidationError(`account ${profile} is not registered`, { hint: `register it: loops accounts add ${profile} --tool ${tool} --dir <path>` });
}
