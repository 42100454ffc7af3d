import { RunStore } from '../../../../../src/store/run-store.js';
import { loadRunLog } from '../../../../../src/store/load-run-log.js';
import { configRows } from '../../../../../src/host/model/run-tree.js';
const store = new RunStore();
void (async () => {
const loaded = await loadRunLog(store, process.argv[2]!);
const run = store.get(loaded.runIds[0]!)!;
console.log(loaded.records, 'records;', configRows(run.summary, run).find((row) => row.label === 'telemetry cost'));
})();
