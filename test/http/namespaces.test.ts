import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDaemon, apiFor, startTestDaemon } from '../helpers/test-daemon.js';

describe('namespaces and partitions', () => {
  let d: TestDaemon;
  let writerA: { AccessorID: string; SecretID: string; Namespace: string };

  beforeAll(async () => {
    d = await startTestDaemon();
    await d.api('PUT', '/v1/acl/policy?ns=a', { body: { Name: 'ns-writer', Rules: 'acl = "write"' } });
    writerA = (
      await d.api('PUT', '/v1/acl/token', { body: { Namespace: 'a', Description: 'writer in a', Policies: [{ Name: 'ns-writer' }] } })
    ).body;
  });
  afterAll(() => d.close());

  it('keeps names unique per namespace: the same role name lives in a and b', async () => {
    const ra = await d.api('PUT', '/v1/acl/role', { body: { Name: 'shared', Namespace: 'a' } });
    const rb = await d.api('PUT', '/v1/acl/role?ns=b', { body: { Name: 'shared' } });
    expect(ra.status).toBe(200);
    expect(rb.status).toBe(200);
    expect(ra.body.Namespace).toBe('a');
    expect(rb.body.Namespace).toBe('b');
    expect(ra.body.ID).not.toBe(rb.body.ID);
    expect((await d.api('PUT', '/v1/acl/role?ns=a', { body: { Name: 'SHARED' } })).status).toBe(409);
    expect((await d.api('GET', '/v1/acl/role/name/shared?ns=b')).body.ID).toBe(rb.body.ID);
    expect((await d.api('GET', '/v1/acl/role/name/shared')).status).toBe(404);
    // A role is only found in its own namespace.
    expect((await d.api('GET', `/v1/acl/role/${ra.body.ID}?ns=b`)).status).toBe(404);
    expect((await d.api('GET', `/v1/acl/role/${ra.body.ID}?ns=a`)).status).toBe(200);
    // Policies too.
    expect((await d.api('PUT', '/v1/acl/policy?ns=b', { body: { Name: 'ns-writer' } })).status).toBe(200);
  });

  it('a token in namespace a with acl = "write" works in a and gets 403 in b', async () => {
    expect(writerA.Namespace).toBe('a');
    const api = apiFor(d.url, writerA.SecretID);
    // No ns given: the token's own namespace.
    const created = await api('PUT', '/v1/acl/token', { body: { Description: 'made by a' } });
    expect(created.status).toBe(200);
    expect(created.body.Namespace).toBe('a');
    expect((await api('GET', '/v1/acl/tokens')).body.every((t: { Namespace: string }) => t.Namespace === 'a')).toBe(true);
    for (const [method, path, body] of [
      ['GET', '/v1/acl/tokens?ns=b', undefined],
      ['GET', '/v1/acl/roles?ns=b', undefined],
      ['PUT', '/v1/acl/token?ns=b', {}],
      ['PUT', '/v1/acl/role', { Name: 'sneaky', Namespace: 'b' }],
      ['GET', '/v1/acl/policies', { headers: true }],
    ] as const) {
      const res =
        body && 'headers' in body
          ? await api(method, path, { headers: { 'X-Service-Namespace': 'b' } })
          : await api(method, path, body !== undefined ? { body } : {});
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.body.code).toBe('PERMISSION_DENIED');
      expect(res.body.message).toContain('in namespace "b"');
    }
  });

  it('finds a token only in its own namespace', async () => {
    expect((await d.api('GET', `/v1/acl/token/${writerA.AccessorID}`)).status).toBe(404);
    const read = await d.api('GET', `/v1/acl/token/${writerA.AccessorID}?ns=a`);
    expect(read.status).toBe(200);
    expect(read.body.Policies?.[0]?.Name).toBe('ns-writer');
    expect((await d.api('DELETE', `/v1/acl/token/${writerA.AccessorID}`)).text).toBe('false');
  });

  it('a default-namespace token with namespace_prefix "" { acl = "read" } lists every namespace with ns=*, secrets hidden', async () => {
    await d.api('PUT', '/v1/acl/token?ns=c', { body: { Description: 'in c' } });
    await d.api('PUT', '/v1/acl/policy', { body: { Name: 'read-all-ns', Rules: 'namespace_prefix "" {\n  acl = "read"\n}' } });
    const reader = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ Name: 'read-all-ns' }] } })).body;
    const api = apiFor(d.url, reader.SecretID);
    const all = await api('GET', '/v1/acl/tokens?ns=*');
    expect(all.status).toBe(200);
    const namespaces = new Set(all.body.map((t: { Namespace: string }) => t.Namespace));
    expect([...namespaces].sort()).toEqual(['a', 'c', 'default']);
    for (const t of all.body) expect(t.SecretID).toBe('<hidden>');
    expect(all.text).not.toContain(writerA.SecretID);
    const roles = await api('GET', '/v1/acl/roles?ns=*');
    expect(new Set(roles.body.map((r: { Namespace: string }) => r.Namespace))).toEqual(new Set(['a', 'b']));
    expect((await api('GET', '/v1/acl/policies?ns=*')).body.some((p: { Namespace: string }) => p.Namespace === 'b')).toBe(true);
    // Read only: writes are refused everywhere.
    expect((await api('PUT', '/v1/acl/token?ns=c', { body: {} })).status).toBe(403);
  });

  it('ns=* shows a namespace-scoped token only what it may read', async () => {
    const res = await apiFor(d.url, writerA.SecretID)('GET', '/v1/acl/tokens?ns=*');
    expect(res.status).toBe(200);
    expect(res.body.length).toBeGreaterThan(0);
    expect(res.body.every((t: { Namespace: string }) => t.Namespace === 'a')).toBe(true);
  });

  it('chooses the namespace from the body, then ?ns=, then the header (X-Service- or X-Consul-)', async () => {
    const both = await d.api('PUT', '/v1/acl/token?ns=q', { body: { Namespace: 'body' }, headers: { 'X-Service-Namespace': 'header' } });
    expect(both.body.Namespace).toBe('body');
    const query = await d.api('PUT', '/v1/acl/token?ns=q', { body: {}, headers: { 'X-Service-Namespace': 'header' } });
    expect(query.body.Namespace).toBe('q');
    const header = await d.api('PUT', '/v1/acl/token', { body: {}, headers: { 'X-Service-Namespace': 'header' } });
    expect(header.body.Namespace).toBe('header');
    const consul = await d.api('PUT', '/v1/acl/token', { body: {}, headers: { 'X-Consul-Namespace': 'consul-ns' } });
    expect(consul.body.Namespace).toBe('consul-ns');
  });

  it('resolves links in the object’s namespace, falling back to default', async () => {
    await d.api('PUT', '/v1/acl/policy', { body: { Name: 'only-default' } });
    await d.api('PUT', '/v1/acl/policy?ns=e', { body: { Name: 'both-places', Description: 'in e' } });
    const inDefault = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'both-places', Description: 'in default' } })).body;
    const t = (await d.api('PUT', '/v1/acl/token?ns=e', { body: { Policies: [{ Name: 'only-default' }, { Name: 'both-places' }] } })).body;
    const names = await Promise.all(
      (t.Policies ?? []).map(async (l: { ID: string }) => {
        const here = await d.api('GET', `/v1/acl/policy/${l.ID}?ns=e`);
        return here.status === 200 ? `e:${here.body.Name}` : `default:${(await d.api('GET', `/v1/acl/policy/${l.ID}`)).body.Name}`;
      }),
    );
    expect(names).toEqual(['default:only-default', 'e:both-places']);
    expect(t.Policies?.map((l) => l.ID)).not.toContain(inDefault.ID);
    // A policy of another non-default namespace cannot be linked.
    const other = (await d.api('PUT', '/v1/acl/policy?ns=f', { body: { Name: 'f-only' } })).body;
    const bad = await d.api('PUT', '/v1/acl/token?ns=e', { body: { Policies: [{ ID: other.ID }] } });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toContain('No such ACL policy with ID');
  });

  it('scopes objects by partition as well', async () => {
    const p1 = await d.api('PUT', '/v1/acl/role?partition=p1', { body: { Name: 'part-role' } });
    expect(p1.body).toMatchObject({ Partition: 'p1', Namespace: 'default' });
    const p2 = await d.api('PUT', '/v1/acl/role', { body: { Name: 'part-role', Partition: 'p2' } });
    expect(p2.status).toBe(200);
    expect((await d.api('GET', '/v1/acl/role/name/part-role', { headers: { 'X-Consul-Partition': 'p1' } })).body.ID).toBe(p1.body.ID);
    expect((await d.api('GET', '/v1/acl/roles')).body.some((r: { Name: string }) => r.Name === 'part-role')).toBe(false);
    expect((await d.api('PUT', '/v1/acl/role?partition=Bad!', { body: { Name: 'x' } })).status).toBe(400);
  });

  it('accepts the authmethod and authmethod-ns filters (no token has an auth method without login, so the list is empty)', async () => {
    const res = await d.api('GET', '/v1/acl/tokens?authmethod=m&authmethod-ns=a');
    expect(res.status).toBe(200);
    expect(res.body).toEqual([]);
  });
});
