// Drives VS Code's workbench (served by code-server) the way a user does: command palette, status
// bar, webviews. Selectors are VS Code's own DOM classes, stable across recent releases.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { FrameLocator, Page } from 'playwright-core';

export interface CanvasInk {
  width: number;
  height: number;
  /** Fraction of pixels that are not fully transparent. */
  inked: number;
  /** Number of distinct colours (quantized). */
  colours: number;
  /**
   * Fraction of pixels in a saturated colour. Axes, grid lines and labels are grey in every theme;
   * data (lines, bars) is drawn in run colours, so this is what tells a drawn chart from empty axes.
   */
  coloured: number;
  /** A hash of the pixels, to tell whether the drawing changed between two looks. */
  hash: number;
}

/** The part of HTMLCanvasElement read here (the node project's type check has no DOM library). */
interface PixelSource {
  width: number;
  height: number;
  getContext(kind: '2d'): { getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray } } | null;
}

const PALETTE_INPUT = '.quick-input-widget .quick-input-box input';
const PALETTE_ROW = '.quick-input-widget .monaco-list-row';
const STATUS_ITEM = '.part.statusbar .statusbar-item';

export function isDrawn(ink: CanvasInk): boolean {
  return ink.coloured >= 0.002;
}

export async function poll<T>(what: string, look: () => Promise<T | undefined>, timeoutMs: number, intervalMs = 250): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await look();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export class Workbench {
  private shots = 0;

  constructor(
    readonly page: Page,
    private readonly shotDir: string,
  ) {
    mkdirSync(shotDir, { recursive: true });
  }

  /** Opens the workbench at `url` and waits until its status bar is drawn. */
  static async open(page: Page, url: string, shotDir: string): Promise<Workbench> {
    await page.goto(url);
    const wb = new Workbench(page, shotDir);
    await wb.waitUntilReady();
    return wb;
  }

  /**
   * Reloads the window the way a user does ("Developer: Reload Window"), so the workbench saves
   * editor and webview state on shutdown; the extension host restarts. Waits until it is back.
   */
  async reload(): Promise<void> {
    const navigated = this.page.waitForEvent('framenavigated', { predicate: (frame) => frame === this.page.mainFrame(), timeout: 60_000 });
    await this.runCommand('Developer: Reload Window');
    await navigated;
    await this.waitUntilReady();
  }

  private async waitUntilReady(): Promise<void> {
    await this.page.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: 60_000 });
    await this.page.locator('.monaco-workbench .part.statusbar').waitFor({ state: 'visible', timeout: 60_000 });
  }

  /** Titles of the palette's rows for `query` (e.g. "MX Scope:"), closing the palette afterwards. */
  async paletteTitles(query: string): Promise<string[]> {
    await this.openPalette(query);
    await this.page.locator(PALETTE_ROW).first().waitFor({ state: 'visible', timeout: 10_000 }).catch(() => undefined);
    const titles = await this.page.locator(`${PALETTE_ROW} .label-name`).allInnerTexts();
    await this.closePalette();
    return titles.map((title) => title.trim());
  }

  /**
   * Runs a command by its palette title ("MX Scope: Stop Run"). Right after load the palette may not
   * list an extension's commands yet (extensions still being scanned), so a miss is retried.
   */
  async runCommand(title: string, timeoutMs = 30_000): Promise<void> {
    await poll(
      `"${title}" in the command palette`,
      async () => {
        await this.openPalette(title);
        // Enter on the active row, not a click: the list may still re-render under the pointer.
        const active = this.page.locator(`${PALETTE_ROW}.focused`).filter({ has: this.page.locator('.label-name', { hasText: exactText(title) }) });
        const found = await active.waitFor({ state: 'visible', timeout: 3_000 }).then(
          () => true,
          () => false,
        );
        if (!found) {
          await this.closePalette();
          return undefined;
        }
        await this.page.locator(PALETTE_INPUT).press('Enter');
        return true;
      },
      timeoutMs,
      500,
    );
    // A command that throws (or is not registered) gets a modal dialog that blocks everything after.
    const dialog = await this.dismissDialog(500);
    if (dialog !== undefined) throw new Error(`"${title}" failed: ${dialog}`);
  }

  /** Closes a modal dialog if one shows within `waitMs`, returning its text. */
  async dismissDialog(waitMs = 0): Promise<string | undefined> {
    const box = this.page.locator('.monaco-dialog-box');
    const shown = await box.waitFor({ state: 'visible', timeout: Math.max(waitMs, 1) }).then(
      () => true,
      () => false,
    );
    if (!shown) return undefined;
    const text = (await box.innerText()).replace(/\s+/g, ' ').trim();
    await this.page.keyboard.press('Escape');
    await box.waitFor({ state: 'hidden', timeout: 5_000 }).catch(() => undefined);
    return text;
  }

  /**
   * Answers an open quick pick (e.g. "which rotation?") with the row labelled exactly `label`, from
   * the keyboard: type the label, wait until that row is the active one, press Enter. (Clicking rows
   * can land while the widget still animates or re-renders.)
   */
  async pick(label: string, timeoutMs = 10_000): Promise<void> {
    const exact = exactText(label);
    const row = this.page.locator(PALETTE_ROW).filter({ has: this.page.locator('.label-name', { hasText: exact }) }).first();
    await row.waitFor({ state: 'visible', timeout: timeoutMs });
    const input = this.page.locator(PALETTE_INPUT);
    await input.fill(label, { timeout: timeoutMs });
    const focused = this.page.locator(`${PALETTE_ROW}.focused .label-name`, { hasText: exact });
    await focused.waitFor({ state: 'visible', timeout: timeoutMs });
    await input.press('Enter');
  }

  /** Accepts a multi-select quick pick as it stands, once `selected` rows are picked. */
  async acceptPicks(selected: number, timeoutMs = 10_000): Promise<void> {
    const widget = this.page.locator('.quick-input-widget');
    await widget.getByText(new RegExp(`^${selected} Selected$`, 'i')).waitFor({ timeout: timeoutMs });
    await this.page.locator(PALETTE_INPUT).press('Enter');
    await widget.waitFor({ state: 'hidden', timeout: timeoutMs });
  }

  async statusBarTexts(): Promise<string[]> {
    const texts = await this.page.locator(STATUS_ITEM).allInnerTexts();
    return texts.map((text) => text.replace(/\s+/g, ' ').trim()).filter((text) => text !== '');
  }

  /** Waits until some status bar item's text matches (and `accept` agrees), and returns the match. */
  async waitForStatusBarText(pattern: RegExp, timeoutMs = 30_000, accept: (match: RegExpMatchArray) => boolean = () => true): Promise<RegExpMatchArray> {
    return poll(
      `a status bar item matching ${pattern}`,
      async () => {
        for (const text of await this.statusBarTexts()) {
          const match = text.match(pattern);
          if (match && accept(match)) return match;
        }
        return undefined;
      },
      timeoutMs,
    );
  }

  /**
   * The content frame of the visible webview (the last one opened if several are visible). Webviews
   * nest two iframes: VS Code's host frame and the extension's `active-frame`.
   */
  webviewFrame(): FrameLocator {
    return this.page
      .locator('iframe.webview.ready')
      .filter({ visible: true })
      .last()
      .contentFrame()
      .locator('iframe#active-frame')
      .contentFrame();
  }

  /** Measures how much of the canvas is drawn (pixels read back through the 2D context). */
  async canvasInk(frame: FrameLocator, selector: string): Promise<CanvasInk> {
    return frame.locator(selector).first().evaluate((node) => {
      const canvas = node as unknown as PixelSource;
      const { width, height } = canvas;
      const context = canvas.getContext('2d');
      if (!context || width === 0 || height === 0) return { width, height, inked: 0, colours: 0, coloured: 0, hash: 0 };
      const data = context.getImageData(0, 0, width, height).data;
      let inked = 0;
      let coloured = 0;
      let hash = 2166136261;
      const colours = new Set<number>();
      for (let i = 0; i < data.length; i += 4) {
        if (data[i + 3] === 0) continue;
        inked++;
        if (Math.max(data[i], data[i + 1], data[i + 2]) - Math.min(data[i], data[i + 1], data[i + 2]) > 60) coloured++;
        const quantized = ((data[i] >> 4) << 8) | ((data[i + 1] >> 4) << 4) | (data[i + 2] >> 4);
        colours.add(quantized);
        hash = Math.imul(hash ^ (i * 31 + quantized), 16777619) >>> 0;
      }
      const pixels = width * height;
      return { width, height, inked: inked / pixels, colours: colours.size, coloured: coloured / pixels, hash };
    });
  }

  /** True when the canvas shows data: at least 0.2 % of its pixels in a saturated (non-grey) colour. */
  async canvasIsNonBlank(frame: FrameLocator, selector: string): Promise<boolean> {
    return isDrawn(await this.canvasInk(frame, selector));
  }

  /** Saves a numbered PNG of the whole window into the run's screenshot folder and returns its path. */
  async screenshot(name: string): Promise<string> {
    this.shots++;
    const path = join(this.shotDir, `${String(this.shots).padStart(2, '0')}-${name}.png`);
    await this.page.screenshot({ path });
    return path;
  }

  /** Opens a workspace file by its relative path through Quick Open, in its default editor. */
  async quickOpen(relativePath: string): Promise<void> {
    // The palette without its ">" prefix is Quick Open's file search.
    await this.openPalette('');
    await this.page.locator(PALETTE_INPUT).fill(relativePath);
    const row = this.page.locator(PALETTE_ROW).filter({ hasText: relativePath.split('/').pop() }).first();
    await row.waitFor({ state: 'visible', timeout: 10_000 });
    await row.click();
  }

  /**
   * Moves focus from a webview to the side bar. A quick pick closes when it loses focus, and a
   * webview that had focus takes it back after each step of a multi-step pick.
   */
  async focusSideBar(): Promise<void> {
    await this.page.locator('.monaco-workbench .part.sidebar .composite.title').first().click();
  }

  /** Closes the palette (or any quick pick) and waits until it is gone. */
  async closePalette(): Promise<void> {
    const input = this.page.locator(PALETTE_INPUT);
    if (!(await input.isVisible())) return;
    await this.page.keyboard.press('Escape');
    await input.waitFor({ state: 'hidden', timeout: 5_000 });
  }

  /** Opens the command palette filtered by `text` and leaves it open (for a screenshot). */
  async showPalette(text: string): Promise<void> {
    await this.openPalette(text);
    await this.page.locator(PALETTE_ROW).first().waitFor({ state: 'visible', timeout: 10_000 });
  }

  private async openPalette(text: string): Promise<void> {
    // A quick input that is still closing (or a leftover pick) ignores typing: start from none.
    await this.closePalette();
    const input = this.page.locator(PALETTE_INPUT);
    await this.page.keyboard.press('F1');
    const opened = await input.waitFor({ state: 'visible', timeout: 2_000 }).then(
      () => true,
      () => false,
    );
    if (!opened) {
      // Focus was inside a webview or nowhere: give it back to the workbench and ask again.
      await this.page.locator('.monaco-workbench .part.sidebar, .monaco-workbench .part.editor').first().click({ position: { x: 5, y: 5 } });
      await this.page.keyboard.press('F1');
      await input.waitFor({ state: 'visible', timeout: 10_000 });
    }
    await input.fill(`>${text}`, { timeout: 5_000 });
  }

}

function exactText(text: string): RegExp {
  return new RegExp(`^${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`);
}
