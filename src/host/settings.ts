// The `mxscope.*` settings (declared in package.json `contributes.configuration`).
import * as vscode from 'vscode';
import type { StoreLimits } from '../store/run-store.js';

export interface MxScopeSettings {
  defaultUrl: string;
  preset: 'tiny' | 'small';
  statsEvery: number;
  /** Where emulated runs write their run logs; empty: `runs/` in the first workspace folder. */
  runDirectory: string;
  history: Pick<StoreLimits, 'statsPerSeries' | 'stepsPerRun' | 'runs'>;
}

export function readSettings(): MxScopeSettings {
  const config = vscode.workspace.getConfiguration('mxscope');
  return {
    defaultUrl: config.get<string>('defaultUrl', 'ws://127.0.0.1:7340'),
    preset: config.get<'tiny' | 'small'>('emulation.preset', 'tiny'),
    statsEvery: config.get<number>('emulation.statsEvery', 10),
    runDirectory: config.get<string>('emulation.runDirectory', ''),
    history: {
      statsPerSeries: config.get<number>('history.statsStepsPerLayer', 64),
      stepsPerRun: config.get<number>('history.stepsPerRun', 20_000),
      runs: config.get<number>('history.runs', 32),
    },
  };
}
