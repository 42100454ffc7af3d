// Webview HTML with a strict CSP: nothing but our bundle, its stylesheet and a fresh nonce per
// render, no inline code. Kept free of `vscode` so the browser tests render the very same page.
import { randomBytes } from 'node:crypto';

export interface WebviewPage {
  /** webview.cspSource: the origin our bundle is served from. */
  cspSource: string;
  scriptUri: string;
  styleUri: string;
  title: string;
  /** Attributes of <body>, e.g. { 'data-layout': 'sidebar' }. */
  bodyAttributes?: Record<string, string>;
  /** Allow images from our origin, data: and blob: URLs (canvas exports). */
  images?: boolean;
  nonce?: string;
}

export function newNonce(): string {
  return randomBytes(18).toString('base64url');
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export function webviewHtml(page: WebviewPage): string {
  const nonce = page.nonce ?? newNonce();
  const csp = [
    "default-src 'none'",
    ...(page.images ? [`img-src ${page.cspSource} data: blob:`] : []),
    // The toolkit styles itself through constructable stylesheets; its one probe <style> element
    // takes the nonce from <meta property="csp-nonce">.
    `style-src ${page.cspSource} 'nonce-${nonce}'`,
    `font-src ${page.cspSource}`,
    `script-src 'nonce-${nonce}'`,
  ].join('; ');
  const body = Object.entries(page.bodyAttributes ?? {})
    .map(([name, value]) => ` ${name}="${escapeHtml(value)}"`)
    .join('');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<meta property="csp-nonce" content="${nonce}">
<link rel="stylesheet" href="${page.styleUri}" nonce="${nonce}">
<title>${escapeHtml(page.title)}</title>
</head>
<body${body}>
<script nonce="${nonce}" src="${page.scriptUri}"></script>
</body>
</html>`;
}

export function dashboardHtml(page: Omit<WebviewPage, 'title' | 'bodyAttributes' | 'images'> & { layout: 'panel' | 'sidebar' }): string {
  return webviewHtml({ ...page, title: 'MX Scope', bodyAttributes: { 'data-layout': page.layout }, images: true });
}
