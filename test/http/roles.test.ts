import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDaemon, apiFor, startTestDaemon } from '../helpers/test-daemon.js';

const uuid = () => crypto.randomUUID();

describe('role endpoints', () => {
  let d: TestDaemon;
  let pol: { ID: string; Name: string };
  beforeAll(async () => {
    d = await startTestDaemon();
    pol = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'role-pol', Rules: 'acl = "read"' } })).body;
  });
  afterAll(() => d.close());

  it('creates a role with links, identities and templated policies, and reads it back by ID and name', async () => {
    const res = await d.api('PUT', '/v1/acl/role', {
      body: {
        Name: 'web-role',
        Description: 'for web',
        Policies: [{ ID: pol.ID }, { Name: 'role-pol' }],
        ServiceIdentities: [
          { ServiceName: 'web', Datacenters: ['dc2'] },
          { ServiceName: 'web', Datacenters: ['dc1', 'dc2'] },
        ],
        NodeIdentities: [{ NodeName: 'n1', Datacenter: 'dc1' }],
        TemplatedPolicies: [
          { TemplateName: 'builtin/service', TemplateVariables: { name: 'api' } },
          { TemplateName: 'builtin/service', TemplateVariables: { Name: 'api' } },
        ],
      },
    });
    expect(res.status).toBe(200);
    const r = res.body;
    expect(r).toMatchObject({
      Name: 'web-role',
      Description: 'for web',
      Policies: [{ ID: pol.ID, Name: 'role-pol' }],
      ServiceIdentities: [{ ServiceName: 'web', Datacenters: ['dc1', 'dc2'] }],
      NodeIdentities: [{ NodeName: 'n1', Datacenter: 'dc1' }],
      TemplatedPolicies: [{ TemplateName: 'builtin/service', TemplateVariables: { name: 'api' } }],
      Namespace: 'default',
      Partition: 'default',
    });
    expect(r.ID).toMatch(/^[0-9a-f-]{36}$/);
    expect(Buffer.from(r.Hash, 'base64')).toHaveLength(32);
    expect(r.ModifyIndex).toBe(r.CreateIndex);
    expect((await d.api('GET', `/v1/acl/role/${r.ID}`)).body).toEqual(r);
    expect((await d.api('GET', '/v1/acl/role/name/web-role')).body).toEqual(r);
    const list = (await d.api('GET', '/v1/acl/roles')).body as Array<{ ID: string }>;
    expect(list.find((x) => x.ID === r.ID)).toEqual(r);
    const byPolicy = (await d.api('GET', `/v1/acl/roles?policy=${pol.ID}`)).body as Array<{ ID: string }>;
    expect(byPolicy.map((x) => x.ID)).toContain(r.ID);
    expect((await d.api('GET', `/v1/acl/roles?policy=${uuid()}`)).body).toEqual([]);
  });

  describe('names', () => {
    it.each([
      ['-bad', 200],
      ['bad-', 200],
      ['Abc', 200],
      ['a'.repeat(256), 200],
      ['under_score', 200],
      ['', 400],
      ['bad?bad', 400],
      ['has space', 400],
      ['slash/name', 400],
      ['a'.repeat(257), 400],
    ])('%j gives %i', async (name, status) => {
      const res = await d.api('PUT', '/v1/acl/role', { body: { Name: name } });
      expect(res.status).toBe(status);
      if (status === 400) {
        expect(res.body.code).toBe('INVALID_REQUEST');
        expect(res.body.message).toMatch(name === '' ? /Invalid Role: no Name is set/ : /Invalid Role: invalid Name/);
      } else {
        expect(res.body.Name).toBe(name);
      }
    });

    it('refuses a duplicate name, case-insensitively, on create and on rename', async () => {
      await d.api('PUT', '/v1/acl/role', { body: { Name: 'taken-role' } });
      for (const name of ['taken-role', 'TAKEN-Role']) {
        const res = await d.api('PUT', '/v1/acl/role', { body: { Name: name } });
        expect(res.status).toBe(409);
        expect(res.body.code).toBe('CONFLICT');
        expect(res.body.message).toContain(`Invalid Role: A Role with Name "${name}" already exists`);
      }
      const other = (await d.api('PUT', '/v1/acl/role', { body: { Name: 'other-role' } })).body;
      const rename = await d.api('PUT', `/v1/acl/role/${other.ID}`, { body: { Name: 'Taken-Role' } });
      expect(rename.status).toBe(409);
      expect(rename.body.message).toContain('already exists');
      // Changing only the case of its own name is fine.
      expect((await d.api('PUT', `/v1/acl/role/${other.ID}`, { body: { Name: 'OTHER-role' } })).body.Name).toBe('OTHER-role');
    });
  });

  const invalid: Array<[string, unknown, string]> = [
    ['an ID on create', { ID: uuid(), Name: 'x1' }, 'ID must not be set'],
    ['a missing policy', { Name: 'x2', Policies: [{ ID: uuid() }] }, 'No such ACL policy with ID'],
    ['a missing policy name', { Name: 'x3', Policies: [{ Name: 'nope' }] }, 'No such ACL policy with name "nope"'],
    [
      'a service identity without a name',
      { Name: 'x4', ServiceIdentities: [{}] },
      'Service identity is missing the service name field on this role',
    ],
    ['a bad service identity name', { Name: 'x5', ServiceIdentities: [{ ServiceName: 'Bad' }] }, 'has an invalid name'],
    [
      'a node identity without a datacenter',
      { Name: 'x6', NodeIdentities: [{ NodeName: 'n' }] },
      'Node identity is missing the datacenter field on this role',
    ],
    ['a node identity without a name', { Name: 'x7', NodeIdentities: [{ Datacenter: 'dc1' }] }, 'missing the node name field on this role'],
    ['an unknown template', { Name: 'x8', TemplatedPolicies: [{ TemplateName: 'builtin/nope' }] }, 'No such ACL templated policy'],
    ['a template without its Name', { Name: 'x9', TemplatedPolicies: [{ TemplateName: 'builtin/node' }] }, 'variable "Name" is required'],
    [
      'a template variable it does not take',
      { Name: 'x10', TemplatedPolicies: [{ TemplateName: 'builtin/dns', TemplateVariables: { Name: 'x' } }] },
      'takes no variables',
    ],
    ['an unknown field', { Name: 'x11', Local: true }, 'unknown field "Local"'],
  ];
  it.each(invalid)('refuses %s', async (_name, body, message) => {
    const before = (await d.api('GET', '/v1/acl/roles')).body.length;
    const res = await d.api('PUT', '/v1/acl/role', { body });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('INVALID_REQUEST');
    expect(res.body.message).toContain(message);
    expect((await d.api('GET', '/v1/acl/roles')).body.length).toBe(before);
  });

  it('updates as a full replacement: omitted identities are cleared, CreateIndex stays, ModifyIndex grows', async () => {
    const r = (
      await d.api('PUT', '/v1/acl/role', {
        body: {
          Name: 'replace-me',
          Description: 'd',
          Policies: [{ ID: pol.ID }],
          ServiceIdentities: [{ ServiceName: 'a' }],
          NodeIdentities: [{ NodeName: 'n', Datacenter: 'dc1' }],
        },
      })
    ).body;
    const res = await d.api('PUT', `/v1/acl/role/${r.ID}`, { body: { Name: 'replace-me' } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      ID: r.ID,
      Name: 'replace-me',
      Description: '',
      Hash: expect.any(String),
      Namespace: 'default',
      Partition: 'default',
      CreateIndex: r.CreateIndex,
      ModifyIndex: expect.any(Number),
    });
    expect(res.body.ModifyIndex).toBeGreaterThan(r.ModifyIndex);
    expect(res.body.Hash).not.toBe(r.Hash);
    // An echoed read-back body is accepted (return-side fields ignored), ID matching the path.
    const echoed = await d.api('PUT', `/v1/acl/role/${r.ID}`, { body: { ...res.body, Description: 'again' } });
    expect(echoed.status).toBe(200);
    expect(echoed.body.Description).toBe('again');
  });

  it('refuses an update whose body ID differs from the path or names a missing role; 404s a read of one', async () => {
    const r = (await d.api('PUT', '/v1/acl/role', { body: { Name: 'mismatch' } })).body;
    const res = await d.api('PUT', `/v1/acl/role/${r.ID}`, { body: { ID: uuid(), Name: 'mismatch' } });
    expect(res.status).toBe(400);
    expect(res.body.message).toContain('Role ID in URL and payload do not match');
    const missing = await d.api('PUT', `/v1/acl/role/${uuid()}`, { body: { Name: 'ghost' } });
    expect(missing.status).toBe(400);
    expect(missing.body.message).toMatch(/^Cannot find role "/);
    expect((await d.api('GET', `/v1/acl/role/${uuid()}`)).status).toBe(404);
    expect((await d.api('GET', '/v1/acl/role/name/ghost')).status).toBe(404);
  });

  it('deletes with true then false', async () => {
    const r = (await d.api('PUT', '/v1/acl/role', { body: { Name: 'doomed' } })).body;
    expect((await d.api('DELETE', `/v1/acl/role/${r.ID}`)).text).toBe('true');
    expect((await d.api('DELETE', `/v1/acl/role/${r.ID}`)).text).toBe('false');
    expect((await d.api('GET', `/v1/acl/role/${r.ID}`)).status).toBe(404);
  });

  it('grants through a role, and stops granting once the role is deleted', async () => {
    const writer = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'role-writer', Rules: 'acl = "write"' } })).body;
    const role = (await d.api('PUT', '/v1/acl/role', { body: { Name: 'writers', Policies: [{ ID: writer.ID }] } })).body;
    const t = (await d.api('PUT', '/v1/acl/token', { body: { Roles: [{ Name: 'writers' }] } })).body;
    expect(t.Roles).toEqual([{ ID: role.ID, Name: 'writers' }]);
    const api = apiFor(d.url, t.SecretID);
    expect((await api('PUT', '/v1/acl/token', { body: {} })).status).toBe(200);
    expect((await d.api('GET', `/v1/acl/tokens?role=${role.ID}`)).body.map((x: { AccessorID: string }) => x.AccessorID)).toEqual([
      t.AccessorID,
    ]);

    await d.api('PUT', `/v1/acl/role/${role.ID}`, { body: { Name: 'writers-renamed', Policies: [{ ID: writer.ID }] } });
    expect((await d.api('GET', `/v1/acl/token/${t.AccessorID}`)).body.Roles).toEqual([{ ID: role.ID, Name: 'writers-renamed' }]);

    expect((await d.api('DELETE', `/v1/acl/role/${role.ID}`)).body).toBe(true);
    const denied = await api('PUT', '/v1/acl/token', { body: {} });
    expect(denied.status).toBe(403);
    expect(denied.body.code).toBe('PERMISSION_DENIED');
    const read = (await d.api('GET', `/v1/acl/token/${t.AccessorID}`)).body;
    expect(read.Roles).toBeUndefined();
    expect(read.Hash).toBe(t.Hash);
  });

  it('grants through a role’s templated policy (builtin/nomad-server carries acl = "write")', async () => {
    await d.api('PUT', '/v1/acl/role', { body: { Name: 'nomad', TemplatedPolicies: [{ TemplateName: 'builtin/nomad-server' }] } });
    const t = (await d.api('PUT', '/v1/acl/token', { body: { Roles: [{ Name: 'nomad' }] } })).body;
    expect((await apiFor(d.url, t.SecretID)('PUT', '/v1/acl/token', { body: {} })).status).toBe(200);
  });

  it('the expanded read deduplicates policies across direct links and roles', async () => {
    const p1 = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'exp-1' } })).body;
    const p2 = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'exp-2' } })).body;
    const p3 = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'exp-3', Rules: 'acl = "read"' } })).body;
    const r1 = (await d.api('PUT', '/v1/acl/role', { body: { Name: 'exp-r1', Policies: [{ ID: p3.ID }, { ID: p1.ID }] } })).body;
    const r2 = (await d.api('PUT', '/v1/acl/role', { body: { Name: 'exp-r2', Policies: [{ ID: p3.ID }] } })).body;
    const t = (
      await d.api('PUT', '/v1/acl/token', {
        body: {
          Policies: [{ ID: p1.ID }, { ID: p2.ID }],
          Roles: [{ ID: r1.ID }, { ID: r2.ID }],
          ServiceIdentities: [{ ServiceName: 'svc' }],
          NodeIdentities: [{ NodeName: 'node', Datacenter: 'dc1' }],
        },
      })
    ).body;
    const res = await d.api('GET', `/v1/acl/token/${t.AccessorID}?expanded=true`);
    expect(res.status).toBe(200);
    const policies = res.body.ExpandedPolicies as Array<{ ID: string; Name: string; Rules: string; Datacenters?: string[] }>;
    const stored = policies.filter((p) => !p.Name.startsWith('synthetic-policy-'));
    const synthetic = policies.filter((p) => p.Name.startsWith('synthetic-policy-'));
    expect(stored.map((p) => p.ID)).toEqual([p1.ID, p2.ID, p3.ID]);
    expect(stored[2]?.Rules).toBe('acl = "read"');
    expect(synthetic).toHaveLength(2);
    expect(new Set(policies.map((p) => p.ID)).size).toBe(5);
    for (const s of synthetic) expect(s.Name).toBe(`synthetic-policy-${s.ID}`);
    expect(synthetic.find((s) => s.Rules.includes('node "node"'))?.Datacenters).toEqual(['dc1']);
    expect(synthetic.find((s) => s.Rules.includes('service "svc"'))?.Rules).toContain('service "svc-sidecar-proxy"');
    expect((res.body.ExpandedRoles as Array<{ ID: string }>).map((r) => r.ID)).toEqual([r1.ID, r2.ID]);
    expect(res.body.ExpandedRoles[0]?.Policies).toEqual([
      { ID: p3.ID, Name: 'exp-3' },
      { ID: p1.ID, Name: 'exp-1' },
    ]);
    expect(res.body).toMatchObject({
      NamespaceDefaultPolicyIDs: null,
      NamespaceDefaultRoleIDs: null,
      AgentACLDefaultPolicy: 'deny',
      ResolvedByAgent: 'test-node',
    });
  });
});
