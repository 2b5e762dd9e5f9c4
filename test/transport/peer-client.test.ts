import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PeerClient } from '../../src/transport/peer-client.js';
import type { PeerFetch } from '../../src/transport/transport.js';
import { freePort } from '../../src/testing/etcd.js';

/** Two servers of a datacenter as a peer client sees them: one that fails while answering, one that answers. */
describe('PeerClient with several addresses', () => {
  let failing: Server;
  let answering: Server;
  const seen = { failing: 0, answering: 0 };
  const url = (s: Server) => `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
  const listen = (s: Server) => new Promise<void>((resolve) => s.listen(0, '127.0.0.1', () => resolve()));

  beforeAll(async () => {
    // Takes the request (it may have acted on it), then the connection breaks before an answer.
    failing = createServer((req, res) => {
      seen.failing++;
      req.resume();
      req.on('end', () => res.socket?.destroy());
    });
    answering = createServer((req, res) => {
      seen.answering++;
      req.resume();
      req.on('end', () => res.end('{}'));
    });
    await Promise.all([listen(failing), listen(answering)]);
  });
  afterAll(() => {
    failing.close();
    answering.close();
  });

  const client = (...urls: string[]) => new PeerClient(urls.join(','), 'dc1', fetch as unknown as PeerFetch);

  it('never sends a write on to another server once one may have received it', async () => {
    seen.failing = seen.answering = 0;
    await expect(client(url(failing), url(answering)).request('PUT', '/v1/acl/token', {}, '{}', 3000)).rejects.toThrow(
      /cannot reach datacenter dc1/,
    );
    expect(seen).toEqual({ failing: 1, answering: 0 });
  });

  it('asks the next server for a read, and for a write only when the first refused the connection', async () => {
    seen.failing = seen.answering = 0;
    expect((await client(url(failing), url(answering)).request('GET', '/v1/acl/tokens', {}, undefined, 3000)).status).toBe(200);
    expect(seen).toEqual({ failing: 1, answering: 1 });
    const closed = `http://127.0.0.1:${await freePort()}`;
    expect((await client(closed, url(answering)).request('PUT', '/v1/acl/token', {}, '{}', 3000)).status).toBe(200);
    expect(seen).toEqual({ failing: 1, answering: 2 });
  });

  it('asks the server it prefers first (a secondary: the leader it replicates from), and the list when that one is not there', async () => {
    seen.failing = seen.answering = 0;
    let preferred: string | undefined = url(answering);
    const c = new PeerClient([url(failing), url(answering)].join(','), 'dc1', fetch as unknown as PeerFetch, () => preferred);
    expect((await c.request('PUT', '/v1/acl/token', {}, '{}', 3000)).status).toBe(200);
    expect((await c.request('PUT', '/v1/acl/token', {}, '{}', 3000)).status).toBe(200);
    expect(seen).toEqual({ failing: 0, answering: 2 });
    // The preferred one is gone (a refused connection: the write never left): the list, never the same server twice.
    preferred = `http://127.0.0.1:${await freePort()}`;
    const listed = new PeerClient(url(answering), 'dc1', fetch as unknown as PeerFetch, () => preferred);
    expect((await listed.request('PUT', '/v1/acl/token', {}, '{}', 3000)).status).toBe(200);
    preferred = url(answering);
    expect((await listed.request('GET', '/v1/acl/tokens', {}, undefined, 3000)).status).toBe(200);
    expect(seen).toEqual({ failing: 0, answering: 4 });
  });
});
