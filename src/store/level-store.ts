import type { Level } from 'level';
import { WatchwordError } from '../domain/errors.js';
import type { BootstrapState } from '../domain/types.js';
import { auditEventOf } from './audit-events.js';
import type { CommittedState } from './committed-state.js';
import { removeCheckpoint, writeCheckpoint } from './checkpoint.js';
import type { LastUseBook } from './last-use.js';
import type { LayerEntry, TablesReader } from './memory.js';
import { type LevelStoreOptions, explainOpenFailure, openDisk } from './open.js';
import { compactRange } from './level-extras.js';
import { LAST_USE_PREFIX, META, POSITIONAL_FORMAT, TABLES, TABLE_NAMES, type TableName, key, prefixEnd } from './schema.js';
import type { StagedStore } from './staging.js';
import type {
  AuditSink,
  BatchReplicator,
  CommitEvent,
  GlobalSnapshot,
  InstallOptions,
  LogEntry,
  ServerBatch,
  ServerPosition,
  ServerSnapshotIntake,
  Store,
  TransactOptions,
  Tx,
  WatchTable,
} from './store.js';
import { StoreCore } from './store-core.js';
import { StoreTx } from './store-tx.js';
import { storeUnavailable } from './write-errors.js';
import type { StoreHealth } from './write-recovery.js';
export type { StoreHealth } from './write-recovery.js';
export type { LevelStoreOptions } from './open.js';

/**
 * The store: LevelDB on disk, the committed state in memory, as the `Store` the services use.
 * Its parts are kept apart as etcd keeps them, each in a file of its own, and share one core
 * they hold by reference (store-core.ts): opening (open.ts), transactions (store-tx.ts, over a
 * layer of accepted writes not yet durable), group commit (group-commit.ts), the durable state in
 * memory (committed-state.ts), watchers (watchers.ts), the change log (change-log.ts,
 * log-tail.ts), writes after a disk error (write-recovery.ts), a staged store made current
 * (install.ts) and the HA follower's replica of its leader (server-replica.ts).
 */
export class LevelStore implements Store {
  /** What the store's parts share and hold by reference (store-core.ts). */
  private readonly core: StoreCore;
  /** What the changes of global objects are refused with while held (a planned transfer of the primary role). */
  private held: Error | undefined;

  private constructor(db: Level<string, Uint8Array>, dir: string, options: LevelStoreOptions, logID: string) {
    this.core = new StoreCore(db, dir, options, logID);
  }

  /** The durable state in memory. */
  private get state(): CommittedState {
    return this.core.state;
  }

  static async open(dir: string, options: LevelStoreOptions): Promise<LevelStore> {
    const { db, logID, checkpoint, format } = await openDisk(dir, options);
    try {
      const store = new LevelStore(db, dir, options, logID);
      store.core.positionalTokens = format === POSITIONAL_FORMAT;
      const scannedHere = await store.core.reload({ checkpoint });
      if (options.changeLog) await store.core.changeLog.markFromDisk();
      if (options.checkpoint !== false) await removeCheckpoint(dir);
      // A load of the tokens on this thread read every table file, and LevelDB keeps the files it
      // has open mapped: their pages stay in RSS (~120 MB at a million tokens) though nothing reads
      // them again. Reopened, LevelDB maps only what later reads touch. A checkpoint leaves nothing
      // of the kind.
      if (scannedHere) {
        await db.close();
        await db.open();
      }
      return store;
    } catch (err) {
      await db.close().catch(() => undefined);
      throw explainOpenFailure(dir, err);
    }
  }

  /** Where the open read the tokens from: a checkpoint, or a scan (and why); undefined without checkpoints. */
  get tokensFrom(): string | undefined {
    return this.core.tokensFrom;
  }

  get reader(): TablesReader {
    return this.core.reader;
  }

  /** Accepted writes not yet durable, visible to transactions only. */
  get pending(): ReadonlyMap<string, LayerEntry> {
    return this.core.pending;
  }

  /** Identity of the change log; a restore on the primary starts a new one. */
  get logID(): string {
    return this.state.logID;
  }

  /** The durable tables (transactions read beneath their own writes and `pending`). */
  get tables() {
    return this.state.tables;
  }

  /** Whether tokens are written in the positional form (a data dir of format 3). */
  get positionalTokens(): boolean {
    return this.core.positionalTokens;
  }

  get lastUse(): LastUseBook {
    return this.state.lastUse;
  }

  bootstrap(): BootstrapState {
    return this.state.bootstrap();
  }

  getMeta(metaKey: string): unknown {
    return this.state.meta.get(metaKey);
  }

  metaEntries(): Iterable<[string, unknown]> {
    return this.state.meta.entries();
  }

  /** Hands out the next index. */
  allocateIndex(): number {
    return ++this.core.lastAllocated;
  }

  currentIndex(): number {
    return this.state.index;
  }

  count(table: TableName): number {
    return this.state.tables[table].size;
  }

  deletedTokens(): number {
    return this.state.tokensDeleted;
  }

  tableIndex(table: WatchTable): number {
    return this.state.tableIndex(table);
  }

  /** Where this store stands in its datacenter's batch log (HA). */
  serverPosition(): ServerPosition {
    return { seq: this.state.seq, term: this.state.term };
  }

  /** The audit log the changes' lines ride with (undefined: none). */
  setAudit(sink: AuditSink | undefined): void {
    this.core.auditSink = sink;
  }

  /** HA leader: every group is copied to the followers through `replicator` (undefined: stop). */
  setReplicator(replicator: BatchReplicator | undefined): void {
    this.core.replicator = replicator;
  }

  /** HA: a follower refuses transactions and applies its leader's batches instead. */
  setFollower(follower: boolean): void {
    this.core.replica.setFollower(follower);
    // Change-log entries are read from disk until this server has written some itself.
    this.core.logTail.reset(this.state.index + 1);
  }

  isFollower(): boolean {
    return this.core.replica.isFollower;
  }

  private checkUsable(): void {
    if (this.core.replica.isFollower)
      throw new WatchwordError('NO_LEADER', 'this server is a follower: writes go to the leader of its datacenter');
    const failing = this.core.recovery.failing;
    if (failing) throw storeUnavailable(failing.cause, true);
    if (this.core.closed) throw new WatchwordError('INTERNAL', 'store is closed');
  }

  health(): StoreHealth {
    return this.core.recovery.health();
  }

  transact<T>(fn: (tx: Tx) => T, options: TransactOptions = {}): Promise<T> {
    // A staged store being made current: the transaction runs against it once it is.
    const installing = this.core.switcher.installing;
    if (installing) return installing.then(() => this.transact(fn, options));
    let tx: StoreTx;
    let result: T;
    const before = this.core.lastAllocated;
    try {
      this.checkUsable();
      tx = new StoreTx(this);
      result = fn(tx);
      // Held (a planned transfer of the primary role): a change of a global object waits; Local tokens go on.
      if (this.held && !options.pastHold && tx.changesGlobal) throw this.held;
      if (result instanceof Promise) throw new Error('store transactions are synchronous; the function returned a promise');
    } catch (err) {
      // Nothing was queued: the indexes it took are free again.
      this.core.lastAllocated = before;
      return Promise.reject(err);
    }
    if (tx.isEmpty) {
      this.core.lastAllocated = before;
      return Promise.resolve(result);
    }
    return this.enqueue(tx, options).then(() => result);
  }

  /** A transaction as batch operations, its records encoded once (the change log embeds the same bytes). */
  private enqueue(tx: StoreTx, { sync = true, audit, timing }: TransactOptions): Promise<void> {
    const { entries, ops, entryBytes } = tx.batch(this.core.writesLog);
    const layer = [...tx.layer];
    for (const [k, e] of layer) this.core.pending.set(k, e);
    const newLogID = tx.newLogID;
    return new Promise<void>((resolve, reject) => {
      this.core.committer.push({
        ops,
        tableOps: tx.tableOps,
        meta: tx.meta,
        lastUses: tx.lastUses,
        layer,
        index: tx.lastIndex ?? 0,
        tables: tx.touched,
        entries,
        entryBytes,
        sync,
        resolve,
        reject,
        timing,
        ...(newLogID !== undefined ? { newLogID } : {}),
        ...(audit && this.core.auditSink ? { audit: auditEventOf(tx, audit, this.state.index) } : {}),
      });
    });
  }

  waitForTableIndex(table: WatchTable, index: number, signal?: AbortSignal): Promise<void> {
    return this.core.watchers.wait(table, index, signal);
  }

  /** Number of blocked waiters (metrics). */
  waiterCount(): number {
    return this.core.watchers.count();
  }

  onCommit(listener: (event: CommitEvent) => void): () => void {
    return this.core.watchers.onCommit(listener);
  }

  logTrimmedUpTo(): number {
    return this.state.trimmedUpTo;
  }

  holdWrites = (refusal: Error | undefined): void => void (this.held = refusal);
  setChangeLog = (on: boolean): void => void (this.core.writesLog = on);

  /** Removes change-log entries with index <= `upTo`, a chunk at a time; how many were removed. */
  trimLog(upTo: number, chunk = 10_000): Promise<number> {
    return this.core.changeLog.trim(upTo, chunk);
  }

  /** Every global object as of the durable index: records are immutable, so copying the references is a consistent view. */
  snapshotGlobal(): GlobalSnapshot {
    const tables = this.state.tables;
    const records = Object.fromEntries(TABLE_NAMES.map((t) => [t, tables[t].globalRecords()])) as unknown as GlobalSnapshot;
    const bootstrap = this.state.meta.get(META.bootstrap) as BootstrapState | undefined;
    return { ...records, logID: this.logID, index: this.state.index, bootstrap: bootstrap ?? null };
  }

  /** Change-log entries after `index`, up to `limit`: from memory when recent, else from disk. */
  logEntriesAfter(index: number, limit: number): Promise<LogEntry[]> {
    return this.core.changeLog.after(index, limit);
  }

  /** HA follower: its leader's batches written verbatim and shown once committed (server-replica.ts). */
  applyServerBatches(batches: ServerBatch[]): Promise<void> {
    return this.core.replica.apply(batches);
  }

  commitServerBatches(seq: number): void {
    this.core.replica.commit(seq);
  }

  /** HA leader: every key of the store as one consistent view, in chunks; the view's batch position comes last. */
  serverSnapshot(chunkBytes = 4 * 1024 * 1024): AsyncGenerator<Array<[string, Uint8Array]>, ServerPosition> {
    return this.core.replica.snapshot(chunkBytes);
  }

  /** HA follower: takes its leader's snapshot into a staged store, then makes it current. */
  beginServerSnapshot(): Promise<ServerSnapshotIntake> {
    return this.core.replica.intake();
  }

  /** Starts a staged store beside this one (install.ts), made current by `install`. */
  stage(): Promise<StagedStore> {
    return this.core.switcher.stage();
  }

  /**
   * Makes a staged store current in one step (install.ts): transactions wait meanwhile; an HA
   * leader's followers start over from a snapshot of the new store.
   */
  install(staged: StagedStore, options: InstallOptions = {}): Promise<void> {
    return this.core.switcher.install(staged, options);
  }

  /** HA follower: the whole store replaced by the leader's snapshot given whole (tests; the stream uses `beginServerSnapshot`). */
  installServerSnapshot(pairs: Array<[string, Uint8Array]>, position: ServerPosition): Promise<void> {
    return this.core.replica.installWhole(pairs, position);
  }

  /** Resolves once every accepted transaction has been written (or refused). */
  async quiesce(): Promise<void> {
    await this.core.committer.drain();
  }

  /** Asks LevelDB to compact the tokens' and last uses' key ranges (after a large reap: deleted keys take room until then). */
  async compactDeleted(): Promise<void> {
    for (const prefix of [key(TABLES.tokens.prefix, ''), LAST_USE_PREFIX]) await compactRange(this.core.db, prefix, prefixEnd(prefix));
  }

  async close(): Promise<void> {
    if (this.core.closed) return;
    // Let every accepted transaction reach the disk first.
    await this.core.committer.drain();
    this.core.closed = true;
    this.core.watchers.wakeAll();
    if (this.core.db.status !== 'open' && this.core.db.status !== 'opening') return;
    await this.core.db.close();
    // Memory holds what the disk does only while writes succeed, and, on an HA follower, once every batch it
    // holds is shown (one its leader has not yet said it committed is on disk, not in memory): else the next open scans.
    const tokens = this.state.tables.tokens.compact;
    if (
      this.core.options.checkpoint === false ||
      this.core.recovery.failing ||
      tokens === undefined ||
      this.core.replica.holdsUncommitted()
    )
      return;
    try {
      await writeCheckpoint(
        this.core.dir,
        tokens,
        this.core.options.durability === 'fsync',
        this.state.seq > 0 ? this.state.seq : undefined,
      );
    } catch (err) {
      this.core.options.onCheckpointFailed?.(err);
    }
  }
}
