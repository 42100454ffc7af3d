/** Best-of-N wall-clock timing shared by the mx benchmarks (best, because the machine is shared). */
export function bestSeconds(run: () => void, repeats: number, prepare?: () => void): number {
  prepare?.();
  run(); // warm up: tier-up and first-touch page faults
  let best = Infinity;
  for (let r = 0; r < repeats; r++) {
    prepare?.();
    const start = process.hrtime.bigint();
    run();
    best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e9);
  }
  return best;
}

export function fmt(value: number, digits = 2): string {
  return value.toFixed(digits).padStart(9);
}
