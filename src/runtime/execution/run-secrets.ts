import type { Target } from '../../events/catalog.js';
import { AUTH_ENV_VARS } from '../agents/index.js';
import type { Clock } from '../clock.js';
import { resolveForMasking, resolveForMaskingSync, type SecretRef } from './secret-refs.js';
import { runnerEnv } from './env.js';
import { secretValues } from './secrets.js';

/**
 * The values masked in a run's output: its --secret-env variables, the agent CLIs' credential
 * variables and anything named like a secret (…_TOKEN, …_API_KEY, …) in the runner's environment,
 * and the values its --secret-file and --secret-cmd references gave (`resolved`: name → value).
 * Directory variables (CODEX_HOME, CLAUDE_CONFIG_DIR) are not secrets.
 */
export function runSecrets(names: readonly string[], resolved: Record<string, string> = {}): string[] {
  const auth = AUTH_ENV_VARS.filter((n) => !/(_DIR|_HOME)$/.test(n));
  return [...new Set([...secretValues(runnerEnv(), [...names, ...auth]), ...secretValues(resolved, Object.keys(resolved))])];
}

/** A loop target's secret sources: the --secret-env names and the file / command references. */
export function secretSourcesOf(target: Target | null | undefined): { names: string[]; refs: SecretRef[] } {
  if (!target || target.kind === 'workflow') return { names: [], refs: [] };
  return { names: target.secretEnv ?? [], refs: target.secretRefs ?? [] };
}

/**
 * The values to mask in the output of a run whose process was not started by this runner (adopted,
 * or ended while no runner watched it): what this runner's environment has, and what its files
 * and commands give now — a reference that cannot be read now is left out (its value, if the
 * process printed it, then stays unmasked: nothing here knows it).
 */
export async function maskingSecrets(target: Target | null | undefined, clock: Clock): Promise<string[]> {
  const { names, refs } = secretSourcesOf(target);
  const values = refs.length ? await resolveForMasking(refs, { cwd: cwdOf(target), env: envOf(target), clock }) : [];
  return [...new Set([...runSecrets(names), ...values])];
}

/** `maskingSecrets` for a command-line reader (`loops logs` of a run still going). */
export function maskingSecretsSync(target: Target | null | undefined): string[] {
  const { names, refs } = secretSourcesOf(target);
  const values = refs.length ? resolveForMaskingSync(refs, { cwd: cwdOf(target), env: envOf(target) }) : [];
  return [...new Set([...runSecrets(names), ...values])];
}

function cwdOf(target: Target | null | undefined): string | null {
  return target && target.kind !== 'workflow' ? target.cwd : null;
}

function envOf(target: Target | null | undefined): Record<string, string> {
  return target && target.kind !== 'workflow' ? target.env : {};
}
