import { describe, expect, it } from 'vitest';
import { GLOBAL_MANAGEMENT_RULES, GLOBAL_READ_ONLY_RULES } from '../../src/domain/builtins.js';
import { parsePolicyRules } from '../../src/domain/rules/policy.js';
import { POLICY_TEMPLATES, renderTemplate } from '../../src/domain/templates.js';

describe('policy rules', () => {
  it('reads HCL attributes, labelled blocks, lists and every comment style', () => {
    const rules = parsePolicyRules(`
      # hash comment
      acl = "write" // trailing comment
      /* block
         comment */
      key_prefix "app/" { policy = "list" }
      service "web" {
        policy     = "write"
        intentions = "read"
      }
      operator = "read"
    `);
    expect(rules.acl).toBe('write');
    expect(rules.flags).toEqual({ operator: 'read' });
    expect(rules.resources).toEqual([
      { resource: 'key_prefix', segment: 'app/', policy: 'list' },
      { resource: 'service', segment: 'web', policy: 'write', intentions: 'read' },
    ]);
  });

  it('reads the same rules written as JSON', () => {
    const rules = parsePolicyRules(
      JSON.stringify({
        acl: 'write',
        key_prefix: { 'app/': { policy: 'list' } },
        service: [{ web: { policy: 'write', intentions: 'read' } }],
        operator: 'read',
      }),
    );
    expect(rules.acl).toBe('write');
    expect(rules.flags).toEqual({ operator: 'read' });
    expect(rules.resources).toHaveLength(2);
  });

  it('reads namespace and partition blocks', () => {
    const rules = parsePolicyRules(
      'partition "p1" {\n  namespace "ns1" {\n    acl = "read"\n  }\n}\nnamespace_prefix "team-" {\n  acl = "write"\n}',
    );
    expect(rules.partitions[0]?.rules.namespaces[0]).toMatchObject({ name: 'ns1', prefix: false, rules: { acl: 'read' } });
    expect(rules.namespaces[0]).toMatchObject({ name: 'team-', prefix: true, rules: { acl: 'write' } });
  });

  it('parses the built-in policies and every template', () => {
    expect(parsePolicyRules(GLOBAL_MANAGEMENT_RULES).acl).toBe('write');
    expect(parsePolicyRules(GLOBAL_READ_ONLY_RULES).acl).toBe('read');
    for (const t of POLICY_TEMPLATES) expect(() => parsePolicyRules(renderTemplate(t, 'web'))).not.toThrow();
  });

  it.each([
    ['acl = ', 'Failed to parse ACL rules: At 1:7: expected a value, got end of input'],
    ['acl = "read"\nservice "x" {\n  policy = "read"\n', 'Failed to parse ACL rules: At 4:1: expected "}" before end of input'],
    ['service "a" "b" { policy = "read" }', 'needs exactly one label'],
    ['acl "x"', 'At 1:8: expected "=" or "{" after "acl", got end of input'],
    ['acl = "read" }', 'At 1:14: unexpected "}"'],
    ['key "a" { policy = "read" ', 'expected "}"'],
    ['acl = "unterminated', 'At 1:7: unterminated string'],
    ['/* never closed', 'unterminated comment'],
    ['acl = @', 'illegal character "@"'],
    ['{"acl": "read",}', 'At 1:16: expected a quoted key, got "}"'],
    ['{"acl": "read"} extra', 'after JSON object'],
    ['acl = "list"', 'Invalid acl policy: "list" (at 1:1)'],
    ['acl = "read"\nacl = "write"', 'acl is set more than once (at 2:1)'],
    ['keyring = "all"', 'Invalid keyring policy: "all"'],
    ['service = "read"', 'service rules are blocks'],
    ['acl "x" { policy = "read" }', 'unknown resource "acl"; write acl = "read"'],
    ['service "x" { policy = "list" }', 'Invalid service policy: "list"'],
    ['node "x" { intentions = "read" }', 'unknown key "intentions" in node "x"'],
    ['node "x" { }', 'sets no policy'],
    ['namespace "a" { namespace "b" { acl = "read" } }', 'cannot be nested in a namespace'],
    ['namespace "a" { partition "b" { acl = "read" } }', 'must be at the top level'],
    [`${'namespace "a" {'.repeat(40)}`, 'nested too deeply'],
  ])('refuses %j', (text, message) => {
    expect(() => parsePolicyRules(text)).toThrow(message);
  });
});
