import { describe, expect, it } from 'vitest';
import { bind, checkRuleFields, longClaim } from '../../src/auth/binder.js';
import { invalid } from '../../src/domain/errors.js';
import type { BindingRuleRecord } from '../../src/domain/types.js';

const rule = (over: Partial<BindingRuleRecord>): BindingRuleRecord => ({
  ID: crypto.randomUUID(),
  Description: '',
  AuthMethod: 'ci',
  Selector: '',
  BindType: 'service',
  BindName: 'web',
  Namespace: 'default',
  Partition: 'default',
  CreateIndex: 1,
  ModifyIndex: 1,
  ...over,
});

// The binder alone (Consul's auth/binder.go): no store, no HTTP, no verifier.
describe('binder', () => {
  const identity = {
    selectable: { value: { service: 'billing', team: 'pay' }, list: { groups: ['admins', 'dev'] } },
    variables: { 'value.service': 'billing', 'value.team': 'pay' },
  };

  it('binds every rule whose selector matches, names interpolated, in rule order', () => {
    const rules = [
      rule({ BindType: 'service', BindName: '${value.service}', Selector: 'value.service != ""' }),
      rule({ BindType: 'role', BindName: 'admins', Selector: '"admins" in list.groups' }),
      rule({ BindType: 'role', BindName: 'ops', Selector: '"ops" in list.groups' }),
      rule({ BindType: 'policy', BindName: 'team-${value.team}' }),
      rule({ BindType: 'node', BindName: 'node-${value.team}' }),
      rule({ BindType: 'templated-policy', BindName: 'builtin/service', BindVars: { name: '${value.service}-api' } }),
    ];
    // As the selector engine judged them (test/domain/selector.test.ts): all but the ops rule.
    const b = bind(rules, [true, true, false, true, true, true], identity, 'dc2');
    expect(b).toEqual({
      services: [{ ServiceName: 'billing' }],
      nodes: [{ NodeName: 'node-pay', Datacenter: 'dc2' }],
      roles: ['admins'],
      policies: ['team-pay'],
      templated: [{ TemplateName: 'builtin/service', TemplateVariables: { name: 'billing-api' } }],
      // Every rule but the ops one matched (for the audit line of the login).
      matched: [0, 1, 3, 4, 5].map((i) => rules[i]?.ID),
    });
  });

  it('binds nothing for a rule whose BindName names a variable the identity lacks', () => {
    expect(bind([rule({ BindName: '${value.missing}' })], [true], identity, 'dc1').services).toEqual([]);
  });

  it('checks a rule against the fields its method provides', () => {
    const k8s = { Type: 'kubernetes', Config: {} };
    expect(() => checkRuleFields(k8s, 'serviceaccount.name == "x"', '${serviceaccount.name}', undefined, invalid)).not.toThrow();
    expect(() => checkRuleFields(k8s, 'value.iss == "x"', 'web', undefined, invalid)).toThrow(/unknown field "value.iss"/);
    expect(() => checkRuleFields(k8s, '', '${value.sub}', undefined, invalid)).toThrow(/unknown variable \$\{value.sub\}/);
    expect(() =>
      checkRuleFields({ Type: 'jwt', Config: {} }, 'value.iss == "x" and "a" in list.groups', 'web', undefined, invalid),
    ).not.toThrow();
    expect(() => checkRuleFields({ Type: 'jwt', Config: {} }, 'value.iss ==', 'web', undefined, invalid)).toThrow(/invalid Selector/);
  });

  it('names the first claim longer than 8 KiB', () => {
    expect(longClaim({ value: { a: 'x', b: 'y'.repeat(8193) } })).toBe('value.b');
    expect(longClaim({ list: { g: ['ok', 'z'.repeat(9000)] } })).toBe('list.g');
    expect(longClaim({ value: { a: 'x'.repeat(8192) } })).toBeUndefined();
  });
});
