// One build for everything MX Scope ships: the extension host bundle, the trainer and
// inspector CLIs (node), and the webview bundles (browser). `--production` minifies and drops maps.
import * as esbuild from 'esbuild';
import { rmSync } from 'node:fs';
import { buildWasm } from './build-wasm.mjs';

const production = process.argv.includes('--production');
const watch = process.argv.includes('--watch');

const nodeEntries = [
  // [source, output without extension]
  ['src/host/extension.ts', 'host/extension'],
  ['src/cli/train.ts', 'cli/train'],
  ['src/cli/inspect.ts', 'cli/inspect'],
  // The checkpoint analysis's sample worker, started by path from the bundles above (src/checkpoint/sqnr-workers.ts).
  ['src/checkpoint/sqnr-worker.ts', 'checkpoint/sqnr-worker'],
];
const webviewEntries = [
  ['webview/dashboard/main.ts', 'webview/dashboard'],
  ['webview/checkpoint/main.ts', 'webview/checkpoint'],
];

const common = {
  bundle: true,
  minify: production,
  sourcemap: production ? false : 'linked',
  logLevel: 'warning',
  target: 'es2022',
};

const builds = [];
if (nodeEntries.length > 0) {
  builds.push({
    ...common,
    platform: 'node',
    format: 'cjs',
    entryPoints: Object.fromEntries(nodeEntries.map(([src, out]) => [out, src])),
    outdir: 'dist',
    // Makes dist/cli/train.js (the `mxscope-train` bin) executable directly; harmless for the others.
    banner: { js: '#!/usr/bin/env node' },
    // `ws` probes these optional native speedups inside try/catch; we ship without them.
    external: ['vscode', 'bufferutil', 'utf-8-validate'],
  });
}
if (webviewEntries.length > 0) {
  builds.push({
    ...common,
    platform: 'browser',
    format: 'iife',
    entryPoints: Object.fromEntries(webviewEntries.map(([src, out]) => [out, src])),
    outdir: 'dist',
  });
}

await buildWasm(); // src/wasm/*.wat → src/wasm/generated/*.ts, which src/mx imports
rmSync('dist', { recursive: true, force: true });
if (watch) {
  for (const options of builds) await (await esbuild.context(options)).watch();
  console.log('esbuild: watching for changes');
} else {
  await Promise.all(builds.map((options) => esbuild.build(options)));
}
