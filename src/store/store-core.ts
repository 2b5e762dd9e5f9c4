import type { Level } from 'level';
import type { Checkpoint } from './checkpoint.js';
import { type Applied, CommittedState } from './committed-state.js';
import { type LoadedState, readState } from './disk-format.js';
import { ChangeLog } from './change-log.js';
import { GroupCommitter, type QueuedCommit, isFencing } from './group-commit.js';
import { StoreSwitch } from './install.js';
import { LogTail } from './log-tail.js';
import { type LayerEntry, TablesReader } from './memory.js';
import { type LevelStoreOptions, openLevel } from './open.js';
import { decodeRaw } from './records.js';
import { META, POSITIONAL_FORMAT } from './schema.js';
import { ServerReplica } from './server-replica.js';
import type { AuditSink, BatchReplicator } from './store.js';
import { Watchers } from './watchers.js';
import { storeUnavailable } from './write-errors.js';
import { WriteRecovery } from './write-recovery.js';

/**
 * What the parts of a store share, held by each part by reference (as etcd's transactions hold
 * their store): the database of the moment, the durable state and its readers, the accepted
 * writes not yet durable, and the parts themselves (group commit, writes after a disk error,
 * the HA follower's replica, the switch to a staged store, the change log on disk). A new
 * durable state becomes current in one place only, `adopt`, whatever it came from.
 */
export class StoreCore {
  readonly state: CommittedState;
  readonly reader: TablesReader;
  /** Accepted writes not yet durable, visible to transactions only. */
  readonly pending = new Map<string, LayerEntry>();
  readonly watchers: Watchers;
  /** Recent change-log entries (the rest are read from disk). */
  readonly logTail: LogTail;
  /** The last index handed out to a transaction (ahead of the durable one while writes are in flight). */
  lastAllocated = 0;
  /** Whether commits write change-log entries: the primary's do (a promotion turns it on, a demotion off). */
  writesLog: boolean;
  closed = false;
  /** HA: copies every group to the followers (leader), or unset (single server, follower). */
  replicator: BatchReplicator | undefined;
  /** Where audited changes' lines go (docs/audit.md: Audit log); unset: none. */
  auditSink: AuditSink | undefined;
  /** Where the last load read the tokens from: a checkpoint, or a scan (and why); undefined without checkpoints. */
  tokensFrom: string | undefined;
  /**
   * Whether tokens are written in the positional form: the data dir is of format 3 (disk-format.ts,
   * `upgradeFormat`). A staged store swapped in is written as maps until the next start converts it.
   */
  positionalTokens = false;

  readonly committer: GroupCommitter;
  readonly recovery: WriteRecovery;
  readonly switcher: StoreSwitch;
  readonly replica: ServerReplica;
  readonly changeLog: ChangeLog;

  constructor(
    /** The database of the moment: a swap of a staged store and a recovery open it again. */
    public db: Level<string, Uint8Array>,
    /** The store's directory (a staged store is swapped in there). */
    readonly dir: string,
    readonly options: LevelStoreOptions,
    logID: string,
  ) {
    this.state = new CommittedState(logID);
    this.writesLog = options.changeLog;
    this.reader = new TablesReader(this.state.tables, () => this.state.bootstrap(), this.state.goneSecrets);
    this.logTail = new LogTail(options.logTailEntries ?? 20_000);
    this.watchers = new Watchers((t) => this.state.tableIndex(t));
    this.committer = new GroupCommitter(this);
    this.recovery = new WriteRecovery(this);
    this.switcher = new StoreSwitch(this);
    this.replica = new ServerReplica(this);
    this.changeLog = new ChangeLog(this);
  }

  get durability() {
    return this.options.durability;
  }

  get faults() {
    return this.options.faults;
  }

  /**
   * A new durable state made current, the one way there is: at open and after a recovery that
   * finds more on disk (read from LevelDB, `reload`), and when a staged store is swapped in (a
   * catch-up, a restore, an HA follower's snapshot: `swapped`). Readers, transactions, the batch
   * log and the change log's tail go on from it; after a swap an HA leader's followers start
   * over, and every waiter and listener is told.
   */
  adopt(loaded: LoadedState, options: { indexesMayGoBack?: boolean; swapped?: { logReset: boolean } } = {}): void {
    const from = this.state.index;
    this.state.adopt(loaded, options);
    // What the disk holds is all in memory now: nothing of the replica's is waiting to be shown.
    this.replica.replaced();
    this.reader.tables = this.state.tables;
    this.lastAllocated = this.state.index;
    this.committer.continueAfter(this.state.seq);
    this.logTail.reset(this.state.index + 1);
    if (!options.swapped) return;
    this.replicator?.batchLogReplaced?.();
    this.tell({ from, tables: this.state.allTables(), entries: [], logReset: options.swapped.logReset }, true);
  }

  /**
   * What the disk holds adopted as the durable state (at open, after a recovery that finds more on
   * disk); whether this thread read the tokens from LevelDB to do so.
   */
  async reload(options: { indexesMayGoBack?: boolean; checkpoint?: Checkpoint } = {}): Promise<boolean> {
    const from = (where: string) => void (this.tokensFrom = where);
    const loaded = await readState(this.db, options.checkpoint, from);
    this.adopt(loaded, options);
    return loaded.tokensScanned === true;
  }

  /** Opens the database in the directory (after a swap) as the store's. */
  async openDb(): Promise<void> {
    const db = openLevel(this.dir);
    await db.open();
    this.db = db;
    const format = await db.get(META.format);
    this.positionalTokens = format !== undefined && decodeRaw(format) === POSITIONAL_FORMAT;
  }

  /** A durable group: into memory, acknowledged, waiters and listeners told (group commit's `durable`). */
  durable(group: QueuedCommit[], remoteError: unknown, seq: number | undefined): void {
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

  /**
   * A group's write failed (group commit's `failed`). A fenced leader wrote nothing: refused,
   * but the disk is fine. Otherwise nothing of it or of what queued behind it is durable, so
   * all of it is refused (503) and forgotten, further writes are refused at once, and a probe
   * write is retried with backoff until the disk takes writes again.
   */
  failed(err: unknown, failed: QueuedCommit[]): void {
    if (isFencing(err)) return this.refuseQueued(err, failed);
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

  /** Changes of a follower's replica applied to memory: shown to readers, waiters and listeners. */
  show(applied: Applied): void {
    this.lastAllocated = this.state.index;
    this.logTail.reset(this.state.index + 1);
    this.tell(applied);
  }

  /** Wakes the waiters and tells the listeners what became durable (`whole`: everything may have changed). */
  tell(applied: Applied, whole = false): void {
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
}
