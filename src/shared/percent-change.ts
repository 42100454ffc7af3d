// How the host's views and the dashboard write a relative change, e.g. what telemetry costs a run.

/** "+8.2 %" for 0.082, "-1.5 %" for −0.015 (as the dashboard's token overhead writes its extra tokens). */
export function percentChange(fraction: number): string {
  return `${fraction >= 0 ? '+' : ''}${(100 * fraction).toFixed(1)} %`;
}
