import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

const GM = '00000000-0000-0000-0000-000000000001';
const uuid = () => crypto.randomUUID();

describe('token endpoints', () => {
  let d: TestDaemon;
  let policyA: { ID: string; Name: string };
  let policyB: { ID: string; Name: string };

  beforeAll(async () => {
    d = await startTestDaemon();
    policyA = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'pol-a', Rules: 'acl = "read"' } })).body;
    policyB = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'pol-b', Rules: '' } })).body;
  });
  afterAll(() => d.close());

  describe('create', () => {
    it('returns every field of the new token, with link names resolved', async () => {
      const accessor = uuid();
      const secret = uuid();
      const res = await d.api('PUT', '/v1/acl/token', {
        body: {
          AccessorID: accessor,
          SecretID: secret,
          Description: 'web token',
          Policies: [{ ID: policyA.ID }, { Name: 'pol-b' }, { Name: 'pol-a' }],
          ServiceIdentities: [
            { ServiceName: 'web', Datacenters: ['dc2'] },
            { ServiceName: 'web', Datacenters: ['dc1'] },
          ],
          NodeIdentities: [
            { NodeName: 'node-1', Datacenter: 'dc1' },
            { NodeName: 'node-1', Datacenter: 'dc1' },
          ],
          TemplatedPolicies: [{ TemplateName: 'builtin/dns' }],
          ExpirationTTL: '1h',
        },
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      const t = res.body;
      expect(t).toMatchObject({
        AccessorID: accessor,
        SecretID: secret,
        Description: 'web token',
        Policies: [
          { ID: policyA.ID, Name: 'pol-a' },
          { ID: policyB.ID, Name: 'pol-b' },
        ],
        ServiceIdentities: [{ ServiceName: 'web', Datacenters: ['dc1', 'dc2'] }],
        NodeIdentities: [{ NodeName: 'node-1', Datacenter: 'dc1' }],
        TemplatedPolicies: [{ TemplateName: 'builtin/dns' }],
        Local: false,
        Namespace: 'default',
        Partition: 'default',
      });
      expect(t.Roles).toBeUndefined();
      expect(t).not.toHaveProperty('ExpirationTTL');
      expect(typeof t.Hash).toBe('string');
      expect(Buffer.from(t.Hash, 'base64')).toHaveLength(32);
      expect(Date.parse(t.ExpirationTime!) - Date.parse(t.CreateTime)).toBe(3_600_000);
      expect(t.CreateIndex).toBeGreaterThan(0);
      expect(t.ModifyIndex).toBe(t.CreateIndex);
      expect(Number(res.headers.get('x-service-index'))).toBe(t.ModifyIndex);
    });

    it('generates IDs, omits empty arrays and always shows Description and Local', async () => {
      const res = await d.api('PUT', '/v1/acl/token', { body: {} });
      expect(res.status).toBe(200);
      expect(res.body.AccessorID).toMatch(/^[0-9a-f-]{36}$/);
      expect(res.body.SecretID).toMatch(/^[0-9a-f-]{36}$/);
      expect(res.body.SecretID).not.toBe(res.body.AccessorID);
      expect(res.body.Description).toBe('');
      expect(res.body.Local).toBe(false);
      for (const k of ['Policies', 'Roles', 'ServiceIdentities', 'NodeIdentities', 'TemplatedPolicies', 'ExpirationTime', 'AuthMethod']) {
        expect(res.body).not.toHaveProperty(k);
      }
    });

    it('accepts case-insensitive field names, any Content-Type and nanosecond TTLs', async () => {
      const res = await d.api('PUT', '/v1/acl/token', {
        rawBody: JSON.stringify({ description: 'lower', policies: [{ name: 'pol-a' }], expirationttl: 120 * 1e9 }),
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      });
      expect(res.status).toBe(200);
      expect(res.body.Description).toBe('lower');
      expect(res.body.Policies).toEqual([{ ID: policyA.ID, Name: 'pol-a' }]);
      expect(Date.parse(res.body.ExpirationTime!) - Date.parse(res.body.CreateTime)).toBe(120_000);
    });

    it("accepts the body Consul's Go client sends (zero values, empty IDs, null Hash)", async () => {
      const res = await d.api('PUT', '/v1/acl/token', {
        body: {
          CreateIndex: 0,
          ModifyIndex: 0,
          AccessorID: '',
          SecretID: '',
          Description: 'from a Go client',
          Policies: [{ ID: '00000000-0000-0000-0000-000000000001', Name: '' }],
          Local: false,
          CreateTime: '0001-01-01T00:00:00Z',
          Hash: null,
        },
      });
      expect(res.status).toBe(200);
      expect(res.body.Policies).toEqual([{ ID: '00000000-0000-0000-0000-000000000001', Name: 'global-management' }]);
      const echoed = await d.api('PUT', `/v1/acl/token/${res.body.AccessorID}`, {
        body: { ...res.body, AuthMethodNamespace: '', Description: 'echoed by Go' },
      });
      expect(echoed.status).toBe(200);
      expect(echoed.body.Description).toBe('echoed by Go');
    });

    it('gives equal hashes to equal content and different hashes otherwise', async () => {
      const a = await d.api('PUT', '/v1/acl/token', { body: { Description: 'same', Policies: [{ ID: policyA.ID }] } });
      const b = await d.api('PUT', '/v1/acl/token', { body: { Description: 'same', Policies: [{ ID: policyA.ID }] } });
      const c = await d.api('PUT', '/v1/acl/token', { body: { Description: 'other', Policies: [{ ID: policyA.ID }] } });
      expect(a.body.Hash).toBe(b.body.Hash);
      expect(c.body.Hash).not.toBe(a.body.Hash);
    });
  });

  describe('create refuses invalid tokens', () => {
    let existing: { AccessorID: string; SecretID: string };
    beforeAll(async () => {
      existing = (await d.api('PUT', '/v1/acl/token', { body: {} })).body;
    });

    const cases: Array<[string, () => unknown, number, string, string]> = [
      ['AccessorID not a UUID', () => ({ AccessorID: 'nope' }), 400, 'INVALID_REQUEST', 'AccessorID is not a valid UUID'],
      ['SecretID not a UUID', () => ({ SecretID: 'nope' }), 400, 'INVALID_REQUEST', 'SecretID is not a valid UUID'],
      ['reserved AccessorID', () => ({ AccessorID: '00000000-0000-0000-0000-000000000042' }), 400, 'INVALID_REQUEST', 'are reserved'],
      ['reserved SecretID', () => ({ SecretID: '00000000-0000-0000-0000-000000000099' }), 400, 'INVALID_REQUEST', 'are reserved'],
      ['AccessorID in use', () => ({ AccessorID: existing.AccessorID }), 409, 'CONFLICT', 'AccessorID is already in use'],
      ['AccessorID equal to a secret', () => ({ AccessorID: existing.SecretID }), 409, 'CONFLICT', 'AccessorID is already in use'],
      ['SecretID in use', () => ({ SecretID: existing.SecretID }), 409, 'CONFLICT', 'SecretID is already in use'],
      ['SecretID equal to an accessor', () => ({ SecretID: existing.AccessorID }), 409, 'CONFLICT', 'SecretID is already in use'],
      [
        'service identity without a name',
        () => ({ ServiceIdentities: [{ Datacenters: ['dc1'] }] }),
        400,
        'INVALID_REQUEST',
        'missing the service name',
      ],
      [
        'service identity with an upper-case name',
        () => ({ ServiceIdentities: [{ ServiceName: 'Web' }] }),
        400,
        'INVALID_REQUEST',
        'Service identity "Web" has an invalid name',
      ],
      [
        'service identity name ending in -',
        () => ({ ServiceIdentities: [{ ServiceName: 'web-' }] }),
        400,
        'INVALID_REQUEST',
        'has an invalid name',
      ],
      [
        'service identity name of 257 chars',
        () => ({ ServiceIdentities: [{ ServiceName: 'a'.repeat(257) }] }),
        400,
        'INVALID_REQUEST',
        'has an invalid name',
      ],
      [
        'service identity datacenters on a local token',
        () => ({ Local: true, ServiceIdentities: [{ ServiceName: 'web', Datacenters: ['dc1'] }] }),
        400,
        'INVALID_REQUEST',
        'cannot specify a list of datacenters on a local token',
      ],
      [
        'service identity with a bad datacenter',
        () => ({ ServiceIdentities: [{ ServiceName: 'web', Datacenters: ['DC 1'] }] }),
        400,
        'INVALID_REQUEST',
        'invalid datacenter name',
      ],
      [
        'node identity without a name',
        () => ({ NodeIdentities: [{ Datacenter: 'dc1' }] }),
        400,
        'INVALID_REQUEST',
        'missing the node name',
      ],
      [
        'node identity without a datacenter',
        () => ({ NodeIdentities: [{ NodeName: 'n1' }] }),
        400,
        'INVALID_REQUEST',
        'missing the datacenter',
      ],
      [
        'node identity with a bad name',
        () => ({ NodeIdentities: [{ NodeName: 'N_1!', Datacenter: 'dc1' }] }),
        400,
        'INVALID_REQUEST',
        'has an invalid name',
      ],
      [
        'TTL and time together',
        () => ({ ExpirationTTL: '1h', ExpirationTime: new Date(Date.now() + 3_600_000).toISOString() }),
        400,
        'INVALID_REQUEST',
        'cannot both be set',
      ],
      ['negative TTL', () => ({ ExpirationTTL: '-5m' }), 400, 'INVALID_REQUEST', "Token Expiration TTL '-5m0s' should be > 0"],
      [
        'TTL below the minimum',
        () => ({ ExpirationTTL: '30s' }),
        400,
        'INVALID_REQUEST',
        'ExpirationTime cannot be less than 1m0s in the future (was 30s)',
      ],
      [
        'TTL above the maximum',
        () => ({ ExpirationTTL: '25h' }),
        400,
        'INVALID_REQUEST',
        'ExpirationTime cannot be more than 24h0m0s in the future (was 25h0m0s)',
      ],
      [
        'expiration time in the past',
        () => ({ ExpirationTime: '2001-01-01T00:00:00Z' }),
        400,
        'INVALID_REQUEST',
        'ExpirationTime cannot be before CreateTime',
      ],
      ['malformed TTL', () => ({ ExpirationTTL: 'soon' }), 400, 'INVALID_REQUEST', 'ExpirationTTL'],
      ['malformed expiration time', () => ({ ExpirationTime: 'tomorrow' }), 400, 'INVALID_REQUEST', 'RFC 3339'],
      ['AuthMethod on create', () => ({ AuthMethod: 'k8s' }), 400, 'INVALID_REQUEST', 'AuthMethod field is disallowed outside of login'],
      ['link to a missing policy ID', () => ({ Policies: [{ ID: uuid() }] }), 400, 'INVALID_REQUEST', 'No such ACL policy with ID'],
      [
        'link to a missing policy name',
        () => ({ Policies: [{ Name: 'ghost' }] }),
        400,
        'INVALID_REQUEST',
        'No such ACL policy with name "ghost"',
      ],
      [
        'link to a missing role',
        () => ({ Roles: [{ Name: 'ghost-role' }] }),
        400,
        'INVALID_REQUEST',
        'No such ACL role with name "ghost-role"',
      ],
      ['policy link with neither ID nor Name', () => ({ Policies: [{}] }), 400, 'INVALID_REQUEST', 'missing both ID and Name'],
      [
        'unknown templated policy',
        () => ({ TemplatedPolicies: [{ TemplateName: 'builtin/nope' }] }),
        400,
        'INVALID_REQUEST',
        'No such ACL templated policy',
      ],
      [
        'templated policy missing its Name',
        () => ({ TemplatedPolicies: [{ TemplateName: 'builtin/service' }] }),
        400,
        'INVALID_REQUEST',
        'variable "Name" is required',
      ],
      ['unknown field', () => ({ Bogus: 1 }), 400, 'INVALID_REQUEST', 'unknown field "Bogus"'],
      ['wrong type', () => ({ Description: 42 }), 400, 'INVALID_REQUEST', 'Description'],
      ['bad namespace name', () => ({ Namespace: 'Not_Valid' }), 400, 'INVALID_REQUEST', 'Invalid namespace name'],
    ];

    it.each(cases)('%s', async (_name, body, status, code, message) => {
      const before = (await d.api('GET', '/v1/acl/tokens')).body.length;
      const res = await d.api('PUT', '/v1/acl/token', { body: body() });
      expect(res.status).toBe(status);
      expect(res.body).toMatchObject({ statusCode: status, code });
      expect(res.body.message).toContain(message);
      // Nothing half-written.
      expect((await d.api('GET', '/v1/acl/tokens')).body.length).toBe(before);
    });

    it('accepts a 256-character service identity name', async () => {
      const res = await d.api('PUT', '/v1/acl/token', { body: { ServiceIdentities: [{ ServiceName: 'a'.repeat(256) }] } });
      expect(res.status).toBe(200);
    });
  });

  describe('read', () => {
    it('shows the current name of a renamed policy and drops a deleted one, keeping the hash', async () => {
      const p = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'to-rename' } })).body;
      const q = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'to-delete' } })).body;
      const t = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: p.ID }, { ID: q.ID }] } })).body;
      await d.api('PUT', `/v1/acl/policy/${p.ID}`, { body: { Name: 'renamed' } });
      expect((await d.api('DELETE', `/v1/acl/policy/${q.ID}`)).body).toBe(true);
      const read = await d.api('GET', `/v1/acl/token/${t.AccessorID}`);
      expect(read.status).toBe(200);
      expect(read.body.Policies).toEqual([{ ID: p.ID, Name: 'renamed' }]);
      expect(read.body.Hash).toBe(t.Hash);
      expect(read.body.ModifyIndex).toBe(t.ModifyIndex);
      const listed = (await d.api('GET', `/v1/acl/tokens?policy=${p.ID}`)).body;
      expect(listed.map((x: { AccessorID: string }) => x.AccessorID)).toEqual([t.AccessorID]);
    });

    it('404s for a token that does not exist, or an ID that is not a UUID', async () => {
      for (const id of [uuid(), 'not-a-uuid']) {
        const res = await d.api('GET', `/v1/acl/token/${id}`);
        expect(res.status).toBe(404);
        expect(res.body.code).toBe('NOT_FOUND');
        expect(Number(res.headers.get('x-service-index'))).toBeGreaterThan(0);
      }
    });

    it('reads itself from the secret, with the real secret', async () => {
      const t = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'me' } })).body;
      for (const headers of [{ 'X-Consul-Token': t.SecretID }, { Authorization: `Bearer ${t.SecretID}` }] as Array<
        Record<string, string>
      >) {
        const res = await d.api('GET', '/v1/acl/token/self', { token: undefined, headers });
        expect(res.status).toBe(200);
        expect(res.body).toMatchObject({ AccessorID: t.AccessorID, SecretID: t.SecretID, Description: 'me' });
      }
      const viaQuery = await d.api('GET', `/v1/acl/token/self?token=${t.SecretID}`, { token: undefined });
      expect(viaQuery.body.AccessorID).toBe(t.AccessorID);
    });

    it('expanded read lists the policies behind the token and the agent facts', async () => {
      const t = (
        await d.api('PUT', '/v1/acl/token', {
          body: {
            Policies: [{ ID: policyA.ID }],
            ServiceIdentities: [{ ServiceName: 'api' }],
            NodeIdentities: [{ NodeName: 'n1', Datacenter: 'dc1' }],
          },
        })
      ).body;
      const res = await d.api('GET', `/v1/acl/token/${t.AccessorID}?expanded`);
      expect(res.status).toBe(200);
      expect(res.body.AccessorID).toBe(t.AccessorID);
      const names = res.body.ExpandedPolicies.map((p: { Name: string }) => p.Name);
      expect(names[0]).toBe('pol-a');
      expect(names.filter((n: string) => n.startsWith('synthetic-policy-'))).toHaveLength(2);
      expect(res.body.ExpandedPolicies[1]?.Rules).toContain('service "api"');
      expect(res.body.ExpandedRoles).toEqual([]);
      expect(res.body).toMatchObject({
        AgentACLDefaultPolicy: 'deny',
        AgentACLDownPolicy: 'extend-cache',
        ResolvedByAgent: 'test-node',
        NamespaceDefaultPolicyIDs: null,
      });
    });
  });

  describe('update', () => {
    it('replaces the mutable fields and keeps the immutable ones', async () => {
      const t = (
        await d.api('PUT', '/v1/acl/token', {
          body: { Description: 'before', Policies: [{ ID: policyA.ID }], ServiceIdentities: [{ ServiceName: 'web' }], ExpirationTTL: '2h' },
        })
      ).body;
      const res = await d.api('PUT', `/v1/acl/token/${t.AccessorID}`, { body: { Description: 'after', Policies: [{ Name: 'pol-b' }] } });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        AccessorID: t.AccessorID,
        SecretID: t.SecretID,
        Description: 'after',
        Policies: [{ ID: policyB.ID, Name: 'pol-b' }],
        ExpirationTime: t.ExpirationTime,
        CreateTime: t.CreateTime,
        CreateIndex: t.CreateIndex,
      });
      expect(res.body.ServiceIdentities).toBeUndefined();
      expect(res.body.ModifyIndex).toBeGreaterThan(t.ModifyIndex);
      expect(res.body.Hash).not.toBe(t.Hash);
    });

    it('accepts a read-back token echoed as the body', async () => {
      const t = (
        await d.api('PUT', '/v1/acl/token', { body: { Description: 'echo', Policies: [{ ID: policyA.ID }], ExpirationTTL: '3h' } })
      ).body;
      const read = (await d.api('GET', `/v1/acl/token/${t.AccessorID}`)).body;
      const res = await d.api('PUT', `/v1/acl/token/${t.AccessorID}`, { body: { ...read, Description: 'echoed' } });
      expect(res.status).toBe(200);
      expect(res.body.Description).toBe('echoed');
      expect(res.body.Policies).toEqual(read.Policies);
    });

    const rules: Array<[string, (t: { AccessorID: string; SecretID: string; ExpirationTime?: string }) => unknown, string]> = [
      ['a different SecretID', () => ({ SecretID: uuid() }), "Changing a token's SecretID is not permitted"],
      ['a Local toggle', () => ({ Local: true }), 'Cannot toggle local mode of'],
      [
        'a different ExpirationTime',
        (t) => ({ ExpirationTime: new Date(Date.parse(t.ExpirationTime!) + 60_000).toISOString() }),
        'Cannot change expiration time of',
      ],
      ['an ExpirationTTL', () => ({ ExpirationTTL: '2h' }), 'Cannot change expiration time of'],
      ['a different AuthMethod', () => ({ AuthMethod: 'other' }), 'Cannot change AuthMethod of'],
      ['a body AccessorID that differs from the path', () => ({ AccessorID: uuid() }), 'do not match'],
    ];
    it.each(rules)('refuses %s', async (_name, body, message) => {
      const t = (await d.api('PUT', '/v1/acl/token', { body: { ExpirationTTL: '1h', Description: 'keep' } })).body;
      const res = await d.api('PUT', `/v1/acl/token/${t.AccessorID}`, { body: body(t) });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('INVALID_REQUEST');
      expect(res.body.message).toContain(message);
      expect((await d.api('GET', `/v1/acl/token/${t.AccessorID}`)).body.ModifyIndex).toBe(t.ModifyIndex);
    });

    it('refuses with 400 an update of a missing token and of a malformed ID alike (a write that did nothing)', async () => {
      const id = uuid();
      const missing = await d.api('PUT', `/v1/acl/token/${id}`, { body: {} });
      expect(missing.status).toBe(400);
      expect(missing.body).toMatchObject({ code: 'INVALID_REQUEST', message: `Cannot find token "${id}"` });
      const malformed = await d.api('PUT', '/v1/acl/token/xyz', { body: {} });
      expect(malformed.status).toBe(400);
      expect(malformed.body.message).toBe('Cannot find token "xyz"');
    });
  });

  describe('clone', () => {
    it('copies links, identities, Local and expiry under new IDs', async () => {
      const src = (
        await d.api('PUT', '/v1/acl/token', {
          body: {
            Description: 'source',
            Local: true,
            Policies: [{ ID: policyA.ID }],
            ServiceIdentities: [{ ServiceName: 'db' }],
            ExpirationTTL: '4h',
          },
        })
      ).body;
      const same = await d.api('PUT', `/v1/acl/token/${src.AccessorID}/clone`, { body: {} });
      expect(same.status).toBe(200);
      expect(same.body).toMatchObject({
        Description: 'source',
        Local: true,
        Policies: src.Policies,
        ServiceIdentities: src.ServiceIdentities,
        ExpirationTime: src.ExpirationTime,
        Hash: src.Hash,
      });
      expect(same.body.AccessorID).not.toBe(src.AccessorID);
      expect(same.body.SecretID).not.toBe(src.SecretID);
      const described = await d.api('PUT', `/v1/acl/token/${src.AccessorID}/clone`, { body: { Description: 'copy' } });
      expect(described.body.Description).toBe('copy');
    });

    it('refuses with 400 the clone of a missing source', async () => {
      const id = uuid();
      const res = await d.api('PUT', `/v1/acl/token/${id}/clone`);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: 'INVALID_REQUEST', message: `Cannot find token "${id}"` });
    });

    it('refuses unknown fields in the body', async () => {
      const src = (await d.api('PUT', '/v1/acl/token', { body: {} })).body;
      const res = await d.api('PUT', `/v1/acl/token/${src.AccessorID}/clone`, { body: { Policies: [] } });
      expect(res.status).toBe(400);
      expect(res.body.message).toContain('unknown field "Policies"');
    });
  });

  describe('delete', () => {
    it('returns true, then false, and the token is gone', async () => {
      const t = (await d.api('PUT', '/v1/acl/token', { body: {} })).body;
      const first = await d.api('DELETE', `/v1/acl/token/${t.AccessorID}`);
      expect(first.status).toBe(200);
      expect(first.text).toBe('true');
      expect(Number(first.headers.get('x-service-index'))).toBeGreaterThan(t.ModifyIndex);
      const second = await d.api('DELETE', `/v1/acl/token/${t.AccessorID}`);
      expect(second.status).toBe(200);
      expect(second.text).toBe('false');
      expect((await d.api('GET', `/v1/acl/token/${t.AccessorID}`)).status).toBe(404);
      expect((await d.api('GET', '/v1/acl/token/self', { token: t.SecretID })).body.code).toBe('ACL_NOT_FOUND');
    });

    it('answers token/self without a token with 404, never with the anonymous token', async () => {
      const res = await d.api('GET', '/v1/acl/token/self', { token: undefined });
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('NOT_FOUND');
      expect(res.body.message).toBe('Supplied token does not exist');
    });

    it('refuses to delete the anonymous token or the request token', async () => {
      const anon = await d.api('DELETE', '/v1/acl/token/00000000-0000-0000-0000-000000000002');
      expect(anon.status).toBe(403);
      expect(anon.body.code).toBe('NOT_PERMITTED');
      expect(anon.body.message).toContain('anonymous token');
      const self = (await d.api('GET', '/v1/acl/token/self')).body;
      const own = await d.api('DELETE', `/v1/acl/token/${self.AccessorID}`);
      expect(own.status).toBe(403);
      expect(own.body.code).toBe('NOT_PERMITTED');
      expect(own.body.message).toContain("request's authorization token");
    });

    it('answers false for an accessor with nothing to delete, and 400 for one that cannot name a token, as an update does', async () => {
      const nothing = await d.api('DELETE', `/v1/acl/token/${uuid()}`);
      expect(nothing.status).toBe(200);
      expect(nothing.body).toBe(false);
      const res = await d.api('DELETE', '/v1/acl/token/abc');
      expect(res.status).toBe(400);
      expect(res.body.message).toBe('Cannot find token "abc"');
    });
  });

  describe('list', () => {
    it('filters by policy, service name and role, one filter at a time', async () => {
      const pol = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'list-filter' } })).body;
      const a = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: pol.ID }] } })).body;
      const b = (await d.api('PUT', '/v1/acl/token', { body: { ServiceIdentities: [{ ServiceName: 'only-b' }] } })).body;
      const byPolicy = await d.api('GET', `/v1/acl/tokens?policy=${pol.ID}`);
      expect(byPolicy.body.map((t: { AccessorID: string }) => t.AccessorID)).toEqual([a.AccessorID]);
      const byService = await d.api('GET', '/v1/acl/tokens?servicename=only-b');
      expect(byService.body.map((t: { AccessorID: string }) => t.AccessorID)).toEqual([b.AccessorID]);
      expect((await d.api('GET', `/v1/acl/tokens?role=${uuid()}`)).body).toEqual([]);
      // A name or a prefix would match nothing and look like "none": refused, naming the filter.
      for (const [filter, value] of [
        ['role', 'nonexistent'],
        ['policy', 'list-filter'],
        ['policy', pol.ID.slice(0, 8)],
      ]) {
        const refused = await d.api('GET', `/v1/acl/tokens?${filter}=${value}`);
        expect(refused.status).toBe(400);
        expect(refused.body.message).toBe(
          `Invalid ${filter} filter: "${value}" is not a ${filter} ID (a UUID); read the ${filter} by name for its ID`,
        );
      }
      expect((await d.api('GET', '/v1/acl/roles?policy=list-filter')).status).toBe(400);
      expect((await d.api('GET', '/v1/acl/tokens?authmethod=none')).body).toEqual([]);
      const both = await d.api('GET', `/v1/acl/tokens?policy=${pol.ID}&servicename=only-b`);
      expect(both.status).toBe(400);
      expect(both.body.message).toContain('Only one of');
    });

    it('returns list items with the same keys as a read', async () => {
      const t = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'stub', Policies: [{ ID: policyA.ID }] } })).body;
      const list = (await d.api('GET', '/v1/acl/tokens')).body as Array<{ AccessorID: string }>;
      const item = list.find((x) => x.AccessorID === t.AccessorID);
      expect(item).toEqual((await d.api('GET', `/v1/acl/token/${t.AccessorID}`)).body);
    });
  });

  it('the built-in management policy link resolves by name too', async () => {
    const res = await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ Name: 'global-management' }] } });
    expect(res.body.Policies).toEqual([{ ID: GM, Name: 'global-management' }]);
  });
});
