import { Level } from 'level';
import { WatchwordError } from '../domain/errors.js';
import { generateID } from '../domain/ids.js';
import { quoteJSON } from '../domain/json-text.js';
import type { BootstrapState } from '../domain/types.js';
import { type Checkpoint, findCheckpoint, removeCheckpoint, writeCheckpoint } from './checkpoint.js';
import { type DecodedPair, claimDatacenter, decodePair, readState, upgradeFormat } from './disk-state.js';
import { LEVEL_OPTIONS, openExplained } from './level-options.js';
import { type ScannedAside, scanTokensAside } from './scan-aside.js';
import { type Applied, DurableState } from './durable-state.js';
import { type BatchOp, GroupCommitter, type QueuedCommit, isFencing } from './group-commit.js';
import { encodeLogEntry } from './log-encoding.js';
import { LogTail } from './log-tail.js';
import { type LayerEntry, TablesReader } from './memory.js';
import { decodeRaw, encode } from './records.js';
import { LOG_PREFIX, META, TABLE_NAMES, type TableName, logKey, prefixEnd, recordKey } from './schema.js';
import type {
  AuditGroupEvent,
  AuditRecord,
  AuditSink,
  BatchReplicator,
  CommitEvent,
  Durability,
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
import { StagedStore, settleStagedStore, swapInStagedStore } from './staging.js';
import { StoreTx } from './store-tx.js';
import { Watchers } from './watchers.js';
import { causeText, storeUnavailable } from './write-errors.js';

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
  /**
   * A clean close writes the tokens as held in memory beside LevelDB, and the next open reads
   * them from there instead of scanning (store/checkpoint.ts). Default true.
   */
  checkpoint?: boolean;
  /**
   * Tokens read by a second thread while this one indexes them, when no checkpoint is read
   * (compact/parallel-scan.ts): always, never, or (undefined) when LevelDB holds more than a
   * few megabytes of them and the machine has a second processor.
   */
  scanAside?: boolean;
  /** Told when a clean close could not write its checkpoint (the next open scans instead). */
  onCheckpointFailed?: (err: unknown) => void;
  /** Tests only: makes disk writes fail on demand (an Error to throw, or undefined). */
  faults?: { writeError?: () => Error | undefined };
}

/** Audit kinds of the tables: what an audit line calls an object. */
const AUDIT_KIND: Record<string, string> = {
  tokens: 'token',
  policies: 'policy',
  roles: 'role',
  authMethods: 'auth-method',
  bindingRules: 'binding-rule',
};
/** At most this many objects are named in one audit line (a reaper batch can delete thousands); the rest are counted. */
const AUDIT_OBJECTS = 100;

/** The store's writable state: ok, or refusing writes while it recovers from a write error. */
export interface StoreHealth {
  available: boolean;
  /** What the last failed write said. */
  lastError?: string;
  /** When writes started failing, ms since the epoch. */
  since?: number;
}

/**
 * The store: LevelDB on disk, the committed state in memory. It composes the parts etcd
 * keeps apart: transactions (store-tx.ts, synchronous, over a layer of accepted writes
 * not yet durable), group commit (group-commit.ts), the durable state in memory
 * (durable-state.ts), watchers (watchers.ts), the change log's recent tail (log-tail.ts),
 * the disk (disk-state.ts), and here the availability of writes after a disk error and
 * the HA follower's physical replica (its leader's batches and snapshots, verbatim).
 */
export class LevelStore implements Store {
  readonly reader: TablesReader;
  /** Accepted writes not yet durable, visible to transactions only. */
  readonly pending = new Map<string, LayerEntry>();
  private readonly state: DurableState;
  private readonly committer: GroupCommitter;
  private readonly watchers: Watchers;
  /** Recent change-log entries (the rest are read from disk). */
  private readonly logTail: LogTail;
  /** The last index handed out to a transaction (ahead of the durable one while writes are in flight). */
  private lastAllocated = 0;
  /** Set while writes fail: they are refused until a probe write succeeds again. */
  private unavailable: { cause: unknown; since: number } | undefined;
  private closed = false;
  /** HA: copies every group to the followers (leader), or unset (single server, follower). */
  private replicator: BatchReplicator | undefined;
  /** Where audited changes' lines go (README: Audit log); unset: none. */
  private auditSink: AuditSink | undefined;
  /** HA: a follower takes batches from its leader and refuses transactions. */
  private follower = false;
  /** HA follower: batches durable here that the leader has not committed yet, decoded, oldest first (not shown to readers). */
  private uncommitted: Array<{ seq: number; decoded: DecodedPair[] }> = [];
  /** HA follower: the leader committed every batch up to this one. */
  private commitLimit = 0;

  /** Set while a staged store is made current: transactions wait for it. */
  private installing: Promise<void> | undefined;

  private constructor(
    private db: Level<string, Uint8Array>,
    /** The store's directory (a staged store is swapped in there). */
    private readonly dir: string,
    private readonly options: LevelStoreOptions,
    logID: string,
  ) {
    this.state = new DurableState(logID);
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
  }

  static async open(dir: string, options: LevelStoreOptions): Promise<LevelStore> {
    // A staged store a crash interrupted: finished if it was complete, else removed (store/staging.ts).
    await settleStagedStore(dir);
    // Judged before LevelDB opens: an open changes the files a checkpoint was written beside.
    const checkpoint = options.checkpoint === false ? undefined : await findCheckpoint(dir);
    const db = openLevel(dir);
    await openExplained(db, `data dir ${dir} is in use by another process (LevelDB lock held)`, `cannot open the store in ${dir}`);
    try {
      await upgradeFormat(db, dir, options.durability === 'fsync');
      let logIDBytes = await db.get(META.logID);
      if (logIDBytes === undefined) {
        logIDBytes = encode(generateID());
        await db.put(META.logID, logIDBytes, { sync: options.durability === 'fsync' });
      }
      if (options.datacenter !== undefined) await claimDatacenter(db, dir, options.datacenter, options.durability === 'fsync');
      const scanned = checkpoint?.usable ? undefined : await scanTokensAside(db, dir, options.scanAside);
      const store = new LevelStore(db, dir, options, String(decodeRaw(logIDBytes)));
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
      if (err instanceof WatchwordError) throw err;
      // LevelDB's words name the damaged file.
      throw new WatchwordError('INTERNAL', `the store in ${dir} is corrupt or unreadable: ${(err as Error).message.replace(/\s+/g, ' ')}`, {
        cause: err,
      });
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
    this.uncommitted = [];
    this.reader.tables = this.state.tables;
    this.lastAllocated = this.state.index;
    this.committer.seq = Math.max(this.committer.seq, this.state.seq);
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

  /** Where this store stands in its datacenter's batch history (HA). */
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
    // A follower becoming leader: what it holds is its history now, committed or not.
    if (this.follower && !follower) this.commitServerBatches(Number.MAX_SAFE_INTEGER);
    this.follower = follower;
    // Change-log entries are read from disk until this server has written some itself.
    this.logTail.reset(this.state.index + 1);
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
    // Not given out again: an HA leader sent the failed batch to its followers while writing it,
    // and a follower that applied it must never see its indexes name other writes.
    this.refuseQueued(storeUnavailable(err, false), failed, { keepIndexes: true });
    this.writeFailed(err);
  }

  /**
   * A LevelDB write failed: nothing is written again before the database is reopened.
   * LevelDB's log writer does not survive a failed append (a full disk): its idea of where
   * its blocks start no longer matches the file, and every record it appends afterwards,
   * though the write reports success and is synced, is unreadable at the next open (a
   * full disk then freed, without a reopen: 2,802 of 3,000 acknowledged writes gone).
   */
  private writeFailed(err: unknown): void {
    if (this.unavailable) return;
    this.unavailable = { cause: err, since: Date.now() };
    this.options.onAvailability?.(false, err);
    void this.recover();
  }

  /** A follower's write of its leader's batches or snapshot: refused while the store recovers; a failure starts the recovery. */
  private async writeReplica(batch: ReturnType<Level<string, Uint8Array>['batch']>): Promise<void> {
    const injected = this.options.faults?.writeError?.();
    try {
      if (injected) {
        await batch.close();
        throw injected;
      }
      // A chained batch is closed by its write, whether it succeeded or not.
      await batch.write({ sync: this.options.durability === 'fsync' });
    } catch (err) {
      this.writeFailed(err);
      throw storeUnavailable(err, false);
    }
  }

  private checkReplicaWritable(): void {
    if (this.closed) throw new WatchwordError('INTERNAL', 'store is closed');
    if (this.unavailable) throw storeUnavailable(this.unavailable.cause, true);
  }

  /** Nothing of `failed` was written: each is refused with `err`, and what they left pending is forgotten. */
  private refuseQueued(err: unknown, failed: QueuedCommit[], options: { keepIndexes?: boolean } = {}): void {
    this.pending.clear();
    if (!options.keepIndexes) this.lastAllocated = this.state.index;
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
        if (onDisk !== undefined && Number(decodeRaw(onDisk)) !== this.state.index) await this.reload();
        this.unavailable = undefined;
        this.options.onAvailability?.(true);
      } catch (err) {
        if (this.unavailable) this.unavailable.cause = err;
      }
    }
  }

  transact<T>(fn: (tx: Tx) => T, options: TransactOptions = {}): Promise<T> {
    // A staged store being made current: the transaction runs against it once it is.
    if (this.installing) return this.installing.then(() => this.transact(fn, options));
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
    return this.enqueue(tx, options.sync ?? true, options.audit).then(() => result);
  }

  /**
   * A transaction's audit event: the record given, and as `raw` JSON members the index and
   * every object the transaction changed (built as text: no object per changed record).
   */
  private auditOf(tx: StoreTx, record: AuditRecord): AuditGroupEvent {
    const ops = tx.tableOps;
    const shown = Math.min(ops.length, AUDIT_OBJECTS);
    let objects = '';
    for (let i = 0; i < shown; i++) {
      const op = ops[i] as (typeof ops)[number];
      const r = op.record as { Name?: string; Namespace?: string; Partition?: string; Hash?: string } | null;
      let o = `{"Kind":"${AUDIT_KIND[op.table] ?? op.table}","ID":${quoteJSON(op.id)}`;
      if (r === null) o += ',"Deleted":true';
      else {
        if (r.Name !== undefined && op.table !== 'authMethods') o += `,"Name":${quoteJSON(r.Name)}`;
        if (r.Namespace !== undefined) o += `,"Namespace":${quoteJSON(r.Namespace)}`;
        if (r.Partition !== undefined) o += `,"Partition":${quoteJSON(r.Partition)}`;
        if (r.Hash !== undefined) o += `,"Hash":${quoteJSON(r.Hash)}`;
      }
      objects += i === 0 ? `${o}}` : `,${o}}`;
    }
    const more = ops.length - shown;
    const raw = `"Index":${tx.lastIndex ?? this.state.index},"Objects":[${objects}]${more > 0 ? `,"MoreObjects":${more}` : ''}`;
    return { type: record.type, actor: record.actor, details: record.details ?? {}, raw };
  }

  /** The audit event of a switch to a staged store: the record given, at the index the staged store has. */
  private installAudit(record: AuditRecord, staged: StagedStore): AuditGroupEvent {
    const index = Number(staged.meta.get(META.index) ?? this.state.index);
    return { type: record.type, actor: record.actor, details: record.details ?? {}, raw: `"Index":${index}` };
  }

  /** A transaction as batch operations, its records encoded once (the change log embeds the same bytes). */
  private enqueue(tx: StoreTx, sync: boolean, audit?: AuditRecord): Promise<void> {
    const entries = tx.logEntries();
    const ops: BatchOp[] = [];
    const encoded = new Map<unknown, Uint8Array>();
    for (const op of tx.tableOps) {
      const k = recordKey(op.table, op.id);
      if (op.record === null) {
        ops.push({ type: 'del', key: k });
      } else {
        const bytes = encode(op.record);
        encoded.set(op.record, bytes);
        op.bytes = bytes;
        ops.push({ type: 'put', key: k, value: bytes });
      }
    }
    for (const [k, v] of tx.meta) ops.push({ type: 'put', key: k, value: encode(v) });
    const entryBytes: Uint8Array[] = [];
    if (this.options.changeLog)
      for (const entry of entries) {
        const value = encodeLogEntry(entry, encoded);
        entryBytes.push(value);
        ops.push({ type: 'put', key: logKey(entry.Index), value });
      }
    const layer = [...tx.layer];
    for (const [k, e] of layer) this.pending.set(k, e);
    const newLogID = tx.newLogID;
    return new Promise<void>((resolve, reject) => {
      this.committer.push({
        ops,
        tableOps: tx.tableOps,
        meta: tx.meta,
        layer,
        index: tx.lastIndex ?? 0,
        tables: tx.touched,
        entries,
        entryBytes,
        sync,
        resolve,
        reject,
        ...(newLogID !== undefined ? { newLogID } : {}),
        ...(audit && this.auditSink ? { audit: this.auditOf(tx, audit) } : {}),
      });
    });
  }

  /** A durable group: into memory, acknowledged, waiters and listeners told. */
  private complete(group: QueuedCommit[], remoteError: unknown, seq: number | undefined): void {
    const applied = this.state.applyCommits(group);
    for (const c of group) for (const [k, e] of c.layer) if (this.pending.get(k) === e) this.pending.delete(k);
    const reset = [...group].reverse().find((c) => c.newLogID !== undefined);
    // The old log ends at a restore: what was remembered of it is of no use to anyone now.
    if (reset) this.logTail.reset(reset.index + 1);
    // The entries since the last reset, as their bytes: an entry object holds its records, and
    // thousands of them held through every scavenge cost more than decoding the few read back.
    if (this.options.changeLog)
      for (const c of group.slice(reset ? group.lastIndexOf(reset) : 0))
        c.entries.forEach((e, i) => this.logTail.remember(e.Index, c.entryBytes[i] as Uint8Array));
    // Durable here, but not confirmed by the synchronous followers: the caller must not count on it.
    for (const c of group)
      if (remoteError === undefined) c.resolve();
      else c.reject(remoteError);
    this.tell(remoteError === undefined ? applied : { ...applied, unconfirmed: true });
    // Followers show it from now on.
    if (remoteError === undefined && seq !== undefined) this.replicator?.committed?.(seq);
  }

  /** Wakes the waiters and tells the listeners what became durable. */
  private tell(applied: Applied, whole = false): void {
    if (whole) this.watchers.wakeAll();
    else this.watchers.wake(applied.tables);
    if (!this.watchers.listening) return;
    const { from, tables, entries, logReset, unconfirmed } = applied;
    this.watchers.emit({
      from,
      index: this.state.index,
      tables,
      entries,
      at: Date.now(),
      ...(logReset ? { logReset } : {}),
      ...(unconfirmed ? { unconfirmed } : {}),
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

  /**
   * Removes change-log entries with index <= `upTo`, at most `chunk` per batch so the
   * writer is never held long. Returns how many were removed.
   */
  async trimLog(upTo: number, chunk = 10_000): Promise<number> {
    if (upTo <= this.state.trimmedUpTo) return 0;
    let removed = 0;
    for (;;) {
      const keys: string[] = [];
      for await (const k of this.db.keys({ gt: LOG_PREFIX, lte: logKey(upTo), limit: chunk })) keys.push(k);
      // Raw operations queued behind the accepted transactions.
      await new Promise<void>((resolve, reject) => {
        const ops: BatchOp[] = keys.map((k) => ({ type: 'del', key: k }));
        this.committer.push({
          ops,
          entryBytes: [],
          tableOps: [],
          meta: [[META.logTrimmed, upTo]],
          layer: [],
          index: 0,
          tables: new Map(),
          entries: [],
          sync: false,
          resolve,
          reject,
        });
      });
      removed += keys.length;
      if (keys.length < chunk) break;
    }
    this.state.trimmedUpTo = upTo;
    return removed;
  }

  /** Every global object as of the durable index: records are immutable, so copying the references is a consistent view. */
  snapshotGlobal(): GlobalSnapshot {
    const tables = this.state.tables;
    const records = Object.fromEntries(TABLE_NAMES.map((t) => [t, tables[t].globalRecords()])) as unknown as GlobalSnapshot;
    const bootstrap = this.state.meta.get(META.bootstrap) as BootstrapState | undefined;
    return { ...records, logID: this.logID, index: this.state.index, bootstrap: bootstrap ?? null };
  }

  /** Change-log entries after `index`, up to `limit`: from memory when recent, else from disk. */
  async logEntriesAfter(index: number, limit: number): Promise<LogEntry[]> {
    const recent = this.logTail.after(index, limit);
    if (recent) return recent;
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
    if (!this.follower) throw new WatchwordError('INTERNAL', "only a follower applies its leader's batches");
    this.checkReplicaWritable();
    const last = batches[batches.length - 1];
    if (!last) return;
    const decoded = batches.map((b) => ({ seq: b.seq, decoded: b.ops.map(([k, v]) => decodePair(k, v)) }));
    const batch = this.db.batch();
    for (const b of batches) for (const [k, v] of b.ops) v === null ? batch.del(k) : batch.put(k, v);
    await this.writeReplica(batch);
    this.committer.seq = Math.max(this.committer.seq, last.seq);
    this.state.seq = last.seq;
    this.state.term = last.term;
    // Durable (the leader may count on it), but shown to readers only once the leader committed it:
    // a batch its leader never acknowledged may not be in the next leader's history.
    for (const d of decoded) this.uncommitted.push(d);
    this.commitServerBatches(this.commitLimit);
  }

  commitServerBatches(seq: number): void {
    this.commitLimit = Math.max(this.commitLimit, seq);
    let n = 0;
    while (n < this.uncommitted.length && (this.uncommitted[n] as { seq: number }).seq <= this.commitLimit) n++;
    if (n === 0) return;
    const ready = this.uncommitted.splice(0, n);
    const applied = this.state.applyPairs(ready.flatMap((r) => r.decoded));
    this.lastAllocated = this.state.index;
    this.logTail.reset(this.state.index + 1);
    this.tell(applied);
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
   * Starts a staged store beside this one (store/staging.ts): a whole new state, written and
   * built piece by piece, made current by `install`. The current state serves until then.
   */
  async stage(): Promise<StagedStore> {
    this.checkReplicaWritable();
    // One staging at a time: another one under way (a catch-up, while a restore is asked for) is not cut short.
    if (this.staging?.active)
      throw new WatchwordError(
        'CONFLICT',
        'another change of the whole store (a catch-up from the primary, a snapshot from the leader, or a restore) is under way; ' +
          'try again once it has ended',
      );
    // One given up (a lost connection's) may still be removing its directory.
    await this.staging?.abandon();
    this.staging = await StagedStore.create(this.dir);
    return this.staging;
  }

  /** The staging started last (until it is made current or given up, its directory is in use). */
  private staging: StagedStore | undefined;

  /**
   * Makes a staged store current in one step. Transactions wait meanwhile, and those accepted
   * before are written first; `complete` then adds what must be current at the switch (it runs
   * with writes held); the staging is finished, its directory swapped in, and its tables become
   * the durable state. `indexesMayGoBack`: the staged store is another history (a follower's
   * leader), whose indexes this one follows even backward. An HA leader's followers start
   * over from a snapshot of the new store.
   */
  async install(staged: StagedStore, options: InstallOptions = {}): Promise<void> {
    let release = (): void => undefined;
    this.installing = new Promise<void>((resolve) => {
      release = resolve;
    });
    let closed = false;
    try {
      await this.committer.drain();
      this.checkReplicaWritable();
      await options.complete?.(staged);
      const sink = this.auditSink;
      const event = options.audit && sink ? this.installAudit(options.audit, staged) : undefined;
      // Enforced auditing: the line is durable before the switch, or there is no switch.
      if (event && sink?.mode === 'enforced') await sink.writeGroup([event]);
      await staged.finish();
      closed = true;
      await this.db.close();
      await swapInStagedStore(this.dir);
      const db = openLevel(this.dir);
      await db.open();
      this.db = db;
      closed = false;
      const from = this.state.index;
      this.state.adopt({ meta: staged.meta, tables: staged.tables }, { indexesMayGoBack: options.indexesMayGoBack === true });
      this.uncommitted = [];
      this.reader.tables = this.state.tables;
      this.lastAllocated = this.state.index;
      this.committer.seq = Math.max(this.committer.seq, this.state.seq);
      this.logTail.reset(this.state.index + 1);
      this.replicator?.historyReplaced?.();
      this.tell({ from, tables: this.state.allTables(), entries: [], logReset: options.logReset === true }, true);
      if (event && sink?.mode === 'best-effort') void sink.writeGroup([event]);
    } catch (err) {
      await staged.abandon().catch(() => undefined);
      // The swap failed with the database closed: the directory in place (old or new) is opened again.
      if (closed) {
        await settleStagedStore(this.dir).catch(() => undefined);
        this.db = openLevel(this.dir);
        await this.db.open();
        await this.reload({ indexesMayGoBack: true });
      }
      throw err;
    } finally {
      this.installing = undefined;
      release();
    }
  }

  /**
   * HA follower: takes its leader's snapshot piece by piece into a staged store (keys as the
   * leader holds them, each checked), then makes it current: the leader's history replaces
   * this one, indexes follow it even backward.
   */
  async beginServerSnapshot(): Promise<ServerSnapshotIntake> {
    if (!this.follower) throw new WatchwordError('INTERNAL', 'only a follower installs a snapshot');
    const staged = await this.stage();
    return {
      add: async (pairs) => {
        for (const [k, v] of pairs) if (k !== META.probe && k !== META.datacenter) await staged.putPair(k, v);
      },
      install: async (position) => {
        if (!this.follower) throw new WatchwordError('INTERNAL', 'only a follower installs a snapshot');
        const datacenter = this.state.meta.get(META.datacenter);
        await this.install(staged, {
          indexesMayGoBack: true,
          logReset: true,
          complete: (s) => {
            if (datacenter !== undefined) s.putMeta(META.datacenter, datacenter);
            s.putMeta(META.serverSeq, position.seq);
            s.putMeta(META.serverTerm, position.term);
          },
        });
        this.commitLimit = Math.max(this.commitLimit, position.seq);
      },
      abandon: () => staged.abandon(),
    };
  }

  /** HA follower: the whole store replaced by the leader's snapshot given whole (tests; the stream uses `beginServerSnapshot`). */
  async installServerSnapshot(pairs: Array<[string, Uint8Array]>, position: ServerPosition): Promise<void> {
    const intake = await this.beginServerSnapshot();
    try {
      await intake.add(pairs);
      await intake.install(position);
    } catch (err) {
      await intake.abandon();
      throw err;
    }
  }

  /** Resolves once every accepted transaction has been written (or refused). */
  async quiesce(): Promise<void> {
    await this.committer.drain();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // Let every accepted transaction reach the disk first.
    await this.committer.drain();
    this.closed = true;
    this.watchers.wakeAll();
    if (this.db.status !== 'open' && this.db.status !== 'opening') return;
    await this.db.close();
    // Memory holds what the disk does only while writes succeed.
    const tokens = this.state.tables.tokens.compact;
    if (this.options.checkpoint === false || this.unavailable || tokens === undefined) return;
    try {
      await writeCheckpoint(this.dir, tokens, this.options.durability === 'fsync');
    } catch (err) {
      this.options.onCheckpointFailed?.(err);
    }
  }
}

/** The store's LevelDB (opened by the caller). */
function openLevel(dir: string): Level<string, Uint8Array> {
  return new Level<string, Uint8Array>(dir, LEVEL_OPTIONS);
}
