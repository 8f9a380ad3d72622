/**
 * One process of an attempt — a loop run's or a workflow step's — made ready to fork: the agent
 * adapter's invocation, the account, the secrets (from this runner's environment, never the log),
 * the environment, the output files and the deadline; and, once it ended, the agent CLI's report.
 * Shared by execution/attempt.ts and workflows/runner.ts.
 */
import type { CommandTarget as LoopCommandTarget, EventData, LoopAgentTarget } from '../../events/catalog.js';
import { isSecretName } from '../../events/secret-names.js';
import { ACCOUNT_UNSET_ENV, resolveAccountEnv, targetAccount } from '../agents/accounts.js';
import { AgentOutputParser, type ProviderId } from '../agents/index.js';
import { agentSink, cliVersion, reportFrom, type PreparedAgent } from '../agents/run.js';
import type { Runtime } from '../runtime.js';
import { join } from 'node:path';
import type { Deadline, SpawnSpec } from './executor.js';
import { runnerEnv } from './env.js';
import { runSecrets } from './run-secrets.js';
import { resolveSecretRefs, type SecretRef } from './secret-refs.js';
import { SecretMasker } from './secrets.js';

export interface SpawnPlan {
  /** What runs: a command, or an agent CLI whose invocation was prepared with the intent. */
  target: LoopCommandTarget | LoopAgentTarget;
  /** The prepared agent invocation (or why it could not be prepared), for an agent target. */
  agent?: { prepared: PreparedAgent } | { error: string } | null;
  /** The argv as the intent recorded it (a step's outputs substituted), when it differs from the target's. */
  argv?: { command: string; args: readonly string[]; shell: boolean; cwd: string | null };
  /** Secret variables passed from this runner's environment (`--secret-env`, a spec's `secrets:`). */
  secretNames: readonly string[];
  /** Secrets read now, on this runner, from a file or a command (`--secret-file`, `--secret-cmd`). */
  secretRefs?: readonly SecretRef[];
  /** The attempt's own environment (loops' variables, rendered step env …), applied last. */
  env: Record<string, string>;
  /** The attempt's directory: stdout.log, stderr.log, exit-status. */
  dir: string;
  deadline: Deadline | null;
  killGraceMs: number | null;
  tailBytes?: number;
  onOutput?: (stream: 'stdout' | 'stderr', chunk: Buffer) => void;
}

export type Prepared =
  | { ok: true; spec: SpawnSpec; parser: AgentOutputParser | null; provider: ProviderId | null; secrets: string[] }
  | { ok: false; error: string; code: string };

/**
 * Everything one process needs before it is forked, or why it cannot start (recorded as the
 * attempt's spawn failure): the secrets come from this runner — its environment, and the files and
 * commands the references name, read now — never from the log, and are masked in its output; an
 * account's credentials replace every inherited one. A reason names the variable and where it was
 * looked for, never a value.
 */
export async function prepareSpawn(runtime: Runtime, plan: SpawnPlan): Promise<Prepared> {
  const { target } = plan;
  const runner = runnerEnv();
  const missing = plan.secretNames.filter((n) => runner[n] === undefined);
  if (missing.length) {
    return {
      ok: false,
      error: `secret variable${missing.length > 1 ? 's' : ''} ${missing.join(', ')} not set in the environment of runner ${runtime.runnerId}`,
      code: 'ENOENT',
    };
  }
  const refs = plan.secretRefs ?? [];
  const resolved = refs.length ? await resolveSecretRefs(refs, { cwd: plan.argv?.cwd ?? target.cwd, env: target.env, clock: runtime.clock }) : { ok: true as const, values: {} };
  if (!resolved.ok) return { ok: false, error: `${resolved.error} (runner ${runtime.runnerId})`, code: resolved.code };
  const secretEnv = { ...Object.fromEntries(plan.secretNames.map((n) => [n, runner[n]!])), ...resolved.values };
  const files = {
    stdoutFile: join(plan.dir, 'stdout.log'),
    stderrFile: join(plan.dir, 'stderr.log'),
    statusFile: join(plan.dir, 'exit-status'),
  };
  const common = {
    secrets: runSecrets(plan.secretNames, resolved.values),
    deadline: plan.deadline,
    ...(plan.killGraceMs !== null ? { killGraceMs: plan.killGraceMs } : {}),
    ...(plan.tailBytes !== undefined ? { tailBytes: plan.tailBytes } : {}),
    ...(plan.onOutput ? { onOutput: plan.onOutput } : {}),
    ...files,
  };
  // The account (a command's or an agent's): its variables, LOOPS_ACCOUNT_*, and nothing inherited
  // that could belong to another account (ACCOUNT_UNSET_ENV).
  const account = targetAccount(target);
  if (account === null && target.kind === 'command' && target.account !== undefined) {
    // Recorded with no tool (a predecessor loop imported as it was): it fails as the predecessor's runs did, never runs unaccounted.
    return { ok: false, error: `account ${target.account}: a command's account needs the tool its profile is for, and none is recorded`, code: 'EACCOUNT' };
  }
  let accountEnv: Record<string, string> | null = null;
  if (account !== null) {
    try {
      accountEnv = resolveAccountEnv(runtime.db, account.tool, account.profile);
    } catch (error) {
      return { ok: false, error: (error as Error).message, code: 'EACCOUNT' };
    }
  }
  // The names whose values are secrets, for the spawn's record: the secret sources', and an
  // account's credentials (named like secrets) — unless the attempt's own variables replaced them.
  const secretEnvNames = [...Object.keys(secretEnv), ...Object.keys(accountEnv ?? {}).filter((n) => isSecretName(n))].filter((n) => !(n in plan.env));
  if (target.kind === 'command') {
    const argv = plan.argv ?? target;
    return {
      ok: true,
      spec: {
        command: argv.command,
        args: argv.args,
        shell: argv.shell,
        cwd: argv.cwd,
        env: { ...target.env, ...(accountEnv ?? {}), ...secretEnv, ...plan.env },
        ...(accountEnv ? { unsetEnv: ACCOUNT_UNSET_ENV } : {}),
        secretEnvNames,
        ...common,
      },
      parser: null,
      provider: null,
      secrets: common.secrets,
    };
  }
  const agent = plan.agent ?? null;
  if (agent === null || 'error' in agent) return { ok: false, error: agent?.error ?? 'the agent could not be prepared', code: 'EINVAL' };
  const { invocation, env } = agent.prepared;
  const parser = new AgentOutputParser(target.provider);
  return {
    ok: true,
    spec: {
      command: invocation.command,
      args: invocation.args,
      shell: false,
      cwd: plan.argv?.cwd ?? target.cwd,
      env: { ...env, ...(accountEnv ?? {}), ...secretEnv, ...plan.env },
      ...(accountEnv ? { unsetEnv: ACCOUNT_UNSET_ENV } : {}),
      secretEnvNames,
      ...(invocation.stdin !== null ? { stdin: invocation.stdin } : {}),
      idleTimeoutMs: target.idleTimeoutMs,
      stdoutSink: agentSink(parser, target),
      ...common,
    },
    parser,
    provider: target.provider,
    secrets: common.secrets,
  };
}

/** The agent CLI's own account of an attempt that ended while it was watched, its final message masked. */
export function agentEnd(prepared: Extract<Prepared, { ok: true }>): EventData<'run.agent_reported'> | null {
  if (!prepared.parser || !prepared.provider) return null;
  const report = reportFrom(prepared.parser, prepared.provider, cliVersion(prepared.provider));
  if (report.finalMessage !== null && prepared.secrets.length) report.finalMessage = new SecretMasker(prepared.secrets).mask(report.finalMessage);
  if (report.error && prepared.secrets.length) report.error = { ...report.error, message: new SecretMasker(prepared.secrets).mask(report.error.message) };
  return report;
}
