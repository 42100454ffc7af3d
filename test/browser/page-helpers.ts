// What the control tests read and do on a dashboard page: the UI state the webview persisted, a
// chart's self-description (its canvas aria-label: axis titles, ranges, series), a pixel hash of a
// canvas, and the toolkit controls driven the way a user drives them (clicks, typing, keys).
import type { Page } from 'playwright-core';
import type { UiState } from '../../webview/dashboard/model/ui-state.js';

export async function uiState(page: Page): Promise<UiState> {
  return (await page.evaluate('__mxscopeState()')) as UiState;
}

/** The chart's description: "<y title> <lo> to <hi> against <x title> <lo> to <hi>; N series: …". */
export async function chartLabel(page: Page, selector: string): Promise<string> {
  return (await page.getAttribute(selector, 'aria-label')) ?? '';
}

/** y-axis range read from the chart's description. */
export async function yRange(page: Page, selector: string): Promise<[number, number]> {
  const label = await chartLabel(page, selector);
  const match = label.match(/^.*?(-?[\d.e+-]+) to (-?[\d.e+-]+) against/);
  if (!match) throw new Error(`no y range in "${label}"`);
  return [Number(match[1]), Number(match[2])];
}

/** x-axis range read from the chart's description. */
export async function xRange(page: Page, selector: string): Promise<[number, number]> {
  const label = await chartLabel(page, selector);
  const match = label.match(/against .*?(-?[\d.e+-]+) to (-?[\d.e+-]+);/);
  if (!match) throw new Error(`no x range in "${label}"`);
  return [Number(match[1]), Number(match[2])];
}

/** A hash of a canvas's pixels (changes when anything drawn changes) and its size. */
export async function canvasHash(page: Page, selector: string): Promise<string> {
  return page.$eval(selector, (node) => {
    const canvas = node as unknown as { width: number; height: number; getContext(k: '2d'): { getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray } } };
    if (canvas.width === 0 || canvas.height === 0) return 'empty';
    const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    let h = 2166136261;
    for (let i = 0; i < data.length; i++) h = Math.imul(h ^ data[i]!, 16777619);
    return `${canvas.width}x${canvas.height}:${(h >>> 0).toString(16)}`;
  });
}

/** Let the dashboard handle what was just done (its redraw runs in the next animation frame). */
export async function settle(page: Page): Promise<void> {
  await page.evaluate('new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))');
}

/** Pick an option of a toolkit dropdown (found by its title) the way a user does: open it, click. */
export async function choose(page: Page, title: string, optionLabel: string): Promise<void> {
  const dropdown = page.locator(`vscode-dropdown[title="${title}"]`).first();
  await dropdown.click();
  await dropdown.locator(`vscode-option:text-is("${optionLabel}")`).click();
  await settle(page);
}

export async function dropdownValue(page: Page, title: string): Promise<string> {
  return page.locator(`vscode-dropdown[title="${title}"]`).first().evaluate((node) => (node as unknown as { value: string }).value);
}

export async function isChecked(page: Page, label: string): Promise<boolean> {
  return page.locator(`vscode-checkbox:has-text("${label}")`).first().evaluate((node) => (node as unknown as { checked: boolean }).checked);
}

export async function toggle(page: Page, label: string): Promise<void> {
  await page.locator(`vscode-checkbox:has-text("${label}")`).first().click();
  await settle(page);
}

export async function clickTab(page: Page, label: string): Promise<void> {
  await page.click(`nav.tabs button:text-is("${label}")`);
  await settle(page);
}

/** The RGBA of a canvas pixel at a fraction (fx, fy) of its size. */
export async function pixelAt(page: Page, selector: string, fx: number, fy: number): Promise<number[]> {
  return page.$eval(
    selector,
    (node, [x, y]) => {
      const canvas = node as unknown as { width: number; height: number; getContext(k: '2d'): { getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray } } };
      return Array.from(canvas.getContext('2d').getImageData(Math.round(canvas.width * x!), Math.round(canvas.height * y!), 1, 1).data);
    },
    [fx, fy],
  );
}

/** One computed style property of every element matching `selector`. */
export async function computedStyles(page: Page, selector: string, property: string): Promise<string[]> {
  return page.evaluate(`[...document.querySelectorAll(${JSON.stringify(selector)})].map((node) => getComputedStyle(node).getPropertyValue(${JSON.stringify(property)}))`) as Promise<string[]>;
}

/**
 * Wait until an element matching `selector` contains `text`. Locator-based: the page's CSP forbids
 * eval, which string predicates of waitForFunction need once they poll.
 */
export async function waitText(page: Page, selector: string, text: string | RegExp): Promise<void> {
  await page.locator(selector, { hasText: text }).first().waitFor();
}

/** Wait until exactly `count` elements match `selector`. */
export async function waitCount(page: Page, selector: string, count: number): Promise<void> {
  const deadline = Date.now() + 15_000;
  while ((await page.locator(selector).count()) !== count) {
    if (Date.now() > deadline) throw new Error(`expected ${count} × ${selector}, have ${await page.locator(selector).count()}`);
    await page.waitForTimeout(50);
  }
}
