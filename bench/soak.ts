// Soak: a trainer server (child process) streams 1,000 messages/s for 5 minutes to a TrainerClient
// → RunStore → alerts (this process, the "host"), printing both processes' RSS every 10 s. Both
// must level off: the server once its replay memory is full (the documented 256 MiB cap: older
// frames are dropped, run logs serve them), the host because the store thins its series.
// Not part of the test suite: `npm run soak [seconds] [messagesPerSecond]` (defaults 300, 1000).
import { readFileSync } from 'node:fs';
import { TrainerClient } from '../src/link/trainer-client.js';
import { startTrainerServer } from '../src/link/trainer-server.js';
import { formatListeningLine } from '../src/link/listening-line.js';
import { spawnTrainer } from '../src/live/trainer-process.js';
import { RunStore } from '../src/store/run-store.js';
import { AlertTracker } from '../src/dashboard/alerts.js';
import type { LayerStatsRecord, TelemetryRecord } from '../src/protocol/index.js';
import { forEachStatsRecord, syntheticRunStarted, syntheticStep } from '../test/fixtures/synthetic-llama8b.js';

const REPLAY_CAP = 256 * 1024 * 1024;
const MiB = 2 ** 20;

/** Child mode: serve one endless run at `rate` messages/s (a step record, then its 672 layer stats); report replay bytes on stderr. */
async function publisher(rate: number): Promise<void> {
  const started = syntheticRunStarted('soak', 0, 10);
  const pool: LayerStatsRecord[] = [];
  forEachStatsRecord('soak', 0, started.layers, (record) => pool.push(record));
  const server = await startTrainerServer({
    baseConfig: started.config,
    replayBytes: REPLAY_CAP,
    launch: ({ onRecord, signal }) => {
      const done = (async () => {
        onRecord(started);
        const begin = performance.now();
        let sent = 0;
        for (let step = 0; !signal.aborted; step++) {
          const batch: TelemetryRecord[] = [syntheticStep('soak', step)];
          if (step % 10 === 0) for (const record of pool) batch.push({ ...record, step });
          for (const record of batch) {
            const wait = begin + (sent / rate) * 1000 - performance.now();
            if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
            onRecord(record);
            sent++;
          }
        }
      })();
      return { runId: 'soak', done, saveCheckpoint: async () => '' };
    },
  });
  process.stdout.write(`${formatListeningLine({ url: server.url })}\n`);
  setInterval(() => process.stderr.write(`SOAK ${JSON.stringify({ rss: process.memoryUsage().rss, replay: server.replayHeldBytes, seq: server.lastSeq })}\n`), 1000).unref();
  process.once('SIGTERM', () => void server.close().then(() => process.exit(0)));
}

function rssOf(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) * 1024 : NaN;
}

/** Levelled off: the last minute's samples spread less than `tolerance` of their mean. */
function levelled(samples: number[], tolerance: number): boolean {
  const last = samples.slice(-7);
  const mean = last.reduce((a, b) => a + b, 0) / last.length;
  return (Math.max(...last) - Math.min(...last)) / mean < tolerance;
}

async function main(seconds: number, rate: number): Promise<number> {
  let serverReport = { rss: 0, replay: 0, seq: 0 };
  const child = await spawnTrainer({
    nodePath: process.execPath,
    args: [...process.execArgv, process.argv[1]!, '--publisher', String(rate)],
    onStderr: (line) => {
      if (line.startsWith('SOAK ')) serverReport = JSON.parse(line.slice(5)) as typeof serverReport;
      else console.error(`server: ${line}`);
    },
  });
  const store = new RunStore();
  const alerts = new AlertTracker();
  store.onDidChange((change) => change.record && alerts.ingest(change.record));
  let received = 0;
  const client = new TrainerClient({ url: child.info.url, onTelemetry: (record) => (received++, store.ingest(record)) });
  while (client.state !== 'connected') await new Promise((resolve) => setTimeout(resolve, 10));
  await client.request({ type: 'startRun' });
  console.log(`soak: ${rate} messages/s for ${seconds} s; server replay cap ${REPLAY_CAP / MiB} MiB`);
  console.log('   t  server RSS  (replay held)   host RSS  host heap  messages received');
  const serverRss: number[] = [];
  const hostRss: number[] = [];
  const begin = performance.now();
  for (let t = 10; t <= seconds; t += 10) {
    await new Promise((resolve) => setTimeout(resolve, begin + t * 1000 - performance.now()));
    serverRss.push(rssOf(child.pid!));
    hostRss.push(process.memoryUsage().rss);
    const row = [`${t}`.padStart(4), `${(serverRss.at(-1)! / MiB).toFixed(0)} MiB`.padStart(10), `(${(serverReport.replay / MiB).toFixed(0)} MiB)`.padStart(14), `${(hostRss.at(-1)! / MiB).toFixed(0)} MiB`.padStart(10), `${(process.memoryUsage().heapUsed / MiB).toFixed(0)} MiB`.padStart(10), `${received}`.padStart(18)];
    console.log(row.join(' '));
  }
  client.close();
  await child.stop();
  const achieved = received / seconds;
  const serverFlat = levelled(serverRss, 0.1);
  const hostFlat = levelled(hostRss, 0.1);
  const capReached = serverReport.replay >= REPLAY_CAP * 0.95;
  console.log(`achieved ${achieved.toFixed(0)} messages/s; server replay memory ${capReached ? 'reached its cap' : `at ${(serverReport.replay / MiB).toFixed(0)} MiB (cap not reached in this time)`}`);
  console.log(`levelled off over the last minute (spread < 10%): server ${serverFlat ? 'yes' : 'NO'}, host ${hostFlat ? 'yes' : 'NO'}`);
  return serverFlat && hostFlat ? 0 : 1;
}

if (process.argv[2] === '--publisher') void publisher(Number(process.argv[3]));
else void main(Number(process.argv[2] ?? 300), Number(process.argv[3] ?? 1000)).then((code) => process.exit(code));
