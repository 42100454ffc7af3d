// A loss spike as the trainer sees it, before the optimizer applies the step: more than 6 running
// standard deviations (and 10 %) above the running mean of the loss, after a 20-step warm-up. The
// same rule as the dashboard's loss-spike alert, so both name the same step.

const SPIKE = { weight: 0.95, sigmas: 6, minRelative: 0.1, warmup: 20 } as const;

/** Steps of layer stats at every step after a spike (then back to every statsEvery steps). */
export const DENSE_STATS_WINDOW = 20;

export class SpikeDetector {
  private mean = 0;
  private variance = 0;
  private count = 0;

  /** Feed one finite loss; true when it is a spike (a spike does not move the running range). */
  observe(loss: number): boolean {
    const deviation = loss - this.mean;
    const spike = this.count >= SPIKE.warmup && deviation > SPIKE.sigmas * Math.sqrt(this.variance) && deviation > SPIKE.minRelative * Math.abs(this.mean);
    if (spike) return true;
    if (this.count === 0) this.mean = loss;
    else {
      this.mean += (1 - SPIKE.weight) * deviation;
      this.variance = SPIKE.weight * (this.variance + (1 - SPIKE.weight) * deviation * deviation);
    }
    this.count++;
    return false;
  }
}
