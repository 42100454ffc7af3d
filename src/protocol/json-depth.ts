// A bound on JSON nesting checked on the text before JSON.parse sees it. Parsing deep nesting
// is where hostile input gets its leverage (a 57 MiB frame of `[` blocked the extension host for
// 30 s; a nested 20 MB safetensors header took 21 s and 1 GB), while every message of protocol v1
// and every safetensors header is a few levels deep. Frames and headers share the one limit.

/** Deepest nesting of `[`/`{` accepted anywhere: protocol v1 messages reach 5, safetensors headers 3. */
export const MAX_JSON_DEPTH = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;
const OPENERS = ['[', '{'] as const;

/**
 * True when the JSON text never nests deeper than `limit`. Brackets inside strings do not count.
 * Linear in the length; it does not check syntax (JSON.parse does, after). Most texts hold fewer
 * openers than the limit, which the first pass proves without tracking strings, by
 * String.prototype.indexOf (a layerStats frame has about 15 openers in 1.5 KB: ≈ 0.17 µs, against
 * ≈ 0.4 µs for the same search on its bytes, whose every call crosses into C++, and ≈ 2 µs for a
 * loop). It runs on the decoded text, before JSON.parse: decoding deep or long text is linear and
 * bounded by the callers' size limits; parsing deep nesting is where hostile input gets its leverage.
 */
export function withinDepth(text: string, limit = MAX_JSON_DEPTH): boolean {
  let openers = 0;
  for (const opener of OPENERS) {
    for (let i = text.indexOf(opener); i !== -1; i = text.indexOf(opener, i + 1)) {
      if (++openers > limit) return scanDepth(text, limit);
    }
  }
  return true;
}

function scanDepth(text: string, limit: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      // Skip the string: no UTF-16 code unit of a non-ASCII character equals these ASCII ones.
      for (i++; i < text.length; i++) {
        const s = text.charCodeAt(i);
        if (s === BACKSLASH) i++;
        else if (s === QUOTE) break;
      }
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > limit) return false;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      depth--;
    }
  }
  return true;
}
