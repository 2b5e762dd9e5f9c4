import { Level } from 'level';
import { WatchwordError, isWatchwordError } from '../domain/errors.js';
import { generateID } from '../domain/ids.js';
import type { AuthMethodRecord, BindingRuleRecord, BootstrapState, PolicyRecord, RoleRecord, Scope, TokenRecord } from '../domain/types.js';
import { type LayerEntry, type MemTable, TablesReader, type Tables, layerKey, newTables } from './memory.js';
import { RECORD_CHECKS } from './record-check.js';
import { bootstrapStateSchema, decodeRaw, decodeWith, encode } from './records.js';
import {
  FORMAT1_COUNT_PREFIX,
  FORMAT1_INDEX_PREFIXES,
  FORMAT_VERSION,
  LOG_PREFIX,
  META,
  type RecordTypes,
  TABLES,
  TABLE_NAMES,
  authMethodID,
  type TableDef,
  type TableName,
  key,
  keysOf,
  logKey,
  nameKey,
  prefixEnd,
  recordKey,
  SEP as SEP_CHAR,
} from './schema.js';
import type {
  BatchReplicator,
  ServerBatch,
  ServerPosition,
  Change,
  CommitEvent,
  Durability,
  GlobalSnapshot,
  LogEntry,
  Store,
  TransactOptions,
  Tx,
  Unstamped,
  WatchTable,
} from './store.js';

type BatchOp = { type: 'put'; key: string; value: Uint8Array } | { type: 'del'; key: string };

/** A record written or deleted by a transaction, applied to memory once durable. */
type TableOp = { table: TableName; id: string; record: unknown | null };

interface QueuedCommit {
  ops: BatchOp[];
  tableOps: TableOp[];
  meta: Array<[string, unknown]>;
  /** Layer entries this commit put in `pending`, dropped once durable. */
  layer: Array<[string, LayerEntry]>;
  /** A change log this commit starts (restore). */
  newLogID?: string;
  index: number;
  tables: Map<WatchTable, number>;
  entries: LogEntry[];
  sync: boolean;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export interface LevelStoreOptions {
  /** `fsync` syncs every group commit; `os` leaves flushing to the page cache. */
  durability: Durability;
  /** Write the replicated change log (the primary does; secondaries apply instead). */
  changeLog: boolean;
  /** Recent change-log entries kept in memory for secondaries that are nearly current. */
  logTailEntries?: number;
  /** Told when the store stops and starts accepting writes (metrics, logs). */
  onAvailability?: (available: boolean, cause?: unknown) => void;
  /** The datacenter this store belongs to: recorded on first open, and a store of another one is refused. */
  datacenter?: string;
  /** Tests only: makes disk writes fail on demand (an Error to throw, or undefined). */
  faults?: { writeError?: () => Error | undefined };
}

/** The store's writable state: ok, or refusing writes while it recovers from a write error. */
export interface StoreHealth {
  available: boolean;
  /** What the last failed write said. */
  lastError?: string;
  /** When writes started failing, ms since the epoch. */
  since?: number;
}

type AnyTable = MemTable<unknown, string>;
const ZERO_BOOTSTRAP: BootstrapState = { Bootstrapped: false, ResetIndex: 0 };

/**
 * A transaction over layers: its own writes, then every accepted write not yet durable
 * (`pending`), then the durable tables. Synchronous from start to end.
 */
class StoreTx implements Tx {
  readonly layer = new Map<string, LayerEntry>();
  readonly tableOps: TableOp[] = [];
  readonly meta: Array<[string, unknown]> = [];
  readonly touched = new Map<WatchTable, number>();
  private readonly changes = new Map<number, Change[]>();
  private allocated: number | undefined;
  /** A new change-log identity, when this transaction starts one. */
  newLogID: string | undefined;

  constructor(private readonly store: LevelStore) {}

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

  get isEmpty(): boolean {
    return this.tableOps.length === 0 && this.meta.length === 0;
  }

  private lookup(k: string): LayerEntry | undefined {
    return this.layer.get(k) ?? this.store.pending.get(k);
  }

  getRecord<T extends TableName>(table: T, id: string): RecordTypes[T] | undefined {
    const e = this.lookup(layerKey.record(table, id));
    if (e) return (e.value ?? undefined) as RecordTypes[T] | undefined;
    return (this.store.tables[table] as AnyTable).get(id) as RecordTypes[T] | undefined;
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
    return this.uniqueID('tokens', 'secret', secret) !== undefined;
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
    return this.idsIn('tokens', (this.store.tables.tokens.members('authMethod', name) ?? []) as Iterable<TokenRecord>, (t) => t.AccessorID, (t) => t.AuthMethod === name);
  }

  ruleIDsOfAuthMethod(methodID: string): string[] {
    return this.idsIn('bindingRules', this.store.tables.bindingRules.members('method', methodID) ?? [], (r) => r.ID, (r) => authMethodID(r.Partition, r.Namespace, r.AuthMethod) === methodID);
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

  allRecords<T extends TableName>(table: T): Array<RecordTypes[T]> {
    const prefix = layerKey.record(table, '');
    const overlaid = new Map<string, unknown>();
    for (const layer of [this.store.pending, this.layer]) {
      for (const [k, e] of layer) if (k.startsWith(prefix)) overlaid.set(k.slice(prefix.length), e.value);
    }
    const out: Array<RecordTypes[T]> = [];
    for (const [id, r] of (this.store.tables[table] as AnyTable).rows) if (!overlaid.has(id)) out.push(r as RecordTypes[T]);
    for (const r of overlaid.values()) if (r !== null) out.push(r as RecordTypes[T]);
    return out;
  }

  private log(change: Change): void {
    const list = this.changes.get(this.index);
    if (list) list.push(change);
    else this.changes.set(this.index, [change]);
  }

  private put<R>(def: TableDef<R, string>, input: Unstamped<R>): R {
    const id = def.id(input as R);
    const old = this.getRecord(def.name, id) as R | undefined;
    const index = this.index;
    const record = { ...input, CreateIndex: (old as { CreateIndex?: number } | undefined)?.CreateIndex ?? index, ModifyIndex: index } as R;
    for (const [name, idx] of Object.entries(def.indexes)) {
      if (!idx.unique) continue;
      const next = keysOf(idx, record);
      if (old !== undefined) {
        for (const k of keysOf(idx, old)) {
          if (!next.includes(k) && this.uniqueID(def.name, name, k) === id) this.layer.set(layerKey.unique(def.name, name, k), { value: null });
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

  private del<R>(def: TableDef<R, string>, id: string): boolean {
    const old = this.getRecord(def.name, id) as R | undefined;
    if (old === undefined) return false;
    for (const [name, idx] of Object.entries(def.indexes)) {
      if (!idx.unique) continue;
      for (const k of keysOf(idx, old)) if (this.uniqueID(def.name, name, k) === id) this.layer.set(layerKey.unique(def.name, name, k), { value: null });
    }
    this.layer.set(layerKey.record(def.name, id), { value: null });
    this.tableOps.push({ table: def.name, id, record: null });
    this.touched.set(def.name, this.index);
    if (def.isGlobal(old)) this.log({ Table: def.name, Op: 'delete', ID: id });
    return true;
  }

  putToken(record: Unstamped<TokenRecord>): TokenRecord {
    return this.put(TABLES.tokens as TableDef<TokenRecord, string>, record);
  }

  putPolicy(record: Unstamped<PolicyRecord>): PolicyRecord {
    return this.put(TABLES.policies as TableDef<PolicyRecord, string>, record);
  }

  putRole(record: Unstamped<RoleRecord>): RoleRecord {
    return this.put(TABLES.roles as TableDef<RoleRecord, string>, record);
  }

  putAuthMethod(record: Unstamped<AuthMethodRecord>): AuthMethodRecord {
    return this.put(TABLES.authMethods as TableDef<AuthMethodRecord, string>, record);
  }

  putBindingRule(record: Unstamped<BindingRuleRecord>): BindingRuleRecord {
    return this.put(TABLES.bindingRules as TableDef<BindingRuleRecord, string>, record);
  }

  deleteAuthMethod(id: string): boolean {
    return this.del(TABLES.authMethods as TableDef<AuthMethodRecord, string>, id);
  }

  deleteBindingRule(id: string): boolean {
    return this.del(TABLES.bindingRules as TableDef<BindingRuleRecord, string>, id);
  }

  deleteToken(accessor: string): boolean {
    return this.del(TABLES.tokens as TableDef<TokenRecord, string>, accessor);
  }

  deletePolicy(id: string): boolean {
    return this.del(TABLES.policies as TableDef<PolicyRecord, string>, id);
  }

  deleteRole(id: string): boolean {
    return this.del(TABLES.roles as TableDef<RoleRecord, string>, id);
  }

  putBootstrap(state: BootstrapState): void {
    this.putMeta(META.bootstrap, state);
    this.touched.set('bootstrap', this.index);
    this.log({ Table: 'bootstrap', Op: 'set', ID: 'bootstrap', Value: state });
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
export class LevelStore implements Store {
  tables: Tables = newTables();
  readonly reader: TablesReader;
  /** Accepted writes not yet durable, visible to transactions only. */
  readonly pending = new Map<string, LayerEntry>();
  private readonly meta = new Map<string, unknown>();
  private queue: QueuedCommit[] = [];
  private writing = false;
  private lastAllocated = 0;
  private durableIndex = 0;
  private readonly tableIndexes = new Map<WatchTable, number>();
  private readonly waiters = new Map<WatchTable, Set<{ index: number; wake: () => void }>>();
  private readonly listeners = new Set<(event: CommitEvent) => void>();
  /** Recent change-log entries; every entry with Index >= tailStart is here. */
  private logTail: LogEntry[] = [];
  private tailStart = 1;
  /** Set while writes fail: they are refused until a probe write succeeds again. */
  private unavailable: { cause: unknown; since: number } | undefined;
  private closed = false;
  private trimmedUpTo = 0;
  /** HA: copies every group to the followers (leader), or unset (single server, follower). */
  private replicator: BatchReplicator | undefined;
  /** HA: a follower takes batches from its leader and refuses transactions. */
  private follower = false;
  /** Highest batch seq handed out (never reused, even when its write failed). */
  private serverSeq = 0;
  /** Position of the last durable batch. */
  private durableSeq = 0;
  private serverTerm = 0;

  /** Identity of the change log; a restore on the primary starts a new one. */
  get logID(): string {
    return this.currentLogID;
  }

  private constructor(
    private readonly db: Level<string, Uint8Array>,
    private readonly options: LevelStoreOptions,
    private currentLogID: string,
  ) {
    this.reader = new TablesReader(this.tables, () => this.bootstrap());
  }

  static async open(dir: string, options: LevelStoreOptions): Promise<LevelStore> {
    const db = new Level<string, Uint8Array>(dir, { keyEncoding: 'utf8', valueEncoding: 'view' });
    try {
      await db.open();
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause;
      if (cause?.code === 'LEVEL_LOCKED') {
        throw new WatchwordError('INTERNAL', `data dir ${dir} is in use by another process (LevelDB lock held)`, { cause: err });
      }
      // LevelDB's own words (naming the damaged file) are in the cause.
      const why = (cause as { message?: string } | undefined)?.message ?? (err as Error).message;
      throw new WatchwordError('INTERNAL', `cannot open the store in ${dir}: ${why.replace(/\s+/g, ' ')}`, { cause: err });
    }
    try {
      await upgradeFormat(db, dir, options.durability === 'fsync');
      let logIDBytes = await db.get(META.logID);
      if (logIDBytes === undefined) {
        logIDBytes = encode(generateID());
        await db.put(META.logID, logIDBytes, { sync: options.durability === 'fsync' });
      }
      if (options.datacenter !== undefined) await claimDatacenter(db, dir, options.datacenter, options.durability === 'fsync');
      const store = new LevelStore(db, options, String(decodeRaw(logIDBytes)));
      store.adopt(await readState(db));
      return store;
    } catch (err) {
      await db.close().catch(() => undefined);
      if (err instanceof WatchwordError) throw err;
      // LevelDB's words name the damaged file.
      throw new WatchwordError('INTERNAL', `the store in ${dir} is corrupt or unreadable: ${(err as Error).message.replace(/\s+/g, ' ')}`, { cause: err });
    }
  }

  /** Takes the state read from disk as the durable state (at open, and after a recovery that finds more on disk). */
  private adopt(state: DiskState): void {
    this.meta.clear();
    for (const [k, v] of state.meta) this.meta.set(k, v);
    const num = (k: string): number => Number(this.meta.get(k) ?? 0);
    // Indexes never move backward: blocking queries and caches rely on it.
    this.durableIndex = this.lastAllocated = Math.max(this.durableIndex, num(META.index));
    this.tailStart = this.durableIndex + 1;
    this.logTail = [];
    this.trimmedUpTo = num(META.logTrimmed);
    this.durableSeq = num(META.serverSeq);
    this.serverSeq = Math.max(this.serverSeq, this.durableSeq);
    this.serverTerm = num(META.serverTerm);
    const logID = this.meta.get(META.logID);
    if (typeof logID === 'string') this.currentLogID = logID;
    for (const t of WATCH_TABLES) this.tableIndexes.set(t, Math.max(this.tableIndex(t), num(META.tableIndex(t))));
    this.tables = state.tables;
    this.reader.tables = state.tables;
  }

  bootstrap(): BootstrapState {
    return (this.meta.get(META.bootstrap) as BootstrapState | undefined) ?? ZERO_BOOTSTRAP;
  }

  getMeta(metaKey: string): unknown {
    return this.meta.get(metaKey);
  }

  /** Hands out the next index. */
  allocateIndex(): number {
    return ++this.lastAllocated;
  }

  currentIndex(): number {
    return this.durableIndex;
  }

  count(table: TableName): number {
    return this.tables[table].size;
  }

  tableIndex(table: WatchTable): number {
    return this.tableIndexes.get(table) ?? 0;
  }

  /** Where this store stands in its datacenter's batch history (HA). */
  serverPosition(): ServerPosition {
    return { seq: this.durableSeq, term: this.serverTerm };
  }

  /** HA leader: every group is copied to the followers through `replicator` (undefined: stop). */
  setReplicator(replicator: BatchReplicator | undefined): void {
    this.replicator = replicator;
  }

  /** HA: a follower refuses transactions and applies its leader's batches instead. */
  setFollower(follower: boolean): void {
    this.follower = follower;
    // Change-log entries are read from disk until this server has written some itself.
    this.logTail = [];
    this.tailStart = this.durableIndex + 1;
  }

  isFollower(): boolean {
    return this.follower;
  }

  private checkUsable(): void {
    if (this.follower) throw new WatchwordError('NO_LEADER', 'this server is a follower: writes go to the leader of its datacenter');
    if (this.unavailable) throw storeUnavailable(this.unavailable.cause, true);
    if (this.closed) throw new WatchwordError('INTERNAL', 'store is closed');
  }

  health(): StoreHealth {
    const u = this.unavailable;
    return u ? { available: false, lastError: causeText(u.cause), since: u.since } : { available: true };
  }

  /**
   * A write failed: nothing of it or of what queued behind it is durable, so all of it
   * is refused (503) and forgotten, further writes are refused at once, and a probe
   * write is retried with backoff until the disk takes writes again.
   */
  private failWrites(err: unknown, failed: QueuedCommit[]): void {
    this.unavailable = { cause: err, since: Date.now() };
    this.refuseQueued(storeUnavailable(err, false), failed);
    this.options.onAvailability?.(false, err);
    void this.recover();
  }

  /** Nothing of `failed` was written: each is refused with `err`, and what they left pending is forgotten. */
  private refuseQueued(err: unknown, failed: QueuedCommit[]): void {
    this.pending.clear();
    this.lastAllocated = this.durableIndex;
    for (const c of failed) c.reject(err);
  }

  private async recover(): Promise<void> {
    for (let delay = 100; this.unavailable && !this.closed; delay = Math.min(delay * 2, 5000)) {
      await new Promise((r) => setTimeout(r, delay).unref());
      if (this.closed) return;
      try {
        // LevelDB keeps a write error until reopened.
        await this.db.close();
        await this.db.open();
        const injected = this.options.faults?.writeError?.();
        if (injected) throw injected;
        await this.db.put(META.probe, encode(Date.now()), { sync: this.options.durability === 'fsync' });
        // A batch that failed after reaching the log may be on disk after all: then read the state again.
        const onDisk = await this.db.get(META.index);
        if (onDisk !== undefined && Number(decodeRaw(onDisk)) !== this.durableIndex) this.adopt(await readState(this.db));
        this.unavailable = undefined;
        this.options.onAvailability?.(true);
      } catch (err) {
        if (this.unavailable) this.unavailable.cause = err;
      }
    }
  }

  transact<T>(fn: (tx: Tx) => T, options: TransactOptions = {}): Promise<T> {
    let tx: StoreTx;
    let result: T;
    const before = this.lastAllocated;
    try {
      this.checkUsable();
      tx = new StoreTx(this);
      result = fn(tx);
      if (result instanceof Promise) throw new Error('store transactions are synchronous; the function returned a promise');
    } catch (err) {
      // Nothing was queued: the indexes it took are free again.
      this.lastAllocated = before;
      return Promise.reject(err);
    }
    if (tx.isEmpty) {
      this.lastAllocated = before;
      return Promise.resolve(result);
    }
    return this.enqueue(tx, options.sync ?? true).then(() => result);
  }

  private enqueue(tx: StoreTx, sync: boolean): Promise<void> {
    const entries = tx.logEntries();
    const ops: BatchOp[] = [];
    // Each record is encoded once: the change log embeds the same bytes.
    const encoded = new Map<unknown, Uint8Array>();
    for (const op of tx.tableOps) {
      const k = recordKey(op.table, op.id);
      if (op.record === null) {
        ops.push({ type: 'del', key: k });
      } else {
        const bytes = encode(op.record);
        encoded.set(op.record, bytes);
        ops.push({ type: 'put', key: k, value: bytes });
      }
    }
    for (const [k, v] of tx.meta) ops.push({ type: 'put', key: k, value: encode(v) });
    if (this.options.changeLog) for (const entry of entries) ops.push({ type: 'put', key: logKey(entry.Index), value: encodeLogEntry(entry, encoded) });
    const layer = [...tx.layer];
    for (const [k, e] of layer) this.pending.set(k, e);
    const newLogID = tx.newLogID;
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ ops, tableOps: tx.tableOps, meta: tx.meta, layer, index: tx.lastIndex ?? 0, tables: tx.touched, entries, sync, resolve, reject, ...(newLogID !== undefined ? { newLogID } : {}) });
      void this.flush();
    });
  }

  /** Queues raw batch operations (log trimming) behind the accepted transactions. */
  private enqueueRaw(ops: BatchOp[], meta: Array<[string, unknown]>): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ ops, tableOps: [], meta, layer: [], index: 0, tables: new Map(), entries: [], sync: false, resolve, reject });
      void this.flush();
    });
  }

  /**
   * Writes a group as one batch: its operations, then the highest index and table
   * indexes once for the whole group.
   */
  private async write(group: QueuedCommit[]): Promise<unknown> {
    const replicator = this.replicator;
    // Fencing: a leader that may have lost its lease writes nothing more.
    replicator?.checkLeadership();
    // The chained form: several times faster than the array form for big batches.
    const batch = this.db.batch();
    const pairs: Array<[string, Uint8Array | null]> | undefined = replicator ? [] : undefined;
    const put = (k: string, v: Uint8Array): void => {
      batch.put(k, v);
      pairs?.push([k, v]);
    };
    let index = 0;
    const tables = new Map<WatchTable, number>();
    for (const c of group) {
      for (const op of c.ops) {
        if (op.type === 'put') put(op.key, op.value);
        else {
          batch.del(op.key);
          pairs?.push([op.key, null]);
        }
      }
      index = Math.max(index, c.index);
      for (const [t, idx] of c.tables) tables.set(t, Math.max(tables.get(t) ?? 0, idx));
    }
    if (index > 0) put(META.index, encode(index));
    for (const [t, idx] of tables) put(META.tableIndex(t), encode(idx));
    const injected = this.options.faults?.writeError?.();
    if (injected) {
      void batch.close();
      throw injected;
    }
    const sync = this.options.durability === 'fsync' && group.some((c) => c.sync);
    if (!replicator || !pairs) {
      await batch.write({ sync });
      return undefined;
    }
    const seq = ++this.serverSeq;
    const term = replicator.term();
    put(META.serverSeq, encode(seq));
    put(META.serverTerm, encode(term));
    // Sent to the followers while the local write runs; a failure there is reported, not thrown.
    const remote = replicator.replicate({ seq, term, prev: this.durableSeq, ops: pairs }).then(
      () => undefined,
      (err: unknown) => err ?? new Error('replication failed'),
    );
    try {
      await batch.write({ sync: true });
    } catch (err) {
      replicator.localWriteFailed();
      throw err;
    }
    this.durableSeq = seq;
    this.serverTerm = term;
    return remote;
  }

  /**
   * The writer: one group at a time, in order. As soon as a group is on disk the next
   * one's write starts, and only then is the finished group applied to memory and
   * acknowledged, so the disk is never idle while work waits.
   */
  private async flush(): Promise<void> {
    if (this.writing || this.queue.length === 0) return;
    this.writing = true;
    let group = this.queue;
    this.queue = [];
    let writing = this.write(group);
    for (;;) {
      let remoteError: unknown;
      try {
        remoteError = await writing;
      } catch (err) {
        const failed = [...group, ...this.queue];
        this.queue = [];
        this.writing = false;
        // A fenced leader wrote nothing: refuse, but the disk is fine.
        if (isWatchwordError(err) && err.code === 'NO_LEADER') this.refuseQueued(err, failed);
        else this.failWrites(err, failed);
        return;
      }
      const next = this.queue;
      this.queue = [];
      if (next.length > 0) writing = this.write(next);
      // Fencing at the moment of acknowledging too: a leader whose lease lapsed while the
      // group was being copied keeps it (durable here and on the synchronous set) but
      // acknowledges nothing more; callers learn the outcome is unknown.
      if (remoteError === undefined && this.replicator) {
        try {
          this.replicator.checkLeadership();
        } catch (err) {
          remoteError = err;
        }
      }
      this.complete(group, remoteError);
      if (next.length === 0) break;
      group = next;
    }
    this.writing = false;
    // Something queued while the last group was applied.
    if (this.queue.length > 0) void this.flush();
  }

  /** A durable group: into memory, acknowledged, waiters and listeners told. */
  private complete(group: QueuedCommit[], remoteError?: unknown): void {
    const from = this.durableIndex;
    const tables = new Map<WatchTable, number>();
    let entries: LogEntry[] = [];
    let logReset = false;
    for (const c of group) {
      if (c.newLogID !== undefined) {
        // The old log ends here: what was remembered of it is of no use to anyone now.
        this.currentLogID = c.newLogID;
        this.logTail = [];
        this.tailStart = c.index + 1;
        entries = [];
        logReset = true;
      }
      for (const op of c.tableOps) {
        const t = this.tables[op.table] as AnyTable;
        if (op.record === null) t.delete(op.id);
        else t.put(op.record);
      }
      for (const [k, v] of c.meta) this.meta.set(k, v);
      for (const [k, e] of c.layer) if (this.pending.get(k) === e) this.pending.delete(k);
      this.durableIndex = Math.max(this.durableIndex, c.index);
      for (const [t, idx] of c.tables) {
        this.tableIndexes.set(t, Math.max(this.tableIndex(t), idx));
        tables.set(t, this.tableIndex(t));
      }
      entries.push(...c.entries);
    }
    this.rememberLog(entries);
    // Durable here, but not confirmed by the synchronous followers: the caller must not count on it.
    for (const c of group) if (remoteError === undefined) c.resolve();
    else c.reject(remoteError);
    this.wake(tables);
    if (this.listeners.size > 0) this.emit({ from, index: this.durableIndex, tables, entries, at: Date.now(), ...(logReset ? { logReset } : {}) });
  }

  private rememberLog(entries: LogEntry[]): void {
    if (!this.options.changeLog) return;
    const limit = this.options.logTailEntries ?? 20_000;
    for (const e of entries) this.logTail.push(e);
    // Trimmed in steps of a quarter, not on every commit: dropping from the front copies the rest.
    if (this.logTail.length > limit + limit / 4) {
      const dropped = this.logTail.splice(0, this.logTail.length - limit);
      this.tailStart = (dropped[dropped.length - 1] as LogEntry).Index + 1;
    }
  }

  private wake(tables: Map<WatchTable, number>): void {
    for (const [table, idx] of tables) {
      const set = this.waiters.get(table);
      if (!set) continue;
      for (const w of set) {
        if (idx > w.index) {
          set.delete(w);
          w.wake();
        }
      }
    }
  }

  waitForTableIndex(table: WatchTable, index: number, signal?: AbortSignal): Promise<void> {
    if (this.tableIndex(table) > index || signal?.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      let set = this.waiters.get(table);
      if (!set) this.waiters.set(table, (set = new Set()));
      const waiter = {
        index,
        wake: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = (): void => {
        set.delete(waiter);
        resolve();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      set.add(waiter);
    });
  }

  /** Number of blocked waiters (metrics). */
  waiterCount(): number {
    let n = 0;
    for (const s of this.waiters.values()) n += s.size;
    return n;
  }

  onCommit(listener: (event: CommitEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  logTrimmedUpTo(): number {
    return this.trimmedUpTo;
  }

  /**
   * Removes change-log entries with index <= `upTo`, at most `chunk` per batch so the
   * writer is never held long. Returns how many were removed.
   */
  async trimLog(upTo: number, chunk = 10_000): Promise<number> {
    if (upTo <= this.trimmedUpTo) return 0;
    let removed = 0;
    for (;;) {
      const keys: string[] = [];
      for await (const k of this.db.keys({ gt: LOG_PREFIX, lte: logKey(upTo), limit: chunk })) keys.push(k);
      await this.enqueueRaw(
        keys.map((k) => ({ type: 'del', key: k })),
        [[META.logTrimmed, upTo]],
      );
      removed += keys.length;
      if (keys.length < chunk) break;
    }
    this.trimmedUpTo = upTo;
    return removed;
  }

  /** Every global object as of the durable index: records are immutable, so copying the references is a consistent view. */
  snapshotGlobal(): GlobalSnapshot {
    const tokens: TokenRecord[] = [];
    for (const t of this.tables.tokens.rows.values()) if (!t.Local) tokens.push(t);
    const bootstrap = this.meta.get(META.bootstrap) as BootstrapState | undefined;
    return {
      logID: this.logID,
      index: this.durableIndex,
      tokens,
      policies: [...this.tables.policies.rows.values()],
      roles: [...this.tables.roles.rows.values()],
      authMethods: [...this.tables.authMethods.rows.values()],
      bindingRules: [...this.tables.bindingRules.rows.values()],
      bootstrap: bootstrap ?? null,
    };
  }

  /** Change-log entries after `index`, up to `limit`: from memory when recent, else from disk. */
  async logEntriesAfter(index: number, limit: number): Promise<LogEntry[]> {
    if (index + 1 >= this.tailStart) {
      const tail = this.logTail;
      let lo = 0;
      let hi = tail.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if ((tail[mid] as LogEntry).Index <= index) lo = mid + 1;
        else hi = mid;
      }
      return tail.slice(lo, lo + limit);
    }
    const out: LogEntry[] = [];
    for await (const [, value] of this.db.iterator({ gt: logKey(index), lt: prefixEnd(LOG_PREFIX), limit })) {
      out.push(decodeRaw(value) as LogEntry);
    }
    return out;
  }

  /**
   * HA follower: writes its leader's batches verbatim in one atomic batch (their own
   * position keys included, so a crash resumes exactly), then applies them to memory.
   * Every record is checked before anything is written.
   */
  async applyServerBatches(batches: ServerBatch[]): Promise<void> {
    if (!this.follower) throw new WatchwordError('INTERNAL', 'only a follower applies its leader\'s batches');
    if (this.closed) throw new WatchwordError('INTERNAL', 'store is closed');
    const last = batches[batches.length - 1];
    if (!last) return;
    const decoded = batches.flatMap((b) => b.ops.map(([k, v]) => decodePair(k, v)));
    const batch = this.db.batch();
    for (const b of batches) for (const [k, v] of b.ops) v === null ? batch.del(k) : batch.put(k, v);
    await batch.write({ sync: this.options.durability === 'fsync' });
    this.serverSeq = Math.max(this.serverSeq, last.seq);
    this.durableSeq = last.seq;
    this.serverTerm = last.term;
    this.applyDecoded(decoded);
  }

  /**
   * HA leader: every key of the store as one consistent view (LevelDB iterators read a
   * snapshot), in chunks of about `chunkBytes`; the view's batch position comes last.
   */
  async *serverSnapshot(chunkBytes = 4 * 1024 * 1024): AsyncGenerator<Array<[string, Uint8Array]>, ServerPosition> {
    const it = this.db.iterator({ highWaterMarkBytes: chunkBytes });
    let seq = 0;
    let term = 0;
    try {
      let chunk: Array<[string, Uint8Array]> = [];
      let bytes = 0;
      for (let entries = await it.nextv(5000); entries.length > 0; entries = await it.nextv(5000)) {
        for (const [k, v] of entries) {
          if (k === META.probe) continue;
          if (k === META.serverSeq) seq = Number(decodeRaw(v));
          if (k === META.serverTerm) term = Number(decodeRaw(v));
          chunk.push([k, v]);
          bytes += k.length + v.length;
          if (bytes >= chunkBytes) {
            yield chunk;
            chunk = [];
            bytes = 0;
          }
        }
      }
      if (chunk.length > 0) yield chunk;
    } finally {
      await it.close();
    }
    return { seq, term };
  }

  /**
   * HA follower: replaces the whole store with a leader's snapshot in one atomic batch
   * (keys it no longer has are deleted), then reloads memory from it.
   */
  async installServerSnapshot(pairs: Array<[string, Uint8Array]>, position: ServerPosition): Promise<void> {
    if (!this.follower) throw new WatchwordError('INTERNAL', 'only a follower installs a snapshot');
    for (const [k, v] of pairs) decodePair(k, v);
    const incoming = new Set(pairs.map(([k]) => k));
    const batch = this.db.batch();
    for await (const k of this.db.keys()) if (!incoming.has(k) && k !== META.datacenter) batch.del(k);
    for (const [k, v] of pairs) batch.put(k, v);
    batch.put(META.serverSeq, encode(position.seq));
    batch.put(META.serverTerm, encode(position.term));
    await batch.write({ sync: this.options.durability === 'fsync' });
    const from = this.durableIndex;
    // The leader's history replaces this one: indexes follow it, even backward.
    this.durableIndex = 0;
    this.tableIndexes.clear();
    this.adopt(await readState(this.db));
    this.serverSeq = Math.max(this.serverSeq, position.seq);
    this.durableSeq = position.seq;
    this.serverTerm = position.term;
    const tables = new Map<WatchTable, number>(WATCH_TABLES.map((t) => [t, this.tableIndex(t)]));
    for (const [t] of tables) this.wakeAll(t);
    this.emit({ from, index: this.durableIndex, tables, entries: [], at: Date.now(), logReset: true });
  }

  /** Applies checked key/value pairs of a follower batch to memory, then wakes waiters and listeners. */
  private applyDecoded(decoded: DecodedPair[]): void {
    const from = this.durableIndex;
    const tables = new Map<WatchTable, number>();
    for (const d of decoded) {
      if (d.kind === 'record') {
        const t = this.tables[d.table] as AnyTable;
        if (d.record === null) t.delete(d.id);
        else t.put(d.record);
      } else if (d.kind === 'meta') {
        if (d.value === undefined) this.meta.delete(d.key);
        else this.meta.set(d.key, d.value);
        if (d.key === META.index) this.durableIndex = this.lastAllocated = Number(d.value ?? 0);
        else if (d.key === META.logID && typeof d.value === 'string') this.currentLogID = d.value;
        else if (d.key === META.logTrimmed) this.trimmedUpTo = Number(d.value ?? 0);
        else if (d.table !== undefined) {
          const idx = Number(d.value ?? 0);
          this.tableIndexes.set(d.table, idx);
          tables.set(d.table, idx);
        }
      }
    }
    this.tailStart = this.durableIndex + 1;
    this.wake(tables);
    this.emit({ from, index: this.durableIndex, tables, entries: [], at: Date.now() });
  }

  private wakeAll(table: WatchTable): void {
    const set = this.waiters.get(table);
    if (!set) return;
    for (const w of set) w.wake();
    set.clear();
  }

  private emit(event: CommitEvent): void {
    for (const l of this.listeners) l(event);
  }

  /** Resolves once every accepted transaction has been written (or refused). */
  async quiesce(): Promise<void> {
    while (this.writing || this.queue.length > 0) await new Promise<void>((resolve) => setImmediate(resolve));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // Let every accepted transaction reach the disk first.
    while (this.writing || this.queue.length > 0) {
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    this.closed = true;
    for (const set of this.waiters.values()) for (const w of set) w.wake();
    this.waiters.clear();
    if (this.db.status === 'open' || this.db.status === 'opening') await this.db.close();
  }
}

type DecodedPair =
  | { kind: 'record'; table: TableName; id: string; record: unknown | null }
  | { kind: 'meta'; key: string; value: unknown; table?: WatchTable }
  | { kind: 'other' };

const RECORD_PREFIXES = new Map<string, TableName>((Object.keys(TABLES) as TableName[]).map((t) => [key(TABLES[t].prefix, ''), t]));
const WATCH_TABLES: readonly WatchTable[] = [...TABLE_NAMES, 'bootstrap'];
const TABLE_INDEX_KEYS = new Map<string, WatchTable>(WATCH_TABLES.map((t) => [META.tableIndex(t), t]));
const META_PREFIX = key('m', '');

/** A key/value pair of a leader's batch, decoded and checked as records read from disk are. */
function decodePair(k: string, v: Uint8Array | null): DecodedPair {
  const sep = k.indexOf(SEP_CHAR);
  const table = sep > 0 ? RECORD_PREFIXES.get(k.slice(0, sep + 1)) : undefined;
  if (table !== undefined) {
    const id = k.slice(sep + 1);
    if (v === null) return { kind: 'record', table, id, record: null };
    let record: unknown;
    try {
      record = decodeRaw(v);
    } catch (err) {
      throw new WatchwordError('INTERNAL', `a replicated ${table.slice(0, -1)} ${id} cannot be decoded: ${(err as Error).message}`);
    }
    if (!RECORD_CHECKS[table](record)) throw new WatchwordError('INTERNAL', `a replicated ${table.slice(0, -1)} ${id} is not a well-formed record`);
    return { kind: 'record', table, id, record };
  }
  if (k.startsWith(META_PREFIX)) {
    if (v === null) return { kind: 'meta', key: k, value: undefined };
    const value = k === META.bootstrap ? decodeWith(bootstrapStateSchema, v, 'bootstrap state') : decodeRaw(v);
    const t = TABLE_INDEX_KEYS.get(k);
    return t === undefined ? { kind: 'meta', key: k, value } : { kind: 'meta', key: k, value, table: t };
  }
  return { kind: 'other' };
}

/** The text of a write error's cause, as operators read it (ENOSPC, EIO…). */
function causeText(err: unknown): string {
  const e = err as { code?: string; message?: string; cause?: { message?: string; code?: string } };
  const inner = e?.cause?.message ?? e?.message ?? String(err);
  return inner.replace(/^IO error: /, '');
}

function storeUnavailable(err: unknown, recovering: boolean): WatchwordError {
  const suffix = recovering ? '; retrying until the disk accepts writes again' : '';
  return new WatchwordError('STORE_UNAVAILABLE', `store write failed: ${causeText(err)}${suffix}`, { cause: err });
}

const KEYS = {
  Index: encode('Index'),
  Changes: encode('Changes'),
  Table: encode('Table'),
  Op: encode('Op'),
  ID: encode('ID'),
  Value: encode('Value'),
};

function arrayHeader(n: number): Uint8Array {
  if (n < 16) return Uint8Array.of(0x90 | n);
  if (n < 0x10000) return Uint8Array.of(0xdc, n >> 8, n & 0xff);
  return Uint8Array.of(0xdd, (n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff);
}

/**
 * A change-log entry in msgpack, decoding to what `encode(entry)` would, but with each
 * record's encoding (already made for its own key) embedded rather than made again.
 */
function encodeLogEntry(entry: LogEntry, encoded: ReadonlyMap<unknown, Uint8Array>): Uint8Array {
  const parts: Uint8Array[] = [Uint8Array.of(0x82), KEYS.Index, encode(entry.Index), KEYS.Changes, arrayHeader(entry.Changes.length)];
  for (const c of entry.Changes) {
    const value = c.Op === 'set' ? (encoded.get(c.Value) ?? encode(c.Value)) : undefined;
    parts.push(Uint8Array.of(value ? 0x84 : 0x83), KEYS.Table, encode(c.Table), KEYS.Op, encode(c.Op), KEYS.ID, encode(c.ID));
    if (value) parts.push(KEYS.Value, value);
  }
  return Buffer.concat(parts);
}

/** Metadata and tables as the disk holds them. */
interface DiskState {
  meta: Map<string, unknown>;
  tables: Tables;
}

/** Reads metadata and every record into fresh memory tables, validating each. */
async function readState(db: Level<string, Uint8Array>): Promise<DiskState> {
  const meta = new Map<string, unknown>();
  const tables = newTables();
  for await (const [k, v] of db.iterator({ gte: key('m', ''), lt: prefixEnd(key('m', '')) })) {
    meta.set(k, k === META.bootstrap ? decodeWith(bootstrapStateSchema, v, 'bootstrap state') : decodeRaw(v));
  }
  const intern = new Map<string, string>();
  const shared = (s: string): string => {
    let v = intern.get(s);
    if (v === undefined) {
      if (intern.size < 10_000) intern.set(s, s);
      v = s;
    }
    return v;
  };
  for (const name of TABLE_NAMES) {
    const def = TABLES[name] as TableDef<Scope & object, string>;
    const table = tables[name] as AnyTable;
    const prefix = key(def.prefix, '');
    const check = RECORD_CHECKS[name];
    // Values only, in big batches: a few native round trips and no promise per record.
    const values = db.values({ gte: prefix, lt: prefixEnd(prefix), highWaterMarkBytes: 8 * 1024 * 1024 });
    try {
      for (let batch = await values.nextv(10_000); batch.length > 0; batch = await values.nextv(10_000)) {
        for (const v of batch) {
          let record: unknown;
          try {
            record = decodeRaw(v);
          } catch (err) {
            throw new WatchwordError('INTERNAL', `a stored ${name.slice(0, -1)} is corrupt (${table.size} read before it): ${(err as Error).message}`, { cause: err });
          }
          if (!check(record)) {
            const id = (record as Record<string, unknown> | null)?.[name === 'tokens' ? 'AccessorID' : name === 'authMethods' ? 'Name' : 'ID'];
            throw new WatchwordError('INTERNAL', `stored ${name.slice(0, -1)} ${typeof id === 'string' ? id : '(no ID)'} is corrupt: not a well-formed record`);
          }
          // Namespaces and partitions repeat across records: keep one copy of each.
          (record as Scope).Namespace = shared((record as Scope).Namespace);
          (record as Scope).Partition = shared((record as Scope).Partition);
          table.put(record as Scope, true);
        }
      }
    } finally {
      await values.close();
    }
    table.finishLoading();
  }
  return { meta, tables };
}

/** Records which datacenter a store belongs to, and refuses one of another datacenter. */
async function claimDatacenter(db: Level<string, Uint8Array>, dir: string, datacenter: string, sync: boolean): Promise<void> {
  const bytes = await db.get(META.datacenter);
  if (bytes === undefined) {
    await db.put(META.datacenter, encode(datacenter), { sync });
    return;
  }
  const owner = String(decodeRaw(bytes));
  if (owner !== datacenter) {
    throw new WatchwordError('INTERNAL', `the store in ${dir} belongs to datacenter ${owner}, not ${datacenter}; start it as ${owner} or give ${datacenter} a data dir of its own`);
  }
}

/**
 * Brings a data dir to FORMAT_VERSION. Format 1 stored secondary-index keys and counts
 * next to the records; they are rebuilt in memory now, so upgrading deletes them. A
 * data dir written by a newer format is refused.
 */
async function upgradeFormat(db: Level<string, Uint8Array>, dir: string, sync: boolean): Promise<void> {
  const bytes = await db.get(META.format);
  const format = bytes === undefined ? undefined : Number(decodeRaw(bytes));
  if (format !== undefined && !(format >= 1 && format <= FORMAT_VERSION)) {
    throw new WatchwordError('INTERNAL', `the store in ${dir} has format ${format}, newer than this build reads (${FORMAT_VERSION}); run a newer watchword`);
  }
  if (format === FORMAT_VERSION) return;
  for (const prefix of [...FORMAT1_INDEX_PREFIXES, FORMAT1_COUNT_PREFIX]) {
    for (;;) {
      const keys: string[] = [];
      for await (const k of db.keys({ gte: prefix, lt: prefixEnd(prefix), limit: 10_000 })) keys.push(k);
      if (keys.length === 0) break;
      await db.batch(keys.map((k) => ({ type: 'del' as const, key: k })));
    }
  }
  await db.put(META.format, encode(FORMAT_VERSION), { sync });
}
