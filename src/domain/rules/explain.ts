import { type Access, TABLE_OF, enforce, strongest } from './decisions.js';
import { type Authorizer, merge } from './authorizer.js';
import type { AccessLevel } from './policy.js';
import type { DecisionSource, ExplainedRule, Reason } from './explain-types.js';
import { DEFAULT_NAMESPACE, DEFAULT_PARTITION } from '../ids.js';

/**
 * Why an authorizer answers a check as it does (docs/operator-insight.md): the same walk as its decision
 * (authorizer.ts, decisions.ts), with each rule's source kept. Not a hot path: it looks at
 * every rule of the token's policies once per check; `allow` is always what `allows()` says
 * (test/domain/explain.test.ts compares them on random stores).
 */
export interface Explained {
  allow: boolean;
  reason: Reason;
}

/** A rule one source contributes, with the level that counts for the check. */
interface Contribution {
  level: AccessLevel;
  rule: ExplainedRule;
}

const NO_SOURCE: DecisionSource = { Source: 'policy' };

const q = JSON.stringify;

function placed(source: DecisionSource | undefined, rule: string, block: string | undefined): ExplainedRule {
  return { ...(source ?? NO_SOURCE), Rule: rule, ...(block !== undefined ? { Block: block } : {}) };
}

function defaultReason(authz: Authorizer, note = ''): Reason {
  return { Source: 'default_policy', Rule: `default_policy = ${q(authz.defaultPolicy)}${note}` };
}

/**
 * The contribution that decides among several for one name (the first of the strongest), and
 * the one that lost when a deny beat a grant.
 */
function decide(all: Contribution[], rank: (a: AccessLevel | undefined, b: AccessLevel | undefined) => AccessLevel | undefined) {
  let level: AccessLevel | undefined;
  for (const c of all) level = rank(level, c.level);
  const winner = all.find((c) => c.level === level) as Contribution;
  let lost: Contribution | undefined;
  if (level === 'deny')
    for (const c of all) if (c.level !== 'deny' && (lost === undefined || rank(lost.level, c.level) === c.level)) lost = c;
  return { winner, lost };
}

/** What the merged rule of `acl` or `operator` grants: write everything, read and list reads, deny nothing. */
const grantsAccess = (level: AccessLevel, access: Access): boolean => level === 'write' || (access !== 'write' && level !== 'deny');

const withLost = (winner: Contribution, lost: Contribution | undefined): Reason =>
  lost ? { ...winner.rule, Lost: lost.rule } : { ...winner.rule };

/** `acl`: each policy's most specific block that sets it, merged across policies. */
function explainAcl(authz: Authorizer, access: Access, partition: string, namespace: string): Explained {
  const all: Contribution[] = [];
  for (const p of authz.policies) {
    const r = authz.aclRuleOf(p, partition, namespace);
    if (r) all.push({ level: r.level, rule: placed(p.source, `acl = ${q(r.level)}`, r.block) });
  }
  if (all.length === 0) {
    const allow = access !== 'write' && authz.defaultPolicy === 'allow';
    return { allow, reason: defaultReason(authz, authz.defaultPolicy === 'allow' ? ' (never grants acl write)' : '') };
  }
  const { winner, lost } = decide(all, merge);
  return { allow: grantsAccess(winner.level, access), reason: withLost(winner, lost) };
}

/** The cluster-wide switches (operator, keyring, mesh, peering): top-level rules of default-namespace policies. */
function clusterContributions(authz: Authorizer, name: string): Contribution[] {
  const all: Contribution[] = [];
  if (authz.tokenNamespace !== DEFAULT_NAMESPACE || authz.tokenPartition !== DEFAULT_PARTITION) return all;
  for (const p of authz.policies) {
    const level = p.namespace === DEFAULT_NAMESPACE && p.partition === DEFAULT_PARTITION ? p.rules.flags[name] : undefined;
    if (level !== undefined) all.push({ level, rule: placed(p.source, `${name} = ${q(level)}`, undefined) });
  }
  return all;
}

function explainOperator(authz: Authorizer, access: Access): Explained {
  const all = clusterContributions(authz, 'operator');
  if (all.length === 0) return { allow: authz.defaultPolicy === 'allow', reason: defaultReason(authz) };
  const { winner, lost } = decide(all, merge);
  return { allow: grantsAccess(winner.level, access), reason: withLost(winner, lost) };
}

function explainSwitch(authz: Authorizer, resource: string, access: Access): Explained {
  const all = clusterContributions(authz, resource);
  if (all.length === 0) {
    // mesh and peering without a rule of their own follow operator.
    if (resource !== 'keyring') return explainOperator(authz, access);
    return { allow: authz.defaultPolicy === 'allow', reason: defaultReason(authz) };
  }
  const { winner, lost } = decide(all, merge);
  return { allow: enforce(winner.level, access) === 'allow', reason: withLost(winner, lost) };
}

/** One name's merged rule in a segmented resource's table. */
interface Entry {
  name: string;
  prefix: boolean;
  all: Contribution[];
}

/** The table `resource` is judged by: its rules merged by kind and name, as CompiledRules merges them. */
function tableOf(authz: Authorizer, resource: string, partition: string, namespace: string): Entry[] {
  const base = resource === 'intention' ? 'service' : resource;
  const byKey = new Map<string, { name: string; prefix: boolean; policy: Contribution[]; intentions: Contribution[] }>();
  for (const p of authz.policies) {
    for (const scope of authz.scopesAt(p, partition, namespace)) {
      for (const r of scope.rules.resources) {
        const kind = TABLE_OF.get(r.resource);
        if (kind === undefined || kind.base !== base) continue;
        const key = `${r.resource}\u0000${r.segment}`;
        let m = byKey.get(key);
        if (!m) byKey.set(key, (m = { name: r.segment, prefix: kind.prefix, policy: [], intentions: [] }));
        const head = `${r.resource} ${q(r.segment)}`;
        if (r.policy !== undefined)
          m.policy.push({ level: r.policy, rule: placed(p.source, `${head} { policy = ${q(r.policy)} }`, scope.block) });
        if (r.intentions !== undefined)
          m.intentions.push({ level: r.intentions, rule: placed(p.source, `${head} { intentions = ${q(r.intentions)} }`, scope.block) });
      }
    }
  }
  const out: Entry[] = [];
  for (const m of byKey.values()) {
    if (resource !== 'intention') {
      if (m.policy.length > 0) out.push({ name: m.name, prefix: m.prefix, all: m.policy });
      continue;
    }
    if (m.intentions.length > 0) {
      out.push({ name: m.name, prefix: m.prefix, all: m.intentions });
      continue;
    }
    // No `intentions`: a service rule grants intention read when its policy is read or write, else deny.
    const { winner } = decide(m.policy, strongest);
    const level: AccessLevel = winner.level === 'read' || winner.level === 'write' ? 'read' : 'deny';
    out.push({
      name: m.name,
      prefix: m.prefix,
      all: [{ level, rule: { ...winner.rule, Rule: `${winner.rule.Rule} (intentions ${level})` } }],
    });
  }
  return out;
}

/** The prefix rule that matches `name` with the longest prefix (RuleTable.lookup's). */
function longestPrefix(table: readonly Entry[], name: string): Entry | undefined {
  let best: Entry | undefined;
  for (const e of table) if (e.prefix && name.startsWith(e.name) && (best === undefined || e.name.length > best.name.length)) best = e;
  return best;
}

/** Consul's KeyWritePrefix, explained: the covering prefix rule, or the first rule under the prefix that is not write. */
function explainWritePrefix(authz: Authorizer, table: Entry[], prefix: string): Explained {
  const cover = longestPrefix(table, prefix);
  if (cover) {
    const { winner, lost } = decide(cover.all, strongest);
    if (winner.level !== 'write') return { allow: false, reason: withLost(winner, lost) };
  }
  for (const e of table) {
    if (!e.name.startsWith(prefix)) continue;
    const { winner, lost } = decide(e.all, strongest);
    if (winner.level !== 'write') return { allow: false, reason: withLost(winner, lost) };
  }
  if (cover) return { allow: true, reason: { ...decide(cover.all, strongest).winner.rule } };
  return { allow: authz.defaultPolicy === 'allow', reason: defaultReason(authz) };
}

function explainSegmented(
  authz: Authorizer,
  resource: string,
  segment: string,
  access: Access,
  partition: string,
  namespace: string,
): Explained {
  const table = tableOf(authz, resource, partition, namespace);
  if (access === 'write-prefix') return explainWritePrefix(authz, table, segment);
  const exact = table.find((e) => !e.prefix && e.name === segment);
  const prefix = longestPrefix(table, segment);
  const decider = exact ?? prefix;
  if (decider === undefined) return { allow: authz.defaultPolicy === 'allow', reason: defaultReason(authz) };
  const { winner, lost } = decide(decider.all, strongest);
  const verdict = enforce(winner.level, access);
  // An exact rule beat a prefix: the prefix's rule lost (a deny that beat a grant for the same name is named first).
  const beaten = exact && prefix && !lost ? decide(prefix.all, strongest).winner : lost;
  return { allow: verdict === 'allow', reason: withLost(winner, beaten) };
}

/** Why `authz` answers the check as it does; `allow` equals `authz.allows(...)`. */
export function explain(
  authz: Authorizer,
  resource: string,
  segment: string,
  access: Access,
  partition: string,
  namespace: string,
): Explained {
  switch (resource) {
    case 'acl':
      return explainAcl(authz, access, partition, namespace);
    case 'operator':
      return explainOperator(authz, access);
    case 'keyring':
    case 'mesh':
    case 'peering':
      return explainSwitch(authz, resource, access);
    default:
      return explainSegmented(authz, resource, segment, access, partition, namespace);
  }
}
