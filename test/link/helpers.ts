// Small async helpers for link tests: a raw ws peer that records frames, and waiting on conditions.
import WebSocket from 'ws';

export async function until(condition: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

export interface RawPeer {
  socket: WebSocket;
  frames: Record<string, unknown>[];
  closed: { code: number; reason: string } | undefined;
}

/** A bare ws client that parses every frame it gets; resolves once the socket is open. */
export async function rawPeer(url: string, options?: WebSocket.ClientOptions): Promise<RawPeer> {
  const socket = new WebSocket(url, options);
  const peer: RawPeer = { socket, frames: [], closed: undefined };
  socket.on('message', (data) => peer.frames.push(JSON.parse(data.toString()) as Record<string, unknown>));
  socket.on('close', (code, reason) => (peer.closed = { code, reason: reason.toString() }));
  await new Promise<void>((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('error', reject);
  });
  return peer;
}

export function framesOfType(peer: RawPeer, type: string): Record<string, unknown>[] {
  return peer.frames.filter((frame) => frame.type === type);
}
