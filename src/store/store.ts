import type { AuthMethodRecord, BindingRuleRecord, BootstrapState, PolicyRecord, RoleRecord, Scope, TokenRecord } from '../domain/types.js';
import type { StateReader } from './memory.js';
import type { RecordTypes, TableName } from './schema.js';

export type { StateReader, TokenQuery, ExpiryCursor } from './memory.js';
export type { TableName } from './schema.js';

/** Tables whose changes blocking queries can wait on. */
export type WatchTable = TableName | 'bootstrap';

/** One change to a global object, as the change log carries it. */
export type Change =
  | { Table: 'tokens'; Op: 'set'; ID: string; Value: TokenRecord }
  | { Table: 'policies'; Op: 'set'; ID: string; Value: PolicyRecord }
  | { Table: 'roles'; Op: 'set'; ID: string; Value: RoleRecord }
  | { Table: 'authMethods'; Op: 'set'; ID: string; Value: AuthMethodRecord }
  | { Table: 'bindingRules'; Op: 'set'; ID: string; Value: BindingRuleRecord }
  | { Table: 'bootstrap'; Op: 'set'; ID: string; Value: BootstrapState }
  | { Table: TableName; Op: 'delete'; ID: string };

/**
 * One entry of the replicated change log: every global change made at one index,
 * applied together on the other side.
 */
export interface LogEntry {
  Index: number;
  Changes: Change[];
}

/** Every global object as of one index of the primary (replication snapshot). */
export interface GlobalSnapshot {
  logID: string;
  index: number;
  tokens: TokenRecord[];
  policies: PolicyRecord[];
  roles: RoleRecord[];
  authMethods: AuthMethodRecord[];
  bindingRules: BindingRuleRecord[];
  bootstrap: BootstrapState | null;
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
}

/**
 * One group commit as the leader of a datacenter wrote it, key by key (null: delete),
 * for its followers to write verbatim (§13). `seq` numbers batches without gaps within
 * a history; `term` is the leadership term that wrote it.
 */
export interface ServerBatch {
  seq: number;
  term: number;
  /** The seq of the batch before it in the leader's history: a follower applies it only on top of that one. */
  prev: number;
  ops: Array<[string, Uint8Array | null]>;
}

/** Where a store stands in its datacenter's batch history. */
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
}

/** A record as written: the store stamps CreateIndex and ModifyIndex. */
export type Unstamped<R> = Omit<R, 'CreateIndex' | 'ModifyIndex'> & { CreateIndex?: number; ModifyIndex?: number };

/**
 * What a transaction reads: the newest state, that is durable state plus every write
 * accepted before it and its own writes, so checks such as name uniqueness never race.
 */
export interface TxReader {
  getToken(accessor: string): TokenRecord | undefined;
  getTokenBySecret(secret: string): TokenRecord | undefined;
  /** Whether any token uses this value as its SecretID. */
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
  getRecord<T extends TableName>(table: T, id: string): RecordTypes[T] | undefined;
  getBootstrap(): BootstrapState;
  /** Every record of a table (snapshot diffs; not for request paths). */
  allRecords<T extends TableName>(table: T): Array<RecordTypes[T]>;
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
  /** Writes a record at the current index; returns it as stored. */
  putToken(record: Unstamped<TokenRecord>): TokenRecord;
  putPolicy(record: Unstamped<PolicyRecord>): PolicyRecord;
  putRole(record: Unstamped<RoleRecord>): RoleRecord;
  putAuthMethod(record: Unstamped<AuthMethodRecord>): AuthMethodRecord;
  putBindingRule(record: Unstamped<BindingRuleRecord>): BindingRuleRecord;
  /** Deletes by ID; returns whether something was deleted. */
  deleteToken(accessor: string): boolean;
  deletePolicy(id: string): boolean;
  deleteRole(id: string): boolean;
  /** By the ID of the table (authMethodID for a method). */
  deleteAuthMethod(id: string): boolean;
  deleteBindingRule(id: string): boolean;
  putBootstrap(state: BootstrapState): void;
  /** Metadata written in the same batch (the replication cursor). */
  putMeta(key: string, value: unknown): void;
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
}

/**
 * The storage port. Committed state lives in memory with every index; the disk holds
 * it durably. Readers see durable state only; `transact` runs a synchronous function
 * against the newest state and resolves once its batch is durable (group commit),
 * waking waiters and commit listeners after that.
 */
export interface Store {
  /** Durable state. */
  readonly reader: StateReader;
  /** Identity of this store's change log: changes when the data dir is rebuilt. */
  readonly logID: string;
  /** Highest durable index (never 0 once opened). */
  currentIndex(): number;
  tableIndex(table: WatchTable): number;
  count(table: TableName): number;
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
  close(): Promise<void>;
}
