import { randomUUID } from 'node:crypto';
import { exportSPKI, generateKeyPair } from 'jose';
import Consul from 'consul';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDaemon, apiFor, startTestDaemon } from '../helpers/test-daemon.js';

// What Consul's own clients trip on (third pass): an auth method's TokenLocality and Config keys
// as Consul keeps them, a write on a missing object failing in every client, and error bodies as
// Consul sends them (text/plain) unless JSON is asked for, the code always in a header.

const REVIEWER_JWT = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJyZXZpZXdlciJ9.c2ln';

describe('Consul clients, third pass', () => {
  let d: TestDaemon;
  let pem = '';
  beforeAll(async () => {
    d = await startTestDaemon();
    pem = await exportSPKI((await generateKeyPair('RS256')).publicKey);
  });
  afterAll(() => d.close());

  describe('auth methods as Consul keeps them', () => {
    it.each([
      ['local', 'local'],
      ['global', 'global'],
      ['', undefined],
      [undefined, undefined],
    ])('echoes TokenLocality %j as %j on create, read, list and update', async (sent, shown) => {
      const Name = `loc-${sent ?? 'absent'}-${randomUUID().slice(0, 8)}`;
      const body = { Name, Type: 'jwt', Config: { JWTValidationPubKeys: [pem] }, ...(sent !== undefined ? { TokenLocality: sent } : {}) };
      const created = await d.api('PUT', '/v1/acl/auth-method', { body });
      expect(created.status).toBe(200);
      expect(created.body.TokenLocality).toBe(shown);
      expect((await d.api('GET', `/v1/acl/auth-method/${Name}`)).body.TokenLocality).toBe(shown);
      const listed = (await d.api('GET', '/v1/acl/auth-methods')).body.find((m: { Name: string }) => m.Name === Name);
      expect(listed?.TokenLocality).toBe(shown);
      expect('TokenLocality' in listed!).toBe(shown !== undefined);
      const updated = await d.api('PUT', `/v1/acl/auth-method/${Name}`, { body: { ...body, Description: 'again' } });
      expect(updated.body.TokenLocality).toBe(shown);
    });

    it("refuses a TokenLocality that is neither, with Consul's words", async () => {
      const res = await d.api('PUT', '/v1/acl/auth-method', {
        body: { Name: 'bad-loc', Type: 'jwt', TokenLocality: 'planet', Config: { JWTValidationPubKeys: [pem] } },
      });
      expect(res.status).toBe(400);
      expect(res.body.message).toBe("Invalid Auth Method: TokenLocality should be one of 'local' or 'global'");
    });

    it('matches Config keys in any case (as Ansible sends them) and writes them back as Consul spells them', async () => {
      const jwt = await d.api('PUT', '/v1/acl/auth-method', {
        body: {
          Name: 'ansible-jwt',
          Type: 'jwt',
          Config: { JWTValidationPubkeys: [pem], boundissuer: 'https://issuer.example', CLAIMMAPPINGS: { sub: 'user' } },
        },
      });
      expect(jwt.status).toBe(200);
      expect(jwt.body.Config).toEqual({
        JWTValidationPubKeys: [pem],
        BoundIssuer: 'https://issuer.example',
        ClaimMappings: { sub: 'user' },
      });
      expect((await d.api('GET', '/v1/acl/auth-method/ansible-jwt')).body.Config).toEqual(jwt.body.Config);
      // The canonical name counts for binding rules too: value.user is a mapped claim.
      const rule = await d.api('PUT', '/v1/acl/binding-rule', {
        body: { AuthMethod: 'ansible-jwt', BindType: 'service', BindName: '${value.user}' },
      });
      expect(rule.status).toBe(200);

      const kube = await d.api('PUT', '/v1/acl/auth-method', {
        body: { Name: 'ansible-k8s', Type: 'kubernetes', Config: { host: 'http://127.0.0.1:1', serviceaccountjwt: REVIEWER_JWT } },
      });
      expect(kube.status).toBe(200);
      expect(kube.body.Config).toEqual({ Host: 'http://127.0.0.1:1', ServiceAccountJWT: REVIEWER_JWT });
    });

    it('still refuses a Config key that matches no field, and two keys for one field', async () => {
      const unknown = await d.api('PUT', '/v1/acl/auth-method', {
        body: { Name: 'x1', Type: 'jwt', Config: { JWTValidationPubKeys: [pem], Nope: 1 } },
      });
      expect([unknown.status, unknown.body.message]).toEqual([400, 'Invalid Auth Method: unknown Config field "Nope" for type "jwt"']);
      const twice = await d.api('PUT', '/v1/acl/auth-method', {
        body: { Name: 'x2', Type: 'jwt', Config: { JWTValidationPubKeys: [pem], jwtvalidationpubkeys: [pem] } },
      });
      expect([twice.status, twice.body.message]).toEqual([
        400,
        'Invalid Auth Method: Config fields "JWTValidationPubKeys" and "jwtvalidationpubkeys" both set JWTValidationPubKeys',
      ]);
      const kube = await d.api('PUT', '/v1/acl/auth-method', {
        body: { Name: 'x3', Type: 'kubernetes', Config: { Host: 'http://127.0.0.1:1', ServiceAccountJWT: REVIEWER_JWT, Jwks: 'x' } },
      });
      expect([kube.status, kube.body.message]).toEqual([400, 'Invalid Auth Method: unknown Config field "Jwks" for type "kubernetes"']);
      for (const name of ['x1', 'x2', 'x3']) expect((await d.api('GET', `/v1/acl/auth-method/${name}`)).status).toBe(404);
    });
  });

  describe('a write naming an object that does not exist', () => {
    const missing = randomUUID();
    it.each([
      ['PUT', `/v1/acl/token/${missing}`, { Description: 'x' }, `Cannot find token "${missing}"`],
      ['PUT', `/v1/acl/token/${missing}/clone`, {}, `Cannot find token "${missing}"`],
      ['PUT', `/v1/acl/policy/${missing}`, { Name: 'ghost' }, `Cannot find policy "${missing}"`],
      ['PUT', `/v1/acl/role/${missing}`, { Name: 'ghost' }, `Cannot find role "${missing}"`],
      [
        'PUT',
        `/v1/acl/binding-rule/${missing}`,
        { AuthMethod: 'ansible-jwt', BindType: 'service', BindName: 'x' },
        `Cannot find binding rule "${missing}"`,
      ],
      ['PUT', '/v1/acl/auth-method/ghost', { Name: 'ghost', Type: 'jwt', Config: {} }, 'Cannot find auth method "ghost"'],
    ])("%s %s is 400 with Consul's message, and writes nothing", async (method, path, body, message) => {
      const index = async () => (await d.api('GET', '/v1/acl/policies')).headers.get('x-service-index');
      const before = await index();
      const res = await d.api(method, path, { body });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ statusCode: 400, error: 'Bad Request', code: 'INVALID_REQUEST', message });
      expect(await index()).toBe(before);
    });

    it.each([
      `/v1/acl/token/${missing}`,
      `/v1/acl/policy/${missing}`,
      `/v1/acl/role/${missing}`,
      `/v1/acl/binding-rule/${missing}`,
      '/v1/acl/auth-method/ghost',
    ])('GET %s stays 404', async (path) => {
      const res = await d.api('GET', path);
      expect([res.status, res.body.code]).toEqual([404, 'NOT_FOUND']);
    });
  });

  describe('error bodies', () => {
    const raw = async (method: string, path: string, headers: Record<string, string> = {}, body?: string) => {
      const res = await fetch(`${d.url}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
      return {
        status: res.status,
        type: res.headers.get('content-type'),
        code: res.headers.get('x-service-error-code'),
        text: await res.text(),
      };
    };

    it('are text/plain with the message, as Consul sends them, when no JSON is asked for; the code in X-Service-Error-Code', async () => {
      for (const accept of [undefined, '*/*', 'text/plain', 'text/plain, application/json;q=0.5', 'application/json;q=0']) {
        const res = await raw('GET', '/v1/acl/token/self', {
          'X-Consul-Token': 'not-a-known-secret',
          ...(accept ? { Accept: accept } : {}),
        });
        expect(res, `Accept: ${accept}`).toEqual({
          status: 403,
          type: 'text/plain; charset=utf-8',
          code: 'ACL_NOT_FOUND',
          text: 'ACL not found',
        });
      }
    });

    it('are JSON with the code when the request prefers application/json', async () => {
      for (const accept of [
        'application/json',
        'application/json, text/plain;q=0.9',
        'text/plain;q=0.5, application/json',
        'application/problem+json',
      ]) {
        const res = await raw('GET', '/v1/acl/token/self', { 'X-Consul-Token': 'not-a-known-secret', Accept: accept });
        expect(res.type, accept).toBe('application/json; charset=utf-8');
        expect(res.code).toBe('ACL_NOT_FOUND');
        expect(JSON.parse(res.text)).toEqual({ statusCode: 403, error: 'Forbidden', code: 'ACL_NOT_FOUND', message: 'ACL not found' });
      }
    });

    it('carry the code on every kind of error: 400, 403, 404, 405, 409, and an unknown path', async () => {
      const token = { 'X-Consul-Token': d.management };
      const cases: Array<[string, string, Record<string, string>, string | undefined, number, string, RegExp]> = [
        ['PUT', '/v1/acl/policy', token, '{"Name":"ok","Polices":1}', 400, 'INVALID_REQUEST', /Polices/],
        [
          'PUT',
          '/v1/acl/policy',
          {},
          '{"Name":"anon"}',
          403,
          'PERMISSION_DENIED',
          /^Permission denied: anonymous token lacks permission 'acl:write'/,
        ],
        ['GET', `/v1/acl/policy/${randomUUID()}`, token, undefined, 404, 'NOT_FOUND', /^Cannot find policy "/],
        ['POST', '/v1/acl/policies', token, '{}', 405, 'METHOD_NOT_ALLOWED', /^Method POST is not allowed/],
        ['GET', '/v1/nowhere', token, undefined, 404, 'NOT_FOUND', /^No such endpoint: GET \/v1\/nowhere$/],
      ];
      await d.api('PUT', '/v1/acl/policy', { body: { Name: 'taken' } });
      cases.push(['PUT', '/v1/acl/policy', token, '{"Name":"taken"}', 409, 'CONFLICT', /already exists/]);
      for (const [method, path, headers, body, status, code, message] of cases) {
        const res = await raw(method, path, headers, body);
        expect([res.status, res.code, res.type], `${method} ${path}`).toEqual([status, code, 'text/plain; charset=utf-8']);
        expect(res.text).toMatch(message);
      }
    });

    it("reach node-consul (the npm consul package) as our message on a refused bootstrap, not 'forbidden'", async () => {
      const u = new URL(d.url);
      const consul = new Consul({ host: u.hostname, port: Number(u.port) });
      const err = (await consul.acl.bootstrap().then(
        () => undefined,
        (e: unknown) => e,
      )) as Error & { response?: { statusCode: number } };
      expect(err).toBeInstanceOf(Error);
      expect(err.response?.statusCode).toBe(403);
      expect(err.message).toMatch(/^Permission denied: ACL bootstrap no longer allowed \(reset index: \d+\)$/);
    });

    it('reach our own client with the code and message', async () => {
      const { WatchwordClient, WatchwordApiError } = await import('../../src/client/index.js');
      const client = new WatchwordClient({ address: d.url, token: 'not-a-known-secret' });
      const err = await client.tokens.readSelf().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(WatchwordApiError);
      expect(err).toMatchObject({ status: 403, code: 'ACL_NOT_FOUND', message: 'ACL not found' });
      // Answers of other servers (text only) still give the code from the header.
      const api = apiFor(d.url);
      expect((await api('GET', '/v1/acl/token/self', { token: 'x', headers: { Accept: 'text/plain' } })).text).toBe('ACL not found');
    });
  });
});
