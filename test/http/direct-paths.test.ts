import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SignJWT, exportSPKI, generateKeyPair } from 'jose';
import { MANAGEMENT_SECRET, type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

/**
 * The hot reads (token by accessor, self, ?expanded, the list filters) are answered before
 * Fastify's routing in their plain form; an unknown query parameter sends the same request
 * through Fastify. Both must answer the same status, headers and bytes, errors included.
 */
describe('token reads served before routing answer exactly as the routed ones', () => {
  let d: TestDaemon;
  let policy: { ID: string };
  let reader: { AccessorID: string; SecretID: string };
  let linked: { AccessorID: string; SecretID: string };

  beforeAll(async () => {
    d = await startTestDaemon();
    policy = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'reader', Rules: 'acl = "read"' } })).body;
    reader = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'reader', Policies: [{ ID: policy.ID }] } })).body;
    linked = (
      await d.api('PUT', '/v1/acl/token', {
        body: { Description: 'linked', Policies: [{ ID: policy.ID }], ServiceIdentities: [{ ServiceName: 'web' }] },
      })
    ).body;
  });
  afterAll(() => d.close());

  /** Status, the headers a client sees (the date aside), and the body bytes. */
  async function answer(path: string, headers: Record<string, string>) {
    const res = await fetch(`${d.url}${path}`, { headers });
    const seen = Object.fromEntries([...res.headers].filter(([k]) => k !== 'date'));
    return { status: res.status, headers: seen, body: await res.text() };
  }

  async function same(path: string, headers: Record<string, string>) {
    const direct = await answer(path, headers);
    const routed = await answer(`${path}${path.includes('?') ? '&' : '?'}unused=1`, headers);
    expect(direct).toEqual(routed);
    return direct;
  }

  const as = (secret: string) => ({ 'X-Service-Token': secret });

  it('a token by accessor, as management (secret shown) and as acl:read (secret hidden)', async () => {
    const shown = await same(`/v1/acl/token/${linked.AccessorID}`, as(MANAGEMENT_SECRET));
    expect(shown.status).toBe(200);
    expect(JSON.parse(shown.body).SecretID).toBe(linked.SecretID);
    expect(shown.headers['x-service-index']).toMatch(/^\d+$/);
    expect(shown.headers['x-consul-index']).toBe(shown.headers['x-service-index']);
    expect(shown.headers['x-service-effective-consistency']).toBe('leader');
    const hidden = await same(`/v1/acl/token/${linked.AccessorID}`, as(reader.SecretID));
    expect(JSON.parse(hidden.body).SecretID).toBe('<hidden>');
  });

  it('?expanded, self, and the secret in each place a client may put it', async () => {
    const expanded = await same(`/v1/acl/token/${linked.AccessorID}?expanded`, as(MANAGEMENT_SECRET));
    expect(JSON.parse(expanded.body).ExpandedPolicies.map((p: { Name: string }) => p.Name)).toContain('reader');
    expect((await same('/v1/acl/token/self', as(reader.SecretID))).status).toBe(200);
    expect((await same('/v1/acl/token/self', { 'X-Consul-Token': reader.SecretID })).status).toBe(200);
    expect((await same('/v1/acl/token/self', { Authorization: `Bearer ${reader.SecretID}` })).status).toBe(200);
    const query = await same(`/v1/acl/token/self?token=${reader.SecretID}`, {});
    expect(JSON.parse(query.body).AccessorID).toBe(reader.AccessorID);
  });

  it('the list filters', async () => {
    const byPolicy = await same(`/v1/acl/tokens?policy=${policy.ID}`, as(MANAGEMENT_SECRET));
    expect(JSON.parse(byPolicy.body).map((t: { AccessorID: string }) => t.AccessorID)).toEqual(
      [reader.AccessorID, linked.AccessorID].sort(),
    );
    const byService = await same('/v1/acl/tokens?servicename=web', as(reader.SecretID));
    expect(JSON.parse(byService.body)).toHaveLength(1);
    expect((await same('/v1/acl/tokens?policy=00000000-0000-4000-8000-00000000dead', as(MANAGEMENT_SECRET))).body).toBe('[]');
  });

  it('errors: unknown token 403, no permission 403, missing token 404, bad namespace 400, two filters 400', async () => {
    expect((await same(`/v1/acl/token/${linked.AccessorID}`, as('00000000-0000-4000-8000-00000000beef'))).status).toBe(403);
    const nobody = (
      await d.api('PUT', '/v1/acl/token', { body: { Description: 'no acl rules', ServiceIdentities: [{ ServiceName: 'db' }] } })
    ).body;
    const denied = await same(`/v1/acl/token/${linked.AccessorID}`, as(nobody.SecretID));
    expect(denied.status).toBe(403);
    // As Consul: the message as text; the code in a header. With Accept: application/json, the JSON body.
    expect(denied.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(denied.headers['x-service-error-code']).toBe('PERMISSION_DENIED');
    expect(denied.body).toMatch(
      /^Permission denied: token with AccessorID '.+' lacks permission 'acl:read'; decided by the default policy: default_policy = "deny"$/,
    );
    expect(denied.headers['x-service-index']).toMatch(/^\d+$/);
    const deniedJSON = await same(`/v1/acl/token/${linked.AccessorID}`, { ...as(nobody.SecretID), Accept: 'application/json' });
    expect(JSON.parse(deniedJSON.body)).toMatchObject({ statusCode: 403, code: 'PERMISSION_DENIED', message: denied.body });
    expect((await same('/v1/acl/token/00000000-0000-4000-8000-00000000dead', as(MANAGEMENT_SECRET))).status).toBe(404);
    expect((await same('/v1/acl/token/self', {})).status).toBe(404);
    expect((await same(`/v1/acl/token/${linked.AccessorID}?ns=bad%20name`, as(MANAGEMENT_SECRET))).status).toBe(400);
    expect((await same(`/v1/acl/tokens?policy=${policy.ID}&servicename=web`, as(MANAGEMENT_SECRET))).status).toBe(400);
  });

  it('a changed token is read new at once, and its index moves', async () => {
    const before = await answer(`/v1/acl/token/${linked.AccessorID}`, as(MANAGEMENT_SECRET));
    const updated = await d.api('PUT', `/v1/acl/token/${linked.AccessorID}`, {
      body: { Description: 'renamed', Policies: [{ ID: policy.ID }] },
    });
    expect(updated.status).toBe(200);
    const after = await same(`/v1/acl/token/${linked.AccessorID}`, as(MANAGEMENT_SECRET));
    expect(JSON.parse(after.body).Description).toBe('renamed');
    expect(Number(after.headers['x-service-index'])).toBeGreaterThan(Number(before.headers['x-service-index']));
    const list = await same(`/v1/acl/tokens?policy=${policy.ID}`, as(MANAGEMENT_SECRET));
    expect(JSON.parse(list.body).find((t: { AccessorID: string }) => t.AccessorID === linked.AccessorID).Description).toBe('renamed');
  });

  it('counts each read in the request metrics under its route pattern', async () => {
    await answer(`/v1/acl/token/${linked.AccessorID}`, as(MANAGEMENT_SECRET));
    const text = await (await fetch(`${d.url}/v1/agent/metrics?format=prometheus`, { headers: as(MANAGEMENT_SECRET) })).text();
    expect(text).toMatch(/watchword_http_requests_total\{method="GET",route="\/v1\/acl\/token\/:AccessorID",status="200"\} [1-9]/);
    expect(text).toMatch(
      /watchword_http_request_duration_seconds_count\{method="GET",route="\/v1\/acl\/token\/:AccessorID",status="403"\} [1-9]/,
    );
  });

  /** A write both ways: status, header names (values vary with the index), and the body with its new IDs and times set aside. */
  async function sameWrite(path: string, init: { headers: Record<string, string>; body?: string; method?: string }, base = d.url) {
    const send = async (p: string) => {
      const res = await fetch(`${base}${p}`, { method: 'PUT', ...init });
      const text = await res.text();
      let body: unknown = text;
      try {
        const { AccessorID: _a, SecretID: _s, CreateTime: _t, CreateIndex: _c, ModifyIndex: _m, ...rest } = JSON.parse(text);
        body = rest;
      } catch {
        // not JSON: compared as text
      }
      const names = [...res.headers.keys()].filter((k) => k !== 'date').sort();
      return { status: res.status, names, body, index: res.headers.get('x-service-index'), consul: res.headers.get('x-consul-index') };
    };
    const direct = await send(path);
    const routed = await send(`${path}${path.includes('?') ? '&' : '?'}unused=1`);
    expect({ ...direct, index: undefined, consul: undefined }).toEqual({ ...routed, index: undefined, consul: undefined });
    expect(direct.consul).toBe(direct.index);
    return direct;
  }

  it('a token create: the same answer, the index of the write in both index headers; bad input the same 4xx', async () => {
    const json = { ...as(MANAGEMENT_SECRET), 'Content-Type': 'application/json' };
    const made = await sameWrite('/v1/acl/token', {
      headers: json,
      body: JSON.stringify({ Description: 'made', Policies: [{ Name: 'reader' }] }),
    });
    expect(made.status).toBe(200);
    expect(Number(made.index)).toBeGreaterThan(0);
    expect(made.body).toMatchObject({ Description: 'made', Policies: [{ ID: policy.ID, Name: 'reader' }] });
    expect((await sameWrite('/v1/acl/token', { headers: as(MANAGEMENT_SECRET), body: '{"Description":"no content type"}' })).status).toBe(
      200,
    );
    expect((await sameWrite('/v1/acl/token', { headers: json })).status).toBe(200);
    expect((await sameWrite('/v1/acl/token', { headers: json, body: '{"Description": ' })).status).toBe(400);
    expect((await sameWrite('/v1/acl/token', { headers: json, body: '{"Descripton":"typo"}' })).status).toBe(400);
    expect((await sameWrite('/v1/acl/token', { headers: json, body: '[]' })).status).toBe(400);
    expect((await sameWrite('/v1/acl/token', { headers: { ...json, 'X-Service-Token': reader.SecretID }, body: '{}' })).status).toBe(403);
    expect(
      (
        await sameWrite('/v1/acl/token', {
          headers: json,
          body: JSON.stringify({ Policies: [{ ID: '00000000-0000-4000-8000-00000000dead' }] }),
        })
      ).status,
    ).toBe(400);
  });

  it('a token delete: the same answer both ways, its refusals the same; a DELETE with a body goes to the routed path', async () => {
    const made = async () => (await d.api('PUT', '/v1/acl/token', { body: { Description: 'to delete' } })).body as { AccessorID: string };
    const del = (headers: Record<string, string>) => ({ method: 'DELETE', headers });
    // Each way deletes a token of its own (the routed one is asked second, of the second token).
    const [a, b] = [await made(), await made()];
    const direct = await fetch(`${d.url}/v1/acl/token/${a.AccessorID}`, del(as(MANAGEMENT_SECRET)));
    const routed = await fetch(`${d.url}/v1/acl/token/${b.AccessorID}?unused=1`, del(as(MANAGEMENT_SECRET)));
    expect([direct.status, await direct.text()]).toEqual([routed.status, await routed.text()]);
    expect(direct.headers.get('x-service-index')).toMatch(/^[1-9]/);
    expect((await d.api('GET', `/v1/acl/token/${a.AccessorID}`)).status).toBe(404);
    // Gone already, another's token without acl:write, the caller's own token, a malformed ID.
    expect((await sameWrite(`/v1/acl/token/${a.AccessorID}`, { method: 'DELETE', headers: as(MANAGEMENT_SECRET) })).status).toBe(200);
    expect(await (await fetch(`${d.url}/v1/acl/token/${a.AccessorID}`, del(as(MANAGEMENT_SECRET)))).text()).toBe('false');
    const c = await made();
    expect((await sameWrite(`/v1/acl/token/${c.AccessorID}`, { method: 'DELETE', headers: as(reader.SecretID) })).status).toBe(403);
    expect((await sameWrite(`/v1/acl/token/${reader.AccessorID}`, { method: 'DELETE', headers: as(reader.SecretID) })).status).toBe(403);
    expect((await sameWrite('/v1/acl/token/not-a-uuid', { method: 'DELETE', headers: as(MANAGEMENT_SECRET) })).status).toBe(400);
    // A body on a DELETE: the routed path takes it, and the token goes as before.
    const withBody = await fetch(`${d.url}/v1/acl/token/${c.AccessorID}`, {
      method: 'DELETE',
      headers: { ...as(MANAGEMENT_SECRET), 'Content-Type': 'application/json' },
      body: '{}',
    });
    expect(withBody.status).toBe(200);
    expect((await d.api('GET', `/v1/acl/token/${c.AccessorID}`)).status).toBe(404);
  });

  it('a login: the same answer both ways, its refusals the same, and the login limit counts both doors', async () => {
    const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
    const method = {
      Name: 'direct-jwt',
      Type: 'jwt',
      Config: { JWTValidationPubKeys: [await exportSPKI(publicKey)], JWTSupportedAlgs: ['ES256'], BoundIssuer: 'test' },
    };
    expect((await d.api('PUT', '/v1/acl/auth-method', { body: method })).status).toBe(200);
    expect(
      (await d.api('PUT', '/v1/acl/binding-rule', { body: { AuthMethod: 'direct-jwt', BindType: 'service', BindName: 'web' } })).status,
    ).toBe(200);
    const jwt = await new SignJWT({ sub: 'x' })
      .setProtectedHeader({ alg: 'ES256' })
      .setIssuer('test')
      .setIssuedAt()
      .setExpirationTime('1h')
      .sign(privateKey);
    const login = (body: unknown) => ({ method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    const ok = await sameWrite('/v1/acl/login', login({ AuthMethod: 'direct-jwt', BearerToken: jwt }));
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ AuthMethod: 'direct-jwt', ServiceIdentities: [{ ServiceName: 'web' }] });
    expect((await sameWrite('/v1/acl/login', login({ AuthMethod: 'direct-jwt', BearerToken: `${jwt.slice(0, -4)}AAAA` }))).status).toBe(
      403,
    );
    expect((await sameWrite('/v1/acl/login', login({ AuthMethod: 'nope', BearerToken: jwt }))).status).toBe(403);
    expect((await sameWrite('/v1/acl/login', login({ AuthMethod: 'direct-jwt' }))).status).toBe(400);
    // The limit (login_rate 1, burst 1 here) is one count for both doors.
    const limited = await startTestDaemon({ config: { login_rate: 1, login_burst: 1 } });
    try {
      expect((await limited.api('PUT', '/v1/acl/auth-method', { body: method })).status).toBe(200);
      expect(
        (await limited.api('PUT', '/v1/acl/binding-rule', { body: { AuthMethod: 'direct-jwt', BindType: 'service', BindName: 'web' } }))
          .status,
      ).toBe(200);
      const first = await fetch(`${limited.url}/v1/acl/login`, login({ AuthMethod: 'direct-jwt', BearerToken: jwt }));
      const routed = await fetch(`${limited.url}/v1/acl/login?unused=1`, login({ AuthMethod: 'direct-jwt', BearerToken: jwt }));
      const direct = await fetch(`${limited.url}/v1/acl/login`, login({ AuthMethod: 'direct-jwt', BearerToken: jwt }));
      expect([first.status, routed.status, direct.status]).toEqual([200, 429, 429]);
      expect(direct.headers.get('retry-after')).toMatch(/^[1-9]/);
      expect(await direct.text()).toEqual(await routed.text());
    } finally {
      await limited.close();
    }
  });

  it('answers written together at the end of a turn reach their own clients, in order, and a client gone first harms none', async () => {
    // Many connections at once, each reading a different token: every answer must be its own.
    const made = await Promise.all(
      Array.from({ length: 40 }, async (_, i) => (await d.api('PUT', '/v1/acl/token', { body: { Description: `batch-${i}` } })).body),
    );
    const read = await Promise.all(
      made.map(async (t: { AccessorID: string; SecretID: string }) => {
        const res = await fetch(`${d.url}/v1/acl/token/self`, { headers: as(t.SecretID) });
        return ((await res.json()) as { AccessorID: string }).AccessorID;
      }),
    );
    expect(read).toEqual(made.map((t: { AccessorID: string }) => t.AccessorID));

    // Pipelined on one connection, direct and routed requests mixed: the answers come in the order asked.
    const { Socket } = await import('node:net');
    const port = Number(new URL(d.url).port);
    const request = (t: { SecretID: string }, extra: string) =>
      `GET /v1/acl/token/self${extra} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Service-Token: ${t.SecretID}\r\n\r\n`;
    const order = made.slice(0, 8) as Array<{ AccessorID: string; SecretID: string }>;
    const text = await new Promise<string>((resolve, reject) => {
      const socket = new Socket();
      let got = '';
      socket.on('data', (b) => {
        got += b.toString();
        if ((got.match(/HTTP\/1\.1 200/g) ?? []).length === order.length && got.endsWith('}')) {
          socket.destroy();
          resolve(got);
        }
      });
      socket.on('error', reject);
      socket.connect(port, '127.0.0.1', () => socket.write(order.map((t, i) => request(t, i % 2 ? '?unused=1' : '')).join('')));
    });
    const accessors = [...text.matchAll(/"AccessorID":"([^"]+)"/g)].map((m) => m[1]);
    expect(accessors).toEqual(order.map((t) => t.AccessorID));

    // A client that asks and leaves before its answer is written: the daemon goes on answering.
    await new Promise<void>((resolve) => {
      const socket = new Socket();
      socket.connect(port, '127.0.0.1', () => {
        socket.write(request(order[0] as { SecretID: string }, '').repeat(20));
        socket.destroy();
        resolve();
      });
    });
    expect((await d.api('GET', '/v1/acl/token/self')).status).toBe(200);
  });
});
