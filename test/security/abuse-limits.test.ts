import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type TestDaemon, apiFor, startTestDaemon, waitFor } from '../helpers/test-daemon.js';

/** Opens a raw connection and writes `text`; resolves with everything the server sent until it closed. */
function rawSocket(url: string, text: string) {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  let received = '';
  socket.on('data', (b) => (received += b.toString()));
  socket.on('error', () => undefined);
  const closed = new Promise<string>((resolve) => socket.once('close', () => resolve(received)));
  socket.write(text);
  return { socket, closed, isClosed: () => socket.destroyed || socket.readyState === 'closed' };
}

describe('blocking reads check the caller before they wait', () => {
  let d: TestDaemon | undefined;
  afterEach(async () => {
    await d?.close();
    d = undefined;
  });

  it('answers a bogus token at once, even with ?index and wait=10m, and holds no slot', async () => {
    // A thousand requests at once from one address: past the per-address connection cap (tested on its own), lifted here.
    d = await startTestDaemon({ config: { http_max_conns_per_client: 0 } });
    const index = Number((await d.api('GET', '/v1/acl/tokens')).headers.get('x-service-index'));
    const started = Date.now();
    const results = await Promise.all(
      Array.from({ length: 1000 }, (_, i) =>
        apiFor(d!.url, crypto.randomUUID())('GET', `/v1/acl/${['tokens', 'policies', 'roles'][i % 3]}?index=${index}&wait=10m`),
      ),
    );
    // Refused, each at once: ACL not found, and past the address's budget of unknown secrets (a burst of 100), 429.
    expect(results.filter((r) => r.status === 403).length).toBeGreaterThanOrEqual(100);
    for (const r of results)
      expect([
        [403, 'ACL_NOT_FOUND'],
        [429, 'RATE_LIMITED'],
      ]).toContainEqual([r.status, r.body.code]);
    // Not a timing assertion on performance: the requests must not have waited at all (wait was 10 minutes).
    expect(Date.now() - started).toBeLessThan(60_000);
    expect(d.daemon.metrics.blockingInFlight()).toBe(0);
  });

  it('answers a token without acl:read at once, and the anonymous token likewise', async () => {
    d = await startTestDaemon();
    const weak = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'no acl rights' } })).body.SecretID as string;
    const index = Number((await d.api('GET', '/v1/acl/policies')).headers.get('x-service-index'));
    for (const token of [weak, undefined]) {
      const res = await apiFor(d.url, token)('GET', `/v1/acl/policies?index=${index}&wait=10m`);
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('PERMISSION_DENIED');
    }
    expect((await apiFor(d.url, crypto.randomUUID())('GET', `/v1/acl/token/self?index=${index}&wait=10m`)).status).toBe(403);
  });

  it('caps blocking queries per client and in total with 429, and frees the slots when they end', async () => {
    d = await startTestDaemon({ config: { max_blocking_queries_per_client: 3, max_blocking_queries: 1000 } });
    const index = Number((await d.api('GET', '/v1/acl/roles')).headers.get('x-service-index'));
    const held = Array.from({ length: 3 }, () => d!.api('GET', `/v1/acl/roles?index=${index}&wait=1m`));
    await waitFor(() => d!.daemon.metrics.blockingInFlight() === 3);
    const refused = await d.api('GET', `/v1/acl/roles?index=${index}&wait=1m`);
    expect(refused.status).toBe(429);
    expect(refused.body.code).toBe('RATE_LIMITED');
    expect(refused.body.message).toBe(
      'Too many blocking queries from 127.0.0.1: at most 3 may wait at once; retry later or without ?index',
    );
    expect(refused.headers.get('retry-after')).toBe('5');
    // Reads that do not block are not capped.
    expect((await d.api('GET', '/v1/acl/roles')).status).toBe(200);
    await d.api('PUT', '/v1/acl/role', { body: { Name: 'wakes-them' } });
    expect((await Promise.all(held)).map((r) => r.status)).toEqual([200, 200, 200]);
    expect(d.daemon.metrics.blockingInFlight()).toBe(0);
    // The client's slots are free again.
    const next = Number((await d.api('GET', '/v1/acl/roles')).headers.get('x-service-index'));
    const again = d.api('GET', `/v1/acl/roles?index=${next}&wait=1m`);
    await waitFor(() => d!.daemon.metrics.blockingInFlight() === 1);
    await d.api('PUT', '/v1/acl/role', { body: { Name: 'wakes-it-too' } });
    expect((await again).status).toBe(200);
  });

  it('caps blocking queries in total', async () => {
    d = await startTestDaemon({ config: { max_blocking_queries_per_client: 100, max_blocking_queries: 2 } });
    const index = Number((await d.api('GET', '/v1/acl/roles')).headers.get('x-service-index'));
    const held = [d.api('GET', `/v1/acl/roles?index=${index}&wait=1m`), d.api('GET', `/v1/acl/roles?ns=default&index=${index}&wait=1m`)];
    await waitFor(() => d!.daemon.metrics.blockingInFlight() === 2);
    const refused = await d.api('GET', `/v1/acl/roles?partition=default&index=${index}&wait=1m`);
    expect(refused.status).toBe(429);
    expect(refused.body.message).toBe('Too many blocking queries: at most 2 may wait at once; retry later or without ?index');
    await d.daemon.close();
    await Promise.all(held);
  });
});

describe('slow clients are timed out', () => {
  let d: TestDaemon | undefined;
  afterEach(async () => {
    await d?.close();
    d = undefined;
  });

  it('closes 200 sockets that sent headers and one byte of a 100-byte body, and keeps serving', async () => {
    // Two hundred slow sockets from one address, and a read beside them: over the per-address connection cap, lifted here.
    d = await startTestDaemon({ config: { http_request_timeout: '1s', http_header_timeout: '500ms', http_max_conns_per_client: 0 } });
    const sockets = Array.from({ length: 200 }, () =>
      rawSocket(
        d!.url,
        `PUT /v1/acl/policy HTTP/1.1\r\nHost: localhost\r\nX-Service-Token: ${d!.management}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{`,
      ),
    );
    expect((await d.api('GET', '/v1/acl/tokens')).status).toBe(200);
    const answers = await Promise.all(sockets.map((s) => s.closed));
    expect(new Set(answers.map((a) => a.split('\r\n')[0]))).toEqual(new Set(['HTTP/1.1 408 Request Timeout']));
    expect((await d.api('GET', '/v1/acl/policies')).body.map((p: { Name: string }) => p.Name)).not.toContain(undefined);
  });

  it('closes a socket that never finishes its headers', async () => {
    d = await startTestDaemon({ config: { http_request_timeout: '2s', http_header_timeout: '500ms' } });
    const s = rawSocket(d.url, 'GET /v1/acl/tokens HTTP/1.1\r\nHost: localhost\r\nX-Slow: ');
    const answer = await s.closed;
    expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 408 Request Timeout');
  });

  it('lets a blocking query wait past the request timeout, bounded by its own wait', async () => {
    d = await startTestDaemon({ config: { http_request_timeout: '500ms', http_header_timeout: '200ms' } });
    const index = Number((await d.api('GET', '/v1/acl/roles')).headers.get('x-service-index'));
    const started = Date.now();
    const res = await d.api('GET', `/v1/acl/roles?index=${index}&wait=2s`);
    expect(res.status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(2000);
  });
});
