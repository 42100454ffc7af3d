// The one machine-readable line a `--serve` trainer prints on stdout once it listens, e.g.
//   MXSCOPE_LISTENING {"url":"ws://127.0.0.1:41234/?token=…","token":"…","protocol":"1.7"}
// (`token` only when one is required; `url` then carries it too). Whoever spawned the trainer reads
// stdout for it. This file is the whole contract between a trainer process and whoever spawns it.
import { PROTOCOL_VERSION } from '../protocol/index.js';
import { splitTokenUrl } from './auth.js';

export const LISTENING_PREFIX = 'MXSCOPE_LISTENING ';

export interface ListeningInfo {
  url: string;
  token?: string;
}

export function formatListeningLine(info: ListeningInfo): string {
  const protocol = `${PROTOCOL_VERSION.major}.${PROTOCOL_VERSION.minor}`;
  return LISTENING_PREFIX + JSON.stringify({ url: info.url, ...(info.token ? { token: info.token } : {}), protocol });
}

/**
 * The info on a listening line, or undefined for any other line. The URL comes back without its
 * `?token=` (the token is in `token`), so whoever connects sends it as a header, not in the URL.
 */
export function parseListeningLine(line: string): ListeningInfo | undefined {
  if (!line.startsWith(LISTENING_PREFIX)) return undefined;
  try {
    const parsed = JSON.parse(line.slice(LISTENING_PREFIX.length)) as { url?: unknown; token?: unknown };
    if (typeof parsed.url !== 'string' || !/^wss?:\/\//.test(parsed.url)) return undefined;
    const { url, token } = splitTokenUrl(parsed.url);
    const explicit = typeof parsed.token === 'string' ? parsed.token : token;
    return { url, ...(explicit ? { token: explicit } : {}) };
  } catch {
    return undefined;
  }
}

/** When set, a serving trainer exits once this process id is gone (the extension host that spawned it). */
export const PARENT_PID_ENV = 'MXSCOPE_PARENT_PID';

/** A serving trainer without `--token` takes its token from here (kept out of the process list). */
export const TOKEN_ENV = 'MXSCOPE_TOKEN';
