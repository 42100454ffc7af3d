// Who may connect to a trainer server: anyone on loopback unless a token is set; with a token
// (required off loopback) only clients that present it as `?token=` or `Authorization: Bearer`.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '');
  return bare === 'localhost' || bare === '::1' || /^127\.\d+\.\d+\.\d+$/.test(bare);
}

export function generateToken(): string {
  return randomBytes(24).toString('base64url');
}

/** The token a websocket upgrade request presents, from the query or a bearer header. */
export function presentedToken(request: IncomingMessage): string | undefined {
  const header = request.headers.authorization;
  if (header?.startsWith('Bearer ')) return header.slice('Bearer '.length).trim();
  const query = new URL(request.url ?? '/', 'ws://placeholder').searchParams.get('token');
  return query ?? undefined;
}

/** Constant-time comparison (digests first, so lengths do not leak either). */
export function tokenMatches(expected: string, given: string | undefined): boolean {
  if (given === undefined) return false;
  const digest = (value: string) => createHash('sha256').update(value).digest();
  return timingSafeEqual(digest(expected), digest(given));
}
