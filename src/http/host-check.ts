import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import type { Duplex } from 'node:stream';
import { ERROR_CODE_HEADER, errorResponse } from './errors.js';

/**
 * Which `Host` a request may name (DNS rebinding): a page on another site cannot read a daemon
 * on loopback through its own name once that name resolves to 127.0.0.1, because the browser
 * still sends that name as the Host. A daemon that listens only on loopback answers only
 * requests to a loopback name or address, or to a name in `http_allowed_hosts`; with that
 * list set, a daemon listening elsewhere is held to it too. A loopback name is accepted at any
 * port: a rebinding page never sends one (its own name is what it sends), and a local TCP
 * forwarder in front of the daemon keeps the port its client used.
 */
export interface HostPolicy {
  /** The daemon listens only on loopback addresses. */
  loopbackOnly: boolean;
  /** `http_allowed_hosts`: `name` (any port) or `name:port`, compared without case. */
  allowed: readonly string[];
  /** What a Host without a port means: 443 for https, else 80. */
  defaultPort: number;
}

/** A loopback host name or address (`localhost`, `127.0.0.0/8`, `::1`). */
export function isLoopbackHost(host: string): boolean {
  const h = host
    .toLowerCase()
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '');
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  return h === '::1' || h === '0:0:0:0:0:0:0:1';
}

/** `name:port`, `[v6]:port` or a bare name, split; undefined when it does not parse. */
function splitHost(value: string): { name: string; port: number | undefined } | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]\s]+)(?::(\d{1,5}))?$/.exec(value.trim());
  if (!m) return undefined;
  return { name: (m[1] as string).toLowerCase().replace(/\.$/, ''), port: m[2] === undefined ? undefined : Number(m[2]) };
}

export class HostCheck {
  private readonly allowed: Array<{ name: string; port: number | undefined }>;
  /**
   * Host values served already (a client sends the same one on every request): the answer for
   * a value never changes, and parsing it is a tenth of a cached read's CPU. Bounded: a client
   * sending endless new values empties it.
   */
  private readonly served = new Set<string>();

  constructor(private readonly policy: HostPolicy) {
    this.allowed = policy.allowed.map((a) => splitHost(a)).filter((a): a is { name: string; port: number | undefined } => a !== undefined);
  }

  /** Whether any request could be refused (else the check is not installed at all). */
  get active(): boolean {
    return this.policy.loopbackOnly || this.allowed.length > 0;
  }

  /** Why a request with this Host is refused; undefined when it is served. */
  refusal(host: string | undefined): string | undefined {
    if (!this.active || host === undefined || host === '' || this.served.has(host)) return undefined;
    if (this.allows(host)) {
      if (this.served.size >= 256) this.served.clear();
      this.served.add(host);
      return undefined;
    }
    const shown = JSON.stringify(host.slice(0, 200));
    return this.policy.loopbackOnly
      ? `Host ${shown} is not allowed: this daemon listens on loopback and answers requests addressed to localhost, 127.0.0.1 or [::1] ` +
          `only (a guard against DNS rebinding); add the name to http_allowed_hosts to allow it`
      : `Host ${shown} is not allowed: it is not in http_allowed_hosts`;
  }

  private allows(host: string): boolean {
    const h = splitHost(host);
    if (h === undefined) return false;
    const port = h.port ?? this.policy.defaultPort;
    if (isLoopbackHost(h.name)) return true;
    const bare = h.name.replace(/^\[|\]$/g, '');
    return this.allowed.some((a) => (a.name === h.name || a.name === bare) && (a.port === undefined || a.port === port));
  }

  /** Puts the check in front of the server's request listeners (Fastify's, or the direct routes'). */
  install(server: Server): void {
    if (!this.active) return;
    const listeners = server.listeners('request') as Array<(req: IncomingMessage, res: ServerResponse) => void>;
    server.removeAllListeners('request');
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const refused = this.refusal(req.headers.host);
      if (refused === undefined) {
        for (const l of listeners) l(req, res);
        return;
      }
      const { contentType, body } = errorResponse('HOST_NOT_ALLOWED', refused, req.headers.accept);
      res.writeHead(403, {
        'content-type': contentType,
        'content-length': Buffer.byteLength(body),
        [ERROR_CODE_HEADER]: 'HOST_NOT_ALLOWED',
        connection: 'close',
      });
      res.end(body);
    });
  }

  /** For a WebSocket upgrade: true when refused (the socket has been answered and closed). */
  refuseUpgrade(req: IncomingMessage, socket: Duplex): boolean {
    const refused = this.refusal(req.headers.host);
    if (refused === undefined) return false;
    const { contentType, body } = errorResponse('HOST_NOT_ALLOWED', refused, req.headers.accept);
    socket.end(
      `HTTP/1.1 403 Forbidden\r\nContent-Type: ${contentType}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${ERROR_CODE_HEADER}: ` +
        `HOST_NOT_ALLOWED\r\nConnection: close\r\n\r\n${body}`,
    );
    return true;
  }
}
