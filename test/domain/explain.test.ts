import { describe, expect, it } from 'vitest';
import { Random } from '../../src/testing/simulation/random.js';
import { GLOBAL_MANAGEMENT_RULES } from '../../src/domain/builtins.js';
import { type ApplicablePolicy, Authorizer, type DefaultPolicy } from '../../src/domain/rules/authorizer.js';
import { type Access, RESOURCES } from '../../src/domain/rules/decisions.js';
import { explain } from '../../src/domain/rules/explain.js';
import type { DecisionSource } from '../../src/domain/rules/explain-types.js';
import { reasonText } from '../../src/domain/rules/explain-types.js';
import { parsePolicyRules } from '../../src/domain/rules/policy.js';
import { renderedSources } from '../../src/domain/templates.js';

/**
 * Explanations (docs/operator-insight.md): each answer names the source and the rule, as written, that
 * decided it, and the rule that lost, in Consul's precedence cases; and an explanation's
 * answer is always the decision's.
 */

const policy = (name: string, rules: string, extra: Partial<ApplicablePolicy> = {}): ApplicablePolicy => ({
  rules: parsePolicyRules(rules),
  namespace: 'default',
  partition: 'default',
  builtin: false,
  source: { Source: 'policy', ID: `id-${name}`, Name: name },
  ...extra,
});

const rendered = (g: Parameters<typeof renderedSources>[0]): ApplicablePolicy[] =>
  renderedSources(g).map(({ policy: p, source }) => ({
    rules: parsePolicyRules(p.Rules),
    namespace: 'default',
    partition: 'default',
    builtin: false,
    source,
  }));

const authz = (policies: ApplicablePolicy[], defaultPolicy: DefaultPolicy = 'deny', place = { ns: 'default', partition: 'default' }) =>
  new Authorizer(place.ns, place.partition, policies, defaultPolicy);

const check = (a: Authorizer, resource: string, segment: string, access: Access, partition = 'default', namespace = 'default') =>
  explain(a, resource, segment, access, partition, namespace);

describe('explain: Consul precedence cases', () => {
  it('an exact rule beats a prefix rule, and the prefix is named as the rule that lost', () => {
    const a = authz([
      policy('web-exact', 'service "web" { policy = "read" }'),
      policy('we-prefix', 'service_prefix "we" { policy = "write" }'),
    ]);
    const e = check(a, 'service', 'web', 'write');
    expect(e.allow).toBe(false);
    expect(e.reason).toEqual({
      Source: 'policy',
      ID: 'id-web-exact',
      Name: 'web-exact',
      Rule: 'service "web" { policy = "read" }',
      Lost: { Source: 'policy', ID: 'id-we-prefix', Name: 'we-prefix', Rule: 'service_prefix "we" { policy = "write" }' },
    });
  });

  it('the longest matching prefix decides', () => {
    const a = authz([policy('p', 'service_prefix "" { policy = "read" }\nservice_prefix "we" { policy = "write" }')]);
    const e = check(a, 'service', 'web', 'write');
    expect(e.allow).toBe(true);
    expect(e.reason.Rule).toBe('service_prefix "we" { policy = "write" }');
    expect(e.reason.Lost).toBeUndefined();
    expect(check(a, 'service', 'db', 'write').reason.Rule).toBe('service_prefix "" { policy = "read" }');
  });

  it('a deny beats a write of another policy for the same name, which is named as lost', () => {
    const a = authz([
      policy('writers', 'key_prefix "app/" { policy = "write" }'),
      policy('no-app', 'key_prefix "app/" { policy = "deny" }'),
    ]);
    const e = check(a, 'key', 'app/x', 'read');
    expect(e.allow).toBe(false);
    expect(e.reason).toMatchObject({ Name: 'no-app', Rule: 'key_prefix "app/" { policy = "deny" }' });
    expect(e.reason.Lost).toMatchObject({ Name: 'writers', Rule: 'key_prefix "app/" { policy = "write" }' });
    expect(reasonText(e.reason)).toBe(
      'policy "no-app": key_prefix "app/" { policy = "deny" }, over policy "writers": key_prefix "app/" { policy = "write" }',
    );
  });

  it('no matching rule: the default policy decides, and says so', () => {
    const a = authz([policy('p', 'service "db" { policy = "write" }')]);
    expect(check(a, 'service', 'web', 'read')).toEqual({
      allow: false,
      reason: { Source: 'default_policy', Rule: 'default_policy = "deny"' },
    });
    const open = authz([], 'allow');
    expect(check(open, 'node', 'n1', 'write')).toEqual({
      allow: true,
      reason: { Source: 'default_policy', Rule: 'default_policy = "allow"' },
    });
    // "allow" never grants acl write by itself.
    expect(check(open, 'acl', '', 'write').allow).toBe(false);
    expect(check(open, 'acl', '', 'write').reason.Rule).toBe('default_policy = "allow" (never grants acl write)');
  });

  it('a service identity is named as the source of the rules it renders to', () => {
    const a = authz(rendered({ ServiceIdentities: [{ ServiceName: 'web' }], NodeIdentities: [], TemplatedPolicies: [] }));
    expect(check(a, 'service', 'web-sidecar-proxy', 'write').reason).toEqual({
      Source: 'service identity',
      Name: 'web',
      Rule: 'service "web-sidecar-proxy" { policy = "write" }',
      Lost: { Source: 'service identity', Name: 'web', Rule: 'service_prefix "" { policy = "read" }' },
    });
    expect(check(a, 'node', 'n1', 'read').reason).toMatchObject({ Source: 'service identity', Rule: 'node_prefix "" { policy = "read" }' });
  });

  it('node identities and templated policies are named with their names', () => {
    const a = authz(
      rendered({
        ServiceIdentities: [],
        NodeIdentities: [{ NodeName: 'n1', Datacenter: 'dc1' }],
        TemplatedPolicies: [{ TemplateName: 'builtin/dns' }, { TemplateName: 'builtin/api-gateway', TemplateVariables: { name: 'gw' } }],
      }),
    );
    expect(check(a, 'node', 'n1', 'write').reason).toMatchObject({
      Source: 'node identity',
      Name: 'n1',
      Rule: 'node "n1" { policy = "write" }',
    });
    expect(check(a, 'query', 'q', 'read').reason).toMatchObject({ Source: 'templated policy', Name: 'builtin/dns' });
    expect(check(a, 'mesh', '', 'read').reason).toMatchObject({
      Source: 'templated policy',
      Name: 'builtin/api-gateway (gw)',
      Rule: 'mesh = "read"',
    });
  });

  it('a policy reached through a role names the role and the policy', () => {
    const viaRole: DecisionSource = { Source: 'role', ID: 'r1', Name: 'ops', Policy: { ID: 'p1', Name: 'operators' } };
    const a = authz([policy('operators', 'operator = "write"', { source: viaRole })]);
    expect(check(a, 'operator', '', 'write').reason).toEqual({ ...viaRole, Rule: 'operator = "write"' });
  });

  it('global-management, mesh following operator, and intentions derived from a service rule', () => {
    const gm: DecisionSource = { Source: 'global-management', ID: '00000000-0000-0000-0000-000000000001', Name: 'global-management' };
    const a = authz([policy('gm', GLOBAL_MANAGEMENT_RULES, { source: gm, builtin: true })]);
    expect(check(a, 'acl', '', 'write').reason).toEqual({ ...gm, Rule: 'acl = "write"' });
    const op = authz([policy('op', 'operator = "read"')]);
    expect(check(op, 'peering', '', 'read').reason).toMatchObject({ Name: 'op', Rule: 'operator = "read"' });
    const svc = authz([policy('svc', 'service "web" { policy = "write" }')]);
    expect(check(svc, 'intention', 'web', 'read').reason.Rule).toBe('service "web" { policy = "write" } (intentions read)');
    expect(check(svc, 'intention', 'web', 'write').allow).toBe(false);
  });

  it('a namespace block is named where its rule sits', () => {
    const a = authz([policy('teams', 'namespace "team" { acl = "write" }')]);
    expect(check(a, 'acl', '', 'write', 'default', 'team').reason).toMatchObject({ Rule: 'acl = "write"', Block: 'namespace "team"' });
    expect(check(a, 'acl', '', 'write', 'default', 'default').reason.Source).toBe('default_policy');
  });
});

describe('explain: its answer is the decision, on random policies', () => {
  const kinds = ['service', 'service_prefix', 'key', 'key_prefix', 'node', 'node_prefix', 'agent_prefix', 'session', 'query_prefix'];
  const names = ['', 'w', 'we', 'web', 'web-1', 'db', 'a/', 'a/b'];
  const levels = ['read', 'write', 'deny'];
  const pick = <T>(rand: () => number, xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;

  /** The project's seeded source (the simulation's), as a function. */
  const seeded = (seed: number): (() => number) => {
    const r = new Random(seed);
    return () => r.next();
  };

  function randomPolicy(rand: () => number, i: number): ApplicablePolicy {
    const lines: string[] = [];
    const seen = new Set<string>();
    for (let k = 0; k < 1 + Math.floor(rand() * 5); k++) {
      const kind = pick(rand, kinds);
      const name = pick(rand, names);
      if (seen.has(`${kind} ${name}`)) continue;
      seen.add(`${kind} ${name}`);
      const intentions = kind.startsWith('service') && rand() < 0.3 ? ` intentions = "${pick(rand, levels)}"` : '';
      const level = kind.startsWith('key') && rand() < 0.2 ? 'list' : pick(rand, levels);
      lines.push(`${kind} "${name}" { policy = "${level}"${intentions} }`);
    }
    for (const flag of ['acl', 'operator', 'mesh', 'keyring']) if (rand() < 0.25) lines.push(`${flag} = "${pick(rand, levels)}"`);
    return policy(`p${i}`, lines.join('\n'));
  }

  it('on 300 random tokens, every resource and access', () => {
    const rand = seeded(20261128);
    let compared = 0;
    for (let t = 0; t < 300; t++) {
      const a = authz(
        Array.from({ length: 1 + Math.floor(rand() * 3) }, (_, i) => randomPolicy(rand, i)),
        rand() < 0.5 ? 'deny' : 'allow',
      );
      for (const [resource, spec] of Object.entries(RESOURCES)) {
        for (const access of spec.accesses) {
          const segment = spec.segmented ? pick(rand, [...names, 'web-2', 'a/b/c']) : '';
          const e = check(a, resource, segment, access);
          expect(e.allow, `${resource} ${segment} ${access}`).toBe(a.allows(resource, segment, access, 'default', 'default'));
          expect(e.reason.Rule.length).toBeGreaterThan(0);
          compared++;
        }
      }
    }
    expect(compared).toBeGreaterThan(8000);
  });
});
