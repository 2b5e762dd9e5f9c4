import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDaemon, apiFor, startTestDaemon } from '../helpers/test-daemon.js';

const ANON = '00000000-0000-0000-0000-000000000002';

describe('authorization and redaction', () => {
  let d: TestDaemon;
  let reader: { AccessorID: string; SecretID: string };
  let writer: { AccessorID: string; SecretID: string };
  let nobody: { AccessorID: string; SecretID: string };
  let victim: { AccessorID: string; SecretID: string };

  beforeAll(async () => {
    d = await startTestDaemon();
    const ro = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'acl-read', Rules: 'acl = "read"' } })).body;
    const rw = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'acl-write', Rules: 'acl = "write"' } })).body;
    const other = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'keys-only', Rules: 'key_prefix "" { policy = "write" }' } })).body;
    reader = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: ro.ID }] } })).body;
    writer = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: rw.ID }] } })).body;
    nobody = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: other.ID }] } })).body;
    victim = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'victim' } })).body;
  });
  afterAll(() => d.close());

  it('an acl:read caller sees <hidden> for every SecretID on read and list', async () => {
    const api = apiFor(d.url, reader.SecretID);
    const read = await api('GET', `/v1/acl/token/${victim.AccessorID}`);
    expect(read.status).toBe(200);
    expect(read.body.SecretID).toBe('<hidden>');
    expect(read.body.AccessorID).toBe(victim.AccessorID);
    const list = await api('GET', '/v1/acl/tokens');
    expect(list.status).toBe(200);
    expect(list.body.length).toBeGreaterThanOrEqual(5);
    for (const t of list.body) expect(t.SecretID).toBe('<hidden>');
    expect(list.text).not.toContain(victim.SecretID);
    expect(list.text).not.toContain(d.management);
    const expanded = await api('GET', `/v1/acl/token/${victim.AccessorID}?expanded`);
    expect(expanded.body.SecretID).toBe('<hidden>');
  });

  it('an acl:read caller may not write', async () => {
    const api = apiFor(d.url, reader.SecretID);
    const res = await api('PUT', '/v1/acl/token', { body: {} });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('PERMISSION_DENIED');
    // The reason follows (docs/operator-insight.md): the source and the rule that decided, as written.
    expect(res.body.message).toBe(
      `Permission denied: token with AccessorID '${reader.AccessorID}' lacks permission 'acl:write'; decided by policy "acl-read": acl = "read"`,
    );
    expect((await api('DELETE', `/v1/acl/token/${victim.AccessorID}`)).status).toBe(403);
    expect((await api('PUT', '/v1/acl/policy', { body: { Name: 'nope' } })).status).toBe(403);
  });

  it('an acl:write caller sees real secrets', async () => {
    const api = apiFor(d.url, writer.SecretID);
    expect((await api('GET', `/v1/acl/token/${victim.AccessorID}`)).body.SecretID).toBe(victim.SecretID);
    const list = (await api('GET', '/v1/acl/tokens')).body as Array<{ AccessorID: string; SecretID: string }>;
    expect(list.find((t) => t.AccessorID === victim.AccessorID)?.SecretID).toBe(victim.SecretID);
    expect((await api('PUT', '/v1/acl/token', { body: {} })).status).toBe(200);
  });

  it('a token without any acl rule is denied reads, and default deny applies', async () => {
    const res = await apiFor(d.url, nobody.SecretID)('GET', '/v1/acl/tokens');
    expect(res.status).toBe(403);
    expect(res.body.message).toContain("lacks permission 'acl:read'");
  });

  it('a request with no token gets 403 with the anonymous-token hint', async () => {
    const res = await apiFor(d.url)('GET', '/v1/acl/tokens');
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ statusCode: 403, error: 'Forbidden', code: 'PERMISSION_DENIED' });
    expect(res.body.message).toContain('anonymous token');
    expect(res.body.message).toContain('does not specify a token');
  });

  it('an unknown secret gets 403 ACL not found, on every kind of route', async () => {
    const api = apiFor(d.url, crypto.randomUUID());
    for (const [method, path] of [
      ['GET', '/v1/acl/tokens'],
      ['GET', '/v1/acl/token/self'],
      ['PUT', '/v1/acl/token'],
      ['GET', '/v1/acl/policies'],
    ] as const) {
      const res = await api(method, path, method === 'PUT' ? { body: {} } : {});
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('ACL_NOT_FOUND');
      expect(res.body.message).toContain('ACL not found');
    }
  });

  it('reads the token from ?token, X-Service-Token, X-Consul-Token and Authorization: Bearer, first non-empty wins', async () => {
    const api = apiFor(d.url);
    const ok = (r: { status: number }) => expect(r.status).toBe(200);
    ok(await api('GET', `/v1/acl/tokens?token=${writer.SecretID}`));
    ok(await api('GET', '/v1/acl/tokens', { headers: { 'X-Service-Token': writer.SecretID } }));
    ok(await api('GET', '/v1/acl/tokens', { headers: { 'X-Consul-Token': writer.SecretID } }));
    ok(await api('GET', '/v1/acl/tokens', { headers: { Authorization: `Bearer ${writer.SecretID}` } }));
    const first = await api('GET', `/v1/acl/token/self?token=${reader.SecretID}`, { headers: { 'X-Service-Token': writer.SecretID } });
    expect(first.body.AccessorID).toBe(reader.AccessorID);
    const emptyQuery = await api('GET', '/v1/acl/token/self?token=', { headers: { 'X-Consul-Token': writer.SecretID } });
    expect(emptyQuery.body.AccessorID).toBe(writer.AccessorID);
  });

  it('giving the anonymous token a policy grants it to requests without a token', async () => {
    const ro = (await d.api('GET', '/v1/acl/policy/name/acl-read')).body;
    const upd = await d.api('PUT', `/v1/acl/token/${ANON}`, { body: { Description: 'Anonymous Token', Policies: [{ ID: ro.ID }] } });
    expect(upd.status).toBe(200);
    const res = await apiFor(d.url)('GET', '/v1/acl/tokens');
    expect(res.status).toBe(200);
    for (const t of res.body) expect(t.SecretID).toBe('<hidden>');
    await d.api('PUT', `/v1/acl/token/${ANON}`, { body: { Description: 'Anonymous Token' } });
    expect((await apiFor(d.url)('GET', '/v1/acl/tokens')).status).toBe(403);
  });

  it('a policy scoped to another datacenter grants nothing here', async () => {
    const p = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'elsewhere', Rules: 'acl = "write"', Datacenters: ['dc9'] } })).body;
    const t = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: p.ID }] } })).body;
    expect((await apiFor(d.url, t.SecretID)('GET', '/v1/acl/tokens')).status).toBe(403);
  });

  it('deny wins over write from another policy', async () => {
    const deny = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'deny-acl', Rules: 'acl = "deny"' } })).body;
    const rw = (await d.api('GET', '/v1/acl/policy/name/acl-write')).body;
    const t = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: rw.ID }, { ID: deny.ID }] } })).body;
    expect((await apiFor(d.url, t.SecretID)('GET', '/v1/acl/tokens')).status).toBe(403);
  });

  it('a templated policy that grants acl (builtin/nomad-server) authorizes writes', async () => {
    const t = (await d.api('PUT', '/v1/acl/token', { body: { TemplatedPolicies: [{ TemplateName: 'builtin/nomad-server' }] } })).body;
    expect((await apiFor(d.url, t.SecretID)('PUT', '/v1/acl/token', { body: {} })).status).toBe(200);
  });

  it('an updated policy takes effect on the next request', async () => {
    const p = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'flip', Rules: 'acl = "read"' } })).body;
    const t = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: p.ID }] } })).body;
    const api = apiFor(d.url, t.SecretID);
    expect((await api('PUT', '/v1/acl/token', { body: {} })).status).toBe(403);
    await d.api('PUT', `/v1/acl/policy/${p.ID}`, { body: { Name: 'flip', Rules: 'acl = "write"' } });
    expect((await api('PUT', '/v1/acl/token', { body: {} })).status).toBe(200);
  });
});

describe('default_policy allow', () => {
  it('lets any token read ACLs but never write them', async () => {
    const d = await startTestDaemon({ config: { default_policy: 'allow' } });
    try {
      const plain = (await d.api('PUT', '/v1/acl/token', { body: {} })).body;
      const api = apiFor(d.url, plain.SecretID);
      const list = await api('GET', '/v1/acl/tokens');
      expect(list.status).toBe(200);
      for (const t of list.body) expect(t.SecretID).toBe('<hidden>');
      expect((await api('PUT', '/v1/acl/token', { body: {} })).status).toBe(403);
    } finally {
      await d.close();
    }
  });
});
