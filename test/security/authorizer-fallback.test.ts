import { type Server, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Authorizer } from '../../src/client/authorizer.js';
import { type TestDaemon, startTestDaemon, waitFor } from '../helpers/test-daemon.js';

// Seen from outside in the fifth review: behind an HTTP proxy that does not carry WebSocket
// upgrades, an enforcing client silently lost its watch and a deleted token was allowed until
// tokenTTL (30 s by default). It now keeps its most used tokens current by blocking reads,
// and says so once.

interface Token {
  AccessorID: string;
  SecretID: string;
}

/** A proxy that relays plain HTTP to `target` and answers every WebSocket upgrade 403, as some proxies do. */
async function upgradeRefusingProxy(target: string): Promise<{ url: string; server: Server }> {
  const t = new URL(target);
  const server = createServer((req, res) => {
    const upstream = request(
      { host: t.hostname, port: Number(t.port), method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  });
  server.on('upgrade', (_req, socket) => {
    socket.on('error', () => undefined);
    socket.end(
      'HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 30\r\nConnection: close\r\n\r\nthis proxy carries no upgrades',
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe('an enforcing client whose watch cannot be had', () => {
  let d: TestDaemon;
  let proxy: { url: string; server: Server };
  beforeAll(async () => {
    d = await startTestDaemon();
    proxy = await upgradeRefusingProxy(d.url);
  });
  afterAll(async () => {
    proxy?.server.closeAllConnections();
    await new Promise((r) => proxy?.server.close(r));
    await d?.close();
  });

  const token = async () => (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ Name: 'global-management' }] } })).body as Token;

  it.each([
    ['behind a proxy that refuses WebSocket upgrades', true],
    ['given no token of its own for the watch', false],
  ])('%s: sees a deleted token within 1 s (not after tokenTTL), and says once why', async (_, withToken) => {
    const warnings: string[] = [];
    const authz = new Authorizer({
      client: { address: proxy.url },
      ...(withToken ? { token: d.management } : {}),
      onWarning: (m) => warnings.push(m),
    });
    try {
      const t = await token();
      expect(await authz.allowed(t.SecretID, 'service', 'web', 'write')).toBe(true);
      await waitFor(() => authz.stats().blockingReads >= 1, 5_000, 20, 'a blocking read of the token');
      expect(authz.stats().watch).toBe(withToken ? 'unavailable' : 'off');
      expect((await d.api('DELETE', `/v1/acl/token/${t.AccessorID}`)).body).toBe(true);
      const deleted = Date.now();
      await waitFor(() => authz.allowed(t.SecretID, 'service', 'web', 'write') === false, 1_000, 5, 'the delete seen');
      process.stdout.write(
        `without a watch (${withToken ? 'refused' : 'no token'}): a deleted token denied after ${Date.now() - deleted} ms\n`,
      );
      expect(warnings.length).toBe(1);
      expect(warnings[0]).toMatch(/no watch .*blocking read/);
    } finally {
      authz.close();
    }
  });
});
