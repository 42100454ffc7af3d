// Who may connect to a trainer server: clients that present its token (as `?token=` or
// `Authorization: Bearer`; a server without one must be on loopback, by explicit choice), and never
// a browser page unless its origin was allow-listed (browsers always send `Origin`, tools do not).
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '');
  return bare === 'localhost' || bare === '::1' || /^127\.\d+\.\d+\.\d+$/.test(bare);
}

export function generateToken(): string {
  return randomBytes(24).toString('base64url');
}

const BEARER = /^bearer\s+(\S+)\s*$/i;

/** The token a websocket upgrade request presents, from a bearer header (scheme name in any case) or the query. */
export function presentedToken(request: IncomingMessage): string | undefined {
  const bearer = BEARER.exec(request.headers.authorization ?? '');
  if (bearer) return bearer[1];
  const query = new URL(request.url ?? '/', 'ws://placeholder').searchParams.get('token');
  return query ?? undefined;
}

/** Why an upgrade's `Origin` is refused, or undefined when there is none or it is allow-listed. */
export function refusedOrigin(request: IncomingMessage, allowed: readonly string[]): string | undefined {
  const origin = request.headers.origin;
  if (origin === undefined || allowed.includes(origin)) return undefined;
  return `origin ${JSON.stringify(origin.slice(0, 200))} is not allowed: browsers may not connect unless the trainer was started with --allow-origin for that origin`;
}

/**
 * A URL as the listening line prints it (`ws://host:port/?token=…`, as Jupyter does) split into
 * the URL without the token and the token, so a client can send it as a header instead of in the
 * URL (which ends up in logs).
 */
export function splitTokenUrl(url: string): { url: string; token?: string } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { url };
  }
  const token = parsed.searchParams.get('token');
  if (token === null) return { url };
  parsed.searchParams.delete('token');
  const bare = parsed.toString().replace(/\/$/, '');
  return { url: bare, ...(token ? { token } : {}) };
}

/** The URL a person can paste: the server's URL with its token as a query parameter. */
export function urlWithToken(url: string, token: string | undefined): string {
  return token ? `${url}/?token=${encodeURIComponent(token)}` : url;
}

/** Constant-time comparison (digests first, so lengths do not leak either). */
export function tokenMatches(expected: string, given: string | undefined): boolean {
  if (given === undefined) return false;
  const digest = (value: string) => createHash('sha256').update(value).digest();
  return timingSafeEqual(digest(expected), digest(given));
}
