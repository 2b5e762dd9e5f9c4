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

/** An answer with its JSON body parsed (the text itself when it is not JSON; undefined when empty). */
export interface JsonAnswer {
  status: number;
  headers: Headers;
  body: unknown;
}

/**
 * One call to a server's API: JSON body in, JSON answer out, `headers` (the token) added. The
 * drivers and the tests' cluster helpers all go through it. Rejects when no answer came.
 */
export async function jsonCall(
  baseUrl: string,
  headers: Record<string, string>,
  method: string,
  path: string,
  body?: unknown,
  timeoutMs = 8000,
): Promise<JsonAnswer> {
  const res = await httpCall(baseUrl + path, {
    method,
    headers: { ...headers, 'Content-Type': 'application/json', Accept: 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    timeoutMs,
  });
  let parsed: unknown;
  try {
    parsed = res.text ? JSON.parse(res.text) : undefined;
  } catch {
    parsed = res.text;
  }
  return { status: res.status, headers: res.headers, body: parsed };
}
