import { WatchwordError, isWatchwordError } from '../domain/errors.js';
import type { PeerFetch } from './transport.js';

export interface RelayedResponse {
  status: number;
  headers: Headers;
  text: string;
}

/** Errors of the connect phase: the request never reached the peer, so another may be asked. */
const NOT_SENT = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'ERR_PEER_IDENTITY',
  'UND_ERR_CONNECT_TIMEOUT',
]);

const sameOrigin = (a: string, b: string): boolean => {
  try {
    return new URL(a).origin === new URL(b).origin;
  } catch {
    return false;
  }
};

/**
 * HTTP calls from a secondary to its primary (or from any daemon to another
 * datacenter's, or from a follower to its leader). Connections are the transport's, which
 * checks that the peer proves to be a server of `datacenter` before anything is sent.
 * Every call is bounded in time; an unreachable peer is a PRIMARY_UNAVAILABLE error within
 * the deadline, never a hang.
 */
export class PeerClient {
  private readonly urls: string[];
  /** The address that answered last; tried first. */
  private current = 0;

  /**
   * `baseURL`: one URL, or several comma-separated (every server of a datacenter), tried in turn when one cannot be reached.
   * `preferred`: a server to try first when it names one (a secondary's: the primary's leader it replicates from, so a
   * follower's restart there never cuts a write short).
   */
  constructor(
    baseURL: string,
    /** The datacenter its servers belong to. */
    readonly datacenter: string,
    private readonly fetch: PeerFetch,
    private readonly preferred?: () => string | undefined,
  ) {
    this.urls = baseURL
      .split(',')
      .map((u) => u.trim())
      .filter(Boolean);
  }

  /**
   * One request, to the first server that answers. A streamed body (a snapshot upload) can
   * be sent once only: it goes to the first address, and an error of the stream itself
   * (its size limit) is the answer.
   */
  async request(
    method: string,
    pathAndQuery: string,
    headers: Record<string, string>,
    body: string | Buffer | NodeJS.ReadableStream | undefined,
    timeoutMs: number,
  ): Promise<RelayedResponse> {
    const streamed = body !== undefined && typeof body !== 'string' && !Buffer.isBuffer(body);
    const deadline = Date.now() + timeoutMs;
    let lastError: unknown;
    const first = this.preferred?.();
    const order = this.urls.map((_, tried) => (this.current + tried) % this.urls.length);
    for (let tried = 0; tried < order.length + (first ? 1 : 0); tried++) {
      // The preferred server first, then the list from the one that answered last (the preferred one not twice).
      const i = first ? (tried === 0 ? -1 : (order[tried - 1] as number)) : (order[tried] as number);
      const base = i === -1 ? (first as string) : (this.urls[i] as string);
      if (first && i !== -1 && sameOrigin(base, first)) continue;
      const left = deadline - Date.now();
      if (left <= 0) break;
      try {
        const res = await this.fetch(new URL(pathAndQuery, base), {
          method,
          headers,
          ...(body !== undefined && method !== 'GET' && method !== 'HEAD'
            ? { body: body as string, ...(streamed ? { duplex: 'half' as const } : {}) }
            : {}),
          signal: AbortSignal.timeout(left),
        });
        if (i !== -1) this.current = i;
        return { status: res.status, headers: res.headers, text: await res.text() };
      } catch (err) {
        const e = err as Error & { cause?: { code?: string; message?: string } };
        if (isWatchwordError(e.cause)) throw e.cause;
        // A peer that failed its identity check is named with the reason (the certificate's names).
        const why =
          e.name === 'TimeoutError'
            ? `no answer within ${timeoutMs} ms`
            : e.cause?.code === 'ERR_PEER_IDENTITY'
              ? `${e.cause.message ?? ''}`
              : (e.cause?.code ?? e.message);
        lastError = new WatchwordError('PRIMARY_UNAVAILABLE', `cannot reach datacenter ${this.datacenter} at ${base}: ${why}`, {
          cause: err,
        });
        // A timeout used the whole budget; a refused connection leaves time for the next server.
        if (e.name === 'TimeoutError' || streamed) break;
        // A write may have been applied by a server that failed while answering (a reset, a kill):
        // it is sent to another only when it surely never left (the connection was not made).
        if (method !== 'GET' && method !== 'HEAD' && !NOT_SENT.has(e.cause?.code ?? '')) break;
      }
    }
    throw lastError ?? new WatchwordError('PRIMARY_UNAVAILABLE', `cannot reach datacenter ${this.datacenter}: no time left`);
  }

  /** The primary's current durable index. */
  async currentIndex(timeoutMs: number): Promise<number> {
    const res = await this.request('GET', '/v1/internal/index', {}, undefined, timeoutMs);
    if (res.status !== 200) throw new WatchwordError('PRIMARY_UNAVAILABLE', `the primary answered ${res.status} for its index`);
    return Number((JSON.parse(res.text) as { Index: number }).Index);
  }

  /** Whether a token with this AccessorID exists there (`token` needs acl:read). */
  async accessorExists(accessorID: string, token: string, timeoutMs: number): Promise<boolean> {
    const res = await this.request(
      'GET',
      `/v1/acl/token/${encodeURIComponent(accessorID)}`,
      { 'X-Service-Token': token },
      undefined,
      timeoutMs,
    );
    if (res.status === 200) return true;
    if (res.status === 404) return false;
    throw new WatchwordError('PRIMARY_UNAVAILABLE', `datacenter ${this.datacenter} answered ${res.status} when asked about a token`);
  }

  /** Whether the primary knows a secret, and the index by which it did. */
  async lookupSecret(secret: string, timeoutMs: number): Promise<{ found: boolean; index: number }> {
    const res = await this.request('GET', '/v1/acl/token/self', { 'X-Service-Token': secret }, undefined, timeoutMs);
    return { found: res.status === 200, index: Number(res.headers.get('x-service-index') ?? 0) };
  }
}
