// The folder rules of docs/architecture.md, enforced: vscode only in src/host, webviews import only
// webview + shared code, src/mx imports nothing outside itself, no cycles between folders.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { boundaryViolations, folderCycles, listSources, readImports, type ImportEdge } from './imports.js';

const edges = readImports(process.cwd(), ['src', 'webview']);

test('the import graph is read (static, type-only and dynamic imports)', () => {
  assert.ok(edges.length > 300, `only ${edges.length} imports found`);
  assert.ok(edges.some((edge) => edge.specifier === 'vscode'));
});

test('every import obeys the folder rules', () => {
  assert.deepEqual(boundaryViolations(edges), []);
});

test('no two folders import each other, directly or through others', () => {
  assert.deepEqual(folderCycles(edges), []);
});

// The checker itself must be able to fail: each rule, broken once.
const edge = (from: string, specifier: string, target: string | null = null): ImportEdge => ({ from, specifier, target });

test('the checker reports vscode outside src/host, also from src/host/model', () => {
  assert.match(boundaryViolations([edge('src/store/x.ts', 'vscode')]).join(), /only src\/host may import/);
  assert.match(boundaryViolations([edge('src/host/model/x.ts', 'vscode')]).join(), /vscode/);
  assert.deepEqual(boundaryViolations([edge('src/host/x.ts', 'vscode')]), []);
});

test('the checker reports a webview importing host-side or engine code, or Node built-ins', () => {
  assert.match(boundaryViolations([edge('webview/dashboard/x.ts', '../../src/dashboard/feed.js', 'src/dashboard/feed.ts')]).join(), /webview may not import src\/dashboard/);
  assert.match(boundaryViolations([edge('webview/dashboard/x.ts', 'node:fs')]).join(), /must run outside Node/);
  assert.deepEqual(boundaryViolations([edge('webview/dashboard/x.ts', '../../src/protocol/webview.js', 'src/protocol/webview.ts')]), []);
});

test('the checker reports src/mx importing anything outside itself', () => {
  assert.match(boundaryViolations([edge('src/mx/x.ts', '../protocol/index.js', 'src/protocol/index.ts')]).join(), /src\/mx may not import src\/protocol/);
  assert.match(boundaryViolations([edge('src/mx/x.ts', 'node:path')]).join(), /must run outside Node/);
});

test('the checker reports an unknown folder and an unlisted package', () => {
  assert.match(boundaryViolations([edge('src/newthing/x.ts', '../protocol/index.js', 'src/protocol/index.ts')]).join(), /no rule in MAY_IMPORT/);
  assert.match(boundaryViolations([edge('src/store/x.ts', 'lodash')]).join(), /no entry in PACKAGE_OWNERS/);
});

test('the cycle finder reports a cycle once, through any number of folders', () => {
  const cyclic = [
    edge('src/trainer/cli.ts', '../link/serve.js', 'src/link/serve.ts'),
    edge('src/link/serve.ts', '../runlog/x.js', 'src/runlog/x.ts'),
    edge('src/runlog/x.ts', '../trainer/index.js', 'src/trainer/index.ts'),
  ];
  assert.deepEqual(folderCycles(cyclic), ['src/link → src/runlog → src/trainer → src/link']);
  assert.deepEqual(folderCycles(cyclic.slice(0, 2)), []);
});

test('tests and benchmarks draw randomness from a seeded generator, never Math.random', () => {
  const unseeded = ['test', 'bench']
    .flatMap((folder) => listSources(process.cwd(), folder))
    .filter((file) => file !== 'test/architecture/boundaries.test.ts' && readFileSync(file, 'utf8').includes('Math.random('));
  assert.deepEqual(unseeded, [], 'use Rng from src/mx/rng.ts with a fixed seed, so a failure repeats');
});
