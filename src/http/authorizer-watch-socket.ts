import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { isWatchwordError } from '../domain/errors.js';
import type { AuthorizerWatches, WatchCredential } from '../service/authorizer-watch.js';
import { secretOf } from '../transport/credentials.js';
import { refuse } from '../transport/refuse.js';
import { plainAddress } from './request.js';
import { VERSION, WATCH_PROTOCOL, negotiate, peerRange, rangeText } from '../version.js';
import { STATUS } from './errors.js';

/** Where an enforcing client opens its watch of a set of tokens (a WebSocket; service/authorizer-watch.ts). */
export const AUTHORIZER_WATCH_PATH = '/v1/internal/acl/authorizer/watch';

/** A frame of 5,000 additions is ~600 KB; nothing a client sends needs more. */
const MAX_FRAME = 2 * 1024 * 1024;
/** A client that has not answered a ping within this long is gone (a half-open connection). */
const PING_MS = 30_000;

/**
 * Who may open a watch: the upgrade's own token (X-Service-Token, X-Consul-Token or
 * `Authorization: Bearer`; never the anonymous token), which must authenticate and hold
 * `acl:read`. Throws the request's error otherwise (ACL not found, permission denied, too many
 * unknown secrets from the client).
 */
export type WatchAdmission = (secret: string | undefined, client: string) => WatchCredential | Promise<WatchCredential>;

/**
 * Serves watches over WebSockets: the upgrade is admitted by its own token, the beat the client
 * asks for comes in the URL (`?beat=` in ms), and a peer that stops answering pings is cut off.
 * While the watch owes a client more than its bound, the client's frames are not read.
 */
export class AuthorizerWatchSockets {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME, perMessageDeflate: false });

  constructor(
    private readonly watches: AuthorizerWatches,
    private readonly admit: WatchAdmission,
  ) {}

  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    if (req.method !== 'GET') return refuse(socket, 405, `${AUTHORIZER_WATCH_PATH} is a WebSocket: GET with Upgrade`);
    // A client names the versions it speaks (one of 0.1.0 names none, and is judged by its credential: it has none).
    const search = new URL(req.url ?? '/', 'http://server').searchParams;
    if (search.get('version') !== null) {
      const theirs = peerRange(search.get('version'), search.get('max'));
      if (theirs === undefined || negotiate(WATCH_PROTOCOL, theirs) === undefined)
        return refuse(
          socket,
          426,
          `unsupported watch protocol: the client speaks ${theirs ? rangeText(theirs) : '(none)'}, this daemon (${VERSION}) speaks ` +
            rangeText(WATCH_PROTOCOL),
        );
    }
    const address = plainAddress(req.socket.remoteAddress ?? '');
    let secret: string | undefined;
    try {
      secret = secretOf(undefined, req.headers);
    } catch {
      secret = undefined;
    }
    const refused = (err: unknown): void => {
      if (!isWatchwordError(err)) return refuse(socket, 503, 'the watch cannot be opened now');
      const retry = err.retryAfter !== undefined ? { 'Retry-After': String(Math.ceil(err.retryAfter)) } : undefined;
      refuse(socket, STATUS[err.code], err.message, { 'X-Service-Error-Code': err.code, ...retry });
    };
    let admitted: WatchCredential | Promise<WatchCredential>;
    try {
      admitted = this.admit(secret, address);
    } catch (err) {
      return refused(err);
    }
    const opened = (credential: WatchCredential): void => {
      if (socket.destroyed) return;
      this.accept(req, socket, head, address, credential);
    };
    if (admitted instanceof Promise) admitted.then(opened, refused);
    else opened(admitted);
  }

  private accept(req: IncomingMessage, socket: Duplex, head: Buffer, address: string, credential: WatchCredential): void {
    const beat = Number(new URL(req.url ?? '/', 'http://server').searchParams.get('beat') ?? 10_000);
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      const conn = this.watches.open(
        {
          send: (text) => ws.send(text),
          buffered: () => ws.bufferedAmount,
          pause: () => ws.pause(),
          resume: () => ws.resume(),
          close: (code, reason) => ws.close(code, reason.slice(0, 120)),
        },
        beat,
        address,
        credential,
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
