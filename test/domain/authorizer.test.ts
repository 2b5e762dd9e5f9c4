import { describe, expect, it } from 'vitest';
import { type ApplicablePolicy, Authorizer } from '../../src/domain/rules/authorizer.js';
import { parsePolicyRules } from '../../src/domain/rules/policy.js';

const policy = (rules: string, namespace = 'default', builtin = false): ApplicablePolicy => ({
  rules: parsePolicyRules(rules),
  namespace,
  partition: 'default',
  builtin,
});

describe('Authorizer', () => {
  it('applies a token’s top-level acl rule in its own namespace only', () => {
    const a = new Authorizer('team', 'default', [policy('acl = "write"', 'team')], 'deny');
    expect(a.aclAccess('default', 'team')).toBe('write');
    expect(a.aclAccess('default', 'other')).toBe('none');
    expect(a.aclAccess('default', 'default')).toBe('none');
  });

  it('lets default-namespace policies grant in others with namespace blocks, most specific first', () => {
    const a = new Authorizer(
      'default',
      'default',
      [
        policy(
          'acl = "read"\nnamespace_prefix "" { acl = "read" }\nnamespace_prefix "team-" { acl = "write" }\nnamespace "team-locked" { acl = "deny" }',
        ),
      ],
      'deny',
    );
    expect(a.aclAccess('default', 'default')).toBe('read');
    expect(a.aclAccess('default', 'anything')).toBe('read');
    expect(a.aclAccess('default', 'team-a')).toBe('write');
    expect(a.aclAccess('default', 'team-locked')).toBe('none');
  });

  it('ignores namespace blocks in policies that live outside the default namespace', () => {
    const a = new Authorizer('team', 'default', [policy('namespace "other" { acl = "write" }', 'team')], 'deny');
    expect(a.aclAccess('default', 'other')).toBe('none');
  });

  it('grants namespace and partition blocks only to tokens of the default namespace and partition', () => {
    const escalate = policy('namespace "b" { acl = "write" }\nnamespace_prefix "" { acl = "read" }\npartition "p1" { acl = "write" }');
    const fromA = new Authorizer('a', 'default', [escalate, policy('acl = "write"', 'a')], 'deny');
    expect(fromA.aclAccess('default', 'a')).toBe('write');
    expect(fromA.aclAccess('default', 'b')).toBe('none');
    expect(fromA.aclAccess('default', 'default')).toBe('none');
    expect(fromA.aclAccess('p1', 'default')).toBe('none');
    const admin = new Authorizer('default', 'default', [escalate], 'deny');
    expect(admin.aclAccess('default', 'b')).toBe('write');
    expect(admin.aclAccess('default', 'c')).toBe('read');
    expect(admin.aclAccess('p1', 'x')).toBe('write');
    // A token in another partition's default namespace gains nothing from the default partition's blocks.
    expect(new Authorizer('default', 'p1', [escalate], 'deny').aclAccess('p1', 'x')).toBe('none');
  });

  it('lets built-ins held by default-namespace tokens apply everywhere', () => {
    expect(new Authorizer('default', 'default', [policy('acl = "write"', 'default', true)], 'deny').aclAccess('p2', 'x')).toBe('write');
    expect(new Authorizer('team', 'default', [policy('acl = "write"', 'default', true)], 'deny').aclAccess('default', 'x')).toBe('none');
  });

  it('merges policies with deny over write over read', () => {
    expect(
      new Authorizer('default', 'default', [policy('acl = "read"'), policy('acl = "write"')], 'deny').aclAccess('default', 'default'),
    ).toBe('write');
    expect(
      new Authorizer('default', 'default', [policy('acl = "write"'), policy('acl = "deny"')], 'deny').aclAccess('default', 'default'),
    ).toBe('none');
  });

  it('falls back to the default policy, where allow grants read and never write', () => {
    expect(new Authorizer('default', 'default', [], 'deny').aclAccess('default', 'default')).toBe('none');
    expect(new Authorizer('default', 'default', [], 'allow').aclAccess('default', 'default')).toBe('read');
    expect(new Authorizer('default', 'default', [policy('acl = "deny"')], 'allow').aclAccess('default', 'default')).toBe('none');
  });

  it('honours partition blocks', () => {
    const a = new Authorizer(
      'default',
      'default',
      [policy('partition "p1" {\n  acl = "read"\n  namespace "ns" { acl = "write" }\n}')],
      'deny',
    );
    expect(a.aclAccess('p1', 'x')).toBe('read');
    expect(a.aclAccess('p1', 'ns')).toBe('write');
    expect(a.aclAccess('p2', 'ns')).toBe('none');
  });
});
