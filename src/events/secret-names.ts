/**
 * The secret naming convention: which variables hold secrets by their name alone. One definition
 * for every layer — the masking of output (runtime/execution/secrets.ts), the refusal of inline
 * secret values in loop definitions (runtime/loops) and in workflow files (workflow/spec.ts).
 */

/** Values (and forms) shorter than this many characters are never masked: too many false positives. */
export const MIN_SECRET_LENGTH = 4;

const SECRET_NAME = /(_|^)(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|PRIVATE_KEY|ACCESS_KEY|AUTH)(_|$)/i;

/**
 * Names of variables whose values are secrets by convention, besides those named explicitly:
 * anything matching /(_|^)(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|PRIVATE_KEY|ACCESS_KEY|AUTH)(_|$)/i
 * (`OPENAI_API_KEY`, `GH_TOKEN`, `AWS_SECRET_ACCESS_KEY`, `ANTHROPIC_AUTH_TOKEN`; not
 * `GIT_AUTHOR_NAME` or `TOKENIZERS_PARALLELISM`), plus the names in `extra` (the agent CLIs' auth
 * variables), compared case-insensitively.
 */
export function isSecretName(name: string, extra?: Iterable<string>): boolean {
  if (SECRET_NAME.test(name)) return true;
  if (extra === undefined) return false;
  const upper = name.toUpperCase();
  for (const e of extra) if (e.toUpperCase() === upper) return true;
  return false;
}

/** Values that a variable matched only by its name's convention holds without being a secret
 *  (`DISABLE_AUTH=true`): masking them would mask every `true` in JSON output. */
export const NOT_SECRET = new Set(['true', 'false', 'null', 'none', 'undefined', 'disabled', 'enabled', 'unset']);

/**
 * A value that the naming convention makes a secret: its variable's name matches `isSecretName`
 * and the value is neither trivial (`true`, `none`, …) nor shorter than `MIN_SECRET_LENGTH`.
 */
export function secretByConvention(name: string, value: string): boolean {
  return SECRET_NAME.test(name) && [...value.trim()].length >= MIN_SECRET_LENGTH && !NOT_SECRET.has(value.trim().toLowerCase());
}


/**
 * The names in `env` whose values are secrets by the convention (`secretByConvention`), except the
 * names `notSecret` lists (`--not-secret`, compared case-insensitively): the values a definition
 * would store in clear.
 */
export function inlineSecretNames(env: Record<string, string> | undefined, notSecret: readonly string[] = []): string[] {
  const allowed = new Set(notSecret.map((n) => n.toUpperCase()));
  return Object.entries(env ?? {})
    .filter(([name, value]) => secretByConvention(name, value) && !allowed.has(name.toUpperCase()))
    .map(([name]) => name);
}
