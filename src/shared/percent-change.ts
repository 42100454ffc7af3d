// How the host's views and the dashboard write a relative change, e.g. what telemetry costs a run.

/** "+8.2" for 8.2, "-1.5" for −1.5, to one decimal: a change written with its sign either way. */
export function signedFixed(value: number): string {
  return `${value >= 0 ? '+' : ''}${value.toFixed(1)}`;
}

/** "+8.2 %" for 0.082, "-1.5 %" for −0.015 (as the dashboard's token overhead writes its extra tokens). */
export function percentChange(fraction: number): string {
  return `${signedFixed(100 * fraction)} %`;
}
