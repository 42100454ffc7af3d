// mxscope-train's flags: good ones land in the run config, bad ones are rejected with a message
// that names the flag and what it accepts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { CliError, parseCliArgs } from '../../src/cli/train-args.js';

test('flags set the run config; per-GEMM flags override the shared ones', () => {
  const command = parseCliArgs(['--preset', 'small', '--steps', '12', '--seed', '5', '--precision', 'mxfp4', '--wgrad', 'fp8', '--rotation', 'hadamard', '--hadamard-block', '32', '--dgrad-rounding', 'stochastic', '--sr-prescale', '--stats-every', '3', '--data', 'x.txt', '--out', 'runs']);
  assert.equal(command.kind, 'train');
  if (command.kind !== 'train') return;
  const { config } = command;
  assert.equal(config.preset, 'small');
  assert.equal(config.steps, 12);
  assert.equal(config.seed, 5);
  assert.equal(config.statsEvery, 3);
  assert.equal(config.data, join(process.cwd(), 'x.txt'));
  assert.equal(command.outDir, 'runs');
  assert.deepEqual(config.gemms.fprop, { precision: 'mxfp4', rotation: 'hadamard', hadamardBlock: 32, rounding: 'nearest-even', srPrescale: true });
  assert.equal(config.gemms.wgrad.precision, 'fp8');
  assert.equal(config.gemms.dgrad.rounding, 'stochastic');
});

test('modes: help, ablation with its defaults, serve with host and port', () => {
  assert.deepEqual(parseCliArgs(['--help']), { kind: 'help' });
  const ablation = parseCliArgs(['--ablation', '--target-loss', '2.5']);
  assert.ok(ablation.kind === 'ablation' && ablation.targetLoss === 2.5 && ablation.config.steps > 0);
  const serve = parseCliArgs(['--serve', '--port', '8123', '--host', '0.0.0.0', '--token', 't']);
  assert.deepEqual(serve.kind === 'serve' && [serve.host, serve.port, serve.token], ['0.0.0.0', 8123, 't']);
});

test('unknown flags and bad values are rejected with a clear message', () => {
  const cases: [string[], RegExp][] = [
    [['--bogus'], /Unknown option '--bogus'.*--help/],
    [['--steps', 'ten'], /--steps: "ten" is not an integer/],
    [['--steps', '0'], /--steps: "0" is not an integer in \[1,/],
    [['--wgrad', 'fp5'], /--wgrad: "fp5" is not one of fp32, bf16, fp8, mxfp4/],
    [['--rotation', 'walsh'], /--rotation: "walsh" is not one of none, hadamard, random-hadamard/],
    [['--hadamard-block', '48'], /--hadamard-block: "48" is not one of 16, 32, 64, 128/],
    [['--preset', 'huge'], /--preset: "huge" is not one of tiny, small/],
    [['--lr=-1'], /--lr: "-1" is not a positive number/],
    [['--lr', '-1'], /'--lr' argument is ambiguous/],
    [['--port', '70000', '--serve'], /--port: "70000"/],
    [['--steps'], /argument missing|requires an argument|argument/i],
    [['extra'], /positional/i],
    [['--target-loss', '2'], /--target-loss only applies with --ablation/],
    [['--ablation', '--wgrad', 'mxfp4'], /--wgrad cannot be combined with --ablation/],
    [['--ablation', '--serve'], /cannot be combined/],
  ];
  for (const [argv, message] of cases) assert.throws(() => parseCliArgs(argv), (error: unknown) => error instanceof CliError && message.test(error.message), argv.join(' '));
});

test('the CLI exits with status 2 and says what was wrong', () => {
  const result = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/train.ts', '--fprop', 'int4'], { encoding: 'utf8' });
  assert.equal(result.status, 2);
  assert.match(result.stderr, /mxscope-train: --fprop: "int4" is not one of/);
});
