import { Level } from 'level';
import { WatchwordError } from '../domain/errors.js';
import { generateID } from '../domain/ids.js';
import type { BootstrapState, PolicyRecord, RoleRecord, TokenRecord } from '../domain/types.js';
import { type KVView, compareKeys } from './kv.js';
import type { z } from 'zod';
import { LOG_PREFIX, META, TABLES, type TableDef, type TableName, key, logKey, prefixEnd, recordKey } from './keys.js';
import { Reader } from './reader.js';
import { ReadCache } from './cache.js';
import { bootstrapStateSchema, decodeRaw, decodeWith, encode, policyRecordSchema, roleRecordSchema, tokenRecordSchema } from './records.js';
import type { Change, CommitEvent, Durability, GlobalSnapshot, LogEntry, Store, TransactOptions, Tx, WatchTable } from './store.js';

type BatchOp = { type: 'put'; key: string; value: Uint8Array } | { type: 'del'; key: string };

/** A write accepted but not yet on disk. Its identity tells a finished flush what to drop. */
interface PendingEntry {
  value: Uint8Array | null;
}

interface QueuedCommit {
  ops: BatchOp[];
  pending: Array<[string, PendingEntry]>;
  index: number;
  tables: Map<WatchTable, number>;
  entries: LogEntry[];
  counts: Map<TableName, number>;
  sync: boolean;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export interface LevelStoreOptions {
  /** `fsync` syncs every group commit; `os` leaves flushing to the page cache. */
  durability: Durability;
  /** Write the replicated change log (the primary does; secondaries apply instead). */
  changeLog: boolean;
  /** Encoded bytes of committed state kept decoded in memory (default 64 MiB). */
  cacheBytes?: number;
}

/** A KV view over the committed database. */
class DbView implements KVView {
  constructor(private readonly db: Level<string, Uint8Array>) {}

  get(key: string): Promise<Uint8Array | undefined> {
    return this.db.get(key);
  }

  getMany(keys: string[]): Promise<Array<Uint8Array | undefined>> {
    return this.db.getMany(keys);
  }

  keys(range: { gte: string; lt: string; limit?: number }): AsyncIterable<string> {
    return this.db.keys({ gte: range.gte, lt: range.lt, limit: range.limit ?? -1 });
  }
}

/** A KV view with writes layered over another view (pending writes over disk, a transaction's over both). */
class LayeredView implements KVView {
  constructor(
    private readonly top: Map<string, PendingEntry>,
    private readonly below: KVView,
  ) {}

  async get(key: string): Promise<Uint8Array | undefined> {
    const e = this.top.get(key);
    if (e) return e.value ?? undefined;
    return this.below.get(key);
  }

  async getMany(keys: string[]): Promise<Array<Uint8Array | undefined>> {
    const missing = keys.filter((k) => !this.top.has(k));
    const fetched = missing.length > 0 ? await this.below.getMany(missing) : [];
    const byKey = new Map(missing.map((k, i) => [k, fetched[i]]));
    return keys.map((k) => {
      const e = this.top.get(k);
      return e ? (e.value ?? undefined) : byKey.get(k);
    });
  }

  async *keys(range: { gte: string; lt: string; limit?: number }): AsyncIterable<string> {
    const mine: Array<[string, PendingEntry]> = [];
    for (const [k, e] of this.top) {
      if (compareKeys(k, range.gte) >= 0 && compareKeys(k, range.lt) < 0) mine.push([k, e]);
    }
    mine.sort((a, b) => compareKeys(a[0], b[0]));
    const limit = range.limit ?? Infinity;
    let emitted = 0;
    let i = 0;
    const emitMineBefore = function* (bound: string | undefined): Generator<string> {
      while (i < mine.length && (bound === undefined || compareKeys((mine[i] as [string, PendingEntry])[0], bound) < 0)) {
        const [k, e] = mine[i] as [string, PendingEntry];
        i++;
        if (e.value !== null) yield k;
      }
    };
    // Deleted keys below must not show; keys written above replace their namesakes.
    for await (const k of this.below.keys({ gte: range.gte, lt: range.lt })) {
      for (const m of emitMineBefore(k)) {
        yield m;
        if (++emitted >= limit) return;
      }
      if (i < mine.length && (mine[i] as [string, PendingEntry])[0] === k) {
        const e = (mine[i] as [string, PendingEntry])[1];
        i++;
        if (e.value === null) continue;
      }
      yield k;
      if (++emitted >= limit) return;
    }
    for (const m of emitMineBefore(undefined)) {
      yield m;
      if (++emitted >= limit) return;
    }
  }
}

class LevelTx extends Reader implements Tx {
  private readonly writes: Map<string, PendingEntry>;
  private readonly changes = new Map<number, Change[]>();
  readonly touched = new Map<WatchTable, number>();
  /** Net objects added per table by this transaction. */
  readonly countDeltas = new Map<TableName, number>();
  private allocated: number | undefined;

  constructor(
    private readonly store: LevelStore,
    writes: Map<string, PendingEntry>,
    below: KVView,
  ) {
    super(new LayeredView(writes, below));
    this.writes = writes;
  }

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
    return this.writes.size === 0;
  }

  private set(key: string, value: Uint8Array | null): void {
    this.writes.set(key, { value });
  }

  putMeta(key: string, value: unknown): void {
    this.set(key, encode(value));
  }

  /** Raw delete of a bookkeeping key (log trimming). */
  deleteKey(key: string): void {
    this.set(key, null);
  }

  private touch(table: WatchTable): void {
    this.touched.set(table, this.index);
  }

  private log(change: Change, global: boolean): void {
    if (!global) return;
    const list = this.changes.get(this.index);
    if (list) list.push(change);
    else this.changes.set(this.index, [change]);
  }

  /**
   * Drops an index entry of a record going away. A unique entry (its value is the
   * owner's ID) may meanwhile belong to another record (a secret or name taken over
   * in the same batch); it is only removed while it still points here.
   */
  private async dropIndex(k: string, value: string, id: string): Promise<void> {
    if (value !== '') {
      const current = await this.kv.get(k);
      if (current === undefined || decodeRaw(current) !== id) return;
    }
    this.set(k, null);
  }

  private async put<R>(def: TableDef<R>, record: R, change: Change, previous: R | null | undefined): Promise<void> {
    const id = def.id(record);
    const old = previous === undefined ? ((await this.getRecord(def.name, id)) as R | undefined) : (previous ?? undefined);
    const next = new Map(def.indexes(record));
    if (old !== undefined) {
      for (const [k, v] of def.indexes(old)) if (!next.has(k)) await this.dropIndex(k, v, id);
    }
    for (const [k, v] of next) this.set(k, encode(v));
    this.set(recordKey(def as TableDef<unknown>, id), encode(record));
    if (old === undefined) this.countDeltas.set(def.name, (this.countDeltas.get(def.name) ?? 0) + 1);
    this.touch(def.name);
    this.log(change, def.isGlobal(record) || (old !== undefined && def.isGlobal(old)));
  }

  private async del(table: TableName, id: string): Promise<boolean> {
    const def = TABLES[table] as TableDef<unknown>;
    const old = await this.getRecord(table, id);
    if (old === undefined) return false;
    for (const [k, v] of def.indexes(old)) await this.dropIndex(k, v, id);
    this.set(recordKey(def, id), null);
    this.countDeltas.set(table, (this.countDeltas.get(table) ?? 0) - 1);
    this.touch(table);
    this.log({ Table: table, Op: 'delete', ID: id }, def.isGlobal(old));
    return true;
  }

  putToken(record: TokenRecord, previous?: TokenRecord | null): Promise<void> {
    return this.put(TABLES.tokens, record, { Table: 'tokens', Op: 'set', ID: record.AccessorID, Value: record }, previous);
  }

  putPolicy(record: PolicyRecord, previous?: PolicyRecord | null): Promise<void> {
    return this.put(TABLES.policies, record, { Table: 'policies', Op: 'set', ID: record.ID, Value: record }, previous);
  }

  putRole(record: RoleRecord, previous?: RoleRecord | null): Promise<void> {
    return this.put(TABLES.roles, record, { Table: 'roles', Op: 'set', ID: record.ID, Value: record }, previous);
  }

  deleteToken(accessor: string): Promise<boolean> {
    return this.del('tokens', accessor);
  }

  deletePolicy(id: string): Promise<boolean> {
    return this.del('policies', id);
  }

  deleteRole(id: string): Promise<boolean> {
    return this.del('roles', id);
  }

  putBootstrap(state: BootstrapState): void {
    this.set(META.bootstrap, encode(state));
    this.touch('bootstrap');
    this.log({ Table: 'bootstrap', Op: 'set', ID: 'bootstrap', Value: state }, true);
  }

  /** The log entries of this transaction, in index order. */
  logEntries(): LogEntry[] {
    return [...this.changes].sort((a, b) => a[0] - b[0]).map(([Index, Changes]) => ({ Index, Changes }));
  }

  /** Every write as batch operations, plus the index and count bookkeeping. */
  toOps(changeLog: boolean, entries: LogEntry[], counts: ReadonlyMap<TableName, number>): BatchOp[] {
    const ops: BatchOp[] = [];
    for (const [table] of this.countDeltas) ops.push({ type: 'put', key: META.count(table), value: encode(counts.get(table) ?? 0) });
    for (const [key, e] of this.writes) ops.push(e.value === null ? { type: 'del', key } : { type: 'put', key, value: e.value });
    if (this.allocated !== undefined) ops.push({ type: 'put', key: META.index, value: encode(this.allocated) });
    for (const [table, idx] of this.touched) ops.push({ type: 'put', key: META.tableIndex(table), value: encode(idx) });
    if (changeLog) for (const entry of entries) ops.push({ type: 'put', key: logKey(entry.Index), value: encode(entry) });
    return ops;
  }
}

/**
 * LevelDB store. Transactions run one at a time against committed state plus every
 * earlier accepted write (held in `pending` until on disk), so checks such as name
 * uniqueness never race. Accepted batches queue for the writer, which writes all that
 * queued while the previous write ran as one batch with one sync: group commit.
 */
export class LevelStore implements Store {
  readonly reader: Reader;
  private readonly dbView: DbView;
  private readonly cache: ReadCache;
  private readonly pending = new Map<string, PendingEntry>();
  private readonly pendingView: LayeredView;
  private queue: QueuedCommit[] = [];
  private writing = false;
  private mutex: Promise<void> = Promise.resolve();
  private lastAllocated = 0;
  private durableIndex = 0;
  /** Objects per table including accepted-but-pending writes, and as durable. */
  private readonly liveCounts = new Map<TableName, number>();
  private readonly durableCounts = new Map<TableName, number>();
  private readonly tableIndexes = new Map<WatchTable, number>();
  private readonly waiters = new Map<WatchTable, Set<{ index: number; wake: () => void }>>();
  private readonly listeners = new Set<(event: CommitEvent) => void>();
  private failure: unknown;
  private closed = false;
  private trimmedUpTo = 0;

  private constructor(
    private readonly db: Level<string, Uint8Array>,
    private readonly options: LevelStoreOptions,
    readonly logID: string,
  ) {
    this.dbView = new DbView(db);
    this.cache = new ReadCache(options.cacheBytes ?? 64 * 1024 * 1024);
    this.reader = new Reader(this.dbView, this.cache);
    this.pendingView = new LayeredView(this.pending, this.dbView);
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
      throw new WatchwordError('INTERNAL', `cannot open the store in ${dir}: ${(err as Error).message}`, { cause: err });
    }
    let logIDBytes = await db.get(META.logID);
    if (logIDBytes === undefined) {
      logIDBytes = encode(generateID());
      await db.put(META.logID, logIDBytes, { sync: options.durability === 'fsync' });
    }
    const store = new LevelStore(db, options, String(decodeRaw(logIDBytes)));
    const reader = store.reader;
    store.durableIndex = store.lastAllocated = await reader.getMetaNumber(META.index);
    for (const t of ['tokens', 'policies', 'roles', 'bootstrap'] as const) {
      store.tableIndexes.set(t, await reader.getMetaNumber(META.tableIndex(t)));
    }
    store.trimmedUpTo = await reader.getMetaNumber(META.logTrimmed);
    for (const t of ['tokens', 'policies', 'roles'] as const) {
      const n = await reader.getMetaNumber(META.count(t));
      store.liveCounts.set(t, n);
      store.durableCounts.set(t, n);
    }
    return store;
  }

  /** Hands out the next index; only called inside the transaction mutex. */
  allocateIndex(): number {
    return ++this.lastAllocated;
  }

  currentIndex(): number {
    return this.durableIndex;
  }

  /** Objects stored per table (durable state). */
  count(table: TableName): number {
    return this.durableCounts.get(table) ?? 0;
  }

  tableIndex(table: WatchTable): number {
    return this.tableIndexes.get(table) ?? 0;
  }

  private checkUsable(): void {
    if (this.failure !== undefined) throw new WatchwordError('INTERNAL', 'store failed after a write error', { cause: this.failure });
    if (this.closed) throw new WatchwordError('INTERNAL', 'store is closed');
  }

  async transact<T>(fn: (tx: Tx) => Promise<T>, options: TransactOptions = {}): Promise<T> {
    this.checkUsable();
    const previous = this.mutex;
    let release!: () => void;
    this.mutex = new Promise<void>((resolve) => (release = resolve));
    await previous;
    let durable: Promise<void> | undefined;
    let result: T;
    try {
      this.checkUsable();
      const tx = new LevelTx(this, new Map(), this.pendingView);
      result = await fn(tx);
      if (!tx.isEmpty) durable = this.enqueue(tx, options.sync ?? true);
    } finally {
      release();
    }
    if (durable) await durable;
    return result;
  }

  private enqueue(tx: LevelTx, sync: boolean): Promise<void> {
    const entries = tx.logEntries();
    for (const [table, delta] of tx.countDeltas) this.liveCounts.set(table, (this.liveCounts.get(table) ?? 0) + delta);
    const counts = new Map(this.liveCounts);
    const ops = tx.toOps(this.options.changeLog, entries, counts);
    const pending: Array<[string, PendingEntry]> = [];
    for (const op of ops) {
      const entry: PendingEntry = { value: op.type === 'put' ? op.value : null };
      this.pending.set(op.key, entry);
      pending.push([op.key, entry]);
    }
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ ops, pending, index: tx.lastIndex ?? this.durableIndex, tables: tx.touched, entries, counts, sync, resolve, reject });
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    if (this.writing || this.queue.length === 0) return;
    this.writing = true;
    const group = this.queue;
    this.queue = [];
    const ops = group.length === 1 ? (group[0] as QueuedCommit).ops : group.flatMap((c) => c.ops);
    try {
      // The chained form: several times faster than the array form for big batches.
      const batch = this.db.batch();
      for (const op of ops) {
        if (op.type === 'put') batch.put(op.key, op.value);
        else batch.del(op.key);
      }
      await batch.write({ sync: this.options.durability === 'fsync' && group.some((c) => c.sync) });
    } catch (err) {
      this.failure = err;
      for (const c of [...group, ...this.queue]) c.reject(new WatchwordError('INTERNAL', 'store write failed', { cause: err }));
      this.queue = [];
      this.writing = false;
      return;
    }
    // Drop cached values of every written key before anyone can read the new state.
    this.cache.invalidate(ops.map((op) => op.key));
    for (const c of group) for (const [k, e] of c.pending) if (this.pending.get(k) === e) this.pending.delete(k);
    const tables = new Map<WatchTable, number>();
    const entries: LogEntry[] = [];
    for (const c of group) {
      this.durableIndex = Math.max(this.durableIndex, c.index);
      for (const [t, idx] of c.tables) {
        this.tableIndexes.set(t, Math.max(this.tableIndex(t), idx));
        tables.set(t, this.tableIndex(t));
      }
      entries.push(...c.entries);
      for (const [t, n] of c.counts) this.durableCounts.set(t, n);
    }
    for (const c of group) c.resolve();
    this.writing = false;
    this.wake(tables);
    if (this.listeners.size > 0) {
      const event: CommitEvent = { index: this.durableIndex, tables, entries, at: Date.now() };
      for (const l of this.listeners) l(event);
    }
    void this.flush();
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

  /** Highest change-log index removed by retention; a follower behind it needs a snapshot. */
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
      await this.transact(async (tx) => {
        for (const k of keys) (tx as LevelTx).deleteKey(k);
        (tx as LevelTx).putMeta(META.logTrimmed, upTo);
      });
      removed += keys.length;
      if (keys.length < chunk) break;
    }
    this.trimmedUpTo = upTo;
    return removed;
  }

  /**
   * Every global object as of one durable index, read from an explicit LevelDB snapshot
   * so writers are never blocked while a secondary is sent a copy.
   */
  async snapshotGlobal(): Promise<GlobalSnapshot> {
    const snapshot = this.db.snapshot();
    try {
      const get = async (k: string) => this.db.get(k, { snapshot });
      const index = (await get(META.index)) ?? encode(0);
      const bootstrapBytes = await get(META.bootstrap);
      const records = async <T>(prefix: string, schema: z.ZodType<T>, what: string): Promise<T[]> => {
        const out: T[] = [];
        for await (const [, value] of this.db.iterator({ gt: key(prefix, ''), lt: prefixEnd(key(prefix, '')), snapshot })) {
          out.push(decodeWith(schema, value, what));
        }
        return out;
      };
      const tokens = (await records('t', tokenRecordSchema, 'token')).filter((t) => !t.Local);
      return {
        logID: this.logID,
        index: Number(decodeRaw(index)),
        tokens,
        policies: await records('p', policyRecordSchema, 'policy'),
        roles: await records('r', roleRecordSchema, 'role'),
        bootstrap: bootstrapBytes === undefined ? null : decodeWith(bootstrapStateSchema, bootstrapBytes, 'bootstrap state'),
      };
    } finally {
      await snapshot.close();
    }
  }

  /** Change-log entries after `index`, up to `limit` (replication). */
  async logEntriesAfter(index: number, limit: number): Promise<LogEntry[]> {
    const out: LogEntry[] = [];
    for await (const [, value] of this.db.iterator({ gt: logKey(index), lt: prefixEnd(LOG_PREFIX), limit })) {
      out.push(decodeRaw(value) as LogEntry);
    }
    return out;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // Let every accepted transaction reach the disk first.
    await this.mutex;
    while (this.writing || this.queue.length > 0) {
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    this.closed = true;
    for (const set of this.waiters.values()) for (const w of set) w.wake();
    this.waiters.clear();
    await this.db.close();
  }
}
