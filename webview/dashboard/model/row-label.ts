// A layer's name cut to fit a heatmap's row labels. Layer names differ at their end (the projection)
// and in their block number (`model.layers.12.self_attn.q_proj`); cutting only the front dropped the
// number, so every block's q_proj read the same.

/**
 * `label` cut to `width` (as `measure` measures text): whole if it fits; else the segment before the
 * first number and the number (`layers.12`), an ellipsis and as much of the end as fits; else, when
 * not even that fits, the end alone after an ellipsis.
 */
export function fitRowLabel(label: string, width: number, measure: (text: string) => number): string {
  if (measure(label) <= width) return label;
  const numbered = /^(?:.*\.)?([^.]+\.\d+)\.(.+)$/.exec(label);
  if (numbered) {
    const head = `${numbered[1]}…`;
    const tail = tailThatFits(numbered[2]!, width, (text) => measure(head + text));
    if (tail.length >= Math.min(4, numbered[2]!.length)) return head + tail;
  }
  return `…${tailThatFits(label, width, (text) => measure(`…${text}`))}`;
}

function tailThatFits(text: string, width: number, measure: (text: string) => number): string {
  let cut = text;
  while (cut.length > 1 && measure(cut) > width) cut = cut.slice(1);
  return cut;
}
