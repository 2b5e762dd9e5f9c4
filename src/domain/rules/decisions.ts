import type { AccessLevel, ScopeRules } from './policy.js';

/**
 * Decisions on every Consul resource, with Consul's semantics (its `acl` package): rules
 * of all the policies that apply are merged first (for one name and kind, deny > write >
 * list > read), then an exact rule beats any prefix rule and the longest matching prefix
 * wins; what no rule decides falls to the default policy.
 */

/**
 * What a check may ask for. `list` and `write-prefix` exist only for keys: `write-prefix`
 * asks whether everything under a prefix may be written (a recursive delete), as Consul's.
 */
export type Access = 'read' | 'list' | 'write' | 'write-prefix';

/** A rule's verdict before the default policy: Consul's Allow, Deny, Default. */
export type Verdict = 'allow' | 'deny' | 'default';

export interface ResourceSpec {
  /** Segmented resources judge a name (`service "web"`); the others are one switch. */
  segmented: boolean;
  accesses: readonly Access[];
}

const RW: readonly Access[] = ['read', 'write'];

/** The resources a check may name, and the accesses each has (docs/enforcing-client.md, "Enforcing policies in your service"). */
export const RESOURCES: Readonly<Record<string, ResourceSpec>> = {
  acl: { segmented: false, accesses: RW },
  operator: { segmented: false, accesses: RW },
  keyring: { segmented: false, accesses: RW },
  mesh: { segmented: false, accesses: RW },
  peering: { segmented: false, accesses: RW },
  agent: { segmented: true, accesses: RW },
  event: { segmented: true, accesses: RW },
  node: { segmented: true, accesses: RW },
  query: { segmented: true, accesses: RW },
  session: { segmented: true, accesses: RW },
  service: { segmented: true, accesses: RW },
  key: { segmented: true, accesses: ['read', 'list', 'write', 'write-prefix'] },
  intention: { segmented: true, accesses: RW },
};

export const isResource = (name: string): boolean => Object.hasOwn(RESOURCES, name);

/** Consul's `enforce`: what a rule's level says about one access. */
export function enforce(level: AccessLevel | undefined, access: Access): Verdict {
  switch (level) {
    case 'write':
      return 'allow';
    case 'list':
      return access === 'read' || access === 'list' ? 'allow' : 'deny';
    case 'read':
      return access === 'read' ? 'allow' : 'deny';
    case 'deny':
      return 'deny';
    default:
      return 'default';
  }
}

const RANK: Readonly<Record<AccessLevel, number>> = { deny: 4, write: 3, list: 2, read: 1 };

/** Consul's `takesPrecedenceOver`: deny > write > list > read. */
export function strongest(a: AccessLevel | undefined, b: AccessLevel | undefined): AccessLevel | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return RANK[a] >= RANK[b] ? a : b;
}

/**
 * The rules of one resource: exact names in one map, prefixes in another with their
 * distinct lengths longest first, so a look-up is one map probe per prefix length in use
 * (a handful) whatever the number of rules.
 */
export class RuleTable {
  private readonly exact = new Map<string, AccessLevel>();
  private readonly prefixes = new Map<string, AccessLevel>();
  private lengths: number[] = [];

  set(name: string, prefix: boolean, level: AccessLevel): void {
    if (prefix) {
      if (!this.prefixes.has(name)) this.lengths = [...new Set([...this.lengths, name.length])].sort((a, b) => b - a);
      this.prefixes.set(name, level);
    } else {
      this.exact.set(name, level);
    }
  }

  get size(): number {
    return this.exact.size + this.prefixes.size;
  }

  /** Every name a rule is written for, exact or prefix. */
  names(): string[] {
    return [...this.exact.keys(), ...this.prefixes.keys()];
  }

  /**
   * Consul's KeyWritePrefix: deny when the prefix rule that covers `prefix` is not write, or
   * when any rule under it (exact or prefix) is not write; else allow when such a prefix
   * rule exists, default when none does. Not a hot path: it looks at every rule.
   */
  writePrefix(prefix: string): Verdict {
    let base: Verdict = 'default';
    for (const len of this.lengths) {
      if (len > prefix.length) continue;
      const level = this.prefixes.get(prefix.slice(0, len));
      if (level !== undefined) {
        if (level !== 'write') return 'deny';
        base = 'allow';
        break;
      }
    }
    for (const rules of [this.prefixes, this.exact]) {
      for (const [name, level] of rules) if (name.startsWith(prefix) && level !== 'write') return 'deny';
    }
    return base;
  }

  /** The rule for a name: its exact rule, else the longest prefix that matches, else none. */
  lookup(name: string): AccessLevel | undefined {
    const exact = this.exact.get(name);
    if (exact !== undefined) return exact;
    for (const len of this.lengths) {
      if (len > name.length) continue;
      const level = this.prefixes.get(len === name.length ? name : name.slice(0, len));
      if (level !== undefined) return level;
    }
    return undefined;
  }
}

/** Rule kinds (`service`, `service_prefix`, …) and the table of the segmented resource each feeds. */
export const TABLE_OF = new Map<string, { base: string; prefix: boolean }>(
  ['agent', 'event', 'node', 'query', 'session', 'service', 'key'].flatMap((base) => [
    [base, { base, prefix: false }],
    [`${base}_prefix`, { base, prefix: true }],
  ]),
);

interface MergedRule {
  base: string;
  name: string;
  prefix: boolean;
  policy?: AccessLevel;
  intentions?: AccessLevel;
}

/**
 * The rules of several policies in one place, merged and compiled: built once per token
 * version and place, then every decision is a few map probes.
 */
export class CompiledRules {
  private readonly flags = new Map<string, AccessLevel>();
  private readonly tables = new Map<string, RuleTable>();

  constructor(scopes: readonly ScopeRules[]) {
    const merged = new Map<string, MergedRule>();
    for (const scope of scopes) {
      if (scope.acl !== undefined) this.flags.set('acl', strongest(this.flags.get('acl'), scope.acl) as AccessLevel);
      for (const [flag, level] of Object.entries(scope.flags)) this.flags.set(flag, strongest(this.flags.get(flag), level) as AccessLevel);
      for (const rule of scope.resources) {
        const kind = TABLE_OF.get(rule.resource);
        if (!kind) continue;
        const key = `${rule.resource}\u0000${rule.segment}`;
        let m = merged.get(key);
        if (!m) merged.set(key, (m = { base: kind.base, name: rule.segment, prefix: kind.prefix }));
        const policy = strongest(m.policy, rule.policy);
        const intentions = strongest(m.intentions, rule.intentions);
        if (policy !== undefined) m.policy = policy;
        if (intentions !== undefined) m.intentions = intentions;
      }
    }
    for (const m of merged.values()) {
      if (m.policy !== undefined) this.table(m.base).set(m.name, m.prefix, m.policy);
      if (m.base === 'service') {
        // A service rule without `intentions` grants intention read when its policy is
        // read or write, and denies otherwise (Consul's policy_authorizer.go).
        const intentions = m.intentions ?? (m.policy === 'read' || m.policy === 'write' ? 'read' : 'deny');
        this.table('intention').set(m.name, m.prefix, intentions);
      }
    }
  }

  private table(base: string): RuleTable {
    let t = this.tables.get(base);
    if (!t) this.tables.set(base, (t = new RuleTable()));
    return t;
  }

  /** A single-switch resource's merged rule (acl, operator, keyring, mesh, peering). */
  flag(name: string): AccessLevel | undefined {
    return this.flags.get(name);
  }

  /** The names rules on a segmented resource are written for (exact and prefix). */
  segments(resource: string): string[] {
    return this.tables.get(resource)?.names() ?? [];
  }

  /** The verdict of the rules on a segmented resource, before the default policy. */
  verdict(resource: string, segment: string, access: Access): Verdict {
    const table = this.tables.get(resource);
    if (table === undefined) return 'default';
    return access === 'write-prefix' ? table.writePrefix(segment) : enforce(table.lookup(segment), access);
  }
}
