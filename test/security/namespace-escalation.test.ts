import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDaemon, apiFor, startTestDaemon } from '../helpers/test-daemon.js';

describe('a namespace administrator cannot climb into other namespaces', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d.close());

  it('gains nothing outside its namespace by linking a default-namespace policy with namespace blocks', async () => {
    await d.api('PUT', '/v1/acl/policy?ns=a', { body: { Name: 'a-admin', Rules: 'acl = "write"' } });
    await d.api('PUT', '/v1/acl/policy', {
      body: { Name: 'b-admin', Rules: 'namespace "b" {\n  acl = "write"\n}\npartition_prefix "" {\n  acl = "write"\n}' },
    });
    const victim = (await d.api('PUT', '/v1/acl/token?ns=b', { body: { Description: 'lives in b' } })).body;
    const admin = (
      await d.api('PUT', '/v1/acl/token', { body: { Namespace: 'a', Description: 'admin of a', Policies: [{ Name: 'a-admin' }] } })
    ).body;
    const api = apiFor(d.url, admin.SecretID);

    // The link itself is allowed (the policy resolves through the default namespace) ...
    const relinked = await api('PUT', `/v1/acl/token/${admin.AccessorID}`, {
      body: { Description: 'admin of a', Policies: [{ Name: 'a-admin' }, { Name: 'b-admin' }] },
    });
    expect(relinked.status).toBe(200);
    expect(relinked.body.Policies?.map((p) => p.Name)).toEqual(['a-admin', 'b-admin']);

    // ... but grants nothing in b, nor in the default namespace.
    for (const path of ['/v1/acl/tokens?ns=b', `/v1/acl/token/${victim.AccessorID}?ns=b`, '/v1/acl/tokens?ns=default']) {
      const res = await api('GET', path);
      expect(res.status, path).toBe(403);
      expect(res.body.code).toBe('PERMISSION_DENIED');
    }
    const wildcard = await api('GET', '/v1/acl/tokens?ns=*');
    expect(wildcard.status).toBe(200);
    expect(wildcard.text).not.toContain(victim.SecretID);
    expect(wildcard.body.every((t: { Namespace: string }) => t.Namespace === 'a')).toBe(true);
    expect((await api('PUT', '/v1/acl/token?ns=b', { body: {} })).status).toBe(403);
  });

  it('still lets a default-namespace token administer b through the same policy', async () => {
    const root = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'namespace admin', Policies: [{ Name: 'b-admin' }] } })).body;
    const res = await apiFor(d.url, root.SecretID)('GET', '/v1/acl/tokens?ns=b');
    expect(res.status).toBe(200);
    expect(res.body.every((t: { SecretID: string }) => t.SecretID !== '<hidden>')).toBe(true);
  });
});
