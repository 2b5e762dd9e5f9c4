import type { ApplicablePolicy, Authorizer } from '../../src/domain/rules/authorizer.js';
import { type Access, RESOURCES, enforce } from '../../src/domain/rules/decisions.js';
import { parsePolicyRules } from '../../src/domain/rules/policy.js';
import type { Random } from '../../src/testing/simulation/random.js';

/**
 * Random rule sets and a brute-force judge of the no-escalation rule (docs/security.md, "Grants
 * limited to the granter's own"), shared by the rule's own property test and the one through HTTP.
 */

export const policy = (rules: string, extra: Partial<ApplicablePolicy> = {}): ApplicablePolicy => ({
  rules: parsePolicyRules(rules),
  namespace: 'default',
  partition: 'default',
  builtin: false,
  ...extra,
});

// Rule names over {a, b} of at most two letters; the universe adds c, so every name between two rules has a member.
export const names = ['', 'a', 'b', 'aa', 'ab', 'ba', 'bb'];
export const universe = [
  '',
  ...['a', 'b', 'c'].flatMap((x) => ['', 'a', 'b', 'c'].flatMap((y) => ['', 'a', 'b', 'c'].map((z) => x + y + z))),
];
// Every namespace the blocks (over x, xa, y and the empty prefix) tell apart, and one below each.
export const namespaces = ['default', 'defaultz', '', 'x', 'xa', 'xaz', 'xb', 'y', 'yz', 'z'];
const kinds = ['service', 'service_prefix', 'key', 'key_prefix', 'node', 'node_prefix', 'agent_prefix', 'session', 'event_prefix', 'query'];
const levels = ['read', 'write', 'deny'];
export const pick = <T>(r: Random, xs: readonly T[]): T => xs[r.int(xs.length)] as T;

export function rulesText(r: Random, nested: boolean): string {
  const lines: string[] = [];
  const seen = new Set<string>();
  for (let k = 0; k < r.int(5); k++) {
    const kind = pick(r, kinds);
    const name = pick(r, names);
    if (seen.has(`${kind} ${name}`)) continue;
    seen.add(`${kind} ${name}`);
    const level = kind.startsWith('key') && r.chance(0.2) ? 'list' : pick(r, levels);
    const intentions = kind.startsWith('service') && r.chance(0.3) ? ` intentions = "${pick(r, levels)}"` : '';
    lines.push(`${kind} "${name}" { policy = "${level}"${intentions} }`);
  }
  for (const flag of nested ? ['acl'] : ['acl', 'operator', 'mesh', 'keyring', 'peering'])
    if (r.chance(0.2)) lines.push(`${flag} = "${pick(r, levels)}"`);
  return lines.join('\n');
}

export function randomPolicies(r: Random, namespace: string): ApplicablePolicy[] {
  return Array.from({ length: r.int(3) }, () => {
    let text = rulesText(r, false);
    // Administrators' blocks, for policies of the default namespace.
    if (namespace === 'default' && r.chance(0.3))
      text += `\n${r.chance(0.5) ? 'namespace' : 'namespace_prefix'} "${pick(r, ['x', 'xa', 'y', ''])}" {\n${rulesText(r, true)}\n}`;
    return policy(text, { namespace });
  });
}

/** A check the granted rules allow (by a rule, not the default) and the holder is refused, found by walking the universe. */
export function bruteForce(holder: Authorizer, granted: Authorizer): boolean {
  for (const flag of ['operator', 'keyring', 'mesh', 'peering'])
    for (const access of ['read', 'write'] as const)
      if (enforce(granted.clusterRule(flag), access) === 'allow' && !holder.allows(flag, '', access, 'default', granted.tokenNamespace))
        return true;
  for (const ns of namespaces) {
    for (const access of ['read', 'write'] as const)
      if (enforce(granted.aclRule('default', ns), access) === 'allow' && !holder.allows('acl', '', access, 'default', ns)) return true;
    const grants = granted.rulesAt('default', ns);
    for (const [resource, spec] of Object.entries(RESOURCES)) {
      if (!spec.segmented) continue;
      for (const segment of universe)
        for (const access of spec.accesses as Access[]) {
          if (access === 'write-prefix') continue;
          if (grants.verdict(resource, segment, access) === 'allow' && !holder.allows(resource, segment, access, 'default', ns))
            return true;
        }
    }
  }
  return false;
}
