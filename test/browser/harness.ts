// Loads the BUILT dashboard bundle in headless Debian Chromium with the real page (CSP included),
// stubs acquireVsCodeApi, and plays the host: answers `ready` with a snapshot and `requestLayer`
// with layer details from a DashboardFeed over a RunStore, exactly as the extension does.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { dashboardHtml } from '../../src/host/dashboard/html.js';
import { AlertTracker } from '../../src/dashboard/alerts.js';
import { DashboardFeed, type FeedCursor } from '../../src/dashboard/feed.js';
import { check } from '../../src/protocol/validate.js';
import { webviewToHostSchema, type HostToWebview } from '../../src/protocol/webview.js';
import type { TelemetryRecord } from '../../src/protocol/telemetry.js';
import { RunStore, type StoreLimits } from '../../src/store/run-store.js';
import { themeCss, THEMES, type ThemeName } from './themes.js';

export const CHROMIUM = process.env.MXSCOPE_CHROMIUM ?? '/usr/bin/chromium';
const ORIGIN = 'https://mxscope.test';
const BUNDLE = 'dist/webview/dashboard.js';

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium not found at ${CHROMIUM}: install Debian's chromium (apt-get install -y chromium) or set MXSCOPE_CHROMIUM to its path`);
  }
  if (!existsSync(BUNDLE)) throw new Error(`${BUNDLE} is missing: run \`npm run build\` first`);
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
}

/**
 * Stands in for VS Code's acquireVsCodeApi in a page: postMessage goes to the page binding
 * `__mxscopeHostReceive` (page.exposeFunction), state lives in the page (read it with
 * `__mxscopeState()`), CSP violations are logged
 * as console errors. A string, not a function: the test's TypeScript transform would add helpers
 * the page lacks.
 */
export const VSCODE_API_STUB = `
  let state;
  window.acquireVsCodeApi = () => ({
    postMessage: (message) => window.__mxscopeHostReceive(message),
    getState: () => state,
    setState: (next) => { state = next; },
  });
  window.__mxscopeState = () => state;
  document.addEventListener('securitypolicyviolation', (e) => console.error('CSP violation: ' + e.violatedDirective + ' at ' + e.sourceFile + ':' + e.lineNumber + ':' + e.columnNumber + ' ' + e.sample));
`;

/** One frame, timed inside the page (see FakeHost.timedSend). */
export interface FrameTiming {
  latency: number;
  work: number;
}

export class FakeHost {
  readonly store: RunStore;
  readonly alerts = new AlertTracker();
  readonly feed: DashboardFeed;
  readonly received: unknown[] = [];
  readonly errors: string[] = [];
  private cursor: FeedCursor | undefined;

  constructor(
    readonly page: Page,
    limits: Partial<StoreLimits> = {},
  ) {
    this.store = new RunStore(limits);
    this.store.onDidChange((change) => change.record && this.alerts.ingest(change.record));
    this.feed = new DashboardFeed(this.store, this.alerts);
  }

  ingest(records: Iterable<TelemetryRecord>): void {
    for (const record of records) this.store.ingest(record);
  }

  async send(message: HostToWebview): Promise<void> {
    // VS Code delivers host messages as window `message` events; so does this.
    await this.page.evaluate((m) => (globalThis as unknown as { postMessage(m: unknown, origin: string): void }).postMessage(m, '*'), message);
  }

  /** False: `ready` is not answered (a benchmark sends and times the snapshot itself). */
  answerReady = true;

  /** The host's part of the protocol: every webview message is validated, then answered. */
  async onMessage(raw: unknown): Promise<void> {
    this.received.push(raw);
    const message = check(webviewToHostSchema, raw);
    if (message.type === 'ready' && this.answerReady) {
      const { message: snapshot, cursor } = this.feed.snapshot();
      this.cursor = cursor;
      await this.send(snapshot);
    } else if (message.type === 'requestLayer') {
      const detail = this.feed.layerDetail(message);
      if (detail) await this.send(detail);
    } else if (message.type === 'requestLayerGrid') {
      const grid = this.feed.layerGrid(message);
      if (grid) await this.send(grid);
    }
  }

  /**
   * Put `message` in the page as `window.__mxscopeStaged`, for a script there to post: Playwright
   * passes typed arrays and NaN, which a script with the message written in as JSON would lose.
   */
  async stage(message: HostToWebview): Promise<void> {
    await this.page.evaluate((m) => ((globalThis as unknown as { __mxscopeStaged: unknown }).__mxscopeStaged = m), message);
  }

  /**
   * Post a message and time it inside the page. `latency`: from dispatch until the frame after the
   * dashboard handled it (our listener runs after the dashboard's, our rAF after its rAF) was
   * painted. `work`: the main-thread time the dashboard spent, i.e. its message handler plus its
   * part of that frame (from the frame's start to our rAF), without the wait for the next vsync.
   * `next`: the same for the frame after (work a view deferred to it, e.g. secondary charts).
   */
  async timedSend(message: HostToWebview): Promise<FrameTiming & { next: FrameTiming }> {
    await this.stage(message);
    return this.page.evaluate(
      `new Promise((resolve) => {
        const message = window.__mxscopeStaged;
        let t0 = 0;
        const frame = (then) => requestAnimationFrame((frameStart) => {
          const work = performance.now() - frameStart;
          setTimeout(() => then({ latency: performance.now() - t0, work }), 0);
        });
        const after = () => {
          window.removeEventListener('message', after);
          const handled = performance.now() - t0;
          requestAnimationFrame((frameStart) => {
            const inFrame = performance.now() - Math.max(frameStart, t0 + handled);
            setTimeout(() => {
              const first = { latency: performance.now() - t0, work: handled + inFrame };
              frame((next) => resolve({ ...first, next }));
            }, 0);
          });
        };
        window.addEventListener('message', after);
        t0 = performance.now();
        window.postMessage(message, '*');
      })`,
    ) as Promise<FrameTiming & { next: FrameTiming }>;
  }

  /** The pending delta since the last snapshot (null: none or a resync is due). */
  nextDelta() {
    return this.cursor ? this.feed.delta(this.cursor) : null;
  }

  /** Adopt a snapshot the caller sends itself. */
  takeSnapshot() {
    const { message, cursor } = this.feed.snapshot();
    this.cursor = cursor;
    return message;
  }

  async sendDelta(): Promise<void> {
    const delta = this.cursor && this.feed.delta(this.cursor);
    if (delta) await this.send(delta);
  }
}

/** Open the dashboard page in a theme; the host is wired before the bundle runs. */
export async function openDashboard(browser: Browser, theme: ThemeName, options: { width?: number; height?: number; layout?: 'panel' | 'sidebar'; limits?: Partial<StoreLimits>; before?: (host: FakeHost) => void } = {}): Promise<FakeHost> {
  const page = await browser.newPage({ viewport: { width: options.width ?? 1200, height: options.height ?? 900 }, colorScheme: theme });
  page.setDefaultTimeout(15_000); // generous: CI and shared machines are slow; a healthy run takes ~1 s per step
  const host = new FakeHost(page, options.limits);
  options.before?.(host);
  page.on('pageerror', (error) => host.errors.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error') host.errors.push(message.text());
  });
  await page.exposeFunction('__mxscopeHostReceive', (message: unknown) => host.onMessage(message).catch((error: Error) => host.errors.push(error.message)));
  await page.addInitScript(VSCODE_API_STUB);
  const html = dashboardHtml({ cspSource: ORIGIN, scriptUri: `${ORIGIN}/dist/webview/dashboard.js`, styleUri: `${ORIGIN}/dist/webview/dashboard.css`, layout: options.layout ?? 'panel' })
    .replace('</head>', `<link rel="stylesheet" href="${ORIGIN}/theme.css">\n</head>`)
    .replace('<body ', `<body class="${THEMES[theme].bodyClass}" `);
  await page.route(`${ORIGIN}/**`, (route) => {
    const path = new URL(route.request().url()).pathname;
    if (path === '/') return route.fulfill({ contentType: 'text/html', body: html });
    if (path === '/theme.css') return route.fulfill({ contentType: 'text/css', body: themeCss(theme) });
    const file = join(process.cwd(), path);
    if (path.startsWith('/dist/webview/') && existsSync(file)) {
      return route.fulfill({ contentType: path.endsWith('.css') ? 'text/css' : 'text/javascript', body: readFileSync(file) });
    }
    return route.fulfill({ status: 404, body: '' });
  });
  await page.goto(`${ORIGIN}/`);
  return host;
}

/** The part of a page's HTMLCanvasElement used here (this file compiles without DOM types). */
interface PageCanvas {
  width: number;
  height: number;
  getContext(kind: '2d'): { getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray } } | null;
}

/** How many distinct colours a canvas holds (a blank or cleared one has 1). */
export async function canvasColours(page: Page, selector: string): Promise<number[]> {
  return page.$$eval(selector, (canvases) =>
    (canvases as unknown as PageCanvas[]).map((canvas) => {
      const g = canvas.getContext('2d');
      if (!g || canvas.width === 0 || canvas.height === 0) return 0;
      const pixels = g.getImageData(0, 0, canvas.width, canvas.height).data;
      const seen = new Set<number>();
      for (let i = 0; i < pixels.length && seen.size < 64; i += 4 * 7) seen.add((pixels[i]! << 24) | (pixels[i + 1]! << 16) | (pixels[i + 2]! << 8) | pixels[i + 3]!);
      return seen.size;
    }),
  );
}
