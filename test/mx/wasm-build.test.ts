import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';

const ROOT = join(__dirname, '..', '..');

interface WasmBuilder {
  compileWat(path: string): Promise<Uint8Array>;
  generatedSource(name: string, bytes: Uint8Array): string;
}

test('the committed generated WebAssembly modules are fresh builds of src/wasm/*.wat', async () => {
  // A computed specifier: the build script is plain .mjs without type declarations.
  const builder = (await import(join(ROOT, 'scripts', 'build-wasm.mjs') as string)) as WasmBuilder;
  const sources = readdirSync(join(ROOT, 'src', 'wasm')).filter((f) => f.endsWith('.wat'));
  assert.ok(sources.length > 0);
  for (const file of sources) {
    const name = basename(file, '.wat');
    const expected = builder.generatedSource(name, await builder.compileWat(join(ROOT, 'src', 'wasm', file)));
    assert.equal(readFileSync(join(ROOT, 'src', 'wasm', 'generated', `${name}.ts`), 'utf8'), expected, `run npm run build and commit src/wasm/generated/${name}.ts`);
  }
});
