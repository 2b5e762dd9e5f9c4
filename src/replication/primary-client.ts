import { WatchwordError } from '../domain/errors.js';

export interface RelayedResponse {
  status: number;
  headers: Headers;
  text: string;
}

/**
 * HTTP calls from a secondary to its primary (or from any daemon to another
 * datacenter's). Every call is bounded in time; an unreachable peer is a
 * PRIMARY_UNAVAILABLE error within the deadline, never a hang.
 */
export class PeerClient {
  constructor(
    private readonly baseURL: string,
    private readonly datacenter: string,
  ) {}

  async request(method: string, pathAndQuery: string, headers: Record<string, string>, body: string | Buffer | undefined, timeoutMs: number): Promise<RelayedResponse> {
    try {
      const res = await fetch(new URL(pathAndQuery, this.baseURL), {
        method,
        headers,
        ...(body !== undefined && method !== 'GET' && method !== 'HEAD' ? { body } : {}),
        signal: AbortSignal.timeout(timeoutMs),
      });
      return { status: res.status, headers: res.headers, text: await res.text() };
    } catch (err) {
      const e = err as Error & { cause?: { code?: string } };
      const why = e.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : (e.cause?.code ?? e.message);
      throw new WatchwordError('PRIMARY_UNAVAILABLE', `cannot reach datacenter ${this.datacenter} at ${this.baseURL}: ${why}`, { cause: err });
    }
  }

  /** The primary's current durable index. */
  async currentIndex(timeoutMs: number): Promise<number> {
    const res = await this.request('GET', '/v1/internal/index', {}, undefined, timeoutMs);
    if (res.status !== 200) throw new WatchwordError('PRIMARY_UNAVAILABLE', `the primary answered ${res.status} for its index`);
    return Number((JSON.parse(res.text) as { Index: number }).Index);
  }

  /** Whether the primary knows a secret, and the index by which it did. */
  async lookupSecret(secret: string, timeoutMs: number): Promise<{ found: boolean; index: number }> {
    const res = await this.request('GET', '/v1/acl/token/self', { 'X-Service-Token': secret }, undefined, timeoutMs);
    return { found: res.status === 200, index: Number(res.headers.get('x-service-index') ?? 0) };
  }
}
