import { describe, expect, it } from 'vitest';
import { hashInput, policyHash, roleHash, tokenHash } from '../../src/domain/hash.js';
import { type FieldTable, POLICY_FIELDS, ROLE_FIELDS, TOKEN_FIELDS, contentOf, hashedFieldsOf } from '../../src/domain/records.js';

/** A table as a release that adds a hashed field declares it: the field in one place, nothing else. */
const WITH_CONFIG = {
  Name: { kind: 'string', api: 'checked', doc: 'A name.', hash: { tag: 'name', at: 0 } },
  Config: { kind: 'config', api: 'input', optional: true, doc: 'A free-form object.', hash: { tag: 'config', at: 1 } },
  Flag: { kind: 'boolean', api: 'input', doc: 'Not hashed.' },
} as const satisfies FieldTable;

describe('the content Hash, from the declaration', () => {
  const text = hashInput(WITH_CONFIG);

  it('covers a hashed object field by its content: a change changes it, key order does not', () => {
    const a = text({ Name: 'n', Config: { b: 1, a: { y: [1, 2], x: 'v' } } });
    expect(text({ Name: 'n', Config: { a: { x: 'v', y: [1, 2] }, b: 1 } })).toBe(a);
    expect(text({ Name: 'n', Config: { b: 2, a: { y: [1, 2], x: 'v' } } })).not.toBe(a);
    expect(text({ Name: 'n', Config: { b: 1, a: { y: [2, 1], x: 'v' } } })).not.toBe(a);
    expect(text({ Name: 'n', Config: {} })).not.toBe(a);
    // Never the text every object stringifies to.
    expect(a).not.toContain('[object Object]');
  });

  it('takes what the declaration marks, nothing else', () => {
    expect(hashedFieldsOf(WITH_CONFIG)).toEqual(['Name', 'Config']);
    expect(contentOf(WITH_CONFIG, { Name: 'n', Config: { a: 1 }, Flag: true, Other: 'x' })).toEqual({ Name: 'n', Config: { a: 1 } });
    expect(text({ Name: 'n', Flag: true } as never)).toBe(text({ Name: 'n', Flag: false } as never));
  });

  it('keeps the Hash every earlier release wrote for the same content', () => {
    // Hashes release 0.1.0 computed for these contents: a Hash stays equal across versions.
    expect(
      tokenHash({
        Description: 'd',
        Local: false,
        Policies: [{ ID: 'p1' }],
        Roles: [{ ID: 'r1' }],
        ServiceIdentities: [{ ServiceName: 'web', Datacenters: ['dc1'] }],
        NodeIdentities: [{ NodeName: 'n1', Datacenter: 'dc1' }],
        TemplatedPolicies: [{ TemplateName: 'builtin/service', TemplateVariables: { name: 'api' } }],
      }),
    ).toBe('vV3HOih895we2icktOyC76O2r8PUUogbs3RrOnMrqDg=');
    expect(policyHash({ Name: 'p', Description: 'd', Rules: 'acl = "read"', Datacenters: ['dc1'] })).toBe(
      'inN6ClYxhrepUXQj1coLqfEjU2AKxpj04xIO+ZijPQE=',
    );
    expect(
      roleHash({ Name: 'r', Description: 'd', Policies: [{ ID: 'p1' }], ServiceIdentities: [], NodeIdentities: [], TemplatedPolicies: [] }),
    ).toBe('dM3Mws1QsOPbQQMU8SeWtRaeXQ0tdsg6vHYXTufAUwM=');
  });

  it('the hashed fields of each record are those its declaration marks', () => {
    expect(hashedFieldsOf(TOKEN_FIELDS)).toEqual([
      'Description',
      'Policies',
      'Roles',
      'ServiceIdentities',
      'NodeIdentities',
      'TemplatedPolicies',
      'Local',
    ]);
    expect(hashedFieldsOf(POLICY_FIELDS)).toEqual(['Name', 'Description', 'Rules', 'Datacenters']);
    expect(hashedFieldsOf(ROLE_FIELDS)).toEqual([
      'Name',
      'Description',
      'Policies',
      'ServiceIdentities',
      'NodeIdentities',
      'TemplatedPolicies',
    ]);
  });
});
