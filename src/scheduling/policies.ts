/**
 * The named scheduling policies, for every layer above src/events: the tables (overlap, catch-up,
 * retry back-off — defined in src/events/policies.ts, where the catalogue can read them) and
 * `choosePolicy`, which turns a flag's value into a policy name with the family's default, or a
 * ValidationError that lists the names and suggests the nearest one. The planner
 * (./planner.ts) decides from each policy's behaviour fields, never from its name.
 */
import { ValidationError } from '../events/errors.js';
import type { PolicyFamily } from '../events/policies.js';
import { closest } from '../events/suggest.js';

export {
  CATCH_UP,
  CATCH_UP_POLICY_NAMES,
  OVERLAP,
  OVERLAP_POLICY_NAMES,
  RETRY,
  WAITING_OVERLAP_POLICY_NAMES,
  type CatchUpPolicy,
  type CatchUpRule,
  type OverlapPolicy,
  type OverlapRule,
  type PolicyFamily,
  type WaitingOverlapPolicy,
} from '../events/policies.js';

/**
 * The policy `value` names in `family`, or the family's default when no value is given. An unknown
 * name is a ValidationError: `--overlap: unknown policy "bufer-one"`, with the hint
 * `--overlap must be one of skip, buffer-one, …; did you mean buffer-one? (buffer-one: keep it waiting …)`.
 */
export function choosePolicy<Name extends string>(family: PolicyFamily<Name, object>, value: string | null | undefined): Name {
  if (value === null || value === undefined) return family.default;
  const names = Object.keys(family.policies) as Name[];
  if ((names as string[]).includes(value)) return value as Name;
  const near = nearest(value, names);
  const list = `${family.flag} must be one of ${names.join(', ')}`;
  throw new ValidationError(`${family.flag}: unknown policy ${JSON.stringify(value)}`, {
    hint: near === null ? list : `${list}; did you mean ${near}? (${near}: ${family.policies[near].description})`,
    details: { flag: family.flag, value, allowed: names },
  });
}

/** The name closest to `word` when it looks like a typo of it (a prefix either way, or close by the shared rule), else null. */
function nearest<Name extends string>(word: string, names: readonly Name[]): Name | null {
  const w = word.toLowerCase();
  if (w === '') return null;
  return names.find((name) => name.startsWith(w) || w.startsWith(name)) ?? (closest(w, names) as Name | null);
}
