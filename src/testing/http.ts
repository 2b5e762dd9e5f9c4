import { Agent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';

/**
 * The harness's one HTTP call (the fault drivers' load, the tests' requests): node:http with
 * kept-alive connections. fetch spent three to four times the CPU per request here, and a
 * load generator sharing two cores with the servers it measures takes that from them.
 * Idle connections close before the server's keep-alive timeout (node honours its hint).
 */
export interface HttpAnswer {
  status: number;
  headers: Headers;
  text: string;
}

const agent = new Agent({ keepAlive: true });
const tlsAgent = new HttpsAgent({ keepAlive: true });

/** One request; rejects when no answer came (connection refused or cut, timeout). */
export function httpCall(
  url: string,
  options: { method: string; headers?: Record<string, string>; body?: string; timeoutMs?: number },
): Promise<HttpAnswer> {
  const { method, headers = {}, body, timeoutMs = 8000 } = options;
  const tls = url.startsWith('https:');
  return new Promise<HttpAnswer>((resolve, reject) => {
    const sent: Record<string, string | number> = { ...headers };
    if (body !== undefined) sent['content-length'] = Buffer.byteLength(body);
    const req = (tls ? httpsRequest : httpRequest)(url, { method, headers: sent, agent: tls ? tlsAgent : agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        clearTimeout(timer);
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) {
          if (Array.isArray(v)) for (const x of v) h.append(k, x);
          else if (v !== undefined) h.set(k, v);
        }
        resolve({ status: res.statusCode ?? 0, headers: h, text: Buffer.concat(chunks).toString('utf8') });
      });
    });
    const timer = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.end(body);
  });
}
