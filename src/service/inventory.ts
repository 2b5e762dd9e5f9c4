// The inventory (docs/http-api.md, "Inventory"): what tokens there are, by auth method, role,
// policy, namespace, partition and locality, how many expire soon, go unused or hold acl:write,
// and each quota's use. Every count comes from an index's member counts, a walk of its keys or
// of the expiry times in a day, or counts the book of last uses keeps (which walks the tokens made
// in the last 30 days once, at the first ask after a start), never from a walk of every token.
import type { InventoryResponse } from '../api/status-schemas.js';
import type { Clock } from '../domain/clock.js';
import { DEFAULT_NAMESPACE, DEFAULT_PARTITION } from '../domain/ids.js';
import { HOUR_MS, type LastUseBook } from '../store/last-use.js';
import { quotaScopeKey } from '../store/schema.js';
import type { StateReader } from '../store/store.js';
import type { AclResolver } from './acl-resolver.js';
import type { RequestContext } from './context.js';
import { requireAcl } from './permissions.js';
import { couldGrant } from './who-can.js';

/** What the inventory reads of the store. */
export interface InventoryStore {
  readonly reader: StateReader;
  readonly lastUse: Pick<LastUseBook, 'size' | 'usedSince' | 'usedByHourMade'>;
  tableIndex(table: 'tokens' | 'policies' | 'roles'): number;
}

const DAY_MS = 24 * HOUR_MS;
/** How long a token goes unused before the inventory counts it as unused. */
export const UNUSED_FOR_MS = 30 * DAY_MS;

/** A name as the inventory keys it: plain in the default namespace and partition, else qualified by them. */
const placed = (o: { Name: string; Namespace: string; Partition: string }): string =>
  o.Partition !== DEFAULT_PARTITION
    ? `${o.Partition}/${o.Namespace}/${o.Name}`
    : o.Namespace !== DEFAULT_NAMESPACE
      ? `${o.Namespace}/${o.Name}`
      : o.Name;

/** The `created` index key of the hour `ms` falls in (UTC, as createdHour writes it). */
const hourKey = (ms: number): string => new Date(Math.floor(ms / HOUR_MS) * HOUR_MS).toISOString().slice(0, 13);

export class InventoryService {
  constructor(
    private readonly store: InventoryStore,
    private readonly resolver: AclResolver,
    private readonly clock: Clock,
  ) {}

  private get reader(): StateReader {
    return this.store.reader;
  }

  /** GET /v1/acl/inventory: acl:read in the default namespace and partition (the counts are of every place). */
  async inventory(ctx: RequestContext): Promise<InventoryResponse> {
    const identity = await this.resolver.resolve(ctx.secret, ctx.client);
    requireAcl(identity, 'read', { Partition: DEFAULT_PARTITION, Namespace: DEFAULT_NAMESPACE });
    return this.counts();
  }

  /** The counts, as of now (also what the metrics show). */
  counts(): InventoryResponse {
    const r = this.reader;
    const now = this.clock.now();
    const { tokens, local } = r.tokenTotals();
    const byMethod: Record<string, number> = {};
    let throughLogins = 0;
    for (const [name, n] of r.tokenIndexCounts('authMethod')) {
      byMethod[name] = n;
      throughLogins += n;
    }
    // Tokens made through the token API count under the name "".
    if (tokens - throughLogins > 0) byMethod[''] = tokens - throughLogins;
    return {
      Tokens: tokens,
      Local: local,
      Global: tokens - local,
      ByAuthMethod: sorted(byMethod),
      ByRole: this.linked('role'),
      ByPolicy: this.linked('policy'),
      ByNamespace: this.scoped('Namespace'),
      ByPartition: this.scoped('Partition'),
      ExpiringWithin1h: r.tokensExpiringBetween(now, now + HOUR_MS),
      ExpiringWithin24h: r.tokensExpiringBetween(now, now + DAY_MS),
      NeverUsed: Math.max(0, tokens - this.store.lastUse.size),
      UnusedFor30d: this.unusedSince(now - UNUSED_FOR_MS, tokens),
      ACLWriteHolders: this.aclWriteHolders(tokens),
      Quotas: r.listQuotas().map((q) => ({
        ID: q.ID,
        Name: q.Name,
        Used: r.quotaUsed(q),
        ...(q.MaxTokens !== undefined ? { MaxTokens: q.MaxTokens } : {}),
      })),
    };
  }

  /** Tokens by the roles or policies they link (by name; links to what no longer exists are not counted). */
  private linked(index: 'role' | 'policy'): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [id, n] of this.reader.tokenIndexCounts(index)) {
      const target = index === 'role' ? this.reader.getRole(id) : this.reader.getPolicy(id);
      if (target === undefined || n === 0) continue;
      const name = placed(target);
      out[name] = (out[name] ?? 0) + n;
    }
    return sorted(out);
  }

  /** Tokens by namespace (whatever their partition) or by partition: the quota index's own counts. */
  private scoped(kind: 'Namespace' | 'Partition'): Record<string, number> {
    const prefixes = [quotaScopeKey(kind, '', 'global'), quotaScopeKey(kind, '', 'local')];
    const out: Record<string, number> = {};
    for (const [k, n] of this.reader.tokenIndexCounts('quota'))
      for (const prefix of prefixes)
        if (k.startsWith(prefix) && n > 0) out[k.slice(prefix.length)] = (out[k.slice(prefix.length)] ?? 0) + n;
    return sorted(out);
  }

  /**
   * Tokens neither used since the hour of `cutoff` nor made since then: all of them, less those used
   * since (counted by hour of their last use), less those made since and never used (the `created`
   * index's count of each hour since the cutoff, less the book's count of that hour's tokens used).
   * Counts kept as tokens and uses change; the book counts its part by walking the hours once, at
   * the first ask.
   */
  private unusedSince(cutoff: number, tokens: number): number {
    const from = hourKey(cutoff);
    const uses = this.store.lastUse;
    const used = uses.usedByHourMade(from, () => this.madeSince(from));
    let newUnused = 0;
    for (const [hour, n] of this.reader.tokenIndexCounts('created')) if (hour >= from) newUnused += n - (used.get(hour) ?? 0);
    return Math.max(0, tokens - uses.usedSince(cutoff) - newUnused);
  }

  /** The IDs of the tokens made in each hour since `from`. */
  private *madeSince(from: string): Iterable<readonly [string, Iterable<string>]> {
    for (const [hour] of this.reader.tokenIndexCounts('created')) if (hour >= from) yield [hour, this.reader.tokenIDsCreatedIn(hour)];
  }

  /** Kept until a token, policy or role changes. */
  private holders: { at: string; count: number } | undefined;

  /**
   * Tokens whose rules grant acl:write anywhere: those linking a policy that could grant it, or a
   * role that links one (identities and templates never do); every token when the default policy
   * allows. The candidates' index members, each counted once.
   */
  private aclWriteHolders(tokens: number): number {
    if (this.resolver.defaultPolicy === 'allow') return tokens;
    const at = `${this.store.tableIndex('tokens')}/${this.store.tableIndex('policies')}/${this.store.tableIndex('roles')}`;
    if (this.holders?.at === at) return this.holders.count;
    const check = { resource: 'acl', segment: undefined, access: 'write' } as const;
    const policies = new Set<string>();
    for (const p of this.reader.allPolicies()) if (couldGrant(this.resolver.rulesOf(p), check)) policies.add(p.ID);
    const roles = [...this.reader.allRoles()].filter((r) => r.Policies.some((l) => policies.has(l.ID))).map((r) => r.ID);
    const sources: Array<['policy' | 'role', string]> = [
      ...[...policies].map((id): ['policy', string] => ['policy', id]),
      ...roles.map((id): ['role', string] => ['role', id]),
    ];
    let count: number;
    if (sources.length === 1) {
      const [index, key] = sources[0] as ['policy' | 'role', string];
      count = this.reader.tokenCountBy(index, key);
    } else {
      const ids = new Set<string>();
      for (const [index, key] of sources) for (const id of this.reader.tokenIDsBy(index, key)) ids.add(id);
      count = ids.size;
    }
    this.holders = { at, count };
    return count;
  }
}

/** A count map with its keys in order (stable answers). */
function sorted(m: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(m).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
