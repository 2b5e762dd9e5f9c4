import type { BootstrapState, PolicyRecord, RoleRecord, TokenRecord } from '../domain/types.js';
import type { TableName } from './keys.js';
import type { Reader } from './reader.js';

/** Tables whose changes blocking queries can wait on. */
export type WatchTable = TableName | 'bootstrap';

/** One change to a global object. */
export type Change =
  | { Table: 'tokens'; Op: 'set'; ID: string; Value: TokenRecord }
  | { Table: 'policies'; Op: 'set'; ID: string; Value: PolicyRecord }
  | { Table: 'roles'; Op: 'set'; ID: string; Value: RoleRecord }
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
  bootstrap: BootstrapState | null;
}

/** What became durable in one group commit. */
export interface CommitEvent {
  /** Highest index now durable. */
  index: number;
  /** Tables touched, with their new index. */
  tables: Map<WatchTable, number>;
  /** Change-log entries written (global objects, primary only), in index order. */
  entries: LogEntry[];
  /** When the batch became durable, ms since the epoch. */
  at: number;
}

/**
 * A transaction: reads see committed state plus every write accepted before it
 * (transactions run one at a time), writes become one atomic batch. Records get this
 * transaction's index as their ModifyIndex.
 */
export interface Tx extends Reader {
  /** The index of this transaction's change; allocated on first use. */
  readonly index: number;
  /** Takes a further index, for batches that apply several changes (replication). */
  nextIndex(): number;
  /**
   * Writes a record and its indexes. `previous` is the stored version when the caller
   * already has it (null: known absent), saving a read; omitted, it is read here.
   */
  putToken(record: TokenRecord, previous?: TokenRecord | null): Promise<void>;
  putPolicy(record: PolicyRecord, previous?: PolicyRecord | null): Promise<void>;
  putRole(record: RoleRecord, previous?: RoleRecord | null): Promise<void>;
  /** Deletes by ID; a no-op when absent. Returns whether something was deleted. */
  deleteToken(accessor: string): Promise<boolean>;
  deletePolicy(id: string): Promise<boolean>;
  deleteRole(id: string): Promise<boolean>;
  putBootstrap(state: BootstrapState): void;
  /** Raw metadata write (replication cursor and the like), in the same batch. */
  putMeta(key: string, value: unknown): void;
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
 * The storage port. Reads see durable state only; `transact` acknowledges after the
 * batch is durable (fsync mode) and wakes waiters and commit listeners after that.
 */
export interface Store {
  readonly reader: Reader;
  /** Identity of this store's change log: changes when the data dir is rebuilt. */
  readonly logID: string;
  /** Highest durable index (never 0 once opened). */
  currentIndex(): number;
  tableIndex(table: WatchTable): number;
  /** Objects stored in a table. */
  count(table: TableName): number;
  transact<T>(fn: (tx: Tx) => Promise<T>, options?: TransactOptions): Promise<T>;
  /** Resolves once `table`'s index exceeds `index`, or when the signal aborts. */
  waitForTableIndex(table: WatchTable, index: number, signal?: AbortSignal): Promise<void>;
  onCommit(listener: (event: CommitEvent) => void): () => void;
  close(): Promise<void>;
}
