import { type Server, createServer } from 'node:http';
import { type CryptoKey, SignJWT, exportJWK, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, type DatacenterHandle, startCluster } from '../../src/testing/index.js';
import { until } from '../helpers/test-daemon.js';

// Auth methods across datacenters (docs/http-api.md, "HTTP API"): methods and rules replicate; a login at a
// secondary makes a Local token there, or with TokenLocality global a global token (made
// at the primary); deleting the method removes its rules and tokens everywhere.

describe('auth methods in several datacenters', () => {
  let cluster: Cluster;
  let keys: { privateKey: CryptoKey; publicKey: CryptoKey };
  let jwks: Server;
  let jwksURL = '';

  const call = async (
    dc: DatacenterHandle,
    method: string,
    path: string,
    body?: unknown,
    token: string | undefined = cluster.managementToken,
  ) => {
    const res = await fetch(`${dc.url}${path}`, {
      method,
      headers: { 'Content-Type': 'application/json', Accept: 'application/json', ...(token ? { 'X-Service-Token': token } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  const bearer = (service: string) =>
    new SignJWT({ service }).setProtectedHeader({ alg: 'RS256', kid: 'k1' }).setIssuedAt().setExpirationTime('10m').sign(keys.privateKey);

  beforeAll(async () => {
    keys = await generateKeyPair('RS256', { extractable: true });
    const jwk = { ...(await exportJWK(keys.publicKey)), kid: 'k1', alg: 'RS256' };
    jwks = createServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((r) => jwks.listen(0, '127.0.0.1', () => r()));
    jwksURL = `http://127.0.0.1:${(jwks.address() as { port: number }).port}/keys`;
    cluster = await startCluster({ datacenters: ['dc1', 'dc2', 'dc3'], config: { token_min_ttl: '1s' } });
    const dc1 = cluster.get('dc1');
    for (const [name, locality] of [
      ['global-login', 'global'],
      ['local-login', 'local'],
    ] as const) {
      const m = await call(dc1, 'PUT', '/v1/acl/auth-method', {
        Name: name,
        Type: 'jwt',
        TokenLocality: locality,
        MaxTokenTTL: '1h',
        Config: { JWKSURL: jwksURL, ClaimMappings: { service: 'service' } },
      });
      expect(m.status).toBe(200);
      expect(
        (await call(dc1, 'PUT', '/v1/acl/binding-rule', { AuthMethod: name, BindType: 'service', BindName: '${value.service}' })).status,
      ).toBe(200);
    }
    await cluster.waitForReplication();
  }, 90_000);

  afterAll(async () => {
    await cluster?.stop();
    await new Promise((r) => jwks?.close(r));
  }, 60_000);

  it('replicates methods and rules to every datacenter', async () => {
    for (const dc of ['dc2', 'dc3']) {
      const methods = (await call(cluster.get(dc), 'GET', '/v1/acl/auth-methods')).body as Array<{ Name: string }>;
      expect(methods.map((m) => m.Name).sort()).toEqual(['global-login', 'local-login']);
      expect(((await call(cluster.get(dc), 'GET', '/v1/acl/binding-rules?authmethod=global-login')).body as unknown[]).length).toBe(1);
    }
  });

  it('a global-locality login at dc2 makes a token every datacenter holds; a local one stays in dc2; deleting the methods removes them everywhere', async () => {
    const dc1 = cluster.get('dc1');
    const dc2 = cluster.get('dc2');
    const dc3 = cluster.get('dc3');
    const global = await call(
      dc2,
      'POST',
      '/v1/acl/login',
      { AuthMethod: 'global-login', BearerToken: await bearer('billing') },
      undefined,
    );
    expect(global.status).toBe(200);
    expect(global.body.Local).toBe(false);
    expect(global.body.AuthMethod).toBe('global-login');
    const local = await call(dc2, 'POST', '/v1/acl/login', { AuthMethod: 'local-login', BearerToken: await bearer('cart') }, undefined);
    expect(local.status).toBe(200);
    expect(local.body.Local).toBe(true);
    // Readable where it was made at once (read-your-writes), and everywhere once replicated.
    expect((await call(dc2, 'GET', '/v1/acl/token/self', undefined, global.body.SecretID)).status).toBe(200);
    await cluster.waitForReplication();
    for (const dc of [dc1, dc2, dc3]) expect((await call(dc, 'GET', `/v1/acl/token/${global.body.AccessorID}`)).status).toBe(200);
    expect((await call(dc2, 'GET', `/v1/acl/token/${local.body.AccessorID}`)).status).toBe(200);
    for (const dc of [dc1, dc3]) expect((await call(dc, 'GET', `/v1/acl/token/${local.body.AccessorID}`)).status).toBe(404);

    for (const name of ['global-login', 'local-login']) expect((await call(dc1, 'DELETE', `/v1/acl/auth-method/${name}`)).status).toBe(200);
    await cluster.waitForReplication();
    for (const dc of [dc1, dc2, dc3]) {
      expect((await call(dc, 'GET', '/v1/acl/auth-methods')).body).toEqual([]);
      expect((await call(dc, 'GET', '/v1/acl/binding-rules')).body).toEqual([]);
      expect((await call(dc, 'GET', `/v1/acl/token/${global.body.AccessorID}`)).status).toBe(404);
    }
    await until(
      'the Local login token gone from dc2',
      5000,
      async () => (await call(dc2, 'GET', `/v1/acl/token/${local.body.AccessorID}`)).status === 404,
    );
    expect((await call(dc2, 'GET', '/v1/acl/token/self', undefined, local.body.SecretID)).status).toBe(403);
  }, 60_000);
});
