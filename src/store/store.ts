import type { LastUseBook } from './last-use.js';
import type { AuditActor } from '../domain/types.js';
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
import type { ExpiryCursor, StateReader, Tables } from './memory.js';
import type { StagedStore } from './staging.js';
import type { RecordList } from './table.js';
import type { RecordTypes, TableName, WatchTable } from './schema.js';
import type { AuditType } from '../domain/audit-types.js';

export type { StateReader, TokenQuery, ExpiryCursor } from './memory.js';
export type { TableName } from './schema.js';

export type { WatchTable } from './schema.js';

/** A record of one table written, as the change log carries it. */
export type RecordSet<T extends TableName = TableName> = { [K in T]: { Table: K; Op: 'set'; ID: string; Value: RecordTypes[K] } }[T];

/** One change to a global object, as the change log carries it (one kind of set per table, from the table list). */
export type Change =
  | RecordSet
  | { Table: 'bootstrap'; Op: 'set'; ID: string; Value: BootstrapState }
  | { Table: TableName; Op: 'delete'; ID: string }
  /**
   * The reaper deleted every global token expired at or before `Value` in the expiry order (its
   * ExpirationTime, then its AccessorID): one change for a batch of them, which a secondary
   * applies through its own expiry index (it holds the same global tokens at this index).
   */
  | { Table: 'tokens'; Op: 'expire'; ID: ''; Value: ExpiredThrough };

/** A place in the expiry order: ExpirationTime (ms), then AccessorID. */
export interface ExpiredThrough {
  Time: number;
  AccessorID: string;
}

/**
 * One entry of the replicated change log: every global change made at one index,
 * applied together on the other side.
 */
export interface LogEntry {
  Index: number;
  Changes: Change[];
}

/**
 * Every global object as of one index of the primary (replication snapshot): one list per
 * table, read a slice at a time (the tokens are decoded slice by slice, never all at once).
 */
export type GlobalSnapshot = { [T in TableName]: RecordList<RecordTypes[T]> } & {
  logID: string;
  index: number;
  bootstrap: BootstrapState | null;
};

/** The IDs of the records one commit wrote or deleted, by table (those an enforcing client's watch depends on). */
export interface ChangedRecords {
  tokens: string[];
  policies: string[];
  roles: string[];
}

/** What became durable in one group commit. */
export interface CommitEvent {
  /** Highest index durable before this group: the group covers (from, index]. */
  from: number;
  /** Highest index now durable. */
  index: number;
  /** Tables touched, with their new index. */
  tables: Map<WatchTable, number>;
  /** Change-log entries written (global objects, primary only), in index order. */
  entries: LogEntry[];
  /** When the batch became durable, ms since the epoch. */
  at: number;
  /** Set when the group started a new change log (a restore): followers must start over. */
  logReset?: boolean;
  /**
   * HA: durable on this server, but its synchronous followers never confirmed it (leadership
   * ended first), so the next leader may not hold it: it must not reach another datacenter.
   */
  unconfirmed?: boolean;
  /**
   * The tokens, policies and roles the group wrote or deleted, by ID. Absent when the whole
   * store was replaced (a restore, a catch-up, a follower's snapshot): anything may have changed.
   */
  changed?: ChangedRecords;
}

/**
 * One group commit as the leader of a datacenter wrote it, key by key (null: delete),
 * for its followers to write verbatim (docs/servers.md, "Several servers per datacenter"). `seq` numbers batches without gaps within
 * a batch log; `term` is the leadership term that wrote it.
 */
export interface ServerBatch {
  seq: number;
  term: number;
  /** The seq of the batch before it in the leader's batch log: a follower applies it only on top of that one. */
  prev: number;
  ops: Array<[string, Uint8Array | null]>;
}

/** Where a store stands in its datacenter's batch log. */
export interface ServerPosition {
  seq: number;
  term: number;
}

/**
 * What a leader's store asks of the datacenter's other servers: before a group is
 * written, whether this server may still write (fencing); with the write, to copy the
 * batch to the followers, resolving once the synchronous ones hold it durably.
 */
export interface BatchReplicator {
  /** Throws (NO_LEADER) when this server must not write any more. */
  checkLeadership(): void;
  term(): number;
  replicate(batch: ServerBatch): Promise<void>;
  /** A local write failed after its batch was sent: followers must start over from a snapshot. */
  localWriteFailed(): void;
  /** The store was replaced whole (a staged store made current): followers start over from a snapshot. */
  batchLogReplaced?(): void;
  /** Batch `seq` (and every one before it) is durable here and on the synchronous followers: acknowledged. */
  committed?(seq: number): void;
}

/**
 * What the servers of a datacenter (ha/) need of a store: where it stands in the batch
 * batch log, the leader's snapshot and replicator, the follower's batches and snapshots, and
 * the switch between the two. LevelStore implements it; the simulation (testing/simulation)
 * has its own.
 */
/** A follower's intake of its leader's snapshot: pieces in order, then the position it shows. */
export interface ServerSnapshotIntake {
  add(pairs: Array<[string, Uint8Array]>): Promise<void>;
  /** Makes the snapshot this server's store, durable, at the leader's `position`. */
  install(position: ServerPosition): Promise<void>;
  /** Gives it up (a lost connection): nothing of it is kept. */
  abandon(): Promise<void>;
}

export interface ServerStore {
  serverPosition(): ServerPosition;
  /** HA leader: every key, in chunks; the view's position comes last. */
  serverSnapshot(): AsyncGenerator<Array<[string, Uint8Array]>, ServerPosition>;
  /**
   * HA follower: the leader's batches, durable in one atomic write; shown to readers once
   * the leader has committed them (`commitServerBatches`).
   */
  applyServerBatches(batches: ServerBatch[]): Promise<void>;
  /** HA follower: the leader committed every batch up to `seq`: those held here are shown to readers (now, or once written). */
  commitServerBatches(seq: number): void;
  /** HA follower: takes the leader's snapshot piece by piece; the store is replaced by it once installed. */
  beginServerSnapshot(): Promise<ServerSnapshotIntake>;
  /** A follower refuses transactions and applies its leader's batches instead. */
  setFollower(follower: boolean): void;
  /** The leader's replicator of every group (undefined: none). */
  setReplicator(replicator: BatchReplicator | undefined): void;
  /** Resolves once every accepted transaction has been written (or refused). */
  quiesce(): Promise<void>;
  currentIndex(): number;
  /** Tokens' last uses: a follower reports the ones it saw to its leader, which keeps the latest. */
  readonly lastUse: LastUseBook;
}

/**
 * What a server's place in the cluster (`ha/`) needs of its store: the whole store, and the
 * servers' stream within a datacenter. LevelStore is one; ha/ never names it.
 */
export type ClusterStore = Store & ServerStore;

/** A record as written: the store stamps CreateIndex and ModifyIndex. */
export type Unstamped<R> = Omit<R, 'CreateIndex' | 'ModifyIndex'> & { CreateIndex?: number; ModifyIndex?: number };

/**
 * What a transaction reads: the newest state, that is durable state plus every write
 * accepted before it and its own writes, so checks such as name uniqueness never race.
 */
export interface TxReader {
  getToken(accessor: string): TokenRecord | undefined;
  /** A token read without keeping it decoded (the reaper's: a token about to be deleted must not push those in use out of the cache). */
  peekToken(accessor: string): TokenRecord | undefined;
  getTokenBySecret(secret: string): TokenRecord | undefined;
  /** Whether any token uses this value as its SecretID, or held it before its last rotation. */
  isSecretInUse(secret: string): boolean;
  getPolicy(id: string): PolicyRecord | undefined;
  getPolicyByName(scope: Scope, name: string): PolicyRecord | undefined;
  getRole(id: string): RoleRecord | undefined;
  getRoleByName(scope: Scope, name: string): RoleRecord | undefined;
  getAuthMethod(scope: Scope, name: string): AuthMethodRecord | undefined;
  getBindingRule(id: string): BindingRuleRecord | undefined;
  /** AccessorIDs of the tokens an auth method (by name) issued, in every scope, as of this transaction. */
  tokenIDsOfAuthMethod(name: string): string[];
  /** IDs of the binding rules of an auth method (by its table ID), as of this transaction. */
  ruleIDsOfAuthMethod(methodID: string): string[];
  getQuota(id: string): QuotaRecord | undefined;
  getQuotaByName(name: string): QuotaRecord | undefined;
  /** Whether any quota is durable here (a token write with none to judge does nothing more). */
  hasQuotas(): boolean;
  /** The durable quotas over a scope, by its `quota` key (quotaScopeKey): a quota judges the tokens written after it. */
  quotasOver(key: string): QuotaRecord[];
  /** The tokens counted under any of these `quota` index keys (a token is under one of them at most), as of this transaction: every write accepted before it counts. */
  tokenCountUnder(keys: readonly string[]): number;
  getRecord<T extends TableName>(table: T, id: string): RecordTypes[T] | undefined;
  getBootstrap(): BootstrapState;
}

/**
 * A transaction: synchronous, so the writer is held only while CPU work runs. Writes
 * become one atomic batch; records get this transaction's index as ModifyIndex (and as
 * CreateIndex when new), stamped here and nowhere else.
 */
export interface Tx extends TxReader {
  /** The index of this transaction's change; allocated on first use. */
  readonly index: number;
  /** Takes a further index, for batches that apply several changes (replication). */
  nextIndex(): number;
  /** Writes a record of a table at the current index; returns it as stored. */
  put<T extends TableName>(table: T, record: Unstamped<RecordTypes[T]>): RecordTypes[T];
  /**
   * Deletes a token this transaction has just read (no second read of it). `logged: false`: no
   * change-log entry of its own (the reaper's, logged for the batch with logExpired).
   */
  delToken(token: TokenRecord, options?: { logged?: boolean }): boolean;
  /** One change for the reaper's batch: every global token expired up to `through` is gone. */
  logExpired(through: ExpiredThrough): void;
  /**
   * The reaper's bulk delete: tokens the durable expiry index named as expired, deleted without
   * reading them (a token with a write in flight is left for a later pass; global ones only when
   * `global`). How many were deleted, and whether a global one was (logExpired names the batch).
   */
  reapExpired(expired: readonly ExpiryCursor[], global: boolean): { deleted: number; global: boolean };
  /** A secondary applying `expire`: every global token up to `through` in the expiry order, as this transaction sees them, deleted; their IDs. */
  reapGlobalExpiredThrough(through: ExpiredThrough): string[];
  /** Deletes by the table's ID (the AccessorID; authMethodID for a method); returns whether something was deleted. */
  del<T extends TableName>(table: T, id: string): boolean;
  putBootstrap(state: BootstrapState): void;
  /** Metadata written in the same batch (the replication cursor). */
  putMeta(key: string, value: unknown): void;
  /** A token's last use (a flush): no index, no change-log entry, no waiter woken; left out when the token is gone. */
  putLastUse(accessor: string, ms: number): boolean;
  /**
   * Starts a new change log with this identity (a restore on the primary): nothing this
   * transaction changes enters the old log, which ends here, so secondaries that follow
   * it take a full snapshot.
   */
  resetLog(logID: string): void;
}

export type Durability = 'fsync' | 'os';

export interface TransactOptions {
  /**
   * Whether this change needs a sync before it is acknowledged (default true; only
   * meaningful with `fsync` durability). Replicated changes pass false: the primary
   * holds them durably and the cursor, written in the same atomic batch, makes a
   * secondary fetch again whatever a power cut took.
   */
  sync?: boolean;
  /**
   * The audit record of this change (docs/audit.md: Audit log): its type and who made it. The objects
   * it changed and its index are added by the store; the line rides the change's group commit.
   */
  audit?: AuditRecord;
  /** Made while changes of global objects are held (`holdWrites`): the change that ends the hold. */
  pastHold?: boolean;
  /**
   * Told how long the change's group kept the event loop once queued, ms: building its disk
   * batch, and applying it to memory and telling the listeners once durable (the reaper paces
   * itself by the CPU its batches cost, not by the disk's sync).
   */
  timing?: { ms: number };
}

/** What a change's audit line says beyond what the store knows (the objects, the index). */
export interface AuditRecord {
  type: AuditType;
  actor: AuditActor;
  details?: Record<string, unknown>;
}

/** The audit log as a group commit writes to it. */
export interface AuditSink {
  /** Enforced: the lines are durable before the group is written (else it throws and the group is refused). */
  readonly mode: 'best-effort' | 'enforced';
  writeGroup(events: readonly AuditGroupEvent[]): Promise<void>;
}

/** One write's audit event: `raw` holds JSON members (the index, the objects changed) written after the details. */
export interface AuditGroupEvent {
  type: AuditType;
  actor: AuditActor;
  details: Record<string, unknown>;
  raw?: string;
}

/**
 * The storage port. Committed state lives in memory with every index; the disk holds
 * it durably. Readers see durable state only; `transact` runs a synchronous function
 * against the newest state and resolves once its batch is durable (group commit),
 * waking waiters and commit listeners after that.
 */
/** How a staged store is made current (LevelStore.install). */
export interface InstallOptions {
  /** Adds what must be current at the switch; runs with writes held. */
  complete?: (staged: StagedStore) => void | Promise<void>;
  /** The staged store is another batch log (a follower's leader): indexes follow it even backward. */
  indexesMayGoBack?: boolean;
  /** The change log starts anew (a restore at the primary): its readers start over. */
  logReset?: boolean;
  /** The switch's audit line (with its index): enforced, durable before the switch; best-effort, after. */
  audit?: AuditRecord;
}

/**
 * What a secondary's catch-up needs of its store (replication/catch-up.ts): the durable state, and a staged store to
 * build and make current.
 */
export interface CatchUpStore {
  readonly tables: Tables;
  getMeta(key: string): unknown;
  /** Every durable metadata entry. */
  metaEntries(): Iterable<[string, unknown]>;
  currentIndex(): number;
  tableIndex(table: WatchTable): number;
  allocateIndex(): number;
  serverPosition(): ServerPosition;
  stage(): Promise<StagedStore>;
  install(staged: StagedStore, options?: InstallOptions): Promise<void>;
}

export interface Store extends CatchUpStore {
  /** Durable state. */
  readonly reader: StateReader;
  /** Identity of this store's change log: changes when the data dir is rebuilt. */
  readonly logID: string;
  /** Highest durable index (never 0 once opened). */
  currentIndex(): number;
  tableIndex(table: WatchTable): number;
  count(table: TableName): number;
  /** Tokens deleted since the store opened, by any path (reaps, deletes, logouts, replicated changes). */
  deletedTokens(): number;
  /** Each token's last use known here (docs/http-api.md, "Last use"): uses are recorded in it, a flush writes them. */
  readonly lastUse: LastUseBook;
  /** Runs `fn` (synchronous) and resolves with its result once the writes are durable. */
  transact<T>(fn: (tx: Tx) => T, options?: TransactOptions): Promise<T>;
  /** Durable metadata (the replication cursor). */
  getMeta(key: string): unknown;
  /** Resolves once `table`'s index exceeds `index`, or when the signal aborts. */
  waitForTableIndex(table: WatchTable, index: number, signal?: AbortSignal): Promise<void>;
  onCommit(listener: (event: CommitEvent) => void): () => void;
  /** Every global object as of the current durable index. */
  snapshotGlobal(): GlobalSnapshot;
  /** Change-log entries after `index`, at most `limit` (primary). */
  logEntriesAfter(index: number, limit: number): Promise<LogEntry[]>;
  /** Highest change-log index removed by retention; a follower behind it needs a snapshot. */
  logTrimmedUpTo(): number;
  /** Removes change-log entries up to `upTo`; returns how many. */
  trimLog(upTo: number): Promise<number>;
  /** Refuses every transaction that changes a global object with `refusal` from now on (undefined: takes them again), but those made `pastHold`. */
  holdWrites(refusal: Error | undefined): void;
  /** Whether commits write change-log entries from now on (the primary's do). */
  setChangeLog(on: boolean): void;
  close(): Promise<void>;
}
