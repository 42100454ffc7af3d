// Messages between the extension host and the checkpoint webview (editor and compare panel).
// Webview → host messages are validated on arrival: the page is never trusted.
import { HADAMARD_BLOCKS, type HadamardBlock } from './config.js';
import { intIn, literal, object, union, type Schema } from './validate.js';
import type { CheckpointComparison, CheckpointReport } from './checkpoint-report.js';

export type CheckpointHostMessage =
  | { type: 'progress'; title: string; bytesDone: number; bytesTotal: number }
  | { type: 'report'; report: CheckpointReport }
  | { type: 'comparison'; comparison: CheckpointComparison }
  /** The file could not be analysed (unreadable, hostile, cancelled): shown instead of the table. */
  | { type: 'error'; title: string; message: string };

export type CheckpointWebviewMessage =
  | { type: 'ready' }
  /** Analyse again with another rotation block, pass or SQNR row sample (0: every row). */
  | AnalyseRequest;

export interface AnalyseRequest {
  type: 'analyse';
  hadamardBlock: HadamardBlock;
  mode: 'full' | 'histogram';
  sqnrRows: number;
}

export const checkpointWebviewMessageSchema: Schema<CheckpointWebviewMessage> = union<CheckpointWebviewMessage>({
  ready: object<{ type: 'ready' }>({ type: literal('ready') }),
  analyse: object<AnalyseRequest>({
    type: literal('analyse'),
    hadamardBlock: literal(...HADAMARD_BLOCKS),
    mode: literal('full', 'histogram'),
    sqnrRows: intIn(0, 1 << 30),
  }),
});
