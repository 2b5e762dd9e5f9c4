import { type Server, createServer } from 'node:http';
import { type CryptoKey, type JWK, SignJWT, exportJWK, exportSPKI, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

// Auth methods, binding rules, login and logout against real identity providers: a JWKS
// endpoint, an OIDC discovery document and a Kubernetes TokenReview API, each a real HTTP
// server on 127.0.0.1 with keys this test generates.

interface Provider {
  url: string;
  close(): Promise<void>;
}

async function listen(handler: Parameters<typeof createServer>[1]): Promise<Provider> {
  const server: Server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((r) => server.close(() => r())) };
}

const json = (res: import('node:http').ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(body));
};

describe('auth methods, binding rules, login and logout', () => {
  let d: TestDaemon;
  let keys: { privateKey: CryptoKey; publicKey: CryptoKey };
  let other: { privateKey: CryptoKey; publicKey: CryptoKey };
  let jwk: JWK;
  let jwks: Provider;
  let oidc: Provider;
  let kube: Provider;
  const ISSUER_AUD = 'watchword-test';
  const reviewerJWT = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJyZXZpZXdlciJ9.c2ln';

  const sign = (
    claims: Record<string, unknown>,
    opts: { key?: CryptoKey; kid?: string; alg?: string; iss?: string; aud?: string; exp?: number; nbf?: number } = {},
  ) => {
    const now = Math.floor(Date.now() / 1000);
    const jwt = new SignJWT({ ...claims })
      .setProtectedHeader({ alg: opts.alg ?? 'RS256', kid: opts.kid ?? 'k1' })
      .setIssuedAt(now)
      .setIssuer(opts.iss ?? oidc.url)
      .setAudience(opts.aud ?? ISSUER_AUD)
      .setExpirationTime(opts.exp ?? now + 600);
    if (opts.nbf !== undefined) jwt.setNotBefore(opts.nbf);
    return jwt.sign(opts.key ?? keys.privateKey);
  };

  beforeAll(async () => {
    keys = await generateKeyPair('RS256', { extractable: true });
    other = await generateKeyPair('RS256', { extractable: true });
    jwk = { ...(await exportJWK(keys.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
    jwks = await listen((req, res) => (req.url === '/keys' ? json(res, 200, { keys: [jwk] }) : json(res, 404, {})));
    oidc = await listen((req, res) => {
      if (req.url === '/.well-known/openid-configuration') return json(res, 200, { issuer: oidc.url, jwks_uri: `${jwks.url}/keys` });
      json(res, 404, {});
    });
    kube = await listen((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        if (req.method !== 'POST' || req.url !== '/apis/authentication.k8s.io/v1/tokenreviews') return json(res, 404, {});
        if (req.headers.authorization !== `Bearer ${reviewerJWT}`) return json(res, 401, { kind: 'Status', message: 'Unauthorized' });
        const token = (JSON.parse(body) as { spec: { token: string } }).spec.token;
        if (token === 'aaa.bbb.good') {
          return json(res, 201, {
            kind: 'TokenReview',
            status: { authenticated: true, user: { username: 'system:serviceaccount:payments:api', uid: 'uid-42' } },
          });
        }
        json(res, 201, { kind: 'TokenReview', status: { authenticated: false, error: 'token is revoked' } });
      });
    });
    d = await startTestDaemon({ config: { token_min_ttl: '1s' } });
    // What the rules bind to.
    expect(
      (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'web-read', Rules: 'service_prefix "web" { policy = "read" }' } })).status,
    ).toBe(200);
    expect((await d.api('PUT', '/v1/acl/role', { body: { Name: 'admins', Policies: [{ Name: 'web-read' }] } })).status).toBe(200);
  }, 30_000);

  afterAll(async () => {
    await d?.close();
    await jwks?.close();
    await oidc?.close();
    await kube?.close();
  });

  const jwtMethod = (name: string, source: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
    Name: name,
    Type: 'jwt',
    MaxTokenTTL: '10m',
    Config: {
      ...source,
      BoundAudiences: [ISSUER_AUD],
      ClaimMappings: { service: 'service', team: 'team' },
      ListClaimMappings: { groups: 'groups' },
      ...extra,
    },
  });

  async function twoRules(method: string): Promise<void> {
    expect(
      (
        await d.api('PUT', '/v1/acl/binding-rule', {
          body: { AuthMethod: method, BindType: 'service', BindName: '${value.service}', Selector: 'value.team == "payments"' },
        })
      ).status,
    ).toBe(200);
    expect(
      (
        await d.api('PUT', '/v1/acl/binding-rule', {
          body: { AuthMethod: method, BindType: 'role', BindName: 'admins', Selector: '"admins" in list.groups' },
        })
      ).status,
    ).toBe(200);
    // A rule that does not match this identity.
    expect(
      (
        await d.api('PUT', '/v1/acl/binding-rule', {
          body: { AuthMethod: method, BindType: 'service', BindName: 'never', Selector: 'value.team == "other"' },
        })
      ).status,
    ).toBe(200);
  }

  it.each([
    ['a JWKS URL', 'by-jwks', () => ({ JWKSURL: `${jwks.url}/keys`, BoundIssuer: oidc.url })],
    ['OIDC discovery', 'by-oidc', () => ({ OIDCDiscoveryURL: oidc.url })],
  ])(
    'logs in through %s: two matching rules bind a service identity and a role; the token works, is listed by method, and logs out',
    async (_what, name, source) => {
      const created = await d.api('PUT', '/v1/acl/auth-method', { body: jwtMethod(name, source()) });
      expect(created.status).toBe(200);
      expect(created.body).toMatchObject({ Name: name, Type: 'jwt', MaxTokenTTL: '10m0s' });
      await twoRules(name);
      const bearer = await sign({ service: 'billing', team: 'payments', groups: ['admins', 'dev'] });
      const before = Date.now();
      const login = await d.api('POST', '/v1/acl/login', {
        token: undefined,
        body: { AuthMethod: name, BearerToken: bearer, Meta: { pod: 'billing-1' } },
      });
      expect(login.status).toBe(200);
      const t = login.body as Record<string, any>;
      expect(t.AuthMethod).toBe(name);
      expect(t.Local).toBe(true);
      expect(t.Description).toBe('token created via login: {"pod":"billing-1"}');
      expect(t.ServiceIdentities).toEqual([{ ServiceName: 'billing' }]);
      expect(t.Roles.map((r: { Name: string }) => r.Name)).toEqual(['admins']);
      const expires = Date.parse(t.ExpirationTime as string);
      expect(expires).toBeGreaterThanOrEqual(before + 600_000 - 1000);
      expect(expires).toBeLessThanOrEqual(Date.now() + 600_000 + 1000);
      // It authenticates, and shows in tokens?authmethod=.
      const self = await d.api('GET', '/v1/acl/token/self', { token: t.SecretID });
      expect(self.status).toBe(200);
      expect(self.body.AccessorID).toBe(t.AccessorID);
      const listed = await d.api('GET', `/v1/acl/tokens?authmethod=${name}`);
      expect((listed.body as Array<{ AccessorID: string }>).map((x) => x.AccessorID)).toEqual([t.AccessorID]);
      // Logout deletes it.
      const out = await d.api('POST', '/v1/acl/logout', { token: t.SecretID });
      expect(out.status).toBe(200);
      expect((await d.api('GET', `/v1/acl/token/${t.AccessorID}`)).status).toBe(404);
      expect((await d.api('GET', '/v1/acl/token/self', { token: t.SecretID })).status).toBe(403);
    },
  );

  describe('refusals', () => {
    const method = 'refusals';
    beforeAll(async () => {
      expect(
        (await d.api('PUT', '/v1/acl/auth-method', { body: jwtMethod(method, { JWKSURL: `${jwks.url}/keys`, BoundIssuer: oidc.url }) }))
          .status,
      ).toBe(200);
      expect(
        (
          await d.api('PUT', '/v1/acl/binding-rule', {
            body: { AuthMethod: method, BindType: 'service', BindName: 'web', Selector: 'value.team == "payments"' },
          })
        ).status,
      ).toBe(200);
    });
    const login = (bearer: string, authMethod = method) =>
      d.api('POST', '/v1/acl/login', { token: undefined, body: { AuthMethod: authMethod, BearerToken: bearer } });
    const now = () => Math.floor(Date.now() / 1000);

    it.each([
      [
        'a bad signature',
        () => sign({ team: 'payments' }, { key: other.privateKey }),
        'Permission denied: failed to verify the signature of the bearer token',
      ],
      [
        'the wrong issuer',
        () => sign({ team: 'payments' }, { iss: 'https://elsewhere.example' }),
        'Permission denied: the bearer token\'s issuer "https://elsewhere.example" is not the bound issuer',
      ],
      [
        'the wrong audience',
        () => sign({ team: 'payments' }, { aud: 'someone-else' }),
        'Permission denied: the bearer token is not meant for any of the bound audiences',
      ],
      ['an expired token', () => sign({ team: 'payments' }, { exp: now() - 3600 }), 'Permission denied: the bearer token is expired'],
      [
        'a token not yet valid',
        () => sign({ team: 'payments' }, { nbf: now() + 3600 }),
        'Permission denied: the bearer token is not yet valid',
      ],
      [
        'an unsupported algorithm',
        () =>
          new SignJWT({ team: 'payments' })
            .setProtectedHeader({ alg: 'HS256' })
            .setIssuer(oidc.url)
            .setAudience(ISSUER_AUD)
            .setExpirationTime(now() + 60)
            .sign(new TextEncoder().encode('a-shared-secret-of-32-bytes-long!')),
        'Permission denied: unsupported signing algorithm "HS256"; the method accepts RS256',
      ],
      [
        'no rule matching',
        () => sign({ team: 'marketing' }),
        'Permission denied: no binding rule of the auth method matched the bearer token',
      ],
    ])('refuses %s with 403 PERMISSION_DENIED and the reason, never the token', async (_what, make, message) => {
      const bearer = await make();
      const res = await login(bearer);
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('PERMISSION_DENIED');
      expect(res.body.message).toBe(message);
      expect(res.text).not.toContain(bearer);
    });

    it('refuses an unknown method with 403 ACL_NOT_FOUND', async () => {
      const res = await login(await sign({ team: 'payments' }), 'no-such-method');
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('ACL_NOT_FOUND');
      expect(res.body.message).toBe('ACL not found: auth method "no-such-method" not found');
    });

    it('refuses the logout of a token a login did not make', async () => {
      const res = await d.api('POST', '/v1/acl/logout');
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('PERMISSION_DENIED');
      expect(res.body.message).toBe('Permission denied: the token was not created by a login, so it cannot log out');
    });

    it('refuses malformed selectors and unknown fields when a rule is written, and writes nothing', async () => {
      const before = (await d.api('GET', `/v1/acl/binding-rules?authmethod=${method}`)).body.length;
      const bad = await d.api('PUT', '/v1/acl/binding-rule', {
        body: { AuthMethod: method, BindType: 'service', BindName: 'web', Selector: 'value.team = "payments"' },
      });
      expect(bad.status).toBe(400);
      expect(bad.body.code).toBe('INVALID_REQUEST');
      expect(bad.body.message).toBe('Invalid Binding Rule: invalid Selector: unexpected "="; did you mean "=="? (at column 12)');
      const unknown = await d.api('PUT', '/v1/acl/binding-rule', {
        body: { AuthMethod: method, BindType: 'service', BindName: 'web', Selector: 'claims.role == "x"' },
      });
      expect(unknown.status).toBe(400);
      expect(unknown.body.message).toBe(
        'Invalid Binding Rule: invalid Selector: unknown field "claims.role" (this auth method provides: value.<claim>, list.<claim>)',
      );
      const badName = await d.api('PUT', '/v1/acl/binding-rule', {
        body: { AuthMethod: method, BindType: 'service', BindName: '${value.nope}' },
      });
      expect(badName.status).toBe(400);
      expect(badName.body.message).toMatch(/^Invalid Binding Rule: invalid BindName: unknown variable \$\{value.nope\}/);
      expect((await d.api('GET', `/v1/acl/binding-rules?authmethod=${method}`)).body.length).toBe(before);
    });

    it('takes any value.<key> or list.<key> selector on a jwt method without claim mappings, as Consul does; the rule simply does not match an unmapped claim', async () => {
      const bare = {
        Name: 'bare-jwt',
        Type: 'jwt',
        Config: { JWKSURL: `${jwks.url}/keys`, BoundIssuer: oidc.url, BoundAudiences: [ISSUER_AUD] },
      };
      expect((await d.api('PUT', '/v1/acl/auth-method', { body: bare })).status).toBe(200);
      const rule = await d.api('PUT', '/v1/acl/binding-rule', {
        body: { AuthMethod: 'bare-jwt', BindType: 'service', BindName: 'web', Selector: 'value.iss=="test-issuer"' },
      });
      expect(rule.status).toBe(200);
      expect(rule.body.Selector).toBe('value.iss=="test-issuer"');
      const list = await d.api('PUT', '/v1/acl/binding-rule', {
        body: { AuthMethod: 'bare-jwt', BindType: 'service', BindName: 'web', Selector: '"x" in list.groups' },
      });
      expect(list.status).toBe(200);
      const outside = await d.api('PUT', '/v1/acl/binding-rule', {
        body: { AuthMethod: 'bare-jwt', BindType: 'service', BindName: 'web', Selector: 'foo.bar == "x"' },
      });
      expect(outside.status).toBe(400);
      expect(outside.body.message).toBe(
        'Invalid Binding Rule: invalid Selector: unknown field "foo.bar" (this auth method provides: value.<claim>, list.<claim>)',
      );
      const login = await d.api('POST', '/v1/acl/login', {
        token: undefined,
        body: { AuthMethod: 'bare-jwt', BearerToken: await sign({ team: 'payments' }) },
      });
      expect(login.status).toBe(403);
      expect(login.body.message).toBe('Permission denied: no binding rule of the auth method matched the bearer token');
      for (const id of [rule.body.ID, list.body.ID]) expect((await d.api('DELETE', `/v1/acl/binding-rule/${id}`)).status).toBe(200);
      expect((await d.api('DELETE', '/v1/acl/auth-method/bare-jwt')).status).toBe(200);
    });

    it("keeps a templated-policy binding's BindVars as Consul writes them (name, given in any case) and binds the template with them at login", async () => {
      const rule = await d.api('PUT', '/v1/acl/binding-rule', {
        body: {
          AuthMethod: method,
          BindType: 'templated-policy',
          BindName: 'builtin/service',
          BindVars: { Name: 'svc-${value.team}' },
          Selector: 'value.team == "templates"',
        },
      });
      expect(rule.status).toBe(200);
      expect(rule.body.BindVars).toEqual({ name: 'svc-${value.team}' });
      expect((await d.api('GET', `/v1/acl/binding-rule/${rule.body.ID}`)).body.BindVars).toEqual({ name: 'svc-${value.team}' });
      const login = await d.api('POST', '/v1/acl/login', {
        token: undefined,
        body: { AuthMethod: method, BearerToken: await sign({ team: 'templates' }) },
      });
      expect(login.status).toBe(200);
      expect(login.body.TemplatedPolicies).toEqual([{ TemplateName: 'builtin/service', TemplateVariables: { name: 'svc-templates' } }]);
      expect((await d.api('DELETE', `/v1/acl/token/${login.body.AccessorID}`)).body).toBe(true);
      expect((await d.api('DELETE', `/v1/acl/binding-rule/${rule.body.ID}`)).body).toBe(true);
    });

    it('refuses auth methods Consul refuses, with its words', async () => {
      const two = await d.api('PUT', '/v1/acl/auth-method', {
        body: jwtMethod('two-sources', { JWKSURL: `${jwks.url}/keys`, OIDCDiscoveryURL: oidc.url }),
      });
      expect(two.status).toBe(400);
      expect(two.body.message).toBe(
        "Invalid Auth Method: exactly one of 'JWTValidationPubKeys', 'JWKSURL', or 'OIDCDiscoveryURL' must be set",
      );
      const type = await d.api('PUT', '/v1/acl/auth-method', { body: { Name: 'x', Type: 'ldap' } });
      expect(type.status).toBe(400);
      expect(type.body.message).toBe('Invalid Auth Method: Type should be one of: jwt, kubernetes');
      expect((await d.api('GET', '/v1/acl/auth-method/two-sources')).status).toBe(404);
    });
  });

  it('verifies with static public keys too', async () => {
    const pem = await exportSPKI(keys.publicKey);
    expect(
      (await d.api('PUT', '/v1/acl/auth-method', { body: jwtMethod('static', { JWTValidationPubKeys: [pem], BoundIssuer: oidc.url }) }))
        .status,
    ).toBe(200);
    expect(
      (await d.api('PUT', '/v1/acl/binding-rule', { body: { AuthMethod: 'static', BindType: 'policy', BindName: 'web-read' } })).status,
    ).toBe(200);
    const res = await d.api('POST', '/v1/acl/login', {
      token: undefined,
      body: { AuthMethod: 'static', BearerToken: await sign({ team: 'x' }) },
    });
    expect(res.status).toBe(200);
    expect(res.body.Policies?.map((p) => p.Name)).toEqual(['web-read']);
  });

  describe('kubernetes', () => {
    beforeAll(async () => {
      const m = await d.api('PUT', '/v1/acl/auth-method', {
        body: { Name: 'kube', Type: 'kubernetes', Config: { Host: kube.url, ServiceAccountJWT: reviewerJWT } },
      });
      expect(m.status).toBe(200);
      expect(
        (
          await d.api('PUT', '/v1/acl/binding-rule', {
            body: {
              AuthMethod: 'kube',
              BindType: 'service',
              BindName: '${serviceaccount.name}',
              Selector: 'serviceaccount.namespace == "payments"',
            },
          })
        ).status,
      ).toBe(200);
    });

    it('gives a reviewed service account its token', async () => {
      const res = await d.api('POST', '/v1/acl/login', { token: undefined, body: { AuthMethod: 'kube', BearerToken: 'aaa.bbb.good' } });
      expect(res.status).toBe(200);
      expect(res.body.ServiceIdentities).toEqual([{ ServiceName: 'api' }]);
      expect(res.body.AuthMethod).toBe('kube');
    });

    it('answers 403 when the review rejects the token', async () => {
      const res = await d.api('POST', '/v1/acl/login', { token: undefined, body: { AuthMethod: 'kube', BearerToken: 'aaa.bbb.revoked' } });
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('PERMISSION_DENIED');
      expect(res.body.message).toBe('Permission denied: the service account token was not accepted by the TokenReview');
    });

    it('hides the reviewer JWT from callers without acl:write', async () => {
      const policy = await d.api('PUT', '/v1/acl/policy', { body: { Name: 'acl-read', Rules: 'acl = "read"' } });
      const token = await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: policy.body.ID }] } });
      const read = await d.api('GET', '/v1/acl/auth-method/kube', { token: token.body.SecretID });
      expect(read.status).toBe(200);
      expect(read.body.Config?.ServiceAccountJWT).toBe('<hidden>');
      expect((await d.api('GET', '/v1/acl/auth-method/kube')).body.Config?.ServiceAccountJWT).toBe(reviewerJWT);
    });
  });

  it('deletes a method with its rules and the tokens it issued, in one change', async () => {
    expect((await d.api('PUT', '/v1/acl/auth-method', { body: jwtMethod('doomed', { JWKSURL: `${jwks.url}/keys` }) })).status).toBe(200);
    await twoRules('doomed');
    const tokens: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await d.api('POST', '/v1/acl/login', {
        token: undefined,
        body: { AuthMethod: 'doomed', BearerToken: await sign({ service: `s${i}`, team: 'payments', groups: [] }) },
      });
      expect(res.status).toBe(200);
      tokens.push(res.body.AccessorID);
    }
    const before = Number((await d.api('GET', '/v1/acl/tokens')).headers.get('x-service-index'));
    const del = await d.api('DELETE', '/v1/acl/auth-method/doomed');
    expect(del.status).toBe(200);
    expect(del.body).toBe(true);
    expect((await d.api('GET', '/v1/acl/binding-rules?authmethod=doomed')).body).toEqual([]);
    expect((await d.api('GET', '/v1/acl/tokens?authmethod=doomed')).body).toEqual([]);
    for (const id of tokens) expect((await d.api('GET', `/v1/acl/token/${id}`)).status).toBe(404);
    // One change: the token list's index moved by exactly one.
    expect(Number((await d.api('GET', '/v1/acl/tokens')).headers.get('x-service-index'))).toBe(before + 1);
  });
});
