// Console progress of a run: a redrawn bar on a TTY, plain lines otherwise (logs, CI, pipes).
// Steps are printed as the protocol numbers them (0-based), the same numbers the dashboard, the
// alerts and the run log show, with the count done beside them ("step 24 (25/300)").
import type { TelemetryRecord } from '../protocol/telemetry.js';

const BAR_WIDTH = 24;
/** Plain output prints a line every this many steps (and every validation). */
const PLAIN_EVERY = 10;

export class ProgressReporter {
  private lastValidation: number | null = null;
  private tokensPerSecond = 0;

  constructor(
    private readonly out: NodeJS.WriteStream,
    private readonly totalSteps: number,
    private readonly label: string,
  ) {}

  private get tty(): boolean {
    return this.out.isTTY === true;
  }

  onRecord(record: TelemetryRecord): void {
    switch (record.type) {
      case 'runStarted':
        this.out.write(`${this.label}: run ${record.runId} (${record.name})\n`);
        break;
      case 'step': {
        const seconds = record.stepMs / 1000;
        if (seconds > 0) this.tokensPerSecond = record.tokens / (record.step + 1) / seconds;
        const loss = record.loss === null ? 'NaN' : record.loss.toFixed(4);
        const val = this.lastValidation === null ? '' : ` val ${this.lastValidation.toFixed(4)}`;
        const tail = `step ${record.step} (${record.step + 1}/${this.totalSteps}) loss ${loss}${val} lr ${record.lr.toExponential(2)} ${Math.round(this.tokensPerSecond)} tok/s`;
        if (this.tty) {
          const filled = Math.round((BAR_WIDTH * (record.step + 1)) / this.totalSteps);
          this.out.write(`\r[${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}] ${tail}\x1b[K`);
        } else if ((record.step + 1) % PLAIN_EVERY === 0 || record.step === 0) {
          this.out.write(`${tail}\n`);
        }
        break;
      }
      case 'validation':
        this.lastValidation = record.loss;
        if (!this.tty) this.out.write(`validation at step ${record.step}: ${record.loss === null ? 'NaN' : record.loss.toFixed(4)}\n`);
        break;
      case 'checkpointSaved':
        if (!this.tty) this.out.write(`checkpoint ${record.path}\n`);
        break;
      case 'runEnded':
        if (this.tty) this.out.write('\n');
        this.out.write(`${this.label}: ${record.status} at step ${record.step}: ${record.reason}\n`);
        break;
      case 'layerStats':
        break;
    }
  }
}
