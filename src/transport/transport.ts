import { type PeerCertificate, TLSSocket, type SecureContextOptions, checkServerIdentity as defaultIdentityCheck } from 'node:tls';
import type { ServerOptions as HttpsServerOptions } from 'node:https';
import type { IncomingMessage } from 'node:http';
import { FORWARD_PROOF_HEADER, type ForwardFields, NonceBook, SERVER_KEY_ID, checkForwardProof, forwardProof } from './forward-proof.js';
import { ForwardKeys } from './forward-keys.js';
import type { Logger } from 'pino';
import type { Agent, RequestInit as UndiciRequestInit } from 'undici';
import type { ClientOptions as WebSocketOptions } from 'ws';
import { type TlsSettings, parseHostPort, peerBaseURL } from '../config/schema.js';
import { ServerKeyProof } from './server-key.js';
import { type TlsMaterial, TlsFileError, loadCA, loadTlsFiles } from './tls-files.js';

type Undici = typeof import('undici');
let undiciModule: Promise<Undici> | undefined;
/** undici on first use: a daemon with no peer to call (one server, one datacenter) never loads it. */
const loadUndici = (): Promise<Undici> => {
  undiciModule ??= import('undici');
  return undiciModule;
};

export interface TransportOptions {
  datacenter: string;
  tls: TlsSettings | undefined;
  /** etcd's TLS files and auth (etcds://). */
  etcd?: {
    caFile?: string | undefined;
    certFile?: string | undefined;
    keyFile?: string | undefined;
    auth?: { username: string; password: string };
  };
  /** Several servers without TLS: the key they prove themselves with. */
  serverKey: Buffer | undefined;
  logger: Logger;
}

/** Who a peer must prove to be: a server of this datacenter. */
export interface PeerExpectation {
  datacenter: string;
}

/** The identity check of an outgoing connection failed: the peer is not the server it must be. */
export class PeerIdentityError extends Error {
  readonly code = 'ERR_PEER_IDENTITY';
  override name = 'PeerIdentityError';
}

/**
 * Whether an address a peer or etcd reported may be used to reach a server: a plain HOST:PORT
 * (no scheme, path, credentials or anything a URL or a header could be bent with).
 */
export function isPeerAddress(value: string): boolean {
  return value.length <= 300 && parseHostPort(value) !== undefined && !/[/?#@\\]/.test(value);
}

/** A fetch whose connections are made, and whose peer is checked, by the transport. */
export type PeerFetch = (url: string | URL, init: UndiciRequestInit) => Promise<Response>;

/** The names of a certificate worth quoting in a refusal: its server/client names in `domain`, else all of them. */
function quotedNames(cert: Pick<PeerCertificate, 'subjectaltname'> | undefined, domain: string): string {
  const names = certificateNames(cert);
  const ours = names.filter((n) => n.endsWith(`.${domain}`));
  return (ours.length > 0 ? ours : names).join(', ') || 'nothing';
}

/** Names a certificate carries (DNS and IP subject alternative names). */
export function certificateNames(cert: Pick<PeerCertificate, 'subjectaltname'> | undefined): string[] {
  return (cert?.subjectaltname ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.startsWith('DNS:') || s.startsWith('IP Address:'))
    .map((s) => s.replace(/^DNS:|^IP Address:/, ''));
}

/**
 * How a server reaches and accepts its peers (docs/tls.md, "TLS"): TLS options, peer URLs and
 * identity checks for every server-to-server channel (replication between datacenters,
 * the servers' stream, forwarded writes, `?dc=`, chosen-ID checks and secret look-ups),
 * as Consul's tlsutil configurator serves every listener and dialer. A channel that
 * built its own connection could forget a check; so none does.
 *
 * With TLS a peer proves itself by a certificate signed by the CA that names
 * `server.<datacenter>.<domain>`; without it, the servers of a datacenter prove
 * themselves with the shared server key (server-key.ts), and other datacenters are
 * reached over plain HTTP as before.
 */
export class Transport {
  /** Whether the API listener and every peer channel speak TLS. */
  readonly secure: boolean;
  readonly domain: string;
  /** Proofs over the shared server key (undefined: none configured). */
  readonly serverKeyProof: ServerKeyProof | undefined;
  private material: TlsMaterial | undefined;
  /** Connection pools by the name their peers must prove ('' for none); rebuilt on reload. */
  private agents = new Map<string, Agent>();
  /** Nonces of forwarded requests' proofs already believed: each is good once. */
  private readonly nonces = new NonceBook();
  /** The keys this server and other datacenters' vouch for forwarded clients with (forward-keys.ts). */
  readonly forwardKeys: ForwardKeys;
  private datacenterKey: () => Uint8Array | undefined = () => undefined;
  private listener: { setSecureContext(options: SecureContextOptions): void } | undefined;
  private readonly etcd: {
    credentials?: { rootCertificate?: Buffer; certChain?: Buffer; privateKey?: Buffer };
    auth?: { username: string; password: string };
  };

  constructor(private readonly options: TransportOptions) {
    this.secure = options.tls !== undefined;
    this.domain = options.tls?.domain ?? 'watchword';
    if (options.tls?.verifyIncoming && options.tls.caFile === undefined) {
      throw new TlsFileError('tls_verify_incoming is on but tls_ca_file is not set: client certificates need a CA to be checked against');
    }
    this.material = options.tls ? loadTlsFiles(options.tls) : undefined;
    this.etcd = etcdClientOptions(options.etcd);
    this.serverKeyProof = options.serverKey ? new ServerKeyProof(options.serverKey, options.datacenter) : undefined;
    this.forwardKeys = new ForwardKeys(options.datacenter, () => this.datacenterKey());
  }

  /** Where this datacenter's own key is read from, once the store is open (the forwarding keys derive from it). */
  useDatacenterKey(source: () => Uint8Array | undefined): void {
    this.datacenterKey = source;
  }

  /**
   * Whether an outgoing connection proves who its peer is (TLS on, the peer's certificate
   * checked against the CA and for its server name): only then may a peer be reached at an
   * address that another server named rather than one the operator configured.
   */
  get verifiesPeers(): boolean {
    const tls = this.options.tls;
    return tls?.verifyOutgoing === true && tls.verifyServerHostname;
  }

  /** The name a server of `datacenter` proves with its certificate. */
  serverName(datacenter: string): string {
    return `server.${datacenter}.${this.domain}`;
  }

  /** A peer's base URL: `host:port` takes this server's scheme; a URL keeps its own, but TLS on means https. */
  peerURL(address: string): string {
    return peerBaseURL(address, this.secure);
  }

  /** The WebSocket URL of `path` on a peer. */
  websocketURL(base: string, path: string, search: Record<string, string>): URL {
    const url = new URL(path, this.peerURL(base));
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    for (const [k, v] of Object.entries(search)) url.searchParams.set(k, v);
    return url;
  }

  /** Options of the HTTPS listener (undefined: plain HTTP). */
  listenerOptions(): HttpsServerOptions | undefined {
    const m = this.material;
    const tls = this.options.tls;
    if (!m || !tls) return undefined;
    return {
      ...this.secureContext(m),
      // Asked of every client, so that servers can prove themselves; required of all only with verify_incoming.
      requestCert: true,
      rejectUnauthorized: tls.verifyIncoming,
    };
  }

  /** The listener whose certificate a reload replaces. */
  attachListener(server: TlsListener): void {
    this.listener = server;
    server.on('tlsClientError', answerPlainRequest);
  }

  private secureContext(m: TlsMaterial): SecureContextOptions {
    return { key: m.key, cert: m.cert, ...(m.ca ? { ca: m.ca } : {}), minVersion: this.options.tls?.minVersion ?? 'TLSv1.2' };
  }

  /**
   * Re-reads the certificate, key and CA (SIGHUP). A file that cannot serve is logged and
   * the old material kept. New connections use the new files; open ones go on.
   */
  reload(): boolean {
    const tls = this.options.tls;
    if (!tls) return true;
    let next: TlsMaterial;
    try {
      next = loadTlsFiles(tls);
    } catch (err) {
      this.options.logger.error(`tls: reload refused, keeping the certificates in use: ${(err as Error).message}`);
      return false;
    }
    this.material = next;
    this.listener?.setSecureContext(this.secureContext(next));
    const old = this.agents;
    this.agents = new Map();
    // Requests in flight on the old pools finish; their connections then close.
    for (const a of old.values()) void a.close().catch(() => undefined);
    this.options.logger.info({ notAfter: next.certificate.validTo }, 'tls: certificate, key and CA reloaded');
    return true;
  }

  /** The identity check of an outgoing connection to a server of `expect.datacenter`. */
  private identityCheck(expect: PeerExpectation | undefined): ((host: string, cert: PeerCertificate) => Error | undefined) | undefined {
    const tls = this.options.tls;
    if (!tls || !expect || !tls.verifyServerHostname) return undefined;
    const want = this.serverName(expect.datacenter);
    return (_host, cert) => {
      if (certificateNames(cert).includes(want)) return undefined;
      return new PeerIdentityError(`certificate names ${quotedNames(cert, this.domain)}, expected ${want}`);
    };
  }

  /** TLS options for an outgoing connection (ws and https agents take the same). */
  private clientTLS(expect: PeerExpectation | undefined): Record<string, unknown> {
    const m = this.material;
    const tls = this.options.tls;
    if (!m || !tls) return {};
    const check = this.identityCheck(expect);
    return {
      ...(m.ca ? { ca: m.ca } : {}),
      cert: m.cert,
      key: m.key,
      minVersion: tls.minVersion,
      rejectUnauthorized: tls.verifyOutgoing,
      // Without a name to prove, the usual host name check applies.
      checkServerIdentity: check ?? defaultIdentityCheck,
    };
  }

  /** Options for a WebSocket to a peer that must prove to be a server of `expect.datacenter`. */
  websocketOptions(expect: PeerExpectation | undefined): Partial<WebSocketOptions> {
    return this.clientTLS(expect) as Partial<WebSocketOptions>;
  }

  /** fetch to a peer that must prove to be a server of `expect.datacenter`. */
  fetcher(expect: PeerExpectation | undefined): PeerFetch {
    return async (url, init) => {
      const undici = await loadUndici();
      return (await undici.fetch(url, { ...init, dispatcher: this.agent(undici, expect) })) as unknown as Response;
    };
  }

  private agent(undici: Undici, expect: PeerExpectation | undefined): Agent {
    const key = expect ? this.serverName(expect.datacenter) : '';
    let a = this.agents.get(key);
    if (!a) {
      a = new undici.Agent({ connect: this.clientTLS(expect), keepAliveTimeout: 4000, connections: 64 });
      this.agents.set(key, a);
    }
    return a;
  }

  /**
   * Whether an incoming connection is a server of `datacenter`: with TLS, its certificate
   * chains to the CA and names server.<datacenter>.<domain> (whatever verify_incoming says).
   * Without TLS there is no certificate to prove anything: `undefined` (the caller decides).
   */
  proveIncoming(req: IncomingMessage, datacenter: string): { ok: true } | { ok: false; reason: string } | undefined {
    if (!this.secure) return undefined;
    const socket = req.socket;
    if (!(socket instanceof TLSSocket)) return { ok: false, reason: 'not a TLS connection' };
    const cert = socket.getPeerCertificate();
    if (!cert || Object.keys(cert).length === 0) return { ok: false, reason: 'no client certificate: servers must present theirs' };
    if (!socket.authorized)
      return {
        ok: false,
        reason: `the client certificate is not signed by this server's CA (${String(socket.authorizationError ?? 'unknown error')})`,
      };
    const want = this.serverName(datacenter);
    if (!certificateNames(cert).includes(want))
      return { ok: false, reason: `certificate names ${quotedNames(cert, this.domain)}, expected ${want}` };
    return { ok: true };
  }

  /**
   * Whether a forwarded request's sender proves to be a server, so that the client it names may
   * be believed: with TLS, a certificate naming a server of the datacenter it claims (its own for
   * a server of this one); else, or too, a forward proof (forward-proof.ts) under this
   * datacenter's server key (servers of this datacenter only) or a key `keyOf` gives.
   */
  vouches(
    req: IncomingMessage,
    claim: { from: string; byServer: boolean },
    fields: ForwardFields,
    keyOf: (id: string) => string | Buffer | undefined,
  ): boolean {
    if (this.secure && this.proveIncoming(req, claim.byServer ? this.options.datacenter : claim.from)?.ok === true) return true;
    const header = req.headers[FORWARD_PROOF_HEADER];
    return checkForwardProof(
      Array.isArray(header) ? header[0] : header,
      fields,
      (id) => (id === SERVER_KEY_ID ? (claim.byServer ? this.options.serverKey : undefined) : keyOf(id)),
      this.nonces,
    );
  }

  /** The proof, under this datacenter's server key, of a request forwarded to another of its servers (undefined without a key). */
  serverForwardProof(fields: ForwardFields): string | undefined {
    return this.options.serverKey ? forwardProof(SERVER_KEY_ID, this.options.serverKey, fields) : undefined;
  }

  /** The etcd client's TLS credentials and auth (loaded and checked at start-up). */
  etcdClientOptions(): {
    credentials?: { rootCertificate?: Buffer; certChain?: Buffer; privateKey?: Buffer };
    auth?: { username: string; password: string };
  } {
    return this.etcd;
  }

  async close(): Promise<void> {
    const agents = [...this.agents.values()];
    this.agents.clear();
    await Promise.all(agents.map((a) => a.destroy().catch(() => undefined)));
  }
}

function etcdClientOptions(etcd: TransportOptions['etcd']): ReturnType<Transport['etcdClientOptions']> {
  if (!etcd) return {};
  const files =
    etcd.certFile !== undefined && etcd.keyFile !== undefined
      ? loadTlsFiles({ certFile: etcd.certFile, keyFile: etcd.keyFile, caFile: etcd.caFile }, 'etcd')
      : undefined;
  const ca = files?.ca ?? (etcd.caFile !== undefined ? loadCA(etcd.caFile, 'etcd_ca_file') : undefined);
  const credentials = {
    ...(ca ? { rootCertificate: Buffer.from(ca) } : {}),
    ...(files ? { certChain: Buffer.from(files.cert), privateKey: Buffer.from(files.key) } : {}),
  };
  return { ...(Object.keys(credentials).length > 0 ? { credentials } : {}), ...(etcd.auth ? { auth: etcd.auth } : {}) };
}

/** TLS verification failures, as Node names them: the peer's certificate did not chain to the CA. */
/** The API's TLS listener, as this module uses it. */
interface TlsListener {
  setSecureContext(options: SecureContextOptions): void;
  on(event: 'tlsClientError', listener: (err: Error & { code?: string }, socket: TLSSocket) => void): unknown;
}

const PLAIN_REQUEST_BODY = 'Client sent an HTTP request to an HTTPS server.\n';

/**
 * A plain HTTP request on the TLS port is told so, in plain HTTP, as Go's servers (Consul's)
 * answer it: a closed connection (curl's "empty reply", a client's UND_ERR_SOCKET) says nothing.
 * OpenSSL names the case (an HTTP method where a handshake record belongs); the answer goes on
 * the TCP connection under the failed TLS socket.
 */
function answerPlainRequest(err: Error & { code?: string }, socket: TLSSocket): void {
  if (err.code !== 'ERR_SSL_HTTP_REQUEST') return;
  const raw = (socket as unknown as { _parent?: import('node:net').Socket })._parent;
  if (!raw || raw.destroyed || !raw.writable) return;
  raw.on('error', () => raw.destroy());
  raw.end(
    `HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: ` +
      `${Buffer.byteLength(PLAIN_REQUEST_BODY)}\r\n\r\n${PLAIN_REQUEST_BODY}`,
  );
}

const UNTRUSTED = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_SIGNATURE_FAILURE',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
]);

/** Why a connection to a peer failed, in words an operator can act on. */
export function describeConnectError(err: Error & { code?: string }): string {
  if (err.code === 'ERR_PEER_IDENTITY') return `the peer did not prove its identity: ${err.message}`;
  if (err.code !== undefined && UNTRUSTED.has(err.code))
    return `the peer's certificate is not signed by tls_ca_file (${err.code}: ${err.message})`;
  return err.code && !err.message.includes(err.code) ? `${err.code}: ${err.message}` : err.message;
}
