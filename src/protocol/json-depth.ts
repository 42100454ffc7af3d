// A bound on JSON nesting checked on the raw bytes before JSON.parse sees them. Parsing deep nesting
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

/**
 * True when the JSON text in `bytes` (UTF-8) never nests deeper than `limit`. Brackets inside
 * strings do not count. Linear in the length; it does not check syntax (JSON.parse does, after).
 * Most frames hold fewer openers than the limit, which the first pass proves without tracking strings.
 */
export function withinDepth(bytes: Uint8Array, limit = MAX_JSON_DEPTH): boolean {
  let openers = 0;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++openers > limit) return scanDepth(bytes, limit);
    }
  }
  return true;
}

function scanDepth(bytes: Uint8Array, limit: number): boolean {
  let depth = 0;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (c === QUOTE) {
      // Skip the string: multi-byte UTF-8 never contains these ASCII bytes, so bytes suffice.
      for (i++; i < bytes.length; i++) {
        const s = bytes[i]!;
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

/** The same check for text already decoded (run-log lines, test inputs). */
export function textWithinDepth(text: string, limit = MAX_JSON_DEPTH): boolean {
  return withinDepth(new TextEncoder().encode(text), limit);
}
