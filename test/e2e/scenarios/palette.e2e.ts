import * as assert from 'node:assert/strict';
import { paletteTitles, type Scenario } from '../harness/scenario.js';

export const palette: Scenario = {
  slug: 'palette',
  title: 'the extension loads and every one of its commands is in the command palette',
  async run({ wb, manifest }) {
    const expected = paletteTitles(manifest).filter((title) => title.startsWith('MX Scope:'));
    assert.ok(expected.includes('MX Scope: Start Emulated Run'), 'the manifest contributes no "MX Scope: Start Emulated Run"');
    // The palette fills in once extensions are scanned: look until every title is listed.
    let listed: string[] = [];
    for (let attempt = 0; attempt < 20; attempt++) {
      listed = await wb.paletteTitles('MX Scope:');
      // The list renders the rows in view only (17 at this window's height): look for the others by name.
      for (const title of expected.filter((t) => !listed.includes(t))) listed.push(...(await wb.paletteTitles(title)).filter((t) => t === title));
      if (expected.every((title) => listed.includes(title))) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    assert.deepEqual(
      expected.filter((title) => !listed.includes(title)),
      [],
      `missing from the palette (listed: ${listed.join(' | ')})`,
    );
    // Leave the palette open on the MX Scope commands for the screenshot.
    await wb.showPalette('MX Scope:');
  },
};
