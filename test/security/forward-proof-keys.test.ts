import { createHmac } from 'node:crypto';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WatchwordClient } from '../../src/client/index.js';
import { NonceBook, bodyHashOf, checkForwardProof, forwardProof } from '../../src/transport/forward-proof.js';
import { type TestDaemon, secondaryConfig, startTestDaemon, waitFor } from '../helpers/test-daemon.js';

// The fifth security review, finding 7: any default-namespace acl:write secret (a Local
// administrator's included) signed a forwarded-for proof; the MAC bound neither the path nor the
// body (a proof was good for 300 s, for any request); and once believed, the real socket address
// was recorded nowhere. Now only servers vouch (the server key, a certificate, or the key the
// primary hands a secondary over its replication stream), a proof covers path, body and a nonce
// used once, and the forwarding server's address is recorded as ViaAddr.

interface AuditLine {
  Type: string;
  Path: string;
  RemoteAddr: string;
  ViaAddr?: string;
  Objects?: Array<{ ID: string }>;
}

/** The proof as the previous release made it: an HMAC under a token's secret over client, sender, method and time. */
function tokenProof(accessor: string, secret: string, client: string, from: string, method: string): string {
  const time = String(Math.floor(Date.now() / 1000));
  const mac = createHmac('sha256', secret).update(['watchword-forward-v1', client, from, method, time].join('\n')).digest('base64url');
  return `token:${accessor} ${time} ${mac}`;
}

/** A request sent from `localAddress` (another loopback address is another client). */
function from(localAddress: string, url: string, method: string, path: string, headers: Record<string, string>, body?: string) {
  const u = new URL(url);
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request({ host: u.hostname, port: Number(u.port), method, path, headers, localAddress }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('finding 7: who may vouch for a forwarded client', () => {
  let dc1: TestDaemon;
  let dc2: TestDaemon;
  beforeAll(async () => {
    dc1 = await startTestDaemon();
    dc2 = await startTestDaemon({ config: secondaryConfig(dc1) });
    await waitFor(async () => (await new WatchwordClient({ address: dc2.url }).replication()).Connected, 10_000);
    await waitFor(() => dc2.daemon.store.reader.getTokenBySecret(dc1.management) !== undefined, 10_000);
  });
  afterAll(async () => {
    await dc2?.close();
    await dc1?.close();
  });

  const audit = async (query: string) =>
    (await dc1.api('GET', `/v1/operator/audit?limit=1000&${query}`)).body.Events as unknown as AuditLine[];

  it("is not an administrator's secret: a proof signed with it names no one", async () => {
    const self = (await dc1.api('GET', '/v1/acl/token/self')).body as { AccessorID: string };
    const body = JSON.stringify({ AuthMethod: 'none', BearerToken: 'x' });
    const forged = '203.0.113.77';
    for (const proof of [
      tokenProof(self.AccessorID, dc1.management, forged, 'dc2', 'POST'),
      forwardProof(`token:${self.AccessorID}`, dc1.management, {
        client: forged,
        from: 'dc2',
        method: 'POST',
        path: '/v1/acl/login',
        bodyHash: bodyHashOf(body),
      }),
    ]) {
      const res = await fetch(`${dc1.url}/v1/acl/login`, {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          'X-Service-Forwarded-From': 'dc2',
          'X-Service-Forwarded-For': forged,
          'X-Service-Forwarded-Body': bodyHashOf(body),
          'X-Service-Forwarded-Proof': proof,
        },
        body,
      });
      await res.arrayBuffer();
    }
    await waitFor(async () => (await audit('type=refused')).some((e) => e.Path === '/v1/acl/login'), 5_000, 50, 'the refused logins');
    const logins = (await audit('type=refused')).filter((e) => e.Path === '/v1/acl/login');
    expect(logins.map((e) => e.RemoteAddr)).not.toContain(forged);
    expect(new Set(logins.map((e) => e.RemoteAddr))).toEqual(new Set(['127.0.0.1']));
  });

  it('is the secondary: a write forwarded by it names its client, and the secondary as ViaAddr', async () => {
    const body = JSON.stringify({ Name: 'forwarded-by-dc2', Rules: 'acl = "read"' });
    const res = await from(
      '127.0.0.2',
      dc2.url,
      'PUT',
      '/v1/acl/policy',
      { 'Content-Type': 'application/json', 'X-Service-Token': dc1.management },
      body,
    );
    expect(res.status).toBe(200);
    const id = (JSON.parse(res.text) as { ID: string }).ID;
    await waitFor(async () => (await audit(`id=${id}`)).length > 0, 5_000, 50, 'the change audited at the primary');
    const [line] = await audit(`id=${id}`);
    expect(line).toMatchObject({ RemoteAddr: '127.0.0.2', ViaAddr: '127.0.0.1' });
  });
});

describe('finding 7: what a proof covers', () => {
  const fields = { client: '10.0.0.9', from: 'dc2', method: 'PUT', path: '/v1/acl/policy', bodyHash: bodyHashOf('{"Name":"a"}') };
  const keyOf = () => 'k'.repeat(32);

  it('is good once: the same proof again is not believed', () => {
    const nonces = new NonceBook();
    const proof = forwardProof('dc:dc2', keyOf(), fields);
    expect(checkForwardProof(proof, fields, keyOf, nonces)).toBe(true);
    expect(checkForwardProof(proof, fields, keyOf, nonces)).toBe(false);
  });

  it.each([
    ['another path', { path: '/v1/acl/role' }],
    ['another body', { bodyHash: bodyHashOf('{"Name":"b"}') }],
    ['another method', { method: 'DELETE' }],
    ['another client', { client: '10.0.0.10' }],
  ])('does not cover %s', (_, change) => {
    const proof = forwardProof('dc:dc2', keyOf(), fields);
    expect(checkForwardProof(proof, { ...fields, ...change }, keyOf, new NonceBook())).toBe(false);
  });
});
