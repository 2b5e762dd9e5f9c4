import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A daemon seen through a front that can answer 429 to every request, and offers no watch (as an
 * older daemon): the client's only way to confirm a token is a plain read once its TTL passes.
 */
export async function limitingFront(target: string): Promise<{ url: string; limit(on: boolean): void; close(): Promise<void> }> {
  let limited = false;
  const server = createServer((req, res) => {
    if (limited) {
      res.writeHead(429, { 'Retry-After': '5', 'Content-Type': 'text/plain' }).end('rate limit exceeded\n');
      return;
    }
    const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => k === 'x-service-token' || k === 'accept')) as Record<
      string,
      string
    >;
    void fetch(`${target}${req.url}`, { method: req.method ?? 'GET', headers }).then(
      async (r) => {
        const out: Record<string, string> = {};
        r.headers.forEach((v, k) => {
          if (k.startsWith('x-') || k === 'content-type' || k === 'retry-after') out[k] = v;
        });
        res.writeHead(r.status, out).end(Buffer.from(await r.arrayBuffer()));
      },
      () => res.writeHead(502).end(),
    );
  });
  server.on('upgrade', (_req, socket) => {
    socket.on('error', () => undefined);
    socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    limit: (on) => (limited = on),
    close: () => new Promise((r) => server.close(() => r())),
  };
}
