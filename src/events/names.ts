/**
 * The names loops keeps — of loops, workflows and accounts — and the one check of them every layer
 * uses: 1–64 characters, letters, digits, dot, dash or underscore (and @ in an account's), starting
 * with a letter or digit. Longer or stranger text is refused where it is given (exit 2), never
 * stored; an account name can never start with "-", so it cannot read as a flag of the external
 * `accounts env <name>` command it is handed to.
 */
import { ValidationError } from './errors.js';

/** A loop's or a workflow's name. */
export const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** An account (credentials profile) name: a name, or an e-mail-like one. */
export const ACCOUNT_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;

export const NAME_HINT = 'use 1-64 letters, digits, dot, dash or underscore, starting with a letter or digit';
export const ACCOUNT_NAME_HINT = 'use 1-64 letters, digits, . _ @ -, starting with a letter or digit';

/** The text quoted in an error: whole when short, else its start and length. */
function shown(text: string): string {
  return text.length <= 80 ? JSON.stringify(text) : `${JSON.stringify(text.slice(0, 40))}… (${text.length} characters)`;
}

/**
 * Returns `name` when it is a valid name of that kind, else throws a ValidationError:
 * `invalid loop name "…"` (or `--account: invalid account name "…"` with `flag`).
 */
export function checkName(kind: 'loop' | 'workflow' | 'account', name: string, flag?: string): string {
  const account = kind === 'account';
  if ((account ? ACCOUNT_NAME_RE : NAME_RE).test(name)) return name;
  const why = name.length > 64 ? `: ${name.length} characters, at most 64` : '';
  throw new ValidationError(`${flag ? `${flag}: ` : ''}invalid ${kind} name ${shown(name)}${why}`, { hint: account ? ACCOUNT_NAME_HINT : NAME_HINT });
}

/**
 * A host label (`loops daemon --labels gpu,linux`, `LOOPS_HOST_LABELS`) and what a loop is pinned
 * to (`--runs-on gpu`): a name as above, compared case-sensitively. A host's id is one of its labels.
 */
export const LABEL_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const LABEL_HINT = 'labels are 1-64 letters, digits, dot, dash or underscore, starting with a letter or digit, separated by commas';

/**
 * The labels of a comma-separated list (or several), each checked, without repeats, in the order
 * given; `where` names the flag or variable in the message. An empty list is refused.
 */
export function parseLabels(given: string | ReadonlyArray<string>, where: string): string[] {
  const parts = (typeof given === 'string' ? [given] : given).flatMap((text) => text.split(',')).map((label) => label.trim());
  const labels: string[] = [];
  for (const label of parts) {
    if (label === '') continue;
    if (!LABEL_RE.test(label)) throw new ValidationError(`${where}: invalid label ${shown(label)}`, { hint: LABEL_HINT });
    if (!labels.includes(label)) labels.push(label);
  }
  if (labels.length === 0) throw new ValidationError(`${where}: no label given`, { hint: `e.g. ${where} gpu or ${where} gpu,linux` });
  return labels;
}
