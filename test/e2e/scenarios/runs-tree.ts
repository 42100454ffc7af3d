// The Runs view as the scenarios read it: the newest run expanded, and one of its rows found by label.
import type { Workbench } from '../harness/workbench.js';
import { poll } from '../harness/workbench.js';

const TREE_ROW = '.monaco-workbench .part.sidebar .monaco-list-row';

/**
 * Focuses the Runs view, expands the newest run (it comes first, collapsed; a click expands it) and
 * returns the text of its first row that starts with `label`, once one shows (a row's text is its
 * label then its description, whitespace collapsed). Leaves the Runs view open: callers go back to
 * the Explorer when done, since the MX Scope side bar holds the dashboard's side view too, a second
 * webview later scenarios would find beside the dashboard editor's.
 */
export async function newestRunRow(wb: Workbench, label: string, timeoutMs: number, everyMs: number): Promise<string> {
  await wb.runCommand('MX Scope: Focus on Runs View');
  const run = wb.page.locator(`${TREE_ROW}[aria-expanded]`).first();
  await run.waitFor({ state: 'visible', timeout: 20_000 });
  return poll(
    `the newest run's "${label}" row`,
    async () => {
      // Clicked again while it shows collapsed: a click that lands while the view refreshes (it does
      // every 500 ms while records stream, and when a run completes) is lost ("No tree item with id").
      if ((await run.getAttribute('aria-expanded')) !== 'true') await run.click();
      // Rows in tree order, each with its depth: the newest run's own rows are those after the first
      // run row and before the next (an older run expanded earlier lists the same labels).
      const rows = await wb.page.locator(TREE_ROW).evaluateAll((elements) =>
        elements.map((element) => ({ level: element.getAttribute('aria-level'), text: (element.textContent ?? '').replace(/\s+/g, ' ').trim() })));
      const first = rows.findIndex((row) => row.level === '1');
      const next = rows.findIndex((row, i) => i > first && row.level === '1');
      return rows.slice(first + 1, next === -1 ? undefined : next).find((row) => row.text.startsWith(label))?.text;
    },
    timeoutMs,
    everyMs,
  );
}
