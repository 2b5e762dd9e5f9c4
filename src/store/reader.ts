import type { BootstrapState, PolicyRecord, RoleRecord, Scope, TokenRecord } from '../domain/types.js';
import type { z } from 'zod';
import type { ReadCache } from './cache.js';
import type { KVView } from './kv.js';
import { META, SEP, TABLES, type TableName, fromHex, hex, key, lastPart, prefixEnd, recordKey } from './keys.js';
import { RECORD_SCHEMAS, type RecordTypes, bootstrapStateSchema, decodeRaw, decodeWith } from './records.js';

/** Token list filters; at most one of policy/role/service/authMethod is set by callers. */
export interface TokenQuery {
  /** Restrict to these namespaces of the partition; undefined means every namespace. */
  namespaces?: string[];
  partition: string;
  policy?: string;
  role?: string;
  serviceName?: string;
  authMethod?: string;
  /** Namespace of the auth method (authmethod-ns). */
  authMethodNamespace?: string;
  /** Only Local tokens. */
  localOnly?: boolean;
}

const decodeString = (bytes: Uint8Array): string => decodeRaw(bytes) as string;

/**
 * Queries over a KV view. Every list goes through a secondary index: nothing here scans
 * all tokens unless the caller asked for all tokens.
 */
export class Reader {
  constructor(
    protected readonly kv: KVView,
    /** Decoded values of committed state; only the store's own committed reader has one. */
    private readonly cache?: ReadCache,
  ) {}

  /** Reads and decodes one key, through the cache when there is one. */
  private async read<T>(k: string, decode: (bytes: Uint8Array) => T): Promise<T | undefined> {
    const cache = this.cache;
    if (cache?.has(k)) return cache.get(k) as T;
    const generation = cache?.generation ?? 0;
    const bytes = await this.kv.get(k);
    if (bytes === undefined) return undefined;
    const value = decode(bytes);
    cache?.fill(k, value, generation, bytes.byteLength + k.length);
    return value;
  }

  private async readMany<T>(keys: readonly string[], decode: (bytes: Uint8Array) => T): Promise<Array<T | undefined>> {
    const cache = this.cache;
    const out: Array<T | undefined> = new Array(keys.length);
    const missing: number[] = [];
    keys.forEach((k, i) => {
      if (cache?.has(k)) out[i] = cache.get(k) as T;
      else missing.push(i);
    });
    if (missing.length > 0) {
      const generation = cache?.generation ?? 0;
      const values = await this.kv.getMany(missing.map((i) => keys[i] as string));
      missing.forEach((i, j) => {
        const bytes = values[j];
        if (bytes === undefined) return;
        const value = decode(bytes);
        cache?.fill(keys[i] as string, value, generation, bytes.byteLength + (keys[i] as string).length);
        out[i] = value;
      });
    }
    return out;
  }

  getRecord<T extends TableName>(table: T, id: string): Promise<RecordTypes[T] | undefined> {
    return this.read(recordKey(TABLES[table], id), (bytes) => decodeWith(RECORD_SCHEMAS[table] as z.ZodType<RecordTypes[T]>, bytes, table));
  }

  async getRecords<T extends TableName>(table: T, ids: readonly string[]): Promise<Array<RecordTypes[T]>> {
    if (ids.length === 0) return [];
    const values = await this.readMany(
      ids.map((id) => recordKey(TABLES[table], id)),
      (bytes) => decodeWith(RECORD_SCHEMAS[table] as z.ZodType<RecordTypes[T]>, bytes, table),
    );
    return values.filter((v): v is RecordTypes[T] => v !== undefined);
  }

  getToken(accessor: string): Promise<TokenRecord | undefined> {
    return this.getRecord('tokens', accessor);
  }

  async getTokenBySecret(secret: string): Promise<TokenRecord | undefined> {
    const accessor = await this.read(key('ts', secret), decodeString);
    return accessor === undefined ? undefined : this.getToken(accessor);
  }

  /** Whether any token uses this value as its SecretID. */
  async isSecretInUse(secret: string): Promise<boolean> {
    return (await this.read(key('ts', secret), decodeString)) !== undefined;
  }

  getPolicy(id: string): Promise<PolicyRecord | undefined> {
    return this.getRecord('policies', id);
  }

  async getPolicyByName(scope: Scope, name: string): Promise<PolicyRecord | undefined> {
    const id = await this.read(key('pn', scope.Partition, scope.Namespace, name.toLowerCase()), decodeString);
    return id === undefined ? undefined : this.getPolicy(id);
  }

  getRole(id: string): Promise<RoleRecord | undefined> {
    return this.getRecord('roles', id);
  }

  async getRoleByName(scope: Scope, name: string): Promise<RoleRecord | undefined> {
    const id = await this.read(key('rn', scope.Partition, scope.Namespace, name.toLowerCase()), decodeString);
    return id === undefined ? undefined : this.getRole(id);
  }

  /** IDs from the last part of every key under `prefix`. */
  async idsUnder(prefix: string, limit?: number): Promise<string[]> {
    const ids: string[] = [];
    for await (const k of this.kv.keys({ gte: prefix, lt: prefixEnd(prefix), ...(limit ? { limit } : {}) })) ids.push(lastPart(k));
    return ids;
  }

  /** Distinct namespaces holding objects of a table in a partition, read from its namespace index. */
  async namespacesOf(table: TableName, partition: string): Promise<string[]> {
    const tag = table === 'tokens' ? 'tn' : table === 'policies' ? 'pl' : 'rl';
    const out: string[] = [];
    let from = key(tag, partition, '');
    const end = prefixEnd(from);
    for (;;) {
      let found: string | undefined;
      for await (const k of this.kv.keys({ gte: from, lt: end, limit: 1 })) found = k;
      if (found === undefined) return out;
      const ns = found.split(SEP)[2] as string;
      out.push(ns);
      // Skip past every key of this namespace.
      from = key(tag, partition, ns) + SEP + '\uffff';
    }
  }

  async listTokens(q: TokenQuery): Promise<TokenRecord[]> {
    let ids: string[];
    if (q.policy !== undefined) ids = await this.idsUnder(key('tp', q.policy, ''));
    else if (q.role !== undefined) ids = await this.idsUnder(key('tr', q.role, ''));
    else if (q.serviceName !== undefined) ids = await this.idsUnder(key('tsv', q.serviceName, ''));
    else if (q.authMethod !== undefined) ids = await this.idsUnder(key('tam', q.authMethod, ''));
    else if (q.localOnly) ids = await this.idsUnder(key('tl', ''));
    else if (q.namespaces !== undefined) {
      ids = [];
      for (const ns of q.namespaces) ids.push(...(await this.idsUnder(key('tn', q.partition, ns, ''))));
    } else {
      ids = await this.idsUnder(key('tn', q.partition, ''));
    }
    const tokens = await this.getRecords('tokens', ids);
    const nsSet = q.namespaces ? new Set(q.namespaces) : undefined;
    return tokens.filter(
      (t) =>
        t.Partition === q.partition &&
        (nsSet === undefined || nsSet.has(t.Namespace)) &&
        (!q.localOnly || t.Local) &&
        (q.authMethodNamespace === undefined || (t.AuthMethodNamespace ?? t.Namespace) === q.authMethodNamespace),
    );
  }

  /** Policies of a partition, in the given namespaces (all when undefined), ordered by namespace then ID. */
  async listPolicies(partition: string, namespaces?: string[]): Promise<PolicyRecord[]> {
    const ids: string[] = [];
    for (const ns of namespaces ?? (await this.namespacesOf('policies', partition))) {
      ids.push(...(await this.idsUnder(key('pl', partition, ns, ''))));
    }
    return this.getRecords('policies', ids);
  }

  async listRoles(partition: string, namespaces?: string[], policy?: string): Promise<RoleRecord[]> {
    let ids: string[] = [];
    if (policy !== undefined) {
      ids = await this.idsUnder(key('rp', policy, ''));
    } else {
      for (const ns of namespaces ?? (await this.namespacesOf('roles', partition))) {
        ids.push(...(await this.idsUnder(key('rl', partition, ns, ''))));
      }
    }
    const nsSet = namespaces ? new Set(namespaces) : undefined;
    const roles = await this.getRecords('roles', ids);
    return roles.filter((r) => r.Partition === partition && (nsSet === undefined || nsSet.has(r.Namespace)));
  }

  /**
   * Tokens whose expiry is at or before `until`, in expiry order, starting after the
   * index key `after` (a cursor, so entries that are skipped are not read again).
   */
  async expiredTokens(until: number, limit: number, after?: string): Promise<Array<{ id: string; key: string }>> {
    const out: Array<{ id: string; key: string }> = [];
    const gte = after === undefined ? key('tx', '') : after + '\u0000';
    for await (const k of this.kv.keys({ gte, lt: key('tx', hex(Math.max(0, until) + 1)), limit })) {
      out.push({ id: lastPart(k), key: k });
    }
    return out;
  }

  /** The earliest expiry time in the index, if any (lets the reaper sleep until then). */
  async nextExpiry(): Promise<number | undefined> {
    for await (const k of this.kv.keys({ gte: key('tx', ''), lt: prefixEnd(key('tx', '')), limit: 1 })) {
      return fromHex(k.split(SEP)[1] as string);
    }
    return undefined;
  }

  /** Every record of a table, in ID order (snapshot diffs; not for request paths). */
  async allRecords<T extends TableName>(table: T): Promise<Array<RecordTypes[T]>> {
    const prefix = key(TABLES[table].prefix, '');
    return this.getRecords(table, await this.idsUnder(prefix));
  }

  async getBootstrap(): Promise<BootstrapState> {
    const bytes = await this.kv.get(META.bootstrap);
    return bytes === undefined ? { Bootstrapped: false, ResetIndex: 0 } : decodeWith(bootstrapStateSchema, bytes, 'bootstrap state');
  }

  /** Raw bytes of a bookkeeping key. */
  getRecordBytes(metaKey: string): Promise<Uint8Array | undefined> {
    return this.kv.get(metaKey);
  }

  async getMetaNumber(metaKey: string): Promise<number> {
    const bytes = await this.kv.get(metaKey);
    return bytes === undefined ? 0 : Number(decodeRaw(bytes));
  }
}
