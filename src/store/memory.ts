import type { GoneSecrets } from './gone-secrets.js';
import type {
  AuthMethodRecord,
  BindingRuleRecord,
  BootstrapState,
  PolicyRecord,
  QuotaRecord,
  RoleRecord,
  Scope,
  TokenRecord,
} from '../domain/types.js';
import {
  type IndexName,
  type RecordTypes,
  TABLE_DEFS,
  TABLE_NAMES,
  type TableName,
  type TokenGrantIndex,
  authMethodID,
  nameKey,
  quotaCountKeys,
  scopeKey,
  SEP,
} from './schema.js';
import { type CompactCodec, CompactTable } from './compact/compact-table.js';
import { isTokenRecord } from './record-check.js';
import { WatchwordError } from '../domain/errors.js';
import { decodeRaw, encode } from './records.js';
import { type Table, byID } from './table.js';

import { MemTable } from './mem-table.js';

export { MemTable };

export type Tables = { [T in TableName]: Table<RecordTypes[T], IndexName<T>> };

/** Tokens decoded and kept as objects at most (the ones in use); the rest stay as their bytes. */
const TOKENS_DECODED = 50_000;

function checkToken(record: unknown): TokenRecord {
  if (isTokenRecord(record)) return record;
  const id = (record as { AccessorID?: unknown } | null)?.AccessorID;
  throw new WatchwordError('INTERNAL', `stored token ${typeof id === 'string' ? id : '(no ID)'} is corrupt: not a well-formed record`);
}

/** Tokens as the compact table holds them: their stored bytes, checked whole when decoded. */
export const tokenCodec = (cacheSize = TOKENS_DECODED): CompactCodec<TokenRecord> => ({
  encode,
  check: checkToken,
  decodeValue: decodeRaw,
  idField: 'AccessorID',
  notGlobal: ['local', ''],
  cacheSize,
});

/** An empty in-memory table for every table of the list: tokens as their bytes, the few others as objects. */
export const newTables = (): Tables => Object.fromEntries(TABLE_NAMES.map((t) => [t, newTable(t)])) as unknown as Tables;

function newTable<T extends TableName>(t: T): Table<RecordTypes[T], string> {
  if (t !== 'tokens') return new MemTable<RecordTypes[T], string>(TABLE_DEFS[t]);
  return new CompactTable<TokenRecord, string>(TABLE_DEFS.tokens, tokenCodec()) as unknown as Table<RecordTypes[T], string>;
}

/** Token list filters; at most one of policy/role/serviceName/authMethod/localOnly is used. */
export interface TokenQuery {
  /** Restrict to these namespaces of the partition. */
  namespaces: readonly string[];
  partition: string;
  policy?: string;
  role?: string;
  serviceName?: string;
  authMethod?: string;
  /** Namespace of the auth method (authmethod-ns). */
  authMethodNamespace?: string;
  /** Only Local tokens. */
  localOnly?: boolean;
  /** Only tokens made before this time (ms): from the `created` index when no other filter is given. */
  createdBefore?: number;
}

/** Tokens made in the hours up to the one holding `before` (ms), from the `created` index: the caller checks the last hour's exactly. */
function* createdBefore(t: Tables['tokens'], before: number): IterableIterator<TokenRecord> {
  const last = new Date(before).toISOString().slice(0, 13);
  for (const hour of [...t.indexKeys('created')]) if (hour <= last) yield* t.members('created', hour);
}

/** The index a token query walks (the namespaces' own when it names none). */
function walkedIndex(q: TokenQuery): [IndexName<'tokens'>, string] | undefined {
  if (q.policy !== undefined) return ['policy', q.policy];
  if (q.role !== undefined) return ['role', q.role];
  if (q.serviceName !== undefined) return ['service', q.serviceName];
  if (q.authMethod !== undefined) return ['authMethod', q.authMethod];
  return q.localOnly ? ['local', ''] : undefined;
}

/** Whether a token found through an index answers the rest of the query. */
function matchesQuery(q: TokenQuery, tok: TokenRecord): boolean {
  if (tok.Partition !== q.partition || !q.namespaces.includes(tok.Namespace)) return false;
  if (q.localOnly && !tok.Local) return false;
  if (q.authMethodNamespace !== undefined && (tok.AuthMethodNamespace ?? tok.Namespace) !== q.authMethodNamespace) return false;
  return q.createdBefore === undefined || Date.parse(tok.CreateTime) < q.createdBefore;
}

/** Walks each in AccessorID order, merged into one in that order. */
function mergedByID(walks: ReadonlyArray<Iterable<TokenRecord>>): Iterable<TokenRecord> {
  // One walk (a filter's index, or one namespace) is read as it is: no generator between it and the caller.
  return walks.length === 1 ? (walks[0] as Iterable<TokenRecord>) : merged(walks);
}

function* merged(walks: ReadonlyArray<Iterable<TokenRecord>>): IterableIterator<TokenRecord> {
  const its = walks.map((w) => w[Symbol.iterator]());
  const heads = its.map((it) => it.next());
  for (;;) {
    let pick = -1;
    for (let i = 0; i < heads.length; i++) {
      const h = heads[i] as IteratorResult<TokenRecord>;
      if (!h.done && (pick === -1 || byID(h.value.AccessorID, (heads[pick] as IteratorYieldResult<TokenRecord>).value.AccessorID) < 0))
        pick = i;
    }
    if (pick === -1) return;
    yield (heads[pick] as IteratorYieldResult<TokenRecord>).value;
    heads[pick] = (its[pick] as Iterator<TokenRecord>).next();
  }
}

/** A position in the expiry index, so a walk does not see an entry twice. */
export type ExpiryCursor = [number, string];

/**
 * What readers see: durable state only. Every lookup is synchronous and goes through
 * an index; nothing here scans all tokens unless all tokens were asked for.
 */
export interface StateReader {
  getToken(accessor: string): TokenRecord | undefined;
  getTokenBySecret(secret: string): TokenRecord | undefined;
  /** The token whose last rotation replaced this secret (whether its overlap has ended is the caller's to judge). */
  getTokenByPreviousSecret(secret: string): TokenRecord | undefined;
  /** A token decoded for a moment and not kept (walks of many: the tokens in use stay cached). */
  peekToken(accessor: string): TokenRecord | undefined;
  /** AccessorIDs of the tokens that link a policy or role, or hold an identity or template of this name (nothing decoded). */
  tokenIDsBy(index: TokenGrantIndex, key: string): string[];
  /** How many tokens link a policy or role, or hold an identity or template of this name. */
  tokenCountBy(index: TokenGrantIndex, key: string): number;
  /** Every identity or template name some token holds. */
  tokenKeysOf(index: 'service' | 'node' | 'template'): IterableIterator<string>;
  /** Each key of a token index with the number of tokens under it (a walk of the keys, not of the tokens). */
  tokenIndexCounts(index: 'authMethod' | 'policy' | 'role' | 'quota' | 'created'): Array<[string, number]>;
  /** The AccessorIDs of the tokens made in an hour (a `created` index key), nothing decoded. */
  tokenIDsCreatedIn(hour: string): string[];
  /** How many tokens there are, and how many of them are Local. */
  tokenTotals(): { tokens: number; local: number };
  /** Tokens that expire after `from` and at or before `until` (a walk of the expiry times between, not of the tokens). */
  tokensExpiringBetween(from: number, until: number): number;
  /** The tokens of one namespace in AccessorID order, from the first after `after` (decoded for a moment, not kept). */
  tokensInScopeAfter(partition: string, namespace: string, after: string | undefined): Iterable<TokenRecord>;
  /** Every policy and every role, of every place (small tables). */
  allPolicies(): IterableIterator<PolicyRecord>;
  allRoles(): IterableIterator<RoleRecord>;
  /** Whether a token holding this secret was deleted here a moment ago (store/gone-secrets.ts). */
  isSecretGone(secret: string): boolean;
  /** Whether a global (not Local) token of this AccessorID is held, from the indexes alone (nothing decoded). */
  isGlobalToken(accessor: string): boolean;
  getPolicy(id: string): PolicyRecord | undefined;
  getPolicyByName(scope: Scope, name: string): PolicyRecord | undefined;
  getRole(id: string): RoleRecord | undefined;
  getRoleByName(scope: Scope, name: string): RoleRecord | undefined;
  getRecord<T extends TableName>(table: T, id: string): RecordTypes[T] | undefined;
  /** The records that exist among `ids`, in the order given. */
  getRecords<T extends TableName>(table: T, ids: readonly string[]): Array<RecordTypes[T]>;
  getBootstrap(): BootstrapState;
  /** Tokens matching a query, ordered by AccessorID. */
  listTokens(q: TokenQuery): TokenRecord[];
  /**
   * The same, from the first after AccessorID `after`, as a walk (a page of a list): each from
   * the index the query names, in AccessorID order, decoded for a moment and not kept.
   */
  tokensInOrder(q: TokenQuery, after: string | undefined): IterableIterator<TokenRecord>;
  /** How many tokens `tokensInOrder` walks for the query at most (the members of its index). */
  tokensWalked(q: TokenQuery): number;
  /** Policies of the namespaces given, ordered by namespace then ID. */
  listPolicies(partition: string, namespaces: readonly string[]): PolicyRecord[];
  /** Roles of the namespaces given (linked to `policy` when set), ordered by namespace then ID. */
  listRoles(partition: string, namespaces: readonly string[], policy?: string): RoleRecord[];
  getAuthMethod(scope: Scope, name: string): AuthMethodRecord | undefined;
  getBindingRule(id: string): BindingRuleRecord | undefined;
  /** Auth methods of the namespaces given, ordered by namespace then name. */
  listAuthMethods(partition: string, namespaces: readonly string[]): AuthMethodRecord[];
  /** Binding rules of the namespaces given (of one method when `method` is set), ordered by namespace then ID. */
  listBindingRules(partition: string, namespaces: readonly string[], method?: string): BindingRuleRecord[];
  /** Namespaces of a partition holding objects of a table, sorted. */
  namespacesOf(table: TableName, partition: string): string[];
  /** Every Local token of this datacenter, in every scope (snapshots). */
  localTokens(): TokenRecord[];
  getQuota(id: string): QuotaRecord | undefined;
  /** Every quota held here (global ones and this datacenter's Local ones), by name. */
  listQuotas(): QuotaRecord[];
  /** The live tokens a quota counts here (docs/http-api.md, "Quotas"): an index's member count, nothing scanned. */
  quotaUsed(q: QuotaRecord): number;
  /** Tokens whose expiry is at or before `until`, in expiry order, after `after`: each as its cursor (its expiry and ID). */
  expiredTokens(until: number, limit: number, after?: ExpiryCursor): ExpiryCursor[];
  /** The earliest expiry time held, if any. */
  nextExpiry(): number | undefined;
  count(table: TableName): number;
}

/** Reads over a set of memory tables (the durable state). */
export class TablesReader implements StateReader {
  constructor(
    /** Replaced whole when the store reloads its state from disk. */
    public tables: Tables,
    private readonly bootstrap: () => BootstrapState,
    private readonly gone: Pick<GoneSecrets, 'has'>,
  ) {}

  getToken(accessor: string): TokenRecord | undefined {
    return this.tables.tokens.get(accessor);
  }

  getTokenBySecret(secret: string): TokenRecord | undefined {
    return this.tables.tokens.byUnique('secret', secret);
  }

  getTokenByPreviousSecret(secret: string): TokenRecord | undefined {
    return this.tables.tokens.byUnique('previousSecret', secret);
  }

  peekToken(accessor: string): TokenRecord | undefined {
    return this.tables.tokens.peek(accessor);
  }

  tokenIDsBy(index: TokenGrantIndex, key: string): string[] {
    return this.tables.tokens.memberIDs(index, key);
  }

  tokenCountBy(index: TokenGrantIndex, key: string): number {
    return this.tables.tokens.memberCount(index, key);
  }

  tokenKeysOf(index: 'service' | 'node' | 'template'): IterableIterator<string> {
    return this.tables.tokens.indexKeys(index);
  }

  tokenIndexCounts(index: 'authMethod' | 'policy' | 'role' | 'quota' | 'created'): Array<[string, number]> {
    const t = this.tables.tokens;
    return Array.from(t.indexKeys(index), (k): [string, number] => [k, t.memberCount(index, k)]);
  }

  tokenIDsCreatedIn(hour: string): string[] {
    return this.tables.tokens.memberIDs('created', hour);
  }

  tokenTotals(): { tokens: number; local: number } {
    return { tokens: this.tables.tokens.size, local: this.tables.tokens.memberCount('local', '') };
  }

  tokensExpiringBetween(from: number, until: number): number {
    return this.tables.tokens.orderedCountBetween(from, until);
  }

  tokensInScopeAfter(partition: string, namespace: string, after: string | undefined): Iterable<TokenRecord> {
    return this.tables.tokens.sortedMembersAfter('scope', scopeKey(partition, namespace), after);
  }

  allPolicies(): IterableIterator<PolicyRecord> {
    return this.tables.policies.values();
  }

  allRoles(): IterableIterator<RoleRecord> {
    return this.tables.roles.values();
  }

  isSecretGone(secret: string): boolean {
    return this.gone.has(secret);
  }

  isGlobalToken(accessor: string): boolean {
    return this.tables.tokens.has(accessor) && !this.tables.tokens.isMember('local', '', accessor);
  }

  getPolicy(id: string): PolicyRecord | undefined {
    return this.tables.policies.get(id);
  }

  getPolicyByName(scope: Scope, name: string): PolicyRecord | undefined {
    return this.tables.policies.byUnique('name', nameKey(scope.Partition, scope.Namespace, name));
  }

  getRole(id: string): RoleRecord | undefined {
    return this.tables.roles.get(id);
  }

  getRoleByName(scope: Scope, name: string): RoleRecord | undefined {
    return this.tables.roles.byUnique('name', nameKey(scope.Partition, scope.Namespace, name));
  }

  getRecord<T extends TableName>(table: T, id: string): RecordTypes[T] | undefined {
    return (this.tables[table] as unknown as Table<RecordTypes[T], string>).get(id);
  }

  getRecords<T extends TableName>(table: T, ids: readonly string[]): Array<RecordTypes[T]> {
    const t = this.tables[table] as unknown as Table<RecordTypes[T], string>;
    const out: Array<RecordTypes[T]> = [];
    for (const id of ids) {
      const r = t.get(id);
      if (r !== undefined) out.push(r);
    }
    return out;
  }

  getBootstrap(): BootstrapState {
    return this.bootstrap();
  }

  listTokens(q: TokenQuery): TokenRecord[] {
    const t = this.tables.tokens;
    const by = walkedIndex(q);
    // Members of one index key come in ID order already; only several namespaces need a sort.
    let members: Iterable<TokenRecord>;
    let sorted = true;
    if (by) members = t.sortedMembers(by[0], by[1]);
    else if (q.createdBefore !== undefined) {
      members = createdBefore(t, q.createdBefore);
      sorted = false;
    } else if (q.namespaces.length === 1) members = t.sortedMembers('scope', scopeKey(q.partition, q.namespaces[0] as string));
    else {
      members = q.namespaces.flatMap((ns) => [...(t.members('scope', scopeKey(q.partition, ns)) ?? [])]);
      sorted = false;
    }
    const out: TokenRecord[] = [];
    for (const tok of members) if (matchesQuery(q, tok)) out.push(tok);
    return sorted ? out : out.sort((a, b) => byID(a.AccessorID, b.AccessorID));
  }

  tokensWalked(q: TokenQuery): number {
    const by = walkedIndex(q);
    const t = this.tables.tokens;
    if (by) return t.memberCount(by[0], by[1]);
    let n = 0;
    for (const ns of q.namespaces) n += t.memberCount('scope', scopeKey(q.partition, ns));
    return n;
  }

  *tokensInOrder(q: TokenQuery, after: string | undefined): IterableIterator<TokenRecord> {
    const t = this.tables.tokens;
    const by = walkedIndex(q);
    // Without an index of its own, one walk per namespace, merged.
    const walks = by
      ? [t.sortedMembersAfter(by[0], by[1], after)]
      : q.namespaces.map((ns) => t.sortedMembersAfter('scope', scopeKey(q.partition, ns), after));
    for (const tok of mergedByID(walks)) if (matchesQuery(q, tok)) yield tok;
  }

  private inNamespaces<R extends { ID: string; Namespace: string }>(
    table: MemTable<R, 'scope'>,
    partition: string,
    namespaces: readonly string[],
  ): R[] {
    const out: R[] = [];
    for (const ns of [...namespaces].sort())
      out.push(...[...(table.members('scope', scopeKey(partition, ns)) ?? [])].sort((a, b) => byID(a.ID, b.ID)));
    return out;
  }

  listPolicies(partition: string, namespaces: readonly string[]): PolicyRecord[] {
    return this.inNamespaces(this.tables.policies as MemTable<PolicyRecord, 'scope'>, partition, namespaces);
  }

  listRoles(partition: string, namespaces: readonly string[], policy?: string): RoleRecord[] {
    if (policy === undefined) return this.inNamespaces(this.tables.roles as MemTable<RoleRecord, 'scope'>, partition, namespaces);
    const nsSet = new Set(namespaces);
    return [...(this.tables.roles.members('policy', policy) ?? [])]
      .filter((r) => r.Partition === partition && nsSet.has(r.Namespace))
      .sort((a, b) => byID(a.Namespace, b.Namespace) || byID(a.ID, b.ID));
  }

  getAuthMethod(scope: Scope, name: string): AuthMethodRecord | undefined {
    return this.tables.authMethods.get(authMethodID(scope.Partition, scope.Namespace, name));
  }

  getBindingRule(id: string): BindingRuleRecord | undefined {
    return this.tables.bindingRules.get(id);
  }

  listAuthMethods(partition: string, namespaces: readonly string[]): AuthMethodRecord[] {
    const out: AuthMethodRecord[] = [];
    for (const ns of [...namespaces].sort())
      out.push(...[...(this.tables.authMethods.members('scope', scopeKey(partition, ns)) ?? [])].sort((a, b) => byID(a.Name, b.Name)));
    return out;
  }

  listBindingRules(partition: string, namespaces: readonly string[], method?: string): BindingRuleRecord[] {
    if (method === undefined)
      return this.inNamespaces(this.tables.bindingRules as MemTable<BindingRuleRecord, 'scope'>, partition, namespaces);
    const out: BindingRuleRecord[] = [];
    for (const ns of [...namespaces].sort())
      out.push(
        ...[...(this.tables.bindingRules.members('method', authMethodID(partition, ns, method)) ?? [])].sort((a, b) => byID(a.ID, b.ID)),
      );
    return out;
  }

  getQuota(id: string): QuotaRecord | undefined {
    return this.tables.quotas.get(id);
  }

  listQuotas(): QuotaRecord[] {
    return [...this.tables.quotas.values()].sort((a, b) => byID(a.Name.toLowerCase(), b.Name.toLowerCase()));
  }

  quotaUsed(q: QuotaRecord): number {
    let n = 0;
    for (const k of quotaCountKeys(q)) n += this.tables.tokens.memberCount('quota', k);
    return n;
  }

  localTokens(): TokenRecord[] {
    return [...(this.tables.tokens.members('local', '') ?? [])];
  }

  namespacesOf(table: TableName, partition: string): string[] {
    const prefix = partition + SEP;
    const out: string[] = [];
    for (const k of (this.tables[table] as MemTable<unknown, 'scope'>).indexKeys('scope'))
      if (k.startsWith(prefix)) out.push(k.slice(prefix.length));
    return out.sort();
  }

  expiredTokens(until: number, limit: number, after?: ExpiryCursor): ExpiryCursor[] {
    return this.tables.tokens.orderedUpTo(until, limit, after);
  }

  nextExpiry(): number | undefined {
    return this.tables.tokens.firstOrdered();
  }

  count(table: TableName): number {
    return this.tables[table].size;
  }
}

/** A value held in a layer over the durable tables; `null` marks a deletion. */
export interface LayerEntry {
  value: unknown;
}

/** Keys of a layer: records, unique-index keys and metadata, each namespaced. */
export const layerKey = {
  record: (table: TableName, id: string) => `r${SEP}${table}${SEP}${id}`,
  unique: (table: TableName, index: string, k: string) => `u${SEP}${table}${SEP}${index}${SEP}${k}`,
  meta: (name: string) => `m${SEP}${name}`,
};
