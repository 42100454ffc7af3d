// `npm run fuzz [cases] [seed]`: the fuzz tests at full size (default 100,000 cases each), printing
// the figures docs/protocol.md quotes. Exits 1 on any crash or webview rejection.
import { fuzzProtocolPipeline } from './protocol-pipeline.js';
import { fuzzSafetensorsReader } from './safetensors-reader.js';

async function main(): Promise<number> {
  const cases = Number(process.argv[2] ?? 100_000);
  const seed = Number(process.argv[3] ?? Date.now() % 2 ** 31);
  console.log(`fuzzing with seed ${seed}, ${cases} cases each`);
  const protocol = fuzzProtocolPipeline(seed, cases);
  console.log(`protocol pipeline: ${protocol.cases} frames, ${protocol.accepted} stored, ${protocol.refusedByReader} refused by readFrame, ${protocol.refusedByStore} refused by the store; ${protocol.crashes.length} crashes, ${protocol.webviewRejections.length} webview rejections; ${(protocol.totalMs / protocol.cases * 1000).toFixed(0)} µs/frame mean, ${protocol.maxMs.toFixed(0)} ms slowest`);
  const reader = await fuzzSafetensorsReader(seed, cases);
  console.log(`safetensors reader: ${reader.cases} files, ${reader.opened} opened (${reader.analysed} analysed on disk), ${reader.refused} refused; ${reader.crashes.length} crashes; ${(reader.totalMs / reader.cases * 1000).toFixed(0)} µs/file mean, ${reader.maxMs.toFixed(0)} ms slowest`);
  for (const line of [...protocol.crashes, ...protocol.webviewRejections, ...reader.crashes].slice(0, 20)) console.log(`  ${line}`);
  return protocol.crashes.length + protocol.webviewRejections.length + reader.crashes.length === 0 ? 0 : 1;
}

void main().then((code) => process.exit(code));
