import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dashboardHtml } from '../../src/host/dashboard/html.js';

test('dashboard page: strict CSP with a fresh nonce per render, no inline code', () => {
  const page = { cspSource: 'https://x.test', scriptUri: 'https://x.test/d.js', styleUri: 'https://x.test/d.css', layout: 'sidebar' as const };
  const first = dashboardHtml(page);
  const second = dashboardHtml(page);
  const nonce = first.match(/'nonce-([^']+)'/)?.[1];
  assert.ok(nonce && nonce.length >= 16);
  assert.notEqual(nonce, second.match(/'nonce-([^']+)'/)?.[1]);
  assert.match(first, /default-src 'none'/);
  assert.doesNotMatch(first, /unsafe-inline|unsafe-eval/);
  assert.match(first, new RegExp(`<script nonce="${nonce}" src="https://x.test/d.js">`));
  assert.match(first, new RegExp(`<meta property="csp-nonce" content="${nonce}">`));
  assert.match(first, /<body data-layout="sidebar">/);
});
