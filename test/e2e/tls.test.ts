import { X509Certificate } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import net from 'node:net';
import { join } from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, type CoordinatorHandle, type DatacenterHandle, etcdBinary, startCluster } from '../../src/testing/index.js';
import { createCA, createCert } from '../../src/transport/certs.js';
import { type AgentProcess, spawnAgent } from '../helpers/process.js';
import { tempDir } from '../helpers/temp-dir.js';
import { until } from '../helpers/test-daemon.js';

// TLS on every channel (docs/tls.md, "TLS"), with real processes and certificates made here: a
// primary of three servers electing through etcd over TLS with client certificates, two
// secondaries, and two daemons that must not be trusted (a certificate of the wrong
// datacenter, a CA that did not sign the primary).

const etcd = etcdBinary();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What a plaintext HTTP request to a port gets back within a second. */
function plaintext(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let got = '';
    socket.on('connect', () => socket.write('GET /v1/status/leader HTTP/1.1\r\nHost: x\r\n\r\n'));
    socket.on('data', (b: Buffer) => (got += b.toString('latin1')));
    const done = () => resolve(got);
    socket.on('close', done);
    socket.on('error', done);
    setTimeout(() => {
      socket.destroy();
      done();
    }, 1000);
  });
}

/** The certificate a TLS server presents to a new connection. */
function presented(port: number, ca: string): Promise<X509Certificate> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host: '127.0.0.1', port, ca, checkServerIdentity: () => undefined }, () => {
      const raw = s.getPeerX509Certificate();
      s.end();
      if (raw) resolve(raw);
      else reject(new Error('no certificate'));
    });
    s.on('error', reject);
  });
}

const portOf = (url: string) => Number(new URL(url).port);

describe.skipIf(!etcd)('TLS on every channel and servers that prove who they are', () => {
  let cluster: Cluster;
  let token: string;
  const extra: AgentProcess[] = [];
  const dirs: Array<{ path: string; remove: () => Promise<void> }> = [];

  const call = async (server: DatacenterHandle, method: string, path: string, body?: unknown) => {
    const res = await cluster.fetch(`${server.url}${path}`, {
      method,
      headers: { 'X-Service-Token': token, 'Content-Type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(8000),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
  };

  beforeAll(async () => {
    cluster = await startCluster({
      datacenters: { dc1: { servers: 3 }, dc2: { servers: 1 }, dc3: { servers: 1 } },
      tls: true,
      logLevel: 'warn',
    });
    token = cluster.managementToken;
    await cluster.waitForReplication(30_000);
  }, 120_000);

  afterAll(async () => {
    for (const p of extra) await p.stop().catch(() => undefined);
    await cluster?.stop();
    for (const d of dirs) await d.remove();
  }, 60_000);

  it('replicates, forwards and fails over over TLS only; a plaintext connection to any port it opened is served nothing', async () => {
    const dc1 = cluster.get('dc1');
    const [dc2, dc3] = [cluster.get('dc2'), cluster.get('dc3')];
    for (const s of [...dc1.servers, dc2, dc3]) expect(s.url).toMatch(/^https:\/\//);
    const leader = await dc1.leader();
    const follower = dc1.servers.find((s) => s !== leader) as DatacenterHandle;
    // Written at the leader: replicated to both secondaries.
    const policy = await call(leader, 'PUT', '/v1/acl/policy', { Name: 'over-tls', Rules: 'acl = "read"' });
    expect(policy.status).toBe(200);
    // A global write at dc2 is forwarded to the primary, one through a dc1 follower to its leader.
    const viaDc2 = await call(dc2, 'PUT', '/v1/acl/token', { Description: 'via dc2', Policies: [{ Name: 'over-tls' }] });
    expect(viaDc2.status).toBe(200);
    const viaFollower = await call(follower, 'PUT', '/v1/acl/token', { Description: 'via a follower' });
    expect(viaFollower.status).toBe(200);
    await cluster.waitForReplication(20_000);
    for (const s of [...dc1.servers, dc2, dc3]) {
      await until(`${s.serverName} to hold the writes`, 10_000, async () => {
        const a = await call(s, 'GET', `/v1/acl/token/${viaDc2.body?.AccessorID as string}`);
        const b = await call(s, 'GET', `/v1/acl/token/${viaFollower.body?.AccessorID as string}`);
        return a.status === 200 && b.status === 200;
      });
    }
    // ?dc= from one secondary to another (dc2 learns where dc3 is from the primary's next heartbeat).
    await until('?dc=dc3 from dc2', 10_000, async () => {
      const crossed = await call(dc2, 'GET', `/v1/acl/policy/${policy.body?.ID as string}?dc=dc3`);
      return crossed.status === 200 && crossed.body?.Name === 'over-tls';
    });
    // Each secondary is connected with its certificate proven.
    const secondaries = ((await call(leader, 'GET', '/v1/acl/replication')).body?.Secondaries ?? []) as Array<{ Datacenter: string }>;
    expect(secondaries.map((s) => s.Datacenter).sort()).toEqual(['dc2', 'dc3']);

    // The leader dies: a follower takes over, over TLS, and the secondaries follow it.
    await leader.kill();
    const next = await dc1.leader(20_000);
    expect(next).not.toBe(leader);
    await until(
      'a write at the new leader',
      15_000,
      async () => (await call(next, 'PUT', '/v1/acl/token', { Description: 'after failover' })).status === 200,
    );
    await leader.start();
    await until('the secondaries to replicate from the new leader', 30_000, async () => {
      await cluster.waitForReplication(5000);
      return true;
    });

    // The web UI is served over HTTPS as it is, its policy allowing no other origin.
    const ui = await cluster.fetch(`${dc2.url}/ui/`);
    expect(ui.status).toBe(200);
    expect(await ui.text()).toMatch(/<html/i);
    expect(ui.headers.get('content-security-policy')).not.toMatch(/https?:\/\//);
    const app = await cluster.fetch(`${dc2.url}/ui/app.js`);
    expect(app.status).toBe(200);
    expect((await app.text()).length).toBeGreaterThan(100);
    // Nothing is served over plaintext: a daemon says only that the request should have been HTTPS (as Go's servers
    // do), etcd (client and peer ports) at most a TLS alert.
    for (const port of [...dc1.servers, dc2, dc3].map((s) => portOf(s.url))) {
      const got = await plaintext(port);
      expect(got).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
      expect(got.endsWith('\r\n\r\nClient sent an HTTP request to an HTTPS server.\n')).toBe(true);
    }
    const coordinator = cluster.coordinator as CoordinatorHandle;
    for (const port of [portOf(coordinator.url), portOf(coordinator.peerURL)]) {
      const got = await plaintext(port);
      expect(got).not.toMatch(/HTTP\//);
      expect(got.length).toBeLessThan(64); // at most a TLS alert
    }
  }, 120_000);

  it("a peer without a server certificate of the datacenter opens no servers' stream, whatever token it holds", async () => {
    const leader = await cluster.get('dc1').leader();
    const attempt = async (withClientCert: boolean) => {
      const { WebSocket } = await import('ws');
      const t = cluster.tls as NonNullable<Cluster['tls']>;
      return new Promise<{ status: number; body: string }>((resolve) => {
        const ws = new WebSocket(`${leader.url.replace('https', 'wss')}/v1/internal/servers?version=2`, {
          ca: t.ca,
          ...(withClientCert ? { cert: t.cert, key: t.key } : {}),
          headers: { 'X-Service-Token': token, 'x-watchword-server-name': 'dc1-server-9' },
        });
        ws.on('unexpected-response', (_req, res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        ws.on('open', () => resolve({ status: 101, body: '' }));
        ws.on('error', (err) => resolve({ status: 0, body: err.message }));
      });
    };
    const none = await attempt(false);
    expect(none.status).toBe(403);
    expect(none.body).toMatch(/no client certificate/);
    // A client certificate of the right CA is not a server's.
    const client = await attempt(true);
    expect(client.status).toBe(403);
    expect(client.body).toMatch(/certificate names client\.dc1\.watchword, expected server\.dc1\.watchword/);
  });

  it('a secondary whose certificate names another datacenter, and one that trusts a CA that did not sign the primary, replicate nothing and say why', async () => {
    const t = cluster.tls as NonNullable<Cluster['tls']>;
    const primaryURLs = cluster
      .get('dc1')
      .servers.map((s) => s.url)
      .join(',');
    // dc4 presents dc3's certificate (right CA, wrong datacenter).
    const d4 = await tempDir();
    dirs.push(d4);
    const dc4 = await spawnAgent(d4.path, [
      '--datacenter',
      'dc4',
      '--primary-datacenter',
      'dc1',
      '--primary-address',
      primaryURLs,
      '--replication-token',
      token,
      '--tls-ca-file',
      t.caFile,
      '--tls-cert-file',
      join(t.dir, 'dc3-node.pem'),
      '--tls-key-file',
      join(t.dir, 'dc3-node-key.pem'),
    ]);
    extra.push(dc4);
    // dc5 trusts a CA of its own, which did not sign the primary's certificates.
    const d5 = await tempDir();
    dirs.push(d5);
    const other = await createCA({ domain: 'watchword', days: 2 });
    const own = await createCert(other, { kind: 'server', datacenter: 'dc5', domain: 'watchword', days: 2 });
    const files = await tempDir();
    dirs.push(files);
    const caFile = join(files.path, 'other-ca.pem');
    const certFile = join(files.path, 'dc5.pem');
    const keyFile = join(files.path, 'dc5-key.pem');
    await writeFile(caFile, other.cert);
    await writeFile(certFile, own.cert);
    await writeFile(keyFile, own.key, { mode: 0o600 });
    const dc5 = await spawnAgent(d5.path, [
      '--datacenter',
      'dc5',
      '--primary-datacenter',
      'dc1',
      '--primary-address',
      primaryURLs,
      '--replication-token',
      token,
      '--tls-ca-file',
      caFile,
      '--tls-cert-file',
      certFile,
      '--tls-key-file',
      keyFile,
    ]);
    extra.push(dc5);
    const status = async (p: AgentProcess, ca: string) => {
      const undici = await import('undici');
      const res = await undici.fetch(`${p.url.replace('http:', 'https:')}/v1/acl/replication`, {
        dispatcher: new undici.Agent({ connect: { ca } }),
      });
      return (await res.json()) as { Connected: boolean; ReplicatedIndex: number; LastErrorMessage: string };
    };
    await until('dc4 to say why', 15_000, async () =>
      /certificate names server\.dc3\.watchword, expected server\.dc4\.watchword/.test((await status(dc4, t.ca)).LastErrorMessage),
    );
    await until('dc5 to say why', 15_000, async () => /not signed by tls_ca_file/.test((await status(dc5, other.cert)).LastErrorMessage));
    await sleep(1500);
    for (const [p, ca] of [
      [dc4, t.ca],
      [dc5, other.cert],
    ] as const) {
      const s = await status(p, ca);
      expect(s.Connected).toBe(false);
      expect(s.ReplicatedIndex).toBe(0);
    }
    expect(dc4.output()).toMatch(/certificate names server\.dc3\.watchword, expected server\.dc4\.watchword/);
    // The primary never listed them as secondaries.
    const leader = await cluster.get('dc1').leader();
    const secondaries = ((await call(leader, 'GET', '/v1/acl/replication')).body?.Secondaries ?? []) as Array<{ Datacenter: string }>;
    expect(secondaries.map((s) => s.Datacenter).sort()).toEqual(['dc2', 'dc3']);
  }, 60_000);

  it('SIGHUP reloads the certificate: a new connection sees the new one, open replication streams stay up; a bad file is refused and the old one kept', async () => {
    const t = cluster.tls as NonNullable<Cluster['tls']>;
    const leader = await cluster.get('dc1').leader();
    const port = portOf(leader.url);
    const before = await presented(port, t.ca);
    const streams = async () =>
      ((await call(leader, 'GET', '/v1/acl/replication')).body?.Secondaries ?? []) as Array<{ Datacenter: string; ConnectedAt: string }>;
    const openBefore = await streams();
    const renewed = await cluster.renewCertificate(leader.serverName);
    process.kill(leader.pid as number, 'SIGHUP');
    // A wait for the condition, long enough for two busy cores: only a failure waits it out.
    await until(
      'the new certificate on new connections',
      30_000,
      async () => (await presented(port, t.ca)).serialNumber === new X509Certificate(renewed.cert).serialNumber,
    );
    expect((await presented(port, t.ca)).serialNumber).not.toBe(before.serialNumber);
    // The replication streams opened before the reload are the same streams.
    const openAfter = await streams();
    expect(openAfter.map((s) => `${s.Datacenter}@${s.ConnectedAt}`).sort()).toEqual(
      openBefore.map((s) => `${s.Datacenter}@${s.ConnectedAt}`).sort(),
    );
    expect((await call(leader, 'PUT', '/v1/acl/token', { Description: 'after reload' })).status).toBe(200);
    // A file that cannot serve is refused: the daemon keeps the certificate it has.
    await writeFile(renewed.certFile, 'not a certificate\n');
    process.kill(leader.pid as number, 'SIGHUP');
    await until('the refusal in the log', 30_000, async () =>
      /tls: reload refused, keeping the certificates in use: tls_cert_file .* holds no PEM certificate/.test(leader.output()),
    );
    expect((await presented(port, t.ca)).serialNumber).toBe(new X509Certificate(renewed.cert).serialNumber);
    await writeFile(renewed.certFile, renewed.cert);
  }, 60_000);
});
