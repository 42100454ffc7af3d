// Exponential moving average for loss curves, debiased like TensorBoard's so the first points are
// not dragged towards zero. Non-finite points (null) stay null and do not disturb the average.

/** `weight` in [0, 1): 0 returns the input unchanged, 0.99 smooths heavily. */
export function ema(values: readonly (number | null)[], weight: number): (number | null)[] {
  if (!(weight >= 0 && weight < 1)) throw new RangeError(`EMA weight must be in [0, 1), got ${weight}`);
  const out: (number | null)[] = new Array(values.length);
  let average = 0;
  let correction = 1;
  for (let i = 0; i < values.length; i++) {
    const value = values[i]!;
    if (value === null) {
      out[i] = null;
      continue;
    }
    average = average * weight + (1 - weight) * value;
    correction *= weight;
    out[i] = average / (1 - correction);
  }
  return out;
}
