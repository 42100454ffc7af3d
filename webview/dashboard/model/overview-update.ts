// The page's layer overview from the host's columnar update (protocol OverviewUpdate): the rows the
// views read (LayerRow: name and values, null where unknown), the names from the run info. The
// views keep reading rows; only the wire is columnar.
import { LAYER_METRICS, type LayerOverview, type LayerRow, type OverviewUpdate } from '../../../src/protocol/webview.js';

/**
 * `known` (the run's overview so far, if any) with the update's rows in place of those of the same
 * layers. Throws when the update does not fit the run: another layer count than its run info's, or
 * only some rows for a run with no overview yet.
 */
export function applyOverviewUpdate(update: OverviewUpdate, layers: readonly string[], known: LayerOverview | undefined): LayerOverview {
  if (update.layers !== layers.length) throw new Error(`overview of run ${update.runId}: ${update.layers} layers, its run info ${layers.length}`);
  const width = LAYER_METRICS.length;
  const { rows: indices, values } = update;
  const rowAt = (i: number, index: number): LayerRow => {
    const row = new Array<number | null>(width);
    for (let m = 0; m < width; m++) {
      const value = values[i * width + m]!;
      row[m] = Number.isNaN(value) ? null : value;
    }
    return { layer: layers[index]!, values: row };
  };
  if (!indices) return { runId: update.runId, step: update.step, rows: layers.map((_, index) => rowAt(index, index)) };
  if (!known) throw new Error(`overview of run ${update.runId}: ${indices.length} of its ${layers.length} rows before the page had any`);
  const rows = [...known.rows];
  indices.forEach((index, i) => (rows[index] = rowAt(i, index)));
  return { runId: update.runId, step: update.step, rows };
}
