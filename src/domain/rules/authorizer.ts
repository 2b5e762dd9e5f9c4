import type { AccessLevel, ScopeRules, ScopedBlock } from './policy.js';
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
}

export type DefaultPolicy = 'allow' | 'deny';

/** The effective `acl` access of a token in one place. */
export type AclAccess = 'write' | 'read' | 'none';

/** Precedence when several rules meet: any deny wins, then write, then read. */
function merge(a: AccessLevel | undefined, b: AccessLevel | undefined): AccessLevel | undefined {
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
    private readonly policies: ApplicablePolicy[],
    private readonly defaultPolicy: DefaultPolicy,
  ) {}

  /**
   * The `acl` rule one policy contributes at (partition, namespace), most specific block
   * first. Blocks that reach into other places are administrators' grants, as in Consul
   * Enterprise: `namespace` blocks apply only to tokens in the default namespace of the
   * policy's partition, and `partition` blocks only to tokens in the default namespace of
   * the default partition. A token in namespace "a" that links such a policy gains nothing
   * outside "a" from it, so a namespace administrator cannot climb into other namespaces.
   */
  private aclRuleOf(p: ApplicablePolicy, partition: string, namespace: string): AccessLevel | undefined {
    const ownPlace = partition === this.tokenPartition && namespace === this.tokenNamespace;
    const tokenInDefaultNamespace = this.tokenNamespace === DEFAULT_NAMESPACE;
    const everywhere = p.builtin && tokenInDefaultNamespace && this.tokenPartition === DEFAULT_PARTITION;
    const inDefaultNamespace = p.namespace === DEFAULT_NAMESPACE;
    if (inDefaultNamespace && p.partition === DEFAULT_PARTITION && tokenInDefaultNamespace && this.tokenPartition === DEFAULT_PARTITION) {
      const part = bestBlock(p.rules.partitions, partition);
      if (part) {
        const ns = bestBlock(part.rules.namespaces, namespace);
        if (ns?.rules.acl) return ns.rules.acl;
        if (part.rules.acl) return part.rules.acl;
      }
    }
    if (inDefaultNamespace && partition === p.partition && tokenInDefaultNamespace && this.tokenPartition === p.partition) {
      const ns = bestBlock(p.rules.namespaces, namespace);
      if (ns?.rules.acl) return ns.rules.acl;
    }
    if (ownPlace || everywhere) return p.rules.acl;
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

  private decide(partition: string, namespace: string): AclAccess {
    let result: AccessLevel | undefined;
    for (const p of this.policies) result = merge(result, this.aclRuleOf(p, partition, namespace));
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
   * The cluster-wide `operator` resource (snapshots, servers): granted by the top-level
   * `operator` rule of the policies of a token in the default namespace and partition,
   * built-ins included. Tokens of other namespaces and partitions get none.
   */
  operatorAccess(): AclAccess {
    let result: AccessLevel | undefined;
    if (this.tokenNamespace === DEFAULT_NAMESPACE && this.tokenPartition === DEFAULT_PARTITION) {
      for (const p of this.policies) if (p.namespace === DEFAULT_NAMESPACE && p.partition === DEFAULT_PARTITION) result = merge(result, p.rules.flags.operator);
    }
    if (result === 'deny') return 'none';
    if (result === 'write') return 'write';
    if (result === 'read' || result === 'list') return 'read';
    return this.defaultPolicy === 'allow' ? 'read' : 'none';
  }
}
