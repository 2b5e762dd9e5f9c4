import { describe, expect, it } from 'vitest';
import { RECORD_CHECKS } from '../../src/store/record-check.js';
import { TABLES } from '../../src/store/schema.js';
import type { TableName } from '../../src/store/schema.js';
import { tokenRecord } from '../helpers/records.js';

const valid: Record<TableName, Array<Record<string, unknown>>> = {
  tokens: [
    tokenRecord() as unknown as Record<string, unknown>,
    tokenRecord({
      Policies: [{ ID: 'p' }],
      Roles: [{ ID: 'r' }],
      ServiceIdentities: [{ ServiceName: 'web', Datacenters: ['dc1'] }, { ServiceName: 'db' }],
      NodeIdentities: [{ NodeName: 'n', Datacenter: 'dc2' }],
      TemplatedPolicies: [
        { TemplateName: 'builtin/service', TemplateVariables: { name: 'x' }, Datacenters: ['dc1'] },
        { TemplateName: 'builtin/dns' },
      ],
      Local: true,
      AuthMethod: 'kube',
      AuthMethodNamespace: 'default',
      ExpirationTime: '2030-01-01T00:00:00.000Z',
    }) as unknown as Record<string, unknown>,
  ],
  policies: [
    {
      ID: 'p',
      Name: 'n',
      Description: '',
      Rules: '',
      Hash: 'h',
      Namespace: 'default',
      Partition: 'default',
      CreateIndex: 1,
      ModifyIndex: 2,
    },
    {
      ID: 'p',
      Name: 'n',
      Description: 'd',
      Rules: 'acl = "read"',
      Datacenters: ['dc1'],
      Hash: 'h',
      Namespace: 'a',
      Partition: 'b',
      CreateIndex: 0,
      ModifyIndex: 0,
    },
  ],
  roles: [
    {
      ID: 'r',
      Name: 'n',
      Description: '',
      Policies: [],
      ServiceIdentities: [],
      NodeIdentities: [],
      TemplatedPolicies: [],
      Hash: 'h',
      Namespace: 'default',
      Partition: 'default',
      CreateIndex: 1,
      ModifyIndex: 1,
    },
    {
      ID: 'r',
      Name: 'n',
      Description: 'd',
      Policies: [{ ID: 'p' }],
      ServiceIdentities: [{ ServiceName: 's' }],
      NodeIdentities: [{ NodeName: 'n', Datacenter: 'dc1' }],
      TemplatedPolicies: [{ TemplateName: 't' }],
      Hash: 'h',
      Namespace: 'default',
      Partition: 'default',
      CreateIndex: 1,
      ModifyIndex: 1,
    },
  ],
  authMethods: [
    {
      Name: 'm',
      Type: 'jwt',
      DisplayName: '',
      Description: '',
      MaxTokenTTL: '',
      TokenLocality: 'local',
      Config: {},
      Namespace: 'default',
      Partition: 'default',
      CreateIndex: 1,
      ModifyIndex: 1,
    },
    {
      Name: 'k',
      Type: 'kubernetes',
      DisplayName: 'K',
      Description: 'd',
      MaxTokenTTL: '1h0m0s',
      TokenLocality: 'global',
      Config: { Host: 'https://k' },
      Namespace: 'a',
      Partition: 'b',
      CreateIndex: 0,
      ModifyIndex: 3,
    },
  ],
  bindingRules: [
    {
      ID: 'b',
      Description: '',
      AuthMethod: 'm',
      Selector: '',
      BindType: 'service',
      BindName: 'web',
      Namespace: 'default',
      Partition: 'default',
      CreateIndex: 1,
      ModifyIndex: 1,
    },
    {
      ID: 'b',
      Description: 'd',
      AuthMethod: 'm',
      Selector: 'value.x == "y"',
      BindType: 'templated-policy',
      BindName: 'builtin/service',
      BindVars: { name: 'web' },
      Namespace: 'default',
      Partition: 'default',
      CreateIndex: 1,
      ModifyIndex: 1,
    },
  ],
  quotas: [
    {
      ID: 'q',
      Name: 'n',
      Description: '',
      AuthMethod: 'm',
      Namespace: '',
      Partition: '',
      MaxTokenTTL: '',
      MinTokenTTL: '',
      Local: false,
      CreateIndex: 1,
      ModifyIndex: 1,
    },
    {
      ID: 'q',
      Name: 'n',
      Description: 'd',
      AuthMethod: '',
      Namespace: 'team-a',
      Partition: '',
      MaxTokens: 10,
      MaxTokenTTL: '1h0m0s',
      MinTokenTTL: '1m0s',
      Local: true,
      CreateIndex: 1,
      ModifyIndex: 1,
    },
  ],
};

/** Every way to break one field of a record: remove it, or give it a value of the wrong kind. */
function broken(record: Record<string, unknown>): Array<[string, Record<string, unknown>]> {
  const out: Array<[string, Record<string, unknown>]> = [];
  const wrong: unknown[] = [null, 42, 'text', true, [], [7], {}, [{}], -1, 1.5];
  for (const field of Object.keys(record)) {
    const { [field]: _gone, ...without } = record;
    out.push([`${field} missing`, without]);
    for (const w of wrong) out.push([`${field} = ${JSON.stringify(w)}`, { ...record, [field]: w }]);
  }
  // A field no declaration knows is refused, never dropped (src/ARCHITECTURE.md, "The store").
  out.push(['an undeclared field', { ...record, Meta: 42 }]);
  return out;
}

describe('start-up record checks agree with the record schemas', () => {
  for (const table of ['tokens', 'policies', 'roles', 'authMethods', 'bindingRules', 'quotas'] as const) {
    it(`on valid and broken ${table}`, () => {
      const schema = TABLES[table].schema;
      const check = RECORD_CHECKS[table];
      let compared = 0;
      for (const record of valid[table]) {
        expect(check(structuredClone(record)), JSON.stringify(record)).toBe(true);
        expect(schema.safeParse(record).success).toBe(true);
        for (const [what, bad] of broken(record)) {
          expect(check(structuredClone(bad)), `${table}: ${what}`).toBe(schema.safeParse(bad).success);
          compared++;
        }
      }
      expect(compared).toBeGreaterThan(100);
    });
  }

  it('shares one frozen empty array for empty lists', () => {
    const a = structuredClone(valid.tokens[0]) as Record<string, unknown>;
    const b = structuredClone(valid.tokens[0]) as Record<string, unknown>;
    expect(RECORD_CHECKS.tokens(a) && RECORD_CHECKS.tokens(b)).toBe(true);
    expect(a.Policies).toBe(b.Policies);
    expect(Object.isFrozen(a.Policies)).toBe(true);
  });
});

describe('records written before template variables were stored as Consul writes them', () => {
  it('read a token and a role whose TemplateVariables say Name as name, at load and in a snapshot', () => {
    const token = tokenRecord({
      TemplatedPolicies: [{ TemplateName: 'builtin/service', TemplateVariables: { Name: 'web' } as unknown as { name: string } }],
    }) as unknown as Record<string, unknown>;
    expect(RECORD_CHECKS.tokens(token)).toBe(true);
    expect(token.TemplatedPolicies).toEqual([{ TemplateName: 'builtin/service', TemplateVariables: { name: 'web' } }]);
    const role = {
      ID: 'r',
      Name: 'n',
      Description: '',
      Policies: [],
      ServiceIdentities: [],
      NodeIdentities: [],
      TemplatedPolicies: [{ TemplateName: 'builtin/node', TemplateVariables: { Name: 'n1' } }],
      Hash: 'h',
      Namespace: 'default',
      Partition: 'default',
      CreateIndex: 1,
      ModifyIndex: 1,
    };
    const parsed = TABLES.roles.schema.parse(structuredClone(role)) as { TemplatedPolicies: unknown };
    expect(parsed.TemplatedPolicies).toEqual([{ TemplateName: 'builtin/node', TemplateVariables: { name: 'n1' } }]);
  });

  it('read a binding rule whose BindVars say Name as name', () => {
    const rule = {
      ID: 'b',
      Description: '',
      AuthMethod: 'm',
      Selector: '',
      BindType: 'templated-policy',
      BindName: 'builtin/service',
      BindVars: { Name: 'web' },
      Namespace: 'default',
      Partition: 'default',
      CreateIndex: 1,
      ModifyIndex: 1,
    };
    const loaded = structuredClone(rule);
    expect(RECORD_CHECKS.bindingRules(loaded)).toBe(true);
    expect(loaded.BindVars).toEqual({ name: 'web' });
    expect((TABLES.bindingRules.schema.parse(structuredClone(rule)) as { BindVars: unknown }).BindVars).toEqual({ name: 'web' });
  });
});
