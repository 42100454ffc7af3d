// The noise floor of a cosine between two sketches of n entries. For two independent error vectors
// with i.i.d. zero-mean entries, cos = Σ aᵢbᵢ / (‖a‖‖b‖); each product has mean 0, and with
// ‖a‖² ≈ n·σa², ‖b‖² ≈ n·σb² the sum has standard deviation √n·σa·σb, so cos has mean 0 and
// standard deviation ≈ 1/√n. About 95 % of cosines between uncorrelated sketches fall inside
// ±2/√n: a 64-entry sketch gives ±0.25 (1σ = 0.125). Values inside the band are indistinguishable
// from "no correlation"; only the full-tensor lag-1 cosine (millions of entries) has a negligible floor.

export function cosineNoiseFloor(entries: number): number | null {
  return entries > 0 ? 2 / Math.sqrt(entries) : null;
}
