import { fieldNames, withDefaults } from '../domain/records.js';
import { expiryMillis as expiryOf } from '../domain/expiry.js';
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
import { type ExpiryCursor, type LayerEntry, type Tables, layerKey } from './memory.js';
import type { AnyTable } from './table.js';
import {
  type IndexDef,
  META,
  type RecordTypes,
  TABLE_DEFS,
  type TableDef,
  type TableName,
  authMethodID,
  keysOf,
  lastUseKey,
  logKey,
  nameKey,
  recordKey,
} from './schema.js';
import { encodeLogEntry } from './log-encoding.js';
import { encode } from './records.js';
import type { Change, ExpiredThrough, LogEntry, Tx, Unstamped, WatchTable } from './store.js';
import { Positional } from './compact/positional.js';

/** A token's positional form, as a store of format 3 writes it (compact/positional.ts). */
const TOKEN_FORM = new Positional(fieldNames(TABLE_DEFS.tokens.fields));

const uniqueIndexes = new WeakMap<object, Array<[string, IndexDef<unknown>]>>();

/** A table's unique indexes by name, listed once per table: every write and delete checks them. */
function uniqueIndexesOf<R>(def: TableDef<R, string>): Array<[string, IndexDef<R>]> {
  let known = uniqueIndexes.get(def);
  if (known === undefined) {
    known = (Object.entries(def.indexes) as Array<[string, IndexDef<unknown>]>).filter(([, idx]) => idx.unique);
    uniqueIndexes.set(def, known);
  }
  return known as Array<[string, IndexDef<R>]>;
}

/** One operation of an atomic LevelDB batch. */
export type BatchOp = { type: 'put'; key: string; value: Uint8Array } | { type: 'del'; key: string };

/** A record written or deleted by a transaction, applied to memory once durable. */
/**
 * A record written (null: deleted); `bytes`, once the commit has encoded it for the disk; `old`,
 * for a delete, the record it deletes (the version the table holds when the op is applied, since
 * ops apply in order), so the table need not decode it again to take it out of its indexes.
 */
export type TableOp = {
  table: TableName;
  id: string;
  record: unknown | null;
  bytes?: Uint8Array;
  old?: unknown;
  /**
   * A token the reaper deleted without reading it (`reapExpired`): taken out of memory by its
   * stored bytes; its expiry (ms), as the expiry index held it.
   */
  reaped?: number;
};

/** What a transaction reads beneath its own writes, and where it takes its indexes. */
export interface TxBase {
  /** Accepted writes not yet durable. */
  readonly pending: ReadonlyMap<string, LayerEntry>;
  /** The durable tables. */
  readonly tables: Tables;
  bootstrap(): BootstrapState;
  allocateIndex(): number;
  /** Every token's last use held on disk or being written (a delete of one it has none of writes no delete of it). */
  readonly lastUse: { get(accessor: string): number | undefined };
  /** Whether tokens are written in the positional form (a data dir of format 3). */
  readonly positionalTokens: boolean;
}

/**
 * A transaction over layers: its own writes, then every accepted write not yet durable
 * (`pending`), then the durable tables. Synchronous from start to end.
 */
export class StoreTx implements Tx {
  readonly layer = new Map<string, LayerEntry>();
  readonly tableOps: TableOp[] = [];
  readonly meta: Array<[string, unknown]> = [];
  /** Last uses written (a flush): no index, no change-log entry, no waiter woken. */
  readonly lastUses: Array<[string, number]> = [];
  readonly touched = new Map<WatchTable, number>();
  private readonly changes = new Map<number, Change[]>();
  private allocated: number | undefined;
  /** A new change-log identity, when this transaction starts one. */
  newLogID: string | undefined;

  constructor(private readonly store: TxBase) {}

  get index(): number {
    if (this.allocated === undefined) this.allocated = this.store.allocateIndex();
    return this.allocated;
  }

  nextIndex(): number {
    this.allocated = this.store.allocateIndex();
    return this.allocated;
  }

  get lastIndex(): number | undefined {
    return this.allocated;
  }

  /**
   * The transaction as one atomic batch's operations, each record encoded once (its bytes kept
   * on its op; the change log embeds the same bytes), with the change-log entries when the
   * store keeps a change log.
   */
  batch(changeLog: boolean): { entries: LogEntry[]; ops: BatchOp[]; entryBytes: Uint8Array[] } {
    const entries = this.logEntries();
    const ops: BatchOp[] = [];
    const encoded = new Map<unknown, Uint8Array>();
    for (const op of this.tableOps) {
      const k = recordKey(op.table, op.id);
      if (op.record === null) {
        ops.push({ type: 'del', key: k });
        // A token's last use goes with it, in the same batch. The book holds every use on disk or
        // being written, so a reaped token it has none of needs no delete (half a reap's tombstones).
        if (op.table === 'tokens' && (!op.reaped || this.store.lastUse.get(op.id) !== undefined))
          ops.push({ type: 'del', key: lastUseKey(op.id) });
      } else {
        const bytes = encode(op.record);
        // The change log carries the map (its readers include older releases); a store of
        // format 3 keeps a token positional, the form memory keeps it in too.
        encoded.set(op.record, bytes);
        const stored = op.table === 'tokens' && this.store.positionalTokens ? Buffer.from(TOKEN_FORM.fromMap(bytes) ?? bytes) : bytes;
        op.bytes = stored;
        ops.push({ type: 'put', key: k, value: stored });
      }
    }
    for (const [k, v] of this.meta) ops.push({ type: 'put', key: k, value: encode(v) });
    for (const [id, ms] of this.lastUses) ops.push({ type: 'put', key: lastUseKey(id), value: encode(ms) });
    const entryBytes: Uint8Array[] = [];
    if (changeLog)
      for (const entry of entries) {
        const value = encodeLogEntry(entry, encoded);
        entryBytes.push(value);
        ops.push({ type: 'put', key: logKey(entry.Index), value });
      }
    return { entries, ops, entryBytes };
  }

  get isEmpty(): boolean {
    return this.tableOps.length === 0 && this.meta.length === 0 && this.lastUses.length === 0;
  }

  private lookup(k: string): LayerEntry | undefined {
    return this.layer.get(k) ?? this.store.pending.get(k);
  }

  getRecord<T extends TableName>(table: T, id: string): RecordTypes[T] | undefined {
    const e = this.lookup(layerKey.record(table, id));
    if (e) return (e.value ?? undefined) as RecordTypes[T] | undefined;
    return (this.store.tables[table] as AnyTable).get(id) as RecordTypes[T] | undefined;
  }

  /** As getRecord, without keeping a durable record decoded (one about to be deleted). */
  private peekRecord<T extends TableName>(table: T, id: string): RecordTypes[T] | undefined {
    const e = this.lookup(layerKey.record(table, id));
    if (e) return (e.value ?? undefined) as RecordTypes[T] | undefined;
    return (this.store.tables[table] as AnyTable).peek(id) as RecordTypes[T] | undefined;
  }

  peekToken(accessor: string): TokenRecord | undefined {
    return this.peekRecord('tokens', accessor);
  }

  private uniqueID(table: TableName, index: string, k: string): string | undefined {
    const e = this.lookup(layerKey.unique(table, index, k));
    if (e) return (e.value as string | null) ?? undefined;
    return (this.store.tables[table] as AnyTable).uniqueID(index, k);
  }

  private byUnique<T extends TableName>(table: T, index: string, k: string): RecordTypes[T] | undefined {
    const id = this.uniqueID(table, index, k);
    return id === undefined ? undefined : this.getRecord(table, id);
  }

  getToken(accessor: string): TokenRecord | undefined {
    return this.getRecord('tokens', accessor);
  }

  getTokenBySecret(secret: string): TokenRecord | undefined {
    return this.byUnique('tokens', 'secret', secret);
  }

  isSecretInUse(secret: string): boolean {
    return this.uniqueID('tokens', 'secret', secret) !== undefined || this.uniqueID('tokens', 'previousSecret', secret) !== undefined;
  }

  getPolicy(id: string): PolicyRecord | undefined {
    return this.getRecord('policies', id);
  }

  getPolicyByName(scope: Scope, name: string): PolicyRecord | undefined {
    return this.byUnique('policies', 'name', nameKey(scope.Partition, scope.Namespace, name));
  }

  getRole(id: string): RoleRecord | undefined {
    return this.getRecord('roles', id);
  }

  getRoleByName(scope: Scope, name: string): RoleRecord | undefined {
    return this.byUnique('roles', 'name', nameKey(scope.Partition, scope.Namespace, name));
  }

  getAuthMethod(scope: Scope, name: string): AuthMethodRecord | undefined {
    return this.getRecord('authMethods', authMethodID(scope.Partition, scope.Namespace, name));
  }

  getBindingRule(id: string): BindingRuleRecord | undefined {
    return this.getRecord('bindingRules', id);
  }

  tokenIDsOfAuthMethod(name: string): string[] {
    return this.idsIn(
      'tokens',
      (this.store.tables.tokens.members('authMethod', name) ?? []) as Iterable<TokenRecord>,
      (t) => t.AccessorID,
      (t) => t.AuthMethod === name,
    );
  }

  ruleIDsOfAuthMethod(methodID: string): string[] {
    return this.idsIn(
      'bindingRules',
      this.store.tables.bindingRules.members('method', methodID) ?? [],
      (r) => r.ID,
      (r) => authMethodID(r.Partition, r.Namespace, r.AuthMethod) === methodID,
    );
  }

  getQuota(id: string): QuotaRecord | undefined {
    return this.getRecord('quotas', id);
  }

  getQuotaByName(name: string): QuotaRecord | undefined {
    return this.byUnique('quotas', 'name', name.toLowerCase());
  }

  hasQuotas(): boolean {
    return this.store.tables.quotas.size > 0;
  }

  quotasOver(key: string): QuotaRecord[] {
    // The durable quotas only: a quota judges the tokens written after it (every token write asks, and
    // a walk of the writes not yet durable for quotas among them would cost each one).
    return [...(this.store.tables.quotas.members('target', key) ?? [])];
  }

  tokenCountUnder(keys: readonly string[]): number {
    const tokens = this.store.tables.tokens;
    let n = 0;
    for (const k of keys) n += tokens.memberCount('quota', k);
    // Writes accepted and not yet durable (and this transaction's), each as it will be, against the durable index.
    const prefix = layerKey.record('tokens', '');
    const layered = new Map<string, TokenRecord | null>();
    for (const layer of [this.store.pending, this.layer])
      for (const [k, e] of layer) if (k.startsWith(prefix)) layered.set(k.slice(prefix.length), e.value as TokenRecord | null);
    if (layered.size === 0) return n;
    const quota = TABLE_DEFS.tokens.indexes.quota as IndexDef<TokenRecord>;
    const under = (id: string) => keys.some((k) => tokens.isMember('quota', k, id));
    for (const [id, t] of layered) {
      const before = under(id);
      const after = t !== null && keysOf(quota, t).some((k) => keys.includes(k));
      if (before !== after) n += after ? 1 : -1;
    }
    return n;
  }

  /** IDs of durable index members, with the writes accepted since (pending and this transaction's) laid over them. */
  private idsIn<R>(table: TableName, durable: Iterable<R>, id: (r: R) => string, wanted: (r: R) => boolean): string[] {
    const out = new Set<string>();
    for (const r of durable) out.add(id(r));
    const prefix = layerKey.record(table, '');
    for (const layer of [this.store.pending, this.layer]) {
      for (const [k, e] of layer) {
        if (!k.startsWith(prefix)) continue;
        const key = k.slice(prefix.length);
        if (e.value !== null && wanted(e.value as R)) out.add(key);
        else out.delete(key);
      }
    }
    return [...out];
  }

  getBootstrap(): BootstrapState {
    const e = this.lookup(layerKey.meta(META.bootstrap));
    if (e) return e.value as BootstrapState;
    return this.store.bootstrap();
  }

  /** Whether this transaction changes a global object (what a change-log entry carries). */
  get changesGlobal(): boolean {
    return this.changes.size > 0;
  }

  private log(change: Change): void {
    const list = this.changes.get(this.index);
    if (list) list.push(change);
    else this.changes.set(this.index, [change]);
  }

  put<T extends TableName>(table: T, input: Unstamped<RecordTypes[T]>): RecordTypes[T] {
    return this.write(TABLE_DEFS[table], input);
  }

  del<T extends TableName>(table: T, id: string): boolean {
    return this.remove(TABLE_DEFS[table], id);
  }

  private write<R>(def: TableDef<R, string>, given: Unstamped<R>): R {
    // Every way of making a record comes through here: a field taken as given is never left out.
    const input = withDefaults(def.fields, given);
    const id = def.id(input as R);
    const old = this.getRecord(def.name, id) as R | undefined;
    const index = this.index;
    const record = { ...input, CreateIndex: (old as { CreateIndex?: number } | undefined)?.CreateIndex ?? index, ModifyIndex: index } as R;
    for (const [name, idx] of uniqueIndexesOf(def)) {
      const next = keysOf(idx, record);
      if (old !== undefined) {
        for (const k of keysOf(idx, old)) {
          if (!next.includes(k) && this.uniqueID(def.name, name, k) === id)
            this.layer.set(layerKey.unique(def.name, name, k), { value: null });
        }
      }
      for (const k of next) this.layer.set(layerKey.unique(def.name, name, k), { value: id });
    }
    this.layer.set(layerKey.record(def.name, id), { value: record });
    this.tableOps.push({ table: def.name, id, record });
    this.touched.set(def.name, index);
    if (def.isGlobal(record) || (old !== undefined && def.isGlobal(old))) {
      this.log({ Table: def.name, Op: 'set', ID: id, Value: record } as Change);
    }
    return record;
  }

  /** Deletes a token just read in this transaction (`token`: what peekToken or getToken gave): no second read. */
  delToken(token: TokenRecord, options: { logged?: boolean } = {}): boolean {
    return this.remove(TABLE_DEFS.tokens, token.AccessorID, token, options.logged ?? true);
  }

  /**
   * Deletes expired tokens the durable expiry index named (the reaper's bulk deletes), each
   * without reading it: no record decoded, no layer entry (readers and the API judge expiry
   * themselves, so an expired token is already invisible), no change-log entry of its own
   * (logExpired names the batch). A token with a write accepted and not yet durable is left for
   * a later pass; a global one is deleted only when `global` (the primary reaps them).
   */
  reapExpired(expired: readonly ExpiryCursor[], global: boolean): { deleted: number; global: boolean } {
    const tokens = this.store.tables.tokens;
    let deleted = 0;
    let anyGlobal = false;
    for (const [time, id] of expired) {
      if (this.lookup(layerKey.record('tokens', id)) !== undefined) continue;
      const local = tokens.isMember('local', '', id);
      if (local === undefined || (!local && !global)) continue;
      this.reapUnread(id, time);
      deleted++;
      if (!local) anyGlobal = true;
    }
    return { deleted, global: anyGlobal };
  }

  private reapUnread(id: string, time: number): void {
    this.tableOps.push({ table: 'tokens', id, record: null, reaped: time });
    this.touched.set('tokens', this.index);
  }

  reapGlobalExpiredThrough(through: ExpiredThrough): string[] {
    const upTo = (time: number, id: string) => time < through.Time || (time === through.Time && id <= through.AccessorID);
    const out: string[] = [];
    const tokens = this.store.tables.tokens;
    const prefix = layerKey.record('tokens', '');
    // The durable expiry index: tokens no write since has touched go unread.
    for (let after: [number, string] | undefined; ; ) {
      const batch = tokens.orderedUpTo(through.Time, 4096, after);
      for (const [time, id] of batch) {
        if (!upTo(time, id) || this.lookup(prefix + id) !== undefined || tokens.isMember('local', '', id)) continue;
        this.reapUnread(id, time);
        out.push(id);
      }
      if (batch.length < 4096) break;
      after = batch[batch.length - 1];
    }
    // Tokens written since (earlier entries of this batch, or writes not yet durable): judged as they are now.
    const layered = new Map<string, TokenRecord | null>();
    for (const layer of [this.store.pending, this.layer])
      for (const [k, e] of layer) if (k.startsWith(prefix)) layered.set(k.slice(prefix.length), e.value as TokenRecord | null);
    for (const [id, t] of layered) {
      const time = t === null ? undefined : expiryOf(t);
      if (t === null || t.Local || time === undefined || !upTo(time, id)) continue;
      this.delToken(t, { logged: false });
      out.push(id);
    }
    return out;
  }

  /** Logs the reaper's batch as one change (its deletes were made with `logged: false`). */
  logExpired(through: ExpiredThrough): void {
    this.log({ Table: 'tokens', Op: 'expire', ID: '', Value: through });
  }

  private remove<R>(def: TableDef<R, string>, id: string, known?: R, logged = true): boolean {
    const old = known ?? (this.peekRecord(def.name, id) as R | undefined);
    if (old === undefined) return false;
    for (const [name, idx] of uniqueIndexesOf(def)) {
      for (const k of keysOf(idx, old))
        if (this.uniqueID(def.name, name, k) === id) this.layer.set(layerKey.unique(def.name, name, k), { value: null });
    }
    this.layer.set(layerKey.record(def.name, id), { value: null });
    this.tableOps.push({ table: def.name, id, record: null, old });
    this.touched.set(def.name, this.index);
    if (logged && def.isGlobal(old)) this.log({ Table: def.name, Op: 'delete', ID: id });
    return true;
  }

  putBootstrap(state: BootstrapState): void {
    this.putMeta(META.bootstrap, state);
    this.touched.set('bootstrap', this.index);
    this.log({ Table: 'bootstrap', Op: 'set', ID: 'bootstrap', Value: state });
  }

  /** A token's last use, written as it is: tokens deleted meanwhile are left out. */
  putLastUse(accessor: string, ms: number): boolean {
    // Whether the token is still there, as this transaction sees it (nothing decoded).
    const e = this.lookup(layerKey.record('tokens', accessor));
    if (e ? e.value === null : !this.store.tables.tokens.has(accessor)) return false;
    this.lastUses.push([accessor, ms]);
    return true;
  }

  putMeta(metaKey: string, value: unknown): void {
    this.layer.set(layerKey.meta(metaKey), { value });
    this.meta.push([metaKey, value]);
  }

  resetLog(logID: string): void {
    this.newLogID = logID;
    this.putMeta(META.logID, logID);
  }

  /** The log entries of this transaction, in index order (none when it starts a new log). */
  logEntries(): LogEntry[] {
    if (this.newLogID !== undefined) return [];
    return [...this.changes].sort((a, b) => a[0] - b[0]).map(([Index, Changes]) => ({ Index, Changes }));
  }
}

/**
 * The store: committed state in memory with every index (loaded from LevelDB at open),
 * LevelDB as the durable copy. Transactions are synchronous: they validate against the
 * newest state and queue their batch; the writer writes everything queued while the
 * previous write ran as one batch with one sync (group commit), then applies it to the
 * memory tables readers use. So readers only ever see durable state, and the writer
 * lock is held for microseconds, never across I/O.
 */
