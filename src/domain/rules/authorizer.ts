import { type Access, CompiledRules, enforce } from './decisions.js';
import type { AccessLevel, ScopeRules, ScopedBlock } from './policy.js';
import type { DecisionSource } from './explain-types.js';
import { DEFAULT_NAMESPACE, DEFAULT_PARTITION } from '../ids.js';

/** A policy as it reaches the authorizer: parsed rules plus where it lives. */
export interface ApplicablePolicy {
  rules: ScopeRules;
  /** Namespace the policy is defined in. */
  namespace: string;
  /** Partition the policy is defined in. */
  partition: string;
  /** Built-in policies: their top-level rules apply in every namespace for default-namespace tokens. */
  builtin: boolean;
  /** Where the policy came from, for explanations (a stored policy, a role's, an identity's): never read to decide. */
  source?: DecisionSource;
}

/** Rules one policy holds for a place, and the block of the policy they were written in (none: its top level). */
export interface PlacedScope {
  rules: ScopeRules;
  /** `partition "p" namespace "n"`, `namespace_prefix "t-"`, or undefined for the policy's own top level. */
  block?: string;
}

const blockText = (kind: 'partition' | 'namespace', b: ScopedBlock): string =>
  `${kind}${b.prefix ? '_prefix' : ''} ${JSON.stringify(b.name)}`;

export type DefaultPolicy = 'allow' | 'deny';

/** The effective `acl` access of a token in one place. */
export type AclAccess = 'write' | 'read' | 'none';

/** Precedence when several rules of the cluster-wide resources meet: any deny wins, then write, then read, then list. */
export function merge(a: AccessLevel | undefined, b: AccessLevel | undefined): AccessLevel | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  const rank = { deny: 3, write: 2, read: 1, list: 0 } as const;
  return rank[a] >= rank[b] ? a : b;
}

function bestBlock(blocks: ScopedBlock[], name: string): ScopedBlock | undefined {
  let exact: ScopedBlock | undefined;
  let prefix: ScopedBlock | undefined;
  for (const b of blocks) {
    if (!b.prefix && b.name === name) exact = b;
    else if (b.prefix && name.startsWith(b.name) && (!prefix || b.name.length > prefix.name.length)) prefix = b;
  }
  return exact ?? prefix;
}

/**
 * Answers "may this token read / write ACLs in (partition, namespace)?" from the
 * policies reachable from it. Pure: all policies are resolved and parsed beforehand.
 */
export class Authorizer {
  constructor(
    /** Namespace of the token the request carries. */
    readonly tokenNamespace: string,
    /** Partition of the token the request carries. */
    readonly tokenPartition: string,
    readonly policies: readonly ApplicablePolicy[],
    readonly defaultPolicy: DefaultPolicy,
  ) {}

  /**
   * The `acl` rule one policy contributes at (partition, namespace), most specific block
   * first. Blocks that reach into other places are administrators' grants, as in Consul
   * Enterprise: `namespace` blocks apply only to tokens in the default namespace of the
   * policy's partition, and `partition` blocks only to tokens in the default namespace of
   * the default partition. A token in namespace "a" that links such a policy gains nothing
   * outside "a" from it, so a namespace administrator cannot climb into other namespaces.
   */
  aclRuleOf(p: ApplicablePolicy, partition: string, namespace: string): { level: AccessLevel; block?: string } | undefined {
    const ownPlace = partition === this.tokenPartition && namespace === this.tokenNamespace;
    const tokenInDefaultNamespace = this.tokenNamespace === DEFAULT_NAMESPACE;
    const everywhere = p.builtin && tokenInDefaultNamespace && this.tokenPartition === DEFAULT_PARTITION;
    const inDefaultNamespace = p.namespace === DEFAULT_NAMESPACE;
    if (inDefaultNamespace && p.partition === DEFAULT_PARTITION && tokenInDefaultNamespace && this.tokenPartition === DEFAULT_PARTITION) {
      const part = bestBlock(p.rules.partitions, partition);
      if (part) {
        const ns = bestBlock(part.rules.namespaces, namespace);
        if (ns?.rules.acl) return { level: ns.rules.acl, block: `${blockText('partition', part)} ${blockText('namespace', ns)}` };
        if (part.rules.acl) return { level: part.rules.acl, block: blockText('partition', part) };
      }
    }
    if (inDefaultNamespace && partition === p.partition && tokenInDefaultNamespace && this.tokenPartition === p.partition) {
      const ns = bestBlock(p.rules.namespaces, namespace);
      if (ns?.rules.acl) return { level: ns.rules.acl, block: blockText('namespace', ns) };
    }
    if ((ownPlace || everywhere) && p.rules.acl) return { level: p.rules.acl };
    return undefined;
  }

  /** Answers already worked out, by place (an authorizer lives as long as its token's policies). */
  private readonly answers = new Map<string, AclAccess>();

  aclAccess(partition: string, namespace: string): AclAccess {
    const place = `${partition}\u0000${namespace}`;
    let access = this.answers.get(place);
    if (access === undefined) {
      access = this.decide(partition, namespace);
      if (this.answers.size < 1024) this.answers.set(place, access);
    }
    return access;
  }

  /** The `acl` rule the policies give at (partition, namespace), merged; undefined when none does (the default policy decides). */
  aclRule(partition: string, namespace: string): AccessLevel | undefined {
    let result: AccessLevel | undefined;
    for (const p of this.policies) result = merge(result, this.aclRuleOf(p, partition, namespace)?.level);
    return result;
  }

  private decide(partition: string, namespace: string): AclAccess {
    const result = this.aclRule(partition, namespace);
    if (result === 'deny') return 'none';
    if (result === 'write') return 'write';
    if (result === 'read' || result === 'list') return 'read';
    // No rule at all: the agent's default policy decides. As in Consul, "allow" never
    // grants ACL management by itself.
    return this.defaultPolicy === 'allow' ? 'read' : 'none';
  }

  canRead(partition: string, namespace: string): boolean {
    return this.aclAccess(partition, namespace) !== 'none';
  }

  canWrite(partition: string, namespace: string): boolean {
    return this.aclAccess(partition, namespace) === 'write';
  }

  /**
   * The merged top-level rule of a cluster-wide resource (`operator`, `keyring`, `mesh`,
   * `peering`): from the policies of the default namespace and partition, for a token of the
   * default namespace and partition, built-ins included. Tokens elsewhere get none.
   */
  clusterRule(name: string): AccessLevel | undefined {
    let result: AccessLevel | undefined;
    if (this.tokenNamespace === DEFAULT_NAMESPACE && this.tokenPartition === DEFAULT_PARTITION) {
      for (const p of this.policies)
        if (p.namespace === DEFAULT_NAMESPACE && p.partition === DEFAULT_PARTITION) result = merge(result, p.rules.flags[name]);
    }
    return result;
  }

  /**
   * The cluster-wide `operator` resource (snapshots, servers). Without a rule the default
   * policy decides, all of it, as Consul's: unlike `acl`, "allow" grants operator writes
   * (a snapshot still needs `acl:write`).
   */
  operatorAccess(): AclAccess {
    const result = this.clusterRule('operator');
    if (result === 'deny') return 'none';
    if (result === 'write') return 'write';
    if (result === 'read' || result === 'list') return 'read';
    return this.defaultPolicy === 'allow' ? 'write' : 'none';
  }

  /** Rules compiled per place: built on first use, kept while the authorizer lives. */
  private readonly places = new Map<string, CompiledRules>();
  private lastPartition: string | undefined;
  private lastNamespace: string | undefined;
  private lastRules: CompiledRules | undefined;

  /**
   * The rules of every policy that reach (partition, namespace), as the README's "HTTP API" places them: a
   * policy's own rules where the token lives (built-ins everywhere for default tokens), and
   * the namespace and partition blocks administrators' policies hold for other places.
   */
  rulesAt(partition: string, namespace: string): CompiledRules {
    // Most tokens are judged in one place: the last one is kept apart from the map.
    if (partition === this.lastPartition && namespace === this.lastNamespace) return this.lastRules as CompiledRules;
    const place = `${partition}\u0000${namespace}`;
    let rules = this.places.get(place);
    if (rules === undefined) {
      const scopes: ScopeRules[] = [];
      for (const p of this.policies) for (const placed of this.scopesAt(p, partition, namespace)) scopes.push(placed.rules);
      rules = new CompiledRules(scopes);
      if (this.places.size >= 256) this.places.clear();
      this.places.set(place, rules);
    }
    this.lastPartition = partition;
    this.lastNamespace = namespace;
    this.lastRules = rules;
    return rules;
  }

  /** The scopes of one policy that reach (partition, namespace), most specific first. */
  scopesAt(p: ApplicablePolicy, partition: string, namespace: string): PlacedScope[] {
    const out: PlacedScope[] = [];
    const tokenInDefaultNamespace = this.tokenNamespace === DEFAULT_NAMESPACE;
    const inDefaultNamespace = p.namespace === DEFAULT_NAMESPACE;
    if (inDefaultNamespace && p.partition === DEFAULT_PARTITION && tokenInDefaultNamespace && this.tokenPartition === DEFAULT_PARTITION) {
      const part = bestBlock(p.rules.partitions, partition);
      if (part) {
        const ns = bestBlock(part.rules.namespaces, namespace);
        if (ns) out.push({ rules: ns.rules, block: `${blockText('partition', part)} ${blockText('namespace', ns)}` });
        out.push({ rules: part.rules, block: blockText('partition', part) });
      }
    }
    if (inDefaultNamespace && partition === p.partition && tokenInDefaultNamespace && this.tokenPartition === p.partition) {
      const ns = bestBlock(p.rules.namespaces, namespace);
      if (ns) out.push({ rules: ns.rules, block: blockText('namespace', ns) });
    }
    const ownPlace = partition === this.tokenPartition && namespace === this.tokenNamespace;
    const everywhere = p.builtin && tokenInDefaultNamespace && this.tokenPartition === DEFAULT_PARTITION;
    if (ownPlace || everywhere) out.push({ rules: p.rules });
    return out;
  }

  /**
   * May this token have `access` to `resource` (`segment` for named resources) at
   * (partition, namespace)? `acl` and `operator` answer as the daemon's own endpoints
   * enforce them; `mesh` and `peering` without a rule of their own follow `operator`; the
   * rest follow their rules, then the default policy. The caller has validated the check.
   */
  allows(resource: string, segment: string, access: Access, partition: string, namespace: string): boolean {
    switch (resource) {
      case 'acl':
        return access === 'write' ? this.canWrite(partition, namespace) : this.canRead(partition, namespace);
      case 'operator': {
        const granted = this.operatorAccess();
        return access === 'write' ? granted === 'write' : granted !== 'none';
      }
      case 'keyring':
      case 'mesh':
      case 'peering': {
        const verdict = enforce(this.clusterRule(resource), access);
        if (verdict === 'default' && resource !== 'keyring') return this.allows('operator', '', access, partition, namespace);
        return verdict === 'default' ? this.defaultPolicy === 'allow' : verdict === 'allow';
      }
      default: {
        const verdict = this.rulesAt(partition, namespace).verdict(resource, segment, access);
        return verdict === 'default' ? this.defaultPolicy === 'allow' : verdict === 'allow';
      }
    }
  }
}
