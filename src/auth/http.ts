import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';

/** Longest answer accepted from an identity provider (JWKS, discovery, TokenReview). */
const MAX_BYTES = 1024 * 1024;

/**
 * One JSON request to an identity provider, bounded in time and size. `ca` (PEM) is the
 * only CA trusted for https when given, as Consul's JWKSCACert, OIDCDiscoveryCACert and
 * a kubernetes method's CACert are.
 */
export function requestJSON(
  url: string,
  options: { method?: 'GET' | 'POST'; ca?: string; headers?: Record<string, string>; body?: unknown; timeoutMs?: number } = {},
): Promise<{ status: number; body: unknown }> {
  const target = new URL(url);
  const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
  const payload = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body));
  return new Promise((resolve, reject) => {
    const req = send(
      target,
      {
        method: options.method ?? 'GET',
        headers: { Accept: 'application/json', ...(payload ? { 'Content-Type': 'application/json', 'Content-Length': String(payload.length) } : {}), ...options.headers },
        ...(target.protocol === 'https:' && options.ca ? { ca: options.ca } : {}),
        timeout: options.timeoutMs ?? 5000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_BYTES) {
            req.destroy(new Error(`answer larger than ${MAX_BYTES} bytes`));
            return;
          }
          chunks.push(c);
        });
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          try {
            resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined });
          } catch {
            reject(new Error(`${target.host} answered ${res.statusCode} with something that is not JSON`));
          }
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer from ${target.host} within ${options.timeoutMs ?? 5000} ms`)));
    req.on('error', reject);
    req.end(payload);
  });
}
