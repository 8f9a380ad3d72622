/**
 * Shared pieces of the fuzz suites (issue 11, hostile input): fast-check parameters with a fixed
 * seed per property — the same inputs on every run, so CI is reproducible, and fast-check prints
 * the seed and the shrunk counterexample on a failure — and the generators of hostile text.
 *
 * `LOOPS_FUZZ_SEED=<n>` replaces every property's seed (explore other inputs locally);
 * `LOOPS_FUZZ_SCALE=<k>` multiplies every property's number of runs (a longer session).
 */
import fc from 'fast-check';

/** fast-check parameters: `seed` unless LOOPS_FUZZ_SEED, `numRuns` times LOOPS_FUZZ_SCALE. */
export function fuzzParams<T = unknown>(seed: number, numRuns: number, extra: fc.Parameters<T> = {}): fc.Parameters<T> {
  const seedEnv = process.env.LOOPS_FUZZ_SEED;
  const scale = Number(process.env.LOOPS_FUZZ_SCALE ?? 1);
  return {
    seed: seedEnv !== undefined && seedEnv !== '' ? Number(seedEnv) : seed,
    numRuns: Math.max(1, Math.round(numRuns * (Number.isFinite(scale) && scale > 0 ? scale : 1))),
    ...extra,
  };
}

/** Characters a shell would read as syntax, and their usual combinations. */
export const SHELL_META = [';', '|', '&', '&&', '||', '$(', ')', '`', "'", '"', '\n', '*', '?', '<', '>', '>>', '\\', '$', '${', '}', '#', '~', '!', ' ', '\t', '[', ']', '{', '}', '=', '%', '^'];

/** Text made of shell syntax, words and payloads (`$(touch PWNED)`, `; rm x`, `` `id` ``), plus any unicode. */
export const shellText = fc
  .array(
    fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom(...SHELL_META) },
      { weight: 2, arbitrary: fc.constantFrom('echo', 'PWNED', 'touch PWNED', '$(touch PWNED)', '`touch PWNED`', '; touch PWNED', '$HOME', '${PATH}', '*', '-rf', '--help', '-n', '%s', '$1') },
      { weight: 2, arbitrary: fc.string({ maxLength: 6 }) },
      { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 4 }) },
    ),
    { minLength: 1, maxLength: 12 },
  )
  .map((parts) => parts.join(''));

/** Strings a user could not mean: control characters, NUL, lone surrogates, very long, flag-like. */
export const hostileString = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 12 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 8 }) },
  { weight: 1, arbitrary: fc.constantFrom('', ' ', '\0', 'a\0b', '-', '--', '---', '-1', '--=', '\n', '\r\n', '\u202e', '\ud800', '\uffff', '🙂', '%', '_', '\\', '..', '/') },
  { weight: 1, arbitrary: shellText },
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom('x', 'loop_', 'run_', 'wf_', 'é', '\0', '%_'), fc.integer({ min: 65, max: 5000 })).map(([s, n]) => s.repeat(n)) },
);
