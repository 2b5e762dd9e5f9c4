import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

const AUTHORIZE = '/v1/internal/acl/authorize';

describe('POST /v1/internal/acl/authorize', () => {
  let d: TestDaemon;
  let web: { ID: string };
  let webToken: { SecretID: string; AccessorID: string };
  beforeAll(async () => {
    d = await startTestDaemon();
    web = (
      await d.api('PUT', '/v1/acl/policy', {
        body: { Name: 'web-writer', Rules: 'service "web" { policy = "write" }\nkey_prefix "web/" { policy = "list" }' },
      })
    ).body;
    webToken = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: web.ID }] } })).body;
  });
  afterAll(() => d.close());

  const ask = (checks: unknown, token?: string, path = AUTHORIZE, method = 'POST') =>
    d.api<Array<{ Allow: boolean }> & { code?: string; message?: string }>(method, path, {
      body: checks,
      ...(token !== undefined ? { token } : {}),
    });

  it("answers the same array, in order, each check with Allow added, for the request's token", async () => {
    const checks = [
      { Resource: 'service', Segment: 'web', Access: 'write' },
      { Resource: 'service', Segment: 'api', Access: 'read' },
      { Resource: 'key', Segment: 'web/config', Access: 'list' },
      { Resource: 'key', Segment: 'web/config', Access: 'write' },
      { Resource: 'intention', Segment: 'web', Access: 'read' },
      { Resource: 'acl', Access: 'read' },
    ];
    const res = await ask(checks, webToken.SecretID);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toEqual(checks.map((c, i) => ({ ...c, Allow: [true, false, true, false, true, false][i] })));
  });

  it("?explain adds each answer's Reason: the source and rule as written, the rule that lost, the default policy", async () => {
    const role = (
      await d.api('PUT', '/v1/acl/role', {
        body: { Name: 'web-ops', Policies: [{ ID: web.ID }], ServiceIdentities: [{ ServiceName: 'api' }] },
      })
    ).body;
    const deny = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'no-web-keys', Rules: 'key_prefix "web/" { policy = "deny" }' } }))
      .body;
    const token = (await d.api('PUT', '/v1/acl/token', { body: { Roles: [{ ID: role.ID }], Policies: [{ ID: deny.ID }] } })).body;
    const checks = [
      { Resource: 'service', Segment: 'web', Access: 'write' },
      { Resource: 'key', Segment: 'web/a', Access: 'read' },
      { Resource: 'service', Segment: 'api', Access: 'write' },
      { Resource: 'operator', Access: 'read' },
    ];
    const res = await ask(checks, token.SecretID, `${AUTHORIZE}?explain`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      {
        ...checks[0],
        Allow: true,
        Reason: {
          Source: 'role',
          ID: role.ID,
          Name: 'web-ops',
          Policy: { ID: web.ID, Name: 'web-writer' },
          Rule: 'service "web" { policy = "write" }',
          // The exact rule beat the service identity's prefix rule.
          Lost: {
            Source: 'role',
            ID: role.ID,
            Name: 'web-ops',
            Identity: 'service identity "api"',
            Rule: 'service_prefix "" { policy = "read" }',
          },
        },
      },
      {
        ...checks[1],
        Allow: false,
        Reason: {
          Source: 'policy',
          ID: deny.ID,
          Name: 'no-web-keys',
          Rule: 'key_prefix "web/" { policy = "deny" }',
          Lost: {
            Source: 'role',
            ID: role.ID,
            Name: 'web-ops',
            Policy: { ID: web.ID, Name: 'web-writer' },
            Rule: 'key_prefix "web/" { policy = "list" }',
          },
        },
      },
      {
        ...checks[2],
        Allow: true,
        Reason: {
          Source: 'role',
          ID: role.ID,
          Name: 'web-ops',
          Identity: 'service identity "api"',
          Rule: 'service "api" { policy = "write" }',
          Lost: {
            Source: 'role',
            ID: role.ID,
            Name: 'web-ops',
            Identity: 'service identity "api"',
            Rule: 'service_prefix "" { policy = "read" }',
          },
        },
      },
      { ...checks[3], Allow: false, Reason: { Source: 'default_policy', Rule: 'default_policy = "deny"' } },
    ]);
    // Without ?explain the answer is as before: no Reason.
    expect((await ask(checks, token.SecretID)).body.map((a: object) => Object.keys(a).includes('Reason'))).toEqual([
      false,
      false,
      false,
      false,
    ]);
    // A refusal elsewhere carries the same reason, in the 403 and in its audit line.
    const refused = await d.api('GET', '/v1/acl/tokens', { token: token.SecretID });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toBe(
      `Permission denied: token with AccessorID '${token.AccessorID}' lacks permission 'acl:read'; decided by the default policy: default_policy = "deny"`,
    );
    const audit = await d.api('GET', `/v1/operator/audit?type=refused&accessor=${token.AccessorID}`);
    expect(audit.body.Events.at(-1)).toMatchObject({
      Code: 'PERMISSION_DENIED',
      Decision: { Source: 'default_policy', Rule: 'default_policy = "deny"' },
    });
  });

  it('takes PUT too, field names in any case, and Consul-style lower-casing of Access', async () => {
    const res = await ask([{ resource: 'service', SEGMENT: 'web', access: 'WRITE' }], webToken.SecretID, AUTHORIZE, 'PUT');
    expect(res.status).toBe(200);
    expect(res.body).toEqual([{ Resource: 'service', Segment: 'web', Access: 'WRITE', Allow: true }]);
  });

  it('judges the management token: everything is allowed', async () => {
    const checks = ['acl', 'operator', 'keyring', 'mesh', 'peering'].map((r) => ({ Resource: r, Access: 'write' }));
    checks.push(
      ...['agent', 'event', 'node', 'query', 'session', 'service', 'key', 'intention'].map((r) => ({
        Resource: r,
        Segment: 'x',
        Access: 'write',
      })),
    );
    const res = await ask(checks);
    expect(res.status).toBe(200);
    expect(res.body.every((a: { Allow: boolean }) => a.Allow)).toBe(true);
  });

  it('judges the anonymous token when no token is sent (default deny)', async () => {
    const anon = await d.api('POST', AUTHORIZE, { token: undefined, body: [{ Resource: 'service', Segment: 'web', Access: 'read' }] });
    expect(anon.status).toBe(200);
    expect(anon.body).toEqual([{ Resource: 'service', Segment: 'web', Access: 'read', Allow: false }]);
  });

  it('refuses an unknown secret with 403 ACL not found', async () => {
    const res = await ask([{ Resource: 'service', Segment: 'web', Access: 'read' }], '6f1e0b0c-0000-4000-8000-00000000dead');
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ statusCode: 403, code: 'ACL_NOT_FOUND' });
    expect(res.body.message).toContain('ACL not found');
  });

  it.each([
    [
      'an object, not an array',
      { Resource: 'service' },
      'Request decode failed: the body must be a JSON array of checks [{"Resource", "Segment", "Access"}]',
    ],
    ['an empty array', [], 'Request decode failed: at least one check is required'],
    [
      '65 checks',
      Array.from({ length: 65 }, () => ({ Resource: 'acl', Access: 'read' })),
      'Request decode failed: at most 64 checks per request, got 65',
    ],
    [
      'an element that is not an object',
      [{ Resource: 'acl', Access: 'read' }, 'acl'],
      'checks[1]: must be an object {"Resource", "Segment", "Access"}',
    ],
    [
      'an unknown resource',
      [
        { Resource: 'acl', Access: 'read' },
        { Resource: 'acl', Access: 'read' },
        { Resource: 'acl', Access: 'read' },
        { Resource: 'servce', Segment: 'web', Access: 'read' },
      ],
      'checks[3]: unknown resource "servce"; one of acl, operator, keyring, mesh, peering, agent, event, node, query, session, service, key, intention',
    ],
    ['no Resource', [{ Segment: 'web', Access: 'read' }], 'checks[0]: Resource is required'],
    ['no Access', [{ Resource: 'service', Segment: 'web' }], 'checks[0]: Access is required'],
    [
      'an access the resource does not have',
      [{ Resource: 'service', Segment: 'web', Access: 'list' }],
      'checks[0]: access "list" is not one of read, write for resource "service"',
    ],
    [
      'an unknown access',
      [{ Resource: 'key', Segment: 'k', Access: 'admin' }],
      'checks[0]: access "admin" is not one of read, list, write, write-prefix for resource "key"',
    ],
    [
      'a segmented resource without Segment',
      [{ Resource: 'node', Access: 'read' }],
      'checks[0]: resource "node" needs a Segment (the name of the node)',
    ],
    ['an unknown field', [{ Resource: 'acl', Access: 'read', Allow: true }], 'checks[0]: unknown field "Allow"'],
    ['a field given twice', [{ Resource: 'acl', resource: 'acl', Access: 'read' }], 'checks[0]: field "Resource" is given more than once'],
    ['a Segment that is not a string', [{ Resource: 'service', Segment: 7, Access: 'read' }], 'checks[0]: Segment must be a string'],
    [
      'a Segment over 4096 characters',
      [{ Resource: 'key', Segment: 'k'.repeat(4097), Access: 'read' }],
      'checks[0]: Segment is longer than 4096 characters',
    ],
    [
      'a malformed Namespace',
      [{ Resource: 'service', Segment: 'web', Access: 'read', Namespace: 'Bad Name' }],
      'checks[0]: Invalid namespace name "Bad Name": use 1 to 63 lowercase letters, digits and \'-\', starting with a letter or digit',
    ],
  ])('refuses %s with 400 naming the element', async (_what, body, message) => {
    const res = await ask(body, webToken.SecretID);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ statusCode: 400, error: 'Bad Request', code: 'INVALID_REQUEST', message });
  });

  it('refuses malformed JSON with 400, and a wrong method with 405 and Allow', async () => {
    const bad = await d.api('POST', AUTHORIZE, { rawBody: '[{"Resource": ', headers: { 'Content-Type': 'application/json' } });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/^Request decode failed: malformed JSON/);
    const get = await d.api('GET', AUTHORIZE);
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST, PUT, OPTIONS');
  });

  it("judges each check in its Namespace, else ?ns=, else the token's own", async () => {
    const team = (
      await d.api('PUT', '/v1/acl/policy', {
        body: { Name: 'team-services', Namespace: 'team', Rules: 'service_prefix "" { policy = "write" }' },
      })
    ).body;
    const token = (await d.api('PUT', '/v1/acl/token', { body: { Namespace: 'team', Policies: [{ ID: team.ID }] } })).body;
    const check = { Resource: 'service', Segment: 'web', Access: 'write' };
    const own = await ask([check, { ...check, Namespace: 'default' }], token.SecretID);
    expect(own.body.map((a: { Allow: boolean }) => a.Allow)).toEqual([true, false]);
    const viaQuery = await ask([check, { ...check, Namespace: 'team' }], token.SecretID, `${AUTHORIZE}?ns=default`);
    expect(viaQuery.body.map((a: { Allow: boolean }) => a.Allow)).toEqual([false, true]);
  });

  it('sees a policy update and a role change in the very next decision', async () => {
    const policy = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'changing', Rules: 'service "db" { policy = "read" }' } })).body;
    const role = (await d.api('PUT', '/v1/acl/role', { body: { Name: 'changing-role' } })).body;
    const token = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: policy.ID }], Roles: [{ ID: role.ID }] } })).body;
    const checks = [
      { Resource: 'service', Segment: 'db', Access: 'write' },
      { Resource: 'node', Segment: 'n1', Access: 'write' },
    ];
    const allows = async () => (await ask(checks, token.SecretID)).body.map((a: { Allow: boolean }) => a.Allow);
    expect(await allows()).toEqual([false, false]);
    expect(
      (await d.api('PUT', `/v1/acl/policy/${policy.ID}`, { body: { Name: 'changing', Rules: 'service "db" { policy = "write" }' } }))
        .status,
    ).toBe(200);
    expect(await allows()).toEqual([true, false]);
    expect(
      (
        await d.api('PUT', `/v1/acl/role/${role.ID}`, {
          body: { Name: 'changing-role', NodeIdentities: [{ NodeName: 'n1', Datacenter: 'dc1' }] },
        })
      ).status,
    ).toBe(200);
    expect(await allows()).toEqual([true, true]);
    expect(
      (
        await d.api('PUT', `/v1/acl/role/${role.ID}`, {
          body: { Name: 'changing-role', NodeIdentities: [{ NodeName: 'n1', Datacenter: 'dc9' }] },
        })
      ).status,
    ).toBe(200);
    expect(await allows()).toEqual([true, false]);
    expect((await d.api('DELETE', `/v1/acl/policy/${policy.ID}`)).body).toBe(true);
    expect(await allows()).toEqual([false, false]);
  });

  it('counts decisions in watchword_authorize_checks_total{allowed}', async () => {
    const count = async (allowed: boolean) => {
      const text = (await d.api('GET', '/v1/agent/metrics?format=prometheus')).text;
      const m = new RegExp(`^watchword_authorize_checks_total\\{allowed="${allowed}"\\} (\\d+)$`, 'm').exec(text);
      return m ? Number(m[1]) : 0;
    };
    const [yes, no] = [await count(true), await count(false)];
    await ask(
      [
        { Resource: 'service', Segment: 'web', Access: 'write' },
        { Resource: 'service', Segment: 'web', Access: 'write' },
        { Resource: 'service', Segment: 'api', Access: 'write' },
      ],
      webToken.SecretID,
    );
    expect(await count(true)).toBe(yes + 2);
    expect(await count(false)).toBe(no + 1);
  });

  it('answers the same through every way in: ?pretty, a chunked body, an unknown query parameter; a body over 1 MiB is 413', async () => {
    const checks = [
      { Resource: 'service', Segment: 'web', Access: 'write' },
      { Resource: 'key', Segment: 'web/a', Access: 'write' },
    ];
    const expected = [
      { ...checks[0], Allow: true },
      { ...checks[1], Allow: false },
    ];
    const pretty = await ask(checks, webToken.SecretID, `${AUTHORIZE}?pretty`);
    expect(pretty.status).toBe(200);
    expect(pretty.body).toEqual(expected);
    expect(pretty.text).toContain('\n    ');
    const other = await ask(checks, webToken.SecretID, `${AUTHORIZE}?stale`);
    expect(other.body).toEqual(expected);
    const chunks = [JSON.stringify(checks).slice(0, 10), JSON.stringify(checks).slice(10)];
    const stream = new ReadableStream({
      start(c) {
        for (const x of chunks) c.enqueue(new TextEncoder().encode(x));
        c.close();
      },
    });
    const chunked = await fetch(`${d.url}${AUTHORIZE}`, {
      method: 'POST',
      headers: { 'X-Service-Token': webToken.SecretID },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(chunked.status).toBe(200);
    expect(await chunked.json()).toEqual(expected);
    const big = await d.api('POST', AUTHORIZE, { rawBody: `[${'{"Resource":"acl","Access":"read"},'.repeat(40_000)}{}]` });
    expect(big.status).toBe(413);
    expect(big.body.code).toBe('BODY_TOO_LARGE');
    const secretInQuery = await d.api('POST', `${AUTHORIZE}?token=${webToken.SecretID}&ns=default`, { token: undefined, body: checks });
    expect(secretInQuery.body).toEqual(expected);
  });

  it('counts its requests in the HTTP metrics under the route pattern', async () => {
    const count = async () => {
      const text = (await d.api('GET', '/v1/agent/metrics?format=prometheus')).text;
      const m = /^watchword_http_requests_total\{method="POST",route="\/v1\/internal\/acl\/authorize",status="200"\} (\d+)$/m.exec(text);
      return m ? Number(m[1]) : 0;
    };
    const before = await count();
    await ask([{ Resource: 'acl', Access: 'read' }]);
    await ask([{ Resource: 'acl', Access: 'read' }]);
    expect(await count()).toBe(before + 2);
  });

  it('is in the OpenAPI document', async () => {
    const doc = (await d.api('GET', '/v1/openapi.json')).body;
    expect(Object.keys(doc.paths[AUTHORIZE])).toEqual(expect.arrayContaining(['post', 'put']));
    expect(doc.paths[AUTHORIZE].post.requestBody.content['application/json'].schema).toMatchObject({
      type: 'array',
      minItems: 1,
      maxItems: 64,
    });
  });
});
