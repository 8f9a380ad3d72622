/**
 * The named scheduling policies, for every layer above src/events: the tables (overlap, catch-up,
 * retry back-off — defined in src/events/policies.ts, where the catalogue can read them) and
 * `choosePolicy`, which turns a flag's value into a policy name with the family's default, or a
 * ValidationError that lists the names and suggests the nearest one. The planner
 * (./planner.ts) decides from each policy's behaviour fields, never from its name.
 */
import { ValidationError } from '../events/errors.js';
import type { PolicyFamily } from '../events/policies.js';

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

/** The name closest to `word` when it looks like a typo of it (a prefix either way, or at most 2 edits), else null. */
function nearest<Name extends string>(word: string, names: readonly Name[]): Name | null {
  const w = word.toLowerCase();
  let best: Name | null = null;
  let bestScore = Infinity;
  for (const name of names) {
    const score = name.startsWith(w) || w.startsWith(name) ? 0 : editDistance(w, name);
    if (score < bestScore) {
      best = name;
      bestScore = score;
    }
  }
  return bestScore <= 2 && w !== '' ? best : null;
}

function editDistance(a: string, b: string): number {
  const dp = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let prev = dp[0]!;
    dp[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = dp[j]!;
      dp[j] = Math.min(dp[j]! + 1, dp[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = tmp;
    }
  }
  return dp[b.length]!;
}
