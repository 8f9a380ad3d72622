/**
 * "Did you mean …?": the one edit distance and the one closest-candidate rule every error message
 * of loops uses (a CLI flag or command, a policy name, a workflow spec field). Pure; it sits in the
 * bottom layer so that every layer can use it.
 */

/** Edit distance with adjacent transpositions (optimal string alignment), for "did you mean". */
export function distance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      rows[i]![j] = d;
    }
  }
  return rows[a.length]![b.length]!;
}

/** The candidate closest to `word`, when it is close enough to be a likely typo (or another spelling). */
export function closest(word: string, candidates: Iterable<string>): string | null {
  const squash = (s: string) => s.toLowerCase().replace(/[-_]/g, '');
  let best: string | null = null;
  let bestScore = Infinity;
  for (const candidate of candidates) {
    const score = squash(candidate) === squash(word) ? 0 : distance(word.toLowerCase(), candidate.toLowerCase());
    if (score < bestScore) {
      best = candidate;
      bestScore = score;
    }
  }
  const limit = word.length <= 3 ? 1 : Math.max(2, Math.floor(word.length / 3));
  return best !== null && bestScore <= limit && bestScore < Math.max(word.length, 1) ? best : null;
}
