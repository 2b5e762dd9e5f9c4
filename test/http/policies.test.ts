import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

const GM = '00000000-0000-0000-0000-000000000001';
const RO = '00000000-0000-0000-0000-000000000002';

describe('policy endpoints', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d.close());

  it('creates, reads by ID and name, lists without rules', async () => {
    const rules = 'acl = "read"\nkey_prefix "app/" {\n  policy = "write"\n}';
    const res = await d.api('PUT', '/v1/acl/policy', {
      body: { Name: 'App-Reader', Description: 'reads', Rules: rules, Datacenters: ['dc1'] },
    });
    expect(res.status).toBe(200);
    const p = res.body;
    expect(p).toMatchObject({
      Name: 'App-Reader',
      Description: 'reads',
      Rules: rules,
      Datacenters: ['dc1'],
      Namespace: 'default',
      Partition: 'default',
    });
    expect(p.ID).toMatch(/^[0-9a-f-]{36}$/);
    expect(p.CreateIndex).toBe(p.ModifyIndex);
    expect((await d.api('GET', `/v1/acl/policy/${p.ID}`)).body).toEqual(p);
    expect((await d.api('GET', '/v1/acl/policy/name/App-Reader')).body).toEqual(p);
    const list = (await d.api('GET', '/v1/acl/policies')).body as Array<{ ID: string; Rules?: string }>;
    const item = list.find((x) => x.ID === p.ID);
    expect(item).toBeDefined();
    expect(item?.Rules).toBeUndefined();
    expect(list.map((x) => x.ID)).toEqual(expect.arrayContaining([GM, RO]));
  });

  it('serves the two built-ins with their documented rules', async () => {
    const gm = (await d.api('GET', `/v1/acl/policy/${GM}`)).body;
    expect(gm.Name).toBe('global-management');
    expect(gm.Rules).toContain('acl = "write"');
    expect(gm.Rules).toContain('service_prefix "" {\n  policy = "write"\n  intentions = "write"\n}');
    const ro = (await d.api('GET', '/v1/acl/policy/name/builtin/global-read-only')).body;
    expect(ro.ID).toBe(RO);
    expect(ro.Rules).toContain('acl = "read"');
  });

  it('accepts JSON rules and the Consul HCL constructs', async () => {
    const json = JSON.stringify({
      acl: 'read',
      key_prefix: { '': { policy: 'list' } },
      service: { web: { policy: 'write', intentions: 'read' } },
    });
    expect((await d.api('PUT', '/v1/acl/policy', { body: { Name: 'json-rules', Rules: json } })).status).toBe(200);
    const hcl =
      '# comment\n// another\n/* block */\nservice "web" { policy = "read" }\nnamespace "team" {\n  acl = "write"\n}\noperator = "read"';
    expect((await d.api('PUT', '/v1/acl/policy', { body: { Name: 'hcl-rules', Rules: hcl } })).status).toBe(200);
    expect((await d.api('PUT', '/v1/acl/policy', { body: { Name: 'a/b', Rules: '' } })).status).toBe(200);
    expect((await d.api('PUT', '/v1/acl/policy', { body: { Name: 'x'.repeat(128) } })).status).toBe(200);
  });

  const invalid: Array<[string, unknown, number, string, string]> = [
    ['no name', { Rules: '' }, 400, 'INVALID_REQUEST', 'Invalid Policy: no Name is set'],
    ['a name with spaces', { Name: 'has space' }, 400, 'INVALID_REQUEST', 'invalid Name'],
    ['a leading slash', { Name: '/lead' }, 400, 'INVALID_REQUEST', 'invalid Name'],
    ['two slashes', { Name: 'a/b/c' }, 400, 'INVALID_REQUEST', 'invalid Name'],
    // One limit, in one message, whichever check meets the name first (the body's bound or the name's rule).
    [
      '129 characters',
      { Name: 'x'.repeat(129) },
      400,
      'INVALID_REQUEST',
      "invalid Name. Only alphanumeric characters, '-', '_' and a single '/' (not leading) are allowed, at most 128 characters",
    ],
    ['the builtin/ prefix', { Name: 'builtin/mine' }, 400, 'INVALID_REQUEST', 'reserved'],
    ['an ID on create', { ID: crypto.randomUUID(), Name: 'with-id' }, 400, 'INVALID_REQUEST', 'ID must not be set'],
    [
      'rules that do not parse',
      { Name: 'bad-hcl', Rules: 'acl = "read"\nkey_prefix "x" {\n  policy = \n}' },
      400,
      'INVALID_REQUEST',
      'Failed to parse ACL rules: At 4:1',
    ],
    ['an acl value of list', { Name: 'bad-acl', Rules: 'acl = "list"' }, 400, 'INVALID_REQUEST', 'Invalid acl policy: "list"'],
    [
      'an unknown resource',
      { Name: 'bad-res', Rules: 'widget "x" { policy = "read" }' },
      400,
      'INVALID_REQUEST',
      'unknown resource "widget"',
    ],
    [
      'a block policy that is not an access level',
      { Name: 'bad-pol', Rules: 'service "x" { policy = "admin" }' },
      400,
      'INVALID_REQUEST',
      'Invalid service policy: "admin"',
    ],
    ['broken JSON rules', { Name: 'bad-json', Rules: '{"acl": "read",}' }, 400, 'INVALID_REQUEST', 'Failed to parse ACL rules: At 1:'],
    ['a bad datacenter', { Name: 'bad-dc', Datacenters: ['DC1'] }, 400, 'INVALID_REQUEST', 'invalid datacenter name'],
    ['a duplicate name', { Name: 'pol-dup' }, 409, 'CONFLICT', 'Invalid Policy: A Policy with Name "pol-dup" already exists'],
    ['a duplicate name in another case', { Name: 'POL-DUP' }, 409, 'CONFLICT', 'already exists'],
  ];

  it.each(invalid)('refuses %s', async (_name, body, status, code, message) => {
    await d.api('PUT', '/v1/acl/policy', { body: { Name: 'pol-dup' } });
    const before = (await d.api('GET', '/v1/acl/policies')).body.length;
    const res = await d.api('PUT', '/v1/acl/policy', { body });
    expect(res.status).toBe(status);
    expect(res.body.code).toBe(code);
    expect(res.body.message).toContain(message);
    expect((await d.api('GET', '/v1/acl/policies')).body.length).toBe(before);
  });

  it('updates as a full replacement and refuses a rename onto another name', async () => {
    const p = (
      await d.api('PUT', '/v1/acl/policy', { body: { Name: 'upd', Description: 'd', Rules: 'acl = "read"', Datacenters: ['dc1'] } })
    ).body;
    await d.api('PUT', '/v1/acl/policy', { body: { Name: 'taken' } });
    const res = await d.api('PUT', `/v1/acl/policy/${p.ID}`, { body: { Name: 'upd2', Rules: 'acl = "write"' } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ID: p.ID, Name: 'upd2', Description: '', Rules: 'acl = "write"', CreateIndex: p.CreateIndex });
    expect(res.body.Datacenters).toBeUndefined();
    expect(res.body.ModifyIndex).toBeGreaterThan(p.ModifyIndex);
    const clash = await d.api('PUT', `/v1/acl/policy/${p.ID}`, { body: { Name: 'Taken' } });
    expect(clash.status).toBe(409);
    expect(clash.body.message).toContain('already exists');
    const mismatch = await d.api('PUT', `/v1/acl/policy/${p.ID}`, { body: { ID: crypto.randomUUID(), Name: 'upd2' } });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.message).toContain('do not match');
    const missing = await d.api('PUT', `/v1/acl/policy/${crypto.randomUUID()}`, { body: { Name: 'ghost' } });
    expect(missing.status).toBe(400);
    expect(missing.body.message).toMatch(/^Cannot find policy "/);
  });

  it('protects the built-ins: rules and datacenters fixed, no delete, renames allowed', async () => {
    const gm = (await d.api('GET', `/v1/acl/policy/${GM}`)).body;
    const rules = await d.api('PUT', `/v1/acl/policy/${GM}`, { body: { Name: gm.Name, Rules: 'acl = "read"' } });
    expect(rules.status).toBe(403);
    expect(rules.body.code).toBe('NOT_PERMITTED');
    expect(rules.body.message).toContain('Changing the Rules');
    const dcs = await d.api('PUT', `/v1/acl/policy/${GM}`, { body: { Name: gm.Name, Rules: gm.Rules, Datacenters: ['dc1'] } });
    expect(dcs.status).toBe(403);
    const del = await d.api('DELETE', `/v1/acl/policy/${GM}`);
    expect(del.status).toBe(403);
    expect(del.body.code).toBe('NOT_PERMITTED');
    const ro = (await d.api('GET', `/v1/acl/policy/${RO}`)).body;
    const keepName = await d.api('PUT', `/v1/acl/policy/${RO}`, {
      body: { Name: ro.Name, Description: 'still read-only', Rules: ro.Rules },
    });
    expect(keepName.status).toBe(200);
    expect(keepName.body.Description).toBe('still read-only');
    const renamed = await d.api('PUT', `/v1/acl/policy/${GM}`, { body: { Name: 'root', Description: 'renamed', Rules: gm.Rules } });
    expect(renamed.status).toBe(200);
    expect(renamed.body.Name).toBe('root');
    // The management token still works after the rename.
    expect((await d.api('GET', '/v1/acl/tokens')).status).toBe(200);
    await d.api('PUT', `/v1/acl/policy/${GM}`, { body: { Name: 'global-management', Description: gm.Description, Rules: gm.Rules } });
  });

  it('deletes with true then false, and 404s reads of what is gone', async () => {
    const p = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'short-lived' } })).body;
    expect((await d.api('DELETE', `/v1/acl/policy/${p.ID}`)).text).toBe('true');
    expect((await d.api('DELETE', `/v1/acl/policy/${p.ID}`)).text).toBe('false');
    expect((await d.api('GET', `/v1/acl/policy/${p.ID}`)).status).toBe(404);
    const byName = await d.api('GET', '/v1/acl/policy/name/short-lived');
    expect(byName.status).toBe(404);
    expect(byName.body.code).toBe('NOT_FOUND');
  });
});
