import { randomBytes } from 'node:crypto';
import { type IncomingHttpHeaders, createServer, request } from 'node:http';
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, etcdBinary, startCluster } from '../../src/testing/index.js';
import { waitFor } from '../helpers/test-daemon.js';
import { REPLICATION_PATH } from '../../src/replication/protocol.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A server's answer to a replication upgrade (a follower refuses with 421, naming its leader or not). */
function upgradeAnswer(base: string): Promise<{ status: number; leader: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${REPLICATION_PATH}`, {
      headers: {
        Connection: 'Upgrade',
        Upgrade: 'websocket',
        'Sec-WebSocket-Version': '13',
        'Sec-WebSocket-Key': randomBytes(16).toString('base64'),
      },
      timeout: 5_000,
    });
    req.on('response', (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, leader: res.headers['x-service-leader'] as string | undefined, body }));
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 101, leader: undefined, body: '' });
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * Third security review, finding 3: with write access to etcd (no TLS between datacenters),
 * a leader key and a registration planted on the writer's own lease made dc1's followers name
 * an impostor (421's X-Service-Leader, /v1/status/leader), and dc2 followed the redirect with
 * its replication token. A server now names only a leader its own stream has proven, and a
 * secondary without TLS follows a redirect only to a configured primary address.
 */
describe.skipIf(!etcdBinary())('a planted leader key cannot draw a secondary to an impostor', () => {
  let cluster: Cluster;
  const seen: Array<{ url: string; headers: IncomingHttpHeaders }> = [];
  const impostor = createServer((req, res) => {
    seen.push({ url: req.url ?? '', headers: req.headers });
    res.writeHead(200, { 'content-type': 'application/json' }).end('"ok"');
  });
  impostor.on('upgrade', (req, socket) => {
    seen.push({ url: req.url ?? '', headers: req.headers });
    socket.destroy();
  });
  let address = '';

  beforeAll(async () => {
    await new Promise<void>((r) => impostor.listen(0, '127.0.0.1', r));
    address = `127.0.0.1:${(impostor.address() as { port: number }).port}`;
    cluster = await startCluster({ datacenters: { dc1: { servers: 2 }, dc2: { servers: 1 } } });
    await cluster.waitForReplication();
  }, 90_000);
  afterAll(async () => {
    await cluster?.stop();
    await new Promise<void>((r) => impostor.close(() => r()));
  }, 60_000);

  it('no server names the impostor, and dc2 sends it nothing', async () => {
    const dc1 = cluster.get('dc1').servers;
    const etcd = new Etcd3({ hosts: cluster.coordinator?.url as string });
    const lease = etcd.lease(60);
    lease.on('lost', () => undefined);
    try {
      // The impostor registers and takes the leader key on its own lease, as a real leader does.
      await lease.put('/watchword/dc1/servers/impostor').value(JSON.stringify({ name: 'impostor', address }));
      await lease.put('/watchword/dc1/leader').value(JSON.stringify({ name: 'impostor', address }));
      // dc2 has to find the primary's leader again: its leader stepped down when the key moved.
      await cluster.get('dc2').restart();
      const until = Date.now() + 8_000;
      while (Date.now() < until) {
        for (const s of dc1) {
          const leader = (await (await fetch(`${s.url}/v1/status/leader`)).json()) as string;
          expect(leader).not.toBe(address);
          const refusal = await upgradeAnswer(s.url);
          expect(refusal.leader ?? '').not.toBe(address);
          expect(refusal.body).not.toContain(address);
          const servers = (await (
            await fetch(`${s.url}/v1/operator/servers`, { headers: { 'X-Service-Token': cluster.managementToken } })
          ).json()) as { Leader: string | null };
          expect(servers.Leader).not.toBe(address);
        }
        await sleep(250);
      }
    } finally {
      await lease.revoke().catch(() => undefined);
      etcd.close();
    }
    // dc1's servers tried the impostor's stream (a challenge it cannot answer: nothing secret);
    // no replication attempt and no token reached it.
    const secret = (h: IncomingHttpHeaders) => ['x-service-token', 'x-consul-token', 'authorization'].some((k) => h[k] !== undefined);
    expect(seen.filter((r) => r.url.startsWith(REPLICATION_PATH) || secret(r.headers)).map((r) => r.url)).toEqual([]);
    expect(seen.every((r) => r.url.startsWith('/v1/internal/servers'))).toBe(true);
    // With the planted key gone, dc1 elects a real leader and dc2 replicates again.
    let probe: { AccessorID: string } | undefined;
    await waitFor(
      async () => {
        probe = await cluster.primary.client.tokens.create({ Description: 'after the impostor' }).catch(() => undefined);
        return probe !== undefined;
      },
      30_000,
      250,
    );
    await cluster.waitForReplication();
    expect((await cluster.get('dc2').client.tokens.read(probe?.AccessorID as string)).value.Description).toBe('after the impostor');
  }, 90_000);
});
