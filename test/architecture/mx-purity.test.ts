// src/mx is pure: importing it changes no state. Its kernel slots (WebAssembly or TypeScript) are
// filled by one explicit call, setMxBackend, at each process's start-up, never as a side effect of
// an import. Checked statically (no module of src/mx calls an installer at its top level) and by
// importing the numerics, the trainer and the checkpoint engine in a fresh process.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import ts from 'typescript';
import { listSources } from './imports.js';

/** Calls that install or load something: what an import must not do. */
const INSTALLER = /^(set|load|install|register|use)[A-Z]/;

/** `file:line: call` for every call made while the module loads (outside any function body) that installs something, or any top-level call statement. */
function importTimeCalls(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const at = (node: ts.Node) => `${file}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}: ${node.getText().slice(0, 60)}`;
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) || ts.isClassDeclaration(node)) return;
    if (ts.isCallExpression(node)) {
      const callee = node.expression;
      const name = ts.isIdentifier(callee) ? callee.text : ts.isPropertyAccessExpression(callee) ? callee.name.text : '';
      if (INSTALLER.test(name)) found.push(at(node));
    }
    node.forEachChild(visit);
  };
  for (const statement of source.statements) {
    if (ts.isExpressionStatement(statement) && ts.isCallExpression(statement.expression)) found.push(at(statement));
    else visit(statement);
  }
  return [...new Set(found)];
}

test('no module of src/mx installs kernels (or calls anything) when it is imported', () => {
  const calls = listSources(process.cwd(), 'src/mx').flatMap((file) => importTimeCalls(file, readFileSync(file, 'utf8')));
  assert.deepEqual(calls, [], 'select kernels with setMxBackend at start-up (src/cli, src/host/extension.ts), not on import');
});

test('the check catches an import-time installer, in a statement or an initializer, but not one inside a function', () => {
  const text = ["import { setKernel } from './k.js';", "setKernel(load());", 'const kernels = loadWasm();', 'export function select() { setKernel(undefined); }', 'const table = new Float64Array(8);'].join('\n');
  assert.deepEqual(importTimeCalls('x.ts', text).map((found) => found.split(':')[1]), ['2', '3']);
});

test('importing the numerics, the trainer and the checkpoint engine leaves the TypeScript kernels selected; setMxBackend switches', () => {
  const script = [
    "const mx = require('./src/mx/index.ts');",
    "require('./src/trainer/index.ts');",
    "require('./src/checkpoint/analysis.ts');",
    'const before = mx.mxBackendInUse();',
    "const wasm = mx.setMxBackend('auto');",
    'console.log(JSON.stringify({ before, wasm, after: mx.mxBackendInUse() }));',
  ].join('\n');
  // A fresh process without the test runner's start-up (test/start-up.ts selects WebAssembly).
  const child = spawnSync(process.execPath, ['--import', 'tsx', '-e', script], { encoding: 'utf8' });
  assert.equal(child.status, 0, child.stderr);
  assert.deepEqual(JSON.parse(child.stdout.trim().split('\n').pop()!), { before: 'ts', wasm: true, after: 'wasm' });
});

test('every process entry point selects its kernels once at start-up', () => {
  for (const entry of ['src/cli/train.ts', 'src/cli/inspect.ts', 'src/checkpoint/sqnr-worker.ts', 'src/host/extension.ts', 'test/start-up.ts']) {
    assert.equal(readFileSync(entry, 'utf8').match(/setMxBackend\('auto'\)/g)?.length, 1, entry);
  }
  assert.match(readFileSync('scripts/run-tests.mjs', 'utf8'), /'--import', '\.\/test\/start-up\.ts'/);
});
