// The quick-pick model behind "Switch Rotation Mode" and "Set GEMM Precision": what the user can
// choose, and the next-run config change each choice means. No vscode here, so it is unit tested.
import { describeGemm, GEMM_KINDS, HADAMARD_BLOCKS, PRECISIONS, type GemmConfig, type GemmKind, type HadamardBlock, type NextRunConfig, type Precision, type RunConfig } from '../../protocol/index.js';

export const ROTATION_MODE_IDS = ['none', 'hadamard', 'random-hadamard', 'stochastic', 'random-hadamard-sr'] as const;
export type RotationModeId = (typeof ROTATION_MODE_IDS)[number];

export interface RotationMode {
  id: RotationModeId;
  label: string;
  detail: string;
  /** Whether the user also picks a Hadamard block size. */
  needsBlock: boolean;
  /** The GEMM settings this mode sets; every mode is an MXFP4 recipe, so precision becomes mxfp4. */
  settings(block: HadamardBlock): Partial<GemmConfig>;
}

export const ROTATION_MODES: readonly RotationMode[] = [
  { id: 'none', label: 'No rotation', detail: 'Plain MXFP4 with round-to-nearest-even', needsBlock: false, settings: () => ({ rotation: 'none', rounding: 'nearest-even', srPrescale: false }) },
  { id: 'hadamard', label: 'Deterministic Hadamard', detail: 'The same block Hadamard every step, round-to-nearest-even', needsBlock: true, settings: (block) => ({ rotation: 'hadamard', hadamardBlock: block, rounding: 'nearest-even', srPrescale: false }) },
  { id: 'random-hadamard', label: 'Random Hadamard', detail: 'Fresh random signs every step, round-to-nearest-even', needsBlock: true, settings: (block) => ({ rotation: 'random-hadamard', hadamardBlock: block, rounding: 'nearest-even', srPrescale: false }) },
  { id: 'stochastic', label: 'Stochastic rounding', detail: 'No rotation, unbiased stochastic rounding', needsBlock: false, settings: () => ({ rotation: 'none', rounding: 'stochastic', srPrescale: false }) },
  { id: 'random-hadamard-sr', label: 'Random Hadamard + stochastic rounding', detail: 'Random Hadamard, SR with the ¾ prescale so it never clips', needsBlock: true, settings: (block) => ({ rotation: 'random-hadamard', hadamardBlock: block, rounding: 'stochastic', srPrescale: true }) },
];

export const GEMM_LABELS: Record<GemmKind, string> = { fprop: 'Fprop (Y = X·Wᵀ)', dgrad: 'Dgrad (∇X = ∇Y·W)', wgrad: 'Wgrad (∇W = ∇Yᵀ·X)' };
export const BLOCK_CHOICES: readonly HadamardBlock[] = HADAMARD_BLOCKS;
export const PRECISION_CHOICES: readonly Precision[] = PRECISIONS;
export const GEMM_CHOICES: readonly GemmKind[] = GEMM_KINDS;

export function rotationMode(id: RotationModeId): RotationMode {
  return ROTATION_MODES.find((mode) => mode.id === id)!;
}

/** The change "run these GEMMs in MXFP4 with `mode` (and `block`)"; an empty GEMM list changes nothing. */
export function rotationChange(id: RotationModeId, block: HadamardBlock, gemms: readonly GemmKind[]): NextRunConfig {
  const settings: Partial<GemmConfig> = { precision: 'mxfp4', ...rotationMode(id).settings(block) };
  return { gemms: Object.fromEntries(gemms.map((kind) => [kind, { ...settings }])) };
}

export function precisionChange(gemm: GemmKind, precision: Precision): NextRunConfig {
  return { gemms: { [gemm]: { precision } } };
}

/** Which mode a GEMM config is in (the inverse of ROTATION_MODES' settings). */
export function modeOf(config: GemmConfig): RotationModeId {
  if (config.rotation === 'hadamard') return 'hadamard';
  if (config.rotation === 'random-hadamard') return config.rounding === 'stochastic' ? 'random-hadamard-sr' : 'random-hadamard';
  return config.rounding === 'stochastic' ? 'stochastic' : 'none';
}

const SHORT: Record<GemmKind, string> = { fprop: 'F', dgrad: 'D', wgrad: 'W' };

/** e.g. "F mxfp4 · D bf16 · W mxfp4 · RHT16+SR¾", or "all mxfp4 · H16" when the three agree. */
export function describeGemms(config: Pick<RunConfig, 'gemms'>): string {
  const labels = GEMM_KINDS.map((kind) => describeGemm(config.gemms[kind]));
  if (labels.every((label) => label === labels[0])) return `all ${labels[0]}`;
  return GEMM_KINDS.map((kind, i) => `${SHORT[kind]} ${labels[i]}`).join(' · ');
}

/**
 * Every GEMM's precision and recipe, short enough for the status bar and the Runs view, grouped by
 * recipe: "F,D,W mxfp4", "F,D mxfp4 · W mxfp4 · H16", "F,W mxfp4 · D bf16". GEMMs in a wider format
 * are named too (a dgrad-bf16 run must not read like an all-MXFP4 one).
 */
export function recipeSummary(config: Pick<RunConfig, 'gemms'>): string {
  const groups = new Map<string, string[]>();
  for (const kind of GEMM_KINDS) {
    const recipe = describeGemm(config.gemms[kind]);
    groups.set(recipe, [...(groups.get(recipe) ?? []), SHORT[kind]]);
  }
  return [...groups].map(([recipe, kinds]) => `${kinds.join(',')} ${recipe}`).join(' · ');
}
