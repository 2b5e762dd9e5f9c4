import { DEFAULT_NAMESPACE, DEFAULT_PARTITION } from '../ids.js';
import type { Authorizer } from './authorizer.js';
import { type Access, RESOURCES, enforce } from './decisions.js';

/** A check one authorizer's rules allow and another's answer refuses: what, and where. */
export interface UnheldGrant {
  resource: string;
  /** The name checked ('' for the single switches: acl, operator, keyring, mesh, peering). */
  segment: string;
  access: Access;
  partition: string;
  namespace: string;
}

const CLUSTER_SWITCHES = ['operator', 'keyring', 'mesh', 'peering'] as const;
const SEGMENTED = Object.keys(RESOURCES).filter((r) => RESOURCES[r]?.segmented === true);
const SWITCH_ACCESSES = ['read', 'write'] as const;

/**
 * The first check `granted`'s rules allow that `holder` is not allowed (undefined: none): the
 * no-escalation rule (docs/security.md, "Grants limited to the granter's own"). Only what a rule
 * of `granted` allows counts as granted, never what the default policy lets through; `holder`
 * is judged as every decision is (`Authorizer.allows`, the default policy included).
 *
 * Both answers depend on a name only through the rules whose names it equals or starts with,
 * so each is constant between those names: checking every rule name of either side, and for
 * each of them (and for the empty prefix) one name just below it that no rule names or
 * starts, covers every name there is. Places are covered the same way, by the names of the
 * partition and namespace blocks of either side's policies.
 */
export function firstUnheld(holder: Authorizer, granted: Authorizer): UnheldGrant | undefined {
  const own = { partition: granted.tokenPartition, namespace: granted.tokenNamespace };
  // Cluster-wide switches: rules of default-namespace policies of a default-namespace token, wherever it acts.
  for (const flag of CLUSTER_SWITCHES) {
    const level = granted.clusterRule(flag);
    for (const access of SWITCH_ACCESSES)
      if (enforce(level, access) === 'allow' && !holder.allows(flag, '', access, own.partition, own.namespace))
        return { resource: flag, segment: '', access, ...own };
  }
  for (const { partition, namespace } of places(holder, granted)) {
    const acl = granted.aclRule(partition, namespace);
    for (const access of SWITCH_ACCESSES)
      if (enforce(acl, access) === 'allow' && !holder.allows('acl', '', access, partition, namespace))
        return { resource: 'acl', segment: '', access, partition, namespace };
    const grants = granted.rulesAt(partition, namespace);
    const holds = holder.rulesAt(partition, namespace);
    for (const resource of SEGMENTED) {
      const named = grants.segments(resource);
      if (named.length === 0) continue;
      for (const segment of witnesses([...named, ...holds.segments(resource)]))
        for (const access of RESOURCES[resource]?.accesses ?? []) {
          // Writing everything under a prefix is writing each name under it: the names are checked.
          if (access === 'write-prefix') continue;
          if (grants.verdict(resource, segment, access) === 'allow' && !holder.allows(resource, segment, access, partition, namespace))
            return { resource, segment, access, partition, namespace };
        }
    }
  }
  return undefined;
}

/**
 * Names that between them meet every answer rules on `names` can give: each name, the empty
 * one, and for each of those one name just below it that no name equals or starts with.
 */
export function witnesses(names: readonly string[]): string[] {
  const given = [...new Set(names)];
  const sorted = [...given].sort();
  // Whether a name starts with `prefix`: the first name not below it, found by halving.
  const started = (prefix: string): boolean => {
    let lo = 0;
    let hi = sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((sorted[mid] as string) < prefix) lo = mid + 1;
      else hi = mid;
    }
    return lo < sorted.length && (sorted[lo] as string).startsWith(prefix);
  };
  const out = new Set<string>(['', ...given]);
  for (const base of ['', ...given]) {
    let code = 0;
    while (started(base + String.fromCharCode(code))) code++;
    out.add(base + String.fromCharCode(code));
  }
  return [...out];
}

/** The places whose rules can differ, for either authorizer: its own, and those its policies' blocks name. */
function places(holder: Authorizer, granted: Authorizer): Array<{ partition: string; namespace: string }> {
  const partitions = [DEFAULT_PARTITION, granted.tokenPartition, holder.tokenPartition];
  const namespaces = [DEFAULT_NAMESPACE, granted.tokenNamespace, holder.tokenNamespace];
  for (const a of [holder, granted])
    for (const p of a.policies) {
      partitions.push(p.partition);
      namespaces.push(p.namespace);
      for (const part of p.rules.partitions) {
        partitions.push(part.name);
        for (const ns of part.rules.namespaces) namespaces.push(ns.name);
      }
      for (const ns of p.rules.namespaces) namespaces.push(ns.name);
    }
  const out: Array<{ partition: string; namespace: string }> = [{ partition: granted.tokenPartition, namespace: granted.tokenNamespace }];
  for (const partition of witnesses(partitions))
    for (const namespace of witnesses(namespaces))
      if (partition !== granted.tokenPartition || namespace !== granted.tokenNamespace) out.push({ partition, namespace });
  return out;
}
