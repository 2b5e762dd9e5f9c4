import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parsePolicyRules } from '../../src/domain/rules/policy.js';
import { type TestDaemon, apiFor, startTestDaemon } from '../helpers/test-daemon.js';

const BUILTINS: Array<[string, string, boolean, string[]]> = [
  [
    'builtin/service',
    '00000000-0000-0000-0000-000000000003',
    true,
    ['service "api" {', 'service "api-sidecar-proxy" {', 'service_prefix "" {\n  policy = "read"', 'node_prefix "" {\n  policy = "read"'],
  ],
  [
    'builtin/node',
    '00000000-0000-0000-0000-000000000004',
    true,
    ['node "api" {\n  policy = "write"', 'service_prefix "" {\n  policy = "read"'],
  ],
  ['builtin/dns', '00000000-0000-0000-0000-000000000005', false, ['node_prefix ""', 'service_prefix ""', 'query_prefix ""']],
  [
    'builtin/nomad-server',
    '00000000-0000-0000-0000-000000000006',
    false,
    ['acl = "write"', 'agent_prefix ""', 'service_prefix "" {\n  policy = "write"'],
  ],
  ['builtin/api-gateway', '00000000-0000-0000-0000-000000000008', true, ['mesh = "read"', 'service "api" {\n  policy = "write"']],
  [
    'builtin/nomad-client',
    '00000000-0000-0000-0000-000000000009',
    false,
    ['agent_prefix ""', 'key_prefix "" {\n  policy = "read"', 'service_prefix "" {\n  policy = "write"'],
  ],
];

describe('templated policies', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d.close());

  it('lists all six built-ins keyed by name', async () => {
    const res = await d.api('GET', '/v1/acl/templated-policies');
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(BUILTINS.map((b) => b[0]).sort());
    for (const [name, , needsName] of BUILTINS) {
      const t = res.body[name]!;
      expect(Object.keys(t).sort()).toEqual(['Description', 'Schema', 'Template', 'TemplateName']);
      expect(t.TemplateName).toBe(name);
      expect(t.Description.length).toBeGreaterThan(10);
      if (needsName) {
        const schema = JSON.parse(t.Schema);
        expect(schema.required).toEqual(['name']);
        expect(schema.properties.name.type).toBe('string');
      } else {
        expect(t.Schema).toBe('');
      }
    }
  });

  it.each(BUILTINS)('%s reads by name and renders through preview', async (name, _id, needsName, fragments) => {
    const read = await d.api('GET', `/v1/acl/templated-policy/name/${name}`);
    expect(read.status).toBe(200);
    expect(read.body.TemplateName).toBe(name);
    const preview = await d.api('POST', `/v1/acl/templated-policy/preview/${name}`, { body: needsName ? { Name: 'api' } : {} });
    expect(preview.status).toBe(200);
    const p = preview.body;
    for (const f of fragments) expect(p.Rules).toContain(f);
    expect(p.Name).toBe(`synthetic-policy-${p.ID}`);
    expect(p.Description).toContain(name);
    expect(() => parsePolicyRules(p.Rules)).not.toThrow();
    // The same variables render the same policy.
    expect((await d.api('POST', `/v1/acl/templated-policy/preview/${name}`, { body: needsName ? { name: 'api' } : {} })).body.ID).toBe(
      p.ID,
    );
  });

  it('refuses builtin/service without Name, an invalid Name, and unknown templates', async () => {
    const missing = await d.api('POST', '/v1/acl/templated-policy/preview/builtin/service', { body: {} });
    expect(missing.status).toBe(400);
    expect(missing.body.message).toContain('variable "Name" is required');
    const bad = await d.api('POST', '/v1/acl/templated-policy/preview/builtin/service', { body: { Name: 'Not Valid' } });
    expect(bad.status).toBe(400);
    expect((await d.api('GET', '/v1/acl/templated-policy/name/builtin/nope')).status).toBe(404);
    expect((await d.api('POST', '/v1/acl/templated-policy/preview/builtin/nope', { body: {} })).status).toBe(404);
    const onToken = await d.api('PUT', '/v1/acl/token', { body: { TemplatedPolicies: [{ TemplateName: 'builtin/service' }] } });
    expect(onToken.status).toBe(400);
    expect(onToken.body.message).toContain('variable "Name" is required');
    const unknown = await d.api('PUT', '/v1/acl/token', { body: { TemplatedPolicies: [{ TemplateName: 'custom/thing' }] } });
    expect(unknown.status).toBe(400);
    expect(unknown.body.message).toContain('No such ACL templated policy with name "custom/thing"');
  });

  it('collapses duplicate templated policies on a token, keeping distinct variables', async () => {
    const res = await d.api('PUT', '/v1/acl/token', {
      body: {
        TemplatedPolicies: [
          { TemplateName: 'builtin/service', TemplateVariables: { Name: 'web' } },
          { TemplateName: 'builtin/service', TemplateVariables: { name: 'web' } },
          { TemplateName: 'builtin/service', TemplateVariables: { Name: 'db' } },
          { TemplateName: 'builtin/dns' },
          { TemplateName: 'builtin/dns' },
        ],
      },
    });
    expect(res.status).toBe(200);
    expect(res.body.TemplatedPolicies).toEqual([
      { TemplateName: 'builtin/service', TemplateVariables: { name: 'web' } },
      { TemplateName: 'builtin/service', TemplateVariables: { name: 'db' } },
      { TemplateName: 'builtin/dns' },
    ]);
  });

  it('takes the variable in any letter case, as Consul decodes it, and writes it back as Consul does: name', async () => {
    for (const [i, key] of ['Name', 'name', 'NAME', 'nAmE'].entries()) {
      const token = await d.api('PUT', '/v1/acl/token', {
        body: { TemplatedPolicies: [{ TemplateName: 'builtin/service', TemplateVariables: { [key]: 'my-service' } }] },
      });
      expect(token.status, key).toBe(200);
      expect(token.body.TemplatedPolicies).toEqual([{ TemplateName: 'builtin/service', TemplateVariables: { name: 'my-service' } }]);
      const read = await d.api('GET', `/v1/acl/token/${token.body.AccessorID}?expanded`);
      expect(read.body.TemplatedPolicies).toEqual([{ TemplateName: 'builtin/service', TemplateVariables: { name: 'my-service' } }]);
      expect(read.body.ExpandedPolicies.some((p) => p.Rules?.includes('service "my-service"'))).toBe(true);
      const role = await d.api('PUT', '/v1/acl/role', {
        body: { Name: `case-role-${i}`, TemplatedPolicies: [{ TemplateName: 'builtin/node', TemplateVariables: { [key]: 'node-1' } }] },
      });
      expect(role.body.TemplatedPolicies).toEqual([{ TemplateName: 'builtin/node', TemplateVariables: { name: 'node-1' } }]);
    }
    const preview = await d.api('POST', '/v1/acl/templated-policy/preview/builtin/service', { body: { NAME: 'web' } });
    expect(preview.status).toBe(200);
    expect(preview.body.Rules).toContain('service "web"');
  });

  it('grants nothing here when scoped to another datacenter', async () => {
    const elsewhere = (
      await d.api('PUT', '/v1/acl/token', { body: { TemplatedPolicies: [{ TemplateName: 'builtin/nomad-server', Datacenters: ['dc2'] }] } })
    ).body;
    expect(elsewhere.TemplatedPolicies).toEqual([{ TemplateName: 'builtin/nomad-server', Datacenters: ['dc2'] }]);
    expect((await apiFor(d.url, elsewhere.SecretID)('GET', '/v1/acl/tokens')).status).toBe(403);
    const here = (
      await d.api('PUT', '/v1/acl/token', { body: { TemplatedPolicies: [{ TemplateName: 'builtin/nomad-server', Datacenters: ['dc1'] }] } })
    ).body;
    expect((await apiFor(d.url, here.SecretID)('GET', '/v1/acl/tokens')).status).toBe(200);
    const role = (
      await d.api('PUT', '/v1/acl/role', {
        body: { Name: 'nomad-dc2', TemplatedPolicies: [{ TemplateName: 'builtin/nomad-server', Datacenters: ['dc2'] }] },
      })
    ).body;
    const viaRole = (await d.api('PUT', '/v1/acl/token', { body: { Roles: [{ ID: role.ID }] } })).body;
    expect((await apiFor(d.url, viaRole.SecretID)('GET', '/v1/acl/tokens')).status).toBe(403);
  });

  it('needs acl:read', async () => {
    const res = await apiFor(d.url)('GET', '/v1/acl/templated-policies');
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('PERMISSION_DENIED');
  });
});
