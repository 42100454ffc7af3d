// The quick-pick model behind "Set MX Scale Rule": the rules, which GEMMs a rule can apply to, and the
// next-run config change a choice means. No vscode here, so it is unit tested.
import { GEMM_KINDS, scaleRuleOf, SCALE_RULES, type GemmConfigs, type GemmKind, type NextRunConfig, type ScaleRule } from '../../protocol/index.js';

export interface ScaleRuleChoice {
  rule: ScaleRule;
  label: string;
  detail: string;
}

const TEXT: Record<ScaleRule, Omit<ScaleRuleChoice, 'rule'>> = {
  floor: { label: 'floor (OCP MX, default)', detail: 'Shared exponent floor(log2 amax) − emax: the largest elements may saturate' },
  rceil: { label: 'rceil (round the scale up)', detail: 'Smallest power of two at which no element saturates: ceil(log2(amax / max))' },
  even: { label: 'even (amax rounded to nearest even)', detail: 'amax rounded to the element mantissa first, then floor: one binade up at the top of a binade' },
};

export const SCALE_RULE_CHOICES: readonly ScaleRuleChoice[] = SCALE_RULES.map((rule) => ({ rule, ...TEXT[rule] }));

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
    throw new Error(`scale rule '${rule}' is for MX formats (E8M0 scales); ${refused.join(', ')} run${refused.length === 1 ? 's' : ''} NVFP4, whose E4M3 block scales follow NVIDIA's definition — leave ${refused.length === 1 ? 'it' : 'them'} out or set the precision to mxfp4/mxfp8 first`);
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
