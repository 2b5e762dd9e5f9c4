import type { LastUseBook } from './last-use.js';
import type { Level } from 'level';
import { WatchwordError } from '../domain/errors.js';
import type { BootstrapState } from '../domain/types.js';
import { type Checkpoint, removeCheckpoint, writeCheckpoint } from './checkpoint.js';
import { readState } from './disk-format.js';
import { type ScannedAside, scanTokensAside } from './scan-aside.js';
import { type Applied, CommittedState } from './committed-state.js';
import { GroupCommitter, type QueuedCommit, isFencing } from './group-commit.js';
import { LogTail } from './log-tail.js';
import { type LayerEntry, TablesReader } from './memory.js';
import { LAST_USE_PREFIX, META, TABLES, TABLE_NAMES, type TableName, key, prefixEnd } from './schema.js';
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
import type { StagedStore } from './staging.js';
import { StoreTx } from './store-tx.js';
import { Watchers } from './watchers.js';
import { storeUnavailable } from './write-errors.js';
import { type StoreHealth, WriteRecovery } from './write-recovery.js';
import { ServerReplica } from './server-replica.js';
import { auditEventOf } from './audit-events.js';
import { StoreSwitch } from './install.js';
import { type LevelStoreOptions, explainOpenFailure, openDisk, openLevel } from './open.js';
import { ChangeLog } from './change-log.js';
export type { StoreHealth } from './write-recovery.js';
export type { LevelStoreOptions } from './open.js';

/**
 * The store: LevelDB on disk, the committed state in memory. It composes the parts etcd keeps
 * apart, each in a file of its own: opening (open.ts), transactions (store-tx.ts, over a layer of
 * accepted writes not yet durable), group commit (group-commit.ts), the durable state in memory
 * (committed-state.ts), watchers (watchers.ts), the change log (change-log.ts, log-tail.ts), writes
 * after a disk error (write-recovery.ts), a staged store made current (install.ts) and the HA
 * follower's replica of its leader (server-replica.ts).
 */
export class LevelStore implements Store {
  readonly reader: TablesReader;
  /** Accepted writes not yet durable, visible to transactions only. */
  readonly pending = new Map<string, LayerEntry>();
  private readonly state: CommittedState;
  private readonly committer: GroupCommitter;
  private readonly watchers: Watchers;
  /** Recent change-log entries (the rest are read from disk). */
  private readonly logTail: LogTail;
  /** The last index handed out to a transaction (ahead of the durable one while writes are in flight). */
  private lastAllocated = 0;
  /** Writes after a disk error: refused until a probe write succeeds again (write-recovery.ts). */
  private readonly recovery: WriteRecovery;
  /** HA: the follower's replica of its leader (server-replica.ts). */
  private readonly replica: ServerReplica;
  /** The change log on disk (change-log.ts). */
  private readonly changeLog: ChangeLog;
  /** What changes of global objects are refused with while held (a planned transfer of the primary role). */
  private held: Error | undefined;
  /** Whether commits write change-log entries: the primary's do (a promotion turns it on, a demotion off). */
  private writesLog: boolean;
  private closed = false;
  /** HA: copies every group to the followers (leader), or unset (single server, follower). */
  private replicator: BatchReplicator | undefined;
  /** Where audited changes' lines go (docs/audit.md: Audit log); unset: none. */
  private auditSink: AuditSink | undefined;

  /** A staged store made current in one step (install.ts). */
  private readonly switcher: StoreSwitch;

  private constructor(
    private db: Level<string, Uint8Array>,
    /** The store's directory (a staged store is swapped in there). */
    private readonly dir: string,
    private readonly options: LevelStoreOptions,
    logID: string,
  ) {
    this.state = new CommittedState(logID);
    this.writesLog = options.changeLog;
    this.reader = new TablesReader(this.state.tables, () => this.bootstrap(), this.state.goneSecrets);
    this.logTail = new LogTail(options.logTailEntries ?? 20_000);
    this.watchers = new Watchers((t) => this.state.tableIndex(t));
    this.committer = new GroupCommitter({
      // The database of the moment (install() replaces it).
      db: { batch: () => this.db.batch() },
      durability: options.durability,
      ...(options.faults ? { faults: options.faults } : {}),
      state: this.state,
      replicator: () => this.replicator,
      audit: () => this.auditSink,
      durable: (group, remoteError, seq) => this.complete(group, remoteError, seq),
      // A fenced leader wrote nothing: refuse, but the disk is fine.
      failed: (err, failed) => (isFencing(err) ? this.refuseQueued(err, failed) : this.failWrites(err, failed)),
    });
    this.recovery = new WriteRecovery({
      db: () => this.db,
      durableIndex: () => this.state.index,
      reload: () => this.reload(),
      closed: () => this.closed,
      durability: options.durability,
      ...(options.faults ? { faults: options.faults } : {}),
      ...(options.onAvailability ? { onAvailability: options.onAvailability } : {}),
    });
    this.replica = new ServerReplica({
      db: () => this.db,
      state: this.state,
      recovery: this.recovery,
      batchWritten: (seq) => this.committer.continueAfter(seq),
      shown: (applied) => {
        this.lastAllocated = this.state.index;
        this.logTail.reset(this.state.index + 1);
        this.tell(applied);
      },
      stage: () => this.stage(),
      install: (staged, o) => this.install(staged, o),
    });
    this.switcher = new StoreSwitch({
      dir,
      drain: () => this.committer.drain(),
      checkWritable: () => this.recovery.checkWritable(),
      auditSink: () => this.auditSink,
      durableIndex: () => this.state.index,
      closeDb: () => this.db.close(),
      openDb: async () => {
        const db = openLevel(dir);
        await db.open();
        this.db = db;
      },
      adopt: (staged, o) => this.adoptStaged(staged, o),
      reload: () => this.reload({ indexesMayGoBack: true }),
    });
    this.changeLog = new ChangeLog({
      db: () => this.db,
      committer: this.committer,
      tail: this.logTail,
      trimmed: { get: () => this.state.trimmedUpTo, set: (upTo) => (this.state.trimmedUpTo = upTo) },
    });
  }

  static async open(dir: string, options: LevelStoreOptions): Promise<LevelStore> {
    const { db, logID, checkpoint } = await openDisk(dir, options);
    try {
      const scanned = checkpoint?.usable ? undefined : await scanTokensAside(db, dir, options.scanAside);
      const store = new LevelStore(db, dir, options, logID);
      await store.reload({ checkpoint, scanned });
      if (options.checkpoint !== false) await removeCheckpoint(dir);
      // The load read every table file, and LevelDB keeps the files it has open mapped: their
      // pages stay in RSS (~120 MB at a million tokens) though nothing reads them again. Reopened,
      // LevelDB maps only what later reads touch.
      await db.close();
      await db.open();
      return store;
    } catch (err) {
      await db.close().catch(() => undefined);
      throw explainOpenFailure(dir, err);
    }
  }

  /** Takes what the disk holds as the durable state (at open, after a recovery that finds more on disk, after a follower's snapshot). */
  private async reload(options: { indexesMayGoBack?: boolean; checkpoint?: Checkpoint; scanned?: ScannedAside } = {}): Promise<void> {
    const loaded = (from: string) => {
      this.tokensFrom = from;
    };
    const state = await readState(this.db, options.checkpoint, loaded, options.scanned?.tokens && { tokens: options.scanned.tokens });
    if (options.scanned?.why !== undefined)
      this.tokensFrom = `${this.tokensFrom ?? 'a scan'}; not on a second thread: ${options.scanned.why}`;
    this.state.adopt(state, options);
    // What the disk holds is all in memory now.
    this.replica.replaced();
    this.reader.tables = this.state.tables;
    this.lastAllocated = this.state.index;
    this.committer.continueAfter(this.state.seq);
    this.logTail.reset(this.state.index + 1);
  }

  /** Where the open read the tokens from: a checkpoint, or a scan (and why); undefined without checkpoints. */
  tokensFrom: string | undefined;

  /** Identity of the change log; a restore on the primary starts a new one. */
  get logID(): string {
    return this.state.logID;
  }

  /** The durable tables (transactions read beneath their own writes and `pending`). */
  get tables() {
    return this.state.tables;
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
    return ++this.lastAllocated;
  }

  currentIndex(): number {
    return this.state.index;
  }

  count(table: TableName): number {
    return this.state.tables[table].size;
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
    this.auditSink = sink;
  }

  /** HA leader: every group is copied to the followers through `replicator` (undefined: stop). */
  setReplicator(replicator: BatchReplicator | undefined): void {
    this.replicator = replicator;
  }

  /** HA: a follower refuses transactions and applies its leader's batches instead. */
  setFollower(follower: boolean): void {
    this.replica.setFollower(follower);
    // Change-log entries are read from disk until this server has written some itself.
    this.logTail.reset(this.state.index + 1);
  }

  isFollower(): boolean {
    return this.replica.isFollower;
  }

  private checkUsable(): void {
    if (this.replica.isFollower)
      throw new WatchwordError('NO_LEADER', 'this server is a follower: writes go to the leader of its datacenter');
    const failing = this.recovery.failing;
    if (failing) throw storeUnavailable(failing.cause, true);
    if (this.closed) throw new WatchwordError('INTERNAL', 'store is closed');
  }

  health(): StoreHealth {
    return this.recovery.health();
  }

  /**
   * A write failed: nothing of it or of what queued behind it is durable, so all of it
   * is refused (503) and forgotten, further writes are refused at once, and a probe
   * write is retried with backoff until the disk takes writes again.
   */
  private failWrites(err: unknown, failed: QueuedCommit[]): void {
    // Not given out again: an HA leader sent the failed batch to its followers while writing it,
    // and a follower that applied it must never see its indexes name other writes.
    this.refuseQueued(storeUnavailable(err, false), failed, { keepIndexes: true });
    this.recovery.writeFailed(err);
  }

  /** Nothing of `failed` was written: each is refused with `err`, and what they left pending is forgotten. */
  private refuseQueued(err: unknown, failed: QueuedCommit[], options: { keepIndexes?: boolean } = {}): void {
    this.pending.clear();
    if (!options.keepIndexes) this.lastAllocated = this.state.index;
    for (const c of failed) c.reject(err);
  }

  transact<T>(fn: (tx: Tx) => T, options: TransactOptions = {}): Promise<T> {
    // A staged store being made current: the transaction runs against it once it is.
    const installing = this.switcher.installing;
    if (installing) return installing.then(() => this.transact(fn, options));
    let tx: StoreTx;
    let result: T;
    const before = this.lastAllocated;
    try {
      this.checkUsable();
      tx = new StoreTx(this);
      result = fn(tx);
      // Held (a planned transfer of the primary role): a change of a global object waits; Local tokens go on.
      if (this.held && !options.pastHold && tx.changesGlobal) throw this.held;
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
    return this.enqueue(tx, options).then(() => result);
  }

  /** A transaction as batch operations, its records encoded once (the change log embeds the same bytes). */
  private enqueue(tx: StoreTx, { sync = true, audit, timing }: TransactOptions): Promise<void> {
    const { entries, ops, entryBytes } = tx.batch(this.writesLog);
    const layer = [...tx.layer];
    for (const [k, e] of layer) this.pending.set(k, e);
    const newLogID = tx.newLogID;
    return new Promise<void>((resolve, reject) => {
      this.committer.push({
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
        ...(audit && this.auditSink ? { audit: auditEventOf(tx, audit, this.state.index) } : {}),
      });
    });
  }

  /** A durable group: into memory, acknowledged, waiters and listeners told. */
  private complete(group: QueuedCommit[], remoteError: unknown, seq: number | undefined): void {
    const started = performance.now();
    const applied = this.state.applyCommits(group);
    for (const c of group) for (const [k, e] of c.layer) if (this.pending.get(k) === e) this.pending.delete(k);
    const reset = [...group].reverse().find((c) => c.newLogID !== undefined);
    // The old log ends at a restore: what was remembered of it is of no use to anyone now.
    if (reset) this.logTail.reset(reset.index + 1);
    // The entries since the last reset, as their bytes: an entry object holds its records, and
    // thousands of them held through every scavenge cost more than decoding the few read back.
    if (this.writesLog)
      for (const c of group.slice(reset ? group.lastIndexOf(reset) : 0))
        c.entries.forEach((e, i) => this.logTail.remember(e.Index, c.entryBytes[i] as Uint8Array));
    // Durable here, but not confirmed by the synchronous followers: the caller must not count on it.
    for (const c of group)
      if (remoteError === undefined) c.resolve();
      else c.reject(remoteError);
    this.tell(remoteError === undefined ? applied : { ...applied, unconfirmed: true });
    for (const c of group) if (c.timing) c.timing.ms += performance.now() - started;
    // Followers show it from now on.
    if (remoteError === undefined && seq !== undefined) this.replicator?.committed?.(seq);
  }

  /** Wakes the waiters and tells the listeners what became durable. */
  private tell(applied: Applied, whole = false): void {
    if (whole) this.watchers.wakeAll();
    else this.watchers.wake(applied.tables);
    if (!this.watchers.listening) return;
    const { from, tables, entries, logReset, unconfirmed, changed } = applied;
    this.watchers.emit({
      from,
      index: this.state.index,
      tables,
      entries,
      at: Date.now(),
      ...(logReset ? { logReset } : {}),
      ...(unconfirmed ? { unconfirmed } : {}),
      ...(changed && !whole ? { changed } : {}),
    });
  }

  waitForTableIndex(table: WatchTable, index: number, signal?: AbortSignal): Promise<void> {
    return this.watchers.wait(table, index, signal);
  }

  /** Number of blocked waiters (metrics). */
  waiterCount(): number {
    return this.watchers.count();
  }

  onCommit(listener: (event: CommitEvent) => void): () => void {
    return this.watchers.onCommit(listener);
  }

  logTrimmedUpTo(): number {
    return this.state.trimmedUpTo;
  }

  holdWrites = (refusal: Error | undefined): void => void (this.held = refusal);
  setChangeLog = (on: boolean): void => void (this.writesLog = on);

  /** Removes change-log entries with index <= `upTo`, a chunk at a time; how many were removed. */
  trimLog(upTo: number, chunk = 10_000): Promise<number> {
    return this.changeLog.trim(upTo, chunk);
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
    return this.changeLog.after(index, limit);
  }

  /** HA follower: its leader's batches written verbatim and shown once committed (server-replica.ts). */
  applyServerBatches(batches: ServerBatch[]): Promise<void> {
    return this.replica.apply(batches);
  }

  commitServerBatches(seq: number): void {
    this.replica.commit(seq);
  }

  /** HA leader: every key of the store as one consistent view, in chunks; the view's batch position comes last. */
  serverSnapshot(chunkBytes = 4 * 1024 * 1024): AsyncGenerator<Array<[string, Uint8Array]>, ServerPosition> {
    return this.replica.snapshot(chunkBytes);
  }

  /** HA follower: takes its leader's snapshot into a staged store, then makes it current. */
  beginServerSnapshot(): Promise<ServerSnapshotIntake> {
    return this.replica.intake();
  }

  /** Starts a staged store beside this one (install.ts), made current by `install`. */
  stage(): Promise<StagedStore> {
    return this.switcher.stage();
  }

  /**
   * Makes a staged store current in one step (install.ts): transactions wait meanwhile; an HA
   * leader's followers start over from a snapshot of the new store.
   */
  install(staged: StagedStore, options: InstallOptions = {}): Promise<void> {
    return this.switcher.install(staged, options);
  }

  /** The staged store's state becomes the durable state, shown to readers and waiters at once. */
  private adoptStaged(staged: StagedStore, options: { indexesMayGoBack: boolean; logReset: boolean }): void {
    const from = this.state.index;
    this.state.adopt({ meta: staged.meta, tables: staged.tables, lastUse: staged.lastUse }, { indexesMayGoBack: options.indexesMayGoBack });
    this.replica.replaced();
    this.reader.tables = this.state.tables;
    this.lastAllocated = this.state.index;
    this.committer.continueAfter(this.state.seq);
    this.logTail.reset(this.state.index + 1);
    this.replicator?.batchLogReplaced?.();
    this.tell({ from, tables: this.state.allTables(), entries: [], logReset: options.logReset }, true);
  }

  /** HA follower: the whole store replaced by the leader's snapshot given whole (tests; the stream uses `beginServerSnapshot`). */
  installServerSnapshot(pairs: Array<[string, Uint8Array]>, position: ServerPosition): Promise<void> {
    return this.replica.installWhole(pairs, position);
  }

  /** Resolves once every accepted transaction has been written (or refused). */
  async quiesce(): Promise<void> {
    await this.committer.drain();
  }

  /** Asks LevelDB to compact the tokens' and last uses' key ranges (after a large reap: deleted keys take room until then). */
  async compactDeleted(): Promise<void> {
    // Node's LevelDB (classic-level) has compactRange; `level`'s type names only what every backend has.
    const db = this.db as unknown as { compactRange?: (start: string, end: string) => Promise<void> };
    for (const prefix of [key(TABLES.tokens.prefix, ''), LAST_USE_PREFIX]) await db.compactRange?.(prefix, prefixEnd(prefix));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // Let every accepted transaction reach the disk first.
    await this.committer.drain();
    this.closed = true;
    this.watchers.wakeAll();
    if (this.db.status !== 'open' && this.db.status !== 'opening') return;
    await this.db.close();
    // Memory holds what the disk does only while writes succeed, and, on an HA follower, once every batch it
    // holds is shown (one its leader has not yet said it committed is on disk, not in memory): else the next open scans.
    const tokens = this.state.tables.tokens.compact;
    if (this.options.checkpoint === false || this.recovery.failing || tokens === undefined || this.replica.holdsUncommitted()) return;
    try {
      await writeCheckpoint(this.dir, tokens, this.options.durability === 'fsync', this.state.seq > 0 ? this.state.seq : undefined);
    } catch (err) {
      this.options.onCheckpointFailed?.(err);
    }
  }
}
