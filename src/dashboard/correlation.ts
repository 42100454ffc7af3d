// Wgrad error correlation from the fixed-index sketches: cos(E_t, E_{t−k}) between sketches of
// stats samples k apart, and the autocorrelation curve (that cosine averaged over t, per lag).
// A deterministic rotation leaves a structured error that stays correlated across steps; a random
// one decorrelates it, so the curve falls to ~0 after lag 0.

export function cosine(a: readonly number[], b: readonly number[]): number | null {
  const n = Math.min(a.length, b.length);
  let dot = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < n; i++) {
    const x = a[i]!;
    const y = b[i]!;
    dot += x * y;
    aa += x * x;
    bb += y * y;
  }
  if (aa === 0 || bb === 0) return null;
  return dot / Math.sqrt(aa * bb);
}

/** cos(sketch[i], sketch[i − lag]) for each sample i (null for the first `lag` samples). */
export function lagCosines(sketches: readonly (readonly number[])[], lag: number): (number | null)[] {
  return sketches.map((sketch, i) => (i >= lag ? cosine(sketch, sketches[i - lag]!) : null));
}

/** Mean over samples of cos(sketch[i], sketch[i − j]) for j = 0..maxLag (null where no pair exists). */
export function autocorrelation(sketches: readonly (readonly number[])[], maxLag: number): (number | null)[] {
  const out: (number | null)[] = [];
  for (let lag = 0; lag <= maxLag; lag++) {
    let sum = 0;
    let count = 0;
    for (let i = lag; i < sketches.length; i++) {
      const c = cosine(sketches[i]!, sketches[i - lag]!);
      if (c !== null) {
        sum += c;
        count++;
      }
    }
    out.push(count === 0 ? null : sum / count);
  }
  return out;
}
