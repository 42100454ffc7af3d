// The quick-pick model behind "Set MX Scale Rule": the rules, which GEMMs a rule can apply to, and the
// next-run config change a choice means. No vscode here, so it is unit tested.
import { t } from './localize.js';
import { GEMM_KINDS, scaleRuleOf, SCALE_RULES, type GemmConfigs, type GemmKind, type NextRunConfig, type ScaleRule } from '../../protocol/index.js';

export interface ScaleRuleChoice {
  rule: ScaleRule;
  label: string;
  detail: string;
}

// Labels and details are getters: they are read after activate() has installed the translator.
const TEXT: Record<ScaleRule, Omit<ScaleRuleChoice, 'rule'>> = {
  floor: { get label() { return t('floor (OCP MX, default)'); }, get detail() { return t('Shared exponent floor(log2 amax) − emax: the largest elements may saturate'); } },
  rceil: { get label() { return t('rceil (round the scale up)'); }, get detail() { return t('Smallest power of two at which no element saturates: ceil(log2(amax / max))'); } },
  even: { get label() { return t('even (amax rounded to nearest even)'); }, get detail() { return t('amax rounded to the element mantissa first, then floor: one binade up at the top of a binade'); } },
};

export const SCALE_RULE_CHOICES: readonly ScaleRuleChoice[] = SCALE_RULES.map((rule) => ({
  rule,
  get label() { return TEXT[rule].label; },
  get detail() { return TEXT[rule].detail; },
}));

/**
 * The GEMMs a rule other than floor can apply to: every one except NVFP4 GEMMs, whose E4M3 block
 * scales follow NVIDIA's definition (the trainer refuses a scale rule there). MXFP4 and MXFP8 GEMMs
 * quantize with the rule; fp32, bf16 and fp8 GEMMs use it for their MXFP4 stats.
 */
export function ruleGemms(rule: ScaleRule, current?: GemmConfigs): GemmKind[] {
  return GEMM_KINDS.filter((kind) => rule === 'floor' || current?.[kind].precision !== 'nvfp4');
}

/** The GEMMs picked by default: those in an MX format (MXFP4, MXFP8), or all that the rule can apply to when none is. */
export function defaultRuleGemms(rule: ScaleRule, current?: GemmConfigs): GemmKind[] {
  const allowed = ruleGemms(rule, current);
  const mx = allowed.filter((kind) => current?.[kind].precision === 'mxfp4' || current?.[kind].precision === 'mxfp8');
  return mx.length > 0 ? mx : allowed;
}

/** The change "these GEMMs use `rule`"; throws, naming what to change, for an NVFP4 GEMM and a rule other than floor. */
export function scaleRuleChange(rule: ScaleRule, gemms: readonly GemmKind[], current?: GemmConfigs): NextRunConfig {
  const refused = gemms.filter((kind) => !ruleGemms(rule, current).includes(kind));
  if (refused.length > 0) {
    throw new Error(t("scale rule '{0}' is for MX formats (E8M0 scales); NVFP4 GEMMs ({1}) keep NVIDIA's E4M3 block scales — leave them out or set their precision to mxfp4/mxfp8 first", rule, refused.join(', ')));
  }
  return { gemms: Object.fromEntries(gemms.map((kind) => [kind, { scaleRule: rule }])) };
}

/** "floor", or "F,D rceil · W floor" when the GEMMs differ: what the pickers show as now in use. */
export function scaleRulesNow(current: GemmConfigs): string {
  const groups = new Map<ScaleRule, string[]>();
  for (const kind of GEMM_KINDS) groups.set(scaleRuleOf(current[kind]), [...(groups.get(scaleRuleOf(current[kind])) ?? []), kind]);
  if (groups.size === 1) return [...groups.keys()][0]!;
  return [...groups].map(([rule, kinds]) => `${kinds.join(',')} ${rule}`).join(' · ');
}
