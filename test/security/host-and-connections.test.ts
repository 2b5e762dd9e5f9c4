import { request } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

/** A GET with the Host header set by hand (fetch does not let a caller choose it). */
function getWithHost(base: string, path: string, host: string, token?: string): Promise<{ status: number; body: string }> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path,
        headers: { Host: host, Accept: 'application/json', ...(token ? { 'X-Service-Token': token } : {}) },
      },
      (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/**
 * Third security review: no Host check (DNS rebinding against a loopback daemon during the
 * bootstrap window), no per-client connection cap, and /v1/agent/self and /v1/agent/metrics
 * readable anonymously (the configuration, data dir and addresses).
 */
describe('a loopback daemon answers only requests addressed to loopback (DNS rebinding)', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d.close());

  it.each(['attacker.example', `attacker.example:${'8500'}`, 'rebind.127.0.0.1.nip.io', '10.0.0.1'])(
    'refuses Host %s with 403 naming the setting, before any route',
    async (host) => {
      for (const path of ['/v1/acl/bootstrap', '/v1/acl/tokens', '/v1/acl/token/self', '/ui/']) {
        const res = await getWithHost(d.url, path, host, d.management);
        expect(res.status).toBe(403);
        expect(JSON.parse(res.body)).toMatchObject({ code: 'HOST_NOT_ALLOWED' });
        expect(JSON.parse(res.body).message).toContain('http_allowed_hosts');
      }
    },
  );

  it.each(['localhost', '127.0.0.1', '[::1]', '127.0.0.2'])('answers Host %s at its port', async (name) => {
    const port = new URL(d.url).port;
    const res = await getWithHost(d.url, '/v1/acl/tokens', `${name}:${port}`, d.management);
    expect(res.status).toBe(200);
  });

  it('refuses a WebSocket upgrade to another Host too', async () => {
    const u = new URL(d.url);
    const answer = await new Promise<string>((resolve, reject) => {
      const s = connect(Number(u.port), u.hostname, () =>
        s.write(
          'GET /v1/internal/replication HTTP/1.1\r\nHost: attacker.example\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
        ),
      );
      let out = '';
      s.on('data', (c: Buffer) => (out += c.toString()));
      s.on('end', () => resolve(out));
      s.on('error', reject);
    });
    expect(answer).toMatch(/^HTTP\/1.1 403 /);
    expect(answer).toContain('HOST_NOT_ALLOWED');
  });
});

describe('http_allowed_hosts admits the names an operator lists', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon({ config: { http_allowed_hosts: 'acl.internal,other.internal:8443' } });
  });
  afterAll(() => d.close());

  it('answers a listed name (at any port, or the one listed) and refuses others', async () => {
    expect((await getWithHost(d.url, '/v1/acl/tokens', 'acl.internal:1234', d.management)).status).toBe(200);
    expect((await getWithHost(d.url, '/v1/acl/tokens', 'ACL.internal', d.management)).status).toBe(200);
    expect((await getWithHost(d.url, '/v1/acl/tokens', 'other.internal:8443', d.management)).status).toBe(200);
    expect((await getWithHost(d.url, '/v1/acl/tokens', 'other.internal:9999', d.management)).status).toBe(403);
    expect((await getWithHost(d.url, '/v1/acl/tokens', 'elsewhere.internal', d.management)).status).toBe(403);
  });
});

describe('one client cannot take every connection', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon({ config: { http_max_conns_per_client: 5 } });
  });
  afterAll(() => d.close());

  it('closes connections past http_max_conns_per_client at once, and accepts again when some close', async () => {
    const u = new URL(d.url);
    const open = async () =>
      new Promise<import('node:net').Socket>((resolve, reject) => {
        const s = connect(Number(u.port), u.hostname, () => resolve(s));
        s.on('error', reject);
      });
    const held = await Promise.all([1, 2, 3, 4, 5].map(open));
    const extra = await open();
    const closed = await new Promise<boolean>((resolve) => {
      extra.on('close', () => resolve(true));
      setTimeout(() => resolve(false), 2_000);
    });
    expect(closed).toBe(true);
    for (const s of held) s.destroy();
    await new Promise((r) => setTimeout(r, 100));
    expect((await d.api('GET', '/v1/acl/tokens')).status).toBe(200);
  });
});

describe('/v1/agent/self and /v1/agent/metrics need agent:read', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d.close());

  it.each(['/v1/agent/self', '/v1/agent/metrics', '/v1/agent/metrics?format=prometheus'])(
    '%s: 403 anonymously and to an ACL reader, 200 with agent:read',
    async (path) => {
      const aclRead = (await d.api('PUT', '/v1/acl/policy', { body: { Name: `acl-read-${path.length}`, Rules: 'acl = "read"' } })).body;
      const agentRead = (
        await d.api('PUT', '/v1/acl/policy', { body: { Name: `agent-read-${path.length}`, Rules: 'agent_prefix "" { policy = "read" }' } })
      ).body;
      const reader = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: aclRead.ID }] } })).body;
      const agent = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: agentRead.ID }] } })).body;
      const anonymous = await d.api('GET', path, { token: undefined });
      expect(anonymous.status).toBe(403);
      expect(anonymous.text).not.toContain(d.dataDir);
      expect((await d.api('GET', path, { token: reader.SecretID })).status).toBe(403);
      expect((await d.api('GET', path, { token: agent.SecretID })).status).toBe(200);
    },
  );
});

describe('the Host check remembers the values it served', () => {
  it('answers as it did before it remembered them, past its bound, and never serves a refused value', async () => {
    const { HostCheck } = await import('../../src/http/host-check.js');
    const check = new HostCheck({ loopbackOnly: true, allowed: ['ops.example:8500'], defaultPort: 80 });
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 300; i++) expect(check.refusal(`127.0.0.${i % 250}:${1000 + i}`)).toBeUndefined();
      expect(check.refusal('ops.example:8500')).toBeUndefined();
      expect(check.refusal('ops.example:8501')).toContain('not allowed');
      expect(check.refusal('attacker.example')).toContain('not allowed');
      expect(check.refusal('attacker.example')).toContain('not allowed');
    }
  });
});
