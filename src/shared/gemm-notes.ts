// What a run's GEMM labels add beyond the config: how the rotation fitted each layer's reduction
// dimension (runStarted.layers[].rotationFit: padded / skipped layers) and whether the stats are the
// publisher's simulation (in the configured block format, MXFP4 by default) of GEMMs that ran at
// another precision (layerStats.simulated).
import type { GemmKind } from '../protocol/config.js';
import type { LayerInfo, LayerStatsRecord, OperandStats, StatsFormat } from '../protocol/telemetry.js';

/** What the simulated note reads off a layer's newest record of a GEMM (the store's headline of it has it). */
export interface SimulatedFields extends Pick<LayerStatsRecord, 'simulated' | 'precision'> {
  operands: readonly Pick<OperandStats, 'format'>[];
}

/** "padded in 2 of 9 layers", "skipped in 1 of 9 layers" (both when both), or "" when every layer fits. */
export function rotationFitNote(layers: readonly LayerInfo[], gemm: GemmKind): string {
  const count = (status: string) => layers.filter((layer) => layer.rotationFit?.[gemm].status === status).length;
  return (['padded', 'skipped'] as const)
    .map((status) => [status, count(status)] as const)
    .filter(([, n]) => n > 0)
    .map(([status, n]) => `${status} in ${n} of ${layers.length} layers`)
    .join(', ');
}

/** "MXFP4 simulated (GEMM ran bf16)" ("NVFP4 …", "MXFP8 …": the format the stats declare) when the newest records of this GEMM say so, else "". */
export function simulatedNote(latest: readonly (SimulatedFields | undefined)[]): string {
  const simulated = latest.filter((record): record is SimulatedFields => record?.simulated === true);
  if (simulated.length === 0) return '';
  const ran = [...new Set(simulated.map((record) => record.precision))].join('/');
  const formats = [...new Set(simulated.map((record) => formatName(record.operands[0]?.format)))].join('/');
  return `${formats} simulated (GEMM ran ${ran})`;
}

/** The block format family a stats record declares: MXFP4 (also when absent), NVFP4 or MXFP8. */
function formatName(format: StatsFormat | undefined): string {
  if (format === 'nvfp4') return 'NVFP4';
  return format === 'mxfp8-e4m3' || format === 'mxfp8-e5m2' ? 'MXFP8' : 'MXFP4';
}

/** `base` with the notes that apply, joined by " · ". */
export function withGemmNotes(base: string, layers: readonly LayerInfo[], gemm: GemmKind, latest: readonly (SimulatedFields | undefined)[]): string {
  return [base, rotationFitNote(layers, gemm), simulatedNote(latest)].filter((part) => part !== '').join(' · ');
}
