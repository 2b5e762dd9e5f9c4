import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { isWatchwordError } from '../domain/errors.js';
import type { AuthorizerWatches, LookUpOutcome, WatchCredential } from '../service/authorizer-watch.js';
import type { AclResolver } from '../service/acl-resolver.js';
import { secretOf } from '../transport/credentials.js';
import { refuse } from '../transport/refuse.js';
import { plainAddress } from './request.js';
import { VERSION, WATCH_PROTOCOL, negotiate, peerRange, rangeText } from '../version.js';
import { STATUS } from './errors.js';

/** Where an enforcing client opens its watch of a set of tokens (a WebSocket; service/authorizer-watch.ts). */
export const AUTHORIZER_WATCH_PATH = '/v1/internal/acl/authorizer/watch';

/** The version a client that names none speaks (one of 0.1.0 is refused for having no credential). */
const BASE_VERSION = 2;

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
  /** The version each upgrade under way speaks, named in its answer. */
  private readonly versions = new WeakMap<IncomingMessage, number>();

  constructor(
    private readonly watches: AuthorizerWatches,
    private readonly admit: WatchAdmission,
  ) {
    // An older client never looks for it; a newer one learns from it what it may ask.
    this.wss.on('headers', (headers, req) => headers.push(`X-Service-Watch-Protocol: ${this.versions.get(req) ?? BASE_VERSION}`));
  }

  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    if (req.method !== 'GET') return refuse(socket, 405, `${AUTHORIZER_WATCH_PATH} is a WebSocket: GET with Upgrade`);
    // A client names the versions it speaks (one of 0.1.0 names none, and is judged by its credential: it has none).
    const search = new URL(req.url ?? '/', 'http://server').searchParams;
    let version = BASE_VERSION;
    if (search.get('version') !== null) {
      const theirs = peerRange(search.get('version'), search.get('max'));
      const agreed = theirs === undefined ? undefined : negotiate(WATCH_PROTOCOL, theirs);
      if (agreed === undefined)
        return refuse(
          socket,
          426,
          `unsupported watch protocol: the client speaks ${theirs ? rangeText(theirs) : '(none)'}, this daemon (${VERSION}) speaks ` +
            rangeText(WATCH_PROTOCOL),
        );
      version = agreed;
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
      this.versions.set(req, version);
      this.accept(req, socket, head, address, credential, version);
    };
    if (admitted instanceof Promise) admitted.then(opened, refused);
    else opened(admitted);
  }

  private accept(req: IncomingMessage, socket: Duplex, head: Buffer, address: string, credential: WatchCredential, version: number): void {
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
        version,
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

/**
 * A first look-up on a watch (version 3), resolved as the same secret in a request's header
 * would be (a secondary or follower asks where the token may have been made a moment ago; a
 * secret no token holds is spent from the address's budget), and answered as that request would
 * have been: found, gone (403: unknown, expired, or not confirmable now), or the status and
 * Retry-After of a refusal. `audit` is told of a secret no token holds.
 */
export function lookUpForWatch(
  resolver: Pick<AclResolver, 'resolve' | 'knows'>,
  secret: string,
  client: string,
  audit: (secret: string) => void,
): LookUpOutcome | Promise<LookUpOutcome> {
  const failed = (err: unknown): LookUpOutcome => {
    const status = isWatchwordError(err) ? STATUS[err.code] : 500;
    if (status === 403) {
      if (!resolver.knows(secret)) audit(secret);
      return 'gone';
    }
    const retryAfter = isWatchwordError(err) && err.retryAfter !== undefined ? Math.ceil(err.retryAfter) : 0;
    return { status, retryAfter };
  };
  try {
    const identity = resolver.resolve(secret, client);
    return identity instanceof Promise ? identity.then(() => 'found' as const, failed) : 'found';
  } catch (err) {
    return failed(err);
  }
}
