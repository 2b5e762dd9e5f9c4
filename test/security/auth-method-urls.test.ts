import { type Server, createServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

// Where an auth method may point (docs/security.md, "Security"): https only (http only to this machine), no
// credentials in a URL, a Kubernetes Host without path or query, an optional allow-list;
// URLs shown without acl:write lose credentials and query strings; a login never reads a
// remote end's answer back to the caller.

const REVIEWER = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJyZXZpZXdlciJ9.c2ln';

describe('auth-method URLs', () => {
  let d: TestDaemon;
  let internal: Server;
  let internalURL = '';
  const hits: string[] = [];

  beforeAll(async () => {
    // An internal service that would answer anything, and a TokenReview that says too much.
    internal = createServer((req, res) => {
      hits.push(`${req.method} ${req.url}`);
      if (req.url?.startsWith('/apis/authentication.k8s.io/v1/tokenreviews')) {
        res
          .writeHead(201, { 'Content-Type': 'application/json' })
          .end(JSON.stringify({ status: { authenticated: false, error: 'internal detail: user table at db-7.corp' } }));
        return;
      }
      res.writeHead(200, { 'Content-Type': 'text/html' }).end('<html>admin panel: 42 users deleted</html>');
    });
    await new Promise<void>((r) => internal.listen(0, '127.0.0.1', () => r()));
    internalURL = `http://127.0.0.1:${(internal.address() as { port: number }).port}`;
    d = await startTestDaemon();
  });

  afterAll(async () => {
    await d?.close();
    await new Promise<void>((r) => internal.close(() => r()));
  });

  const method = (Name: string, Type: string, Config: Record<string, unknown>) =>
    d.api('PUT', '/v1/acl/auth-method', { body: { Name, Type, Config } });

  it.each([
    [
      'a plain http:// JWKS URL to another machine',
      'jwt',
      { JWKSURL: 'http://10.9.8.7/keys' },
      /JWKSURL must be an https:\/\/ URL \(plain http:\/\/ is allowed only for this machine\)/,
    ],
    ['credentials in a JWKS URL', 'jwt', { JWKSURL: 'https://svc:S3cr3tP4ss@idp.example/keys' }, /JWKSURL must not carry credentials/],
    [
      'credentials in an OIDC discovery URL',
      'jwt',
      { OIDCDiscoveryURL: 'https://user@idp.example' },
      /OIDCDiscoveryURL must not carry credentials/,
    ],
    [
      'a Kubernetes Host with a path and query',
      'kubernetes',
      { Host: 'https://k8s.internal/admin/users/delete?id=1', CACert: '-----BEGIN CERTIFICATE-----x', ServiceAccountJWT: REVIEWER },
      /Host must be scheme:\/\/host\[:port\], with no path, query or fragment/,
    ],
    [
      'a plain http:// Kubernetes Host to another machine (its ServiceAccountJWT would travel in the clear)',
      'kubernetes',
      { Host: 'http://k8s.internal:8080', ServiceAccountJWT: REVIEWER },
      /Host must be an https:\/\/ URL/,
    ],
  ])('refuses %s', async (_what, type, config, message) => {
    const res = await method(`m-${Math.random().toString(36).slice(2, 8)}`, type, config);
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(message);
    expect(res.text).not.toContain('S3cr3tP4ss');
  });

  it('a login reads nothing back from the remote end: which step failed, not what it said', async () => {
    expect((await method('k8s', 'kubernetes', { Host: internalURL, ServiceAccountJWT: REVIEWER })).status).toBe(200);
    const refused = await d.api('POST', '/v1/acl/login', { token: undefined, body: { AuthMethod: 'k8s', BearerToken: 'aaa.bbb.ccc' } });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toBe('Permission denied: the service account token was not accepted by the TokenReview');
    expect(refused.text).not.toContain('db-7.corp');
    // A JWKS URL aimed at the internal service: the caller learns that it answered HTML, not the HTML.
    expect((await method('probe', 'jwt', { JWKSURL: `${internalURL}/admin?token=T0K3N` })).status).toBe(200);
    const probe = await d.api('POST', '/v1/acl/login', {
      token: undefined,
      body: { AuthMethod: 'probe', BearerToken: 'eyJhbGciOiJSUzI1NiJ9.eyJleHAiOjF9.c2ln' },
    });
    expect(probe.status).toBe(403);
    expect(probe.body.message).toMatch(
      new RegExp(`fetching the JWKS from ${internalURL}/admin failed: it answered HTTP 200 with something that is not JSON`),
    );
    expect(probe.text).not.toMatch(/admin panel|deleted|T0K3N/);
  });

  it('shows a URL without its credentials and query string to callers without acl:write', async () => {
    expect((await method('queried', 'jwt', { JWKSURL: `${internalURL}/keys?api_key=K3Y` })).status).toBe(200);
    const policy = await d.api('PUT', '/v1/acl/policy', { body: { Name: 'acl-reader', Rules: 'acl = "read"' } });
    const reader = await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: policy.body.ID }] } });
    const asReader = await d.api('GET', '/v1/acl/auth-method/queried', { token: reader.body.SecretID });
    expect(asReader.status).toBe(200);
    expect(asReader.body.Config?.JWKSURL).toBe(`${internalURL}/keys`);
    expect(asReader.text).not.toContain('K3Y');
    const asWriter = await d.api('GET', '/v1/acl/auth-method/queried');
    expect(asWriter.body.Config?.JWKSURL).toBe(`${internalURL}/keys?api_key=K3Y`);
  });

  it('with auth_method_allowed_hosts, refuses other hosts at write time and at login', async () => {
    const strict = await startTestDaemon({ config: { auth_method_allowed_hosts: 'idp.example.com,127.0.0.1' } });
    try {
      const other = await strict.api('PUT', '/v1/acl/auth-method', {
        body: { Name: 'elsewhere', Type: 'jwt', Config: { JWKSURL: 'https://evil.example.org/keys' } },
      });
      expect(other.status).toBe(400);
      expect(other.body.message).toMatch(/JWKSURL names host evil\.example\.org, which is not in auth_method_allowed_hosts/);
      expect(
        (
          await strict.api('PUT', '/v1/acl/auth-method', {
            body: { Name: 'listed', Type: 'jwt', Config: { JWKSURL: 'https://idp.example.com/keys' } },
          })
        ).status,
      ).toBe(200);
      expect(
        (
          await strict.api('PUT', '/v1/acl/auth-method', {
            body: { Name: 'local', Type: 'jwt', Config: { JWKSURL: `${internalURL}/keys` } },
          })
        ).status,
      ).toBe(200);
    } finally {
      await strict.close();
    }
  });
});
