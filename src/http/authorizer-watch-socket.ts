import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import type { AuthorizerWatches } from '../service/authorizer-watch.js';
import { refuse } from '../transport/refuse.js';

/** Where an enforcing client opens its watch of a set of tokens (a WebSocket; service/authorizer-watch.ts). */
export const AUTHORIZER_WATCH_PATH = '/v1/internal/acl/authorizer/watch';

/** A frame of 5,000 additions is ~600 KB; nothing a client sends needs more. */
const MAX_FRAME = 2 * 1024 * 1024;
/** A client that has not answered a ping within this long is gone (a half-open connection). */
const PING_MS = 30_000;

/**
 * Serves watches over WebSockets: the upgrade needs no token (each watched secret is its own
 * credential, judged as GET /v1/internal/acl/authorizer judges it), the beat the client asks
 * for comes in the URL (`?beat=` in ms), and a peer that stops answering pings is cut off.
 */
export class AuthorizerWatchSockets {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME, perMessageDeflate: false });

  constructor(private readonly watches: AuthorizerWatches) {}

  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    if (req.method !== 'GET') return refuse(socket, 405, `${AUTHORIZER_WATCH_PATH} is a WebSocket: GET with Upgrade`);
    const beat = Number(new URL(req.url ?? '/', 'http://server').searchParams.get('beat') ?? 10_000);
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      const conn = this.watches.open(
        {
          send: (text) => ws.send(text),
          buffered: () => ws.bufferedAmount,
          close: (code, reason) => ws.close(code, reason.slice(0, 120)),
        },
        beat,
        req.socket.remoteAddress ?? '',
      );
      let alive = true;
      const ping = setInterval(() => {
        if (!alive) return ws.terminate();
        alive = false;
        ws.ping();
      }, PING_MS);
      ping.unref();
      ws.on('pong', () => (alive = true));
      ws.on('message', (data, isBinary) => {
        if (isBinary) return ws.close(1003, 'frames are JSON text');
        conn.receive(data.toString());
      });
      ws.on('error', () => ws.terminate());
      ws.on('close', () => {
        clearInterval(ping);
        conn.closed();
      });
    });
  }
}
