/** "Did you mean" for a misspelt field name: the allowed name it most likely means. */

/**
 * The allowed field a misspelt one most likely means: the closest by case-insensitive edit
 * distance if close enough, else the only one that contains it or is contained in it
 * (`knownHosts` → `knownHostsFile`, `prefix` → `logLinePrefix`).
 */
export function closest(key: string, allowed: readonly string[]): string | undefined {
  const k = key.toLowerCase();
  let best: string | undefined;
  let bestDistance = Math.max(1, Math.floor(key.length / 3)) + 1;
  for (const a of allowed) {
    const d = editDistance(k, a.toLowerCase());
    if (d < bestDistance) {
      best = a;
      bestDistance = d;
    }
  }
  if (best !== undefined) return best;
  const containing = allowed.filter((a) => {
    const l = a.toLowerCase();
    return (k.length >= 4 && l.includes(k)) || (l.length >= 4 && k.includes(l));
  });
  return containing.length === 1 ? containing[0] : undefined;
}

/** Optimal string alignment distance (Levenshtein plus adjacent transpositions). */
function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        row.push(j);
        continue;
      }
      const prev = rows[i - 1] as number[];
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min((prev[j] as number) + 1, (row[j - 1] as number) + 1, (prev[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, ((rows[i - 2] as number[])[j - 2] as number) + 1);
      row.push(d);
    }
    rows.push(row);
  }
  return (rows[a.length] as number[])[b.length] as number;
}
