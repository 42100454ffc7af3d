// Connecting to a URL where nothing listens fails in seconds with the socket's own reason
// (ECONNREFUSED), after a bounded number of attempts, and keeps the next-run changes made before.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type AddressInfo } from 'node:net';
import { LiveLink } from '../../src/live/live-link.js';
import { rotationChange } from '../../src/host/model/rotation-modes.js';
import { baseConfig } from '../link/fake-run.js';
import { RunStore } from '../../src/store/run-store.js';
import { until } from '../link/helpers.js';

/** A port that was free a moment ago: nothing listens there. */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

test('a dead URL closes within seconds naming ECONNREFUSED, and the pending next-run change survives', async () => {
  const link = new LiveLink(new RunStore(), () => undefined, baseConfig);
  await link.changeNextRun(rotationChange('hadamard', 32, ['wgrad']));
  const port = await deadPort();
  const started = Date.now();
  const states: string[] = [];
  link.onDidChange(() => states.push(`${link.snapshot().state}`));
  link.connect(`ws://127.0.0.1:${port}`);
  await until(() => link.snapshot().state === 'closed', 'gave up', 8_000);
  const elapsed = Date.now() - started;
  assert.ok(elapsed < 5_000, `failed fast: ${elapsed} ms`);
  const { detail } = link.snapshot();
  assert.match(detail ?? '', new RegExp(`could not connect to ws://127\\.0\\.0\\.1:${port} after 4 attempts: connect ECONNREFUSED`));
  assert.ok(states.filter((s) => s === 'reconnecting').length <= 4, 'bounded retries');
  const next = link.nextRunConfig()!;
  assert.equal(next.gemms.wgrad.rotation, 'hadamard');
  assert.equal(next.gemms.wgrad.hadamardBlock, 32, 'the change made before connecting is kept');
  link.disconnect();
});
