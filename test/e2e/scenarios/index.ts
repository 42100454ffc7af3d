// The scenarios in the order a user meets the features; later ones build on the state earlier ones leave.
import { mkdirSync } from 'node:fs';
import type { Scenario } from '../harness/scenario.js';
import { checkpoint } from './checkpoint.e2e.js';
import { dashboard } from './dashboard.e2e.js';
import { emulatedRun } from './emulated-run.e2e.js';
import { runsView } from './runs-view.e2e.js';
import { palette } from './palette.e2e.js';
import { restore } from './restore.e2e.js';
import { rotation } from './rotation.e2e.js';
import { scaleRule } from './scale-rule.e2e.js';
import { secondRun } from './second-run.e2e.js';
import { statsCoverage } from './stats-coverage.e2e.js';
import { stopRun } from './stop-run.e2e.js';

export const scenarios: Scenario[] = [palette, emulatedRun, dashboard, runsView, rotation, scaleRule, statsCoverage, checkpoint, stopRun, secondRun, restore];

/** Creates the folder code-server opens as the workspace. */
export function prepareWorkspace(dir: string): string {
  mkdirSync(dir, { recursive: true });
  return dir;
}
