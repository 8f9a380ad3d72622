/**
 * "Did you mean …?": the one edit distance and the one closest-candidate rule every error message
 * of loops uses (a CLI flag or command, a policy name, a workflow spec field). Pure; it sits in the
 * bottom layer so that every layer can use it.
 */

/** Edit distance with adjacent transpositions (optimal string alignment), for "did you mean". Three rows, not a matrix. */
export function distance(a: string, b: string): number {
  let before = new Array<number>(b.length + 1).fill(0);
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  let row = new Array<number>(b.length + 1).fill(0);
  for (let i = 1; i <= a.length; i++) {
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, before[j - 2]! + 1);
      row[j] = d;
    }
    [before, previous, row] = [previous, row, before];
  }
  return previous[b.length]!;
}

/** The candidate closest to `word`, when it is close enough to be a likely typo (or another spelling). */
export function closest(word: string, candidates: Iterable<string>): string | null {
  const squash = (s: string) => s.toLowerCase().replace(/[-_]/g, '');
  const limit = word.length <= 3 ? 1 : Math.max(2, Math.floor(word.length / 3));
  const squashed = squash(word);
  const lower = word.toLowerCase();
  let best: string | null = null;
  let bestScore = Infinity;
  for (const candidate of candidates) {
    // The distance is at least the difference in length: a candidate that far off cannot be chosen.
    const score = squash(candidate) === squashed ? 0 : Math.abs(candidate.length - word.length) > limit ? Infinity : distance(lower, candidate.toLowerCase());
    if (score < bestScore) {
      best = candidate;
      bestScore = score;
    }
  }
  return best !== null && bestScore <= limit && bestScore < Math.max(word.length, 1) ? best : null;
}
