import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

const PATH = '/v1/internal/acl/authorizer';

/** GET /v1/internal/acl/authorizer: what an enforcing client compiles for a token (docs/enforcing-client.md, "Enforcing policies in your service"). */
describe('GET /v1/internal/acl/authorizer', () => {
  let d: TestDaemon;
  let web: { ID: string; Rules?: string };
  let role: { ID: string };
  let token: { SecretID: string; AccessorID: string };
  beforeAll(async () => {
    d = await startTestDaemon();
    web = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'web', Rules: 'service "web" { policy = "write" }' } })).body;
    const keys = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'keys', Rules: 'key_prefix "app/" { policy = "list" }' } })).body;
    role = (await d.api('PUT', '/v1/acl/role', { body: { Name: 'keys', Policies: [{ ID: keys.ID }] } })).body;
    token = (
      await d.api('PUT', '/v1/acl/token', {
        body: { Policies: [{ ID: web.ID }], Roles: [{ ID: role.ID }], ServiceIdentities: [{ ServiceName: 'api' }] },
      })
    ).body;
  });
  afterAll(() => d.close());

  const read = (secret: string | undefined, query = '') => d.api('GET', `${PATH}${query}`, { token: secret });

  it("answers the token's place, the default policy and the text of every policy reaching it, and no secret", async () => {
    const res = await read(token.SecretID);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ AccessorID: token.AccessorID, Namespace: 'default', Partition: 'default', DefaultPolicy: 'deny' });
    const ids = res.body.Policies.map((p: { ID: string }) => p.ID);
    expect(ids).toContain(web.ID);
    expect(res.body.Policies.find((p: { ID: string }) => p.ID === web.ID)).toEqual({
      ID: web.ID,
      Rules: web.Rules,
      Namespace: 'default',
      Partition: 'default',
      Builtin: false,
    });
    expect(res.body.Policies.some((p: { Rules: string }) => p.Rules.includes('key_prefix "app/"'))).toBe(true);
    expect(res.body.Policies.some((p: { Rules: string }) => p.Rules.includes('service "api"'))).toBe(true);
    expect(res.text).not.toContain(token.SecretID);
    expect(res.headers.get('x-service-contenthash')).toMatch(/^[0-9a-f]{16}$/);
    expect(res.headers.get('x-consul-contenthash')).toBe(res.headers.get('x-service-contenthash'));
  });

  it('answers for the anonymous token without a secret, and 403 for an unknown one', async () => {
    const anon = await read(undefined);
    expect(anon.status).toBe(200);
    expect(anon.body.AccessorID).toBe('00000000-0000-0000-0000-000000000002');
    const unknown = await read('6f1e0b0c-0000-4000-8000-00000000dead');
    expect(unknown.status).toBe(403);
    expect(unknown.body).toMatchObject({ code: 'ACL_NOT_FOUND' });
  });

  it('refuses a malformed hash or wait with 400', async () => {
    expect((await read(token.SecretID, '?hash=zz')).status).toBe(400);
    expect((await read(token.SecretID, '?hash=abc&wait=soon')).status).toBe(400);
  });

  it('with ?hash=, holds until the wait runs out when nothing about the token changes', async () => {
    const first = await read(token.SecretID);
    const hash = first.headers.get('x-service-contenthash') as string;
    const other = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'unrelated', Rules: 'node_prefix "" { policy = "read" }' } })).body;
    const started = Date.now();
    const held = await read(token.SecretID, `?hash=${hash}&wait=300ms`);
    expect(held.status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(held.headers.get('x-service-contenthash')).toBe(hash);
    await d.api('DELETE', `/v1/acl/policy/${other.ID}`);
  });

  it('with ?hash=, answers as soon as a linked policy changes, with the new rules and a new hash', async () => {
    const first = await read(token.SecretID);
    const hash = first.headers.get('x-service-contenthash') as string;
    const held = read(token.SecretID, `?hash=${hash}&wait=20s`);
    await new Promise((r) => setTimeout(r, 100));
    await d.api('PUT', `/v1/acl/policy/${web.ID}`, { body: { Name: 'web', Rules: 'service "web" { policy = "read" }' } });
    const res = await held;
    expect(res.status).toBe(200);
    expect(res.headers.get('x-service-contenthash')).not.toBe(hash);
    expect(res.body.Policies.find((p) => p.ID === web.ID)?.Rules).toBe('service "web" { policy = "read" }');
  });

  it('with ?hash=, answers as soon as a role of the token changes', async () => {
    const first = await read(token.SecretID);
    const hash = first.headers.get('x-service-contenthash') as string;
    const held = read(token.SecretID, `?hash=${hash}&wait=20s`);
    await new Promise((r) => setTimeout(r, 100));
    await d.api('PUT', `/v1/acl/role/${role.ID}`, { body: { Name: 'keys', Policies: [] } });
    const res = await held;
    expect(res.status).toBe(200);
    expect(res.body.Policies.some((p: { Rules: string }) => p.Rules.includes('key_prefix "app/"'))).toBe(false);
  });

  it('with ?hash=, answers 403 as soon as the token is deleted', async () => {
    const doomed = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: web.ID }] } })).body;
    const hash = (await read(doomed.SecretID)).headers.get('x-service-contenthash') as string;
    const held = read(doomed.SecretID, `?hash=${hash}&wait=20s`);
    await new Promise((r) => setTimeout(r, 100));
    const started = Date.now();
    await d.api('DELETE', `/v1/acl/token/${doomed.AccessorID}`);
    const res = await held;
    expect(res.status).toBe(403);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('is in the OpenAPI document', async () => {
    const doc = await d.api('GET', '/v1/openapi.json');
    expect(doc.status).toBe(200);
    expect(doc.body.paths[PATH]?.get).toBeDefined();
    expect(doc.body.paths['/v1/internal/acl/authorize']?.post).toBeDefined();
  });
});
