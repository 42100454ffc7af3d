// Recipes that cannot run are refused when the run is configured, naming what to change: the cases
// both the trainer and the Python bridge hold (test/fixtures/recipe-refusals.json), the refusal of a
// next-run change by the emulated trainer's server, and a sweep over every combination of the recipe
// fields: each is either refused (with a message naming the GEMM and what to change) or trains a step.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { applyEmulationChange } from '../../src/trainer/emulation-config.js';
import { GEMM_KINDS, gemmRecipeProblems, PRECISIONS, SCALE_RULES, type GemmConfig } from '../../src/protocol/index.js';
import { microModelConfig, presetConfig } from '../../src/trainer/presets.js';
import { Trainer } from '../../src/trainer/trainer.js';

interface RefusalCase {
  name: string;
  gemm: Partial<GemmConfig>;
  ts: string | null;
  python: string | null;
}

const BASE: GemmConfig = { precision: 'mxfp4', rotation: 'none', hadamardBlock: 16, rounding: 'nearest-even', srPrescale: false };
const fixture = JSON.parse(readFileSync(join(__dirname, '..', 'fixtures', 'recipe-refusals.json'), 'utf8')) as { cases: RefusalCase[] };

test('the shared refusal cases: refused with what to change, or accepted, as the fixture says', () => {
  assert.ok(fixture.cases.length >= 10);
  for (const c of fixture.cases) {
    const problems = gemmRecipeProblems('wgrad', { ...BASE, ...c.gemm });
    if (c.ts === null) assert.deepEqual(problems, [], c.name);
    else assert.ok(problems.some((p) => p.startsWith('wgrad: ') && p.includes(c.ts!)), `${c.name}: ${problems.join('; ') || 'accepted'}`);
  }
});

test('the emulated trainer refuses a next-run change that cannot run when it is made, not at the run start', () => {
  const tiny = presetConfig('tiny');
  assert.throws(() => applyEmulationChange(tiny, { gemms: { fprop: { precision: 'nvfp4', scaleRule: 'rceil' } } }), /config\.gemms cannot run: fprop: scale rule 'rceil' .* set scaleRule to floor/);
  assert.throws(() => applyEmulationChange(tiny, { gemms: { dgrad: { precision: 'mxfp8', srPrescale: true } } }), /dgrad: srPrescale .* turn it off or set precision to mxfp4/);
  const ok = applyEmulationChange(tiny, { gemms: { fprop: { precision: 'nvfp4', nvfp4Weight2d: true, rotation: 'fixed-sign-hadamard' } } });
  assert.equal(ok.gemms.fprop.precision, 'nvfp4');
  // A change that fixes one field at a time: first the rule, then the precision.
  const rceil = applyEmulationChange(tiny, { gemms: { fprop: { scaleRule: 'rceil' } } });
  assert.throws(() => applyEmulationChange(rceil, { gemms: { fprop: { precision: 'nvfp4' } } }), /set scaleRule to floor or precision to mxfp4\/mxfp8/);
  assert.equal(applyEmulationChange(rceil, { gemms: { fprop: { precision: 'nvfp4', scaleRule: 'floor' } } }).gemms.fprop.precision, 'nvfp4');
});

test('every combination of the recipe fields is refused naming what to change, or trains a step with stats', () => {
  const sink = (): void => undefined;
  let trained = 0;
  let refused = 0;
  for (const precision of PRECISIONS) {
    for (const rotation of ['none', 'fixed-sign-hadamard'] as const) {
      for (const rounding of ['nearest-even', 'stochastic'] as const) {
        for (const srPrescale of [false, true]) {
          for (const scaleRule of SCALE_RULES) {
            for (const nvfp4Weight2d of [false, true]) {
              const gemm: GemmConfig = { precision, rotation, hadamardBlock: 16, rounding, srPrescale, scaleRule, nvfp4Weight2d };
              const config = microModelConfig();
              for (const kind of GEMM_KINDS) config.gemms[kind] = gemm;
              config.statsEvery = 1;
              const problems = GEMM_KINDS.flatMap((kind) => gemmRecipeProblems(kind, gemm));
              const where = JSON.stringify(gemm);
              if (problems.length > 0) {
                refused++;
                for (const problem of problems) assert.match(problem, /^(fprop|dgrad|wgrad): .*(set|turn it off)/, where);
                assert.throws(() => new Trainer(config, 'sweep'), /config\.gemms cannot run/, where);
                continue;
              }
              const trainer = new Trainer(config, 'sweep');
              const records: { type: string }[] = [];
              trainer.step((record) => void records.push(record as { type: string }));
              trainer.step(sink);
              assert.ok(records.some((r) => r.type === 'layerStats'), `${where}: stats on step 0`);
              trained++;
            }
          }
        }
      }
    }
  }
  assert.ok(refused > 50 && trained > 50, `${refused} refused, ${trained} trained`);
});
