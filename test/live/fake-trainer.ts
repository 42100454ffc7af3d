// A trainer process for tests: serves protocol v1 with the fake run launcher and prints the
// listening line, like `mxscope-train --serve` does. Exits on SIGTERM.
import { startTrainerServer } from '../../src/link/trainer-server.js';
import { formatListeningLine } from '../../src/link/listening-line.js';
import { baseConfig, fakeLauncher } from '../link/fake-run.js';

const token = process.argv[2];
void startTrainerServer({ baseConfig: { ...baseConfig, steps: 40 }, launch: fakeLauncher(2).launch, ...(token ? { token } : {}) }).then((server) => {
  process.stderr.write('fake trainer ready\n');
  process.stdout.write(`${formatListeningLine({ url: server.url, ...(token ? { token } : {}) })}\n`);
  process.once('SIGTERM', () => void server.close().then(() => process.exit(0)));
});
