// The run chips' labels. The trainer names a run by its whole recipe ("tiny · fprop mxfp4 · rceil ·
// dgrad mxfp4 · rceil · wgrad mxfp4 · H16 · rceil"), and two runs of one A/B differ near its end,
// which a chip cut to fit its ~30 em (dashboard.css) would hide. So with several runs each chip shows
// what tells its run apart: the name's " · " parts that differ, one shared part beside them for
// context, and an ellipsis for the shared parts left out. The tooltip keeps the whole name.

import type { RunInfo } from '../../../src/protocol/webview.js';

const SEPARATOR = ' · ';

/** What a chip's label is made from. */
export type ChipRun = Pick<RunInfo, 'name' | 'seed' | 'startedAt'>;

/** One label per run, in order. */
export function chipLabels(runs: readonly ChipRun[]): string[] {
  const labels = runs.length < 2 ? runs.map((run) => run.name) : withoutSharedParts(runs.map((run) => run.name.split(SEPARATOR)));
  return tellSameLabelsApart(runs, labels);
}

function withoutSharedParts(names: readonly string[][]): string[] {
  const shortest = Math.min(...names.map((parts) => parts.length));
  const sharedAt = (at: (parts: string[]) => string | undefined) => names.every((parts) => at(parts) === at(names[0]!));
  let prefix = 0;
  while (prefix < shortest && sharedAt((parts) => parts[prefix])) prefix++;
  // One name throughout (a seed sweep): nothing to leave out; the runs are told apart in front.
  if (names.every((parts) => parts.length === prefix)) return names.map((parts) => parts.join(SEPARATOR));
  let suffix = 0;
  while (suffix < shortest - prefix && sharedAt((parts) => parts[parts.length - 1 - suffix])) suffix++;
  // One shared part stays on each side as context ("… wgrad mxfp4 · H16", not "… H16"); fewer than
  // two are not worth an ellipsis.
  const dropFront = Math.max(0, prefix - 1);
  const dropBack = Math.max(0, suffix - 1);
  return names.map((parts) => {
    const kept = parts.slice(dropFront, parts.length - dropBack).join(SEPARATOR);
    return `${dropFront > 0 ? '… ' : ''}${kept}${dropBack > 0 ? ' …' : ''}`;
  });
}

/**
 * Runs of one label (one recipe: a seed sweep, a rerun) get their seed, else their start time, in
 * front: the end of a long label is what the chip cuts off.
 */
function tellSameLabelsApart(runs: readonly ChipRun[], labels: string[]): string[] {
  return labels.map((label, i) => {
    const same = runs.filter((_, j) => labels[j] === label);
    if (same.length < 2) return label;
    const seeds = new Set(same.map((run) => run.seed));
    if (runs[i]!.seed !== undefined && seeds.size === same.length) return `seed ${runs[i]!.seed}${SEPARATOR}${label}`;
    const time = /T(\d\d:\d\d:\d\d)/.exec(runs[i]!.startedAt)?.[1];
    return time ? `${time}${SEPARATOR}${label}` : label;
  });
}

/**
 * A label as the part a narrow chip may cut (with an ellipsis) and its last " · " part, which stays:
 * runs that differ only at their ends (`… wgrad mxfp4` against `… wgrad mxfp4 · H16`) still read apart.
 */
export function chipLabelEnds(label: string): { head: string; last: string } {
  const cut = label.lastIndexOf(SEPARATOR);
  return cut < 0 ? { head: label, last: '' } : { head: label.slice(0, cut), last: label.slice(cut) };
}
