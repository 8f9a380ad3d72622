import { AUTH_ENV_VARS } from '../agents/index.js';
import { secretValues } from './secrets.js';

/**
 * The values masked in a run's output: its --secret-env variables, the agent CLIs' credential
 * variables and anything named like a secret (…_TOKEN, …_API_KEY, …) in the runner's environment.
 * Directory variables (CODEX_HOME, CLAUDE_CONFIG_DIR) are not secrets.
 */
export function runSecrets(names: readonly string[]): string[] {
  const auth = AUTH_ENV_VARS.filter((n) => !/(_DIR|_HOME)$/.test(n));
  return secretValues(process.env, [...names, ...auth]);
}

