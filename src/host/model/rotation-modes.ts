// The quick-pick model behind "Switch Rotation Mode" and "Set GEMM Precision": what the user can
// choose, and the next-run config change each choice means. No vscode here, so it is unit tested.
import { t } from './localize.js';
import { describeGemm, GEMM_KINDS, HADAMARD_BLOCKS, isBlockPrecision, PRECISIONS, type GemmConfig, type GemmConfigs, type GemmKind, type HadamardBlock, type NextRunConfig, type Precision, type RunConfig } from '../../protocol/index.js';

export const ROTATION_MODE_IDS = ['none', 'hadamard', 'fixed-sign-hadamard', 'random-hadamard', 'stochastic', 'random-hadamard-sr'] as const;
export type RotationModeId = (typeof ROTATION_MODE_IDS)[number];

export interface RotationMode {
  id: RotationModeId;
  label: string;
  detail: string;
  /** Whether the user also picks a Hadamard block size. */
  needsBlock: boolean;
  /** The GEMM settings this mode sets; precision becomes mxfp4 unless the GEMM already runs in a block format. */
  settings(block: HadamardBlock): Partial<GemmConfig>;
}

// Labels and details are getters: they are read after activate() has installed the translator.
export const ROTATION_MODES: readonly RotationMode[] = [
  { id: 'none', get label() { return t('No rotation'); }, get detail() { return t('Plain MXFP4 with round-to-nearest-even'); }, needsBlock: false, settings: () => ({ rotation: 'none', rounding: 'nearest-even', srPrescale: false }) },
  { id: 'hadamard', get label() { return t('Deterministic Hadamard'); }, get detail() { return t('The same block Hadamard every step, round-to-nearest-even'); }, needsBlock: true, settings: (block) => ({ rotation: 'hadamard', hadamardBlock: block, rounding: 'nearest-even', srPrescale: false }) },
  { id: 'fixed-sign-hadamard', get label() { return t('Fixed-sign Hadamard'); }, get detail() { return t("Random ±1 signs drawn once per run, the same every step (block 16: TransformerEngine's NVFP4 Wgrad signs)"); }, needsBlock: true, settings: (block) => ({ rotation: 'fixed-sign-hadamard', hadamardBlock: block, rounding: 'nearest-even', srPrescale: false }) },
  { id: 'random-hadamard', get label() { return t('Random Hadamard'); }, get detail() { return t('Fresh random signs every step, round-to-nearest-even'); }, needsBlock: true, settings: (block) => ({ rotation: 'random-hadamard', hadamardBlock: block, rounding: 'nearest-even', srPrescale: false }) },
  { id: 'stochastic', get label() { return t('Stochastic rounding'); }, get detail() { return t('No rotation, unbiased stochastic rounding'); }, needsBlock: false, settings: () => ({ rotation: 'none', rounding: 'stochastic', srPrescale: false }) },
  { id: 'random-hadamard-sr', get label() { return t('Random Hadamard + stochastic rounding'); }, get detail() { return t('Random Hadamard, SR with the ¾ prescale so it never clips'); }, needsBlock: true, settings: (block) => ({ rotation: 'random-hadamard', hadamardBlock: block, rounding: 'stochastic', srPrescale: true }) },
];

export const GEMM_LABELS: Readonly<Record<GemmKind, string>> = {
  get fprop() { return t('Fprop (Y = X·Wᵀ)'); },
  get dgrad() { return t('Dgrad (∇X = ∇Y·W)'); },
  get wgrad() { return t('Wgrad (∇W = ∇Yᵀ·X)'); },
};
export const BLOCK_CHOICES: readonly HadamardBlock[] = HADAMARD_BLOCKS;
export const PRECISION_CHOICES: readonly Precision[] = PRECISIONS;
export const GEMM_CHOICES: readonly GemmKind[] = GEMM_KINDS;

export function rotationMode(id: RotationModeId): RotationMode {
  return ROTATION_MODES.find((mode) => mode.id === id)!;
}

/**
 * The change "run these GEMMs with `mode` (and `block`)": in MXFP4, or in the block format (NVFP4,
 * MXFP8) a GEMM of `current` already runs in. An empty GEMM list changes nothing.
 */
export function rotationChange(id: RotationModeId, block: HadamardBlock, gemms: readonly GemmKind[], current?: GemmConfigs): NextRunConfig {
  const settings = rotationMode(id).settings(block);
  return {
    gemms: Object.fromEntries(gemms.map((kind) => {
      const precision = current && isBlockPrecision(current[kind].precision) ? current[kind].precision : 'mxfp4';
      return [kind, { precision, ...settings }];
    })),
  };
}

export function precisionChange(gemm: GemmKind, precision: Precision): NextRunConfig {
  return { gemms: { [gemm]: { precision } } };
}

/** Which mode a GEMM config is in (the inverse of ROTATION_MODES' settings). */
export function modeOf(config: GemmConfig): RotationModeId {
  if (config.rotation === 'hadamard') return 'hadamard';
  if (config.rotation === 'fixed-sign-hadamard') return 'fixed-sign-hadamard';
  if (config.rotation === 'random-hadamard') return config.rounding === 'stochastic' ? 'random-hadamard-sr' : 'random-hadamard';
  return config.rounding === 'stochastic' ? 'stochastic' : 'none';
}

const SHORT: Record<GemmKind, string> = { fprop: 'F', dgrad: 'D', wgrad: 'W' };

/** e.g. "F mxfp4 · D bf16 · W mxfp4 · RHT16+SR¾", or "all mxfp4 · H16" when the three agree. */
export function describeGemms(config: Pick<RunConfig, 'gemms'>): string {
  const labels = GEMM_KINDS.map((kind) => describeGemm(config.gemms[kind]));
  if (labels.every((label) => label === labels[0])) return t('all {0}', labels[0]!);
  return GEMM_KINDS.map((kind, i) => `${SHORT[kind]} ${labels[i]}`).join(' · ');
}

/**
 * Every GEMM's precision and recipe, short enough for the status bar and the Runs view, grouped by
 * recipe: "F,D,W mxfp4", "F,D mxfp4 · W mxfp4 · H16", "F,W mxfp4 · D bf16", "F nvfp4 · 2D · D,W mxfp8 · rceil".
 * GEMMs in a wider format are named too (a dgrad-bf16 run must not read like an all-MXFP4 one).
 */
export function recipeSummary(config: Pick<RunConfig, 'gemms'>): string {
  const groups = new Map<string, string[]>();
  for (const kind of GEMM_KINDS) {
    const recipe = describeGemm(config.gemms[kind]);
    groups.set(recipe, [...(groups.get(recipe) ?? []), SHORT[kind]]);
  }
  return [...groups].map(([recipe, kinds]) => `${kinds.join(',')} ${recipe}`).join(' · ');
}
