// How a GEMM's Hadamard rotation fits its reduction dimension: the rule the Python bridge applies
// (python/mxscope_bridge/rotation.py `fit`), reported per layer in runStarted.layers[].rotationFit.
import type { GemmConfig, GemmKind } from '../protocol/config.js';
import type { GemmRotationFit, LayerInfo } from '../protocol/telemetry.js';

/** The next multiple of `block` at or above `length`: a misfit dimension is zero-padded to it. */
export function paddedLength(length: number, block: number): number {
  return Math.ceil(length / block) * block;
}

/** How `gemm`'s rotation fits a reduction dimension of `length`; a misfit is padded (the default rule). */
export function rotationFit(gemm: GemmConfig, length: number): GemmRotationFit {
  if (gemm.rotation === 'none') return { status: 'none', dim: length };
  if (length % gemm.hadamardBlock === 0) return { status: 'rotated', dim: length };
  return { status: 'padded', dim: length, paddedTo: paddedLength(length, gemm.hadamardBlock) };
}

/** Each GEMM's fit for one layer: Fprop reduces over inFeatures, Dgrad over outFeatures, Wgrad over `tokens`. */
export function layerRotationFit(info: LayerInfo, gemms: Record<GemmKind, GemmConfig>, tokens: number): Record<GemmKind, GemmRotationFit> {
  return { fprop: rotationFit(gemms.fprop, info.inFeatures), dgrad: rotationFit(gemms.dgrad, info.outFeatures), wgrad: rotationFit(gemms.wgrad, tokens) };
}
