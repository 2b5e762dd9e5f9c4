import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';

/** Longest answer accepted from an identity provider (JWKS, discovery, TokenReview). */
const MAX_BYTES = 1024 * 1024;

/** Default absolute deadline of one request to an identity provider, ms. */
export const FETCH_DEADLINE_MS = 5000;

/**
 * Why a request to an identity provider failed, in our words only: the remote end's text
 * is never repeated to a caller (an auth method may point at an internal service; its
 * answers must not be read back through login errors).
 */
export class ProviderError extends Error {
  override name = 'ProviderError';
}

/**
 * A URL as it may be shown to a caller without acl:write, or in an error: no user name,
 * password, query string or fragment (they carry credentials such as `?api_key=`).
 */
export function redactURL(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    u.search = '';
    u.hash = '';
    return u.toString();
  } catch {
    return '(an unparsable URL)';
  }
}

/**
 * One JSON request to an identity provider, bounded in size and by an absolute deadline
 * (whatever the server trickles). `ca` (PEM) is the only CA trusted for https when given,
 * as Consul's JWKSCACert, OIDCDiscoveryCACert and a kubernetes method's CACert are.
 */
export function requestJSON(
  url: string,
  options: { method?: 'GET' | 'POST'; ca?: string; headers?: Record<string, string>; body?: unknown; deadlineMs?: number } = {},
): Promise<{ status: number; body: unknown }> {
  const target = new URL(url);
  const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
  const payload = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body));
  const deadline = options.deadlineMs ?? FETCH_DEADLINE_MS;
  return new Promise((resolve, reject) => {
    const req = send(
      target,
      {
        method: options.method ?? 'GET',
        headers: {
          Accept: 'application/json',
          ...(payload ? { 'Content-Type': 'application/json', 'Content-Length': String(payload.length) } : {}),
          ...options.headers,
        },
        ...(target.protocol === 'https:' && options.ca ? { ca: options.ca } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_BYTES) {
            req.destroy(new ProviderError(`it answered more than ${MAX_BYTES} bytes`));
            return;
          }
          chunks.push(c);
        });
        res.on('end', () => {
          clearTimeout(timer);
          const text = Buffer.concat(chunks).toString('utf8');
          try {
            resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined });
          } catch {
            reject(new ProviderError(`it answered HTTP ${res.statusCode ?? 0} with something that is not JSON`));
          }
        });
        res.on('error', (err) => reject(describe(err)));
      },
    );
    const timer = setTimeout(() => req.destroy(new ProviderError(`no complete answer within ${deadline} ms`)), deadline);
    timer.unref();
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(describe(err));
    });
    req.end(payload);
  });
}

/** A connection failure in general words (no addresses, no remote text). */
function describe(err: Error): ProviderError {
  if (err instanceof ProviderError) return err;
  const code = (err as NodeJS.ErrnoException).code ?? '';
  if (code === 'ECONNREFUSED') return new ProviderError('the connection was refused');
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return new ProviderError('its host name does not resolve');
  if (code === 'ECONNRESET' || code === 'EPIPE') return new ProviderError('the connection was reset');
  if (code.startsWith('ERR_TLS') || /CERT|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code))
    return new ProviderError(`its certificate is not trusted (${code})`);
  return new ProviderError(code ? `the request failed (${code})` : 'the request failed');
}
