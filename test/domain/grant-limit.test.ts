import { describe, expect, it } from 'vitest';
import { GLOBAL_MANAGEMENT_RULES } from '../../src/domain/builtins.js';
import { type ApplicablePolicy, Authorizer, type DefaultPolicy } from '../../src/domain/rules/authorizer.js';
import { firstUnheld, witnesses } from '../../src/domain/rules/grant-limit.js';
import { Random } from '../../src/testing/simulation/random.js';
import { bruteForce, pick, policy, randomPolicies } from '../helpers/grant-oracle.js';

/**
 * No escalation (docs/security.md, "Grants limited to the granter's own"): `firstUnheld` finds a
 * check the granted rules allow and the holder is refused exactly when there is one, on random
 * rule sets, against a brute-force walk of every name and place of a universe that meets every
 * case the rules can tell apart.
 */

const authz = (policies: ApplicablePolicy[], defaultPolicy: DefaultPolicy = 'deny', namespace = 'default') =>
  new Authorizer(namespace, 'default', policies, defaultPolicy);

describe('firstUnheld', () => {
  it('lets a holder grant what it holds, a prefix within its own prefix, and less than it holds', () => {
    const holder = authz([policy('service_prefix "web" { policy = "write" }\nkey_prefix "app/" { policy = "write" }\nacl = "write"')]);
    expect(firstUnheld(holder, authz([policy('service "web-1" { policy = "read" }')]))).toBeUndefined();
    expect(
      firstUnheld(holder, authz([policy('service_prefix "web-" { policy = "write" }\nkey "app/x" { policy = "read" }')])),
    ).toBeUndefined();
    expect(firstUnheld(holder, authz([policy('acl = "read"')]))).toBeUndefined();
    expect(firstUnheld(holder, authz([]))).toBeUndefined();
  });

  it('names the first rule the holder lacks: a wider prefix, a stronger level, a name under its own deny', () => {
    const holder = authz([
      policy('service_prefix "web" { policy = "write" }\nservice "web-secret" { policy = "deny" }\nkey_prefix "app/" { policy = "read" }'),
    ]);
    expect(firstUnheld(holder, authz([policy('service_prefix "" { policy = "read" }')]))).toMatchObject({
      resource: 'service',
      access: 'read',
    });
    // Write includes list, which a read of keys does not.
    expect(firstUnheld(holder, authz([policy('key_prefix "app/" { policy = "write" }')]))).toMatchObject({
      resource: 'key',
      segment: 'app/',
      access: 'list',
    });
    // The holder's deny lies under the granted prefix: that name is the one it lacks.
    expect(firstUnheld(holder, authz([policy('service_prefix "web-" { policy = "read" }')]))).toMatchObject({
      resource: 'service',
      segment: 'web-secret',
      access: 'read',
    });
    expect(firstUnheld(holder, authz([policy('operator = "read"')]))).toMatchObject({ resource: 'operator', access: 'read' });
    expect(firstUnheld(holder, authz([policy('acl = "read"')]))).toMatchObject({ resource: 'acl', access: 'read' });
  });

  it('counts the default policy for the holder, never for what is granted', () => {
    // Under default allow a holder may do what no rule of its own names (but ACL writes): granting it is holding it.
    expect(firstUnheld(authz([], 'allow'), authz([policy('service "db" { policy = "write" }')], 'allow'))).toBeUndefined();
    expect(firstUnheld(authz([], 'allow'), authz([policy('acl = "write"')], 'allow'))).toMatchObject({ resource: 'acl', access: 'write' });
    const reader = authz([policy('service "db" { policy = "read" }')], 'allow');
    expect(firstUnheld(reader, authz([policy('service "db" { policy = "write" }')], 'allow'))).toMatchObject({ access: 'write' });
    // A token with no rules grants nothing, whatever the default lets it do.
    expect(firstUnheld(authz([policy('service "db" { policy = "deny" }')], 'allow'), authz([], 'allow'))).toBeUndefined();
  });

  it('judges a namespace administrator in its namespace only, and global-management as everything', () => {
    const admin = authz([policy('namespace "team-a" {\n  acl = "write"\n  service_prefix "" { policy = "write" }\n}')]);
    const inTeamA = authz([policy('service "api" { policy = "write" }', { namespace: 'team-a' })], 'deny', 'team-a');
    expect(firstUnheld(admin, inTeamA)).toBeUndefined();
    const inTeamB = authz([policy('service "api" { policy = "write" }', { namespace: 'team-b' })], 'deny', 'team-b');
    expect(firstUnheld(admin, inTeamB)).toMatchObject({ resource: 'service', namespace: 'team-b' });
    const management = authz([policy(GLOBAL_MANAGEMENT_RULES, { builtin: true })]);
    expect(firstUnheld(admin, management)).toBeDefined();
    expect(firstUnheld(management, inTeamB)).toBeUndefined();
    expect(firstUnheld(management, management)).toBeUndefined();
  });

  it('witnesses: every name and one name below each that no rule names or starts', () => {
    expect(witnesses(['a', 'ab'])).toEqual(['', 'a', 'ab', '\u0000', 'a\u0000', 'ab\u0000']);
  });

  describe('against a brute-force walk on random rule sets', () => {
    it('finds a rule the holder lacks exactly when there is one (2,000 pairs)', () => {
      const r = new Random(20261129);
      let refused = 0;
      for (let i = 0; i < 2_000; i++) {
        const defaultPolicy: DefaultPolicy = r.chance(0.3) ? 'allow' : 'deny';
        const holder = authz(randomPolicies(r, 'default'), defaultPolicy);
        const grantedNamespace = pick(r, ['default', 'x', 'xa', 'y']);
        const granted = authz(randomPolicies(r, grantedNamespace), defaultPolicy, grantedNamespace);
        const found = firstUnheld(holder, granted);
        expect(found !== undefined, `pair ${i}: ${JSON.stringify(found)}`).toBe(bruteForce(holder, granted));
        if (found === undefined) continue;
        refused++;
        // What it names is a real gap: granted by a rule, refused to the holder.
        const { resource, segment, access, partition, namespace } = found;
        expect(holder.allows(resource, segment, access, partition, namespace)).toBe(false);
      }
      // Both answers are common enough to be tested.
      expect(refused).toBeGreaterThan(300);
      expect(refused).toBeLessThan(1_900);
    });
  });
});
