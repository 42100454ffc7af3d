// Debian's headless Chromium, driven by playwright-core (which never downloads a browser itself).
import { chromium, type BrowserContext } from 'playwright-core';

const QUIET_OFFLINE_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
];

/** A fresh browser profile in `profileDir`; close the returned context to end the browser. */
export function launchChromium(executablePath: string, profileDir: string): Promise<BrowserContext> {
  return chromium.launchPersistentContext(profileDir, {
    executablePath,
    headless: true,
    args: QUIET_OFFLINE_ARGS,
    viewport: { width: 1400, height: 900 },
  });
}
